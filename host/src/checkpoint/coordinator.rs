//! The checkpoint coordinator: triggers checkpoints and savepoints,
//! collects every task's acknowledgement, stores the snapshot, writes its
//! metadata last, then tells the sinks to commit.
//!
//! ```text
//! coordinator ── Trigger(N) ──► source: records positions, injects barrier N
//!      ▲                          │ in-band, behind the events before it
//!      │ Ack::Source(N)           ▼
//!      │ Ack::Subtask(N, i) ◄── subtask i: a changelog of its changed
//!      │                          state, or flushes its cache and takes a
//!      │                          RocksDB checkpoint (hard links); forwards N
//!      │ Ack::Sink(N)       ◄── sink: barrier N from every input →
//!      │                          pre-commit (durable, invisible)
//!      └─ all acks: upload (off the hot path), `_metadata` last,
//!         then Complete(N) to the sink, which commits; retention.
//! ```
//!
//! At most one snapshot is in flight; a new checkpoint starts `interval`
//! after the previous trigger and at least `min_pause` after the previous
//! completion; one not complete within `timeout` is abandoned (its pending
//! output is covered by the next). Savepoints are asked for through files
//! in the pipeline's control directory (see [`control`](super::control)).

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::control::{ControlDir, Request, Response};
use super::incremental::{self, KnownFiles};
use super::metadata::{CanonicalFile, SnapshotKind, SnapshotMetadata, StateFiles};
use super::settings::CheckpointSettings;
use super::{canonical, CheckpointError, CheckpointStorage};

/// What the pipeline's tasks tell the coordinator.
#[derive(Debug)]
pub enum Ack {
    /// The source recorded `state` and injected barrier `id`.
    Source {
        /// The snapshot.
        id: u64,
        /// Positions and watermarks to resume from.
        state: serde_json::Value,
    },
    /// Subtask `index` wrote its state for `id` into the local directory `dir`.
    Subtask {
        /// The snapshot.
        id: u64,
        /// The subtask.
        index: usize,
        /// Its RocksDB checkpoint.
        dir: PathBuf,
    },
    /// Barrier `id` arrived from every input of the sink, which pre-committed.
    Sink {
        /// The snapshot.
        id: u64,
        /// What the sinks need to commit or recover.
        state: serde_json::Value,
    },
    /// A bounded source is exhausted: take a final checkpoint, then end.
    SourceFinished,
    /// The pipeline is ending early (a failure): stop now.
    Shutdown,
}

/// What the coordinator asks the source to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    /// The snapshot's id.
    pub id: u64,
    /// Checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// Stop reading after injecting the barrier (stop with savepoint).
    pub stop: bool,
}

/// What the coordinator knows of the pipeline.
pub struct CoordinatorConfig {
    /// The pipeline's name.
    pub pipeline: String,
    /// The keyed operator's uid.
    pub operator_uid: String,
    /// Key groups.
    pub max_parallelism: u16,
    /// Keyed subtasks.
    pub parallelism: u16,
    /// Periodic checkpoints; `None` takes snapshots only on request.
    pub schedule: Option<CheckpointSettings>,
    /// Where subtasks write local checkpoints (`chk-<id>/subtask-<i>`).
    pub local_dir: PathBuf,
    /// Where savepoint requests arrive from other processes.
    pub control: ControlDir,
    /// Where they arrive from this process (the HTTP API).
    pub inbox: Option<Receiver<Request>>,
    /// Told of each completed snapshot (live status).
    pub on_snapshot: Box<dyn Fn(&CompletedSnapshot) + Send>,
    /// The first id to use.
    pub first_id: u64,
    /// The checkpoint this run restored from. Retention keeps it until two
    /// checkpoints of this run have completed: until then it may be the
    /// last one whose output an exactly-once sink committed (the Kafka
    /// commit marker's), which the next restart must find, however many
    /// newer checkpoints runs killed before their first commit completed.
    pub restored_checkpoint: Option<u64>,
    /// Per subtask, SSTs already stored (from the restored checkpoint).
    pub known: Vec<KnownFiles>,
}

