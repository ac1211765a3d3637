//! The `weir` command: parses arguments and calls the library.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use weir_host::checkpoint::CheckpointSettings;
use weir_host::checkpoint::{CheckpointStorage, ControlDir, SnapshotKind, SnapshotMetadata};
use weir_host::pipeline::{self, PipelineSpec, ProgressFn, RestoreFrom, RunOptions, RunSummary};
use weir_host::runtime::{componentize, digest, new_engine, FunctionLoader};

/// mimalloc: events, keys and batches are allocated on one thread and freed
/// on another (source → subtask → sink), which glibc's allocator handles
/// slowly (≈15 % of a benchmark's CPU went to its free lists).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Weir: a stream processor whose functions are WebAssembly components.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline spec in this process until its sources are exhausted
    /// (or `weir stop` asks it to stop).
    Run {
        /// The pipeline spec (YAML).
        spec: PathBuf,
        /// Where state and compiled functions are kept.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
        /// Start from empty state, discarding what earlier runs left.
        #[arg(long)]
        fresh: bool,
        /// Take a checkpoint this often (e.g. `2s`), overriding the spec's
        /// `checkpoint.interval`; a restarted run resumes from the newest.
        #[arg(long, value_name = "DURATION")]
        checkpoint_interval: Option<String>,
        /// Start from `latest` (the newest completed checkpoint) or a
        /// checkpoint / savepoint directory (path or URL).
        #[arg(long, value_name = "latest|PATH")]
        restore: Option<String>,
        /// Do not print the summary at the end.
        #[arg(long, short)]
        quiet: bool,
        /// Testing aid: pause this many milliseconds after each batch the
        /// sink writes (to exercise backpressure).
        #[arg(long, hide = true)]
        sink_delay_ms: Option<u64>,
        /// Print one JSON line with what the run measured (for `weir bench`).
        #[arg(long, hide = true)]
        report_json: bool,
    },
    /// Measure the standard workloads, Wasm against the same logic native
    /// (see the README's "Benchmarks"). Build with `--release`.
    Bench {
        /// Events per run.
        #[arg(long, default_value_t = 20_000_000)]
        events: u64,
        /// Distinct keys; repeatable.
        #[arg(long = "keys", default_values_t = [10_000u64])]
        keys: Vec<u64>,
        /// Workloads (sum, sum-json, window, dedup, filter); default all.
        #[arg(long = "workload")]
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
    },
    /// Take a savepoint of a running pipeline (started by `weir run` with
    /// the same data directory) and print where it is.
    Savepoint {
        /// The pipeline spec (YAML).
        spec: PathBuf,
        /// Where the running pipeline keeps its state.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
        /// Stop the pipeline once the savepoint is taken.
        #[arg(long)]
        stop: bool,
        /// How long to wait for it.
        #[arg(long, default_value = "10m")]
        timeout: String,
    },
    /// Stop a running pipeline gracefully: in-flight records are processed,
    /// a final snapshot is taken, and `weir run` exits.
    Stop {
        /// The pipeline spec (YAML).
        spec: PathBuf,
        /// Where the running pipeline keeps its state.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
        /// Take a savepoint (else a checkpoint) and print where it is.
        #[arg(long)]
        savepoint: bool,
        /// How long to wait.
        #[arg(long, default_value = "10m")]
        timeout: String,
    },
    /// Serve the HTTP API: functions, pipelines, metrics (see the README).
    Serve {
        /// Address to listen on; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Where functions, state and compiled code are kept.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
        /// Require `Authorization: Bearer <token>` on every route but /healthz.
        #[arg(long, env = "WEIR_API_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Largest accepted upload, in bytes.
        #[arg(long, default_value_t = 64 << 20)]
        max_upload_bytes: usize,
        /// The most CPU time per call a pipeline's `limits.call_timeout`
        /// may grant its functions.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        max_call_timeout: std::time::Duration,
        /// The most linear memory a pipeline's `limits.memory` may grant
        /// each function instance (`512MiB`, `1GiB`, bytes).
        #[arg(long, default_value = "1GiB", value_parser = parse_size)]
        max_function_memory: usize,
    },
    /// Functions on a `weir serve`: upload, list.
    Function {
        #[command(subcommand)]
        command: FunctionCommand,
    },
    /// Pipelines on a `weir serve`: deploy, list, status, savepoint, stop,
    /// upgrade, delete.
    Pipeline {
        #[command(subcommand)]
        command: PipelineCommand,
    },
    /// Inspect a pipeline's checkpoints and savepoints.
    Checkpoints {
        #[command(subcommand)]
        command: CheckpointsCommand,
    },
    /// Check a `.wasm` file and print which Weir worlds it implements.
    Inspect {
        /// A component, or a core module carrying a component type.
        wasm: PathBuf,
    },
    /// Turn a core module carrying a component type into a component.
    Componentize {
        /// The core module (a component is copied unchanged).
        input: PathBuf,
        /// Where to write the component.
        output: PathBuf,
    },
}

