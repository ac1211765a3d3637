//! `weir bench cluster`: the revenue pipeline (Kafka source → key/process
//! → exactly-once Kafka sink, checkpoint every second) run from Kafka to
//! Kafka in one process, on one `weir worker` and on two, against the
//! same broker's own ceiling measured in the same run; then the time a
//! `kill -9`ed (and a SIGTERMed) worker's tasks take to produce output on
//! the surviving worker, with state of K keys.
//!
//! Everything runs as child processes of the current `weir` (`weir run`,
//! `weir worker --listen 127.0.0.1:0`), so each one's CPU time is its own
//! (`/proc/<pid>/stat`, by thread name from `/proc/<pid>/task`). Output is
//! read by a `read_committed` consumer in this process: an output counts
//! when it becomes readable there. Latency is that instant less the
//! output's Kafka timestamp, which is the input record's produce time
//! (the pipeline has no `timestamp_field`, so an event's time is its input
//! record's Kafka timestamp, and the revenue function's output keeps it).
//! Percentiles come from a sorted `Vec` (no histogram crate).
//!
//! Every run uses topics and a pipeline name of its own
//! (`wb<run>-<case>`), deleted at the end; checkpoints go to `file://`
//! storage under the scratch directory.
//!
//! The `kafka-streams` runs put the same pipeline, written as a Kafka
//! Streams application (`bench/kstreams`, `weir.bench.KafkaStreamsRevenue`),
//! through the same measurement: the same input, produced the same way, the
//! same reader checking every output, its JVM's CPU by thread. Its
//! application id is the run's name, so its changelog topic goes with the
//! run's topics.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use serde::Serialize;
use weir_host::connectors::kafka::{send_waiting, serve_deliveries, CountsDeliveries};

use super::BenchError;
use weir_host::cluster::WorkerStatus;
use weir_host::observe::latency::{LatencyRecorder, LatencySummary, LATENCY_SO_FAR};
use weir_host::observe::process::CpuTicks;
use weir_host::state::{key_group, subtask_for_key_group};

/// Partitions of every input and output topic, and the keyed stage's
/// parallelism: 6 ingest units and 6 tasks.
pub const PARTITIONS: u16 = 6;

/// Distinct customers of the throughput and latency runs' orders.
pub const THROUGHPUT_KEYS: u64 = 10_000;

/// The key groups of the bench's pipelines (the spec default).
const MAX_PARALLELISM: u16 = 128;

/// Orders of the warm-up run (at most a run's own).
const WARM_UP_ORDERS: u64 = 500_000;

/// The Kafka Streams version `bench/kstreams/pom.xml` pins, for the table.
const KAFKA_STREAMS_VERSION: &str = "4.4.0";

/// How long nothing new may arrive before a wait gives up.
const STALL: Duration = Duration::from_secs(90);

/// What `weir bench cluster` runs.
#[derive(Debug, Clone)]
pub struct ClusterBench {
    /// The broker, `host:port`.
    pub kafka: String,
    /// Orders per throughput run.
    pub events: u64,
    /// The ways of running the pipeline to measure, in order; the first
    /// one's throughput sets every latency run's rate.
    pub runs: Vec<Mode>,
    /// Seconds of the fixed-rate run that measures latency.
    pub latency_seconds: u64,
    /// Its input rate, as a share of the first run's throughput.
    pub latency_share: f64,
    /// Its input rate in events/s, instead of `latency_share` of the first
    /// run's throughput (to compare runs of different invocations).
    pub latency_rate: Option<f64>,
    /// The workers' `cluster.ingest_interval` in milliseconds (none: the
    /// default, half of the 1 s checkpoint interval).
    pub ingest_interval_ms: Option<u64>,
    /// State sizes (distinct keys) of the rebalance runs.
    pub state_keys: Vec<u64>,
    /// Input rate during a rebalance run, events/s.
    pub steady_rate: u64,
    /// Keys the steady input cycles over during a rebalance run.
    pub steady_keys: u64,
    /// Also hand a worker's units over by SIGTERM in each rebalance run.
    pub sigterm: bool,
    /// The keyed stage's parallelism in a one-process run (the cluster
    /// runs have one task per input partition).
    pub process_parallelism: u16,
    /// The Kafka source's tasks in a one-process run.
    pub source_tasks: u16,
    /// Where `revenue.wasm` is.
    pub functions_dir: PathBuf,
    /// The Kafka Streams application's jar (`bench/kstreams`' build), its
    /// dependencies in `lib/` beside it: what the `kafka-streams` runs run.
    pub kafka_streams_jar: Option<PathBuf>,
    /// Data directories, logs and `file://` checkpoint storage.
    pub scratch: PathBuf,
}

/// What a `weir bench cluster` run measured (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// `/proc/cpuinfo`'s model name.
    pub cpu_model: String,
    /// Cores this process may use.
    pub cores: usize,
    /// The broker.
    pub kafka: String,
    /// Orders per throughput run.
    pub events: u64,
    /// Input partitions, and the keyed stage's parallelism in the cluster
    /// runs.
    pub partitions: u16,
    /// The keyed stage's parallelism in the one-process runs, and the
    /// stream threads of the Kafka Streams runs.
    pub process_parallelism: u16,
    /// The Kafka source's tasks in the one-process runs.
    pub source_tasks: u16,
    /// The workers' `cluster.ingest_interval` in milliseconds, if set.
    pub ingest_interval_ms: Option<u64>,
    /// Where checkpoints went.
    pub storage: String,
    /// The broker alone, measured in this run.
    pub ceiling: Ceiling,
    /// One process, one worker, two workers.
    pub runs: Vec<RunReport>,
    /// Per state size.
    pub rebalance: Vec<RebalanceReport>,
}

/// The broker's own rates with raw rdkafka clients, events/s: one sample
/// per throughput run (each fills its input topic), and their medians.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ceiling {
    /// Producing the orders (6 partitions, keyed by customer).
    pub produce: Vec<f64>,
    /// Reading them back `read_committed`.
    pub consume: Vec<f64>,
    /// Reading them `read_committed` and producing each to another topic
    /// (one consumer and one producer with the Kafka sink's settings, in
    /// one thread): a pipeline without Weir. Measured as the pipeline is:
    /// its 10–90 % rate, as a reader of its output sees it.
    pub pass_through: Vec<f64>,
    /// Median of `produce`.
    pub produce_median: f64,
    /// Median of `consume`.
    pub consume_median: f64,
    /// Median of `pass_through`.
    pub pass_through_median: f64,
    /// The pass-through's latency at the latency runs' rate: what Weir's
    /// latency compares with (none if no latency run).
    pub pass_through_latency: Option<Latency>,
}

impl Ceiling {
    /// The lower of the produce and consume medians: no pipeline reading
    /// and writing this broker can beat it.
    pub fn limit(&self) -> f64 {
        self.produce_median.min(self.consume_median)
    }
}

/// One way of running the pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// `one process EO`, `one process ALO`, `1 worker`, `2 workers`,
    /// `Kafka Streams EO`, `Kafka Streams ALO`.
    pub mode: String,
    /// Child processes.
    pub processes: usize,
    /// N / seconds from starting the processes to the N-th output committed.
    pub events_per_second: f64,
    /// Outputs 10 %..90 % of N over the time between them.
    pub steady_events_per_second: f64,
    /// Seconds from starting the processes to the first output committed.
    pub first_output_seconds: f64,
    /// CPU seconds of the processes until the N-th output.
    pub cpu_seconds: f64,
    /// Of which, by thread (`keyed`, `input source`, `exchange source`,
    /// `sink`, `kafka client`, `other` incl. ended threads; Kafka Streams:
    /// `stream thread`, `kafka client`, `rocksdb`, `jvm`, `other`).
    pub cpu_by_thread: BTreeMap<String, f64>,
    /// Cores busy on the whole machine (broker included) meanwhile.
    pub machine_cores_busy: f64,
    /// Distinct orders in the output (N when exact).
    pub outputs: u64,
    /// Outputs seen twice.
    pub duplicates: u64,
    /// Outputs (first seen) that were not the expected record: the order's
    /// customer, amount and running total, byte for byte as the revenue
    /// function writes them (0 when exact).
    pub wrong: u64,
    /// The fixed-rate run.
    pub latency: Option<Latency>,
}

/// End-to-end latency of a fixed-rate run, ms.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Input rate, events/s.
    pub rate: f64,
    /// Records measured.
    pub records: u64,
    /// Percentiles.
    pub p50_ms: f64,
    /// 90th.
    pub p90_ms: f64,
    /// 99th.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// The machine's busy cores during the run (all its processes: the
    /// broker, the bench's producer and reader, and what is measured).
    pub cores_busy: f64,
    /// A one-process run's own latency, from the input record's timestamp
    /// to its sink's write (exactly-once: to the commit), as its last
    /// `latency so far` log line (at most a second old) says.
    pub in_weir: Option<InWeir>,
}

/// A pipeline's own latency percentiles, ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InWeir {
    /// Records measured.
    pub records: u64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

impl Latency {
    /// The percentiles of `summary` (none recorded: zeros), at `rate`,
    /// with the machine's busy cores since `machine`.
    fn of(rate: f64, summary: Option<LatencySummary>, machine: Option<CpuTicks>) -> Self {
        let ms = |pick: fn(&LatencySummary) -> u64| {
            summary.as_ref().map_or(0.0, |s| pick(s) as f64 / 1000.0)
        };
        Latency {
            rate,
            records: summary.map_or(0, |s| s.count),
            p50_ms: ms(|s| s.p50_us),
            p90_ms: ms(|s| s.p90_us),
            p99_ms: ms(|s| s.p99_us),
            max_ms: ms(|s| s.max_us),
            cores_busy: busy_cores_since(machine),
            in_weir: None,
        }
    }
}

/// The machine's busy cores since `before` (0 where `/proc/stat` is not).
fn busy_cores_since(before: Option<CpuTicks>) -> f64 {
    before
        .zip(weir_host::observe::process::machine_cpu_ticks())
        .map_or(0.0, |(before, after)| after.busy_cores_since(&before))
}

/// The last `latency so far` line in the log at `log`.
fn last_logged_latency(log: &Path) -> Option<InWeir> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|line| line.contains(LATENCY_SO_FAR))?.as_bytes();
    let ms = |field: &[u8]| number(line, field).map(|us| us as f64 / 1000.0);
    Some(InWeir {
        records: number(line, b"count=")?,
        p50_ms: ms(b"p50_us=")?,
        p99_ms: ms(b"p99_us=")?,
    })
}

/// One rebalance run: two workers, state of `keys` keys.
#[derive(Debug, Clone, Serialize)]
pub struct RebalanceReport {
    /// Distinct keys in the state.
    pub keys: u64,
    /// Seconds from producing the K orders to their K outputs committed.
    pub load_seconds: f64,
    /// `kill -9` of one worker.
    pub kill: Handover,
    /// SIGTERM of a worker added afterwards.
    pub sigterm: Option<Handover>,
    /// Orders produced during the run.
    pub produced: u64,
    /// Of which never seen in the output.
    pub lost: u64,
    /// Outputs seen twice.
    pub duplicates: u64,
}