/// One completed snapshot, for the run summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedSnapshot {
    /// Its id.
    pub id: u64,
    /// Checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// When it completed, in milliseconds since the epoch.
    pub completed_at: i64,
    /// Bytes of all files it references.
    pub size_bytes: u64,
    /// Bytes it uploaded.
    pub incremental_bytes: u64,
    /// Trigger to completion.
    pub duration: Duration,
    /// Where it is.
    pub location: String,
}

/// What the coordinator did in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordinatorReport {
    /// Snapshots completed (each also went to `on_snapshot`).
    pub completed: usize,
    /// Snapshots abandoned after their timeout.
    pub expired: u64,
}

struct Pending {
    trigger: Trigger,
    started: Instant,
    final_checkpoint: bool,
    request: Option<Request>,
    source: Option<serde_json::Value>,
    subtasks: Vec<Option<PathBuf>>,
    sink: Option<serde_json::Value>,
}

impl Pending {
    fn is_complete(&self) -> bool {
        self.source.is_some() && self.sink.is_some() && self.subtasks.iter().all(Option::is_some)
    }
}

/// How often the control directory is looked at.
const CONTROL_POLL: Duration = Duration::from_millis(100);

/// Runs on its own thread for the life of a pipeline run.
pub struct Coordinator {
    config: CoordinatorConfig,
    storage: CheckpointStorage,
    triggers: Sender<Trigger>,
    acks: Receiver<Ack>,
    complete: Box<dyn FnMut(u64) -> bool + Send>,
    next_id: u64,
    report: CoordinatorReport,
    /// Checkpoints completed by this run.
    checkpoints_completed: usize,
}

impl Coordinator {
    /// A coordinator storing into `storage`, triggering through `triggers`,
    /// hearing from tasks on `acks`, and calling `complete(id)` to make the
    /// sinks commit (it returns false once the sink is gone).
    pub fn new(
        config: CoordinatorConfig,
        storage: CheckpointStorage,
        triggers: Sender<Trigger>,
        acks: Receiver<Ack>,
        complete: Box<dyn FnMut(u64) -> bool + Send>,
    ) -> Self {
        let next_id = config.first_id;
        Self {
            config,
            storage,
            triggers,
            acks,
            complete,
            next_id,
            report: CoordinatorReport::default(),
            checkpoints_completed: 0,
        }
    }

    /// Coordinate until the pipeline ends.
    pub fn run(mut self) -> Result<CoordinatorReport, CheckpointError> {
        let result = self.coordinate();
        if let Err(error) = &result {
            // Whoever asked for a savepoint hears why it will not come.
            for request in self.take_requests() {
                request.respond(&Response::failed(&error.to_string()));
            }
        }
        result.map(|()| self.report)
    }

