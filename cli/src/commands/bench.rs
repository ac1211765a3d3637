//! `weir bench`: the arguments checked, the benchmark suite run (see
//! `weir_bench::run_suite`); `weir bench cluster`: Kafka → Weir →
//! Kafka in one process and on workers (see `weir_bench::cluster`).

use std::path::PathBuf;

use std::io::Write as _;

use anyhow::Context as _;
use weir_bench::formats::{run_formats, FormatSuite};
use weir_bench::latency::{run_latency, LatencySuite};
use weir_bench::{run_suite, Suite, Workload};
use weir_host::formats::Format;

/// What `weir bench` takes.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// Events per run.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
    /// Distinct keys; repeatable.
    #[arg(long = "keys", default_values_t = [10_000u64])]
    keys: Vec<u64>,
    /// Workloads (sum, sum-json, window, dedup, filter, two-stage, join,
    /// sum-py, sum-js, sum-untimed, sum-avro, sum-protobuf); repeatable or
    /// comma-separated (`--workloads two-stage,join`); default all but
    /// sum-avro and sum-protobuf. `sum` runs too with a graph workload,
    /// sum-py, sum-js or sum-untimed, whose ratio to it is reported;
    /// sum-avro and sum-protobuf (they need `--schema-registry`) are
    /// reported against the same orders in JSON, from a file and, with
    /// `--kafka`, from a topic.
    #[arg(long = "workload", visible_alias = "workloads", value_delimiter = ',')]
    workloads: Vec<String>,
    /// Checkpoints: on (every 1 s), off, or both.
    #[arg(long, default_value = "both")]
    checkpoints: String,
    /// Where the `bench-*.wasm` functions are.
    #[arg(long)]
    functions_dir: Option<PathBuf>,
    /// Scratch space for the runs' data (default: a temporary directory).
    #[arg(long)]
    scratch: Option<PathBuf>,
    /// Runs per case; the table shows the median by events/s.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
    /// Measure end-to-end latency instead of throughput: per workload
    /// (default sum and window) its maximum, then live runs at 10, 50 and
    /// 90 % of it and a bursty one, with latency percentiles.
    #[arg(long)]
    latency: bool,
    /// Seconds of each live run of `--latency`.
    #[arg(long, default_value_t = 10)]
    latency_seconds: u64,
    /// With `--latency`: the pipelines' `batch_linger`s to compare (e.g.
    /// `--linger 0ms,2ms`); default the spec's default alone.
    #[arg(long = "linger", value_delimiter = ',', value_parser = humantime::parse_duration)]
    lingers: Vec<std::time::Duration>,
    /// The schema registry of sum-avro and sum-protobuf (its base URL, as
    /// `scripts/dev schema-registry start` prints it).
    #[arg(long)]
    schema_registry: Option<String>,
    /// A Kafka broker (host:port): sum-avro and sum-protobuf read from
    /// topics too.
    #[arg(long)]
    kafka: Option<String>,
}

/// The workloads of `weir_bench::formats`: a registry format's name.
const FORMAT_WORKLOADS: [(&str, Format); 2] =
    [("sum-avro", Format::Avro), ("sum-protobuf", Format::Protobuf)];

/// `weir bench` subcommands.
#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Kafka → Weir → Kafka: the revenue pipeline in one process, on 1 and
    /// 2 workers, against the broker's raw rate; rebalance time (see
    /// docs/benchmarks.md).
    Cluster(ClusterArgs),
}