/// What moving one worker's units measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Handover {
    /// The stopped worker's units.
    pub units: Vec<String>,
    /// State bytes of its tasks (its last status).
    pub task_state_bytes: u64,
    /// Steady-input keys whose task moved.
    pub keys_moved: usize,
    /// Of which without output before the wait ended.
    pub keys_without_output: usize,
    /// Seconds from the kill (signal) to each moved key's first committed
    /// output on its new worker: median.
    pub first_output_median_s: Option<f64>,
    /// And largest.
    pub first_output_max_s: Option<f64>,
    /// The same median over the keys whose task stayed but whose input
    /// partition's ingest unit moved.
    pub input_moved_median_s: Option<f64>,
    /// The same median over the other keys (their tasks wait for the moved
    /// ingest units' open transactions to be fenced).
    pub other_keys_median_s: Option<f64>,
    /// Seconds until the survivor's status showed every moved unit
    /// running with `restored_from` set.
    pub status_restored_s: Option<f64>,
    /// Largest time a moved task took from appearing in the survivor's
    /// status to `restored_from` set (its restore), s.
    pub restore_max_s: Option<f64>,
}

/// Run the whole benchmark with the `weir` at `weir`; `progress` hears
/// what is going on.
pub fn run(
    bench: &ClusterBench,
    weir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<ClusterReport, BenchError> {
    let functions = bench.functions_dir.join("revenue.wasm");
    if !functions.is_file() {
        return Err(BenchError::Io(format!(
            "{} not found: build the functions (`scripts/dev build-functions`) or pass --functions-dir",
            functions.display()
        )));
    }
    if bench.runs.iter().any(|m| matches!(m, Mode::KafkaStreams { .. })) {
        kafka_streams_class_path(bench.kafka_streams_jar.as_deref())?;
        let java = Command::new("java").arg("-version").output();
        if !java.is_ok_and(|o| o.status.success()) {
            return Err(BenchError::Io(
                "the kafka-streams runs need Java 17 or later (`java` on the PATH)".into(),
            ));
        }
    }
    let run_id = format!(
        "wb{}",
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 100_000_000
    );
    let kafka = Kafka::new(&bench.kafka)?;
    std::fs::create_dir_all(&bench.scratch).map_err(io("creating the scratch directory"))?;
    let context = Context { bench, weir, run_id: run_id.clone(), kafka };
    let result = context.all(progress);
    progress("deleting the run's topics");
    context.kafka.delete_topics_containing(&run_id);
    result
}

/// The broker's raw rates on one run's input, events/s.
struct RawRates {
    produce: f64,
    consume: f64,
    pass_through: f64,
}

/// What every step needs.
struct Context<'a> {
    bench: &'a ClusterBench,
    weir: &'a Path,
    run_id: String,
    kafka: Kafka,
}

/// One run of the pipeline: its name, topics, and directory (its
/// processes' data directories and logs, and a Weir run's spec).
struct Run {
    name: String,
    input: String,
    output: String,
    dir: PathBuf,
    spec: PathBuf,
}

/// How a throughput run runs the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `weir run`, its Kafka sink exactly-once or at-least-once.
    OneProcess {
        /// Transactions committed by the checkpoints, or plain writes.
        exactly_once: bool,
    },
    /// `weir worker`s (exactly-once): the input repartitioned through an
    /// exchange topic by ingest units, or, `direct`, read by the tasks
    /// themselves (`cluster: { input_partitioned_by_key: true }`, as
    /// Kafka Streams reads it: the input is keyed by customer).
    Workers {
        /// Worker processes.
        count: usize,
        /// The tasks read the input partitions (no exchange).
        direct: bool,
    },
    /// The Kafka Streams application (`bench/kstreams`) in one JVM,
    /// `exactly_once_v2` or `at_least_once`.
    KafkaStreams {
        /// `processing.guarantee` `exactly_once_v2`, or `at_least_once`.
        exactly_once: bool,
    },
}

impl Mode {
    /// Every mode, in the order the bench runs them by default: one
    /// worker first, whose throughput sets the latency runs' rate.
    pub const DEFAULT: [Mode; 4] = [
        Mode::Workers { count: 1, direct: false },
        Mode::OneProcess { exactly_once: true },
        Mode::OneProcess { exactly_once: false },
        Mode::Workers { count: 2, direct: false },
    ];

    /// The names `parse` takes, for messages.
    pub const NAMES: &str = "one-process, one-process-alo, 1-worker, N-workers, \
        1-worker-direct, N-workers-direct, kafka-streams, kafka-streams-alo";

    /// Its name on the command line (what `parse` takes).
    pub fn name(self) -> String {
        match self {
            Mode::OneProcess { exactly_once: true } => "one-process".into(),
            Mode::OneProcess { exactly_once: false } => "one-process-alo".into(),
            Mode::Workers { count: 1, direct } => format!("1-worker{}", when(direct, "-direct")),
            Mode::Workers { count, direct } => {
                format!("{count}-workers{}", when(direct, "-direct"))
            }
            Mode::KafkaStreams { exactly_once: true } => "kafka-streams".into(),
            Mode::KafkaStreams { exactly_once: false } => "kafka-streams-alo".into(),
        }
    }

    /// `one-process`, `one-process-alo`, `1-worker`, `<n>-workers`, either
    /// of those with `-direct`, `kafka-streams`, `kafka-streams-alo`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "one-process" => Some(Mode::OneProcess { exactly_once: true }),
            "one-process-alo" => Some(Mode::OneProcess { exactly_once: false }),
            "kafka-streams" => Some(Mode::KafkaStreams { exactly_once: true }),
            "kafka-streams-alo" => Some(Mode::KafkaStreams { exactly_once: false }),
            _ => {
                let (name, direct) = match name.strip_suffix("-direct") {
                    Some(name) => (name, true),
                    None => (name, false),
                };
                let count = match name {
                    "1-worker" => 1,
                    _ => name.strip_suffix("-workers")?.parse().ok().filter(|n| *n > 0)?,
                };
                Some(Mode::Workers { count, direct })
            }
        }
    }

    fn label(self) -> String {
        match self {
            Mode::OneProcess { exactly_once: true } => "one process EO".into(),
            Mode::OneProcess { exactly_once: false } => "one process ALO".into(),
            Mode::Workers { count: 1, direct } => format!("1 worker{}", when(direct, ", direct")),
            Mode::Workers { count, direct } => {
                format!("{count} workers{}", when(direct, ", direct"))
            }
            Mode::KafkaStreams { exactly_once: true } => "Kafka Streams EO".into(),
            Mode::KafkaStreams { exactly_once: false } => "Kafka Streams ALO".into(),
        }
    }

    fn tag(self) -> String {
        match self {
            Mode::OneProcess { exactly_once: true } => "p1".into(),
            Mode::OneProcess { exactly_once: false } => "p1a".into(),
            Mode::Workers { count, direct } => format!("w{count}{}", when(direct, "d")),
            Mode::KafkaStreams { exactly_once: true } => "ks".into(),
            Mode::KafkaStreams { exactly_once: false } => "ksa".into(),
        }
    }

    fn exactly_once(self) -> bool {
        match self {
            Mode::OneProcess { exactly_once } | Mode::KafkaStreams { exactly_once } => exactly_once,
            Mode::Workers { .. } => true,
        }
    }
}

