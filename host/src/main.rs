//! The `weir` command: parses arguments and calls the library.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use weir_host::pipeline::{self, PipelineSpec, ProgressFn, RunOptions, RunSummary};
use weir_host::runtime::{componentize, digest, new_engine, FunctionLoader};

/// Weir: a stream processor whose functions are WebAssembly components.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline spec in this process until its sources are exhausted.
    Run {
        /// The pipeline spec (YAML).
        spec: PathBuf,
        /// Where state and compiled functions are kept.
        #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
        data_dir: Option<PathBuf>,
        /// Start from empty state, discarding what earlier runs left.
        #[arg(long)]
        fresh: bool,
        /// Do not print the summary at the end.
        #[arg(long, short)]
        quiet: bool,
        /// Testing aid: pause this many milliseconds after each batch the
        /// sink writes (to exercise backpressure).
        #[arg(long, hide = true)]
        sink_delay_ms: Option<u64>,
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| "warn".into()))
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
        eprint!("\r[{}{}] {:5.1}%  {:.1}s", "#".repeat(filled), ".".repeat(30 - filled.min(30)), fraction * 100.0, started.elapsed().as_secs_f64());
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
        eprintln!("  {} source records dropped: no usable timestamp", summary.dropped_bad_timestamps);
    }
    eprintln!("  {:<12} {:>12} {:>12}", "key", summary.key.records_in, summary.key.records_out);
    for (index, counts) in summary.subtasks.iter().enumerate() {
        eprintln!("  {:<12} {:>12} {:>12}", format!("process[{index}]"), counts.records_in, counts.records_out);
    }
    let late: u64 = summary.subtasks.iter().map(|c| c.late_dropped).sum();
    if late > 0 {
        eprintln!("  {late} late records dropped (no late_output declared)");
    }
    eprintln!("  {:<12} {:>12} {:>12}", "sink", summary.records_out + summary.side_outputs_written + summary.side_outputs_dropped, "");
    if let Some(rss) = weir_host::metrics::peak_rss_bytes() {
        eprintln!("  peak RSS {:.1} MiB", rss as f64 / f64::from(1 << 20));
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
        Command::Run { spec, data_dir, fresh, quiet, sink_delay_ms } => {
            let spec = PipelineSpec::load(&spec)?;
            let mut options = RunOptions::new(data_dir.unwrap_or_else(weir_host::config::default_data_dir));
            options.fresh = fresh;
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
            Ok(())
        }
        Command::Inspect { wasm } => {
            let bytes = std::fs::read(&wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
            let engine = new_engine(Default::default()).map_err(|e| anyhow::anyhow!("{e:#}"))?;
            let function = FunctionLoader::new(engine, None)?.load(&bytes).with_context(|| wasm.display().to_string())?;
            println!("digest: sha256:{}", function.digest);
            println!("worlds: {}", if function.worlds().is_empty() { "none".to_string() } else { function.worlds().join(", ") });
            println!("imports: {}", function.imports.join(", "));
            println!("exports: {}", function.exports.join(", "));
            Ok(())
        }
        Command::Componentize { input, output } => {
            let bytes = std::fs::read(&input).with_context(|| format!("cannot read {}", input.display()))?;
            let component = componentize(&bytes).with_context(|| input.display().to_string())?;
            std::fs::write(&output, &component).with_context(|| format!("cannot write {}", output.display()))?;
            println!("{} (sha256:{})", output.display(), digest(&component));
            Ok(())
        }
    }
}
