//! Reinstating a pipeline's keyed state from a checkpoint or savepoint.
//!
//! Everything is written to a staging directory first and switched in only
//! when complete, so a failure (or a kill) half-way leaves the previous
//! state untouched and the next start simply restores again: never half a
//! restore.
//!
//! A snapshot stored outside the pipeline's own checkpoint storage (another
//! pipeline's, or another storage URL's) is read, never claimed: none of
//! its files count as stored, so the run's first checkpoint uploads every
//! file it references into the pipeline's own storage and no later
//! checkpoint depends on the other storage (Flink's `NO_CLAIM` mode). Nor
//! is it read from the pipeline's local checkpoint copies: one of the same
//! id there is of another snapshot.

use std::path::Path;

use super::canonical;
use super::incremental::{self, KnownFiles};
use super::metadata::{SnapshotMetadata, StateFiles};
use super::{CheckpointError, CheckpointStorage, LocatedSnapshot};
use crate::state::layout::{self, Distributor, Layout};

/// What the pipeline is, to check a snapshot fits it.
#[derive(Clone)]
pub struct RestoreTarget<'a> {
    /// The pipeline's keyed-state directory.
    pub state_dir: &'a Path,
    /// Where this host keeps local copies of checkpoints (`chk-<id>/subtask-<i>`).
    pub local_checkpoints: &'a Path,
    /// The layout the pipeline will run with.
    pub layout: Layout,
    /// The keyed operator's uid.
    pub operator_uid: &'a str,
    /// The number of its first subtask among every subtask of the pipeline.
    pub first_slot: usize,
    /// Where the pipeline's own checkpoints go.
    pub storage: &'a CheckpointStorage,
    /// Whether the run was cancelled: checked between files, so a long
    /// restore ends soon after ([`CheckpointError::Cancelled`]).
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
}

