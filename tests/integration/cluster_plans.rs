//! One plan per worker group, on a real broker: the plan the group runs is
//! recorded in Kafka only while the group has no member; a worker started
//! with another spec (another key function, another `max_parallelism`)
//! while others run is refused, naming what differs and the way out, and
//! the running workers' output stays exact; stopping every worker and
//! starting them with the new spec switches over at their final
//! checkpoints, exactly.
//!
//! A child of [`super`] (the cluster tests), whose workers and specs it
//! uses.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use weir_host::cluster::admission::{self, AdmissionError};
use weir_host::cluster::fingerprint::{self, Fingerprint};
use weir_host::cluster::{plan, ClusterPlan, PlanError};
use weir_host::connectors::kafka::KafkaSourceConfig;
use weir_host::specification::PipelineSpec;

use super::{
    one_at_a_time, orders_and_spec, reference, tail, Cluster, Job, Prepared, Worker, CUSTOMERS,
    PARTITIONS,
};
use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::s3::TestS3;
use crate::support::*;

/// `spec` with its line `key: …` naming `wasm` instead, written beside it
/// as `<name>.yaml`.
fn with_key_function(spec: &Path, wasm: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(spec).unwrap();
    let changed: Vec<String> = text
        .lines()
        .map(|line| match line.starts_with("key: ") {
            true => format!("key: {{ wasm: {:?} }}", wasm.display().to_string()),
            false => line.to_string(),
        })
        .collect();
    assert_ne!(changed.join("\n"), text.trim_end(), "the spec has a key function");
    let path = spec.with_file_name(format!("{name}.yaml"));
    std::fs::write(&path, changed.join("\n") + "\n").unwrap();
    path
}

/// `spec` with `max_parallelism: <n>`, written beside it as `<name>.yaml`.
fn with_max_parallelism(spec: &Path, n: u16, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(spec).unwrap();
    let path = spec.with_file_name(format!("{name}.yaml"));
    std::fs::write(&path, format!("max_parallelism: {n}\n{text}")).unwrap();
    path
}

/// The revenue function with a custom section appended: another file
/// digest, the same code (the same keys, the same state).
fn revenue_in_another_build(dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(function("revenue")).unwrap();
    // Custom section (id 0), 6 bytes: the name "weir" (length 4), one byte.
    bytes.extend_from_slice(&[0, 6, 4, b'w', b'e', b'i', b'r', 1]);
    let path = dir.join("revenue-rebuilt.wasm");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Start worker `id` on `spec`, which must be refused: it exits non-zero
/// within 90 s, without joining the group; its log.
fn refused(cluster: &mut Cluster, spec: &Path, id: &str) -> String {
    let mut worker = Worker::start(spec, &cluster.dir, id, &cluster.env);
    worker.gone = true;
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = worker.child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let log = tail(&worker.log, 40);
            cluster.workers.push(worker);
            panic!("worker {id} of another spec still runs after 90 s; its log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = tail(&worker.log, 40);
    cluster.workers.push(worker);
    assert!(!status.success(), "worker {id} of another spec exits non-zero: {status}; {log}");
    log
}

#[test]
fn a_worker_with_another_spec_is_refused_and_a_full_restart_switches_exactly() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let Prepared { dir, orders, out, spec } = orders_and_spec(&kafka, &s3, "plans", Job::Revenue);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("w1");
    cluster.wait_for_output(&kafka, &out, 600, Duration::from_secs(120));

    // Another key function (same code, another build) and another number
    // of key groups: both refused while w1 runs, each naming what differs
    // and the way out.
    let rebuilt = revenue_in_another_build(dir.path());
    let new_key = with_key_function(&spec, &rebuilt, "new-key");
    let log = refused(&mut cluster, &new_key, "w2");
    let said = log.lines().find(|line| line.contains("differs from plan")).unwrap_or_default();
    println!("refused: {said}");
    assert!(log.contains("function keyed.key: sha256:"), "names the key function: {log}");
    assert!(log.contains("the group has members (w1 at"), "names the running worker: {log}");
    assert!(
        log.contains("stop every worker of the pipeline")
            && log.contains("then start them all with the new spec"),
        "says the way out: {log}"
    );
    let wider = with_max_parallelism(&spec, 64, "wider");
    let log = refused(&mut cluster, &wider, "w3");
    assert!(
        log.contains("max_parallelism: 64 here, 128 in the group's plan"),
        "names max_parallelism: {log}"
    );

    // w1 went on alone, exactly.
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 601);
    cluster.wait_for_output(&kafka, &out, 660, Duration::from_secs(120));
    let expected = reference(&kafka, dir.path(), Job::Revenue, &orders);
    assert_eq!(total(&expected), 660);
    assert_same(&committed_per_key(&kafka, &out), &expected, "w1 beside refused workers");

    // Every worker stopped (final checkpoints), then started with the new
    // key function: the new plan is recorded and runs on from those
    // checkpoints; the output is still one process's.
    cluster.terminate_all();
    cluster.spec = new_key;
    cluster.add("w4");
    cluster.add("w5");
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 661);
    cluster.wait_for_output(&kafka, &out, 720, Duration::from_secs(180));
    let expected = reference(&kafka, dir.path(), Job::Revenue, &orders);
    assert_same(&committed_per_key(&kafka, &out), &expected, "after the switch to the new spec");
    let logs: String =
        cluster.workers.iter().filter(|w| w.id == "w4").map(|w| tail(&w.log, 400)).collect();
    assert!(logs.contains("plan recorded as the one the group runs"), "w4 recorded it: {logs}");
    cluster.terminate_all();
    println!("plans: 2 workers of other specs refused beside a running one; 1 full restart with a new key function; 720 orders exact");
}