/// `suffix` if `direct` (a direct workers run's name, label or tag), else
/// nothing.
fn when(direct: bool, suffix: &'static str) -> &'static str {
    if direct {
        suffix
    } else {
        ""
    }
}

impl Context<'_> {
    fn all(&self, progress: &mut dyn FnMut(&str)) -> Result<ClusterReport, BenchError> {
        self.warm_up(progress)?;
        let mut ceiling = Ceiling::default();
        let mut runs = Vec::new();
        // The first run's throughput sets the latency runs' rate, unless
        // it is given.
        let mut latency_rate = self.bench.latency_rate;
        for &mode in &self.bench.runs {
            let (report, raw) = self.throughput(mode, &mut latency_rate, progress)?;
            ceiling.produce.push(raw.produce);
            ceiling.consume.push(raw.consume);
            ceiling.pass_through.push(raw.pass_through);
            runs.push(report);
            if let Some(rate) = latency_rate.filter(|_| ceiling.pass_through_latency.is_none()) {
                if self.bench.latency_seconds > 0 {
                    progress(&format!(
                        "raw pass-through: latency at {rate:.0} events/s for {} s",
                        self.bench.latency_seconds
                    ));
                    ceiling.pass_through_latency = Some(self.pass_through_latency(rate)?);
                }
            }
        }
        ceiling.produce_median = super::median_of(ceiling.produce.clone());
        ceiling.consume_median = super::median_of(ceiling.consume.clone());
        ceiling.pass_through_median = super::median_of(ceiling.pass_through.clone());
        let mut rebalance = Vec::new();
        for &keys in &self.bench.state_keys {
            rebalance.push(self.rebalance(keys, progress)?);
        }
        Ok(ClusterReport {
            cpu_model: cpu_model(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kafka: self.bench.kafka.clone(),
            events: self.bench.events,
            partitions: PARTITIONS,
            process_parallelism: self.bench.process_parallelism,
            source_tasks: self.bench.source_tasks,
            ingest_interval_ms: self.bench.ingest_interval_ms,
            storage: format!("file://{}", self.bench.scratch.join("storage").display()),
            ceiling,
            runs,
            rebalance,
        })
    }

    /// One exactly-once run of the one-process pipeline over
    /// [`WARM_UP_ORDERS`] (at most a run's orders) on topics of its own,
    /// before anything is
    /// measured: it compiles the revenue function into the shared
    /// component cache, and warms the broker (its JIT compiles the produce,
    /// fetch and transaction paths), which otherwise made whichever run
    /// came first ~20 % slower than the next.
    fn warm_up(&self, progress: &mut dyn FnMut(&str)) -> Result<(), BenchError> {
        let orders = WARM_UP_ORDERS.min(self.bench.events);
        progress(&format!(
            "warm-up: {orders} orders through the pipeline (compiles the function, warms the broker)"
        ));
        let mode = Mode::OneProcess { exactly_once: true };
        let name = format!("{}-warm", self.run_id);
        let (input, output) = (format!("{name}-in"), format!("{name}-out"));
        self.kafka.create_topics(&[&input, &output])?;
        let producer = self.kafka.producer()?;
        produce(&producer, &input, 0..orders, |id| id % THROUGHPUT_KEYS, None)?;
        let run = self.run_dir(&name, &input, &output, mode)?;
        let watcher = Watcher::checking(&self.kafka, &output, &[orders])?;
        let mut procs = self.start(mode, &run)?;
        watcher.wait_for(orders, &mut procs, "warm-up")?;
        drop(procs);
        self.remove_run(&run.dir, &name);
        Ok(())
    }

    /// A fresh directory for run `name` of `mode` from topic `input` to
    /// `output`, with its pipeline spec written there (a Weir run's).
    fn run_dir(
        &self,
        name: &str,
        input: &str,
        output: &str,
        mode: Mode,
    ) -> Result<Run, BenchError> {
        let dir = self.fresh_dir(name)?;
        let spec = dir.join("pipeline.yaml");
        if !matches!(mode, Mode::KafkaStreams { .. }) {
            std::fs::write(&spec, self.spec(name, input, output, mode))
                .map_err(io("writing the pipeline spec"))?;
        }
        Ok(Run { name: name.into(), input: input.into(), output: output.into(), dir, spec })
    }

    /// Remove run `name`'s data directories (in `dir`) and checkpoints.
    fn remove_run(&self, dir: &Path, name: &str) {
        remove_data(dir, &self.bench.scratch.join("storage").join(name));
    }

    /// A fresh directory `name` under the scratch directory.
    fn fresh_dir(&self, name: &str) -> Result<PathBuf, BenchError> {
        let dir = self.bench.scratch.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io("clearing a scratch directory"))?;
        }
        std::fs::create_dir_all(&dir).map_err(io("creating a scratch directory"))?;
        Ok(dir)
    }

    /// A data directory under `dir` whose compiled components are the
    /// shared cache's.
    fn data_dir(&self, dir: &Path) -> Result<PathBuf, BenchError> {
        let shared = self.bench.scratch.join("components");
        std::fs::create_dir_all(&shared).map_err(io("creating the component cache"))?;
        let mut n = 0;
        let data = loop {
            let candidate = dir.join(format!("data-{n}"));
            if !candidate.exists() {
                break candidate;
            }
            n += 1;
        };
        let components = weir_host::config::component_cache_dir(&data);
        std::fs::create_dir_all(components.parent().unwrap_or(&data))
            .map_err(io("creating a data directory"))?;
        std::os::unix::fs::symlink(&shared, &components)
            .map_err(io("linking the component cache"))?;
        Ok(data)
    }

    /// The pipeline spec of `name` run as `mode`, reading `input`, writing
    /// `output`.
    fn spec(&self, name: &str, input: &str, output: &str, mode: Mode) -> String {
        let (parallelism, source_tasks) = match mode {
            Mode::Workers { .. } => (PARTITIONS, 1),
            _ => (self.bench.process_parallelism, self.bench.source_tasks),
        };
        let wasm = self.bench.functions_dir.join("revenue.wasm");
        let storage = self.bench.scratch.join("storage").join(name);
        let delivery = if mode.exactly_once() {
            format!("delivery: exactly-once\n  transactional_id_prefix: {name}\n")
        } else {
            "delivery: at-least-once\n".to_string()
        };
        format!(
            "name: {name}\nparallelism: {parallelism}\n\
             source:\n  type: kafka\n  bootstrap_servers: {kafka}\n  topics: [{input}]\n  start: earliest\n  parallelism: {source_tasks}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink:\n  type: kafka\n  bootstrap_servers: {kafka}\n  topic: {output}\n  {delivery}\
             checkpoint: {{ interval: 1s, storage: \"file://{}\" }}\n{cluster}",
            storage.display(),
            cluster = match (mode, self.bench.ingest_interval_ms) {
                (Mode::Workers { direct: true, .. }, _) => {
                    "cluster: { input_partitioned_by_key: true }\n".to_string()
                }
                (Mode::Workers { .. }, Some(ms)) => format!("cluster: {{ ingest_interval: {ms}ms }}\n"),
                _ => String::new(),
            },
            kafka = self.bench.kafka,
        )
    }

    /// Start `mode`'s processes on `run`.
    fn start(&self, mode: Mode, run: &Run) -> Result<Vec<Proc>, BenchError> {
        match mode {
            Mode::OneProcess { .. } => {
                let data = self.data_dir(&run.dir)?;
                let log = run.dir.join("run.log");
                let mut command = Command::new(self.weir);
                command.arg("run").arg(&run.spec).arg("--data-dir").arg(&data);
                // Its own latency for the fixed-rate run: the backlog,
                // stamped before it started, falls in the warm-up.
                command.args(["--latency", "--latency-warm-up", "100ms"]);
                command.args(["--latency-log-every", "1s"]);
                Ok(vec![Proc::spawn("weir run", command, &log, false)?])
            }
            Mode::Workers { count, .. } => {
                (0..count).map(|i| self.worker(&run.spec, &run.dir, i)).collect()
            }
            Mode::KafkaStreams { exactly_once } => Ok(vec![self.kafka_streams(exactly_once, run)?]),
        }
    }

    /// Start the Kafka Streams application on `run`: application id the
    /// run's name (its changelog topic `<name>-totals-changelog`), its
    /// state in a `data-` directory of the run's, its stream threads the
    /// one-process runs' parallelism, a commit every second, its producers
    /// set as Weir's sink's.
    fn kafka_streams(&self, exactly_once: bool, run: &Run) -> Result<Proc, BenchError> {
        let class_path = kafka_streams_class_path(self.bench.kafka_streams_jar.as_deref())?;
        let state = run.dir.join("data-kafka-streams");
        let mut command = Command::new("java");
        command
            .args(["-Xmx2g", "-cp"])
            .arg(class_path)
            .arg("weir.bench.KafkaStreamsRevenue")
            .args(["--bootstrap-servers", &self.bench.kafka])
            .args(["--input", &run.input, "--output", &run.output])
            .args(["--application-id", &run.name, "--state-dir"])
            .arg(&state)
            .args(["--guarantee", if exactly_once { "exactly_once_v2" } else { "at_least_once" }])
            .args(["--threads", &self.bench.process_parallelism.to_string()])
            .args(["--commit-interval-ms", "1000"]);
        // Its producers set as Weir's Kafka sink sets its own (Kafka
        // Streams' default `linger.ms` is 100, with no compression).
        for (key, value) in weir_host::connectors::kafka::PRODUCER_SETTINGS {
            command.arg("--property").arg(format!("producer.{key}={value}"));
        }
        let mut proc =
            Proc::spawn("Kafka Streams", command, &run.dir.join("kafka-streams.log"), false)?;
        proc.thread_group = kafka_streams_thread_group;
        Ok(proc)
    }

    /// Start worker `i` (`w<i>`) of the spec at `spec`.
    fn worker(&self, spec: &Path, dir: &Path, i: usize) -> Result<Proc, BenchError> {
        let data = self.data_dir(dir)?;
        let log = dir.join(format!("worker-{i}.log"));
        let mut command = Command::new(self.weir);
        command
            .arg("worker")
            .arg(spec)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen", "127.0.0.1:0", "--worker-id"])
            .arg(format!("w{i}"));
        Proc::spawn(&format!("worker w{i}"), command, &log, true)
    }

    /// One throughput run and its fixed-rate latency run; also the
    /// broker's raw rates on its input.
    fn throughput(
        &self,
        mode: Mode,
        latency_rate: &mut Option<f64>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(RunReport, RawRates), BenchError> {
        let n = self.bench.events;
        let name = format!("{}-{}", self.run_id, mode.tag());
        let (input, output, raw) =
            (format!("{name}-in"), format!("{name}-out"), format!("{name}-raw"));
        self.kafka.create_topics(&[&input, &output, &raw])?;
        progress(&format!("{}: producing {n} orders (raw rdkafka)", mode.label()));
        let producer = self.kafka.producer()?;
        let started = Instant::now();
        produce(&producer, &input, 0..n, |id| id % THROUGHPUT_KEYS, None)?;
        let produce_rate = n as f64 / started.elapsed().as_secs_f64();
        progress(&format!("{}: reading them back read_committed", mode.label()));
        let consume_rate = self.kafka.consume_rate(&input, n)?;
        progress(&format!("{}: reading them and producing each to {raw}", mode.label()));
        let pass_through = self.watched_pass_through(&input, &raw)?;
        progress(&format!(
            "{}: broker ceiling produce {produce_rate:.0}/s, consume {consume_rate:.0}/s, \
             consume+produce {pass_through:.0}/s; starting the pipeline",
            mode.label(),
        ));
        let rates = RawRates { produce: produce_rate, consume: consume_rate, pass_through };
        let run = self.run_dir(&name, &input, &output, mode)?;
        let watcher = Watcher::checking(&self.kafka, &output, &rate_marks(n))?;
        let machine = weir_host::observe::process::machine_cpu_ticks();
        let started = Instant::now();
        let mut procs = self.start(mode, &run)?;
        watcher.wait_for(n, &mut procs, &mode.label())?;
        let cpu_seconds: f64 = procs.iter().map(|p| p.cpu_seconds()).sum();
        let mut cpu_by_thread = BTreeMap::new();
        for proc in &procs {
            for (group, seconds) in proc.cpu_by_thread() {
                *cpu_by_thread.entry(group).or_insert(0.0) += seconds;
            }
        }
        let machine_cores_busy = busy_cores_since(machine);
        let seen = watcher.snapshot();
        let total = seen.elapsed_to(n, started).as_secs_f64();
        let steady = seen.steady_rate(n, started);
        let first = seen.first.map_or(0.0, |t| t.duration_since(started).as_secs_f64());
        progress(&format!(
            "{}: {n} outputs in {total:.1} s ({:.0}/s; 10–90 %: {steady:.0}/s)",
            mode.label(),
            n as f64 / total.max(1e-9)
        ));
        // The first run's throughput from the start sets every latency
        // run's rate (an exactly-once run's 10–90 % rate can read high:
        // its outputs arrive in bursts, one per commit).
        let rate = *latency_rate.get_or_insert_with(|| {
            (n as f64 / total.max(1e-9) * self.bench.latency_share).round().max(1.0)
        });
        let latency = if self.bench.latency_seconds > 0 {
            progress(&format!(
                "{}: latency at {rate:.0} events/s for {} s",
                mode.label(),
                self.bench.latency_seconds
            ));
            let mut latency =
                self.latency(&producer, &input, &watcher, &mut procs, rate, &mode.label())?;
            if let Mode::OneProcess { .. } = mode {
                latency.in_weir = last_logged_latency(&run.dir.join("run.log"));
            }
            Some(latency)
        } else {
            None
        };
        drop(procs);
        self.remove_run(&run.dir, &name);
        if let Some(example) = &seen.wrong_example {
            progress(&format!("{}: {} wrong outputs, e.g. {example}", mode.label(), seen.wrong));
        }
        let report = RunReport {
            mode: mode.label(),
            processes: match mode {
                Mode::OneProcess { .. } | Mode::KafkaStreams { .. } => 1,
                Mode::Workers { count, .. } => count,
            },
            events_per_second: n as f64 / total.max(1e-9),
            steady_events_per_second: steady,
            first_output_seconds: first,
            cpu_seconds,
            cpu_by_thread,
            machine_cores_busy,
            outputs: seen.distinct.min(n),
            duplicates: seen.duplicates,
            wrong: seen.wrong,
            latency,
        };
        Ok((report, rates))
    }

    /// The raw pass-through's rate from `input` (the run's orders) to
    /// `output`, measured as a run's: the 10–90 % rate a reader of
    /// `output` sees while it runs (a reader the pipeline shares the
    /// machine with too).
    fn watched_pass_through(&self, input: &str, output: &str) -> Result<f64, BenchError> {
        let n = self.bench.events;
        let watcher = Watcher::start(&self.kafka, output, &rate_marks(n))?;
        let started = Instant::now();
        self.kafka.pass_through_rate(input, output, n)?;
        watcher.wait_for(n, &mut [], "raw pass-through")?;
        Ok(watcher.snapshot().steady_rate(n, started))
    }

    /// Orders at `rate` for the configured seconds, after the backlog;
    /// each output's latency.
    fn latency(
        &self,
        producer: &OrderProducer,
        input: &str,
        watcher: &Watcher,
        procs: &mut [Proc],
        rate: f64,
        label: &str,
    ) -> Result<Latency, BenchError> {
        let n = self.bench.events;
        let count = (rate * self.bench.latency_seconds as f64) as u64;
        watcher.measure_latency_from(n);
        let machine = weir_host::observe::process::machine_cpu_ticks();
        produce(producer, input, n..n + count, |id| id % THROUGHPUT_KEYS, Some(rate))?;
        watcher.wait_for(n + count, procs, label)?;
        Ok(Latency::of(rate, watcher.snapshot().latency.summary(), machine))
    }

    /// The latency of the raw pass-through (as the ceiling measures it:
    /// one consumer and one producer with the Kafka sink's settings) at
    /// `rate` orders a second, for the latency runs' seconds, on topics of
    /// its own; measured once a first few orders have passed through, as
    /// the pipeline's is measured once it runs.
    fn pass_through_latency(&self, rate: f64) -> Result<Latency, BenchError> {
        const WARM_UP: u64 = 1000;
        let label = "raw pass-through";
        let name = format!("{}-raw-latency", self.run_id);
        let (input, output) = (format!("{name}-in"), format!("{name}-out"));
        self.kafka.create_topics(&[&input, &output])?;
        let count = ((rate * self.bench.latency_seconds as f64) as u64).max(1);
        let total = WARM_UP + count;
        let watcher = Watcher::start(&self.kafka, &output, &[total])?;
        let producer = self.kafka.producer()?;
        std::thread::scope(|scope| {
            let passing = scope.spawn(|| self.kafka.pass_through_rate(&input, &output, total));
            produce(&producer, &input, 0..WARM_UP, |id| id % THROUGHPUT_KEYS, None)?;
            watcher.wait_for(WARM_UP, &mut [], label)?;
            watcher.measure_latency_from(WARM_UP);
            let machine = weir_host::observe::process::machine_cpu_ticks();
            produce(&producer, &input, WARM_UP..total, |id| id % THROUGHPUT_KEYS, Some(rate))?;
            passing.join().map_err(|_| BenchError::Io(format!("the {label} panicked")))??;
            watcher.wait_for(total, &mut [], label)?;
            Ok::<_, BenchError>(machine)
        })
        .map(|machine| Latency::of(rate, watcher.snapshot().latency.summary(), machine))
    }

    /// Two workers with state of `keys` keys, a steady input, one killed;
    /// then a third added and stopped with SIGTERM.
    fn rebalance(
        &self,
        keys: u64,
        progress: &mut dyn FnMut(&str),
    ) -> Result<RebalanceReport, BenchError> {
        let label = format!("rebalance K={keys}");
        let name = format!("{}-r{keys}", self.run_id);
        let (input, output) = (format!("{name}-in"), format!("{name}-out"));
        self.kafka.create_topics(&[&input, &output])?;
        let run =
            self.run_dir(&name, &input, &output, Mode::Workers { count: 2, direct: false })?;
        let (dir, spec) = (&run.dir, &run.spec);
        let watcher = Watcher::start(&self.kafka, &output, &[keys])?;
        let mut procs = vec![self.worker(spec, dir, 0)?, self.worker(spec, dir, 1)?];
        progress(&format!("{label}: 2 workers starting"));
        wait_assigned(&mut procs, &label)?;
        progress(&format!("{label}: loading the state: {keys} orders, one per key"));
        let producer = self.kafka.producer()?;
        let started = Instant::now();
        produce(&producer, &input, 0..keys, |id| id, None)?;
        watcher.wait_for(keys, &mut procs, &label)?;
        let load_seconds = started.elapsed().as_secs_f64();
        progress(&format!("{label}: state loaded in {load_seconds:.1} s; steady input"));
        let steady_keys = self.bench.steady_keys.clamp(1, keys);
        let stride = keys / steady_keys;
        let customers: Vec<u64> = (0..steady_keys).map(|i| i * stride).collect();
        let steady = Steady::start(
            self.kafka.producer()?,
            input.clone(),
            keys,
            customers.clone(),
            self.bench.steady_rate as f64,
        );
        std::thread::sleep(Duration::from_secs(6));
        // kill -9 the worker with more tasks (the second on a tie).
        let statuses: Vec<WorkerStatus> =
            procs.iter().map(|p| p.status()).collect::<Result<_, _>>()?;
        let tasks = |s: &WorkerStatus| s.units.iter().filter(|u| u.role == "task").count();
        let victim = if tasks(&statuses[0]) > tasks(&statuses[1]) { 0 } else { 1 };
        progress(&format!("{label}: kill -9 worker {}", statuses[victim].worker_id));
        let kill = self.handover(&watcher, &mut procs, victim, &statuses[victim], &customers, {
            |proc: &mut Proc| {
                let at = Instant::now();
                let _ = proc.child.kill();
                let _ = proc.child.wait();
                (at, at + Duration::from_secs(1))
            }
        })?;
        progress(&format!("{label}: kill -9: {}", kill.summary()));
        let sigterm = if self.bench.sigterm {
            progress(&format!("{label}: adding worker w2"));
            procs.push(self.worker(spec, dir, 2)?);
            wait_assigned(&mut procs, &label)?;
            std::thread::sleep(Duration::from_secs(5));
            let statuses: Vec<WorkerStatus> =
                procs.iter().map(|p| p.status()).collect::<Result<_, _>>()?;
            let victim = (0..procs.len()).max_by_key(|&i| tasks(&statuses[i])).unwrap_or(0);
            let status = statuses[victim].clone();
            progress(&format!("{label}: SIGTERM to worker {}", status.worker_id));
            let handover =
                self.handover(&watcher, &mut procs, victim, &status, &customers, |proc| {
                    let at = Instant::now();
                    let _ =
                        Command::new("kill").arg("-TERM").arg(proc.child.id().to_string()).status();
                    let _ = proc.child.wait();
                    (at, Instant::now() + Duration::from_millis(300))
                })?;
            progress(&format!("{label}: SIGTERM: {}", handover.summary()));
            Some(handover)
        } else {
            None
        };
        let produced = steady.stop()?;
        progress(&format!("{label}: waiting for all {produced} outputs"));
        let complete = watcher.wait_for(produced, &mut procs, &label);
        let seen = watcher.snapshot();
        drop(procs);
        self.remove_run(dir, &name);
        if let Err(error) = complete {
            progress(&format!("{label}: {error}"));
        }
        Ok(RebalanceReport {
            keys,
            load_seconds,
            kill,
            sigterm,
            produced,
            lost: produced.saturating_sub(seen.distinct),
            duplicates: seen.duplicates,
        })
    }

    /// Stop worker `victim` (whose last status is `status`) with `stop`,
    /// which returns when it stopped and from when outputs of its keys
    /// count as its successor's; measure until its tasks' keys have output
    /// again.
    fn handover(
        &self,
        watcher: &Watcher,
        procs: &mut Vec<Proc>,
        victim: usize,
        status: &WorkerStatus,
        customers: &[u64],
        stop: impl FnOnce(&mut Proc) -> (Instant, Instant),
    ) -> Result<Handover, BenchError> {
        let units: Vec<String> = status.units.iter().map(|u| u.unit.clone()).collect();
        let numbers = |role: &str| -> HashSet<u16> {
            status
                .units
                .iter()
                .filter(|u| u.role == role)
                .filter_map(|u| u.unit.rsplit('-').next()?.parse().ok())
                .collect()
        };
        let (moved_tasks, moved_inputs) = (numbers("task"), numbers("ingest"));
        let task_state_bytes =
            status.units.iter().filter(|u| u.role == "task").filter_map(|u| u.state_bytes).sum();
        let moved: Vec<u64> =
            customers.iter().copied().filter(|c| moved_tasks.contains(&task_of(*c))).collect();
        // Keys whose task stayed but whose input partition's ingest unit moved.
        let inputs_moved: Vec<u64> = customers
            .iter()
            .copied()
            .filter(|c| !moved_tasks.contains(&task_of(*c)))
            .filter(|c| moved_inputs.contains(&(input_partition(*c) as u16)))
            .collect();
        let mut victim_proc = procs.remove(victim);
        watcher.clear_mark();
        let (at, counts_from) = stop(&mut victim_proc);
        watcher.set_mark(counts_from);
        drop(victim_proc);
        // The survivors' status until every moved unit is running restored.
        let mut appeared: HashMap<String, Instant> = HashMap::new();
        let mut restored: HashMap<String, Instant> = HashMap::new();
        let deadline = at + Duration::from_secs(180);
        while Instant::now() < deadline {
            let now = Instant::now();
            for proc in procs.iter() {
                let Ok(status) = proc.status() else { continue };
                for unit in status.units.iter().filter(|u| units.contains(&u.unit)) {
                    appeared.entry(unit.unit.clone()).or_insert(now);
                    if unit.state == "running" && unit.restored_from.is_some() {
                        restored.entry(unit.unit.clone()).or_insert(now);
                    }
                }
            }
            let keys_done = {
                let seen = watcher.snapshot();
                moved.iter().chain(&inputs_moved).all(|c| seen.after_mark.contains_key(c))
            };
            if restored.len() == units.len() && keys_done {
                break;
            }
            for proc in procs.iter_mut() {
                proc.check_alive()?;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let seen = watcher.snapshot();
        let since = |c: &u64| seen.after_mark.get(c).map(|t| t.duration_since(at).as_secs_f64());
        let mut first: Vec<f64> = moved.iter().filter_map(since).collect();
        first.sort_by(f64::total_cmp);
        let moved_set: HashSet<u64> = moved.iter().chain(&inputs_moved).copied().collect();
        let others: Vec<f64> =
            customers.iter().filter(|c| !moved_set.contains(c)).filter_map(since).collect();
        let inputs: Vec<f64> = inputs_moved.iter().filter_map(since).collect();
        let restore_max = units
            .iter()
            .filter(|u| status.units.iter().any(|s| &s.unit == *u && s.role == "task"))
            .filter_map(|u| Some(restored.get(u)?.duration_since(*appeared.get(u)?)))
            .max()
            .map(|d| d.as_secs_f64());
        Ok(Handover {
            keys_moved: moved.len(),
            keys_without_output: moved.len() - first.len(),
            first_output_median_s: (!first.is_empty()).then(|| super::median_of(first.clone())),
            first_output_max_s: first.last().copied(),
            input_moved_median_s: (!inputs.is_empty()).then(|| super::median_of(inputs.clone())),
            other_keys_median_s: (!others.is_empty()).then(|| super::median_of(others.clone())),
            status_restored_s: (restored.len() == units.len())
                .then(|| restored.values().max().map(|t| t.duration_since(at).as_secs_f64()))
                .flatten(),
            restore_max_s: restore_max,
            units,
            task_state_bytes,
        })
    }
}

impl Handover {
    fn summary(&self) -> String {
        format!(
            "{} units moved, {} keys: first output median {} s, max {} s; status restored after {} s",
            self.units.len(),
            self.keys_moved,
            or_dash(self.first_output_median_s),
            or_dash(self.first_output_max_s),
            or_dash(self.status_restored_s)
        )
    }
}

/// The task (of [`PARTITIONS`]) owning customer `c`'s key (the revenue
/// function's key: the id in decimal).
fn task_of(customer: u64) -> u16 {
    let group = key_group(customer.to_string().as_bytes(), MAX_PARALLELISM);
    subtask_for_key_group(group, MAX_PARALLELISM, PARTITIONS)
}

/// The input partition of customer `c`'s orders (so the ingest unit
/// reading them is known): a multiplicative hash, so customers taken at
/// any stride spread over every partition.
fn input_partition(customer: u64) -> i32 {
    ((customer.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % u64::from(PARTITIONS)) as i32
}

/// Wait until the workers `procs` run every unit between them, the same
/// assignment twice a second apart.
fn wait_assigned(procs: &mut [Proc], label: &str) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last: Option<Vec<Vec<String>>> = None;
    while Instant::now() < deadline {
        for proc in procs.iter_mut() {
            proc.check_alive()?;
        }
        let statuses: Vec<WorkerStatus> = procs.iter().filter_map(|p| p.status().ok()).collect();
        if statuses.len() == procs.len() {
            let total = statuses.first().map_or(0, |s| s.units_total);
            let running: usize = statuses
                .iter()
                .map(|s| s.units.iter().filter(|u| u.state == "running").count())
                .sum();
            let assignment: Vec<Vec<String>> =
                statuses.iter().map(|s| s.units.iter().map(|u| u.unit.clone()).collect()).collect();
            let every_worker = assignment.iter().all(|a| !a.is_empty());
            if running == total && total > 0 && every_worker {
                if last.as_ref() == Some(&assignment) {
                    return Ok(());
                }
                last = Some(assignment);
            } else {
                last = None;
            }
        }
        std::thread::sleep(Duration::from_millis(1000));
    }
    Err(BenchError::Run {
        case: label.into(),
        message: "the workers did not settle on an assignment of every unit within 120 s".into(),
    })
}

/// A child process: `weir run` or `weir worker`, killed when dropped.
struct Proc {
    label: String,
    child: Child,
    log: PathBuf,
    /// A worker's status address.
    url: Option<String>,
    client: reqwest::blocking::Client,
    /// The group a thread's CPU is reported under, by the thread's name.
    thread_group: fn(&str) -> &'static str,
}

impl Proc {
    /// Start `command`, its output to `log`; a worker's first output
    /// line names its status address.
    fn spawn(
        label: &str,
        mut command: Command,
        log: &Path,
        worker: bool,
    ) -> Result<Self, BenchError> {
        let file = std::fs::File::create(log).map_err(io("creating a log file"))?;
        command
            // The bench's own `WEIR_LOG` if set (to look closer), else info.
            .env("WEIR_LOG", std::env::var("WEIR_LOG").unwrap_or_else(|_| "info".into()))
            .env_remove("WEIR_FAULT")
            .stdin(Stdio::null())
            .stdout(if worker { Stdio::piped() } else { Stdio::null() })
            .stderr(file);
        let mut child = command.spawn().map_err(io("starting a child process"))?;
        let mut url = None;
        if worker {
            let stdout = child.stdout.take().expect("piped");
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut lines = BufReader::new(stdout).lines();
                while let Some(Ok(line)) = lines.next() {
                    if let Some((_, address)) = line.split_once(" listening on ") {
                        let _ = tx.send(address.trim().to_string());
                    }
                }
            });
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(address) => url = Some(address),
                Err(_) => {
                    let _ = child.kill();
                    return Err(BenchError::Run {
                        case: label.into(),
                        message: format!(
                            "did not say where it listens; its log {}: {}",
                            log.display(),
                            tail(log)
                        ),
                    });
                }
            }
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| BenchError::Io(format!("an HTTP client: {e}")))?;
        Ok(Self { label: label.into(), child, log: log.to_path_buf(), url, client, thread_group })
    }

    /// A worker's `/v1/worker`.
    fn status(&self) -> Result<WorkerStatus, BenchError> {
        let url = format!("{}/v1/worker", self.url.as_deref().unwrap_or_default());
        let fail = |e: reqwest::Error| BenchError::Run {
            case: self.label.clone(),
            message: format!("asking {url}: {e}"),
        };
        self.client
            .get(&url)
            .send()
            .and_then(|r| r.error_for_status())
            .map_err(fail)?
            .json()
            .map_err(fail)
    }

    /// An error if the process has ended.
    fn check_alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(BenchError::Run {
                case: self.label.clone(),
                message: format!(
                    "ended ({status}); its log {}: {}",
                    self.log.display(),
                    tail(&self.log)
                ),
            }),
            Err(e) => Err(BenchError::Io(format!("{}: {e}", self.label))),
        }
    }

    /// User + system CPU seconds of the process so far.
    fn cpu_seconds(&self) -> f64 {
        weir_host::observe::process::process_cpu(Path::new(&format!(
            "/proc/{}/stat",
            self.child.id()
        )))
        .map_or(0.0, |(_, s)| s)
    }

    /// Its CPU seconds by thread group; `other` includes ended threads.
    fn cpu_by_thread(&self) -> BTreeMap<String, f64> {
        let mut groups = BTreeMap::new();
        let total = self.cpu_seconds();
        let mut counted = 0.0;
        if let Ok(entries) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) {
            for entry in entries.flatten() {
                if let Some((name, seconds)) =
                    weir_host::observe::process::process_cpu(&entry.path().join("stat"))
                {
                    counted += seconds;
                    let group = (self.thread_group)(&name);
                    *groups.entry(group.to_string()).or_insert(0.0) += seconds;
                }
            }
        }
        *groups.entry("other".to_string()).or_insert(0.0) += (total - counted).max(0.0);
        groups
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The group a pipeline thread's CPU is reported under, by its name.
fn thread_group(name: &str) -> &'static str {
    if name.starts_with("source-weir-") {
        // A task reading its exchange topic partition (cluster mode).
        "exchange source"
    } else if name.starts_with("source-") {
        "input source"
    } else if name.starts_with("process-") || name.starts_with("keyed-") {
        // The keyed stage's subtasks (`keyed-0` in a cluster task).
        "keyed"
    } else if name == "sink" {
        "sink"
    } else if name.starts_with("rdk:") {
        "kafka client"
    } else {
        "other"
    }
}

