//! Where a run starts: which snapshot it restores (the one asked for, the
//! newest completed checkpoint, or the one an exactly-once sink says it
//! committed, checked as [`crate::connectors::transactional`] says), the
//! state that gives each subtask, and the checkpoint storage the run goes
//! on with.

use std::path::{Path, PathBuf};

use super::error::RunError;
use super::options::{RestoreFrom, RunOptions};
use crate::checkpoint::CheckpointSettings;
use crate::checkpoint::{
    self, CheckpointError, CheckpointStorage, KnownFiles, LocatedSnapshot, RestoreTarget,
    SnapshotKind, SnapshotMetadata,
};
use crate::config;
use crate::connectors::transactional::{CommitMarker, TransactionalSink, OVERRIDE};
use crate::specification::graph::Graph;
use crate::specification::PipelineSpec;
use crate::state::changelog::Changelog;
use crate::state::layout::{self, Layout};
use crate::state::{CachedBackend, KeyedStateBackend, RocksDbBackend};

/// Where a run starts: its state (restored or not), the snapshot it came
/// from, and what checkpointing needs to go on.
pub(crate) struct StartingPoint {
    /// Each stage's subtasks' databases.
    pub(crate) backends: Vec<Vec<RocksDbBackend>>,
    /// The snapshot it restored, if any.
    pub(crate) snapshot: Option<LocatedSnapshot>,
    /// Where checkpoints go.
    pub(crate) storage: CheckpointStorage,
    /// The id of the first snapshot this run takes.
    pub(crate) first_id: u64,
    /// Per subtask slot, the SST files known to be stored already.
    pub(crate) known: Vec<KnownFiles>,
    /// Where the subtasks write local checkpoints.
    pub(crate) local_checkpoints: PathBuf,
    /// The newest snapshot whose output an exactly-once sink holds (its
    /// commit marker), if any.
    pub(crate) committed: Option<u64>,
    /// Without a snapshot of its own: the one its sources take their
    /// positions from ([`RunOptions::positions_from`]).
    pub(crate) positions: Option<LocatedSnapshot>,
}

