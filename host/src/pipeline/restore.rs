//! Where a run starts: which snapshot it restores (the one asked for, the
//! newest completed checkpoint, or the one an exactly-once Kafka sink says
//! it committed), the state that gives each subtask, and the checkpoint
//! storage the run goes on with.

use std::path::{Path, PathBuf};

use super::error::RunError;
use super::options::{RestoreFrom, RunOptions};
use super::spec::PipelineSpec;
use crate::checkpoint::CheckpointSettings;
use crate::checkpoint::{
    self, CheckpointError, CheckpointStorage, KnownFiles, LocatedSnapshot, RestoreTarget,
    SnapshotKind,
};
use crate::config;
use crate::connectors::kafka::{self, KafkaSinkConfig};
use crate::state::changelog::Changelog;
use crate::state::layout::{self, Layout};
use crate::state::{CachedBackend, KeyedStateBackend, RocksDbBackend};

/// Where a run starts: its state (restored or not), the snapshot it came
/// from, and what checkpointing needs to go on.
pub(crate) struct StartingPoint {
    /// Each subtask's database.
    pub(crate) backends: Vec<RocksDbBackend>,
    /// The snapshot it restored, if any.
    pub(crate) snapshot: Option<LocatedSnapshot>,
    /// Where checkpoints go.
    pub(crate) storage: CheckpointStorage,
    /// The id of the first snapshot this run takes.
    pub(crate) first_id: u64,
    /// Per subtask, the SST files known to be stored already.
    pub(crate) known: Vec<KnownFiles>,
    /// Where the subtasks write local checkpoints.
    pub(crate) local_checkpoints: PathBuf,
}

/// Open the pipeline's state: restored from a snapshot when asked, or when
/// checkpointing and a completed checkpoint exists; empty when
/// checkpointing without one (the local state may be ahead of what the
/// sinks committed); else as the last run left it.
pub(crate) fn prepare_state(
    spec: &PipelineSpec,
    options: &RunOptions,
    settings: Option<&CheckpointSettings>,
    kafka_sink: Option<&KafkaSinkConfig>,
) -> Result<StartingPoint, RunError> {
    let url = checkpoint_url(spec, &options.data_dir)?;
    let storage = CheckpointStorage::open(&url, &spec.name)?;
    let fresh = spec.fresh || options.fresh;
    let latest = |required: bool| -> Result<Option<LocatedSnapshot>, RunError> {
        let Some(newest) = storage.completed()?.into_iter().next() else {
            return if required {
                Err(RunError::NothingToRestore(spec.name.clone()))
            } else {
                Ok(None)
            };
        };
        let highest = storage.highest_id()?;
        if highest > newest.id {
            tracing::warn!(newest = newest.id, incomplete = highest, "checkpoints after the newest completed one have no readable metadata; restoring the newest completed one");
        }
        Ok(Some(CheckpointStorage::open(&url, &spec.name)?.into_located(newest)))
    };
    // An exactly-once Kafka sink says which snapshot's output it holds.
    let committed = match kafka_sink {
        Some(sink) => Some(kafka::committed_checkpoint(sink)?),
        None => None,
    };
    let snapshot = match (&options.restore, committed) {
        (Some(RestoreFrom::Path(path)), committed) => {
            let located = CheckpointStorage::locate(path)?;
            if let Some(Some(c)) = committed.filter(|c| c.is_some_and(|c| c > located.metadata.id))
            {
                tracing::warn!(committed = c, restoring = located.metadata.id, "the output topic already holds results through snapshot {c}; replaying from an older snapshot writes them again");
            }
            Some(located)
        }
        (Some(RestoreFrom::Latest), Some(committed)) => Some(
            committed_snapshot(&url, spec, committed)?
                .ok_or_else(|| RunError::NothingToRestore(spec.name.clone()))?,
        ),
        (None, Some(committed)) if !fresh => committed_snapshot(&url, spec, committed)?,
        (Some(RestoreFrom::Latest), None) => latest(true)?,
        (None, None) if settings.is_some() && !fresh => latest(false)?,
        (None, _) => None,
    };
    let layout = Layout { max_parallelism: spec.max_parallelism, parallelism: spec.parallelism };
    let state_dir = config::pipeline_state_dir(&options.data_dir, &spec.name);
    let local_checkpoints = config::local_checkpoints_dir(&options.data_dir, &spec.name);
    let mut known = Vec::new();
    if let Some(snapshot) = &snapshot {
        let target = RestoreTarget {
            state_dir: &state_dir,
            local_checkpoints: &local_checkpoints,
            layout,
            operator_uid: &spec.operator_uid(),
            storage: &storage,
        };
        known = checkpoint::restore(snapshot, &target)?;
        tracing::info!(id = snapshot.metadata.id, kind = ?snapshot.metadata.kind, "restored state");
    }
    // Local copies served the restore; new checkpoints start a new chain.
    if local_checkpoints.exists() {
        std::fs::remove_dir_all(&local_checkpoints).map_err(CheckpointError::from)?;
    }
    let empty = snapshot.is_none() && (fresh || settings.is_some());
    let backends = layout::open_subtasks(&state_dir, layout, empty)?;
    let first_id = storage.highest_id()?.max(snapshot.as_ref().map_or(0, |s| s.metadata.id)) + 1;
    Ok(StartingPoint { backends, snapshot, storage, first_id, known, local_checkpoints })
}