/// The group a Kafka Streams thread's CPU is reported under, by its name
/// as `/proc` has it (15 characters): its stream threads
/// (`ks-StreamThread-1`), the Kafka clients' own threads (producers'
/// network threads, the consumers' heartbeat threads, the admin client),
/// RocksDB's background threads, the JVM's (GC, JIT compilers, VM), and the
/// rest (`main`, the state updaters, the cleaner).
fn kafka_streams_thread_group(name: &str) -> &'static str {
    const JVM: [&str; 14] = [
        "GC Thread",
        "G1 ",
        "C1 CompilerThre",
        "C2 CompilerThre",
        "VM ",
        "Sweeper thread",
        "Service Thread",
        "Monitor Deflati",
        "Signal Dispatch",
        "Finalizer",
        "Reference Handl",
        "Common-Cleaner",
        "Notification Th",
        "Attach Listener",
    ];
    if name.contains("StreamThread") {
        "stream thread"
    } else if name.starts_with("kafka-") {
        "kafka client"
    } else if name.starts_with("rocksdb") {
        "rocksdb"
    } else if JVM.iter().any(|prefix| name.starts_with(prefix)) {
        "jvm"
    } else {
        "other"
    }
}

/// The class path of the Kafka Streams application: its jar at `jar` and
/// the jars in `lib/` beside it, as `mvn package` in `bench/kstreams`
/// leaves them; an error saying how to build it if there is none.
fn kafka_streams_class_path(jar: Option<&Path>) -> Result<String, BenchError> {
    let build = "build it with `mvn -q -f bench/kstreams/pom.xml package` \
                 (or run `scripts/dev bench-kstreams`)";
    let Some(jar) = jar else {
        return Err(BenchError::Io(format!(
            "the kafka-streams runs need --kafka-streams-jar \
             bench/kstreams/target/weir-bench-kstreams-1.jar: {build}"
        )));
    };
    let lib = jar.parent().unwrap_or(Path::new(".")).join("lib");
    if !jar.is_file() || !lib.is_dir() {
        return Err(BenchError::Io(format!(
            "{} (and its lib/ beside it) not found: {build}",
            jar.display()
        )));
    }
    Ok(format!("{}:{}/*", jar.display(), lib.display()))
}

