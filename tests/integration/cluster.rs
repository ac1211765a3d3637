//! Cluster mode on a real broker and a real S3-compatible server: several
//! `weir worker` processes share one pipeline (units assigned by the
//! pipeline's consumer group, records exchanged through repartition
//! topics, state in `s3://` checkpoints). Their committed output equals
//! one process's — for the revenue, the windowed revenue and the two-stage
//! region top-3 pipelines — and stays a prefix of it, then equal to it,
//! while workers are killed with `kill -9`, added and stopped with SIGTERM;
//! the units of a dead worker move to the others with their state. An
//! input already partitioned by key is read by the tasks themselves, and
//! survives a kill the same way. A worker cut off from its broker answers
//! `/readyz` 503 "lost its group" while `/healthz` stays 200, and is ready
//! again once it rejoined.
//!
//! Long tests: each starts two to four workers and takes 20 s to a minute
//! (about two and a half minutes for all, which run one at a time).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_host::cluster::{plan, PlanError};
use weir_host::connectors::kafka::KafkaSourceConfig;
use weir_host::specification::PipelineSpec;

use crate::support::kafka::{committed_per_key, produce_orders, unique, Record, TestKafka};
use crate::support::s3::TestS3;
use crate::support::*;

#[path = "cluster_control.rs"]
mod control;
#[path = "cluster_plans.rs"]
mod plans;
#[path = "cluster_serve.rs"]
mod serve;

/// Partitions of every input topic, and the parallelism of every stage.
const PARTITIONS: i32 = 6;

/// Customers of the generated orders.
const CUSTOMERS: u64 = 50;

/// Event time of the orders that close every window: ten days after the
/// first order (2026-01-15T10:00:00Z), so their own windows never close.
const FAR_FUTURE_MS: i64 = 1_768_471_200_000 + 10 * 24 * 3600 * 1000;

/// [`FAR_FUTURE_MS`] as the region orders write it.
const FAR_FUTURE_TEXT: &str = "2026-01-25T10:00:00Z";

/// The cluster tests run one at a time: each starts several workers, and
/// on a small machine they would otherwise starve each other's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The flags of a cluster named after `what` on `kafka`, with its
/// functions in `bucket`.
fn cluster_flags(what: &str, kafka: &TestKafka, bucket: &str) -> Vec<String> {
    vec![
        "--cluster".into(),
        unique(what).replace('_', "-"),
        "--bootstrap-servers".into(),
        kafka.bootstrap(),
        "--storage".into(),
        format!("s3://{bucket}/cluster"),
    ]
}

/// Hold [`ONE_AT_A_TIME`] for the rest of the test.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a pipeline of these tests computes.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// `functions/revenue`: each customer's running total after each order.
    Revenue,
    /// [`Job::Revenue`] on an input the workers take as partitioned by the
    /// key (`cluster: { input_partitioned_by_key: true }`): task `t` reads
    /// input partition `t` itself.
    RevenueByPartition,
    /// `functions/windowed-revenue`: revenue per customer per event-time
    /// minute (tumbling windows, 5 s out of orderness).
    WindowedRevenue,
    /// [`Job::WindowedRevenue`] with `on_bad_timestamp: drop` on the
    /// source, for inputs with poison records.
    WindowedRevenueDropping,
    /// `functions/region-top3`'s graph: running revenue per customer
    /// (`customer-revenue`), re-keyed by region, the top 3 per minute.
    RegionTop3,
}

impl Job {
    /// The units of pipeline `name` running this job: ingest units, then
    /// the tasks of each keyed stage (a line spec's stage is `keyed`).
    fn units(self, name: &str) -> BTreeSet<String> {
        let roots: &[&str] = match self {
            Job::Revenue | Job::WindowedRevenue | Job::WindowedRevenueDropping => {
                &["source", "keyed"]
            }
            Job::RevenueByPartition => &["keyed"],
            Job::RegionTop3 => &["orders", "revenue", "top3"],
        };
        roots
            .iter()
            .flat_map(|root| (0..PARTITIONS).map(move |i| format!("{name}-{root}-{i}")))
            .collect()
    }

    /// Write the spec of pipeline `name` reading topic `input` of the broker
    /// at `bootstrap` and writing `output` exactly-once. With `storage`, the spec the workers run:
    /// unbounded, checkpoints every second into `storage`. Without, the
    /// single-process reference: bounded, local checkpoints.
    fn spec(
        self,
        dir: &Path,
        bootstrap: &str,
        name: &str,
        input: &str,
        output: &str,
        storage: Option<&str>,
    ) -> PathBuf {
        let (bounded, checkpoint) = match storage {
            Some(url) => ("", format!("{{ interval: 1s, timeout: 1m, storage: {url:?} }}")),
            None => (", bounded: true", "{ interval: 150ms, timeout: 1m }".to_string()),
        };
        let dropping = match self {
            Job::WindowedRevenueDropping => ", on_bad_timestamp: drop",
            _ => "",
        };
        let source = format!("{{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{input}], timestamp_field: event_time{bounded}{dropping} }}");
        let sink = format!("{{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {output}, delivery: exactly-once, transactional_id_prefix: {name}, transaction_timeout: 5m }}");
        let head = format!("name: {name}\nparallelism: {PARTITIONS}\ncheckpoint: {checkpoint}\n");
        let body = match self {
            Job::Revenue | Job::RevenueByPartition => {
                let wasm = function("revenue");
                format!("source: {source}\nkey: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {sink}\n")
            }
            Job::WindowedRevenue | Job::WindowedRevenueDropping => {
                let wasm = function("windowed-revenue");
                format!(
                    "watermark: {{ max_out_of_orderness: 5s }}\nsource: {source}\n\
                     key: {{ wasm: {wasm:?} }}\nwindow: {{ type: tumbling, size: 1m }}\n\
                     aggregate: {{ wasm: {wasm:?} }}\nsink: {sink}\n"
                )
            }
            Job::RegionTop3 => {
                let (revenue, top3) = (function("customer-revenue"), function("region-top3"));
                format!(
                    "watermark: {{ max_out_of_orderness: 5s }}\n\
                     operators:\n\
                     \x20 orders: {{ source: {source} }}\n\
                     \x20 revenue: {{ inputs: [orders], key: {{ wasm: {revenue:?} }}, process: {{ wasm: {revenue:?} }} }}\n\
                     \x20 top3: {{ inputs: [revenue], key: {{ wasm: {top3:?} }}, window: {{ type: tumbling, size: 1m }}, aggregate: {{ wasm: {top3:?} }} }}\n\
                     \x20 out: {{ inputs: [top3], sink: {sink} }}\n"
                )
            }
        };
        let cluster = match (self, storage) {
            (Job::RevenueByPartition, Some(_)) => "cluster: { input_partitioned_by_key: true }\n",
            _ => "",
        };
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, format!("{head}{cluster}{body}")).unwrap();
        path
    }
}