/// Open the pipeline's state: restored from a snapshot when asked, or when
/// checkpointing and a completed checkpoint exists; empty when
/// checkpointing without one (the local state may be ahead of what the
/// sinks committed); else as the last run left it.
pub(crate) fn prepare_state(
    spec: &PipelineSpec,
    graph: &Graph,
    options: &RunOptions,
    settings: Option<&CheckpointSettings>,
) -> Result<StartingPoint, RunError> {
    let _span = tracing::info_span!("restore", pipeline = %spec.name).entered();
    let url = checkpoint_url(spec, &options.data_dir)?;
    let mut storage = CheckpointStorage::open(&url, &spec.name)?;
    if settings.is_some() {
        // Before anything is restored: from now on an older run still
        // writing here (a paused or cut-off worker) completes nothing and
        // deletes nothing this run writes.
        let generation = storage.claim_generation()?;
        tracing::info!(generation, "claimed the checkpoint storage");
    }
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
    // Fencing waits for the broker: not begun for a cancelled run.
    if options.handle.is_cancelled() {
        return Err(CheckpointError::Cancelled.into());
    }
    // An exactly-once sink says which snapshot's output it holds.
    let began = std::time::Instant::now();
    let (snapshot, committed) = match graph.transactional_sinks().next() {
        Some(sink) => {
            let start = transactional_start(&url, spec, options, sink, fresh)?;
            tracing::debug!(took = ?began.elapsed(), "fenced the sink's transactional ids, read its commit marker");
            start
        }
        None => {
            let snapshot = match &options.restore {
                Some(RestoreFrom::Path(path)) => Some(CheckpointStorage::locate(path)?),
                Some(RestoreFrom::Latest) => latest(true)?,
                None if settings.is_some() && !fresh => latest(false)?,
                None => None,
            };
            (snapshot, None)
        }
    };
    let local_checkpoints = config::local_checkpoints_dir(&options.data_dir, &spec.name);
    let mut known = vec![KnownFiles::new(); graph.subtasks()];
    if let Some(snapshot) = &snapshot {
        // Every stage the snapshot holds must be one of the pipeline's.
        let uids: Vec<&str> = graph.stages.iter().map(|s| s.uid.as_str()).collect();
        let metadata = &snapshot.metadata;
        if let Some(lost) =
            metadata.operator_states().into_iter().find(|o| !uids.contains(&o.uid.as_str()))
        {
            let message = if graph.stages.len() == 1 && metadata.operators.is_empty() {
                format!(
                    "it holds state of operator {:?} and this pipeline's operator is {:?} (set `uid: {}` on the function to keep that state)",
                    lost.uid, uids[0], lost.uid
                )
            } else {
                format!(
                    "it holds state of operator {:?}, which this pipeline does not have (keep that stage's `uid: {}`, or start over with --fresh)",
                    lost.uid, lost.uid
                )
            };
            return Err(CheckpointError::Incompatible {
                what: format!("{:?} {}", metadata.kind, metadata.id).to_lowercase(),
                message,
            }
            .into());
        }
    }
    let mut backends = Vec::new();
    let mut first_slot = 0;
    for stage in &graph.stages {
        let layout =
            Layout { max_parallelism: spec.max_parallelism, parallelism: stage.parallelism };
        let state_dir = stage_state_dir(spec, &options.data_dir, &stage.uid);
        let held = snapshot
            .as_ref()
            .filter(|s| s.metadata.operator_states().iter().any(|o| o.uid == stage.uid));
        if let Some(snapshot) = held {
            let target = RestoreTarget {
                state_dir: &state_dir,
                local_checkpoints: &local_checkpoints,
                layout,
                operator_uid: &stage.uid,
                first_slot,
                storage: &storage,
                cancelled: &|| options.handle.is_cancelled(),
            };
            let restored = checkpoint::restore(snapshot, &target)?;
            for (index, files) in restored.into_iter().enumerate() {
                if let Some(slot) = known.get_mut(first_slot + index) {
                    *slot = files;
                }
            }
            tracing::info!(id = snapshot.metadata.id, kind = ?snapshot.metadata.kind, stage = %stage.uid, took = ?began.elapsed(), "restored state");
        } else if snapshot.is_some() {
            tracing::info!(stage = %stage.uid, "the snapshot holds no state of this stage: it starts empty");
        }
        // A first start (nothing of its own to restore) may be seeded.
        let seed = options.seeds.iter().find(|s| s.stage == stage.uid);
        let seeded = match seed {
            Some(seed) if snapshot.is_none() && !fresh => {
                let cancelled = || options.handle.is_cancelled();
                super::seed::seed(seed, &url, &storage, &state_dir, layout, &cancelled)?;
                true
            }
            _ => false,
        };
        // Empty when starting over, or when a snapshot was restored but
        // held nothing of this stage.
        let empty =
            held.is_none() && !seeded && (snapshot.is_some() || fresh || settings.is_some());
        backends.push(layout::open_subtasks(&state_dir, layout, empty)?);
        first_slot += usize::from(stage.parallelism);
    }
    tracing::debug!(took = ?began.elapsed(), "state opened");
    if snapshot.is_none() {
        tracing::info!("no snapshot restored");
    }
    // Local copies served the restore; new checkpoints start a new chain.
    if local_checkpoints.exists() {
        std::fs::remove_dir_all(&local_checkpoints).map_err(CheckpointError::from)?;
    }
    let first_id = storage
        .highest_id()?
        .max(snapshot.as_ref().map_or(0, |s| s.metadata.id))
        .checked_add(1)
        .filter(|id| *id <= crate::checkpoint::MAX_SNAPSHOT_ID)
        .ok_or_else(|| {
            CheckpointError::Corrupt(format!(
                "the snapshot to restore has id {} — beyond any id Weir writes: not a snapshot Weir took",
                snapshot.as_ref().map_or(0, |s| s.metadata.id)
            ))
        })?;
    let positions = match (&snapshot, &options.positions_from) {
        (None, Some(location)) if !fresh => Some(CheckpointStorage::locate(location)?),
        _ => None,
    };
    Ok(StartingPoint {
        backends,
        snapshot,
        storage,
        first_id,
        known,
        local_checkpoints,
        committed,
        positions,
    })
}

