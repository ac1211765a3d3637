//! `weir checkpoints …`: a pipeline's stored checkpoints and savepoints,
//! read from its checkpoint storage.

use std::path::PathBuf;

use clap::Subcommand;
use weir_host::checkpoint::SnapshotKind;
use weir_host::pipeline;
use weir_host::specification::PipelineSpec;

use super::print::print_snapshot;

/// What `weir checkpoints` does.
#[derive(Subcommand)]
pub enum CheckpointsCommand {
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

/// Run a `weir checkpoints` command.
pub fn execute(command: CheckpointsCommand) -> anyhow::Result<()> {
    let CheckpointsCommand::List { spec, data_dir } = command;
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