/// Remove a run's checkpoints and its processes' data directories under
/// `dir` (its spec and logs stay).
fn remove_data(dir: &Path, storage: &Path) {
    let _ = std::fs::remove_dir_all(storage);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("data-") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The last lines of a log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// `/proc/cpuinfo`'s first model name.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn or_dash(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn io(doing: &'static str) -> impl Fn(std::io::Error) -> BenchError {
    move |e| BenchError::Io(format!("{doing}: {e}"))
}

pub(crate) fn kafka_fail(
    doing: impl Into<String>,
) -> impl FnOnce(rdkafka::error::KafkaError) -> BenchError {
    let doing = doing.into();
    move |e| BenchError::Io(format!("kafka: {doing}: {e}"))
}

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The broker.
pub(crate) struct Kafka {
    servers: String,
}

/// Counts deliveries, and failed ones.
#[derive(Default)]
pub(crate) struct Deliveries {
    reports: AtomicU64,
    failed: AtomicU64,
    error: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        self.reports.fetch_add(1, Ordering::Relaxed);
        if let Err((error, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
        }
    }
}

impl CountsDeliveries for Deliveries {
    fn reports(&self) -> u64 {
        self.reports.load(Ordering::Relaxed)
    }
}

/// Served by the thread that sends, as Weir's Kafka sink serves its own.
pub(crate) type OrderProducer = BaseProducer<Deliveries>;