/// The committed output, per customer, of a single-process `weir run` of
/// `job` over what `input` holds now (fresh topic, fresh data directory).
fn reference(kafka: &TestKafka, dir: &Path, job: Job, input: &str) -> BTreeMap<u64, Vec<String>> {
    let topic = unique("cl-reference");
    kafka.create_topic(&topic, 1);
    let name = unique("cl-ref");
    run_ok(&job.spec(dir, &kafka.bootstrap(), &name, input, &topic, None), &dir.join(&name), &[]);
    committed_per_key(kafka, &topic)
}

/// One order on every partition of `topic`, ten days after the others, of
/// a customer of its own (1000 + partition): each ingest unit's watermark
/// passes every window of the real orders, and no real customer's order
/// sequence changes. `region` writes them as region orders.
fn produce_far_future(kafka: &TestKafka, topic: &str, region: bool) {
    let records: Vec<Record> = (0..PARTITIONS)
        .map(|partition| {
            let customer = 1000 + partition as u64;
            let value = if region {
                format!(r#"{{"order_id":{customer},"customer_id":{customer},"region":"zz","amount":1.00,"event_time":"{FAR_FUTURE_TEXT}"}}"#)
            } else {
                format!(r#"{{"order_id":{customer},"customer_id":{customer},"amount":1.00,"event_time":{FAR_FUTURE_MS}}}"#)
            };
            (Some(partition), Some(customer.to_string().into_bytes()), value.into_bytes())
        })
        .collect();
    kafka.produce_many(topic, &records);
}

/// The 300 orders of `functions/region-top3/orders-with-region.jsonl`, keyed
/// by customer, each customer's on one partition (customer mod 6), in the
/// file's (event-time) order.
fn produce_region_orders(kafka: &TestKafka, topic: &str) {
    let text =
        std::fs::read_to_string(example_file("region-top3", "orders-with-region.jsonl")).unwrap();
    let records: Vec<Record> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let order: Value = serde_json::from_str(line).unwrap();
            let customer = order["customer_id"].as_u64().unwrap();
            (
                Some((customer % PARTITIONS as u64) as i32),
                Some(customer.to_string().into_bytes()),
                line.as_bytes().to_vec(),
            )
        })
        .collect();
    assert_eq!(records.len(), 300);
    kafka.produce_many(topic, &records);
}

/// What a worker logs unless `$WEIR_LOG` says otherwise: its group
/// membership, units and restores.
const LOG: &str = "warn,weir_host::cluster=info,weir_host::pipeline::restore=info";

/// A running `weir worker`; killed (SIGKILL) when dropped.
struct Worker {
    id: String,
    child: Child,
    /// `127.0.0.1:<port>` of its HTTP endpoints.
    address: String,
    /// Its stderr.
    log: PathBuf,
    /// Killed or stopped by the test: its exit is expected.
    gone: bool,
}