    fn coordinate(&mut self) -> Result<(), CheckpointError> {
        let schedule = self.config.schedule.clone();
        let mut next_due = schedule.as_ref().map(|s| Instant::now() + s.interval);
        let mut last_end = Instant::now();
        let mut pending: Option<Pending> = None;
        let mut requests: Vec<Request> = Vec::new();
        let mut source_finished = false;
        let mut last_poll = Instant::now() - CONTROL_POLL;
        loop {
            let now = Instant::now();
            let mut wake = now + CONTROL_POLL;
            if let Some(due) = next_due.filter(|_| pending.is_none()) {
                wake = wake.min(due);
            }
            match self.acks.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Ack::Shutdown) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(Ack::SourceFinished) => source_finished = true,
                Ok(ack) => record(&mut pending, ack),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if pending.as_ref().is_some_and(Pending::is_complete) {
                let done = pending.take().expect("checked above");
                let stop = done.trigger.stop || done.final_checkpoint;
                self.finish(done)?;
                last_end = Instant::now();
                if stop {
                    return Ok(());
                }
            }
            if let (Some(p), Some(s)) = (&pending, &schedule) {
                if p.started.elapsed() > s.timeout {
                    let expired = pending.take().expect("checked above");
                    tracing::warn!(id = expired.trigger.id, timeout = ?s.timeout, "checkpoint expired before every task acknowledged; abandoning it");
                    let (id, last) =
                        (expired.trigger.id, expired.trigger.stop || expired.final_checkpoint);
                    self.abandon(expired);
                    if last {
                        // The source has stopped reading: nothing can follow.
                        return Err(CheckpointError::Expired(id));
                    }
                }
            }
            if last_poll.elapsed() >= CONTROL_POLL {
                last_poll = Instant::now();
                requests.extend(self.take_requests());
            }
            if pending.is_some() {
                continue;
            }
            let now = Instant::now();
            let trigger = if source_finished {
                // Bounded input is exhausted: a final snapshot commits the
                // rest of the output (none without checkpointing).
                match (requests.pop(), &schedule) {
                    (Some(request), _) => Some((request.kind, true, Some(request))),
                    (None, Some(_)) => Some((SnapshotKind::Checkpoint, true, None)),
                    (None, None) => return Ok(()),
                }
            } else if let Some(request) = requests.pop() {
                Some((request.kind, request.stop, Some(request)))
            } else {
                let due = next_due.is_some_and(|d| now >= d)
                    && schedule.as_ref().is_some_and(|s| now >= last_end + s.min_pause);
                due.then_some((SnapshotKind::Checkpoint, false, None))
            };
            if let Some((kind, stop, request)) = trigger {
                let trigger = Trigger { id: self.next_id, kind, stop: stop && !source_finished };
                self.next_id += 1;
                if let Some(s) = &schedule {
                    next_due = Some(now + s.interval);
                }
                if self.triggers.send(trigger).is_err() {
                    // The source has ended (a failure it reports itself).
                    if let Some(request) = request {
                        request.respond(&Response::failed(
                            "the pipeline stopped before the snapshot was taken",
                        ));
                    }
                    return Ok(());
                }
                let subtasks = vec![None; usize::from(self.config.parallelism)];
                pending = Some(Pending {
                    trigger,
                    started: now,
                    final_checkpoint: source_finished || stop,
                    request,
                    source: None,
                    subtasks,
                    sink: None,
                });
            }
        }
    }

    /// Requests waiting in the control directory and the inbox.
    fn take_requests(&self) -> Vec<Request> {
        let mut requests = self.config.control.take_requests();
        requests.extend(self.config.inbox.iter().flat_map(Receiver::try_iter));
        requests
    }

    /// Store a snapshot every task has acknowledged, then commit it.
    fn finish(&mut self, pending: Pending) -> Result<(), CheckpointError> {
        let Pending { trigger, started, request, source, subtasks, sink, .. } = pending;
        let dirs: Vec<PathBuf> = subtasks.into_iter().flatten().collect();
        let stored = self.store(
            trigger,
            &dirs,
            source.unwrap_or_default(),
            sink.unwrap_or_default(),
            started,
        );
        let metadata = match stored {
            Ok(metadata) => metadata,
            Err(error) => {
                if let Some(request) = request {
                    request.respond(&Response::failed(&error.to_string()));
                }
                return Err(error);
            }
        };
        let location = self.storage.describe(&self.storage.snapshot_dir(trigger.kind, trigger.id));
        // Metadata is written: the snapshot is complete. Now the sinks may
        // make its output visible.
        (self.complete)(trigger.id);
        if let Some(request) = request {
            request.respond(&Response::done(&location));
        }
        tracing::info!(
            id = trigger.id,
            kind = ?trigger.kind,
            size_bytes = metadata.size_bytes,
            incremental_bytes = metadata.incremental_bytes,
            duration_ms = metadata.duration_ms,
            "snapshot complete"
        );
        let completed = CompletedSnapshot {
            id: trigger.id,
            kind: trigger.kind,
            completed_at: metadata.completed_at,
            size_bytes: metadata.size_bytes,
            incremental_bytes: metadata.incremental_bytes,
            duration: started.elapsed(),
            location,
        };
        (self.config.on_snapshot)(&completed);
        self.report.completed += 1;
        if trigger.kind == SnapshotKind::Checkpoint {
            self.checkpoints_completed += 1;
            // Two completed here mean the sink committed the first of them
            // (it pre-commits one checkpoint at a time).
            let pinned = self.config.restored_checkpoint.filter(|_| self.checkpoints_completed < 2);
            if let Some(schedule) = &self.config.schedule {
                self.storage.retain(schedule.retained, pinned)?;
            }
        }
        self.remove_local_copies(trigger.id, trigger.kind == SnapshotKind::Checkpoint);
        Ok(())
    }

    fn store(
        &mut self,
        trigger: Trigger,
        dirs: &[PathBuf],
        source: serde_json::Value,
        sink: serde_json::Value,
        started: Instant,
    ) -> Result<SnapshotMetadata, CheckpointError> {
        let dir = self.storage.snapshot_dir(trigger.kind, trigger.id);
        let (mut size_bytes, mut incremental_bytes) = (0, 0);
        let state = match trigger.kind {
            SnapshotKind::Checkpoint => {
                self.config.known.resize_with(dirs.len(), KnownFiles::new);
                let mut subtasks = Vec::new();
                for (index, (local, known)) in dirs.iter().zip(&mut self.config.known).enumerate() {
                    let uploaded = incremental::upload(&self.storage, &dir, index, local, known)?;
                    size_bytes += uploaded.size;
                    incremental_bytes += uploaded.sent;
                    subtasks.push(uploaded.files);
                }
                StateFiles::Rocksdb { subtasks }
            }
            SnapshotKind::Savepoint => {
                let mut files = Vec::new();
                for (index, local) in dirs.iter().enumerate() {
                    let encoded = canonical::encode_database(local)?;
                    let name = format!("{}/state-{index}.bin", self.config.operator_uid);
                    let size = encoded.bytes.len() as u64;
                    let (first_key_group, last_key_group) = encoded.key_groups.unwrap_or((0, 0));
                    self.storage.put(&dir, &name, encoded.bytes)?;
                    files.push(CanonicalFile {
                        name,
                        first_key_group,
                        last_key_group,
                        entries: encoded.entries,
                        size,
                    });
                    size_bytes += size;
                }
                incremental_bytes = size_bytes;
                StateFiles::Canonical { files }
            }
        };
        let metadata = SnapshotMetadata {
            id: trigger.id,
            kind: trigger.kind,
            pipeline: self.config.pipeline.clone(),
            completed_at: crate::state::ttl::now_millis(),
            operator_uid: self.config.operator_uid.clone(),
            max_parallelism: self.config.max_parallelism,
            parallelism: self.config.parallelism,
            state,
            source,
            sink,
            size_bytes,
            incremental_bytes,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        self.storage.commit(&metadata)?;
        Ok(metadata)
    }

    fn abandon(&mut self, pending: Pending) {
        self.report.expired += 1;
        if let Some(request) = pending.request {
            request.respond(&Response::failed(
                "the savepoint expired before every task acknowledged it",
            ));
        }
        remove_dir(&self.config.local_dir.join(format!("chk-{}", pending.trigger.id)));
    }

    /// Delete local checkpoint copies older than `id` (and `id` itself
    /// unless it is a checkpoint kept for fast local recovery).
    fn remove_local_copies(&self, id: u64, keep_this: bool) {
        let Ok(entries) = std::fs::read_dir(&self.config.local_dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(other) = name
                .to_str()
                .and_then(|n| n.strip_prefix("chk-"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if other < id || (other == id && !keep_this) {
                remove_dir(&entry.path());
            }
        }
    }
}

/// Record an acknowledgement for the snapshot in flight; one for another
/// (abandoned) snapshot is dropped, with its local files.
fn record(pending: &mut Option<Pending>, ack: Ack) {
    let current = pending.as_ref().map(|p| p.trigger.id);
    match ack {
        Ack::Source { id, state } if Some(id) == current => {
            pending.as_mut().expect("current").source = Some(state)
        }
        Ack::Sink { id, state } if Some(id) == current => {
            pending.as_mut().expect("current").sink = Some(state)
        }
        Ack::Subtask { id, index, dir } if Some(id) == current => {
            if let Some(slot) = pending.as_mut().expect("current").subtasks.get_mut(index) {
                *slot = Some(dir);
            }
        }
        Ack::Subtask { dir, .. } => remove_dir(&dir),
        _ => {}
    }
}

fn remove_dir(dir: &std::path::Path) {
    if let Err(error) = std::fs::remove_dir_all(dir) {
        if error.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove a local checkpoint copy");
        }
    }
}
