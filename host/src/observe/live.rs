//! A running pipeline seen from outside while it runs: counters the
//! pipeline's threads update as they go (relaxed atomics, once per batch),
//! its watermark and last snapshot, and the in-process way to ask it for a
//! savepoint or a stop. The HTTP API reads and drives pipelines through
//! this; `weir run` reads it once, for the summary at the end.
//!
//! It never blocks a pipeline thread: counters are atomics and the
//! request channel is only read by the checkpoint coordinator.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::latency::LatencySummary;
use super::sampling::{MetricsView, Sampler, SplitMetrics, TaskSample, Topology};
use super::summary::{OperatorCounts, RunSummary};
use crate::checkpoint::{CompletedSnapshot, Request, Response, SnapshotKind};
use crate::state::StateStats;

/// What one task (a source, a keyed subtask, the sink, or every key
/// function together) did, updated while it runs: records, and where its
/// thread's time went. A task counts the time it waits for input (idle)
/// and the time a full channel downstream holds it up (backpressured);
/// the rest of its life it was busy.
#[derive(Debug)]
pub struct LiveCounts {
    records_in: AtomicU64,
    records_out: AtomicU64,
    late_dropped: AtomicU64,
    batches_in: AtomicU64,
    idle_nanos: AtomicU64,
    backpressured_nanos: AtomicU64,
    call_nanos: AtomicU64,
    /// Its event time (`i64::MIN`: none yet).
    watermark: AtomicI64,
    /// Its state's size (`u64::MAX`: unknown) and cache counters.
    state_bytes: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    /// A source's splits, reported about once a second.
    splits: Mutex<Vec<SplitMetrics>>,
    /// A source whose every producer ended (drained): nothing more comes.
    inputs_ended: AtomicBool,
    started: Instant,
}

impl Default for LiveCounts {
    fn default() -> Self {
        Self {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            late_dropped: AtomicU64::new(0),
            batches_in: AtomicU64::new(0),
            idle_nanos: AtomicU64::new(0),
            backpressured_nanos: AtomicU64::new(0),
            call_nanos: AtomicU64::new(0),
            watermark: AtomicI64::new(i64::MIN),
            state_bytes: AtomicU64::new(u64::MAX),
            cache_hits: AtomicU64::new(0),
            cache_misses: AtomicU64::new(0),
            splits: Mutex::default(),
            inputs_ended: AtomicBool::new(false),
            started: Instant::now(),
        }
    }
}

/// Whether tasks time their work (idle, backpressured and call time) and
/// sample their state's size: on unless `WEIR_TASK_METRICS=off`, which
/// exists to measure what the clocks cost (`weir bench`'s `sum-untimed`).
/// Record counts are kept either way.
pub fn task_timing() -> bool {
    static ON: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::env::var("WEIR_TASK_METRICS").map_or(true, |v| v != "off")
    });
    *ON
}

/// Times a stretch of a task's work for its metrics: two clock reads, or
/// none when [`task_timing`] is off (then it measures zero).
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Option<Instant>);

impl Stopwatch {
    /// Start timing (if tasks time their work).
    pub fn start() -> Self {
        Self(task_timing().then(Instant::now))
    }

    /// The time since [`Stopwatch::start`].
    pub fn elapsed(self) -> Duration {
        self.0.map_or(Duration::ZERO, |started| started.elapsed())
    }
}

