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
//! At most one snapshot is in flight; the first checkpoint of a run that
//! restored a snapshot starts [`FIRST_CHECKPOINT_AFTER_RESTORE`] after
//! the run starts (or `interval`, if shorter), a fresh run's `interval`
//! after, and each next one `interval` after the previous trigger and at
//! least `min_pause` after the previous completion; one not complete
//! within `timeout` is abandoned (its pending output is covered by the
//! next). The timeout covers the upload too: a
//! snapshot whose files are not all stored by then is abandoned before its
//! metadata is written, never completed late (an exactly-once sink's
//! transaction must outlive its checkpoint, and its timeout is checked
//! against this one). Savepoints are asked for through files
//! in the pipeline's control directory (see [`control`](super::control)).

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::control::{ControlDir, Request, Response};
use super::incremental::{self, KnownFiles};
use super::metadata::{
    CanonicalFile, OperatorSnapshot, SnapshotKind, SnapshotMetadata, StateFiles,
};
use super::settings::CheckpointSettings;
use super::{canonical, CheckpointError, CheckpointStorage};

/// What the pipeline's tasks tell the coordinator.
#[derive(Debug)]
pub enum Ack {
    /// Source `source` recorded `state` and injected barrier `id`.
    Source {
        /// The snapshot.
        id: u64,
        /// Which source (its index among the pipeline's).
        source: usize,
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
        /// How long it waited from the first barrier of `id` to the last.
        alignment: Duration,
    },
    /// Barrier `id` arrived from every input of the sink, which pre-committed.
    Sink {
        /// The snapshot.
        id: u64,
        /// What the sinks need to commit or recover.
        state: serde_json::Value,
        /// The newest snapshot whose output the sinks know is committed.
        committed: Option<u64>,
    },
    /// A bounded source is exhausted: once every source is, take a final
    /// checkpoint, then end.
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
    /// Whether the run was cancelled: asked every control poll; the
    /// coordinator then fails the run at once with
    /// [`CheckpointError::Cancelled`], completing no further snapshot.
    pub cancelled: Box<dyn Fn() -> bool + Send>,
    /// Every keyed stage's uid and subtasks, in slot order (stage `s`'s
    /// subtask `i` acks as the slot after every earlier stage's).
    pub operators: Vec<(String, u16)>,
    /// The sources' names.
    pub sources: Vec<String>,
    /// Key groups.
    pub max_parallelism: u16,
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
    /// Told of each snapshot abandoned (failed or expired).
    pub on_failure: Box<dyn Fn() + Send>,
    /// Told the id of a drained stop's snapshot before it is triggered (the
    /// sinks write their ends in its epoch).
    pub on_drain: Box<dyn Fn(u64) + Send>,
    /// The first id to use.
    pub first_id: u64,
    /// Whether the run restored a snapshot (its first checkpoint comes
    /// sooner, see [`FIRST_CHECKPOINT_AFTER_RESTORE`]).
    pub restored: bool,
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
    /// The longest any subtask waited from its first barrier to its last.
    pub alignment: Duration,
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
    sources: Vec<Option<serde_json::Value>>,
    subtasks: Vec<Option<PathBuf>>,
    /// The longest barrier alignment of the subtasks acknowledged so far.
    alignment: Duration,
    sink: Option<serde_json::Value>,
    committed: Option<u64>,
}

impl Pending {
    fn is_complete(&self) -> bool {
        self.sources.iter().all(Option::is_some)
            && self.sink.is_some()
            && self.subtasks.iter().all(Option::is_some)
    }
}

/// How often the control directory is looked at.
const CONTROL_POLL: Duration = Duration::from_millis(100);