impl Kafka {
    pub(crate) fn new(servers: &str) -> Result<Self, BenchError> {
        let kafka = Self { servers: servers.to_string() };
        let probe: BaseConsumer =
            kafka.config().create().map_err(kafka_fail("creating a client"))?;
        probe.fetch_metadata(None, Duration::from_secs(10)).map_err(kafka_fail(format!(
            "no broker answers at {servers} (start one: scripts/dev kafka start)"
        )))?;
        Ok(kafka)
    }

    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.servers);
        config
    }

    pub(crate) fn producer(&self) -> Result<OrderProducer, BenchError> {
        self.config()
            .set("linger.ms", "5")
            .set("batch.size", "1000000")
            .set("queue.buffering.max.messages", "1000000")
            .set("queue.buffering.max.kbytes", "1048576")
            .create_with_context(Deliveries::default())
            .map_err(kafka_fail("creating a producer"))
    }

    /// A producer set as Weir's Kafka sink sets its own.
    fn sink_like_producer(&self) -> Result<OrderProducer, BenchError> {
        let mut config = self.config();
        for (key, value) in weir_host::connectors::kafka::PRODUCER_SETTINGS {
            config.set(key, value);
        }
        config.create_with_context(Deliveries::default()).map_err(kafka_fail("creating a producer"))
    }

    fn consumer(&self, topic: &str) -> Result<BaseConsumer, BenchError> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", format!("{topic}-bench-reader"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "10")
            // As Weir's Kafka source sets it.
            .set("fetch.queue.backoff.ms", weir_host::connectors::kafka::FETCH_QUEUE_BACKOFF_MS)
            .create()
            .map_err(kafka_fail("creating a consumer"))?;
        let mut list = TopicPartitionList::new();
        for partition in 0..i32::from(PARTITIONS) {
            list.add_partition_offset(topic, partition, Offset::Beginning)
                .map_err(kafka_fail("assigning partitions"))?;
        }
        consumer.assign(&list).map_err(kafka_fail(format!("reading {topic}")))?;
        Ok(consumer)
    }

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>, BenchError> {
        self.config().create().map_err(kafka_fail("creating an admin client"))
    }

    fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, BenchError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("a runtime for the admin client"))?;
        Ok(runtime.block_on(future))
    }

    /// Create `topics` with [`PARTITIONS`] partitions each.
    pub(crate) fn create_topics(&self, topics: &[&str]) -> Result<(), BenchError> {
        let admin = self.admin()?;
        let new: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|t| NewTopic::new(t, i32::from(PARTITIONS), TopicReplication::Fixed(-1)))
            .collect();
        let results = Self::block_on(admin.create_topics(&new, &AdminOptions::new()))?
            .map_err(kafka_fail("creating topics"))?;
        for result in results {
            if let Err((topic, code)) = result {
                return Err(BenchError::Io(format!("kafka: creating topic {topic}: {code}")));
            }
        }
        Ok(())
    }

    /// Delete every topic whose name contains `part` (best effort).
    pub(crate) fn delete_topics_containing(&self, part: &str) {
        let Ok(admin) = self.admin() else { return };
        let Ok(probe) = self.config().create::<BaseConsumer>() else { return };
        let Ok(metadata) = probe.fetch_metadata(None, Duration::from_secs(10)) else { return };
        let names: Vec<String> = metadata
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .filter(|n| n.contains(part))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        if !names.is_empty() {
            let _ = Self::block_on(admin.delete_topics(&names, &AdminOptions::new()));
        }
    }

    /// Read `count` records of `topic` from the beginning,
    /// `read_committed`, handing each to `each`.
    fn read_all(
        &self,
        topic: &str,
        count: u64,
        mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>) -> Result<(), BenchError>,
    ) -> Result<(), BenchError> {
        let consumer = self.consumer(topic)?;
        let mut read = 0;
        let mut last = Instant::now();
        while read < count {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    each(&message)?;
                    read += 1;
                    last = Instant::now();
                }
                Some(Err(e)) => return Err(kafka_fail(format!("reading {topic}"))(e)),
                None if last.elapsed() > Duration::from_secs(30) => {
                    return Err(BenchError::Io(format!(
                        "kafka: only {read} of {count} records of {topic} readable"
                    )))
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Read `count` records of `topic` from the beginning,
    /// `read_committed`; events/s.
    fn consume_rate(&self, topic: &str, count: u64) -> Result<f64, BenchError> {
        let started = Instant::now();
        self.read_all(topic, count, |_| Ok(()))?;
        Ok(count as f64 / started.elapsed().as_secs_f64())
    }

    /// Read `count` records of `input` from the beginning,
    /// `read_committed`, producing each (its key, value and timestamp) to
    /// `output`, until all are delivered; events/s.
    fn pass_through_rate(&self, input: &str, output: &str, count: u64) -> Result<f64, BenchError> {
        let producer = self.sink_like_producer()?;
        let started = Instant::now();
        self.read_all(input, count, |message| {
            let mut record: BaseRecord<'_, [u8], [u8], ()> =
                BaseRecord::to(output).payload(message.payload().unwrap_or_default());
            if let Some(key) = message.key() {
                record = record.key(key);
            }
            if let Some(timestamp) = message.timestamp().to_millis() {
                record = record.timestamp(timestamp);
            }
            send_waiting(&producer, record, Duration::from_millis(1), &|| false)
                .map_err(kafka_fail(format!("producing to {output}")))?;
            serve_deliveries(&producer);
            Ok(())
        })?;
        flush(&producer)?;
        Ok(count as f64 / started.elapsed().as_secs_f64())
    }
}

/// One order, as the revenue function reads it.
fn order(id: u64, customer: u64) -> String {
    let amount = amount_cents(id);
    format!(
        "{{\"order_id\":{id},\"customer_id\":{customer},\"amount\":{}.{:02}}}",
        amount / 100,
        amount % 100
    )
}

/// Order `id`'s amount in cents: 1.00 to 100.96.
fn amount_cents(id: u64) -> u64 {
    (1 + id % 100) * 100 + id % 97
}

/// Produce orders `ids` (customer `customer(id)`, keyed by it) to
/// `topic`, as fast as possible or at `rate` a second (each record
/// stamped with its produce time), and wait until all are delivered.
fn produce(
    producer: &OrderProducer,
    topic: &str,
    ids: std::ops::Range<u64>,
    customer: impl Fn(u64) -> u64,
    rate: Option<f64>,
) -> Result<(), BenchError> {
    let started = Instant::now();
    let first = ids.start;
    for id in ids {
        if let Some(rate) = rate {
            let due = started + Duration::from_secs_f64((id - first) as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        send(producer, topic, id, customer(id))?;
    }
    flush(producer)
}

/// Send one order, waiting for queue space.
fn send(producer: &OrderProducer, topic: &str, id: u64, customer: u64) -> Result<(), BenchError> {
    let key = customer.to_string();
    let value = order(id, customer);
    let record: BaseRecord<'_, str, str, ()> = BaseRecord::to(topic)
        .key(key.as_str())
        .payload(value.as_str())
        .partition(input_partition(customer))
        .timestamp(now_ms());
    send_waiting(producer, record, Duration::from_millis(1), &|| false)
        .map_err(kafka_fail(format!("producing to {topic}")))?;
    serve_deliveries(producer);
    Ok(())
}

pub(crate) fn flush(producer: &OrderProducer) -> Result<(), BenchError> {
    producer.flush(Duration::from_secs(120)).map_err(kafka_fail("flushing the producer"))?;
    let context = producer.context();
    if context.failed.load(Ordering::Relaxed) > 0 {
        return Err(BenchError::Io(format!(
            "kafka: {} orders not delivered: {}",
            context.failed.load(Ordering::Relaxed),
            context
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_default()
        )));
    }
    Ok(())
}

/// A steady input on a thread: orders from `first` on, cycling over
/// `customers`, at `rate` a second.
struct Steady {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<u64, BenchError>>,
}

impl Steady {
    fn start(
        producer: OrderProducer,
        topic: String,
        first: u64,
        customers: Vec<u64>,
        rate: f64,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut id = first;
            while !flag.load(Ordering::Relaxed) {
                let due = started + Duration::from_secs_f64((id - first) as f64 / rate);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let customer = customers[((id - first) % customers.len() as u64) as usize];
                send(&producer, &topic, id, customer)?;
                id += 1;
            }
            flush(&producer)?;
            Ok(id)
        });
        Self { stop, thread }
    }

    /// Stop; the number of orders in the topic (ids `0..n`).
    fn stop(self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| BenchError::Io("the steady producer panicked".into()))?
    }
}

/// What the output consumer has seen.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// Distinct orders.
    distinct: u64,
    /// Orders seen again.
    duplicates: u64,
    /// When the first output was read.
    first: Option<Instant>,
    /// When `distinct` reached each of the targets.
    reached: BTreeMap<u64, Instant>,
    /// Latencies of orders from `latency_from` on.
    latency: LatencyRecorder,
    /// Each customer's first output read after the mark.
    after_mark: HashMap<u64, Instant>,
    /// Distinct orders whose output was not the expected one (a checking
    /// watcher's).
    wrong: u64,
    /// The first of them.
    wrong_example: Option<String>,
}

impl Seen {
    /// How long after `started` the `n`th distinct order was read (zero if
    /// it was not).
    fn elapsed_to(&self, n: u64, started: Instant) -> Duration {
        self.reached.get(&n).map_or(Duration::ZERO, |t| t.duration_since(started))
    }

    /// The rate between the reads of [`rate_marks`]`(n)`'s 10 % and 90 %
    /// marks (the whole run's without them).
    fn steady_rate(&self, n: u64, started: Instant) -> f64 {
        let [from, to, _] = rate_marks(n);
        match (self.reached.get(&from), self.reached.get(&to)) {
            (Some(a), Some(b)) if b > a => (to - from) as f64 / (*b - *a).as_secs_f64(),
            _ => n as f64 / self.elapsed_to(n, started).as_secs_f64().max(1e-9),
        }
    }
}

/// The counts of `n` outputs whose read times a rate is measured
/// between: 10 % and 90 %, and the last.
fn rate_marks(n: u64) -> [u64; 3] {
    [n / 10, n * 9 / 10, n]
}

#[derive(Default)]
struct WatchState {
    seen: Seen,
    ids: Vec<bool>,
    targets: Vec<u64>,
    latency_from: Option<u64>,
    mark: Option<Instant>,
}

/// The output each order of a throughput run must give, byte for byte as
/// the revenue function writes it: order `id` is customer
/// `id % THROUGHPUT_KEYS`'s ([`order`]), and its output carries the
/// customer's total over its orders up to `id`.
#[derive(Default)]
struct Expected {
    /// By order id: its customer's total after it, in cents.
    totals: Vec<u64>,
    /// The expected output, written again for each order.
    text: Vec<u8>,
}

impl Expected {
    /// Whether `value` is order `id`'s output.
    fn matches(&mut self, id: u64, value: &[u8]) -> bool {
        while self.totals.len() as u64 <= id {
            let next = self.totals.len() as u64;
            let before = next.checked_sub(THROUGHPUT_KEYS).map_or(0, |o| self.totals[o as usize]);
            self.totals.push(before + amount_cents(next));
        }
        self.text.clear();
        let (customer, amount) = (id % THROUGHPUT_KEYS, amount_cents(id));
        revenue_output(&mut self.text, id, customer, amount, self.totals[id as usize]);
        self.text == value
    }
}

/// The revenue function's output for order `id` of `customer`, of `amount`
/// cents, after which the customer's total is `total` cents:
/// `{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}`.
fn revenue_output(out: &mut Vec<u8>, id: u64, customer: u64, amount: u64, total: u64) {
    out.extend_from_slice(b"{\"order_id\":");
    push_decimal(out, id);
    out.extend_from_slice(b",\"customer_id\":");
    push_decimal(out, customer);
    out.extend_from_slice(b",\"amount\":");
    push_cents(out, amount);
    out.extend_from_slice(b",\"total\":");
    push_cents(out, total);
    out.push(b'}');
}

