//! `weir savepoint` and `weir stop`: ask a pipeline that a `weir run` is
//! running on the same data directory for a snapshot, through its control
//! directory, and print where the snapshot is.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weir_host::checkpoint::{ControlDir, SnapshotKind};
use weir_host::specification::PipelineSpec;

/// What `weir savepoint` takes.
#[derive(clap::Args)]
pub struct SavepointArgs {
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
}

/// What `weir stop` takes.
#[derive(clap::Args)]
pub struct StopArgs {
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
}

/// `weir savepoint`.
pub fn savepoint(args: SavepointArgs) -> anyhow::Result<()> {
    request_snapshot(&args.spec, args.data_dir, SnapshotKind::Savepoint, args.stop, &args.timeout)
}

/// `weir stop`.
pub fn stop(args: StopArgs) -> anyhow::Result<()> {
    let kind = if args.savepoint { SnapshotKind::Savepoint } else { SnapshotKind::Checkpoint };
    request_snapshot(&args.spec, args.data_dir, kind, true, &args.timeout)
}

/// Ask the running pipeline of `spec` for a snapshot; print where it is.
fn request_snapshot(
    spec: &Path,
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