/// Replace the state in `target.state_dir` by the snapshot's. Returns, per
/// subtask, the SST files known to be stored in `target.storage` (empty
/// when the state was rebuilt, will be rescaled, or came from another
/// storage, so the next checkpoint uploads afresh).
pub fn restore(
    snapshot: &LocatedSnapshot,
    target: &RestoreTarget<'_>,
) -> Result<Vec<KnownFiles>, CheckpointError> {
    let metadata = &snapshot.metadata;
    check_compatible(metadata, target)?;
    let operator =
        metadata.operator_states().into_iter().find(|o| o.uid == target.operator_uid).ok_or_else(
            || CheckpointError::Incompatible {
                what: format!("{:?} {}", metadata.kind, metadata.id).to_lowercase(),
                message: format!("it holds no state of operator {:?}", target.operator_uid),
            },
        )?;
    let staging = target.state_dir.with_file_name("state-restoring");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    // Local copies are of this pipeline's own checkpoints: another
    // storage's checkpoint of the same id is another snapshot.
    let own = is_own(snapshot, target.storage);
    // The snapshot's own files (not shared) are where its writer put them.
    let files_dir = snapshot.storage.files_dir(&snapshot.dir, metadata.generation);
    match &operator.state {
        StateFiles::Rocksdb { subtasks } => {
            let mut known = Vec::new();
            for (index, files) in subtasks.iter().enumerate() {
                let slot = operator.first_slot + index;
                let local = own.then(|| {
                    target
                        .local_checkpoints
                        .join(format!("chk-{}", metadata.id))
                        .join(format!("subtask-{slot}"))
                });
                let index16 = u16::try_from(index)
                    .map_err(|_| CheckpointError::Corrupt("too many subtasks".into()))?;
                let database = layout::subtask_dir(&staging, index16);
                known.push(incremental::download(
                    &snapshot.storage,
                    &files_dir,
                    slot,
                    files,
                    local.as_deref(),
                    &database,
                    target.cancelled,
                )?);
                // A checkpoint between full ones carries changelogs.
                crate::state::changelog::replay(&database)?;
            }
            let stored = Layout {
                max_parallelism: metadata.max_parallelism,
                parallelism: operator.parallelism,
            };
            layout::install(target.state_dir, &staging, stored)?;
            let same = own && stored == target.layout && operator.first_slot == target.first_slot;
            Ok(if same { known } else { Vec::new() })
        }
        StateFiles::Canonical { files } => {
            let mut distributor = Distributor::create(&staging, target.layout)?;
            for file in files {
                if (target.cancelled)() {
                    return Err(CheckpointError::Cancelled);
                }
                let bytes = snapshot.storage.get_file(&files_dir, &file.name)?;
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

/// Whether `snapshot` is stored in `storage` (whose `shared/` files its
/// metadata names are then there for later checkpoints to reference).
/// Compared by location: a snapshot found by another name for the same
/// place counts as foreign, which costs a re-hash, never a missing file.
fn is_own(snapshot: &LocatedSnapshot, storage: &CheckpointStorage) -> bool {
    let metadata = &snapshot.metadata;
    storage.describe(&storage.snapshot_dir(metadata.kind, metadata.id))
        == snapshot.storage.describe(&snapshot.dir)
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
    if metadata.operators.is_empty() && metadata.operator_uid != target.operator_uid {
        return Err(incompatible(format!(
            "it holds state of operator {:?} and this pipeline's operator is {:?} (set `uid: {}` on the function to keep that state)",
            metadata.operator_uid, target.operator_uid, metadata.operator_uid
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::SnapshotKind;
    use crate::state::{KeyedStateBackend, RocksDbBackend, SnapshotForm};

    /// Checkpoint 1 of pipeline `p`, one subtask holding one key, completed
    /// in the storage at `url`; `work` holds the database.
    fn completed_checkpoint(url: &str, work: &Path) -> String {
        let storage = CheckpointStorage::open(url, "p").unwrap();
        let mut db = RocksDbBackend::open(&work.join("live")).unwrap();
        db.put(b"key", b"value").unwrap();
        db.checkpoint(&work.join("chk-1"), SnapshotForm::Database).unwrap();
        let dir = storage.checkpoint_dir(1);
        let uploaded =
            incremental::upload(&storage, &dir, 0, &work.join("chk-1"), &mut KnownFiles::new())
                .unwrap();
        storage
            .commit(&SnapshotMetadata {
                id: 1,
                kind: SnapshotKind::Checkpoint,
                pipeline: "p".into(),
                completed_at: 0,
                operator_uid: "process".into(),
                max_parallelism: 128,
                parallelism: 1,
                state: StateFiles::Rocksdb { subtasks: vec![uploaded.files] },
                operators: Vec::new(),
                source: serde_json::Value::Null,
                sink: serde_json::Value::Null,
                size_bytes: uploaded.size,
                incremental_bytes: uploaded.sent,
                duration_ms: 0,
                alignment_ms: 0,
                generation: 0,
                last_committed: None,
            })
            .unwrap();
        storage.describe(&dir)
    }

    #[test]
    fn only_a_snapshot_in_the_pipelines_own_storage_counts_its_files_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let url = |name: &str| format!("file://{}", dir.path().join(name).display());
        let location = completed_checkpoint(&url("store-a"), &dir.path().join("work"));
        let restore_into = |storage_url: &str, run: &str| {
            let storage = CheckpointStorage::open(storage_url, "p").unwrap();
            let target = RestoreTarget {
                state_dir: &dir.path().join(run).join("state"),
                local_checkpoints: &dir.path().join(run).join("local"),
                layout: Layout { max_parallelism: 128, parallelism: 1 },
                operator_uid: "process",
                first_slot: 0,
                storage: &storage,
                cancelled: &|| false,
            };
            restore(&CheckpointStorage::locate(&location).unwrap(), &target).unwrap()
        };
        let own = restore_into(&url("store-a"), "own");
        assert_eq!(own.len(), 1);
        assert!(
            !own[0].is_empty() && own[0].values().all(|f| f.shared.is_some()),
            "its own checkpoint's SSTs are stored: {own:?}"
        );
        // The other run's local copy of its own checkpoint 1: same names and
        // sizes, other bytes.
        let snapshot = CheckpointStorage::locate(&location).unwrap();
        let StateFiles::Rocksdb { subtasks } = &snapshot.metadata.state else { unreachable!() };
        let stale = dir.path().join("other/local/chk-1/subtask-0");
        std::fs::create_dir_all(&stale).unwrap();
        for file in &subtasks[0] {
            std::fs::write(stale.join(&file.name), vec![b'?'; file.size as usize]).unwrap();
        }
        assert!(
            restore_into(&url("store-b"), "other").iter().all(KnownFiles::is_empty),
            "another storage's files are uploaded again by the first checkpoint"
        );
        let state = dir.path().join("other/state");
        let db = RocksDbBackend::open(&layout::subtask_dir(&state, 0)).unwrap();
        assert_eq!(
            db.get(b"key").unwrap().as_deref(),
            Some(&b"value"[..]),
            "restored all the same"
        );
    }
}