impl Worker {
    /// Start `weir worker` on `spec` as `id`, with its own data directory
    /// and log under `dir`, and wait for its listening line.
    fn start(spec: &Path, dir: &Path, id: &str, env: &[(&'static str, String)]) -> Worker {
        Worker::launch(&[spec.to_str().unwrap()], dir, id, env)
    }

    /// [`Worker::start`] with `what` instead of a spec (`--cluster NAME …`).
    fn launch(what: &[&str], dir: &Path, id: &str, env: &[(&'static str, String)]) -> Worker {
        let log = dir.join(format!("{id}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("worker")
            .args(what)
            .arg("--data-dir")
            .arg(dir.join(format!("data-{id}")))
            .args(["--listen", "127.0.0.1:0", "--worker-id", id])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("WEIR_DATA_DIR")
            .env("WEIR_LOG", std::env::var("WEIR_LOG").unwrap_or_else(|_| LOG.to_string()))
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("weir worker starts");
        // The first line names the address; the rest is read (and dropped)
        // so the worker never blocks on a full pipe.
        let stdout = child.stdout.take().unwrap();
        let (first, line) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = first.send(lines.next());
            lines.for_each(drop);
        });
        let line = match line.recv_timeout(Duration::from_secs(120)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let exited = child.wait().map(|s| s.to_string()).unwrap_or_default();
                panic!(
                    "worker {id} printed no listening line ({}; {exited}); its log:\n{}",
                    match other {
                        Err(_) => "none within 2 minutes",
                        Ok(_) => "its stdout closed first",
                    },
                    tail(&log, 60)
                )
            }
        };
        assert!(
            line.starts_with(&format!("weir worker {id} listening on http://")),
            "worker {id}'s first line: {line:?}"
        );
        let address = line.trim().rsplit("http://").next().unwrap().to_string();
        Worker { id: id.to_string(), child, address, log, gone: false }
    }

    /// `GET path`: the status and the body as JSON (`Null` if it is not).
    fn get(&self, path: &str) -> Option<(u16, Value)> {
        let client =
            reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
        let response = client.get(format!("http://{}{path}", self.address)).send().ok()?;
        let status = response.status().as_u16();
        let text = response.text().ok()?;
        Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// `GET /v1/worker`, when it answers 200.
    fn status(&self) -> Option<Value> {
        match self.get("/v1/worker") {
            Some((200, body)) => Some(body),
            _ => None,
        }
    }

    /// Its units as `/v1/worker` lists them (none if it does not answer);
    /// a worker of a whole cluster: those of every pipeline it runs.
    fn units(&self) -> Vec<Value> {
        let Some(status) = self.status() else { return Vec::new() };
        match status["pipelines"].as_array() {
            Some(pipelines) => pipelines
                .iter()
                .flat_map(|p| p["units"].as_array().cloned().unwrap_or_default())
                .collect(),
            None => status["units"].as_array().cloned().unwrap_or_default(),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of the file at `path`.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The workers of one pipeline; on a failing test, prints their logs.
struct Cluster {
    spec: PathBuf,
    /// Instead of the spec: what workers of a whole cluster are given.
    fleet: Option<Vec<String>>,
    dir: PathBuf,
    env: Vec<(&'static str, String)>,
    workers: Vec<Worker>,
}

impl Cluster {
    /// Workers of `spec` (none started yet), with `s3`'s credentials.
    fn new(dir: &Path, spec: &Path, s3: &TestS3) -> Cluster {
        Cluster {
            spec: spec.to_path_buf(),
            fleet: None,
            dir: dir.to_path_buf(),
            env: s3.env(),
            workers: vec![],
        }
    }

    /// Start worker `id` and wait until `/readyz` says it is a member of
    /// the group with its assignment.
    fn add(&mut self, id: &str) {
        let worker = match &self.fleet {
            Some(args) => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Worker::launch(&args, &self.dir, id, &self.env)
            }
            None => Worker::start(&self.spec, &self.dir, id, &self.env),
        };
        self.workers.push(worker);
        self.wait(&format!("worker {id}'s /readyz to answer 200"), Duration::from_secs(90), |c| {
            let worker = c.workers.last().unwrap();
            match worker.get("/readyz") {
                Some((200, body)) => {
                    assert_eq!(body["group"], "member", "a ready worker is a member: {body}");
                    Some(())
                }
                Some((503, body)) => {
                    // Not ready yet: the reason says why, by name.
                    assert!(body["reason"].is_string(), "a 503 says why: {body}");
                    None
                }
                _ => None,
            }
        });
        let worker = self.workers.last().unwrap();
        let (status, body) = worker.get("/healthz").expect("/healthz answers");
        assert_eq!((status, &body["alive"]), (200, &Value::Bool(true)), "{body}");
    }

    /// Start worker `id` as [`Self::add`] does, with `env` on top of the
    /// cluster's environment (another S3 endpoint, say).
    fn add_with(&mut self, id: &str, env: &[(&'static str, String)]) {
        let shared = std::mem::take(&mut self.env);
        self.env =
            shared.iter().filter(|(k, _)| env.iter().all(|(e, _)| e != k)).cloned().collect();
        self.env.extend(env.iter().cloned());
        self.add(id);
        self.env = shared;
    }

    /// Send `signal` (`STOP`, `CONT`) to worker `id`; a stopped worker is
    /// left out of [`Self::alive`] (it answers nothing) until continued.
    fn signal(&mut self, id: &str, signal: &str) {
        let worker = self.workers.iter_mut().find(|w| w.id == id).unwrap();
        let pid = worker.child.id().to_string();
        let status = Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
        worker.gone = signal == "STOP";
    }

    /// The workers not killed or stopped.
    fn alive(&self) -> Vec<&Worker> {
        self.workers.iter().filter(|w| !w.gone).collect()
    }

    /// Panics if a worker the test did not stop has exited.
    fn check_alive(&mut self) {
        for worker in self.workers.iter_mut().filter(|w| !w.gone) {
            if let Ok(Some(status)) = worker.child.try_wait() {
                worker.gone = true;
                panic!(
                    "worker {} exited on its own ({status}); its log:\n{}",
                    worker.id,
                    tail(&worker.log, 80)
                );
            }
        }
    }

    /// Poll `check` every 300 ms until it gives a value, for up to
    /// `within`; panics naming `what` (and the last state) otherwise, or if
    /// a worker died on its own meanwhile.
    fn wait<T>(
        &mut self,
        what: &str,
        within: Duration,
        mut check: impl FnMut(&Cluster) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            self.check_alive();
            if let Some(value) = check(self) {
                return value;
            }
            if Instant::now() > deadline {
                let state: Vec<String> = self
                    .alive()
                    .iter()
                    .map(|w| format!("{}: {}", w.id, w.status().unwrap_or(Value::Null)))
                    .collect();
                panic!("waited {within:?} for {what}; the workers report:\n{}", state.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Wait until the live workers together run every unit of `units`,
    /// each on exactly one worker and `running`, (with `spread`) every
    /// live worker runs at least one, and each unit of `moved` reports
    /// that its run restored a checkpoint; the units by worker id.
    fn wait_for_units(
        &mut self,
        units: &BTreeSet<String>,
        spread: bool,
        moved: &BTreeSet<String>,
        within: Duration,
    ) -> BTreeMap<String, Vec<Value>> {
        let what = format!(
            "the {} units to run, each on one worker{}{}",
            units.len(),
            if spread { ", every worker with at least one" } else { "" },
            if moved.is_empty() {
                String::new()
            } else {
                format!(
                    ", {moved:?} restored from object storage (restores >= 1, restored_from set)"
                )
            }
        );
        self.wait(&what, within, |cluster| {
            let assignment: BTreeMap<String, Vec<Value>> =
                cluster.alive().iter().map(|w| (w.id.clone(), w.units())).collect();
            let running: Vec<&str> = assignment
                .values()
                .flatten()
                .filter(|u| u["state"] == "running")
                .filter_map(|u| u["unit"].as_str())
                .collect();
            let distinct: BTreeSet<String> = running.iter().map(|u| u.to_string()).collect();
            let spread_ok = !spread || assignment.values().all(|u| !u.is_empty());
            let restored = assignment
                .values()
                .flatten()
                .filter(|u| moved.contains(u["unit"].as_str().unwrap_or("")))
                .filter(|u| u["restores"].as_u64().unwrap_or(0) >= 1)
                .filter(|u| !u["restored_from"].is_null())
                .count();
            let done = running.len() == units.len() && &distinct == units;
            (done && spread_ok && restored == moved.len()).then_some(assignment)
        })
    }

    /// Wait until `topic` holds `count` committed records (panics at once
    /// if it holds more).
    fn wait_for_output(&mut self, kafka: &TestKafka, topic: &str, count: usize, within: Duration) {
        let mut seen = 0;
        let what = format!("{count} committed records in {topic}");
        self.wait(&what, within, |_| {
            seen = kafka.read_committed(topic).len();
            assert!(seen <= count, "{seen} committed records in {topic}, more than {count}");
            (seen == count).then_some(())
        });
    }

    /// `kill -9` worker `id`.
    fn kill(&mut self, id: &str) {
        let worker = self.workers.iter_mut().find(|w| w.id == id).unwrap();
        worker.child.kill().unwrap();
        worker.child.wait().unwrap();
        worker.gone = true;
    }

    /// Send SIGTERM to the workers `ids` at once and wait until each has
    /// exited, asserting it exited with success.
    fn terminate(&mut self, ids: &[&str]) {
        for id in ids {
            let worker = self.workers.iter().find(|w| w.id == *id).unwrap();
            let pid = worker.child.id().to_string();
            let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
            assert!(status.success(), "kill -TERM {pid}");
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        for id in ids {
            let worker = self.workers.iter_mut().find(|w| w.id == *id).unwrap();
            worker.gone = true;
            let status = loop {
                if let Some(status) = worker.child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    Instant::now() < deadline,
                    "worker {id} did not exit within 2 minutes of SIGTERM; its log:\n{}",
                    tail(&worker.log, 80)
                );
                std::thread::sleep(Duration::from_millis(100));
            };
            assert!(
                status.success(),
                "worker {id} exited with {status} after SIGTERM (graceful: 0); its log:\n{}",
                tail(&worker.log, 80)
            );
        }
    }

    /// SIGTERM to every live worker at once; each exits with success.
    fn terminate_all(&mut self) {
        let ids: Vec<String> = self.alive().iter().map(|w| w.id.clone()).collect();
        self.terminate(&ids.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for worker in &self.workers {
                eprintln!(
                    "---- worker {} (log {}):\n{}",
                    worker.id,
                    worker.log.display(),
                    tail(&worker.log, 60)
                );
            }
        }
    }
}

/// Each live worker reports its id, the pipeline and its number of units.
fn assert_reports(cluster: &Cluster, pipeline: &str, units: usize) {
    for worker in cluster.alive() {
        let status = worker.status().unwrap_or_else(|| panic!("worker {} answers", worker.id));
        assert_eq!(status["worker_id"], worker.id.as_str(), "{status}");
        assert_eq!(status["pipeline"], pipeline, "{status}");
        assert_eq!(status["units_total"], units, "{status}");
    }
}

/// The `role` a unit of a pipeline named `pipeline` must report.
fn role_of(unit: &str, pipeline: &str) -> &'static str {
    let root = unit.strip_prefix(pipeline).unwrap_or(unit).trim_start_matches('-');
    if root.starts_with("source-") || root.starts_with("orders-") {
        "ingest"
    } else {
        "task"
    }
}

/// Each of `workers` runs at least one unit, the units are `units`, and
/// each reports its role.
fn assert_spread(
    assignment: &BTreeMap<String, Vec<Value>>,
    workers: &[&str],
    units: &BTreeSet<String>,
    pipeline: &str,
) {
    let ids: Vec<&str> = assignment.keys().map(String::as_str).collect();
    assert_eq!(ids, workers, "the live workers");
    for (id, list) in assignment {
        assert!(!list.is_empty(), "worker {id} runs no unit: {assignment:?}");
        for unit in list {
            let name = unit["unit"].as_str().unwrap_or_default();
            assert!(units.contains(name), "worker {id} runs an unknown unit {unit}");
            assert_eq!(unit["role"], role_of(name, pipeline), "{unit}");
        }
    }
    let counts: Vec<String> =
        assignment.iter().map(|(id, list)| format!("{id}: {}", list.len())).collect();
    eprintln!("units per worker: {}", counts.join(", "));
}

#[test]
fn the_specs_given_to_the_workers_plan_into_the_units_the_tests_expect() {
    // No broker: the plan reads none (the input has 6 partitions).
    let dir = tempfile::tempdir().unwrap();
    let six = |config: &KafkaSourceConfig| -> Result<Vec<(String, i32)>, PlanError> {
        Ok((0..PARTITIONS).map(|p| (config.topics[0].clone(), p)).collect())
    };
    let jobs = [
        (Job::Revenue, 12),
        (Job::RevenueByPartition, 6),
        (Job::WindowedRevenue, 12),
        (Job::RegionTop3, 18),
    ];
    for (job, units) in jobs {
        let storage = Some("s3://bucket/prefix");
        let path = job.spec(dir.path(), "127.0.0.1:9", "cl-plan", "in", "out", storage);
        let spec = PipelineSpec::load(&path).unwrap_or_else(|e| panic!("{job:?}: {e}"));
        let plan = plan(&spec, &six).unwrap_or_else(|e| panic!("{job:?}: {e}"));
        let names: BTreeSet<String> = plan.units.iter().map(|u| u.name.clone()).collect();
        assert_eq!(names, job.units("cl-plan"), "{job:?}");
        assert_eq!(names.len(), units, "{job:?}");
        for unit in &plan.units {
            assert_eq!(unit.role.kind(), role_of(&unit.name, "cl-plan"), "{}", unit.name);
        }
        // The reference of the same job runs in one process.
        let path = job.spec(dir.path(), "127.0.0.1:9", "cl-plan-ref", "in", "out", None);
        PipelineSpec::load(&path).unwrap().validate().unwrap();
    }
}

#[test]
fn three_workers_share_a_revenue_pipeline_and_match_one_process() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-revenue");
    let dir = tempfile::tempdir().unwrap();
    let (orders, out) = (unique("cl-orders"), unique("cl-revenue"));
    kafka.create_topic(&orders, PARTITIONS);
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &orders, PARTITIONS, 3000, CUSTOMERS, 1);
    let expected = reference(&kafka, dir.path(), Job::Revenue, &orders);
    assert_eq!(total(&expected), 3000, "the single-process run");

    let name = unique("cl-rev");
    let storage = format!("s3://{bucket}/{name}");
    let spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    for id in ["w1", "w2", "w3"] {
        cluster.add(id);
    }
    cluster.wait_for_output(&kafka, &out, 3000, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "three workers");

    let units = Job::Revenue.units(&name);
    assert_eq!(units.len(), 12);
    let assignment =
        cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));
    assert_spread(&assignment, &["w1", "w2", "w3"], &units, &name);
    assert_reports(&cluster, &name, 12);

    // A graceful stop of all three at once adds nothing.
    cluster.terminate_all();
    assert_same(&committed_per_key(&kafka, &out), &expected, "after SIGTERM to all three");
}

/// What [`orders_and_spec`] made: a scratch directory, the input topic
/// (600 orders on [`PARTITIONS`] partitions), the output topic, and the
/// workers' spec of a job between them.
struct Prepared {
    dir: tempfile::TempDir,
    orders: String,
    out: String,
    spec: PathBuf,
}

/// Topics `cl-<what>` (600 orders) and `cl-<what>-out`, and the spec the
/// workers run of `job` between them, checkpointing into a new bucket.
fn orders_and_spec(kafka: &TestKafka, s3: &TestS3, what: &str, job: Job) -> Prepared {
    let bucket = s3.create_bucket(&format!("weir-cluster-{what}"));
    let dir = tempfile::tempdir().unwrap();
    let (orders, out) = (unique(&format!("cl-{what}")), unique(&format!("cl-{what}-out")));
    kafka.create_topic(&orders, PARTITIONS);
    kafka.create_topic(&out, 1);
    produce_orders(kafka, &orders, PARTITIONS, 600, CUSTOMERS, 1);
    let name = unique(&format!("cl-{what}"));
    let storage = format!("s3://{bucket}/{name}");
    let spec = job.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    Prepared { dir, orders, out, spec }
}

#[test]
fn forged_weir_headers_non_json_records_and_tombstones_leave_the_cluster_exact() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let Prepared { dir, orders, out, spec } =
        orders_and_spec(&kafka, &s3, "poison", Job::WindowedRevenueDropping);
    // Partition 0 also gets a record that is not JSON, a tombstone, an
    // order without event time, and orders whose headers claim to be a
    // watermark of producer 99, a far-future one, an event time and a key.
    let poisoned = crate::kafka::poison::input(true);
    kafka.produce_raw(&orders, &poisoned);
    let expected = reference(&kafka, dir.path(), Job::WindowedRevenueDropping, &orders);
    let windows = total(&expected);
    produce_far_future(&kafka, &orders, false);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    for id in ["w1", "w2"] {
        cluster.add(id);
    }
    cluster.wait_for_output(&kafka, &out, windows, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "poisoned input on two workers");
    println!(
        "poisoned input: {} records ({} forged-header orders, 3 poison records), {windows} windows exact",
        600 + poisoned.len(),
        poisoned.iter().filter(|r| !r.headers.is_empty()).count()
    );
    cluster.terminate_all();
}

#[test]
fn a_partition_added_while_running_stops_the_workers_loudly_and_a_restart_reads_it() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let Prepared { dir, orders, out, spec } = orders_and_spec(&kafka, &s3, "grow", Job::Revenue);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("w1");
    cluster.wait_for_output(&kafka, &out, 600, Duration::from_secs(120));

    // A seventh partition, with orders on it: the worker stops, naming it.
    kafka.add_partitions(&orders, PARTITIONS as usize + 1);
    let added: Vec<Record> = (0..60)
        .map(|i| {
            let id = 10_000 + i;
            // Customers of its own: each customer's orders stay in one
            // partition, so their order is the same in every run.
            let customer = 2001 + i % 5;
            let value = format!(
                r#"{{"order_id":{id},"customer_id":{customer},"amount":1.00,"event_time":{}}}"#,
                1_768_471_200_000 + id as i64 * 1000
            );
            (Some(PARTITIONS), Some(customer.to_string().into_bytes()), value.into_bytes())
        })
        .collect();
    // A fresh producer: the shared one's metadata predates the partition.
    TestKafka::start().produce_many(&orders, &added);
    let worker = &mut cluster.workers[0];
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = worker.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the worker kept running with an unread partition");
        std::thread::sleep(Duration::from_millis(300));
    };
    worker.gone = true;
    let log = tail(&worker.log, 40);
    assert!(!status.success(), "a non-zero exit: {status}");
    assert!(log.contains(&format!("{orders}/{PARTITIONS}")), "names the new partition: {log}");

    // Started again, the workers plan a unit for it and read it from its
    // log start: the output is a one-process run's over the whole input.
    let expected = reference(&kafka, dir.path(), Job::Revenue, &orders);
    assert_eq!(total(&expected), 660);
    cluster.add("w2");
    cluster.wait_for_output(&kafka, &out, 660, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "after the partition was added");
    cluster.terminate_all();
}

/// `GET path` of `worker`: its status and JSON body (panics if it does
/// not answer).
fn probe(worker: &Worker, path: &str) -> (u16, Value) {
    worker.get(path).unwrap_or_else(|| panic!("worker {} did not answer {path}", worker.id))
}

#[test]
#[ignore = "flaky under CI load (2 of 3 CI runs passed): after the broker restarts, one unit's read of its commit marker (the committed offset of group weir-txn-…) can time out (OperationTimedOut) again and again for minutes, past the test's wait; run it with --ignored"]
fn a_worker_cut_off_from_its_broker_is_alive_but_not_ready_until_it_rejoins() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::dedicated(&[]), TestS3::start());
    let Prepared { dir, out, spec, .. } = orders_and_spec(&kafka, &s3, "ready", Job::Revenue);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("w1");
    cluster.wait_for_output(&kafka, &out, 600, Duration::from_secs(120));
    let (status, ready) = probe(&cluster.workers[0], "/readyz");
    assert_eq!(
        (status, &ready["units"]),
        (200, &Value::from(12)),
        "ready with every unit: {ready}"
    );

    // The broker goes: once its session expires the worker has lost its
    // group and is not ready, saying so; but its loop turns, so it is
    // alive (a liveness probe must not restart it: that would not bring
    // the broker back).
    kafka.kill();
    let lost =
        cluster.wait("/readyz to say the group is lost", Duration::from_secs(60), |c| {
            match c.workers[0].get("/readyz") {
                Some((503, body)) if body["group"] == "lost" => Some(body),
                _ => None,
            }
        });
    assert_eq!(lost["ready"], false, "{lost}");
    assert!(lost["reason"].as_str().unwrap().starts_with("lost its group"), "{lost}");
    let (status, alive) = probe(&cluster.workers[0], "/healthz");
    assert_eq!((status, &alive["alive"]), (200, &Value::Bool(true)), "{alive}");
    println!("broker gone: /readyz {lost}; /healthz {alive}");

    // The broker back: the worker rejoins, gets its units again and is
    // ready.
    kafka.restart(&[]);
    let ready = cluster.wait("/readyz to answer 200 again", Duration::from_secs(120), |c| match c
        .workers[0]
        .get("/readyz")
    {
        Some((200, body)) if body["units"] == 12 => Some(body),
        _ => None,
    });
    assert_eq!(ready["group"], "member", "{ready}");
    // And its units run again.
    let name = spec.file_stem().unwrap().to_str().unwrap().to_string();
    let units = Job::Revenue.units(&name);
    cluster.wait_for_units(&units, false, &BTreeSet::new(), Duration::from_secs(120));
    // Ended with SIGKILL (dropped): a graceful stop is another test's.
}

#[test]
fn a_worker_told_to_stop_while_its_broker_is_gone_exits_within_its_grace_naming_why() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::dedicated(&[]), TestS3::start());
    let Prepared { dir, out, spec, .. } = orders_and_spec(&kafka, &s3, "gone", Job::Revenue);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.env.push(("WEIR_STOP_GRACE", "3s".to_string()));
    cluster.add("w1");
    cluster.wait_for_output(&kafka, &out, 600, Duration::from_secs(120));

