//! `weir bench`: the arguments checked, the benchmark suite run (see
//! `weir_host::bench::run_suite`).

use std::path::PathBuf;

use anyhow::Context as _;
use weir_host::bench::{run_suite, Suite, Workload};

/// What `weir bench` takes.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Events per run.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
    /// Distinct keys; repeatable.
    #[arg(long = "keys", default_values_t = [10_000u64])]
    keys: Vec<u64>,
    /// Workloads (sum, sum-json, window, dedup, filter, two-stage, join);
    /// repeatable or comma-separated (`--workloads two-stage,join`); default
    /// all. `sum` runs too with a graph workload (two-stage, join), whose
    /// ratio to it is reported.
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
}

/// Check the arguments and run the suite, printing to stdout.
pub fn bench(args: &BenchArgs) -> anyhow::Result<()> {
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
    let functions_dir = std::fs::canonicalize(&functions_dir).with_context(|| {
        format!(
            "functions directory {} (build the functions with `scripts/dev build-functions`, \
             or pass --functions-dir)",
            functions_dir.display()
        )
    })?;
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
