//! Keyed state a run's first start takes from other runs' snapshots: a
//! cluster task of a new layout (another parallelism, see
//! `docs/cluster.md`) from the drained tasks of the old layout whose key
//! groups overlap its own, or a task of a pipeline deployed from a
//! checkpoint or savepoint from that snapshot. Each snapshot is restored
//! into scratch space (at one subtask), then the entries of the task's key
//! groups (and the broadcast state, the same in every task, from the
//! first) are copied into its state, written in staging and switched in
//! whole — a kill half-way leaves nothing, and the next start seeds again
//! from the same immutable snapshots.

use std::ops::RangeInclusive;
use std::path::Path;

use super::error::RunError;
use crate::checkpoint::{
    self, CheckpointError, CheckpointStorage, LocatedSnapshot, RestoreTarget, SnapshotKind,
};
use crate::state::layout::{self, Distributor, Layout};
use crate::state::BROADCAST_KEY_GROUP;

/// Where a stage's state comes from on a run's first start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The stage's uid.
    pub stage: String,
    /// The key groups the run owns.
    pub key_groups: RangeInclusive<u16>,
    /// The snapshots to take them from.
    pub from: SeedFrom,
}

/// Which snapshots a [`Seed`] takes state from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedFrom {
    /// Final snapshots of other runs (pipelines in the same checkpoint
    /// storage: drained cluster units), each by its id.
    Units(Vec<(String, u64)>),
    /// A checkpoint or savepoint, by location (any pipeline's).
    Snapshot(String),
}

impl SeedFrom {
    /// The snapshots, found in the checkpoint storage at `url`.
    fn locate(&self, url: &str) -> Result<Vec<LocatedSnapshot>, CheckpointError> {
        match self {
            SeedFrom::Snapshot(location) => Ok(vec![CheckpointStorage::locate(location)?]),
            SeedFrom::Units(units) => units
                .iter()
                .map(|(unit, id)| {
                    let storage = CheckpointStorage::open(url, unit)?;
                    let mut found = storage.completed_of(SnapshotKind::Savepoint)?;
                    found.extend(storage.completed()?);
                    let metadata = found.into_iter().find(|m| m.id == *id).ok_or_else(|| {
                        CheckpointError::Corrupt(format!(
                            "unit {unit} ended with snapshot {id}, which its checkpoint storage does not hold: its state cannot be handed to the new layout (restore the pipeline from a savepoint, or deploy it again under a new name)"
                        ))
                    })?;
                    Ok(storage.into_located(metadata))
                })
                .collect(),
        }
    }
}

/// Fill `state_dir` (of `layout`, one subtask) with `seed`'s state, read
/// from the checkpoint storage at `url`; `own` is the run's own storage
/// (so the snapshots count as another pipeline's: its first checkpoint
/// uploads every file afresh).
pub(crate) fn seed(
    seed: &Seed,
    url: &str,
    own: &CheckpointStorage,
    state_dir: &Path,
    layout: Layout,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(), RunError> {
    let scratch = state_dir.with_file_name("state-seeding");
    let staging = state_dir.with_file_name("state-seeded");
    for dir in [&scratch, &staging] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(CheckpointError::from)?;
        }
    }
    let mut distributor = Distributor::create(&staging, layout)?;
    let one = Layout { max_parallelism: layout.max_parallelism, parallelism: 1 };
    for (index, snapshot) in seed.from.locate(url)?.iter().enumerate() {
        let from_dir = scratch.join(format!("from-{index}"));
        let target = RestoreTarget {
            state_dir: &from_dir,
            local_checkpoints: &scratch.join("local"),
            layout: one,
            operator_uid: &seed.stage,
            first_slot: 0,
            storage: own,
            cancelled,
        };
        checkpoint::restore(snapshot, &target)?;
        // A snapshot of several subtasks is merged into one first.
        let databases = layout::open_subtasks(&from_dir, one, false)?;
        databases[0].for_each(|key, value| {
            let group = key.get(..2).map_or(0, |g| u16::from_be_bytes([g[0], g[1]]));
            let ours = if group == BROADCAST_KEY_GROUP {
                // The same in every task: taken from the first.
                index == 0
            } else {
                seed.key_groups.contains(&group)
            };
            if ours {
                distributor.add(key, value)?;
            }
            Ok(())
        })?;
        let (kind, id) = (snapshot.metadata.kind.name(), snapshot.metadata.id);
        tracing::info!(from = %snapshot.storage.describe(&snapshot.dir), kind, id, stage = %seed.stage, "took the state of its key groups");
    }
    distributor.finish()?;
    layout::install(state_dir, &staging, layout)?;
    std::fs::remove_dir_all(&scratch).map_err(CheckpointError::from)?;
    Ok(())
}