    // The broker goes; then the worker is told to stop.
    kafka.kill();
    let worker = &mut cluster.workers[0];
    worker.gone = true;
    let pid = worker.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = worker.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the worker still runs a minute after SIGTERM with a 3 s stop grace; its log:\n{}",
            tail(&worker.log, 40)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = tail(&worker.log, 40);
    assert!(!status.success(), "a stop without final checkpoints is not a clean exit: {log}");
    assert!(log.contains("without a final checkpoint"), "says why: {log}");
}

#[test]
fn windowed_revenue_and_two_stage_graph_match_one_process() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-windows");
    let dir = tempfile::tempdir().unwrap();

    // Revenue per customer per minute: 3000 orders a second apart.
    let (orders, out) = (unique("cl-orders"), unique("cl-windowed"));
    kafka.create_topic(&orders, PARTITIONS);
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &orders, PARTITIONS, 3000, CUSTOMERS, 1);
    // The reference reads to the end of the input, which closes every window.
    let expected = reference(&kafka, dir.path(), Job::WindowedRevenue, &orders);
    let windows = total(&expected);
    assert!(windows >= 50 * 40, "a window per customer and minute: {windows}");
    // On an endless stream, later events close them.
    produce_far_future(&kafka, &orders, false);
    let name = unique("cl-win");
    let storage = format!("s3://{bucket}/{name}");
    let spec = Job::WindowedRevenue.spec(
        dir.path(),
        &kafka.bootstrap(),
        &name,
        &orders,
        &out,
        Some(&storage),
    );
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    for id in ["w1", "w2", "w3"] {
        cluster.add(id);
    }
    cluster.wait_for_output(&kafka, &out, windows, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "windowed revenue on three workers");
    let units = Job::WindowedRevenue.units(&name);
    let assignment =
        cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));
    assert_spread(&assignment, &["w1", "w2", "w3"], &units, &name);
    // A stop is not the end of the input: the far-future windows stay open.
    cluster.terminate_all();
    assert_same(&committed_per_key(&kafka, &out), &expected, "windowed revenue after SIGTERM");
    drop(cluster);

    // The two-stage graph: its example's orders, its expected output.
    let (orders, out) = (unique("cl-regions"), unique("cl-top3"));
    kafka.create_topic(&orders, PARTITIONS);
    kafka.create_topic(&out, 1);
    produce_region_orders(&kafka, &orders);
    produce_far_future(&kafka, &orders, true);
    let mut expected: Vec<String> =
        std::fs::read_to_string(example_file("region-top3", "expected.jsonl"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
    assert_eq!(expected.len(), 32);
    let name = unique("cl-top");
    let storage = format!("s3://{bucket}/{name}");
    let spec =
        Job::RegionTop3.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    for id in ["g1", "g2", "g3"] {
        cluster.add(id);
    }
    cluster.wait_for_output(&kafka, &out, expected.len(), Duration::from_secs(180));
    // Sorted by window start, then region, as expected.jsonl is.
    let by_window_then_region = |line: &String| {
        let record: Value = serde_json::from_str(line).unwrap();
        (record["window_start"].as_i64().unwrap(), record["region"].as_str().unwrap().to_string())
    };
    let committed = |kafka: &TestKafka| {
        let mut lines: Vec<String> = kafka
            .read_committed(&out)
            .into_iter()
            .map(|(_, _, _, value)| String::from_utf8(value).unwrap())
            .collect();
        lines.sort_by_key(by_window_then_region);
        lines
    };
    expected.sort_by_key(by_window_then_region);
    assert_eq!(committed(&kafka), expected, "region top 3 on three workers");
    let units = Job::RegionTop3.units(&name);
    assert_eq!(units.len(), 18);
    let assignment =
        cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));
    assert_spread(&assignment, &["g1", "g2", "g3"], &units, &name);
    assert_reports(&cluster, &name, 18);
    cluster.terminate_all();
    assert_eq!(committed(&kafka), expected, "region top 3 after SIGTERM");
}

