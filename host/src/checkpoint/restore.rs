//! Bringing a pipeline's keyed state back from a checkpoint or savepoint.
//!
//! Everything is written to a staging directory first and switched in only
//! when complete, so a failure (or a kill) half-way leaves the previous
//! state untouched and the next start simply restores again: never half a
//! restore.

use std::path::Path;

use super::canonical;
use super::incremental::{self, KnownFiles};
use super::metadata::{SnapshotMetadata, StateFiles};
use super::{CheckpointError, LocatedSnapshot};
use crate::state::layout::{self, Distributor, Layout};

/// What the pipeline is, to check a snapshot fits it.
#[derive(Debug, Clone)]
pub struct RestoreTarget<'a> {
    /// The pipeline's keyed-state directory.
    pub state_dir: &'a Path,
    /// Where this host keeps local copies of checkpoints (`chk-<id>/subtask-<i>`).
    pub local_checkpoints: &'a Path,
    /// The layout the pipeline will run with.
    pub layout: Layout,
    /// The keyed operator's uid.
    pub operator_uid: &'a str,
}

/// Replace the state in `target.state_dir` by the snapshot's. Returns, per
/// subtask, the SST files known to be stored (empty when the state was
/// rebuilt, or will be rescaled, so the next checkpoint uploads afresh).
pub fn restore(
    snapshot: &LocatedSnapshot,
    target: &RestoreTarget<'_>,
) -> Result<Vec<KnownFiles>, CheckpointError> {
    let metadata = &snapshot.metadata;
    check_compatible(metadata, target)?;
    let staging = target.state_dir.with_file_name("state-restoring");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    match &metadata.state {
        StateFiles::Rocksdb { subtasks } => {
            let mut known = Vec::new();
            for (index, files) in subtasks.iter().enumerate() {
                let local = target
                    .local_checkpoints
                    .join(format!("chk-{}", metadata.id))
                    .join(format!("subtask-{index}"));
                let index16 = u16::try_from(index)
                    .map_err(|_| CheckpointError::Corrupt("too many subtasks".into()))?;
                let database = layout::subtask_dir(&staging, index16);
                known.push(incremental::download(
                    &snapshot.storage,
                    &snapshot.dir,
                    index,
                    files,
                    &local,
                    &database,
                )?);
                // A checkpoint between full ones carries changelogs.
                crate::state::changelog::replay(&database)?;
            }
            let stored = Layout {
                max_parallelism: metadata.max_parallelism,
                parallelism: metadata.parallelism,
            };
            layout::install(target.state_dir, &staging, stored)?;
            Ok(if stored == target.layout { known } else { Vec::new() })
        }
        StateFiles::Canonical { files } => {
            let mut distributor = Distributor::create(&staging, target.layout)?;
            for file in files {
                let bytes = snapshot.storage.get_file(&snapshot.dir, &file.name)?;
                let entries = canonical::decode(&bytes, |key, value| distributor.add(key, value))?;
                if entries != file.entries {
                    return Err(CheckpointError::Corrupt(format!(
                        "{} holds {entries} entries, not {}",
                        file.name, file.entries
                    )));
                }
            }
            distributor.finish()?;
            layout::install(target.state_dir, &staging, target.layout)?;
            Ok(Vec::new())
        }
    }
}

fn check_compatible(
    metadata: &SnapshotMetadata,
    target: &RestoreTarget<'_>,
) -> Result<(), CheckpointError> {
    let incompatible = |message: String| CheckpointError::Incompatible {
        what: format!("{:?} {}", metadata.kind, metadata.id).to_lowercase(),
        message,
    };
    if metadata.max_parallelism != target.layout.max_parallelism {
        return Err(incompatible(format!(
            "it has max_parallelism {} and the pipeline {}; the number of key groups is fixed for the life of the state",
            metadata.max_parallelism, target.layout.max_parallelism
        )));
    }
    if metadata.operator_uid != target.operator_uid {
        return Err(incompatible(format!(
            "it holds state of operator {:?} and this pipeline's operator is {:?} (set `uid: {}` on the function to keep that state)",
            metadata.operator_uid, target.operator_uid, metadata.operator_uid
        )));
    }
    Ok(())
}