/// The plan of the workers' spec at `spec` (no broker asked: its input
/// has 6 partitions), and its fingerprint.
fn plan_of(spec: &Path) -> (ClusterPlan, Fingerprint) {
    let six = |config: &KafkaSourceConfig| -> Result<Vec<(String, i32)>, PlanError> {
        Ok((0..PARTITIONS).map(|p| (config.topics[0].clone(), p)).collect())
    };
    let planned = plan(&PipelineSpec::load(spec).unwrap(), &six).unwrap();
    let ours = fingerprint::fingerprint(&planned, &fingerprint::file_digest).unwrap();
    (planned, ours)
}

#[test]
fn a_plan_is_recorded_only_while_the_group_has_no_member_and_the_last_record_wins() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let name = unique("cl-record");
    let spec = Job::Revenue.spec(
        dir.path(),
        &kafka.bootstrap(),
        &name,
        "in",
        "out",
        Some("s3://bucket/prefix"),
    );
    let (a, plan_a) = plan_of(&spec);
    let (b, plan_b) = plan_of(&with_max_parallelism(&spec, 64, "wider"));
    assert_ne!(plan_a.digest, plan_b.digest);

    // An empty group: each admission records its plan; the last one
    // stands, and a member of the other plan finds that out.
    kafka.create_topic(&a.units_topic, 12);
    assert_eq!(admission::read(&a).unwrap(), None);
    admission::admit(&a, &plan_a, "a").unwrap();
    assert_eq!(admission::read(&a).unwrap().unwrap().plan, plan_a);
    admission::check(&a, &plan_a).unwrap();
    admission::admit(&b, &plan_b, "b").unwrap();
    let recorded = admission::read(&a).unwrap().unwrap();
    assert_eq!((recorded.plan.digest.as_str(), recorded.worker.as_str()), (&*plan_b.digest, "b"));
    let replaced = admission::check(&a, &plan_a).unwrap_err();
    assert!(matches!(replaced, AdmissionError::Replaced { .. }), "{replaced}");

    // A member of plan a in the group (as a worker joins it): plan b cannot
    // be recorded, however long it waits; plan a can join.
    admission::admit(&a, &plan_a, "a").unwrap();
    let member: BaseConsumer = kafka
        .client_config()
        .set("group.id", &a.group)
        .set("client.id", "member-a")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap();
    member.subscribe(&[&a.units_topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while member.assignment().map_or(true, |list| list.count() == 0) {
        assert!(Instant::now() < deadline, "the member joined within a minute");
        member.poll(Duration::from_millis(100));
    }
    let started = Instant::now();
    let error = admission::admit(&b, &plan_b, "b").unwrap_err().to_string();
    assert!(started.elapsed() >= Duration::from_secs(9), "waited for the members to go");
    assert!(error.contains("max_parallelism: 64 here, 128 in the group's plan"), "{error}");
    assert!(error.contains("(member-a at"), "names the member: {error}");
    assert_eq!(admission::read(&a).unwrap().unwrap().plan, plan_a, "unchanged");
    admission::admit(&a, &plan_a, "a2").unwrap();
    admission::check(&a, &plan_a).unwrap();

    // The member leaves: the group is empty, and plan b is recorded.
    member.unsubscribe();
    drop(member);
    admission::admit(&b, &plan_b, "b").unwrap();
    assert_eq!(admission::read(&b).unwrap().unwrap().plan, plan_b);
}
