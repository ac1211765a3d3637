//! A cluster served over HTTP, on a real broker and S3 server: two
//! `weir serve --cluster` servers and three `weir worker --cluster`
//! workers. A function uploaded to one server is deployed through the
//! other; every unit runs on one worker and both servers report it; a new
//! function version is rolled out with state kept; stop and start; delete.
//!
//! A child of [`super`] (the cluster tests), whose workers and specs it
//! uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::{cluster_flags, one_at_a_time, reference, Cluster, Job, CUSTOMERS, PARTITIONS};
use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::s3::TestS3;
use crate::support::*;

/// `bytes` with a custom section appended: another component (another
/// digest, so another version) that behaves the same.
fn with_custom_section(bytes: &[u8], note: &str) -> Vec<u8> {
    let name = b"weir-test-note";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(note.as_bytes());
    assert!(section.len() < 128, "one-byte LEB128 size");
    let mut out = bytes.to_vec();
    out.push(0); // a custom section
    out.push(section.len() as u8);
    out.extend_from_slice(&section);
    out
}

/// The pipeline's status from `server` once `done` holds for it.
fn status_when(server: &Server, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/v1/pipelines/{name}");
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    loop {
        let (code, body) = server.call("GET", &path, None, b"");
        if code == 200 && done(&body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited for {what}; last answer {code}: {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Every unit of `units` running, each once, at `version`.
fn all_running_at(status: &Value, units: &BTreeSet<String>, version: u64) -> bool {
    let reported = status["units"].as_array().cloned().unwrap_or_default();
    let running: Vec<&str> = reported
        .iter()
        .filter(|u| u["state"] == "running" && u["version"] == version)
        .filter_map(|u| u["unit"].as_str())
        .collect();
    let distinct: BTreeSet<String> = running.iter().map(|u| u.to_string()).collect();
    running.len() == units.len() && &distinct == units && reported.len() == units.len()
}

/// The revenue job's spec `wasm_spec` as a tenant deploys it: its text
/// with the stored function `revenue` instead of the file.
fn stored_function_spec(wasm_spec: &Path) -> (String, String) {
    let text = std::fs::read_to_string(wasm_spec).unwrap();
    let wasm_path = format!("{:?}", function("revenue"));
    let spec = text.replace(&format!("{{ wasm: {wasm_path} }}"), "{ function: revenue }");
    assert!(spec.contains("function: revenue") && !spec.contains("wasm:"), "{spec}");
    (text, spec)
}

#[test]
fn two_servers_upload_deploy_upgrade_stop_and_delete_on_three_workers() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-serve");
    let dir = tempfile::tempdir().unwrap();
    let (all, orders, out) = (unique("srv-all"), unique("srv-orders"), unique("srv-out"));
    for topic in [&all, &orders] {
        kafka.create_topic(topic, PARTITIONS);
    }
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &all, PARTITIONS, 720, CUSTOMERS, 1);
    let expected = reference(&kafka, dir.path(), Job::Revenue, &all);
    let name = unique("srv");
    let storage = format!("s3://{bucket}/{name}");
    let wasm_spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let revenue = std::fs::read(function("revenue")).unwrap();
    // The same spec over the stored function, as a tenant deploys it.
    let (text, spec) = stored_function_spec(&wasm_spec);

    let mut flags = cluster_flags("srv", &kafka, &bucket);
    flags.extend(["--cluster-token".into(), "cluster-secret".into()]);
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let allow = format!("s3://{bucket}/");
    let server = |n: &str| {
        let mut extra: Vec<&str> = flags.iter().map(String::as_str).collect();
        extra.extend(["--allow-storage", &allow]);
        Server::start_with_env(&dir.path().join(n), &extra, &env)
    };
    let (s1, s2) = (server("s1"), server("s2"));
    let mut cluster = Cluster::new(dir.path(), Path::new(""), &s3);
    cluster.fleet = Some(flags.clone());
    for worker in ["w1", "w2", "w3"] {
        cluster.add(worker);
    }
    let units = Job::Revenue.units(&name);

    // Uploaded to one server, seen by the other: one index, in Kafka.
    let (code, v1) = s1.call("PUT", "/v1/functions/revenue", None, &revenue);
    assert_eq!((code, v1["version"].clone()), (201, json!(1)), "{v1}");
    let (code, listed) = s2.call("GET", "/v1/functions/revenue", None, b"");
    assert_eq!(code, 200, "{listed}");
    assert_eq!(listed["versions"][0]["digest"], v1["digest"], "{listed}");
    // Uploads at once through both servers: one transaction at a time
    // decides, so they make one version.
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let uploads: Vec<_> = [&s1, &s2, &s1, &s2]
            .into_iter()
            .map(|s| scope.spawn(|| s.call("PUT", "/v1/functions/same", None, &revenue).0))
            .collect();
        uploads.into_iter().map(|u| u.join().unwrap()).collect()
    });
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 201), "{statuses:?}");
    let (_, same) = s1.call("GET", "/v1/functions/same", None, b"");
    assert_eq!(same["versions"].as_array().map(Vec::len), Some(1), "{same}");
    assert_eq!(s2.call("DELETE", "/v1/functions/same", None, b"").0, 204);
    let stored = s3.keys(&bucket, "cluster/functions/");
    assert_eq!(stored.len(), 1, "stored once, by content: {stored:?}");

    // A spec naming a file on the server is refused; a stored function is not.
    let (code, refused) = s2.call("POST", "/v1/pipelines", None, text.as_bytes());
    assert_eq!(code, 400, "{refused}");
    assert!(refused.to_string().contains("stored functions"), "{refused}");
    let (code, deployed) = s2.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 201, "{deployed}");
    assert_eq!(deployed["generation"], 1, "{deployed}");
    assert_eq!(deployed["functions"][0]["version"], 1, "{deployed}");
    let (code, again) = s1.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 409, "one name, one pipeline, whichever server: {again}");

    // A tail of the output from now on (the units are still starting):
    // the committed records every unit writes, read from the topic.
    let tail = std::thread::scope(|scope| {
        let tail = scope.spawn(|| {
            s1.call("GET", &format!("/v1/pipelines/{name}/tail?limit=5&rate=1000"), None, b"")
        });
        s1.wait_for("/metrics", None, Duration::from_secs(30), |metrics| {
            metrics.as_str().is_some_and(|m| m.contains("weir_tail_readers{pipeline=\""))
        });
        produce_orders(&kafka, &orders, PARTITIONS, 600, CUSTOMERS, 1);
        tail.join().unwrap()
    });
    assert_eq!(tail.0, 200, "{}", tail.1);
    let events: Vec<Value> = tail
        .1
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).unwrap())
        .collect();
    assert_eq!(events.len(), 5, "{}", tail.1);
    for event in &events {
        let record: Value = serde_json::from_str(event["value"].as_str().unwrap()).unwrap();
        assert!(record["customer_id"].is_u64() && record["total"].is_number(), "{event}");
    }
    cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(180));
    cluster.wait_for_output(&kafka, &out, 600, Duration::from_secs(180));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "version 1 on three workers");
    // Both servers report every unit, each on one worker.
    for server in [&s1, &s2] {
        let status =
            status_when(server, &name, "every unit reported", |s| all_running_at(s, &units, 1));
        let workers: BTreeSet<&str> = status["units"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|u| u["worker"].as_str())
            .collect();
        assert_eq!(workers.len(), 3, "spread over the three workers: {status}");
        assert_eq!(status["state"], "running", "{status}");
    }
    // A key's state, through either server: asked of the worker running
    // the unit that owns the key; the customer's total of the last result.
    let committed = committed_per_key(&kafka, &out);
    for (i, (customer, results)) in committed.iter().take(6).enumerate() {
        let last: Value = serde_json::from_str(results.last().unwrap()).unwrap();
        let cents_expected = cents(&last["total"].to_string());
        let server = if i % 2 == 0 { &s1 } else { &s2 };
        let query = format!("/v1/pipelines/{name}/state?state=total&key={customer}");
        let (code, answer) = server.call("GET", &query, None, b"");
        assert_eq!(code, 200, "{answer}");
        assert_eq!(answer["found"], true, "{answer}");
        assert_eq!(answer["value"].as_i64(), Some(cents_expected), "customer {customer}: {answer}");
        assert!(answer["unit"].as_str().is_some_and(|u| u.contains("keyed")), "{answer}");
        assert!(answer["worker"].as_str().is_some(), "{answer}");
    }
    let (code, absent) =
        s2.call("GET", &format!("/v1/pipelines/{name}/state?state=total&key=nobody"), None, b"");
    assert_eq!((code, absent["found"].clone()), (200, json!(false)), "{absent}");
    // A worker asked directly without the cluster token answers nothing.
    let worker_url = cluster.alive()[0].status().unwrap()["address"].as_str().unwrap().to_string();
    let unit = units.iter().find(|u| u.contains("keyed")).unwrap();
    let direct = format!("{worker_url}/v1/pipelines/{name}/units/{unit}/state?state=total&key=1");
    let refused = reqwest::blocking::get(&direct).unwrap().status().as_u16();
    assert_eq!(refused, 401, "state is data: the worker wants the cluster token");

    // Each unit's checkpoints; the units' numbers on /metrics; ready.
    let (code, listed) = s2.call("GET", &format!("/v1/pipelines/{name}/checkpoints"), None, b"");
    assert_eq!(code, 200, "{listed}");
    let checkpointed: BTreeSet<&str> = listed["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["unit"].as_str())
        .collect();
    assert_eq!(checkpointed.len(), units.len(), "every unit has checkpoints: {listed}");
    let (_, metrics) = s1.call("GET", "/metrics", None, b"");
    let running = metrics.as_str().unwrap().lines().filter(|l| {
        l.starts_with("weir_unit_running{")
            && l.contains(&format!("pipeline=\"{name}\""))
            && l.ends_with(" 1")
    });
    assert_eq!(running.count(), units.len(), "{metrics}");
    assert_eq!(s1.call("GET", "/readyz", None, b"").0, 200);

    // A new function version, rolled out with state kept.
    let v2_bytes = with_custom_section(&revenue, "version two");
    let (code, v2) = s2.call("PUT", "/v1/functions/revenue", None, &v2_bytes);
    assert_eq!((code, v2["version"].clone()), (201, json!(2)), "{v2}");
    let upgrade = json!({ "functions": { "revenue": "latest" } }).to_string();
    let (code, upgraded) =
        s1.call("POST", &format!("/v1/pipelines/{name}/upgrade"), None, upgrade.as_bytes());
    assert_eq!(code, 200, "{upgraded}");
    assert_eq!(upgraded["generation"], 2, "{upgraded}");
    assert_eq!(upgraded["functions"][0]["version"], 2, "{upgraded}");
    status_when(&s2, &name, "every unit at version 2", |s| all_running_at(s, &units, 2));
    cluster.wait_for_units(&units, false, &units, Duration::from_secs(180));
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 601);
    cluster.wait_for_output(&kafka, &out, 660, Duration::from_secs(180));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "after the upgrade to v2");

    // Stop through one server: no unit runs; start (an upgrade with no
    // change) through the other: they run again from their checkpoints.
    let (code, stopped) = s2.call("POST", &format!("/v1/pipelines/{name}/stop"), None, b"");
    assert_eq!(code, 200, "{stopped}");
    let status = status_when(&s1, &name, "the stop", |s| s["state"] == "stopped");
    assert!(status["units"].as_array().is_none_or(Vec::is_empty), "{status}");
    produce_orders(&kafka, &orders, PARTITIONS, 60, CUSTOMERS, 661);
    let (code, started) = s1.call("POST", &format!("/v1/pipelines/{name}/upgrade"), None, b"");
    assert_eq!(code, 200, "{started}");
    status_when(&s2, &name, "every unit at version 4", |s| all_running_at(s, &units, 4));
    cluster.wait_for_output(&kafka, &out, 720, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "after stop and start");

    // A function in use stays; the pipeline deleted, it may go.
    let (code, body) = s1.call("DELETE", "/v1/functions/revenue", None, b"");
    assert_eq!(code, 409, "{body}");
    let (code, body) = s2.call("DELETE", &format!("/v1/pipelines/{name}"), None, b"");
    assert_eq!(code, 204, "{body}");
    cluster.wait("every unit to stop after the delete", Duration::from_secs(120), |c| {
        c.alive().iter().all(|w| w.units().is_empty()).then_some(())
    });
    let (code, body) = s1.call("DELETE", "/v1/functions/revenue", None, b"");
    assert_eq!(code, 204, "{body}");
    let (code, body) = s2.call("GET", "/v1/pipelines", None, b"");
    assert_eq!((code, body["pipelines"].clone()), (200, json!([])), "{body}");
    println!(
        "served cluster: 2 servers, 3 workers, {} units; v1 → 600, upgrade to function v2 → 660, stop/start → 720 exact, deleted",
        units.len()
    );
    cluster.terminate_all();
}