/// Produce orders `first..first + count` to `topic` in the background,
/// 40 every 100 ms or so, as a stream would bring them.
fn trickle(topic: &str, first: u64, count: u64) -> JoinHandle<()> {
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let kafka = TestKafka::start();
        let mut id = first;
        while id < first + count {
            let batch = 40.min(first + count - id);
            produce_orders(&kafka, &topic, PARTITIONS, batch, CUSTOMERS, id);
            id += batch;
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// What happens to the workers during one wave of orders.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// `kill -9` a live worker chosen at random.
    Kill,
    /// Start a new worker.
    Add(&'static str),
    /// SIGTERM a live worker chosen at random.
    Stop,
}

#[test]
fn workers_killed_and_added_lose_and_duplicate_nothing() {
    let _serial = one_at_a_time();
    const FIRST_WAVE: u64 = 1000;
    const WAVE: u64 = 800;
    let events = [Event::Kill, Event::Add("w3"), Event::Kill, Event::Add("w4"), Event::Stop];
    let produced_in_all = FIRST_WAVE + WAVE * events.len() as u64;

    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-kills");
    let dir = tempfile::tempdir().unwrap();
    let seed = crash_seed();
    eprintln!("cluster crash seed {seed} (WEIR_CRASH_SEED={seed} repeats these kill instants)");
    let mut dice = Dice(seed);

    // The reference: one process over all the orders the waves bring.
    let (all_orders, orders, out) =
        (unique("cl-all-orders"), unique("cl-orders"), unique("cl-revenue"));
    for topic in [&all_orders, &orders] {
        kafka.create_topic(topic, PARTITIONS);
    }
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &all_orders, PARTITIONS, produced_in_all, CUSTOMERS, 1);
    let expected = reference(&kafka, dir.path(), Job::Revenue, &all_orders);
    assert_eq!(total(&expected), produced_in_all as usize, "the single-process run");

    let name = unique("cl-kill");
    let storage = format!("s3://{bucket}/{name}");
    let spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let units = Job::Revenue.units(&name);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("w1");
    cluster.add("w2");
    trickle(&orders, 1, FIRST_WAVE).join().unwrap();
    let mut produced = FIRST_WAVE;
    cluster.wait_for_output(&kafka, &out, produced as usize, Duration::from_secs(180));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "after the first wave");
    cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));

    let mut restored = 0;
    for (n, event) in events.into_iter().enumerate() {
        let wave = trickle(&orders, produced + 1, WAVE);
        produced += WAVE;
        let after = dice.between(300, 1_500);
        std::thread::sleep(Duration::from_millis(after));
        let live: Vec<String> = cluster.alive().iter().map(|w| w.id.clone()).collect();
        // The units of the worker that goes, as it reported them just before.
        let mut left = BTreeSet::new();
        let when = match event {
            Event::Kill | Event::Stop => {
                let victim = &live[dice.between(0, live.len() as u64) as usize];
                let worker = cluster.workers.iter().find(|w| &w.id == victim).unwrap();
                left = worker
                    .units()
                    .iter()
                    .filter_map(|u| u["unit"].as_str())
                    .map(String::from)
                    .collect();
                if let Event::Kill = event {
                    cluster.kill(victim);
                } else {
                    cluster.terminate(&[victim.as_str()]);
                }
                let when =
                    format!("event {n}: {event:?} {victim} {after} ms into a wave (seed {seed})");
                assert!(!left.is_empty(), "{when}: {victim} ran no unit");
                when
            }
            Event::Add(id) => {
                cluster.add(id);
                format!("event {n}: {event:?} {after} ms into a wave (seed {seed})")
            }
        };
        let now = committed_per_key(&kafka, &out);
        assert_prefix(&now, &expected, &when);
        let committed = total(&now);
        eprintln!("{when}: {committed} of {produced} results committed right after it");
        if let Event::Kill = event {
            // Mid-work: the wave was still coming, and nobody runs the dead
            // worker's units until the group notices (session timeout).
            assert!(
                committed < produced as usize,
                "{when}: all {committed} results were committed right after the kill"
            );
        }
        wave.join().unwrap();
        // The units are all running again on the live workers; a new one
        // took a share.
        let spread = matches!(event, Event::Add(_));
        let assignment = cluster.wait_for_units(&units, spread, &left, Duration::from_secs(90));
        assert_prefix(
            &committed_per_key(&kafka, &out),
            &expected,
            &format!("{when}, units settled"),
        );
        // The units of the worker that went moved with their state: their
        // new owners restored them from a checkpoint in S3.
        for (id, list) in &assignment {
            for unit in list.iter().filter(|u| left.contains(u["unit"].as_str().unwrap_or(""))) {
                eprintln!(
                    "{when}: {} moved to {id}, restored from checkpoint {}",
                    unit["unit"], unit["restored_from"]
                );
                restored += 1;
            }
        }
    }
    assert_eq!(produced, produced_in_all);
    cluster.wait_for_output(&kafka, &out, produced as usize, Duration::from_secs(180));
    let actual = committed_per_key(&kafka, &out);
    assert_same(
        &actual,
        &expected,
        &format!("after two kills, two starts and a stop (seed {seed})"),
    );

    // Every unit checkpointed into its own prefix of the bucket.
    let keys = s3.keys(&bucket, &name);
    for unit in &units {
        let root = format!("{name}/{unit}/chk-");
        assert!(
            keys.iter().any(|k| k.starts_with(&root) && k.ends_with("/_metadata")),
            "no completed checkpoint of {unit} under s3://{bucket}/{name}/{unit}/: {keys:#?}"
        );
    }
    cluster.terminate_all();
    assert_same(&committed_per_key(&kafka, &out), &expected, "after the last SIGTERM");
    eprintln!("cluster kills (seed {seed}): {restored} units moved, each restored from S3");
}