/// Which server the client commands talk to.
#[derive(clap::Args)]
struct ServerArgs {
    /// The server's URL.
    #[arg(long, env = "WEIR_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// Its bearer token.
    #[arg(long, env = "WEIR_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the server's JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum FunctionCommand {
    /// Upload a `.wasm` file as the next version of function NAME.
    Upload {
        /// The function's name (`[a-z0-9-]{1,63}`).
        name: String,
        /// A component, or a core module carrying a component type.
        wasm: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the functions and their versions.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Subcommand)]
enum PipelineCommand {
    /// Deploy a spec whose functions are stored ones (`function: <name>`).
    Deploy {
        /// The pipeline spec (YAML or JSON).
        spec: PathBuf,
        /// Start from this checkpoint or savepoint (its location).
        #[arg(long)]
        restore: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Every pipeline with its state.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One pipeline: state, failure, counts, watermark, last checkpoint.
    Status {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Take a savepoint and print where it is.
    Savepoint {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop gracefully (final snapshot) and print where the snapshot is.
    Stop {
        /// The pipeline's name.
        name: String,
        /// Take a savepoint rather than a checkpoint.
        #[arg(long)]
        savepoint: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Savepoint, stop, and start again with new function versions, a new
    /// parallelism or a new spec, keeping the state.
    Upgrade {
        /// The pipeline's name.
        name: String,
        /// `NAME` (its newest version) or `NAME=VERSION`; repeatable.
        #[arg(long = "function", value_name = "NAME[=VERSION]")]
        functions: Vec<String>,
        /// New parallelism.
        #[arg(long)]
        parallelism: Option<u16>,
        /// A new spec file (same name).
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop and delete a pipeline (its savepoints are kept).
    Delete {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Subcommand)]
enum CheckpointsCommand {
    /// List completed checkpoints and savepoints, newest first: id, time,
    /// size, incremental size, duration, location.
    List {
        /// The pipeline spec (YAML).
        spec: PathBuf,
        /// Where the pipeline's state is kept.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match execute(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// A one-line progress bar on stderr, redrawn at most five times a second.
fn progress_bar() -> ProgressFn {
    let started = Instant::now();
    let last = Mutex::new(started - Duration::from_secs(1));
    Arc::new(move |done, total| {
        let Ok(mut last) = last.lock() else { return };
        if last.elapsed() < Duration::from_millis(200) && done < total {
            return;
        }
        *last = Instant::now();
        let fraction = if total == 0 { 1.0 } else { done as f64 / total as f64 };
        let filled = (fraction * 30.0) as usize;
        eprint!(
            "\r[{}{}] {:5.1}%  {:.1}s",
            "#".repeat(filled),
            ".".repeat(30 - filled.min(30)),
            fraction * 100.0,
            started.elapsed().as_secs_f64()
        );
    })
}

/// The end-of-run summary: totals, then records in and out per operator.
fn print_summary(name: &str, summary: &RunSummary) {
    let seconds = summary.elapsed.as_secs_f64();
    eprintln!(
        "{name}: {} records in, {} out, {} to side outputs ({} dropped) in {seconds:.3}s ({:.0} events/s)",
        summary.records_in,
        summary.records_out,
        summary.side_outputs_written,
        summary.side_outputs_dropped,
        summary.records_in as f64 / seconds.max(1e-9)
    );
    eprintln!("  {:<12} {:>12} {:>12}", "operator", "in", "out");
    eprintln!("  {:<12} {:>12} {:>12}", "source", "", summary.records_in);
    if summary.dropped_bad_timestamps > 0 {
        eprintln!(
            "  {} source records dropped: no usable timestamp",
            summary.dropped_bad_timestamps
        );
    }
    eprintln!("  {:<12} {:>12} {:>12}", "key", summary.key.records_in, summary.key.records_out);
    for (index, counts) in summary.subtasks.iter().enumerate() {
        eprintln!(
            "  {:<12} {:>12} {:>12}",
            format!("process[{index}]"),
            counts.records_in,
            counts.records_out
        );
    }
    let late: u64 = summary.subtasks.iter().map(|c| c.late_dropped).sum();
    if late > 0 {
        eprintln!("  {late} late records dropped (no late_output declared)");
    }
    eprintln!(
        "  {:<12} {:>12} {:>12}",
        "sink",
        summary.records_out + summary.side_outputs_written + summary.side_outputs_dropped,
        ""
    );
    if let Some((kind, id)) = summary.restored_from {
        eprintln!("  restored from {} {id}", kind.name());
    }
    if let Some(last) = &summary.last_snapshot {
        eprintln!(
            "  {} snapshots completed{}; last: {} {}, {} ({} new) in {} ms",
            summary.snapshots_completed,
            if summary.snapshots_expired > 0 {
                format!(" ({} expired)", summary.snapshots_expired)
            } else {
                String::new()
            },
            last.kind.name(),
            last.id,
            weir_host::units::format_bytes(last.size_bytes),
            weir_host::units::format_bytes(last.incremental_bytes),
            last.duration.as_millis()
        );
    }
    if summary.stopped {
        eprintln!("  stopped on request");
    }
    if let Some(rss) = weir_host::metrics::peak_rss_bytes() {
        eprintln!("  peak RSS {:.1} MiB", rss as f64 / f64::from(1 << 20));
    }
}

fn print_snapshot(storage: &CheckpointStorage, metadata: &SnapshotMetadata) {
    let time = std::time::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(metadata.completed_at).unwrap_or(0));
    println!(
        "{:>6}  {:<10}  {:<24}  {:>10}  {:>12}  {:>6}ms  {}",
        metadata.id,
        metadata.kind.name(),
        humantime::format_rfc3339_millis(time).to_string(),
        weir_host::units::format_bytes(metadata.size_bytes),
        weir_host::units::format_bytes(metadata.incremental_bytes),
        metadata.duration_ms,
        storage.describe(&storage.snapshot_dir(metadata.kind, metadata.id))
    );
}

/// Ask the running pipeline of `spec` for a snapshot; print where it is.
fn request_snapshot(
    spec: &std::path::Path,
    data_dir: Option<PathBuf>,
    kind: SnapshotKind,
    stop: bool,
    timeout: &str,
) -> anyhow::Result<()> {
    let spec = PipelineSpec::load(spec)?;
    let data_dir = data_dir.unwrap_or_else(weir_host::config::default_data_dir);
    let timeout =
        humantime::parse_duration(timeout).with_context(|| format!("--timeout {timeout:?}"))?;
    let control = ControlDir::new(weir_host::config::control_dir(&data_dir, &spec.name));
    let response = control
        .request(kind, stop, timeout)
        .map_err(|e| anyhow::anyhow!("pipeline {}: {e}", spec.name))?;
    match (response.ok, response.location) {
        (true, Some(location)) => {
            println!("{location}");
            Ok(())
        }
        _ => Err(anyhow::anyhow!(
            "pipeline {}: {}",
            spec.name,
            response.error.unwrap_or_else(|| "the snapshot failed".into())
        )),
    }
}

/// A size argument: `512MiB`, `1GiB` or bytes.
fn parse_size(text: &str) -> Result<usize, String> {
    weir_host::units::parse_bytes(text)
        .ok_or_else(|| format!("{text:?} is not a size (like 512MiB, 1GiB)"))
}

/// What `weir bench` was asked.
struct BenchArgs {
    events: u64,
    keys: Vec<u64>,
    workloads: Vec<String>,
    checkpoints: String,
    functions_dir: Option<PathBuf>,
    scratch: Option<PathBuf>,
    repeat: usize,
    json: bool,
}

/// `weir bench`: the arguments checked, the suite run (see
/// `weir_host::bench::run_suite`).
fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    use weir_host::bench::{run_suite, Suite, Workload};
    let workloads: Vec<Workload> = if args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workloads
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
    let functions_dir =
        args.functions_dir.clone().unwrap_or_else(weir_host::bench::default_functions_dir);
    let functions_dir = std::fs::canonicalize(&functions_dir).with_context(|| format!("functions directory {} (build the functions with `scripts/dev build-functions`, or pass --functions-dir)", functions_dir.display()))?;
    let temporary = tempfile::tempdir()?;
    let suite = Suite {
        events: args.events,
        keys: args.keys.clone(),
        workloads,
        checkpoints,
        functions_dir,
        scratch: args.scratch.clone().unwrap_or_else(|| temporary.path().to_path_buf()),
        repeat: args.repeat.max(1),
        json: args.json,
    };
    run_suite(&suite, &std::env::current_exe()?, &mut std::io::stdout().lock())?;
    Ok(())
}

/// `weir pipeline …`: call the server, print its answer.
fn pipeline_command(command: PipelineCommand) -> anyhow::Result<()> {
    let client =
        |server: &ServerArgs| weir_host::api::ApiClient::new(&server.server, server.token.clone());
    let (answer, server, show): (serde_json::Value, ServerArgs, fn(&serde_json::Value)) =
        match command {
            PipelineCommand::Deploy { spec, restore, server } => {
                let text = std::fs::read_to_string(&spec)
                    .with_context(|| format!("cannot read {}", spec.display()))?;
                (client(&server)?.deploy(text, restore.as_deref())?, server, print_status)
            }
            PipelineCommand::List { server } => {
                (client(&server)?.list_pipelines()?, server, |list| {
                    println!(
                        "{:<24} {:<9} {:>4} {:>12} {:>12}  last checkpoint",
                        "name", "state", "gen", "in", "out"
                    );
                    for p in list["pipelines"].as_array().into_iter().flatten() {
                        let last = &p["last_checkpoint"];
                        let last = if last.is_null() {
                            "-".to_string()
                        } else {
                            format!("{} {}", last["kind"].as_str().unwrap_or("?"), last["id"])
                        };
                        println!(
                            "{:<24} {:<9} {:>4} {:>12} {:>12}  {last}",
                            p["name"].as_str().unwrap_or("?"),
                            p["state"].as_str().unwrap_or("?"),
                            n(&p["generation"]),
                            n(&p["counts"]["source_records"]),
                            n(&p["counts"]["sink_records"])
                        );
                    }
                })
            }
            PipelineCommand::Status { name, server } => {
                (client(&server)?.pipeline(&name)?, server, print_status)
            }
            PipelineCommand::Savepoint { name, server } => {
                (client(&server)?.savepoint(&name)?, server, |a| {
                    println!("{}", a["location"].as_str().unwrap_or("?"))
                })
            }
            PipelineCommand::Stop { name, savepoint, server } => {
                (client(&server)?.stop(&name, savepoint)?, server, |a| {
                    println!("stopped; snapshot at {}", a["location"].as_str().unwrap_or("?"))
                })
            }
            PipelineCommand::Upgrade { name, functions, parallelism, spec, server } => {
                let mut versions = serde_json::Map::new();
                for choice in functions {
                    let (function, version) = match choice.split_once('=') {
                        Some((function, version)) => (
                            function.to_string(),
                            serde_json::json!(version.parse::<u32>().with_context(|| format!(
                                "--function {choice}: the version is not a number"
                            ))?),
                        ),
                        None => (choice, serde_json::json!("latest")),
                    };
                    versions.insert(function, version);
                }
                let spec = spec
                    .map(|path| {
                        std::fs::read_to_string(&path)
                            .with_context(|| format!("cannot read {}", path.display()))
                    })
                    .transpose()?;
                let upgrade = serde_json::json!({ "functions": versions, "parallelism": parallelism, "spec": spec });
                (client(&server)?.upgrade(&name, &upgrade)?, server, print_status)
            }
            PipelineCommand::Delete { name, server } => {
                (client(&server)?.delete_pipeline(&name)?, server, |_| println!("deleted"))
            }
        };
    if server.json {
        println!("{answer}");
    } else {
        show(&answer);
    }
    Ok(())
}

/// A JSON count for a column (0 when absent).
fn n(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_default()
}

/// A pipeline's status, for people.
fn print_status(p: &serde_json::Value) {
    println!(
        "{}  {}  (generation {}, parallelism {})",
        p["name"].as_str().unwrap_or("?"),
        p["state"].as_str().unwrap_or("?"),
        p["generation"],
        p["parallelism"]
    );
    if let Some(failure) = p["failure"].as_str() {
        println!("  failure: {failure}");
    }
    for f in p["functions"].as_array().into_iter().flatten() {
        println!(
            "  {:<14} {} v{}",
            f["field"].as_str().unwrap_or("?"),
            f["function"].as_str().unwrap_or("?"),
            f["version"]
        );
    }
    let counts = &p["counts"];
    if !counts.is_null() {
        println!("  {:<14} {:>12} {:>12}", "operator", "in", "out");
        println!(
            "  {:<14} {:>12} {:>12}",
            "key",
            n(&counts["key"]["records_in"]),
            n(&counts["key"]["records_out"])
        );
        for (i, c) in counts["process"].as_array().into_iter().flatten().enumerate() {
            println!(
                "  {:<14} {:>12} {:>12}",
                format!("process[{i}]"),
                n(&c["records_in"]),
                n(&c["records_out"])
            );
        }
        println!("  {:<14} {:>12}", "sink", n(&counts["sink_records"]));
    }
    if let Some(watermark) = p["watermark"].as_i64() {
        let time =
            std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(watermark).unwrap_or(0));
        println!(
            "  watermark: {}",
            if watermark == i64::MAX {
                "end of time".to_string()
            } else {
                humantime::format_rfc3339_millis(time).to_string()
            }
        );
    }
    let last = &p["last_checkpoint"];
    if !last.is_null() {
        println!(
            "  last {} {}: {} ms, {}",
            last["kind"].as_str().unwrap_or("?"),
            last["id"],
            last["duration_ms"],
            last["location"].as_str().unwrap_or("?")
        );
    }
}

/// The error and its causes on one line, skipping causes whose text the
/// message already contains (many errors repeat their source's message).
fn one_line(error: &anyhow::Error) -> String {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !message.contains(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    message.replace('\n', " ")
}

fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Bench {
            events,
            keys,
            workloads,
            checkpoints,
            functions_dir,
            scratch,
            repeat,
            json,
        } => bench(&BenchArgs {
            events,
            keys,
            workloads,
            checkpoints,
            functions_dir,
            scratch,
            repeat,
            json,
        }),
        Command::Run {
            spec,
            data_dir,
            fresh,
            checkpoint_interval,
            restore,
            quiet,
            sink_delay_ms,
            report_json,
        } => {
            let mut spec = PipelineSpec::load(&spec)?;
            if let Some(interval) = checkpoint_interval {
                let interval = humantime::parse_duration(&interval)
                    .with_context(|| format!("--checkpoint-interval {interval:?}"))?;
                let mut checkpoint =
                    spec.checkpoint.take().unwrap_or_else(|| CheckpointSettings::every(interval));
                checkpoint.interval = interval;
                checkpoint.validate().context("--checkpoint-interval")?;
                spec.checkpoint = Some(checkpoint);
            }
            let mut options =
                RunOptions::new(data_dir.unwrap_or_else(weir_host::config::default_data_dir));
            options.fresh = fresh;
            options.restore =
                restore.map(
                    |r| if r == "latest" { RestoreFrom::Latest } else { RestoreFrom::Path(r) },
                );
            options.sink_delay = sink_delay_ms.map(Duration::from_millis);
            if !quiet && std::io::stderr().is_terminal() {
                options.progress = Some(progress_bar());
            }
            let summary = pipeline::run(&spec, &options)?;
            if options.progress.is_some() {
                eprint!("\r{:79}\r", "");
            }
            if !quiet {
                print_summary(&spec.name, &summary);
            }
            if report_json {
                let measurement = weir_host::bench::Measurement {
                    events: summary.records_in,
                    seconds: summary.elapsed.as_secs_f64(),
                    cpu_seconds: weir_host::metrics::cpu_seconds().unwrap_or_default(),
                    peak_rss_bytes: weir_host::metrics::peak_rss_bytes().unwrap_or_default(),
                    checkpoints: summary.snapshots_completed,
                };
                println!("{}", serde_json::to_string(&measurement)?);
            }
            Ok(())
        }
        Command::Savepoint { spec, data_dir, stop, timeout } => {
            request_snapshot(&spec, data_dir, SnapshotKind::Savepoint, stop, &timeout)
        }
        Command::Stop { spec, data_dir, savepoint, timeout } => {
            let kind = if savepoint { SnapshotKind::Savepoint } else { SnapshotKind::Checkpoint };
            request_snapshot(&spec, data_dir, kind, true, &timeout)
        }
        Command::Checkpoints { command: CheckpointsCommand::List { spec, data_dir } } => {
            let spec = PipelineSpec::load(&spec)?;
            let data_dir = data_dir.unwrap_or_else(weir_host::config::default_data_dir);
            let storage = pipeline::checkpoint_storage(&spec, &data_dir)?;
            let mut all = storage.completed()?;
            all.extend(storage.completed_of(SnapshotKind::Savepoint)?);
            all.sort_by_key(|m| std::cmp::Reverse(m.id));
            if all.is_empty() {
                println!("no completed checkpoints or savepoints for {}", spec.name);
            } else {
                println!(
                    "{:>6}  {:<10}  {:<24}  {:>10}  {:>12}  {:>8}  location",
                    "id", "kind", "completed", "size", "incremental", "duration"
                );
                for metadata in &all {
                    print_snapshot(&storage, metadata);
                }
            }
            Ok(())
        }
        Command::Serve {
            listen,
            data_dir,
            token,
            max_upload_bytes,
            max_call_timeout,
            max_function_memory,
        } => {
            let data_dir = data_dir.unwrap_or_else(weir_host::config::default_data_dir);
            let max_limits = weir_host::runtime::FunctionLimits {
                call_timeout: max_call_timeout,
                memory_bytes: max_function_memory,
                fuel: None,
            };
            let config = weir_host::api::ServeConfig {
                listen,
                data_dir,
                token: token.filter(|t| !t.is_empty()),
                max_upload_bytes,
                max_limits,
            };
            weir_host::api::serve(config, |address| {
                use std::io::Write as _;
                println!("weir serve listening on http://{address}");
                let _ = std::io::stdout().flush();
            })?;
            Ok(())
        }
        Command::Function { command: FunctionCommand::Upload { name, wasm, server } } => {
            let bytes =
                std::fs::read(&wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
            let client = weir_host::api::ApiClient::new(&server.server, server.token)?;
            let version = client.upload_function(&name, bytes)?;
            if server.json {
                println!("{version}");
            } else {
                println!(
                    "{} version {} sha256:{} ({})",
                    version["name"].as_str().unwrap_or(&name),
                    version["version"],
                    version["digest"].as_str().unwrap_or("?"),
                    version["worlds"]
                );
            }
            Ok(())
        }
        Command::Function { command: FunctionCommand::List { server } } => {
            let client = weir_host::api::ApiClient::new(&server.server, server.token)?;
            let list = client.list_functions()?;
            if server.json {
                println!("{list}");
                return Ok(());
            }
            for function in list["functions"].as_array().into_iter().flatten() {
                let newest = function["versions"]
                    .as_array()
                    .and_then(|v| v.last())
                    .cloned()
                    .unwrap_or_default();
                println!(
                    "{:<24} v{:<4} sha256:{}  {}",
                    function["name"].as_str().unwrap_or("?"),
                    newest["version"],
                    newest["digest"].as_str().unwrap_or("?"),
                    newest["worlds"]
                );
            }
            Ok(())
        }
        Command::Pipeline { command } => pipeline_command(command),
        Command::Inspect { wasm } => {
            let bytes =
                std::fs::read(&wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
            let engine = new_engine(Default::default()).map_err(|e| anyhow::anyhow!("{e:#}"))?;
            let function = FunctionLoader::new(engine, None)?
                .load(&bytes)
                .with_context(|| wasm.display().to_string())?;
            println!("digest: sha256:{}", function.digest);
            println!(
                "worlds: {}",
                if function.worlds().is_empty() {
                    "none".to_string()
                } else {
                    function.worlds().join(", ")
                }
            );
            println!("imports: {}", function.imports.join(", "));
            println!("exports: {}", function.exports.join(", "));
            Ok(())
        }
        Command::Componentize { input, output } => {
            let bytes = std::fs::read(&input)
                .with_context(|| format!("cannot read {}", input.display()))?;
            let component = componentize(&bytes).with_context(|| input.display().to_string())?;
            std::fs::write(&output, &component)
                .with_context(|| format!("cannot write {}", output.display()))?;
            println!("{} (sha256:{})", output.display(), digest(&component));
            Ok(())
        }
    }
}