/// How a run with an exactly-once sink starts: the snapshot it
/// restores and the newest snapshot whose output the topic holds, decided
/// from the sink's commit marker checked against what the stored snapshots
/// record as committed (see [`MarkerCheck`]). A first run (no snapshots,
/// no marker) sets the marker to `0`, so that a marker found absent later
/// means it was lost.
fn transactional_start(
    url: &str,
    spec: &PipelineSpec,
    options: &RunOptions,
    sink: &dyn TransactionalSink,
    fresh: bool,
) -> Result<(Option<LocatedSnapshot>, Option<u64>), RunError> {
    let marker = sink.committed()?;
    let storage = CheckpointStorage::open(url, &spec.name)?;
    // The evidence is the checkpoints (the host's own, deleted with the
    // pipeline); savepoints belong to the user and may outlive it.
    let stored = storage.completed()?;
    let savepoints = storage.completed_of(SnapshotKind::Savepoint)?;
    let check = MarkerCheck {
        pipeline: &spec.name,
        marker_name: sink.marker_name()?,
        marker,
        stored: &stored,
        savepoints: &savepoints,
    };
    let marked = match marker {
        CommitMarker::At(c) if c > 0 => Some(c),
        _ => None,
    };
    let accept = options.override_commit_marker;
    match &options.restore {
        Some(RestoreFrom::Path(path)) => {
            let located = CheckpointStorage::locate(path)?;
            let id = located.metadata.id;
            // Another pipeline's snapshot numbers another sequence.
            let own = located.metadata.pipeline == spec.name;
            let problem = if own { check.against_restore(&located, &storage) } else { None };
            match problem {
                None => Ok((Some(located), marked)),
                Some(message) if !accept => Err(check.error(message)),
                Some(message) => {
                    tracing::warn!(restoring = id, "{message}; --override-kafka-marker: restoring snapshot {id} as asked and setting the commit marker to it");
                    sink.set_committed(id)?;
                    Ok((Some(located), Some(id)))
                }
            }
        }
        None if fresh => {
            if marker == CommitMarker::Absent {
                sink.set_committed(0)?;
            }
            Ok((None, marked))
        }
        restore => {
            let required = restore.is_some();
            let snapshot = match check.against_checkpoints() {
                None => {
                    if marker == CommitMarker::Absent {
                        sink.set_committed(0)?;
                    }
                    let snapshot = committed_snapshot(url, spec, marked)?;
                    return match snapshot {
                        None if required => Err(RunError::NothingToRestore(spec.name.clone())),
                        snapshot => Ok((snapshot, marked)),
                    };
                }
                Some(message) if !accept => return Err(check.error(message)),
                Some(message) => {
                    let recorded = check.recorded().map(|(_, r)| r);
                    let snapshot = match recorded {
                        Some(id) => committed_snapshot(url, spec, Some(id))?,
                        None if required => {
                            return Err(RunError::NothingToRestore(spec.name.clone()))
                        }
                        None => None,
                    };
                    tracing::warn!("{message}; --override-kafka-marker: restoring snapshot {recorded:?}, the newest the checkpoints record as committed (results after it may be written again)");
                    sink.set_committed(recorded.unwrap_or(0))?;
                    snapshot
                }
            };
            let committed = snapshot.as_ref().map(|s| s.metadata.id);
            Ok((snapshot, committed))
        }
    }
}

/// The commit marker of an exactly-once sink held against the
/// pipeline's stored checkpoints, each of which records the newest
/// snapshot known to be committed when it was taken.
struct MarkerCheck<'a> {
    pipeline: &'a str,
    /// The marker as people find it ([`TransactionalSink::marker_name`]).
    marker_name: String,
    marker: CommitMarker,
    /// The completed checkpoints.
    stored: &'a [SnapshotMetadata],
    /// The savepoints (only to say where the marker's snapshot is).
    savepoints: &'a [SnapshotMetadata],
}