/// A zombie: worker w2 reaches S3 through a fault proxy. The proxy stalls
/// until w2 has a checkpoint write in flight, then w2 is paused (SIGSTOP)
/// long past its session, so w1 takes its units over, restores them and
/// goes on checkpointing. w2 is continued and its stalled writes land —
/// in storage the new owners now write to — then w1 is killed mid-wave and
/// w2 restores every unit again. Storage fencing (generations) keeps the
/// zombie from completing a checkpoint or deleting what the new owners
/// reference: every restore succeeds and the output is exact.
#[test]
fn a_worker_paused_mid_upload_is_fenced_and_its_units_survive_the_new_owner_being_killed() {
    let _serial = one_at_a_time();
    const WAVE: u64 = 600;
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-zombie");
    let dir = tempfile::tempdir().unwrap();
    let (all_orders, orders, out) =
        (unique("cl-zombie-all"), unique("cl-zombie"), unique("cl-zombie-out"));
    for topic in [&all_orders, &orders] {
        kafka.create_topic(topic, PARTITIONS);
    }
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &all_orders, PARTITIONS, 3 * WAVE, CUSTOMERS, 1);
    let expected = reference(&kafka, dir.path(), Job::Revenue, &all_orders);
    let name = unique("cl-zombie");
    let storage = format!("s3://{bucket}/{name}");
    let spec =
        Job::Revenue.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let units = Job::Revenue.units(&name);
    let endpoint = s3.endpoint.trim_start_matches("http://").to_string();
    let proxy = weir_devkit::fault_proxy::FaultProxy::start(endpoint).unwrap();
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("w1");
    cluster.add_with("w2", &[("AWS_ENDPOINT", proxy.url())]);
    trickle(&orders, 1, WAVE).join().unwrap();
    cluster.wait_for_output(&kafka, &out, WAVE as usize, Duration::from_secs(180));
    cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));

    // Wave 2 flows while w2 is stalled, then paused mid-write.
    let wave = trickle(&orders, WAVE + 1, WAVE);
    let paused: BTreeSet<String> = cluster.workers[1]
        .units()
        .iter()
        .filter_map(|u| u["unit"].as_str())
        .map(String::from)
        .collect();
    assert!(!paused.is_empty(), "w2 runs no unit");
    proxy.stall();
    cluster.wait("w2 to have an S3 write in flight", Duration::from_secs(60), |_| {
        (proxy.held() > 0).then_some(())
    });
    cluster.signal("w2", "STOP");
    let held = proxy.held();
    wave.join().unwrap();
    let assignment = cluster.wait_for_units(&units, false, &paused, Duration::from_secs(120));
    assert_eq!(assignment["w1"].len(), units.len(), "w1 took every unit: {assignment:?}");
    cluster.wait_for_output(&kafka, &out, 2 * WAVE as usize, Duration::from_secs(180));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "w1 alone, w2 paused");

    // w2 wakes: its stalled writes land, then it learns it lost its units.
    cluster.signal("w2", "CONT");
    proxy.resume();
    let wave = trickle(&orders, 2 * WAVE + 1, WAVE);
    std::thread::sleep(Duration::from_millis(1_500));
    let left: BTreeSet<String> = cluster.workers[0]
        .units()
        .iter()
        .filter_map(|u| u["unit"].as_str())
        .map(String::from)
        .collect();
    cluster.kill("w1");
    let committed = total(&committed_per_key(&kafka, &out));
    assert!(
        committed < 3 * WAVE as usize,
        "the kill landed mid-wave: all {committed} results were committed before it"
    );
    wave.join().unwrap();
    let assignment = cluster.wait_for_units(&units, false, &left, Duration::from_secs(180));
    assert_eq!(assignment["w2"].len(), units.len(), "w2 took every unit back: {assignment:?}");
    cluster.wait_for_output(&kafka, &out, 3 * WAVE as usize, Duration::from_secs(180));
    assert_same(&committed_per_key(&kafka, &out), &expected, "after the zombie woke and w1 died");
    let log = std::fs::read_to_string(&cluster.workers[1].log).unwrap_or_default();
    let fenced = log.matches("claimed by a newer run").count();
    println!(
        "zombie: {} units paused with {held} S3 reads held mid-write, {} moved back after the kill of w1 ({committed} of {} results committed at the kill); w2's runs stopped by the storage fence: {fenced}; {} results exact",
        paused.len(),
        left.len(),
        3 * WAVE,
        total(&expected)
    );
    cluster.terminate_all();
}