/// `method path` with `body` (of `content_type`) to a server that is to
/// abort while it handles it: an answer would be a failed fault.
fn call_aborting(server: &mut Server, method: &str, path: &str, content_type: &str, body: &[u8]) {
    let client = reqwest::blocking::Client::new();
    let url = format!("{}{path}", server.url());
    let request = client.request(method.parse().unwrap(), url).header("Content-Type", content_type);
    let answer = request.body(body.to_vec()).send();
    assert!(answer.is_err(), "the server answered instead of aborting: {answer:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.is_alive() {
        assert!(std::time::Instant::now() < deadline, "the server did not abort");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_server_killed_in_the_middle_of_a_change_leaves_it_whole_or_absent() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-abort");
    let dir = tempfile::tempdir().unwrap();
    let (orders, out) = (unique("abort-orders"), unique("abort-out"));
    kafka.create_topic(&orders, PARTITIONS);
    kafka.create_topic(&out, 1);
    let name = unique("abort");
    let storage = format!("s3://{bucket}/{name}");
    let wasm_spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let (_, spec) = stored_function_spec(&wasm_spec);
    let revenue = std::fs::read(function("revenue")).unwrap();
    let mut flags = cluster_flags("abort", &kafka, &bucket);
    flags.extend(["--allow-storage".into(), format!("s3://{bucket}/")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s3_env = s3.env();
    let server = |n: &str, fault: Option<&str>| {
        let mut env: Vec<(&str, &str)> = s3_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.extend(fault.map(|f| ("WEIR_FAULT", f)));
        Server::start_with_env(&dir.path().join(n), &flags, &env)
    };

    // An upload killed after storing the component, before recording the
    // version: no version; uploading again makes version 1 of the same blob.
    let mut dying = server("a", Some("function-after-blob:1"));
    call_aborting(&mut dying, "PUT", "/v1/functions/revenue", "application/wasm", &revenue);
    let fresh = server("b", None);
    let (code, none) = fresh.call("GET", "/v1/functions/revenue", None, b"");
    assert_eq!(code, 404, "no version recorded: {none}");
    let (code, v1) = fresh.call("PUT", "/v1/functions/revenue", None, &revenue);
    assert_eq!((code, v1["version"].clone()), (201, json!(1)), "{v1}");
    assert_eq!(s3.keys(&bucket, "cluster/functions/").len(), 1, "the same blob, once");
    drop(fresh);

    // A deploy killed with its record sent but not committed: never seen;
    // the next writer aborts it, and the deploy can be made again.
    let mut dying = server("c", Some("control-before-commit:1"));
    call_aborting(&mut dying, "POST", "/v1/pipelines", "application/yaml", spec.as_bytes());
    let fresh = server("d", None);
    let (code, listed) = fresh.call("GET", "/v1/pipelines", None, b"");
    assert_eq!((code, listed["pipelines"].clone()), (200, json!([])), "{listed}");
    drop(fresh);

    // Killed after the commit: made, though the client saw no answer.
    let mut dying = server("e", Some("control-after-commit:1"));
    call_aborting(&mut dying, "POST", "/v1/pipelines", "application/yaml", spec.as_bytes());
    let fresh = server("f", None);
    let (code, status) = fresh.call("GET", &format!("/v1/pipelines/{name}"), None, b"");
    assert_eq!((code, status["generation"].clone()), (200, json!(1)), "{status}");
    let (code, again) = fresh.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 409, "{again}");
    drop(fresh);

    // A delete killed before its commit: the pipeline is still there.
    let mut dying = server("g", Some("control-before-commit:1"));
    call_aborting(&mut dying, "DELETE", &format!("/v1/pipelines/{name}"), "text/plain", b"");
    let fresh = server("h", None);
    let (code, status) = fresh.call("GET", &format!("/v1/pipelines/{name}"), None, b"");
    assert_eq!((code, status["generation"].clone()), (200, json!(1)), "{status}");
    let (code, _) = fresh.call("DELETE", &format!("/v1/pipelines/{name}"), None, b"");
    assert_eq!(code, 204);
    let (code, gone) = fresh.call("GET", &format!("/v1/pipelines/{name}"), None, b"");
    assert_eq!(code, 404, "{gone}");
    println!("control plane aborts: upload after its blob, deploy before and after its commit, delete before its commit — each whole or absent");
}

/// The units of the revenue job `name` whose stage runs `tasks` tasks in
/// the layout of version `layout` (0: the first).
fn revenue_units(name: &str, tasks: u16, layout: u64) -> BTreeSet<String> {
    let ingest = (0..PARTITIONS).map(|p| format!("{name}-source-{p}"));
    let suffix = if layout == 0 { String::new() } else { format!("-r{layout}") };
    let tasks = (0..tasks).map(|t| format!("{name}-keyed-{t}{suffix}"));
    ingest.chain(tasks).collect()
}

/// `weir serve` with `flags` in `dir`, reaching `s3`, with `WEIR_FAULT`
/// set to `fault` if given.
fn serve(dir: &Path, flags: &[String], s3: &TestS3, fault: Option<&str>) -> Server {
    let env = s3.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(fault.map(|f| ("WEIR_FAULT", f)));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start_with_env(dir, &flags, &env)
}

/// A served cluster running the revenue job on `orders` into `out`, with
/// the function uploaded and the pipeline `name` deployed (six tasks).
struct Served {
    kafka: TestKafka,
    s3: TestS3,
    bucket: String,
    dir: tempfile::TempDir,
    /// The server's flags (another server of the cluster takes them too).
    flags: Vec<String>,
    server: Server,
    cluster: Cluster,
    name: String,
    orders: String,
    out: String,
    /// What one process computes over all the orders the test will send.
    expected: BTreeMap<u64, Vec<String>>,
}

impl Served {
    /// One server and `workers` (each with the `WEIR_FAULT` it is given)
    /// of a cluster named after `what`; `total` orders will be sent.
    fn start(what: &str, total: u64, workers: &[(&str, Option<&str>)]) -> Served {
        let (kafka, s3) = (TestKafka::start(), TestS3::start());
        let bucket = s3.create_bucket(&format!("weir-cluster-{what}"));
        let dir = tempfile::tempdir().unwrap();
        let (all, orders, out) = (unique("all"), unique(&format!("{what}-in")), unique("out"));
        for topic in [&all, &orders] {
            kafka.create_topic(topic, PARTITIONS);
        }
        kafka.create_topic(&out, 1);
        produce_orders(&kafka, &all, PARTITIONS, total, CUSTOMERS, 1);
        let expected = reference(&kafka, dir.path(), Job::Revenue, &all);
        let mut flags = cluster_flags(what, &kafka, &bucket);
        let fleet = flags.clone();
        flags.extend(["--allow-storage".into(), format!("s3://{bucket}/")]);
        let server = serve(&dir.path().join("s1"), &flags, &s3, None);
        let mut cluster = Cluster::new(dir.path(), Path::new(""), &s3);
        cluster.fleet = Some(fleet);
        for (worker, fault) in workers {
            match fault {
                Some(fault) => cluster.add_with(worker, &[("WEIR_FAULT", fault.to_string())]),
                None => cluster.add(worker),
            }
        }
        let revenue = std::fs::read(function("revenue")).unwrap();
        assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &revenue).0, 201);
        let name = unique(what);
        let mut served =
            Served { kafka, s3, bucket, dir, flags, server, cluster, name, orders, out, expected };
        let spec = served.spec(&served.name, &served.out);
        let (code, deployed) = served.server.call("POST", "/v1/pipelines", None, spec.as_bytes());
        assert_eq!(code, 201, "{deployed}");
        let (server, name) = (&served.server, &served.name);
        status_when(server, name, "six tasks running", |s| {
            all_running_at(s, &revenue_units(name, 6, 0), 1)
        });
        served.cluster.check_alive();
        served
    }

    /// The revenue spec of pipeline `name` over the stored function,
    /// reading the orders and writing `out`.
    fn spec(&self, name: &str, out: &str) -> String {
        let storage = format!("s3://{}/{name}", self.bucket);
        let bootstrap = self.kafka.bootstrap();
        let wasm_spec =
            Job::Revenue.spec(self.dir.path(), &bootstrap, name, &self.orders, out, Some(&storage));
        stored_function_spec(&wasm_spec).1
    }

    /// Send orders `first..first + count`, and wait until the output holds
    /// `then` results.
    fn feed(&mut self, count: u64, first: u64, then: usize) {
        produce_orders(&self.kafka, &self.orders, PARTITIONS, count, CUSTOMERS, first);
        self.cluster.wait_for_output(&self.kafka, &self.out, then, Duration::from_secs(240));
    }

    /// `POST path` with `body` to the server: its answer, asserting `code`.
    fn post(&self, path: &str, body: &Value, code: u16) -> Value {
        let (got, answer) = self.server.call("POST", path, None, body.to_string().as_bytes());
        assert_eq!(got, code, "{path}: {answer}");
        answer
    }

    /// Upgrade the pipeline to `tasks` tasks, orders `first..first +
    /// count` sent meanwhile (in flight in the exchange at the switch).
    fn rescale_while_feeding(&self, tasks: u16, count: u64, first: u64) {
        std::thread::scope(|scope| {
            let (kafka, orders) = (&self.kafka, &self.orders);
            let feeding = scope
                .spawn(move || produce_orders(kafka, orders, PARTITIONS, count, CUSTOMERS, first));
            let upgrade = format!("/v1/pipelines/{}/upgrade", self.name);
            self.post(&upgrade, &json!({ "parallelism": tasks }), 200);
            feeding.join().unwrap();
        });
    }

    /// Wait until the server reports `units` running at `version`.
    fn running(&self, units: &BTreeSet<String>, version: u64) {
        status_when(&self.server, &self.name, "the units of the version", |s| {
            all_running_at(s, units, version)
        });
    }
}

