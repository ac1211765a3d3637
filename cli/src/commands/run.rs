//! `weir run`: a pipeline spec run in this process, with a progress bar
//! and a summary at the end.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use weir_host::checkpoint::CheckpointSettings;
use weir_host::observe::RunSummary;
use weir_host::pipeline::{self, ProgressFn, RestoreFrom, RunOptions, RunThread};
use weir_host::specification::PipelineSpec;

use super::print::print_summary;

/// What `weir run` takes.
#[derive(clap::Args)]
pub struct RunArgs {
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
    /// Start even though the exactly-once Kafka sink's commit marker
    /// disagrees with the checkpoints (absent, older than a commit they
    /// record, or not the snapshot given to --restore): restore the
    /// --restore snapshot, else the newest one the checkpoints record as
    /// committed, and set the marker to it. Results after it may be written
    /// again (see docs/kafka.md).
    #[arg(long)]
    override_kafka_marker: bool,
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
    /// Record each written event's latency, from its timestamp to the
    /// sink's write (with checkpoints: to the commit that makes it
    /// visible), and report its percentiles (meaningful when event time is
    /// ingestion time, as a generator's with `rate`).
    #[arg(long)]
    latency: bool,
    /// With `--latency`: leave out events stamped within this long of the
    /// start (e.g. `1s`), so the percentiles show the run, not its start-up.
    #[arg(long, requires = "latency", value_parser = humantime::parse_duration)]
    latency_warm_up: Option<Duration>,
    /// With `--latency`: log the percentiles so far (`latency so far`, at
    /// info) this often, for a run that may not end (a Kafka source).
    #[arg(long, requires = "latency", default_value = "10s", value_parser = humantime::parse_duration)]
    latency_log_every: Duration,
    /// How long a stop (SIGTERM, Ctrl-C) waits for the run's final
    /// checkpoint before it is cancelled (default 20 s); `weir run` then
    /// exits within about this plus 5 s, non-zero and saying why when the
    /// final checkpoint failed. A second signal ends it at once.
    #[arg(long, env = "WEIR_STOP_GRACE", value_parser = humantime::parse_duration)]
    stop_grace: Option<Duration>,
}

/// Run the spec until its sources are exhausted or it is stopped.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut spec = PipelineSpec::load(&args.spec)?;
    if let Some(interval) = args.checkpoint_interval {
        let interval = humantime::parse_duration(&interval)
            .with_context(|| format!("--checkpoint-interval {interval:?}"))?;
        let mut checkpoint =
            spec.checkpoint.take().unwrap_or_else(|| CheckpointSettings::every(interval));
        checkpoint.interval = interval;
        checkpoint.validate().context("--checkpoint-interval")?;
        spec.checkpoint = Some(checkpoint);
    }
    let mut options =
        RunOptions::new(args.data_dir.unwrap_or_else(weir_host::config::default_data_dir))
            .with_natives(super::natives());
    options.fresh = args.fresh;
    options.override_commit_marker = args.override_kafka_marker;
    options.restore =
        args.restore
            .map(|r| if r == "latest" { RestoreFrom::Latest } else { RestoreFrom::Path(r) });
    options.sink_delay = args.sink_delay_ms.map(Duration::from_millis);
    options.record_latency = args.latency;
    options.latency_warm_up = args.latency_warm_up.unwrap_or_default();
    options.latency_log_every = args.latency.then_some(args.latency_log_every);
    if !args.quiet && std::io::stderr().is_terminal() {
        options.progress = Some(progress_bar());
    }
    let ticks = weir_host::observe::process::machine_cpu_ticks();
    let progress = options.progress.is_some();
    let grace = args.stop_grace.unwrap_or(pipeline::DEFAULT_STOP_GRACE);
    let Some(summary) = run_until_stopped(spec.clone(), options, grace)? else {
        return Ok(());
    };
    let stolen = ticks.zip(weir_host::observe::process::machine_cpu_ticks());
    if progress {
        eprint!("\r{:79}\r", "");
    }
    if !args.quiet {
        print_summary(&spec.name, &summary);
    }
    if args.report_json {
        let measurement = weir_host::observe::process::Measurement {
            events: summary.records_in,
            seconds: summary.elapsed.as_secs_f64(),
            processing_seconds: summary.processing.map(|span| span.as_secs_f64()),
            cpu_seconds: weir_host::observe::process::cpu_seconds().unwrap_or_default(),
            peak_rss_bytes: weir_host::observe::process::peak_rss_bytes().unwrap_or_default(),
            checkpoints: summary.snapshots_completed,
            stolen: stolen.map(|(before, after)| after.stolen_since(&before)),
            latency: summary.latency,
        };
        println!("{}", serde_json::to_string(&measurement)?);
    }
    Ok(())
}

/// Run `spec` until it ends, or until SIGTERM or SIGINT asks it to stop:
/// then with a final checkpoint within `grace` (no summary when the run
/// ended without one), or an error naming why there was none.
fn run_until_stopped(
    spec: PipelineSpec,
    options: RunOptions,
    grace: Duration,
) -> anyhow::Result<Option<RunSummary>> {
    let shutdown = Arc::new(AtomicBool::new(false));
    super::on_termination(Arc::clone(&shutdown))?;
    let name = spec.name.clone();
    let run = RunThread::spawn(format!("run {name}"), spec, options)?;
    while !run.thread.is_finished() {
        if shutdown.load(Ordering::Relaxed) {
            eprintln!(
                "weir: stopping {name} with a final checkpoint (waiting at most {}; a second signal ends it at once)",
                humantime::format_duration(grace)
            );
            let stopped = run.stop(&name, Some(grace));
            if let Some(why) = stopped.unclean {
                anyhow::bail!("stopped without a clean end — {why}; the next run restores the last completed checkpoint");
            }
            return Ok(stopped.summary);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    match run.thread.join() {
        Ok(outcome) => Ok(Some(outcome?)),
        Err(_) => anyhow::bail!("the run of {name} panicked"),
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