#[test]
fn an_input_partitioned_by_key_is_read_by_the_tasks_and_survives_a_kill() {
    let _serial = one_at_a_time();
    let (kafka, s3) = (TestKafka::start(), TestS3::start());
    let bucket = s3.create_bucket("weir-cluster-direct");
    let dir = tempfile::tempdir().unwrap();
    let seed = crash_seed();
    eprintln!("cluster direct-input seed {seed} (WEIR_CRASH_SEED={seed} repeats the kill instant)");
    let mut dice = Dice(seed);
    const FIRST: u64 = 1000;
    const REST: u64 = 1600;
    // Each customer's orders on one partition: the input is partitioned by
    // the pipeline's key.
    let (all_orders, orders, out) =
        (unique("cl-all-orders"), unique("cl-orders"), unique("cl-revenue"));
    for topic in [&all_orders, &orders] {
        kafka.create_topic(topic, PARTITIONS);
    }
    kafka.create_topic(&out, 1);
    produce_orders(&kafka, &all_orders, PARTITIONS, FIRST + REST, CUSTOMERS, 1);
    let expected = reference(&kafka, dir.path(), Job::Revenue, &all_orders);
    assert_eq!(total(&expected), (FIRST + REST) as usize, "the single-process run");

    let name = unique("cl-direct");
    let storage = format!("s3://{bucket}/{name}");
    let job = Job::RevenueByPartition;
    let spec = job.spec(dir.path(), &kafka.bootstrap(), &name, &orders, &out, Some(&storage));
    let units = job.units(&name);
    let mut cluster = Cluster::new(dir.path(), &spec, &s3);
    cluster.add("d1");
    cluster.add("d2");
    trickle(&orders, 1, FIRST).join().unwrap();
    cluster.wait_for_output(&kafka, &out, FIRST as usize, Duration::from_secs(120));
    assert_prefix(&committed_per_key(&kafka, &out), &expected, "after the first wave");
    // Six tasks and no ingest unit, on both workers.
    let assignment =
        cluster.wait_for_units(&units, true, &BTreeSet::new(), Duration::from_secs(60));
    assert_spread(&assignment, &["d1", "d2"], &units, &name);
    assert_reports(&cluster, &name, 6);

    let wave = trickle(&orders, FIRST + 1, REST);
    let after = dice.between(300, 2_500);
    std::thread::sleep(Duration::from_millis(after));
    let victim = ["d1", "d2"][dice.between(0, 2) as usize];
    let left: BTreeSet<String> =
        assignment[victim].iter().filter_map(|u| u["unit"].as_str()).map(String::from).collect();
    cluster.kill(victim);
    let when = format!("kill -9 {victim} {after} ms into the second wave (seed {seed})");
    let now = committed_per_key(&kafka, &out);
    assert_prefix(&now, &expected, &when);
    assert!(
        total(&now) < (FIRST + REST) as usize,
        "{when}: all {} results were committed right after the kill",
        total(&now)
    );
    eprintln!("{when}: {} of {} results committed right after it", total(&now), FIRST + REST);
    wave.join().unwrap();
    let assignment = cluster.wait_for_units(&units, false, &left, Duration::from_secs(90));
    for unit in assignment.values().flatten() {
        if left.contains(unit["unit"].as_str().unwrap_or("")) {
            eprintln!(
                "{when}: {} restored from checkpoint {}",
                unit["unit"], unit["restored_from"]
            );
        }
    }
    cluster.wait_for_output(&kafka, &out, (FIRST + REST) as usize, Duration::from_secs(120));
    assert_same(&committed_per_key(&kafka, &out), &expected, &when);
    cluster.terminate_all();
    assert_same(&committed_per_key(&kafka, &out), &expected, "after SIGTERM");
}