#[test]
fn a_pipeline_rescaled_six_three_eight_keeps_every_result_exact_through_a_kill() {
    let _serial = one_at_a_time();
    let mut served = Served::start("rescale", 900, &[("w1", None), ("w2", None), ("w3", None)]);
    served.feed(300, 1, 300);

    // Three: orders keep coming while the old layout drains, so records
    // are in flight in its exchange topic at the switch.
    served.rescale_while_feeding(3, 300, 301);
    served.running(&revenue_units(&served.name, 3, 2), 2);
    served.cluster.wait_for_output(&served.kafka, &served.out, 600, Duration::from_secs(180));
    let committed = committed_per_key(&served.kafka, &served.out);
    assert_prefix(&committed, &served.expected, "six tasks, then three");
    // The drained layout's exchange topic is gone; the new one is there.
    let (old, new) =
        (format!("weir-{}-keyed-0", served.name), format!("weir-{}-keyed-0-r2", served.name));
    served.cluster.wait("the drained exchange topic deleted", Duration::from_secs(60), |_| {
        (!served.kafka.has_topic(&old)).then_some(())
    });
    assert!(served.kafka.has_topic(&new), "{new}");

    // Eight, with a worker killed while the three drain: its units move,
    // and are drained by the others.
    served.rescale_while_feeding(8, 0, 601);
    served.cluster.wait("a unit of the three draining or drained", Duration::from_secs(120), |c| {
        c.alive()
            .iter()
            .flat_map(|w| w.units())
            .any(|u| u["state"] == "drained" || u["state"] == "draining")
            .then_some(())
    });
    served.cluster.kill("w2");
    produce_orders(&served.kafka, &served.orders, PARTITIONS, 300, CUSTOMERS, 601);
    served.running(&revenue_units(&served.name, 8, 3), 3);
    served.cluster.wait_for_output(&served.kafka, &served.out, 900, Duration::from_secs(240));
    let committed = committed_per_key(&served.kafka, &served.out);
    assert_same(&committed, &served.expected, "six, three, then eight tasks");
    println!("rescaled 6 → 3 → 8 on three workers (one killed during the second drain): 900 results exact");
    served.cluster.terminate_all();
}

