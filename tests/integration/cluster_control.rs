//! A cluster run from its control topic, on a real broker and S3 server:
//! `weir cluster deploy` stores the functions in S3 by SHA-256 and writes
//! the spec to the control topic; workers started with only `--cluster`
//! run it exactly; a new version is switched to at the units' final
//! checkpoints with state kept; stop, start and delete are followed.
//!
//! A child of [`super`] (the cluster tests), whose workers and specs it
//! uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{cluster_flags, one_at_a_time, reference, Cluster, Job, CUSTOMERS, PARTITIONS};
use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::s3::TestS3;
use crate::support::*;

/// `weir cluster <args…>` for cluster `flags`; its stdout (panics, with
/// stderr, if it fails).
fn weir_cluster(flags: &[String], env: &[(&'static str, String)], args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("cluster")
        .args(args)
        .args(flags)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "weir cluster {args:?}: {stdout}{stderr}");
    stdout
}

/// `spec` with `batch_size` set: a new version of the same pipeline
/// (another plan).
fn next_version(spec: &Path, batch_size: u32) -> std::path::PathBuf {
    let text = std::fs::read_to_string(spec).unwrap();
    let path = spec.with_file_name(format!("v{batch_size}.yaml"));
    std::fs::write(&path, format!("batch_size: {batch_size}\n{text}")).unwrap();
    path
}

/// What [`deployed_cluster`] set up.
struct Deployed {
    dir: tempfile::TempDir,
    bucket: String,
    orders: String,
    out: String,
    name: String,
    spec: PathBuf,
    flags: Vec<String>,
    env: Vec<(&'static str, String)>,
    expected: BTreeMap<u64, Vec<String>>,
    cluster: Cluster,
    units: BTreeSet<String>,
}

/// A cluster named after `what`: topics, the reference over `total`
/// orders, the revenue spec deployed as version 1 with 600 orders in its
/// input, and workers w1 and w2 given only the cluster, running every unit.
fn deployed_cluster(kafka: &TestKafka, s3: &TestS3, what: &str, total: u64) -> Deployed {
    let bucket = s3.create_bucket(&format!("weir-cluster-{what}"));
    let dir = tempfile::tempdir().unwrap();
    let (all, orders, out) = (
        unique(&format!("{what}-all")),
        unique(&format!("{what}-orders")),
        unique(&format!("{what}-out")),
    );
    for topic in [&all, &orders] {
        kafka.create_topic(topic, PARTITIONS);
    }
    kafka.create_topic(&out, 1);
    produce_orders(kafka, &all, PARTITIONS, total, CUSTOMERS, 1);
    let expected = reference(kafka, dir.path(), Job::Revenue, &all);
    let name = unique(what);
    let storage = format!("s3://{bucket}/{name}");
    let spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let flags = cluster_flags(what, kafka, &bucket);
    let env = s3.env();
    let said = weir_cluster(&flags, &env, &["deploy", spec.to_str().unwrap()]);
    assert!(said.contains("version 1"), "{said}");
    produce_orders(kafka, &orders, PARTITIONS, 600, CUSTOMERS, 1);
    let mut cluster = Cluster::new(dir.path(), Path::new(""), s3);
    cluster.fleet = Some(flags.clone());
    cluster.add("w1");
    cluster.add("w2");
    let units = Job::Revenue.units(&name);
    cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(120));
    cluster.wait_for_output(kafka, &out, 600, Duration::from_secs(180));
    assert_prefix(&committed_per_key(kafka, &out), &expected, "version 1 on two workers");
    Deployed { dir, bucket, orders, out, name, spec, flags, env, expected, cluster, units }
}

#[test]
fn workers_run_what_the_control_topic_deploys_and_follow_its_versions() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let Deployed {
        dir: _dir,
        bucket,
        orders,
        out,
        name,
        spec,
        flags,
        env,
        expected,
        mut cluster,
        units,
    } = deployed_cluster(&kafka, &s3, "ctl", 720);
    let keys = s3.keys(&bucket, "cluster/functions/");
    assert_eq!(keys.len(), 1, "the revenue function stored once by content: {keys:?}");

    // The cluster's status, from any machine: each unit on one worker.
    let owners = cluster.wait("every unit in the status topic", Duration::from_secs(60), |_| {
        let text = weir_cluster(&flags, &env, &["status", "--json"]);
        let reports: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut owners = std::collections::BTreeMap::new();
        for (worker, report) in reports.as_object().into_iter().flatten() {
            for pipeline in report["status"]["pipelines"].as_array().into_iter().flatten() {
                for unit in pipeline["units"].as_array().into_iter().flatten() {
                    let name = unit["unit"].as_str().unwrap_or_default().to_string();
                    assert!(owners.insert(name, worker.clone()).is_none(), "{text}");
                }
            }
        }
        (owners.len() == units.len()).then_some(owners)
    });
    let table = weir_cluster(&flags, &env, &["status"]);
    assert!(table.contains("2 worker(s), 12 unit(s) running"), "{table}");

    // Version 2 (another plan): every unit stops with a final checkpoint,
    // then the new plan restores them; the totals go on from there.
    let v2 = next_version(&spec, 50);
    let said = weir_cluster(&flags, &env, &["deploy", v2.to_str().unwrap()]);
    assert!(said.contains("version 2"), "{said}");
    cluster.wait_for_units(&units, false, &units, Duration::from_secs(180));
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 601);
    cluster.wait_for_output(&kafka, &out, 660, Duration::from_secs(180));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "after the switch to version 2");

    // Stop: no unit runs; start: they run again, from their checkpoints.
    weir_cluster(&flags, &env, &["stop", &name]);
    cluster.wait("every unit to stop", Duration::from_secs(120), |c| {
        c.alive().iter().all(|w| w.units().is_empty()).then_some(())
    });
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 661);
    weir_cluster(&flags, &env, &["start", &name]);
    cluster.wait_for_units(&units, false, &units, Duration::from_secs(180));
    cluster.wait_for_output(&kafka, &out, 720, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "after stop and start");

    let listed = weir_cluster(&flags, &env, &["list"]);
    assert!(listed.contains(&name) && listed.contains("running"), "{listed}");
    weir_cluster(&flags, &env, &["delete", &name]);
    cluster.wait("every unit to stop after the delete", Duration::from_secs(120), |c| {
        c.alive().iter().all(|w| w.units().is_empty()).then_some(())
    });
    println!(
        "control topic: 2 workers ran version 1 (600 orders; status topic: {} units, each on one worker), switched to version 2 (660), stopped, started (720 exact), deleted",
        owners.len()
    );
    cluster.terminate_all();
}

#[test]
fn a_worker_killed_during_a_switch_leaves_one_version_running_and_the_output_exact() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let Deployed { dir: _dir, orders, out, spec, flags, env, expected, mut cluster, units, .. } =
        deployed_cluster(&kafka, &s3, "sw", 660);

    // Version 2, and w2 killed while the workers switch to it.
    let v2 = next_version(&spec, 50);
    weir_cluster(&flags, &env, &["deploy", v2.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(500));
    cluster.kill("w2");
    cluster.add("w3");
    let assignment = cluster.wait_for_units(&units, false, &units, Duration::from_secs(240));
    // Every worker runs version 2 only.
    for worker in cluster.alive() {
        let status = worker.status().unwrap_or_default();
        for pipeline in status["pipelines"].as_array().into_iter().flatten() {
            assert_eq!(pipeline["version"], 2, "{}: {status}", worker.id);
        }
    }
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 601);
    cluster.wait_for_output(&kafka, &out, 660, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "after a kill during the switch");
    println!(
        "switch with a kill: w2 killed 0.5 s after version 2 was deployed; units then on {:?}; 660 results exact",
        assignment.iter().map(|(w, u)| (w.clone(), u.len())).collect::<Vec<_>>()
    );
    cluster.terminate_all();
}