/// When the first checkpoint of a run that restored a snapshot is due, if
/// its `interval` is longer: a restarted or moved run commits what it read
/// since its restore soon (an exactly-once sink shows nothing before),
/// instead of a whole interval after it started. A fresh run keeps the
/// interval: on a backlog, an extra commit at its start only shifts every
/// later one.
pub const FIRST_CHECKPOINT_AFTER_RESTORE: Duration = Duration::from_millis(200);

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
        let restored = self.config.restored;
        let mut next_due = schedule.as_ref().map(|s| {
            let first =
                if restored { s.interval.min(FIRST_CHECKPOINT_AFTER_RESTORE) } else { s.interval };
            Instant::now() + first
        });
        let mut last_end = Instant::now();
        let mut pending: Option<Pending> = None;
        let mut requests: Vec<Request> = Vec::new();
        let mut sources_finished = 0;
        let mut last_poll = Instant::now() - CONTROL_POLL;
        loop {
            let now = Instant::now();
            let mut wake = now + CONTROL_POLL;
            if let Some(due) = next_due.filter(|_| pending.is_none()) {
                wake = wake.min(due);
            }
            match self.acks.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Ack::Shutdown) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(Ack::SourceFinished) => sources_finished += 1,
                Ok(ack) => record(&mut pending, ack),
                Err(RecvTimeoutError::Timeout) => {}
            }
            let source_finished = sources_finished >= self.config.sources.len();
            if pending.as_ref().is_some_and(Pending::is_complete) {
                let done = pending.take().expect("checked above");
                let (id, stop) = (done.trigger.id, done.trigger.stop || done.final_checkpoint);
                let timeout = schedule.as_ref().map(|s| s.timeout);
                let completed = self.finish(done, timeout)?;
                last_end = Instant::now();
                match (stop, completed, timeout) {
                    (true, true, _) => return Ok(()),
                    (true, false, Some(timeout)) => {
                        // The source has stopped reading: nothing can follow.
                        return Err(CheckpointError::StoreTooSlow {
                            id,
                            timeout: humantime::format_duration(timeout).to_string(),
                        });
                    }
                    _ => {}
                }
            }
            if let (Some(p), Some(s)) = (&pending, &schedule) {
                if p.started.elapsed() > s.timeout {
                    let expired = pending.take().expect("checked above");
                    tracing::warn!(id = expired.trigger.id, timeout = ?s.timeout, "checkpoint expired before every task acknowledged; abandoning it");
                    let (id, last) =
                        (expired.trigger.id, expired.trigger.stop || expired.final_checkpoint);
                    self.abandon(
                        expired.trigger.id,
                        expired.request,
                        "the savepoint expired before every task acknowledged it",
                    );
                    if last {
                        // The source has stopped reading: nothing can follow.
                        return Err(CheckpointError::Expired(id));
                    }
                }
            }
            if last_poll.elapsed() >= CONTROL_POLL {
                last_poll = Instant::now();
                if (self.config.cancelled)() {
                    if let Some(pending) = pending.take() {
                        self.abandon(pending.trigger.id, pending.request, "the run was cancelled");
                    }
                    return Err(CheckpointError::Cancelled);
                }
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
                Some((request.kind, request.stop || request.drain, Some(request)))
            } else {
                let due = next_due.is_some_and(|d| now >= d)
                    && schedule.as_ref().is_some_and(|s| now >= last_end + s.min_pause);
                due.then_some((SnapshotKind::Checkpoint, false, None))
            };
            if let Some((kind, stop, request)) = trigger {
                let trigger = Trigger { id: self.next_id, kind, stop: stop && !source_finished };
                self.next_id += 1;
                if request.as_ref().is_some_and(|r| r.drain) {
                    (self.config.on_drain)(trigger.id);
                }
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
                let slots = self.config.operators.iter().map(|(_, p)| usize::from(*p)).sum();
                let subtasks = vec![None; slots];
                pending = Some(Pending {
                    trigger,
                    started: now,
                    final_checkpoint: source_finished || stop,
                    request,
                    sources: vec![None; self.config.sources.len()],
                    subtasks,
                    alignment: Duration::ZERO,
                    sink: None,
                    committed: None,
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

    /// Store a snapshot every task has acknowledged, then commit it;
    /// whether it completed (false: not stored within `timeout` of its
    /// trigger, and abandoned).
    fn finish(
        &mut self,
        pending: Pending,
        timeout: Option<Duration>,
    ) -> Result<bool, CheckpointError> {
        let Pending {
            trigger,
            started,
            request,
            sources,
            subtasks,
            alignment,
            sink,
            committed,
            ..
        } = pending;
        let span = tracing::info_span!(
            "snapshot",
            pipeline = %self.config.pipeline,
            id = trigger.id,
            kind = trigger.kind.name(),
            size_bytes = tracing::field::Empty,
            incremental_bytes = tracing::field::Empty,
        );
        let _span = span.enter();
        let dirs: Vec<PathBuf> = subtasks.into_iter().flatten().collect();
        let mut sources: Vec<serde_json::Value> = sources.into_iter().flatten().collect();
        let source = if sources.len() == 1 {
            sources.pop().unwrap_or_default()
        } else {
            serde_json::Value::Object(self.config.sources.iter().cloned().zip(sources).collect())
        };
        let acknowledged = Acknowledged {
            source,
            sink: sink.unwrap_or_default(),
            last_committed: committed,
            alignment,
        };
        let stored = self.store(
            trigger,
            &dirs,
            acknowledged,
            started,
            timeout.map(|timeout| started + timeout),
        );
        let metadata = match stored {
            Ok(Stored::Done(metadata)) => *metadata,
            Ok(Stored::TooLate) => {
                tracing::warn!(
                    id = trigger.id,
                    ?timeout,
                    "snapshot not stored within its timeout; abandoning it"
                );
                self.abandon(
                    trigger.id,
                    request,
                    "the savepoint was not stored within checkpoint.timeout",
                );
                return Ok(false);
            }
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
        span.record("size_bytes", metadata.size_bytes);
        span.record("incremental_bytes", metadata.incremental_bytes);
        tracing::info!(
            id = trigger.id,
            kind = ?trigger.kind,
            size_bytes = metadata.size_bytes,
            incremental_bytes = metadata.incremental_bytes,
            duration_ms = metadata.duration_ms,
            alignment_ms = metadata.alignment_ms,
            "snapshot complete"
        );
        let completed = CompletedSnapshot {
            id: trigger.id,
            kind: trigger.kind,
            completed_at: metadata.completed_at,
            size_bytes: metadata.size_bytes,
            incremental_bytes: metadata.incremental_bytes,
            duration: started.elapsed(),
            alignment: Duration::from_millis(metadata.alignment_ms),
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
                // Housekeeping: a failure deletes less (it never deletes
                // more), and the next checkpoint's round tries again.
                if let Err(error) = self.storage.retain(schedule.retained, pinned, committed) {
                    tracing::warn!(id = trigger.id, %error, "checkpoint retention failed; retrying after the next checkpoint");
                }
            }
        }
        self.remove_local_copies(trigger.id, trigger.kind == SnapshotKind::Checkpoint);
        Ok(true)
    }

    /// Upload the snapshot's files, then write its metadata, unless
    /// `deadline` passed first.
    fn store(
        &mut self,
        trigger: Trigger,
        dirs: &[PathBuf],
        acknowledged: Acknowledged,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<Stored, CheckpointError> {
        let late = || deadline.is_some_and(|deadline| Instant::now() > deadline);
        let dir = self.storage.snapshot_dir(trigger.kind, trigger.id);
        let files_dir = self.storage.files_dir(&dir, self.storage.generation());
        let (mut size_bytes, mut incremental_bytes) = (0, 0);
        self.config.known.resize_with(dirs.len(), KnownFiles::new);
        let mut operators = Vec::new();
        let mut first_slot = 0;
        for (uid, parallelism) in self.config.operators.clone() {
            let slots = first_slot..first_slot + usize::from(parallelism);
            let state = match trigger.kind {
                SnapshotKind::Checkpoint => {
                    let mut subtasks = Vec::new();
                    for slot in slots {
                        if late() {
                            return Ok(Stored::TooLate);
                        }
                        let known = &mut self.config.known[slot];
                        let uploaded = incremental::upload(
                            &self.storage,
                            &files_dir,
                            slot,
                            &dirs[slot],
                            known,
                        )?;
                        size_bytes += uploaded.size;
                        incremental_bytes += uploaded.sent;
                        subtasks.push(uploaded.files);
                    }
                    StateFiles::Rocksdb { subtasks }
                }
                SnapshotKind::Savepoint => {
                    let mut files = Vec::new();
                    for (index, slot) in slots.enumerate() {
                        if late() {
                            return Ok(Stored::TooLate);
                        }
                        // Broadcast state is the same in every subtask: kept once.
                        let encoded = canonical::encode_database(&dirs[slot], index == 0)?;
                        let name = format!("{uid}/state-{index}.bin");
                        let size = encoded.bytes.len() as u64;
                        let (first_key_group, last_key_group) =
                            encoded.key_groups.unwrap_or((0, 0));
                        self.storage.put(&files_dir, &name, encoded.bytes)?;
                        files.push(CanonicalFile {
                            name,
                            first_key_group,
                            last_key_group,
                            entries: encoded.entries,
                            size,
                        });
                        size_bytes += size;
                        incremental_bytes += size;
                    }
                    StateFiles::Canonical { files }
                }
            };
            operators.push(OperatorSnapshot { uid, parallelism, first_slot, state });
            first_slot += usize::from(parallelism);
        }
        let (first, operators) = OperatorSnapshot::recorded(operators);
        let metadata = SnapshotMetadata {
            id: trigger.id,
            kind: trigger.kind,
            pipeline: self.config.pipeline.clone(),
            completed_at: crate::clock::now_millis(),
            operator_uid: first.uid,
            max_parallelism: self.config.max_parallelism,
            parallelism: first.parallelism,
            state: first.state,
            operators,
            source: acknowledged.source,
            sink: acknowledged.sink,
            last_committed: acknowledged.last_committed,
            size_bytes,
            incremental_bytes,
            duration_ms: crate::units::millis(started.elapsed()),
            alignment_ms: crate::units::millis(acknowledged.alignment),
            generation: self.storage.generation(),
        };
        // The last moment to give up: once the metadata is written, the
        // snapshot is complete.
        if late() {
            return Ok(Stored::TooLate);
        }
        // A newer run owns the storage: this one must not complete it.
        self.storage.check_current()?;
        self.storage.commit(&metadata)?;
        Ok(Stored::Done(Box::new(metadata)))
    }

    /// Give up snapshot `id`, telling whoever asked for it `why`.
    fn abandon(&mut self, id: u64, request: Option<Request>, why: &str) {
        self.report.expired += 1;
        (self.config.on_failure)();
        if let Some(request) = request {
            request.respond(&Response::failed(why));
        }
        remove_dir(&self.config.local_dir.join(format!("chk-{id}")));
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

/// What the tasks acknowledged for a snapshot, stored in its metadata.
struct Acknowledged {
    /// The source's positions.
    source: serde_json::Value,
    /// The sink's pending state.
    sink: serde_json::Value,
    /// The newest snapshot whose output the sinks know is committed.
    last_committed: Option<u64>,
    /// The longest barrier alignment of any subtask.
    alignment: Duration,
}

/// How storing a snapshot ended.
enum Stored {
    /// Its metadata is written: it is complete.
    Done(Box<SnapshotMetadata>),
    /// Its timeout passed before its metadata was written: abandoned.
    TooLate,
}

/// Record an acknowledgement for the snapshot in flight; one for another
/// (abandoned) snapshot is dropped, with its local files.
fn record(pending: &mut Option<Pending>, ack: Ack) {
    let current = pending.as_ref().map(|p| p.trigger.id);
    match ack {
        Ack::Source { id, source, state } if Some(id) == current => {
            if let Some(slot) = pending.as_mut().expect("current").sources.get_mut(source) {
                *slot = Some(state);
            }
        }
        Ack::Sink { id, state, committed } if Some(id) == current => {
            let pending = pending.as_mut().expect("current");
            pending.sink = Some(state);
            pending.committed = committed;
        }
        Ack::Subtask { id, index, dir, alignment } if Some(id) == current => {
            let pending = pending.as_mut().expect("current");
            if let Some(slot) = pending.subtasks.get_mut(index) {
                *slot = Some(dir);
                pending.alignment = pending.alignment.max(alignment);
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

#[cfg(test)]
mod tests {
    //! The coordinator driven through its channels, as the source, the
    //! subtasks and the sink drive it, against checkpoint storage in a
    //! temporary directory. Timing is only ever checked as a lower bound
    //! (something did not happen before it was due); "soon" is generous.

    use std::path::Path;
    use std::sync::mpsc::{self, Receiver, Sender};
    use std::sync::Arc;
    use std::thread::JoinHandle;

    use serde_json::json;

    use super::*;
    use crate::state::RocksDbBackend;

    const PIPELINE: &str = "orders";

    /// How long anything that should happen may take on a busy machine.
    const SOON: Duration = Duration::from_secs(20);

    /// No checkpoint expires unless a test says so.
    const NEVER: Duration = Duration::from_secs(3600);

    fn schedule(interval: Duration, min_pause: Duration, timeout: Duration) -> CheckpointSettings {
        CheckpointSettings {
            interval,
            min_pause,
            timeout,
            retained: 3,
            materialize_every: 1,
            storage: None,
        }
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    /// What the sink was told: commit `id`; `stored` says whether the
    /// snapshot's metadata was already in storage at that moment.
    #[derive(Debug, PartialEq, Eq)]
    struct Commit {
        id: u64,
        stored: bool,
    }

    /// How a test's coordinator is set up.
    struct Setup {
        parallelism: u16,
        schedule: Option<CheckpointSettings>,
        first_id: u64,
        restored_checkpoint: Option<u64>,
        restored: bool,
        /// Set to cancel the run.
        cancel: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Setup {
        fn every(interval: Duration) -> Self {
            Self {
                parallelism: 1,
                schedule: Some(schedule(interval, Duration::ZERO, NEVER)),
                first_id: 1,
                restored_checkpoint: None,
                restored: false,
                cancel: Arc::default(),
            }
        }
    }

    /// A coordinator on its own thread, and the pipeline's ends of its
    /// channels.
    struct Harness {
        url: String,
        local_dir: PathBuf,
        control: ControlDir,
        parallelism: u16,
        triggers: Receiver<Trigger>,
        acks: Sender<Ack>,
        inbox: Sender<Request>,
        commits: Receiver<Commit>,
        snapshots: Receiver<CompletedSnapshot>,
        thread: JoinHandle<Result<CoordinatorReport, CheckpointError>>,
    }

    impl Harness {
        fn start(root: &Path, setup: Setup) -> Self {
            let url = format!("file://{}", root.join("storage").display());
            let local_dir = root.join("local");
            let control = ControlDir::new(root.join("control"));
            let (trigger_tx, triggers) = mpsc::channel();
            let (acks, ack_rx) = mpsc::channel();
            let (inbox, inbox_rx) = mpsc::channel();
            let (commit_tx, commits) = mpsc::channel();
            let (snapshot_tx, snapshots) = mpsc::channel();
            let config = CoordinatorConfig {
                cancelled: {
                    let cancel = Arc::clone(&setup.cancel);
                    Box::new(move || cancel.load(std::sync::atomic::Ordering::Relaxed))
                },
                pipeline: PIPELINE.into(),
                operators: vec![("process".into(), setup.parallelism)],
                sources: vec!["source".into()],
                max_parallelism: 128,
                schedule: setup.schedule,
                local_dir: local_dir.clone(),
                control: control.clone(),
                inbox: Some(inbox_rx),
                on_snapshot: Box::new(move |snapshot| {
                    let _ = snapshot_tx.send(snapshot.clone());
                }),
                on_failure: Box::new(|| {}),
                on_drain: Box::new(|_| {}),
                first_id: setup.first_id,
                restored_checkpoint: setup.restored_checkpoint,
                restored: setup.restored,
                known: Vec::new(),
            };
            let storage = CheckpointStorage::open(&url, PIPELINE).expect("storage");
            let commit_url = url.clone();
            let complete = Box::new(move |id| {
                let storage = CheckpointStorage::open(&commit_url, PIPELINE).expect("storage");
                let stored =
                    [SnapshotKind::Checkpoint, SnapshotKind::Savepoint].into_iter().any(|kind| {
                        storage.completed_of(kind).expect("list").iter().any(|m| m.id == id)
                    });
                commit_tx.send(Commit { id, stored }).is_ok()
            });
            let coordinator = Coordinator::new(config, storage, trigger_tx, ack_rx, complete);
            let thread = std::thread::spawn(move || coordinator.run());
            Self {
                url,
                local_dir,
                control,
                parallelism: setup.parallelism,
                triggers,
                acks,
                inbox,
                commits,
                snapshots,
                thread,
            }
        }

        /// A second handle on the coordinator's storage.
        fn storage(&self) -> CheckpointStorage {
            CheckpointStorage::open(&self.url, PIPELINE).expect("storage")
        }

        /// Ids of the completed checkpoints in storage, newest first.
        fn stored_checkpoints(&self) -> Vec<u64> {
            self.storage().completed().expect("list").iter().map(|m| m.id).collect()
        }

        /// The next trigger the source receives.
        fn trigger(&self) -> Trigger {
            self.triggers.recv_timeout(SOON).expect("a trigger")
        }

        /// The next commit the sink is told of.
        fn commit(&self) -> Commit {
            self.commits.recv_timeout(SOON).expect("a commit")
        }

        fn ack(&self, ack: Ack) {
            self.acks.send(ack).expect("the coordinator is running");
        }

        fn ack_source(&self, id: u64) {
            self.ack(Ack::Source { id, source: 0, state: json!({ "offset": id * 100 }) });
        }

        fn ack_sink(&self, id: u64) {
            self.ack(Ack::Sink { id, state: json!({ "pending": id }), committed: None });
        }

        /// Subtask `index` snapshots an (empty) database for `id` where
        /// the subtasks put theirs, and acknowledges.
        fn ack_subtask(&self, id: u64, index: usize) {
            let dir = self.subtask_dir(id, index);
            std::fs::create_dir_all(&dir).expect("local dir");
            drop(RocksDbBackend::open(&dir).expect("database"));
            self.ack(Ack::Subtask { id, index, dir, alignment: Duration::ZERO });
        }

        fn subtask_dir(&self, id: u64, index: usize) -> PathBuf {
            self.local_dir.join(format!("chk-{id}")).join(format!("subtask-{index}"))
        }

        /// Every task acknowledges `id`.
        fn ack_all(&self, id: u64) {
            self.ack_source(id);
            for index in 0..usize::from(self.parallelism) {
                self.ack_subtask(id, index);
            }
            self.ack_sink(id);
        }

        /// Acknowledge every trigger until a snapshot completes; its id.
        fn complete_next(&self) -> u64 {
            let deadline = Instant::now() + SOON;
            while Instant::now() < deadline {
                if let Ok(commit) = self.commits.try_recv() {
                    assert!(commit.stored, "{commit:?}");
                    return commit.id;
                }
                if let Ok(trigger) = self.triggers.try_recv() {
                    self.ack_all(trigger.id);
                }
                std::thread::sleep(ms(5));
            }
            panic!("no snapshot completed");
        }

        /// The pipeline ends; what the coordinator reports.
        fn shutdown(self) -> CoordinatorReport {
            let _ = self.acks.send(Ack::Shutdown);
            self.finished()
        }

        /// The coordinator's result once it has ended by itself.
        fn finished(self) -> CoordinatorReport {
            self.thread.join().expect("no panic").expect("no error")
        }
    }

    #[test]
    fn checkpoints_are_triggered_once_per_interval_with_increasing_ids() {
        let dir = tempfile::tempdir().unwrap();
        let interval = ms(300);
        let started = Instant::now();
        let h = Harness::start(dir.path(), Setup::every(interval));
        let first = h.trigger();
        assert!(started.elapsed() >= interval, "not before the interval");
        assert_eq!(first, Trigger { id: 1, kind: SnapshotKind::Checkpoint, stop: false });
        h.ack_all(1);
        assert_eq!(h.commit(), Commit { id: 1, stored: true });
        let second = h.trigger();
        assert!(started.elapsed() >= 2 * interval, "the next one an interval after the first");
        assert_eq!(second.id, 2);
        assert_eq!(h.shutdown(), CoordinatorReport { completed: 1, expired: 0 });
    }

    #[test]
    fn a_run_that_restored_takes_its_first_checkpoint_soon() {
        let dir = tempfile::tempdir().unwrap();
        let interval = ms(2000);
        let started = Instant::now();
        let h = Harness::start(dir.path(), Setup { restored: true, ..Setup::every(interval) });
        assert_eq!(h.trigger().id, 1);
        let first = started.elapsed();
        assert!(first >= FIRST_CHECKPOINT_AFTER_RESTORE, "after a short pause: {first:?}");
        assert!(first < interval, "not a whole interval: {first:?}");
        h.ack_all(1);
        assert_eq!(h.commit(), Commit { id: 1, stored: true });
        assert_eq!(h.trigger().id, 2);
        assert!(
            started.elapsed() >= FIRST_CHECKPOINT_AFTER_RESTORE + interval,
            "then every interval"
        );
        assert_eq!(h.shutdown(), CoordinatorReport { completed: 1, expired: 0 });
    }

    #[test]
    fn one_checkpoint_at_a_time_however_short_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup::every(ms(10)));
        assert_eq!(h.trigger().id, 1);
        std::thread::sleep(ms(300));
        assert!(h.triggers.try_recv().is_err(), "no trigger while checkpoint 1 is in flight");
        h.ack_all(1);
        assert_eq!(h.commit().id, 1);
        assert_eq!(h.trigger().id, 2, "the next one once it completed");
        h.shutdown();
    }

    #[test]
    fn a_checkpoint_completes_only_once_the_source_every_subtask_and_the_sink_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup { parallelism: 2, ..Setup::every(ms(10)) });
        let id = h.trigger().id;
        h.ack_subtask(id, 1);
        h.ack_sink(id);
        h.ack_source(id);
        // An acknowledgement of another snapshot stands in for none.
        h.ack_subtask(id + 7, 0);
        assert!(h.commits.recv_timeout(ms(300)).is_err(), "subtask 0 has not acknowledged");
        assert!(h.stored_checkpoints().is_empty());

        h.ack_subtask(id, 0);
        assert_eq!(h.commit(), Commit { id, stored: true }, "stored before the sink commits");
        assert!(
            !h.subtask_dir(id + 7, 0).exists(),
            "the stray acknowledgement's files are removed"
        );
        let stored = h.storage().completed().unwrap();
        assert_eq!(stored.len(), 1);
        let metadata = &stored[0];
        assert_eq!((metadata.id, metadata.parallelism), (id, 2));
        assert_eq!(metadata.source, json!({ "offset": id * 100 }), "the source's positions");
        assert_eq!(metadata.sink, json!({ "pending": id }), "what the sink needs to commit");
        let snapshot = h.snapshots.recv_timeout(SOON).unwrap();
        assert_eq!((snapshot.id, snapshot.kind), (id, SnapshotKind::Checkpoint));
        let storage = h.storage();
        assert_eq!(snapshot.location, storage.describe(&storage.checkpoint_dir(id)));
        h.shutdown();
    }

    #[test]
    fn the_sink_is_told_to_commit_each_completed_checkpoint_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup::every(ms(10)));
        let committed: Vec<u64> = (0..3).map(|_| h.complete_next()).collect();
        assert_eq!(committed, [1, 2, 3]);
        assert!(h.commits.try_recv().is_err(), "each commit once");
        assert_eq!(h.shutdown().completed, 3);
    }

    #[test]
    fn min_pause_separates_a_completion_from_the_next_trigger() {
        let dir = tempfile::tempdir().unwrap();
        let min_pause = ms(400);
        let setup =
            Setup { schedule: Some(schedule(ms(10), min_pause, NEVER)), ..Setup::every(ms(10)) };
        let h = Harness::start(dir.path(), setup);
        let id = h.trigger().id;
        h.ack_source(id);
        h.ack_subtask(id, 0);
        let before_completion = Instant::now();
        h.ack_sink(id);
        assert_eq!(h.commit().id, id);
        assert_eq!(h.trigger().id, id + 1);
        assert!(
            before_completion.elapsed() >= min_pause,
            "the interval (10 ms) is long past, but the pause after a completion is kept"
        );
        h.shutdown();
    }

    #[test]
    fn an_incomplete_checkpoint_expires_is_counted_and_the_next_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let timeout = ms(300);
        let setup = Setup {
            schedule: Some(schedule(ms(10), Duration::ZERO, timeout)),
            ..Setup::every(ms(10))
        };
        let started = Instant::now();
        let h = Harness::start(dir.path(), setup);
        assert_eq!(h.trigger().id, 1);
        // Subtask 0 never acknowledges checkpoint 1.
        h.ack_source(1);
        h.ack_sink(1);
        let next = h.trigger();
        assert!(started.elapsed() >= timeout, "abandoned only after its timeout");
        assert_eq!(next.id, 2);
        // Too late: checkpoint 1 is gone; the late files are removed.
        h.ack_subtask(1, 0);
        h.ack_all(2);
        let completed = h.complete_next();
        assert!(completed >= 2, "checkpoint 1 never completes");
        assert!(!h.subtask_dir(1, 0).exists());
        assert!(!h.stored_checkpoints().contains(&1));
        let report = h.shutdown();
        assert_eq!(report.completed, 1);
        // Checkpoint 1, and any other this busy machine was too slow to
        // acknowledge in time.
        assert!(report.expired >= completed - 1, "{report:?}");
    }

    #[test]
    fn a_snapshot_not_stored_within_its_timeout_is_abandoned_not_completed_late() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("storage").display());
        let local_dir = dir.path().join("local");
        let (trigger_tx, _triggers) = mpsc::channel();
        let (_acks, ack_rx) = mpsc::channel();
        let committed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let config = CoordinatorConfig {
            cancelled: Box::new(|| false),
            pipeline: PIPELINE.into(),
            operators: vec![("process".into(), 1)],
            sources: vec!["source".into()],
            max_parallelism: 128,
            schedule: Some(schedule(ms(10), Duration::ZERO, ms(50))),
            local_dir: local_dir.clone(),
            control: ControlDir::new(dir.path().join("control")),
            inbox: None,
            on_snapshot: Box::new(|_| {}),
            on_failure: Box::new(|| {}),
            on_drain: Box::new(|_| {}),
            first_id: 1,
            restored_checkpoint: None,
            restored: false,
            known: Vec::new(),
        };
        let storage = CheckpointStorage::open(&url, PIPELINE).unwrap();
        let told = committed.clone();
        let complete = Box::new(move |id| {
            told.lock().unwrap().push(id);
            true
        });
        let mut coordinator = Coordinator::new(config, storage, trigger_tx, ack_rx, complete);
        // Every task acknowledged checkpoint `id`, triggered at `started`.
        let acknowledged = |id: u64, started: Instant| {
            let subtask = local_dir.join(format!("chk-{id}")).join("subtask-0");
            std::fs::create_dir_all(&subtask).unwrap();
            drop(RocksDbBackend::open(&subtask).unwrap());
            Pending {
                trigger: Trigger { id, kind: SnapshotKind::Checkpoint, stop: false },
                started,
                final_checkpoint: false,
                request: None,
                sources: vec![Some(json!({ "offset": id }))],
                subtasks: vec![Some(subtask)],
                alignment: Duration::from_millis(7),
                sink: Some(json!({ "pending": id })),
                committed: None,
            }
        };
        let stored = || CheckpointStorage::open(&url, PIPELINE).unwrap().completed().unwrap();

        // Acknowledged in time, but its timeout passed before it was
        // stored: no metadata, no commit, its local copy gone.
        let long_ago = Instant::now() - ms(500);
        assert!(!coordinator.finish(acknowledged(1, long_ago), Some(ms(50))).unwrap());
        assert!(stored().is_empty(), "not completed late");
        assert!(committed.lock().unwrap().is_empty(), "the sink is not told to commit");
        assert!(!local_dir.join("chk-1").exists());
        assert_eq!(coordinator.report, CoordinatorReport { completed: 0, expired: 1 });

        // Stored in time, the next one completes.
        assert!(coordinator.finish(acknowledged(2, Instant::now()), Some(SOON)).unwrap());
        assert_eq!(stored().iter().map(|m| m.id).collect::<Vec<_>>(), [2]);
        assert_eq!(stored()[0].alignment_ms, 7, "the subtasks' longest alignment is kept");
        assert_eq!(*committed.lock().unwrap(), [2]);
    }

    #[test]
    fn retention_keeps_the_newest_checkpoints_and_the_one_restored_from_until_it_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let keep_one =
            CheckpointSettings { retained: 1, ..schedule(ms(10), Duration::ZERO, NEVER) };
        let setup = Setup { schedule: Some(keep_one.clone()), ..Setup::every(ms(10)) };
        let first = Harness::start(dir.path(), setup);
        for id in 1..=3 {
            assert_eq!(first.trigger().id, id);
            first.ack_all(id);
            assert_eq!(first.commit().id, id);
        }
        // The next trigger comes once checkpoint 3 is finished, retention
        // included.
        assert_eq!(first.trigger().id, 4);
        assert_eq!(first.stored_checkpoints(), [3], "only the newest is retained");
        let local: Vec<_> = std::fs::read_dir(&first.local_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(local, ["chk-3"], "only the newest local copy is kept");
        first.shutdown();

        // A restart from checkpoint 3: it stays until two checkpoints of
        // the new run completed (the sink has then committed the first).
        let setup = Setup {
            schedule: Some(keep_one),
            first_id: 4,
            restored_checkpoint: Some(3),
            ..Setup::every(ms(10))
        };
        let second = Harness::start(dir.path(), setup);
        assert_eq!(second.trigger().id, 4);
        for (id, retained) in [(4, vec![4, 3]), (5, vec![5])] {
            second.ack_all(id);
            assert_eq!(second.commit().id, id);
            assert_eq!(second.trigger().id, id + 1, "sent once checkpoint {id} is finished");
            assert_eq!(second.stored_checkpoints(), retained, "after checkpoint {id}");
        }
        second.shutdown();
    }

    #[test]
    fn a_savepoint_request_is_taken_and_answered_with_its_location() {
        let dir = tempfile::tempdir().unwrap();
        let on_request_only = Setup { schedule: None, ..Setup::every(ms(10)) };
        let h = Harness::start(dir.path(), on_request_only);
        assert!(h.triggers.recv_timeout(ms(300)).is_err(), "no periodic checkpoints");

        let (request, answer) = Request::in_process(SnapshotKind::Savepoint, false);
        h.inbox.send(request).unwrap();
        let trigger = h.trigger();
        assert_eq!(trigger, Trigger { id: 1, kind: SnapshotKind::Savepoint, stop: false });
        h.ack_all(1);
        let answer = answer.recv_timeout(SOON).unwrap();
        let storage = h.storage();
        let location = storage.describe(&storage.savepoint_dir(1));
        assert_eq!(answer, Response::done(&location));
        assert_eq!(h.commit(), Commit { id: 1, stored: true });
        let savepoints = storage.completed_of(SnapshotKind::Savepoint).unwrap();
        assert_eq!(savepoints.iter().map(|m| m.id).collect::<Vec<_>>(), [1]);
        assert!(h.stored_checkpoints().is_empty(), "a savepoint is not a checkpoint");
        assert_eq!(h.shutdown().completed, 1, "the pipeline keeps running after it");
    }

    #[test]
    fn stop_with_savepoint_from_another_process_ends_the_coordinator() {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup::every(NEVER));
        h.control.claim().unwrap();
        let control = h.control.clone();
        let client =
            std::thread::spawn(move || control.request(SnapshotKind::Savepoint, true, SOON));
        let trigger = h.trigger();
        assert_eq!((trigger.kind, trigger.stop), (SnapshotKind::Savepoint, true));
        h.ack_all(trigger.id);
        let answer = client.join().unwrap().unwrap();
        assert!(answer.ok && answer.location.is_some(), "{answer:?}");
        assert_eq!(h.finished().completed, 1, "ended by itself after the savepoint");
    }

    #[test]
    fn a_finished_source_gets_a_final_checkpoint_then_the_coordinator_ends() {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup::every(NEVER));
        h.ack(Ack::SourceFinished);
        let trigger = h.trigger();
        assert_eq!(trigger, Trigger { id: 1, kind: SnapshotKind::Checkpoint, stop: false });
        h.ack_all(1);
        assert_eq!(h.commit().id, 1, "the rest of the output is committed");
        assert_eq!(h.finished().completed, 1);

        // Without checkpointing there is nothing to commit: it ends at once.
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::start(dir.path(), Setup { schedule: None, ..Setup::every(NEVER) });
        h.ack(Ack::SourceFinished);
        assert_eq!(h.finished(), CoordinatorReport::default());
    }

    #[test]
    fn a_cancelled_run_fails_at_once_completing_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let setup = Setup::every(ms(10));
        let cancel = Arc::clone(&setup.cancel);
        let h = Harness::start(dir.path(), setup);
        let id = h.trigger().id;
        // Checkpoint `id` is acknowledged by all but the sink when the run
        // is cancelled: it never completes, and nothing is committed.
        h.ack_source(id);
        h.ack_subtask(id, 0);
        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        let result = h.thread.join().unwrap();
        assert!(matches!(result, Err(CheckpointError::Cancelled)), "{result:?}");
        assert!(h.commits.try_recv().is_err(), "nothing committed after the cancel");
        let stored = CheckpointStorage::open(&h.url, PIPELINE).unwrap().completed().unwrap();
        assert!(stored.is_empty(), "{stored:?}");
    }
}