impl MarkerCheck<'_> {
    /// `(snapshot recording it, id)`: the newest commit any stored snapshot
    /// records.
    fn recorded(&self) -> Option<(u64, u64)> {
        self.stored.iter().filter_map(|m| Some((m.id, m.last_committed?))).max_by_key(|(_, r)| *r)
    }

    /// What the marker says, for messages.
    fn says(&self) -> String {
        let marker = &self.marker_name;
        match self.marker {
            CommitMarker::Absent => format!("{marker} is absent"),
            CommitMarker::At(0) => format!("{marker} says nothing was committed yet"),
            CommitMarker::At(c) => {
                format!("{marker} says the output of snapshot {c} is the last in the topic")
            }
        }
    }

    /// Starting from the marker's snapshot: the marker must not be absent
    /// while snapshots exist, nor older than a recorded commit.
    fn against_checkpoints(&self) -> Option<String> {
        let lost = "the marker was lost or reset (offsets retention after a long stop, a deleted consumer group, a renamed transactional_id_prefix or a recreated topic?), so the topic's contents cannot be matched to a snapshot";
        let (by, r) = match (self.marker, self.recorded()) {
            (CommitMarker::Absent, _) if self.stored.is_empty() => return None,
            (CommitMarker::Absent, None) => {
                let ids: Vec<String> = self.stored.iter().map(|m| m.id.to_string()).collect();
                return Some(format!(
                    "{}, but pipeline {} has completed checkpoints ({}): {lost}. Pass {OVERRIDE} to start from empty state (no checkpoint records a commit; results already in the topic are written again), or --fresh to start over",
                    self.says(), self.pipeline, ids.join(", ")
                ));
            }
            (CommitMarker::Absent, Some(recorded)) => recorded,
            (CommitMarker::At(c), Some(recorded)) if c < recorded.1 => recorded,
            (CommitMarker::At(_), _) => return None,
        };
        Some(format!(
            "{}, but checkpoint {by} records that the output of snapshot {r} was committed: {lost}. Pass {OVERRIDE} to restore snapshot {r}, the newest the checkpoints record as committed (results after it may be written again, never lost), or --fresh to start from empty state",
            self.says()
        ))
    }

    /// Restoring `located`, one of this pipeline's snapshots, as asked: the
    /// marker must name it (else output would be lost or written twice).
    fn against_restore(
        &self,
        located: &LocatedSnapshot,
        storage: &CheckpointStorage,
    ) -> Option<String> {
        let id = located.metadata.id;
        let c = match self.marker {
            CommitMarker::Absent if self.stored.is_empty() => return None,
            CommitMarker::Absent => return Some(format!(
                "{}, but pipeline {} has completed checkpoints: the marker was lost or reset (offsets retention, a deleted consumer group, a recreated topic?), so it cannot be checked that restoring snapshot {id} loses or repeats nothing. Pass {OVERRIDE} to restore snapshot {id} anyway (the marker is then set to it)",
                self.says(), self.pipeline
            )),
            CommitMarker::At(c) if c == id => return None,
            CommitMarker::At(c) => c,
        };
        let marked = self
            .stored
            .iter()
            .chain(self.savepoints)
            .find(|m| m.id == c)
            .map(|m| storage.describe(&storage.snapshot_dir(m.kind, m.id)));
        Some(if c < id {
            let replay = match marked {
                Some(location) => {
                    format!("Restore snapshot {c} instead to replay them (--restore {location})")
                }
                None if c == 0 => {
                    "Start without --restore and with --fresh to replay everything".to_string()
                }
                None => format!(
                    "Snapshot {c} is no longer stored; start with --fresh to replay everything"
                ),
            };
            format!(
                "{}, but snapshot {id} (asked to restore) is newer: the results between snapshots {c} and {id} were never committed (the commit of {id} failed or never happened), and restoring {id} would lose them. {replay}, or pass {OVERRIDE} to restore {id} anyway (those results are lost)",
                self.says()
            )
        } else {
            format!(
                "{}, but snapshot {id} (asked to restore) is older: restoring it would write the results between snapshots {id} and {c} again (duplicates for read_committed readers). Start without --restore to resume from snapshot {c}, or pass {OVERRIDE} to restore {id} anyway (those results are written twice)",
                self.says()
            )
        })
    }

    fn error(&self, message: String) -> RunError {
        RunError::CommitMarker { pipeline: self.pipeline.to_string(), message }
    }
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