/// What `weir bench cluster` takes.
#[derive(clap::Args)]
pub struct ClusterArgs {
    /// The Kafka broker, host:port (e.g. from `scripts/dev kafka start`).
    #[arg(long)]
    kafka: String,
    /// Orders per throughput run.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// The runs, in order (the first one's throughput sets the latency
    /// runs' rate): one-process (exactly-once), one-process-alo
    /// (at-least-once), 1-worker, N-workers (their input through an exchange
    /// topic), 1-worker-direct, N-workers-direct (tasks read the input:
    /// `input_partitioned_by_key`), kafka-streams (exactly_once_v2),
    /// kafka-streams-alo (at_least_once); comma-separated or
    /// repeatable; default 1-worker,one-process,one-process-alo,2-workers.
    #[arg(long = "runs", value_delimiter = ',')]
    runs: Vec<String>,
    /// Seconds of each fixed-rate latency run.
    #[arg(long, default_value_t = 15)]
    latency_seconds: u64,
    /// The latency runs' input rate, as a share of the first run's
    /// throughput (events/s from the start).
    #[arg(long, default_value_t = 0.5)]
    latency_share: f64,
    /// The latency runs' input rate in events/s (instead of
    /// `--latency-share` of the first run's throughput).
    #[arg(long)]
    latency_rate: Option<f64>,
    /// The workers' `cluster.ingest_interval` in milliseconds (default:
    /// half of the 1 s checkpoint interval).
    #[arg(long)]
    ingest_interval_ms: Option<u64>,
    /// State sizes (keys) of the rebalance runs; repeatable or
    /// comma-separated; 0 for none.
    #[arg(long, value_delimiter = ',', default_values_t = [100_000u64, 1_000_000])]
    state_keys: Vec<u64>,
    /// Input rate during the rebalance runs, events/s.
    #[arg(long, default_value_t = 2000)]
    steady_rate: u64,
    /// Keys the rebalance runs' steady input cycles over.
    #[arg(long, default_value_t = 2000)]
    steady_keys: u64,
    /// Skip the SIGTERM handover of the rebalance runs.
    #[arg(long)]
    no_sigterm: bool,
    /// The keyed stage's parallelism in the one-process runs (default: the
    /// cores, at most the input partitions).
    #[arg(long)]
    process_parallelism: Option<u16>,
    /// The Kafka source's tasks in the one-process runs (its
    /// `parallelism`).
    #[arg(long, default_value_t = 1)]
    source_tasks: u16,
    /// Where `revenue.wasm` is.
    #[arg(long)]
    functions_dir: Option<PathBuf>,
    /// The Kafka Streams app's jar for the kafka-streams runs
    /// (bench/kstreams/target/weir-bench-kstreams-1.jar, lib/ beside it).
    #[arg(long)]
    kafka_streams_jar: Option<PathBuf>,
    /// Data directories, logs and file:// checkpoint storage.
    #[arg(long, default_value = "/tmp/bench-cluster")]
    scratch: PathBuf,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Check the arguments and run the suite, printing to stdout.
pub fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(BenchCommand::Cluster(cluster)) = &args.command {
        // `weir bench --functions-dir DIR cluster …` (as `scripts/dev bench`
        // runs it) means the same as `weir bench cluster --functions-dir DIR`.
        let functions_dir = cluster.functions_dir.as_ref().or(args.functions_dir.as_ref());
        return bench_cluster(cluster, functions_dir.cloned(), args.json);
    }
    let formats: Vec<Format> = FORMAT_WORKLOADS
        .iter()
        .filter(|(name, _)| args.workloads.iter().any(|w| w == name))
        .map(|(_, format)| *format)
        .collect();
    let asked: Vec<&String> =
        args.workloads.iter().filter(|w| !FORMAT_WORKLOADS.iter().any(|(n, _)| n == w)).collect();
    if !formats.is_empty() {
        anyhow::ensure!(
            !args.latency,
            "--latency measures the generator workloads, not sum-avro or sum-protobuf"
        );
        let registry = args.schema_registry.clone().context(
            "sum-avro and sum-protobuf need --schema-registry URL (`scripts/dev schema-registry start` starts one and prints its URL)",
        )?;
        let temporary = tempfile::tempdir()?;
        let suite = FormatSuite {
            events: args.events,
            keys: args.keys.first().copied().unwrap_or(10_000),
            formats,
            registry,
            kafka: args.kafka.clone(),
            checkpoints: args.checkpoints != "off",
            functions_dir: functions_dir(args.functions_dir.clone())?,
            scratch: args.scratch.clone().unwrap_or_else(|| temporary.path().to_path_buf()),
            repeat: args.repeat.max(1),
            json: args.json,
        };
        run_formats(&suite, &std::env::current_exe()?, &mut std::io::stdout().lock())?;
        if asked.is_empty() {
            return Ok(());
        }
    }
    let workloads: Vec<Workload> = if asked.is_empty() && args.latency {
        vec![Workload::Sum, Workload::Window]
    } else if asked.is_empty() {
        Workload::ALL.to_vec()
    } else {
        asked
            .iter()
            .map(|w| {
                Workload::parse(w).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--workload {w}: one of {}",
                        Workload::ALL.map(Workload::name).join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let checkpoints = match args.checkpoints.as_str() {
        "on" => vec![true],
        "off" => vec![false],
        "both" => vec![false, true],
        other => anyhow::bail!("--checkpoints {other}: on, off or both"),
    };
    let functions_dir = functions_dir(args.functions_dir.clone())?;
    let temporary = tempfile::tempdir()?;
    let scratch = args.scratch.clone().unwrap_or_else(|| temporary.path().to_path_buf());
    if args.latency {
        let suite = LatencySuite {
            workloads,
            keys: args.keys.first().copied().unwrap_or(10_000),
            events: args.events,
            seconds: args.latency_seconds,
            checkpoints,
            lingers: args.lingers.iter().copied().map(Some).collect(),
            functions_dir,
            scratch,
            json: args.json,
        };
        run_latency(&suite, &std::env::current_exe()?, &mut std::io::stdout().lock())?;
        return Ok(());
    }
    let suite = Suite {
        events: args.events,
        keys: args.keys.clone(),
        workloads,
        checkpoints,
        functions_dir,
        scratch,
        repeat: args.repeat.max(1),
        json: args.json,
    };
    run_suite(&suite, &std::env::current_exe()?, &mut std::io::stdout().lock())?;
    Ok(())
}

/// Where the `bench-*.wasm` functions are: `given`, else the default;
/// an error saying how to build them if it does not exist.
fn functions_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = given.unwrap_or_else(weir_bench::default_functions_dir);
    std::fs::canonicalize(&dir).with_context(|| {
        format!(
            "functions directory {} (build the functions with `scripts/dev build-functions`, \
             or pass --functions-dir)",
            dir.display()
        )
    })
}

/// Run `weir bench cluster`: progress to stderr, the report to stdout.
fn bench_cluster(
    args: &ClusterArgs,
    functions_dir: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    use weir_bench::cluster;
    let functions_dir = self::functions_dir(functions_dir)?;
    let runs = if args.runs.is_empty() {
        cluster::Mode::DEFAULT.to_vec()
    } else {
        args.runs
            .iter()
            .map(|name| {
                cluster::Mode::parse(name).ok_or_else(|| {
                    anyhow::anyhow!("--runs {name}: one of {}", cluster::Mode::NAMES)
                })
            })
            .collect::<Result<_, _>>()?
    };
    let bench = cluster::ClusterBench {
        kafka: args.kafka.clone(),
        events: args.events.max(10),
        runs,
        latency_seconds: args.latency_seconds,
        latency_share: args.latency_share,
        latency_rate: args.latency_rate.filter(|r| *r >= 1.0),
        ingest_interval_ms: args.ingest_interval_ms,
        state_keys: args.state_keys.iter().copied().filter(|&k| k > 0).collect(),
        steady_rate: args.steady_rate.max(1),
        steady_keys: args.steady_keys.max(1),
        sigterm: !args.no_sigterm,
        process_parallelism: args
            .process_parallelism
            .unwrap_or_else(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                u16::try_from(cores).unwrap_or(u16::MAX)
            })
            .clamp(1, cluster::PARTITIONS),
        source_tasks: args.source_tasks.clamp(1, cluster::PARTITIONS),
        functions_dir,
        kafka_streams_jar: args.kafka_streams_jar.clone(),
        scratch: args.scratch.clone(),
    };
    let started = std::time::Instant::now();
    let report = cluster::run(&bench, &std::env::current_exe()?, &mut |line| {
        eprintln!("[{:>5.0} s] {line}", started.elapsed().as_secs_f64());
    })?;
    let mut out = std::io::stdout().lock();
    if args.json || json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        cluster::write_table(&report, &mut out)?;
    }
    Ok(())
}