/// `value` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// `cents` with two decimals: 5000 → `50.00`, 7 → `0.07`.
fn push_cents(out: &mut Vec<u8>, cents: u64) {
    push_decimal(out, cents / 100);
    out.extend_from_slice(&[b'.', b'0' + (cents % 100 / 10) as u8, b'0' + (cents % 10) as u8]);
}

/// Reads the output topic `read_committed` on a thread of its own.
struct Watcher {
    state: Arc<Mutex<WatchState>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    error: Arc<Mutex<Option<String>>>,
}

impl Watcher {
    /// Watch `topic`, noting when the distinct outputs reach `targets`.
    fn start(kafka: &Kafka, topic: &str, targets: &[u64]) -> Result<Self, BenchError> {
        Self::watch(kafka, topic, targets, false)
    }

    /// Watch a throughput run's output `topic`, also checking each output
    /// against [`Expected`].
    fn checking(kafka: &Kafka, topic: &str, targets: &[u64]) -> Result<Self, BenchError> {
        Self::watch(kafka, topic, targets, true)
    }

    fn watch(kafka: &Kafka, topic: &str, targets: &[u64], check: bool) -> Result<Self, BenchError> {
        let consumer = kafka.consumer(topic)?;
        let state =
            Arc::new(Mutex::new(WatchState { targets: targets.to_vec(), ..Default::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let (shared, flag, failure) = (Arc::clone(&state), Arc::clone(&stop), Arc::clone(&error));
        let thread = std::thread::spawn(move || {
            let mut expected = check.then(Expected::default);
            // The next offset of each partition: a record before it is one
            // read again (the consumer reset after a broker's trouble), not
            // an output written twice, which has an offset of its own.
            let mut next_offsets: HashMap<i32, i64> = HashMap::new();
            while !flag.load(Ordering::Relaxed) {
                let Some(message) = consumer.poll(Duration::from_millis(50)) else { continue };
                let message = match message {
                    Ok(message) => message,
                    Err(e) => {
                        *failure.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(e.to_string());
                        continue;
                    }
                };
                let next = next_offsets.entry(message.partition()).or_insert(0);
                if message.offset() < *next {
                    continue;
                }
                *next = message.offset() + 1;
                let now = Instant::now();
                let read_ms = now_ms();
                let value = message.payload().unwrap_or_default();
                let (Some(id), Some(customer)) =
                    (number(value, b"\"order_id\":"), number(value, b"\"customer_id\":"))
                else {
                    continue;
                };
                let timestamp = message.timestamp().to_millis().unwrap_or(read_ms);
                let right = expected.as_mut().is_none_or(|e| e.matches(id, value));
                let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
                let state = &mut *state;
                let slot = id as usize;
                if state.ids.len() <= slot {
                    state.ids.resize((slot + 1).max(state.ids.len() * 2), false);
                }
                if state.ids[slot] {
                    state.seen.duplicates += 1;
                    continue;
                }
                state.ids[slot] = true;
                state.seen.distinct += 1;
                if !right {
                    state.seen.wrong += 1;
                    state.seen.wrong_example.get_or_insert_with(|| {
                        String::from_utf8_lossy(value).chars().take(200).collect()
                    });
                }
                state.seen.first.get_or_insert(now);
                if state.targets.contains(&state.seen.distinct) {
                    state.seen.reached.insert(state.seen.distinct, now);
                }
                if state.latency_from.is_some_and(|from| id >= from) {
                    state.seen.latency.record_micros((read_ms - timestamp) * 1000);
                }
                if state.mark.is_some_and(|mark| now >= mark) {
                    state.seen.after_mark.entry(customer).or_insert(now);
                }
            }
        });
        Ok(Self { state, stop, thread: Some(thread), error })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot(&self) -> Seen {
        self.lock().seen.clone()
    }

    fn measure_latency_from(&self, id: u64) {
        self.lock().latency_from = Some(id);
    }

    fn clear_mark(&self) {
        let mut state = self.lock();
        state.mark = None;
        state.seen.after_mark.clear();
    }

    /// Outputs read from `at` on count as after the mark.
    fn set_mark(&self, at: Instant) {
        self.lock().mark = Some(at);
    }

    /// Wait until `count` distinct orders were read, while `procs` live
    /// and the output keeps moving.
    fn wait_for(&self, count: u64, procs: &mut [Proc], label: &str) -> Result<(), BenchError> {
        let mut last = (self.snapshot().distinct, Instant::now());
        loop {
            let distinct = self.snapshot().distinct;
            if distinct >= count {
                return Ok(());
            }
            if distinct != last.0 {
                last = (distinct, Instant::now());
            } else if last.1.elapsed() > STALL {
                let error = self.error.lock().unwrap_or_else(PoisonError::into_inner).clone();
                return Err(BenchError::Run {
                    case: label.into(),
                    message: format!(
                        "only {distinct} of {count} outputs after {} s without progress{}",
                        STALL.as_secs(),
                        error.map(|e| format!(" (consumer: {e})")).unwrap_or_default()
                    ),
                });
            }
            for proc in procs.iter_mut() {
                proc.check_alive()?;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The unsigned number after `field` in a JSON text.
fn number(text: &[u8], field: &[u8]) -> Option<u64> {
    let at = text.windows(field.len()).position(|w| w == field)? + field.len();
    let digits = text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&text[at..at + digits]).ok()?.parse().ok()
}

/// A latency's table cells: rate, busy cores, p50, p90, p99, max, and
/// in Weir p50 and p99 (blank if none).
fn latency_cells(latency: Option<&Latency>) -> [String; 8] {
    latency.map_or_else(Default::default, |l| {
        let [rate, p50, p90, p99, max] =
            [l.rate, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms].map(|v| format!("{v:.0}"));
        let [in_p50, in_p99] = l
            .in_weir
            .map_or_else(Default::default, |w| [w.p50_ms, w.p99_ms].map(|v| format!("{v:.0}")));
        [rate, format!("{:.2}", l.cores_busy), p50, p90, p99, max, in_p50, in_p99]
    })
}

/// Write `report` as the table.
pub fn write_table(report: &ClusterReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "revenue pipeline, Kafka → key/process (Wasm) → Kafka; {} input partitions; P = {} in one process ({} source task{}), {} tasks in a cluster; checkpoint 1 s to {}{}",
        report.partitions,
        report.process_parallelism,
        report.source_tasks,
        if report.source_tasks == 1 { "" } else { "s" },
        report.partitions,
        report.storage,
        report.ingest_interval_ms.map_or(String::new(), |ms| format!("; ingest units every {ms} ms")),
    )?;
    writeln!(
        out,
        "{} ({} cores; broker {} on the same machine); {} orders per run",
        report.cpu_model, report.cores, report.kafka, report.events
    )?;
    writeln!(
        out,
        "broker ceiling (raw rdkafka, medians of {}): produce {:.0} events/s, consume read_committed {:.0} events/s, consume+produce {:.0} events/s",
        report.ceiling.produce.len(),
        report.ceiling.produce_median,
        report.ceiling.consume_median,
        report.ceiling.pass_through_median
    )?;
    writeln!(out)?;
    let row = |cells: [&str; 17]| {
        format!(
            "{:<17} {:>9} {:>9} {:>7} {:>6} {:>8} {:>8} {:>8} {:>6} | {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7],
            cells[8], cells[9], cells[10], cells[11], cells[12], cells[13], cells[14],
            cells[15], cells[16]
        )
    };
    writeln!(
        out,
        "{}",
        row([
            "", "events/s", "10-90%", "first", "vs 1", "vs", "vs raw", "cpu s", "cores", "latency",
            "cores", "p50", "p90", "p99", "max", "in weir", "p99"
        ])
    )?;
    writeln!(
        out,
        "{}",
        row([
            "run", "", "events/s", "out s", "proc", "ceiling", "c+p", "per 1M", "busy", "at ev/s",
            "busy", "ms", "ms", "ms", "ms", "p50 ms", "ms"
        ])
    )?;
    let over = |rate: f64, base: f64| rate / base.max(1e-9);
    let one =
        report.runs.iter().find(|r| r.mode == Mode::OneProcess { exactly_once: true }.label());
    for run in &report.runs {
        // Blank without an exactly-once one-process run to compare with.
        let vs_one = one.map_or(String::new(), |o| {
            format!("{:.2}", over(run.steady_events_per_second, o.steady_events_per_second))
        });
        let [rate, busy, p50, p90, p99, max, in_p50, in_p99] = latency_cells(run.latency.as_ref());
        let cells = [
            run.mode.clone(),
            format!("{:.0}", run.events_per_second),
            format!("{:.0}", run.steady_events_per_second),
            format!("{:.1}", run.first_output_seconds),
            vs_one,
            format!("{:.2}", over(run.steady_events_per_second, report.ceiling.limit())),
            format!(
                "{:.2}",
                over(run.steady_events_per_second, report.ceiling.pass_through_median)
            ),
            format!("{:.1}", run.cpu_seconds / (report.events as f64 / 1e6)),
            format!("{:.2}", run.machine_cores_busy),
            rate,
            busy,
            p50,
            p90,
            p99,
            max,
            in_p50,
            in_p99,
        ];
        writeln!(out, "{}", row(cells.each_ref().map(String::as_str)))?;
    }
    if let Some(latency) = &report.ceiling.pass_through_latency {
        let latency = latency_cells(Some(latency));
        let mut cells: [&str; 17] = [""; 17];
        cells[0] = "raw c+p";
        cells[9..].copy_from_slice(&latency.each_ref().map(String::as_str));
        writeln!(out, "{}", row(cells))?;
    }
    writeln!(
        out,
        "(EO: exactly-once, ALO: at-least-once Kafka sink; workers are exactly-once; c+p: the raw consume+produce rate, its latency at the same rate; latency: from the input record's timestamp to the bench's reader, in weir: to the sink's write (EO: its commit); cores busy: the machine's, during the latency run)"
    )?;
    if report.runs.iter().any(|r| r.mode.starts_with("Kafka Streams")) {
        writeln!(
            out,
            "(Kafka Streams {KAFKA_STREAMS_VERSION}, bench/kstreams, one JVM: {} stream threads, RocksDB store, commit.interval.ms 1000, producers as Weir's sink's; EO: exactly_once_v2, ALO: at_least_once)",
            report.process_parallelism
        )?;
    }
    writeln!(out)?;
    writeln!(out, "CPU seconds per 1M events by thread (sum over the run's processes):")?;
    for run in &report.runs {
        let parts: Vec<String> = run
            .cpu_by_thread
            .iter()
            .map(|(group, s)| format!("{group} {:.1}", s / (report.events as f64 / 1e6)))
            .collect();
        writeln!(out, "{:<17} {}", run.mode, parts.join(", "))?;
    }
    for run in &report.runs {
        if run.outputs != report.events || run.duplicates > 0 || run.wrong > 0 {
            writeln!(
                out,
                "{}: {} distinct outputs of {}, {} duplicates, {} wrong",
                run.mode, run.outputs, report.events, run.duplicates, run.wrong
            )?;
        }
    }
    if report.rebalance.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "rebalance: 2 workers, one stopped; seconds from the signal to the first committed output"
    )?;
    writeln!(
        out,
        "of each key whose task moved (median, max), whose input partition moved (median), of the other keys (median)"
    )?;
    writeln!(
        out,
        "{:<8} {:>7} {:<8} {:>5} {:>5} {:>7} {:>6} {:>6} {:>6} {:>7} {:>8} {:>7} {:>9}",
        "keys",
        "load s",
        "stop",
        "units",
        "keys",
        "median",
        "max",
        "input",
        "others",
        "status",
        "restore",
        "state",
        "lost/dup"
    )?;
    for r in &report.rebalance {
        for (how, h) in [("kill -9", Some(&r.kill)), ("SIGTERM", r.sigterm.as_ref())] {
            let Some(h) = h else { continue };
            writeln!(
                out,
                "{:<8} {:>7.1} {:<8} {:>5} {:>5} {:>7} {:>6} {:>6} {:>6} {:>7} {:>8} {:>6.0}M {:>9}",
                r.keys,
                r.load_seconds,
                how,
                h.units.len(),
                h.keys_moved,
                or_dash(h.first_output_median_s),
                or_dash(h.first_output_max_s),
                or_dash(h.input_moved_median_s),
                or_dash(h.other_keys_median_s),
                or_dash(h.status_restored_s),
                or_dash(h.restore_max_s),
                h.task_state_bytes as f64 / f64::from(1 << 20),
                format!("{}/{}", r.lost, r.duplicates)
            )?;
        }
    }
    writeln!(
        out,
        "(units: the stopped worker's; keys: steady-input keys whose task moved; status: until the survivors' /v1/worker showed every moved unit running with restored_from; restore: longest assigned → restored of a moved task; state: the moved tasks' state bytes)"
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_host::specification::PipelineSpec;

    #[test]
    fn a_run_s_own_latency_is_its_last_logged_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        assert!(last_logged_latency(&log).is_none());
        let line = |count: u64, p50: u64| {
            format!(
                "2026-12-03T18:47:12.527344Z  INFO weir_host::observe::latency: {LATENCY_SO_FAR} \
                 count={count} warm_up=9 early=0 p50_us={p50} p90_us=11407 p99_us=33439 \
                 p999_us=38079 max_us=39231\n"
            )
        };
        let text = format!("{}INFO checkpoint 1 complete\n{}", line(10, 2481), line(20, 3500));
        std::fs::write(&log, text).unwrap();
        let latest = last_logged_latency(&log).unwrap();
        assert_eq!((latest.records, latest.p50_ms, latest.p99_ms), (20, 3.5, 33.439));
    }

    #[test]
    fn orders_and_outputs_parse() {
        let text = order(114, 7);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["order_id"], 114);
        assert_eq!(number(text.as_bytes(), b"\"order_id\":"), Some(114));
        let output = br#"{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}"#;
        assert_eq!(number(output, b"\"customer_id\":"), Some(1));
        assert_eq!(number(output, b"\"missing\":"), None);
    }

    #[test]
    fn modes_parse_by_name() {
        for mode in Mode::DEFAULT {
            assert_eq!(Mode::parse(&mode.name()), Some(mode), "{}", mode.name());
        }
        let names = ["1-worker", "one-process", "one-process-alo", "2-workers"];
        assert_eq!(Mode::DEFAULT.map(Mode::name), names.map(String::from));
        assert_eq!(Mode::parse("3-workers"), Some(Mode::Workers { count: 3, direct: false }));
        assert_eq!(Mode::parse("1-worker-direct"), Some(Mode::Workers { count: 1, direct: true }));
        assert_eq!(Mode::parse("2-workers-direct"), Some(Mode::Workers { count: 2, direct: true }));
        assert_eq!(Mode::Workers { count: 2, direct: true }.name(), "2-workers-direct");
        assert_eq!(Mode::parse("0-workers-direct"), None);
        assert_eq!(Mode::parse("0-workers"), None);
        assert_eq!(Mode::parse("one"), None);
        assert!(!Mode::OneProcess { exactly_once: false }.exactly_once());
        assert!(Mode::Workers { count: 2, direct: false }.exactly_once());
        for (name, exactly_once) in [("kafka-streams", true), ("kafka-streams-alo", false)] {
            let mode = Mode::parse(name).unwrap();
            assert_eq!(mode, Mode::KafkaStreams { exactly_once });
            assert_eq!(mode.name(), name);
            assert_eq!(mode.exactly_once(), exactly_once);
            assert!(Mode::NAMES.contains(name));
        }
    }

    #[test]
    fn kafka_streams_needs_its_jar_and_lib() {
        let error = kafka_streams_class_path(None).unwrap_err().to_string();
        assert!(error.contains("--kafka-streams-jar"), "{error}");
        let dir = tempfile::tempdir().unwrap();
        let jar = dir.path().join("weir-bench-kstreams-1.jar");
        let error = kafka_streams_class_path(Some(&jar)).unwrap_err().to_string();
        assert!(error.contains("mvn -q -f bench/kstreams/pom.xml package"), "{error}");
        std::fs::write(&jar, b"").unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        let class_path = kafka_streams_class_path(Some(&jar)).unwrap();
        assert_eq!(class_path, format!("{}:{}/lib/*", jar.display(), dir.path().display()));
    }

    #[test]
    fn thread_names_group() {
        assert_eq!(thread_group("source-weir-wb1"), "exchange source");
        assert_eq!(thread_group("source-source"), "input source");
        assert_eq!(thread_group("process-3"), "keyed");
        assert_eq!(thread_group("keyed-0"), "keyed");
        assert_eq!(thread_group("rdk:broker1"), "kafka client");
        assert_eq!(thread_group("coordinator"), "other");
        // As /proc names a Kafka Streams JVM's threads (15 characters).
        assert_eq!(kafka_streams_thread_group("ks-StreamThread"), "stream thread");
        assert_eq!(kafka_streams_thread_group("kafka-producer-"), "kafka client");
        assert_eq!(kafka_streams_thread_group("kafka-coordinat"), "kafka client");
        assert_eq!(kafka_streams_thread_group("rocksdb:low"), "rocksdb");
        assert_eq!(kafka_streams_thread_group("C2 CompilerThre"), "jvm");
        assert_eq!(kafka_streams_thread_group("GC Thread#1"), "jvm");
        assert_eq!(kafka_streams_thread_group("ks-StateUpdater"), "other");
        assert_eq!(kafka_streams_thread_group("java"), "other");
    }

    #[test]
    fn outputs_are_checked_byte_for_byte() {
        let mut text = Vec::new();
        revenue_output(&mut text, 114, 1, 3000, 5000);
        assert_eq!(text, br#"{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}"#);
        text.clear();
        revenue_output(&mut text, 0, 0, 7, 10);
        assert_eq!(text, br#"{"order_id":0,"customer_id":0,"amount":0.07,"total":0.10}"#);
        // The running totals, as the revenue function keeps them.
        let mut totals: HashMap<u64, u64> = HashMap::new();
        let mut expected = Expected::default();
        let ids: Vec<u64> = (0..3 * THROUGHPUT_KEYS + 5).collect();
        for &id in &ids {
            let customer = id % THROUGHPUT_KEYS;
            let amount = amount_cents(id);
            let total = *totals.entry(customer).and_modify(|t| *t += amount).or_insert(amount);
            let amount_text = format!("\"amount\":{}.{:02}}}", amount / 100, amount % 100);
            assert!(order(id, customer).ends_with(&amount_text), "{}", order(id, customer));
            let mut output = Vec::new();
            revenue_output(&mut output, id, customer, amount, total);
            assert!(expected.matches(id, &output), "{}", String::from_utf8_lossy(&output));
        }
        // Read in any order; a wrong total or format is not the output.
        assert!(
            expected.matches(5, br#"{"order_id":5,"customer_id":5,"amount":6.05,"total":6.05}"#)
        );
        assert!(
            !expected.matches(5, br#"{"order_id":5,"customer_id":5,"amount":6.05,"total":6.06}"#)
        );
        assert!(
            !expected.matches(5, br#"{"order_id":5,"customer_id":5,"amount":6.05,"total":6.050}"#)
        );
        assert!(
            !expected.matches(5, br#"{"order_id":5, "customer_id":5,"amount":6.05,"total":6.05}"#)
        );
    }

    #[test]
    fn the_spec_is_a_cluster_spec_with_the_default_key_groups() {
        let bench = ClusterBench {
            kafka: "127.0.0.1:9092".into(),
            events: 10,
            runs: Mode::DEFAULT.to_vec(),
            latency_seconds: 1,
            latency_share: 0.5,
            latency_rate: None,
            ingest_interval_ms: None,
            state_keys: vec![],
            steady_rate: 1,
            steady_keys: 1,
            sigterm: false,
            process_parallelism: 2,
            source_tasks: 1,
            functions_dir: PathBuf::from("/f"),
            kafka_streams_jar: None,
            scratch: PathBuf::from("/tmp/s"),
        };
        let kafka = Kafka { servers: bench.kafka.clone() };
        let context =
            Context { bench: &bench, weir: Path::new("weir"), run_id: "wb1".into(), kafka };
        let at_least_once = context.spec(
            "wb1-p1a",
            "wb1-p1a-in",
            "wb1-p1a-out",
            Mode::OneProcess { exactly_once: false },
        );
        let spec = PipelineSpec::parse(&at_least_once).unwrap();
        assert_eq!(spec.parallelism, 2, "one process runs at its own parallelism");
        assert!(spec.checkpoint.is_some(), "at-least-once runs checkpoint as well");
        assert!(at_least_once.contains("delivery: at-least-once"), "{at_least_once}");
        let spec = PipelineSpec::parse(&context.spec(
            "wb1-w1",
            "wb1-w1-in",
            "wb1-w1-out",
            Mode::Workers { count: 1, direct: false },
        ))
        .unwrap();
        assert_eq!(spec.max_parallelism, MAX_PARALLELISM);
        assert_eq!(spec.parallelism, PARTITIONS);
        let plan = weir_host::cluster::plan(&spec, &|_| {
            Ok((0..i32::from(PARTITIONS)).map(|p| ("wb1-w1-in".to_string(), p)).collect())
        })
        .unwrap();
        assert_eq!(plan.units.len(), 2 * usize::from(PARTITIONS));
        // Direct: the tasks read the input, no ingest units.
        let direct = Mode::Workers { count: 1, direct: true };
        let spec =
            PipelineSpec::parse(&context.spec("wb1-w1d", "wb1-w1d-in", "wb1-w1d-out", direct))
                .unwrap();
        let plan = weir_host::cluster::plan(&spec, &|_| {
            Ok((0..i32::from(PARTITIONS)).map(|p| ("wb1-w1d-in".to_string(), p)).collect())
        })
        .unwrap();
        assert_eq!(plan.units.len(), usize::from(PARTITIONS));
        assert!((0..100).map(task_of).all(|t| t < PARTITIONS));
        // Customers at the rebalance runs' stride reach every input partition.
        let partitions: HashSet<i32> = (0..2000).map(|i| input_partition(i * 50)).collect();
        assert_eq!(partitions.len(), usize::from(PARTITIONS));
    }
}