#[test]
fn a_cluster_savepoint_restores_on_one_machine_and_a_one_machine_checkpoint_deploys_to_a_cluster() {
    let _serial = one_at_a_time();
    let mut served = Served::start("savepoint", 1200, &[("w1", None), ("w2", None)]);
    served.feed(300, 1, 300);
    // The pipeline a one-machine checkpoint is deployed to at the end.
    let (back, back_out) = (unique("sp-back"), unique("sp-back-out"));
    let back_spec = served.spec(&back, &back_out);
    // A server killed while it puts the drained units' savepoints together:
    // the pipeline runs on in its new layout, and no savepoint is there.
    let mut dying = serve(
        &served.dir.path().join("s2"),
        &served.flags,
        &served.s3,
        Some("savepoint-before-metadata:1"),
    );
    let path = format!("/v1/pipelines/{}/savepoints", served.name);
    call_aborting(&mut dying, "POST", &path, "application/json", b"");
    served.running(&revenue_units(&served.name, 6, 2), 2);
    let partial = served.s3.keys(&served.bucket, &format!("{0}/{0}/savepoints/", served.name));
    assert!(partial.iter().all(|k| !k.ends_with("_metadata")), "{partial:?}");
    let Served { kafka, s3, bucket, dir, server, cluster, name, orders, out, expected, .. } =
        &mut served;
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // A savepoint: the pipeline goes on (its units drained and started
    // again in a layout of their own), nothing lost or doubled.
    let (code, taken) = server.call("POST", &format!("/v1/pipelines/{name}/savepoints"), None, b"");
    assert_eq!(code, 201, "{taken}");
    let first = taken["location"].as_str().unwrap().to_string();
    assert!(first.starts_with(&format!("s3://{bucket}/{name}/{name}/savepoints/sp-")), "{taken}");
    status_when(server, name, "running again", |s| {
        all_running_at(s, &revenue_units(name, 6, 3), 3)
    });
    produce_orders(kafka, orders, PARTITIONS, 300, CUSTOMERS, 301);
    cluster.wait_for_output(kafka, out, 600, Duration::from_secs(180));
    assert_prefix(&committed_per_key(kafka, out), expected, "across the savepoint");

    // Another savepoint, and a stop with one at once: the layout the first
    // starts may not have run yet when the stop drains it — its tasks are
    // then seeded from the layout before, and drained.
    let (code, taken) = server.call("POST", &format!("/v1/pipelines/{name}/savepoints"), None, b"");
    assert_eq!(code, 201, "{taken}");
    // Stopped with a savepoint; more orders come after the stop.
    let body = json!({ "savepoint": true }).to_string();
    let (code, stopped) =
        server.call("POST", &format!("/v1/pipelines/{name}/stop"), None, body.as_bytes());
    assert_eq!(code, 200, "{stopped}");
    let location = stopped["location"].as_str().unwrap().to_string();
    assert_ne!(location, first, "{stopped}");
    status_when(server, name, "stopped", |s| s["state"] == "stopped");
    produce_orders(kafka, orders, PARTITIONS, 300, CUSTOMERS, 601);

    // One machine restores it: its results are those after the stop. It
    // checkpoints to S3 too, for the way back.
    let rest = unique("sp-rest");
    kafka.create_topic(&rest, 1);
    let local = unique("sp-local");
    let local_spec = Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &local, orders, &rest, None);
    let text = std::fs::read_to_string(&local_spec).unwrap();
    let local_storage = format!("s3://{bucket}/one-machine");
    let text = text.replace(
        "{ interval: 150ms, timeout: 1m }",
        &format!("{{ interval: 150ms, timeout: 1m, storage: {local_storage:?} }}"),
    );
    std::fs::write(&local_spec, text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", local_spec.to_str().unwrap(), "--data-dir"])
        .arg(dir.path().join("one-machine"))
        .args(["--restore", &location])
        .envs(env.iter().copied())
        .env_remove("WEIR_DATA_DIR")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let combined = |topics: &[&str]| {
        let mut combined = BTreeMap::<u64, Vec<String>>::new();
        for topic in topics {
            for (customer, results) in committed_per_key(kafka, topic) {
                combined.entry(customer).or_default().extend(results);
            }
        }
        combined
    };
    let after_stop = "the cluster until its stop, then one machine from its savepoint";
    assert_prefix(&combined(&[out, &rest]), expected, after_stop);
    assert_eq!(
        kafka.read_committed(&rest).len(),
        300,
        "one machine wrote what came after the stop"
    );

    // The way back: a new cluster pipeline deployed from the one-machine
    // run's last checkpoint (six subtasks of RocksDB state, the input's
    // positions) goes on from there.
    let keys = s3.keys(bucket, "one-machine/");
    let newest = keys
        .iter()
        .filter_map(|k| k.strip_suffix("/_metadata")?.rsplit_once("/chk-"))
        .filter_map(|(_, id)| id.parse::<u64>().ok())
        .max()
        .unwrap_or_else(|| panic!("a checkpoint of the one-machine run: {keys:?}"));
    let checkpoint = format!("{local_storage}/{local}/chk-{newest}");
    produce_orders(kafka, orders, PARTITIONS, 300, CUSTOMERS, 901);
    kafka.create_topic(&back_out, 1);
    let path = format!("/v1/pipelines?restore={checkpoint}");
    let (code, deployed) = server.call("POST", &path, None, back_spec.as_bytes());
    assert_eq!(code, 201, "{deployed}");
    cluster.wait_for_output(kafka, &back_out, 300, Duration::from_secs(180));
    let all_three = "the cluster, one machine from its savepoint, a cluster from its checkpoint";
    assert_same(&combined(&[out, &rest, &back_out]), expected, all_three);
    println!("cluster savepoint {first} (running on), stop with savepoint {location}, restored on one machine, whose checkpoint {checkpoint} deploys to a cluster: 1200 results exact");
    cluster.terminate_all();
}