/// Where stage `uid` of `spec`'s pipeline keeps its keyed state: a line
/// spec's one stage in the pipeline's state directory, a graph's stages
/// each in `operators/<uid>` beside it.
fn stage_state_dir(spec: &PipelineSpec, data_dir: &Path, uid: &str) -> PathBuf {
    if spec.operators.is_empty() {
        config::pipeline_state_dir(data_dir, &spec.name)
    } else {
        config::pipeline_operators_dir(data_dir, &spec.name).join(uid)
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

/// The most keys a subtask's restored database may hold for its cache to
/// filter reads of keys it lacks (reading them takes about a second per
/// few million; see [`CachedBackend::track_backend_keys`]).
const MOST_RESTORED_KEYS_FILTERED: usize = 4 << 20;

/// A changelog records the changes evicted between two checkpoints up to
/// the cache's budget divided by this (an eighth); past it, the next
/// checkpoint is full instead. Changes evicted are in the database
/// already (written back), so a full checkpoint takes them with its
/// files, and logging them too would write, hash and upload them twice:
/// with state much larger than the cache (ten million keys, most events a
/// key's first) that was a tenth of the run.
const EVICTED_CHANGES_PER_CACHE: usize = 8;

/// Each subtask's state: its database of `backends` behind a cache of
/// `cache_bytes` and, when checkpointing, a changelog chain under
/// `local_checkpoints` (changes evicted beyond an eighth of the cache's
/// budget between two checkpoints make the next one full instead).
pub(crate) fn cached_backends(
    backends: Vec<RocksDbBackend>,
    first_slot: usize,
    local_checkpoints: &Path,
    settings: Option<&CheckpointSettings>,
    cache_bytes: usize,
) -> Result<Vec<Box<dyn KeyedStateBackend>>, RunError> {
    let mut cached = Vec::with_capacity(backends.len());
    for (index, backend) in backends.into_iter().enumerate() {
        let index = first_slot + index;
        let mut cache = CachedBackend::new(Box::new(backend), cache_bytes);
        cache.track_backend_keys(MOST_RESTORED_KEYS_FILTERED)?;
        if let Some(settings) = settings {
            let chain = local_checkpoints.join(format!("chain-{index}"));
            cache = cache.with_changelog(Changelog::create(
                chain,
                settings.materialize_every,
                cache_bytes / EVICTED_CHANGES_PER_CACHE,
            )?);
            cache.start_chain(&local_checkpoints.join(format!("base-{index}")))?;
        }
        cached.push(Box::new(cache) as Box<dyn KeyedStateBackend>);
    }
    Ok(cached)
}

#[cfg(test)]
mod tests {
    //! The commit-marker decision, over metadata that records commits.

    use super::*;
    use crate::checkpoint::StateFiles;

    fn snapshot(id: u64, last_committed: Option<u64>) -> SnapshotMetadata {
        SnapshotMetadata {
            id,
            kind: SnapshotKind::Checkpoint,
            pipeline: "orders".into(),
            completed_at: 0,
            operator_uid: "process".into(),
            max_parallelism: 128,
            parallelism: 1,
            state: StateFiles::Rocksdb { subtasks: vec![] },
            operators: Vec::new(),
            source: serde_json::Value::Null,
            sink: serde_json::Value::Null,
            last_committed,
            size_bytes: 0,
            incremental_bytes: 0,
            duration_ms: 0,
            alignment_ms: 0,
            generation: 0,
        }
    }

    fn check(marker: CommitMarker, stored: &[SnapshotMetadata]) -> Option<String> {
        MarkerCheck {
            pipeline: "orders",
            marker_name: "the Kafka commit marker (consumer group weir-txn-orders on topic revenue partition 0)".into(),
            marker,
            stored,
            savepoints: &[],
        }
        .against_checkpoints()
    }

    #[test]
    fn a_marker_is_refused_when_absent_or_behind_a_recorded_commit() {
        use CommitMarker::{Absent, At};
        let stored = [snapshot(7, Some(6)), snapshot(6, Some(5)), snapshot(5, None)];
        // A first run; a marker at or past the newest recorded commit.
        assert_eq!(check(Absent, &[]), None);
        assert_eq!(check(At(6), &stored), None);
        assert_eq!(check(At(7), &stored), None);
        assert_eq!(check(At(0), &[snapshot(1, None)]), None, "died before its first commit");
        // Lost or reset: refused, naming the cause and the way out.
        let lost = check(Absent, &stored).unwrap();
        assert!(
            lost.contains("consumer group weir-txn-orders on topic revenue partition 0) is absent"),
            "{lost}"
        );
        assert!(
            lost.contains("checkpoint 7 records that the output of snapshot 6 was committed"),
            "{lost}"
        );
        assert!(
            lost.contains(
                "--override-kafka-marker (API: override_kafka_marker=true) to restore snapshot 6"
            ),
            "{lost}"
        );
        assert!(lost.contains("--fresh"), "{lost}");
        let behind = check(At(5), &stored).unwrap();
        assert!(
            behind.contains("says the output of snapshot 5 is the last in the topic"),
            "{behind}"
        );
        let unknown = check(Absent, &[snapshot(1, None)]).unwrap();
        assert!(unknown.contains("has completed checkpoints (1)"), "{unknown}");
        assert!(unknown.contains("to start from empty state"), "{unknown}");
    }

    #[test]
    fn metadata_without_last_committed_reads_as_unknown() {
        let mut json = serde_json::to_value(snapshot(3, Some(2))).unwrap();
        json.as_object_mut().unwrap().remove("last_committed");
        let old: SnapshotMetadata = serde_json::from_value(json).unwrap();
        assert_eq!(old.last_committed, None);
    }
}