/// Where `spec`'s checkpoints go: its `checkpoint.storage`, else
/// `<data dir>/checkpoints`.
fn checkpoint_url(spec: &PipelineSpec, data_dir: &Path) -> Result<String, RunError> {
    match spec.checkpoint.as_ref().and_then(|c| c.storage.clone()) {
        Some(url) => Ok(url),
        None => config::default_checkpoint_storage(data_dir).map_err(|source| RunError::Io {
            doing: "cannot create the checkpoint directory",
            source,
        }),
    }
}

/// The checkpoint storage of `spec`'s pipeline, as its runs use it.
pub fn checkpoint_storage(
    spec: &PipelineSpec,
    data_dir: &Path,
) -> Result<CheckpointStorage, RunError> {
    Ok(CheckpointStorage::open(&checkpoint_url(spec, data_dir)?, &spec.name)?)
}

/// The snapshot (checkpoint or savepoint) whose output an exactly-once
/// Kafka sink committed last, `committed`; `None` when nothing was ever
/// committed (start empty).
fn committed_snapshot(
    url: &str,
    spec: &PipelineSpec,
    committed: Option<u64>,
) -> Result<Option<LocatedSnapshot>, RunError> {
    let Some(id) = committed else { return Ok(None) };
    let storage = CheckpointStorage::open(url, &spec.name)?;
    for kind in [SnapshotKind::Checkpoint, SnapshotKind::Savepoint] {
        if let Some(metadata) = storage.completed_of(kind)?.into_iter().find(|m| m.id == id) {
            let newest = storage.completed()?.first().map(|m| m.id);
            if newest.is_some_and(|n| n > id) {
                tracing::warn!(newest = newest, restoring = id, "the newest checkpoint's Kafka transaction never committed; restoring the snapshot whose output Kafka holds");
            }
            return Ok(Some(storage.into_located(metadata)));
        }
    }
    Err(RunError::Resume {
        id,
        message: "the output topic's commit marker names this snapshot, but it is not stored (deleted?); restoring any other would lose or duplicate output — restore a snapshot explicitly with --restore, or start over with --fresh".into(),
    })
}

/// Each subtask's state: its database of `backends` behind a cache of
/// `cache_bytes` and, when checkpointing, a changelog chain under
/// `local_checkpoints` (changes piling up beyond the cache's own budget
/// between two checkpoints make the next one full instead).
pub(crate) fn cached_backends(
    backends: Vec<RocksDbBackend>,
    local_checkpoints: &Path,
    settings: Option<&CheckpointSettings>,
    cache_bytes: usize,
) -> Result<Vec<Box<dyn KeyedStateBackend>>, RunError> {
    let mut cached = Vec::with_capacity(backends.len());
    for (index, backend) in backends.into_iter().enumerate() {
        let mut cache = CachedBackend::new(Box::new(backend), cache_bytes);
        if let Some(settings) = settings {
            let chain = local_checkpoints.join(format!("chain-{index}"));
            cache = cache.with_changelog(Changelog::create(
                chain,
                settings.materialize_every,
                cache_bytes,
            )?);
            cache.start_chain(&local_checkpoints.join(format!("base-{index}")))?;
        }
        cached.push(Box::new(cache) as Box<dyn KeyedStateBackend>);
    }
    Ok(cached)
}