/// Wait until worker `id` has aborted on its own at fault `point` (its
/// log says so), and count it gone.
fn fault_landed(cluster: &mut Cluster, id: &str, point: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let worker = cluster.workers.iter_mut().find(|w| w.id == id).unwrap();
    while worker.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "worker {id} never reached fault {point}");
        std::thread::sleep(Duration::from_millis(200));
    }
    worker.gone = true;
    let log = std::fs::read_to_string(&worker.log).unwrap();
    assert!(log.contains(&format!("fault injected at {point}")), "worker {id}'s log:\n{log}");
}

#[test]
fn workers_dying_in_a_drained_stop_before_and_after_its_commit_lose_and_double_nothing() {
    let _serial = one_at_a_time();
    // w1 dies with its first drained stop's records sent, uncommitted (its
    // transaction aborted by the next owner); w2 right after its first
    // drained stop committed (the unit must never run again).
    let workers =
        [("w1", Some("drain-after-ends:1")), ("w2", Some("unit-drained:1")), ("w3", None)];
    let mut served = Served::start("drain-faults", 600, &workers);
    served.feed(300, 1, 300);
    served.rescale_while_feeding(4, 300, 301);
    fault_landed(&mut served.cluster, "w1", "drain-after-ends");
    fault_landed(&mut served.cluster, "w2", "unit-drained");
    served.running(&revenue_units(&served.name, 4, 2), 2);
    served.cluster.wait_for_output(&served.kafka, &served.out, 600, Duration::from_secs(240));
    let committed = committed_per_key(&served.kafka, &served.out);
    assert_same(&committed, &served.expected, "6 → 4 through two dying drains");
    println!("rescaled 6 → 4 while one worker died in a drained stop before its commit and another after: 600 results exact");
    served.cluster.terminate_all();
}