/// Nanoseconds of `d`, saturated.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl LiveCounts {
    /// Count a batch of `n` records received.
    pub fn add_in(&self, n: usize) {
        self.records_in.fetch_add(n as u64, Ordering::Relaxed);
        self.batches_in.fetch_add(1, Ordering::Relaxed);
    }

    /// Count `n` records emitted.
    pub fn add_out(&self, n: usize) {
        self.records_out.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Count `n` late records dropped.
    pub fn add_late_dropped(&self, n: u64) {
        self.late_dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Count time spent waiting for input.
    pub fn add_idle(&self, time: Duration) {
        self.idle_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Count time a full channel downstream held the task up.
    pub fn add_backpressured(&self, time: Duration) {
        self.backpressured_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Count time spent in calls into the task's functions (the Wasm
    /// calls and the state access they make).
    pub fn add_call(&self, time: Duration) {
        self.call_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Record the task's event time.
    pub fn set_watermark(&self, watermark: i64) {
        self.watermark.store(watermark, Ordering::Relaxed);
    }

    /// Record what its state backend says of itself.
    pub fn set_state(&self, stats: StateStats) {
        self.state_bytes.store(stats.bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
        self.cache_hits.store(stats.cache_hits, Ordering::Relaxed);
        self.cache_misses.store(stats.cache_misses, Ordering::Relaxed);
    }

    /// Record that every producer of the source's input ended.
    pub fn set_inputs_ended(&self) {
        self.inputs_ended.store(true, Ordering::Relaxed);
    }

    /// Record a source's splits.
    pub fn set_splits(&self, splits: Vec<SplitMetrics>) {
        *self.splits.lock().unwrap_or_else(PoisonError::into_inner) = splits;
    }

    /// The counts now.
    pub fn get(&self) -> OperatorCounts {
        OperatorCounts {
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            late_dropped: self.late_dropped.load(Ordering::Relaxed),
        }
    }

    /// Everything it counted, now.
    pub fn sample(&self) -> TaskSample {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let watermark = self.watermark.load(Ordering::Relaxed);
        let state_bytes = load(&self.state_bytes);
        TaskSample {
            counts: self.get(),
            batches_in: load(&self.batches_in),
            alive: self.started.elapsed(),
            idle: Duration::from_nanos(load(&self.idle_nanos)),
            backpressured: Duration::from_nanos(load(&self.backpressured_nanos)),
            calls: Duration::from_nanos(load(&self.call_nanos)),
            watermark: (watermark != i64::MIN).then_some(watermark),
            state_bytes: (state_bytes != u64::MAX).then_some(state_bytes),
            cache_hits: load(&self.cache_hits),
            cache_misses: load(&self.cache_misses),
            splits: self.splits.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        }
    }
}

/// Everything a run counts, readable at any time.
#[derive(Debug)]
pub struct LiveMetrics {
    /// The key functions (of every keyed exchange).
    pub key: LiveCounts,
    /// Each keyed subtask (set when the run starts).
    subtasks: Mutex<Vec<Arc<LiveCounts>>>,
    /// Each keyed stage's name and parallelism, in subtask order.
    stages: Mutex<Vec<(String, usize)>>,
    /// Events the sink wrote to the main output.
    pub sink_written: AtomicU64,
    /// Events written to declared side outputs.
    pub side_written: AtomicU64,
    /// Events sent to undeclared side outputs (dropped).
    pub side_dropped: AtomicU64,
    /// Source records dropped for lack of a usable timestamp.
    pub dropped_bad_timestamps: AtomicU64,
    /// The last watermark each source sent (`i64::MIN`: none yet).
    watermarks: Mutex<Vec<i64>>,
    /// The newest completed snapshot and how many completed (a long
    /// run completes one a second: it keeps no list).
    snapshots: Mutex<(Option<CompletedSnapshot>, usize)>,
    /// The snapshot the run started from.
    restored_from: Mutex<Option<(SnapshotKind, u64)>>,
    /// Each source task's counts (set when the run starts).
    sources: Mutex<Vec<Arc<LiveCounts>>>,
    /// The sink thread's counts.
    pub sink: LiveCounts,
    /// Snapshots that failed or expired.
    pub snapshots_failed: AtomicU64,
    /// The run's graph, for the metrics view.
    topology: Mutex<Topology>,
    /// Per-second rates between the last two samples.
    sampler: Mutex<Sampler>,
    /// The written events' latency, when recorded (set as the run ends).
    latency: Mutex<Option<LatencySummary>>,
    /// When a source first read an event.
    first_read: OnceLock<Instant>,
    /// When the sink last wrote (set as the sink ends).
    last_written: Mutex<Option<Instant>>,
    /// When the last keyed subtask to do so had processed all its input.
    input_done: Mutex<Option<Instant>>,
}

impl Default for LiveMetrics {
    fn default() -> Self {
        Self {
            key: LiveCounts::default(),
            subtasks: Mutex::default(),
            stages: Mutex::default(),
            sink_written: AtomicU64::new(0),
            side_written: AtomicU64::new(0),
            side_dropped: AtomicU64::new(0),
            dropped_bad_timestamps: AtomicU64::new(0),
            watermarks: Mutex::default(),
            snapshots: Mutex::default(),
            restored_from: Mutex::default(),
            sources: Mutex::default(),
            sink: LiveCounts::default(),
            snapshots_failed: AtomicU64::new(0),
            topology: Mutex::default(),
            sampler: Mutex::default(),
            latency: Mutex::default(),
            first_read: OnceLock::new(),
            last_written: Mutex::default(),
            input_done: Mutex::default(),
        }
    }
}

impl LiveMetrics {
    /// Counters for every subtask of `stages` (name, parallelism), in
    /// order, replacing any earlier ones.
    pub(crate) fn start_stages(&self, stages: &[(String, usize)]) -> Vec<Arc<LiveCounts>> {
        let total = stages.iter().map(|(_, p)| p).sum();
        let counts: Vec<Arc<LiveCounts>> = (0..total).map(|_| Arc::default()).collect();
        *self.subtasks.lock().unwrap_or_else(PoisonError::into_inner) = counts.clone();
        *self.stages.lock().unwrap_or_else(PoisonError::into_inner) = stages.to_vec();
        counts
    }

    /// Counters for each source task, and the graph the run's tasks form.
    pub(crate) fn start_sources(&self, topology: Topology) -> Vec<Arc<LiveCounts>> {
        let tasks = topology.sources.iter().map(|(_, readers)| readers).sum();
        let counts: Vec<Arc<LiveCounts>> = (0..tasks).map(|_| Arc::default()).collect();
        // Event time is known once every source task has sent a watermark.
        *self.watermarks.lock().unwrap_or_else(PoisonError::into_inner) = vec![i64::MIN; tasks];
        *self.sources.lock().unwrap_or_else(PoisonError::into_inner) = counts.clone();
        *self.topology.lock().unwrap_or_else(PoisonError::into_inner) = topology;
        counts
    }

    /// The outputs readers may tail: every sink node by its name (`main`
    /// for a line spec's main sink).
    pub fn outputs(&self) -> Vec<String> {
        let topology = self.topology.lock().unwrap_or_else(PoisonError::into_inner);
        topology.sinks.iter().map(|(name, _)| name.clone()).collect()
    }

    /// Whether `output` is one of [`Self::outputs`].
    pub fn has_output(&self, output: &str) -> bool {
        self.outputs().iter().any(|o| o == output)
    }

    /// Whether every source task has read to the end of its producers'
    /// output (a cluster task whose producers were all drained): what it
    /// read so far is all it will read.
    pub fn sources_ended(&self) -> bool {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        !sources.is_empty() && sources.iter().all(|c| c.inputs_ended.load(Ordering::Relaxed))
    }

    /// Events read from the sources (what each source task emitted).
    pub fn source_records(&self) -> u64 {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.iter().map(|c| c.get().records_out).sum()
    }

    /// Take a sample now and keep it for the rates of [`Self::view`]
    /// (call about once a second).
    pub fn tick(&self) {
        let sample = self.sample_all();
        self.sampler.lock().unwrap_or_else(PoisonError::into_inner).push(sample);
    }

    /// What the run is doing: per task, its counts now and its rates
    /// between the last two [`Self::tick`]s (zero before the second).
    pub fn view(&self) -> MetricsView {
        let topology = self.topology.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let current = self.sample_all();
        let sampler = self.sampler.lock().unwrap_or_else(PoisonError::into_inner);
        let (last_snapshot, completed) = self.last_snapshot();
        sampler.view(&current, &topology, last_snapshot.as_ref(), completed, self.watermark())
    }

    /// Every task's sample now.
    fn sample_all(&self) -> super::sampling::RunSample {
        let sample = |counts: &[Arc<LiveCounts>]| counts.iter().map(|c| c.sample()).collect();
        super::sampling::RunSample {
            at: Instant::now(),
            sources: sample(&self.sources.lock().unwrap_or_else(PoisonError::into_inner)),
            key: self.key.sample(),
            subtasks: sample(&self.subtasks.lock().unwrap_or_else(PoisonError::into_inner)),
            sink: self.sink.sample(),
            snapshots_failed: self.snapshots_failed.load(Ordering::Relaxed),
        }
    }

    /// Each keyed stage's name and its subtasks' counts now.
    pub fn stages(&self) -> Vec<(String, Vec<OperatorCounts>)> {
        let mut counts = self.subtasks().into_iter();
        let stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner).clone();
        stages
            .into_iter()
            .map(|(name, parallelism)| (name, counts.by_ref().take(parallelism).collect()))
            .collect()
    }

    /// Each subtask's counts now.
    pub fn subtasks(&self) -> Vec<OperatorCounts> {
        self.subtasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|c| c.get())
            .collect()
    }

    /// Record the watermark source `source` sent downstream.
    pub(crate) fn set_watermark(&self, source: usize, watermark: i64) {
        let mut watermarks = self.watermarks.lock().unwrap_or_else(PoisonError::into_inner);
        if watermarks.len() <= source {
            watermarks.resize(source + 1, i64::MIN);
        }
        watermarks[source] = watermark;
    }

    /// Event time of the pipeline: the least watermark the sources sent,
    /// once every one has sent one.
    pub fn watermark(&self) -> Option<i64> {
        let watermarks = self.watermarks.lock().unwrap_or_else(PoisonError::into_inner);
        watermarks.iter().copied().min().filter(|w| *w != i64::MIN)
    }

    /// Record the written events' latency (as the run ends).
    pub(crate) fn set_latency(&self, latency: Option<LatencySummary>) {
        *self.latency.lock().unwrap_or_else(PoisonError::into_inner) = latency;
    }

    /// Note that a source read events at `now` (only the first time counts).
    pub(crate) fn read_at(&self, now: Instant) {
        self.first_read.get_or_init(|| now);
    }

    /// Record when the sink last wrote (as the sink ends).
    pub(crate) fn set_last_written(&self, at: Option<Instant>) {
        *self.last_written.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// Note that a keyed subtask processed all its input at `at` (the
    /// latest counts).
    pub(crate) fn input_done_at(&self, at: Instant) {
        let mut done = self.input_done.lock().unwrap_or_else(PoisonError::into_inner);
        *done = (*done).max(Some(at));
    }

    /// The time from the first event read to the last output written, or
    /// to when the keyed subtasks had processed all their input if that
    /// came later (a workload whose outputs stop early, like a dedup's once
    /// every key was seen): the run's processing without its start-up and
    /// shut-down (the span the Flink harness of `scripts/dev bench-flink`
    /// measures, where the last output comes last). `None` until the sink
    /// has written or the subtasks are done.
    pub fn processing(&self) -> Option<Duration> {
        let written = *self.last_written.lock().unwrap_or_else(PoisonError::into_inner);
        let done = *self.input_done.lock().unwrap_or_else(PoisonError::into_inner);
        let last = written.max(done)?;
        Some(last.saturating_duration_since(*self.first_read.get()?))
    }

    /// Record a completed snapshot.
    pub(crate) fn snapshot_completed(&self, snapshot: &CompletedSnapshot) {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(PoisonError::into_inner);
        *snapshots = (Some(snapshot.clone()), snapshots.1 + 1);
    }

    /// The newest completed snapshot and how many completed.
    pub fn last_snapshot(&self) -> (Option<CompletedSnapshot>, usize) {
        self.snapshots.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn set_restored_from(&self, from: Option<(SnapshotKind, u64)>) {
        *self.restored_from.lock().unwrap_or_else(PoisonError::into_inner) = from;
    }

    /// The snapshot the run started from: (kind, id).
    pub fn restored_from(&self) -> Option<(SnapshotKind, u64)> {
        *self.restored_from.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl From<&LiveMetrics> for RunSummary {
    /// What the run counted so far (elapsed time, expired snapshots and
    /// the stop flag are the runner's to fill in).
    fn from(metrics: &LiveMetrics) -> Self {
        let key = metrics.key.get();
        let (last_snapshot, snapshots_completed) = metrics.last_snapshot();
        Self {
            records_in: metrics.source_records(),
            records_out: metrics.sink_written.load(Ordering::Relaxed),
            side_outputs_written: metrics.side_written.load(Ordering::Relaxed),
            side_outputs_dropped: metrics.side_dropped.load(Ordering::Relaxed),
            dropped_bad_timestamps: metrics.dropped_bad_timestamps.load(Ordering::Relaxed),
            key,
            subtasks: metrics.subtasks(),
            stages: metrics.stages(),
            elapsed: Duration::ZERO,
            processing: metrics.processing(),
            restored_from: metrics.restored_from(),
            snapshots_completed,
            last_snapshot,
            snapshots_expired: 0,
            stopped: false,
            latency: *metrics.latency.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// One run's live view and control. Create one per run and keep a clone.
#[derive(Debug, Default)]
pub struct RunHandle {
    /// What the run has counted so far.
    pub metrics: LiveMetrics,
    /// Where queries of a key's state go while it runs.
    pub state: super::inspect::StateQueries,
    /// Readers of what it writes.
    pub tail: super::tail::TailHub,
    requests: Mutex<Option<Sender<Request>>>,
    /// The run started its coordinator and has since ended.
    ended: std::sync::atomic::AtomicBool,
    /// It ended with an error.
    failed: std::sync::atomic::AtomicBool,
    cancelled: std::sync::atomic::AtomicBool,
    /// The id of the drained stop's snapshot, once triggered (0: none).
    drain_at: AtomicU64,
}

impl RunHandle {
    /// Tell the run to stop at once, without a final snapshot: a restore
    /// in progress ends between two files, a running pipeline at its
    /// coordinator's next poll, and nothing after its last completed
    /// checkpoint is committed (as after a crash). For a unit whose
    /// ownership is gone, or a stop that cannot wait.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Called by the coordinator: snapshot `id` is a drained stop's.
    pub(crate) fn drain_at(&self, id: u64) {
        self.drain_at.store(id, Ordering::Relaxed);
    }

    /// Whether snapshot `id` is a drained stop's: its sinks write their
    /// ends in its epoch.
    pub(crate) fn drains_at(&self, id: u64) -> bool {
        id != 0 && self.drain_at.load(Ordering::Relaxed) == id
    }

    /// Whether [`RunHandle::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// A handle for a run that has not started.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Called by the run when its coordinator starts: requests go to it
    /// from now on. The coordinator reads the returned receiver.
    pub(crate) fn open_requests(&self) -> Receiver<Request> {
        let (tx, rx) = channel();
        *self.requests.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        self.ended.store(false, Ordering::Relaxed);
        self.failed.store(false, Ordering::Relaxed);
        rx
    }

    /// Called by the run as it ends (`failed`: with an error): later
    /// requests and state queries fail at once, and tail readers are let
    /// go.
    pub(crate) fn close_requests(&self, failed: bool) {
        self.failed.store(failed, Ordering::Relaxed);
        if self.requests.lock().unwrap_or_else(PoisonError::into_inner).take().is_some() {
            self.ended.store(true, Ordering::Relaxed);
        }
        self.state.close();
        self.tail.close();
    }

    /// Whether the run ended with an error (after its coordinator started).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether the run takes requests: it has restored its state and
    /// started its coordinator, and has not ended.
    pub fn listening(&self) -> bool {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// Ask the run for a snapshot of `kind` (stopping afterwards if `stop`)
    /// and wait up to `timeout` for where it was stored.
    pub fn request(
        &self,
        kind: SnapshotKind,
        stop: bool,
        timeout: Duration,
    ) -> Result<String, RequestError> {
        let (request, answer) = Request::in_process(kind, stop);
        self.send(request, &answer, timeout)
    }

    /// Stop the run with a final checkpoint in whose epoch its sinks tell
    /// what they feed that it ended (a cluster unit's drained stop, see
    /// `docs/cluster.md`), waiting up to `timeout` for where it was stored.
    pub fn drain(&self, timeout: Duration) -> Result<String, RequestError> {
        let (request, answer) = Request::drain();
        self.send(request, &answer, timeout)
    }

    /// Send `request` to the run and wait up to `timeout` for its `answer`.
    fn send(
        &self,
        request: Request,
        answer: &Receiver<Response>,
        timeout: Duration,
    ) -> Result<String, RequestError> {
        {
            let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            match requests.as_ref() {
                // Its coordinator has ended (the run is ending).
                Some(tx) if tx.send(request).is_err() => return Err(RequestError::EndedFirst),
                Some(_) => {}
                None if self.ended.load(Ordering::Relaxed) => return Err(RequestError::EndedFirst),
                None => return Err(RequestError::NotListening),
            }
        }
        match answer.recv_timeout(timeout) {
            Ok(Response { ok: true, location: Some(location), .. }) => Ok(location),
            Ok(response) => Err(RequestError::Failed(
                response.error.unwrap_or_else(|| "the snapshot failed".into()),
            )),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(RequestError::Timeout(timeout)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(RequestError::EndedFirst),
        }
    }
}

/// Why [`RunHandle::request`] got no snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No run listens: it has not started its coordinator yet (it is
    /// restoring).
    #[error("the pipeline is not running")]
    NotListening,
    /// The run ended before it answered (or before it was asked, after it
    /// had started): see [`RunHandle::failed`] for how.
    #[error("the pipeline stopped before the snapshot was taken")]
    EndedFirst,
    /// No answer within the timeout.
    #[error("no answer within {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// The run answered that the snapshot failed, and why.
    #[error("{0}")]
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processing_ends_at_the_last_output_or_the_end_of_the_input_whichever_is_later() {
        let metrics = LiveMetrics::default();
        assert_eq!(metrics.processing(), None, "nothing read");
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        metrics.read_at(start);
        metrics.read_at(at(5));
        assert_eq!(metrics.processing(), None, "nothing written or processed yet");
        metrics.set_last_written(Some(at(300)));
        assert_eq!(metrics.processing(), Some(Duration::from_millis(300)));
        // Subtasks done before the last output: the output ends it.
        metrics.input_done_at(at(200));
        assert_eq!(metrics.processing(), Some(Duration::from_millis(300)));
        // The last subtask done after the last output (a dedup's): it ends it.
        metrics.input_done_at(at(900));
        metrics.input_done_at(at(700));
        assert_eq!(metrics.processing(), Some(Duration::from_millis(900)));
    }
}
