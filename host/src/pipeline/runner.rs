//! Running a pipeline in this process.
//!
//! ```text
//! source thread:   source → key function → route by key group ─┐ bounded channels
//!                  (+ watermarks per split, broadcast in-band)   │ (events, watermarks)
//! subtask i (P):   keyed operator: process function + timers,  │
//!                  or windows + aggregate / window process      │
//!                  (own Wasm store, own RocksDB + cache) ───────┤ bounded channel
//! sink thread:     main sink + side-output sinks ◄──────────────┘
//! ```
//!
//! Batches, not events, cross threads and the Wasm boundary. Every channel
//! is bounded, so a slow sink slows the subtasks and they slow the source:
//! nothing is dropped and nothing is buffered without bound. A key always
//! goes to the same subtask, which handles its events in arrival order.
//!
//! Checkpoints (see [`crate::checkpoint`]) travel the same channels: the
//! coordinator thread asks the source for snapshot N; the source records
//! its positions and sends barrier N behind the events before it to every
//! subtask and to the sink; a subtask snapshots its state when the barrier
//! arrives and forwards it; the sink pre-commits once barrier N came from
//! every input, and commits when the coordinator says N is complete. A
//! subtask has one input, so its barriers need no alignment; the sink tags
//! what each input sends with that input's epoch (the id of the next
//! checkpoint), so it never has to hold an input back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{
    channel, sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError,
};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::failures;
use super::live::{LiveCounts, LiveMetrics, RunHandle};
use super::operator::{FunctionCode, FunctionEnv, KeyedOperator, OperatorPlan, RoutedBatch};
use super::spec::{FunctionSpec, PipelineSpec, SinkSpec};
use crate::checkpoint::{
    self, Ack, CheckpointError, CheckpointSettings, CheckpointStorage, CompletedSnapshot,
    ControlDir, Coordinator, CoordinatorConfig, KnownFiles, LocatedSnapshot, RestoreTarget,
    SnapshotKind, Trigger,
};
use crate::config;
use crate::connectors::kafka::{self, KafkaSinkConfig};
use crate::connectors::{self, open_sink, ConnectorError, Sink, SinkMode, Source};
use crate::registry::{FunctionStore, RegistryError};
use crate::runtime::{
    new_engine, CallError, EngineLimits, FunctionLoader, KeyFunctionInstance, LoadError,
    LoadedFunction, Role,
};
use crate::state::changelog::Changelog;
use crate::state::layout::{self, Layout, LayoutError};
use crate::state::{
    key_group, subtask_for_key_group, CachedBackend, KeyedStateBackend, SnapshotForm, StateError,
};
use crate::time::{SplitWatermarks, WatermarkSnapshot};
use crate::window::WindowConfig;
use crate::Event;

/// Batches a channel holds before its sender waits.
const CHANNEL_BATCHES: usize = 4;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A function file could not be read.
    #[error("cannot read function {path}: {source}")]
    ReadFunction {
        /// The `.wasm` file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A stored function could not be found or read.
    #[error("{field}: {source}")]
    StoredFunction {
        /// The spec field naming it (`process`, …).
        field: &'static str,
        /// What the function store said.
        source: RegistryError,
    },
    /// A function could not be loaded for its role.
    #[error("{function}: {source}")]
    Load {
        /// The `.wasm` file, or the stored function and version.
        function: String,
        /// Why it was rejected.
        source: LoadError,
    },
    /// A function call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A source or sink failed.
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    /// The state backend failed.
    #[error("state: {0}")]
    State(#[from] StateError),
    /// The state directory could not be opened.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The window operator failed.
    #[error(transparent)]
    Window(#[from] crate::window::WindowError),
    /// Checkpointing or restoring failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// `--restore latest` found no completed checkpoint.
    #[error("nothing to restore: pipeline {0} has no completed checkpoint")]
    NothingToRestore(String),
    /// A snapshot's source or sink state does not fit this pipeline.
    #[error("cannot resume from snapshot {id}: {message}")]
    Resume {
        /// The snapshot.
        id: u64,
        /// What does not fit.
        message: String,
    },
    /// The pipeline's configuration cannot work (found before it starts).
    #[error("cannot deploy: {0}")]
    Deploy(String),
    /// The wasmtime engine could not be set up.
    #[error("wasm engine: {0}")]
    Engine(String),
    /// A pipeline thread panicked (a bug in Weir).
    #[error("{0} thread panicked")]
    Panicked(String),
    /// A downstream thread stopped early; its own error says why, and is
    /// the one reported.
    #[error("a downstream operator stopped")]
    Stopped,
}

/// An exactly-once Kafka sink that cannot work is refused at deploy.
impl From<kafka::ExactlyOnceError> for RunError {
    fn from(error: kafka::ExactlyOnceError) -> Self {
        RunError::Deploy(error.to_string())
    }
}

/// Reports how far a bounded source has got: `(done, total)` in the
/// source's own unit (events or bytes).
pub type ProgressFn = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// How to run a pipeline.
#[derive(Clone)]
pub struct RunOptions {
    /// The host's data directory (state, compiled-code cache).
    pub data_dir: std::path::PathBuf,
    /// Start from empty state even if the spec does not say `fresh: true`.
    pub fresh: bool,
    /// Called after each source batch, for a progress display.
    pub progress: Option<ProgressFn>,
    /// Testing aid: pause this long after each batch the sink writes.
    pub sink_delay: Option<Duration>,
    /// Start from this snapshot. Without it a checkpointed pipeline resumes
    /// from its newest completed checkpoint, if any.
    pub restore: Option<RestoreFrom>,
    /// The run's live counters and in-process control (savepoint, stop).
    pub handle: Arc<RunHandle>,
}

/// Which snapshot a run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The pipeline's newest completed checkpoint (an error if none).
    Latest,
    /// A checkpoint or savepoint directory: local path or URL.
    Path(String),
}

impl RunOptions {
    /// Options with everything else off.
    pub fn new(data_dir: std::path::PathBuf) -> Self {
        Self {
            data_dir,
            fresh: false,
            progress: None,
            sink_delay: None,
            restore: None,
            handle: RunHandle::new(),
        }
    }
}

/// Records into and out of one operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperatorCounts {
    /// Records the operator received.
    pub records_in: u64,
    /// Records the operator emitted.
    pub records_out: u64,
    /// Late records the operator dropped (windows with no late output).
    pub late_dropped: u64,
}

/// What a finished run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Events read from the source.
    pub records_in: u64,
    /// Events the process function emitted to the main output.
    pub records_out: u64,
    /// Events written to declared side outputs.
    pub side_outputs_written: u64,
    /// Events emitted to side outputs the spec does not declare (dropped).
    pub side_outputs_dropped: u64,
    /// Source records dropped for lack of a usable timestamp.
    pub dropped_bad_timestamps: u64,
    /// The key function.
    pub key: OperatorCounts,
    /// Each keyed subtask of the process function.
    pub subtasks: Vec<OperatorCounts>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// The snapshot the run started from: (kind, id).
    pub restored_from: Option<(SnapshotKind, u64)>,
    /// Snapshots completed during the run.
    pub snapshots_completed: usize,
    /// The last of them.
    pub last_snapshot: Option<CompletedSnapshot>,
    /// Snapshots abandoned after their timeout.
    pub snapshots_expired: u64,
    /// The run ended on a stop request, not at the end of its input.
    pub stopped: bool,
}

impl From<&LiveMetrics> for RunSummary {
    /// What the run counted so far (elapsed time, expired snapshots and
    /// the stop flag are the runner's to fill in).
    fn from(metrics: &LiveMetrics) -> Self {
        let key = metrics.key.get();
        let (last_snapshot, snapshots_completed) = metrics.last_snapshot();
        Self {
            records_in: key.records_in,
            records_out: metrics.sink_written.load(Ordering::Relaxed),
            side_outputs_written: metrics.side_written.load(Ordering::Relaxed),
            side_outputs_dropped: metrics.side_dropped.load(Ordering::Relaxed),
            dropped_bad_timestamps: metrics.dropped_bad_timestamps.load(Ordering::Relaxed),
            key,
            subtasks: metrics.subtasks(),
            elapsed: Duration::ZERO,
            restored_from: metrics.restored_from(),
            snapshots_completed,
            last_snapshot,
            snapshots_expired: 0,
            stopped: false,
        }
    }
}

/// What flows from the source thread to a subtask, in order.
enum SubtaskMessage {
    /// Events to process.
    Events(RoutedBatch),
    /// Event time has reached this watermark.
    Watermark(i64),
    /// Snapshot this state for checkpoint/savepoint `id`, in `form`, then
    /// forward it.
    Barrier(u64, SnapshotForm),
}

/// How often an idle subtask checks for due processing-time timers.
const TIMER_POLL: Duration = Duration::from_millis(50);

/// What flows into the sink thread, in order per input (subtask `i` is
/// input `i`; the source, for events it sets aside, is input `P`).
enum SinkMessage {
    /// Output of input `from`.
    Batch {
        /// The input.
        from: usize,
        /// Main output.
        main: Vec<Event>,
        /// Side outputs, by name.
        side: Vec<(String, Event)>,
    },
    /// Barrier `id` from input `from`: what it sends next is after `id`.
    Barrier {
        /// The input.
        from: usize,
        /// The snapshot.
        id: u64,
    },
    /// Snapshot `id` is complete: commit its output.
    Complete(u64),
}

/// Run `spec` to completion (bounded sources) or until asked to stop, and
/// report what happened.
pub fn run(spec: &PipelineSpec, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let _span = tracing::info_span!("pipeline", name = %spec.name).entered();
    let Prepared { settings, kafka_exactly_once, key_function, plan, env } =
        prepare(spec, &options.data_dir)?;
    let mut keyer = match &key_function {
        FunctionCode::Wasm(function) => {
            let name = format!("{} (key)", function.label);
            KeyFunctionInstance::new(function, &name, env.ctx(&name, None)?)?
        }
        FunctionCode::Native(native) => KeyFunctionInstance::native(
            native.key().ok_or_else(|| RunError::Deploy("not a key function".into()))?,
            "key",
        ),
    };
    let mut source = connectors::open_source(&spec.source, &spec.name)?;
    tracing::debug!(elapsed = ?started.elapsed(), "functions loaded, source open");
    let start = prepare_state(spec, options, settings.as_ref(), kafka_exactly_once.as_ref())?;
    tracing::debug!(elapsed = ?started.elapsed(), "state ready");
    let mut watermarks = spec.watermark.as_ref().and_then(|w| {
        let idle = w.idle_timeout;
        w.delay_ms().map(|delay| SplitWatermarks::new(source.splits(), delay, idle, Instant::now()))
    });
    let mut resumed_watermark = None;
    if let Some(snapshot) = &start.snapshot {
        let resume = |message: String| RunError::Resume { id: snapshot.metadata.id, message };
        let state: SourceState = serde_json::from_value(snapshot.metadata.source.clone())
            .map_err(|e| resume(format!("source state: {e}")))?;
        source.seek(&state.position).map_err(|e| resume(e.to_string()))?;
        if let (Some(watermarks), Some(saved)) = (&mut watermarks, &state.watermarks) {
            resumed_watermark = watermarks.restore(saved);
        }
    }

    let parallelism = usize::from(spec.parallelism);
    let sink_inputs = parallelism + 1;
    let (sink_tx, sink_rx) = sync_channel::<SinkMessage>(CHANNEL_BATCHES * parallelism);
    let (ack_tx, ack_rx) = channel::<Ack>();
    let (trigger_tx, trigger_rx) = channel::<Trigger>();
    let sink_state = start.snapshot.as_ref().map(|s| s.metadata.sink.clone());
    let metrics = &options.handle.metrics;
    metrics.set_restored_from(start.snapshot.as_ref().map(|s| (s.metadata.kind, s.metadata.id)));
    let sink_thread = spawn_sink(
        spec,
        options,
        settings.is_some(),
        sink_state.as_ref(),
        sink_rx,
        sink_inputs,
        start.first_id,
        ack_tx.clone(),
    )?;

    let control = ControlDir::new(config::control_dir(&options.data_dir, &spec.name));
    control
        .claim()
        .map_err(|e| RunError::Engine(format!("cannot write the control directory: {e}")))?;
    let complete_tx = sink_tx.clone();
    let coordinator = Coordinator::new(
        CoordinatorConfig {
            pipeline: spec.name.clone(),
            operator_uid: spec.operator_uid(),
            max_parallelism: spec.max_parallelism,
            parallelism: spec.parallelism,
            schedule: settings.clone(),
            local_dir: start.local_checkpoints.clone(),
            control: control.clone(),
            inbox: Some(options.handle.open_requests()),
            on_snapshot: {
                let handle = options.handle.clone();
                Box::new(move |snapshot| handle.metrics.snapshot_completed(snapshot))
            },
            first_id: start.first_id,
            restored_checkpoint: start
                .snapshot
                .as_ref()
                .filter(|s| s.metadata.kind == SnapshotKind::Checkpoint)
                .map(|s| s.metadata.id),
            known: start.known,
        },
        start.storage,
        trigger_tx,
        ack_rx,
        Box::new(move |id| complete_tx.send(SinkMessage::Complete(id)).is_ok()),
    );
    let coordinator_thread = spawn("coordinator", move || Ok(coordinator.run()?))?;

    let cache_bytes = spec.state_cache_bytes / parallelism;
    let mut subtask_txs = Vec::new();
    let mut subtask_threads = Vec::new();
    let subtask_counts = metrics.start_subtasks(parallelism);
    for ((index, backend), counts) in start.backends.into_iter().enumerate().zip(subtask_counts) {
        let (tx, rx) = sync_channel::<SubtaskMessage>(CHANNEL_BATCHES);
        let mut cache = CachedBackend::new(Box::new(backend), cache_bytes);
        if let Some(settings) = &settings {
            // Changes piling up beyond the cache's own budget between two
            // checkpoints make the next one full instead.
            let chain = start.local_checkpoints.join(format!("chain-{index}"));
            cache = cache.with_changelog(Changelog::create(
                chain,
                settings.materialize_every,
                cache_bytes,
            )?);
            cache.start_chain(&start.local_checkpoints.join(format!("base-{index}")))?;
        }
        let backend: Box<dyn KeyedStateBackend> = Box::new(cache);
        let (plan, env) = (plan.clone(), env.clone());
        let links = SubtaskLinks {
            index,
            sink: sink_tx.clone(),
            acks: ack_tx.clone(),
            local_checkpoints: start.local_checkpoints.clone(),
            counts,
        };
        subtask_threads.push(spawn(&format!("subtask-{index}"), move || {
            run_subtask(KeyedOperator::new(&plan, index, backend, &env)?, rx, links)
        })?);
        subtask_txs.push(tx);
    }

    let mut stopped = false;
    let links = SourceLinks {
        subtasks: subtask_txs,
        sink: sink_tx,
        triggers: trigger_rx,
        acks: ack_tx.clone(),
        metrics,
    };
    tracing::debug!(elapsed = ?started.elapsed(), "pipeline started");
    let bare = plan.takes_packed_events(env.dead_letter.is_some());
    let source_result = feed(
        spec,
        options,
        source.as_mut(),
        &mut keyer,
        &env,
        watermarks.as_mut(),
        resumed_watermark,
        &links,
        &mut stopped,
        bare,
    );
    if source_result.is_err() {
        let _ = ack_tx.send(Ack::Shutdown);
    }
    drop((links, ack_tx));
    let mut errors: Vec<RunError> = source_result.err().into_iter().collect();
    for thread in subtask_threads {
        errors.extend(join(thread, "subtask").err());
    }
    errors.extend(join(sink_thread, "sink").err());
    let mut snapshots_expired = 0;
    match join(coordinator_thread, "coordinator") {
        Ok(report) => snapshots_expired = report.expired,
        Err(e) => errors.push(e),
    }
    options.handle.close_requests();
    control.release();
    // A failing subtask or sink makes upstream threads see a closed channel
    // (`Stopped`); report the failure itself.
    if let Some(index) = errors
        .iter()
        .position(|e| !matches!(e, RunError::Stopped))
        .or((!errors.is_empty()).then_some(0))
    {
        return Err(errors.swap_remove(index));
    }
    let summary = RunSummary {
        elapsed: started.elapsed(),
        snapshots_expired,
        stopped,
        ..RunSummary::from(metrics)
    };
    tracing::info!(
        records_in = summary.records_in,
        records_out = summary.records_out,
        "pipeline finished"
    );
    Ok(summary)
}

/// What a run needs before it starts.
struct Prepared {
    settings: Option<CheckpointSettings>,
    kafka_exactly_once: Option<KafkaSinkConfig>,
    key_function: FunctionCode,
    plan: OperatorPlan,
    env: FunctionEnv,
}

/// Check the settings and the exactly-once requirements, and load every
/// function for its role.
fn prepare(spec: &PipelineSpec, data_dir: &Path) -> Result<Prepared, RunError> {
    let settings = spec.checkpoint.clone();
    let kafka_exactly_once = kafka::exactly_once_sink(&spec.sink).cloned();
    if let Some(sink) = &kafka_exactly_once {
        kafka::check_exactly_once(sink, settings.as_ref(), &spec.name, data_dir)?;
    }
    let env = FunctionEnv::of(spec)?;
    // One key function instance and one per subtask, each replaced (the old
    // one freed first) after a trap.
    let instances = u32::from(spec.parallelism) + 1;
    let engine = new_engine(EngineLimits::for_functions(instances, &env.limits))
        .map_err(|e| RunError::Engine(format!("{e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(config::component_cache_dir(data_dir)))
        .map_err(|e| RunError::Engine(e.to_string()))?;
    let key_function = load(&loader, &spec.key, "key", Role::Key, data_dir)?;
    let plan = plan(spec, &loader, data_dir)?;
    Ok(Prepared { settings, kafka_exactly_once, key_function, plan, env })
}

/// Check, without running it, that `spec` can run on this host: its
/// settings, the exactly-once requirements of its sink, and that every
/// function exists and implements its role. What a deploy refuses.
pub fn check(spec: &PipelineSpec, data_dir: &Path) -> Result<(), RunError> {
    prepare(spec, data_dir).map(drop)
}

/// What the keyed stage runs.
fn plan(
    spec: &PipelineSpec,
    loader: &FunctionLoader,
    data_dir: &Path,
) -> Result<OperatorPlan, RunError> {
    let window_function = match (&spec.aggregate, &spec.window_process) {
        (Some(aggregate), _) => Some((aggregate, "aggregate", Role::Aggregate)),
        (None, Some(process)) => Some((process, "window_process", Role::WindowProcess)),
        (None, None) => None,
    };
    Ok(match (&spec.process, &spec.window, window_function) {
        (Some(process), _, _) => {
            OperatorPlan::Process(load(loader, process, "process", Role::Process, data_dir)?)
        }
        (None, Some(window), Some((function, field, role))) => {
            let config = WindowConfig {
                assigner: window.assigner().map_err(|e| RunError::Engine(e.to_string()))?,
                allowed_lateness: window
                    .allowed_lateness()
                    .map_err(|e| RunError::Engine(e.to_string()))?,
                late_output: window.late_output.clone(),
                max_parallelism: spec.max_parallelism,
            };
            OperatorPlan::Window(load(loader, function, field, role, data_dir)?, role, config)
        }
        _ => {
            return Err(RunError::Engine(
                "the spec has neither a process function nor a window with an aggregate".into(),
            ))
        }
    })
}

/// Where a run starts: its state (restored or not), the snapshot it came
/// from, and what checkpointing needs to go on.
struct StartingPoint {
    backends: Vec<crate::state::RocksDbBackend>,
    snapshot: Option<LocatedSnapshot>,
    storage: CheckpointStorage,
    first_id: u64,
    known: Vec<KnownFiles>,
    local_checkpoints: PathBuf,
}

/// Open the pipeline's state: restored from a snapshot when asked, or when
/// checkpointing and a completed checkpoint exists; empty when
/// checkpointing without one (the local state may be ahead of what the
/// sinks committed); else as the last run left it.
fn prepare_state(
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
        None => config::default_checkpoint_storage(data_dir)
            .map_err(|e| RunError::Engine(format!("checkpoint directory: {e}"))),
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

/// What the source records in a snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SourceState {
    position: serde_json::Value,
    #[serde(default)]
    watermarks: Option<WatermarkSnapshot>,
}

/// The source thread's channels and counters.
struct SourceLinks<'a> {
    subtasks: Vec<SyncSender<SubtaskMessage>>,
    sink: SyncSender<SinkMessage>,
    triggers: Receiver<Trigger>,
    acks: Sender<Ack>,
    metrics: &'a LiveMetrics,
}

impl SourceLinks<'_> {
    fn broadcast(&self, message: impl Fn() -> SubtaskMessage) -> Result<(), RunError> {
        self.subtasks.iter().try_for_each(|tx| tx.send(message()).map_err(|_| RunError::Stopped))
    }

    /// Event time has reached `watermark`: tell every subtask.
    fn broadcast_watermark(&self, watermark: i64) -> Result<(), RunError> {
        self.metrics.set_watermark(watermark);
        self.broadcast(|| SubtaskMessage::Watermark(watermark))
    }

    /// Record the source's state and send barrier `trigger.id` downstream.
    fn inject_barrier(
        &self,
        trigger: Trigger,
        source: &mut dyn Source,
        watermarks: Option<&SplitWatermarks>,
    ) -> Result<(), RunError> {
        let position = source.position();
        source.on_barrier(&position);
        let state = SourceState { position, watermarks: watermarks.map(SplitWatermarks::snapshot) };
        let state = serde_json::to_value(state)
            .map_err(|e| RunError::Engine(format!("source state: {e}")))?;
        let _ = self.acks.send(Ack::Source { id: trigger.id, state });
        // Savepoints are encoded from a database; checkpoints may be changelogs.
        let form = if trigger.kind == SnapshotKind::Savepoint {
            SnapshotForm::Database
        } else {
            SnapshotForm::Chained
        };
        self.broadcast(|| SubtaskMessage::Barrier(trigger.id, form))?;
        self.sink
            .send(SinkMessage::Barrier { from: self.subtasks.len(), id: trigger.id })
            .map_err(|_| RunError::Stopped)
    }

    /// After the input ended or a stop: take part in the snapshots the
    /// coordinator still asks for, until it is done.
    fn serve_remaining_triggers(
        &self,
        source: &mut dyn Source,
        watermarks: Option<&SplitWatermarks>,
    ) -> Result<(), RunError> {
        while let Ok(trigger) = self.triggers.recv() {
            self.inject_barrier(trigger, source, watermarks)?;
        }
        Ok(())
    }
}

/// Read the source, key each batch and route events to their subtasks
/// (packed if `bare`: see [`RoutedBatch`]); inject barriers when the
/// coordinator asks.
#[allow(clippy::too_many_arguments)]
fn feed(
    spec: &PipelineSpec,
    options: &RunOptions,
    source: &mut dyn Source,
    keyer: &mut KeyFunctionInstance,
    env: &FunctionEnv,
    mut watermarks: Option<&mut SplitWatermarks>,
    resumed_watermark: Option<i64>,
    links: &SourceLinks,
    stopped: &mut bool,
    bare: bool,
) -> Result<(), RunError> {
    let parallelism = spec.parallelism;
    let per_subtask = spec.batch_size / usize::from(parallelism) + 1;
    let mut events: Vec<Event> = Vec::with_capacity(spec.batch_size);
    let mut routed: Vec<RoutedBatch> =
        (0..parallelism).map(|_| RoutedBatch::with_capacity(per_subtask, bare)).collect();
    if let Some(watermark) = resumed_watermark {
        // Operators continue from the watermark the snapshot was taken at.
        links.broadcast_watermark(watermark)?;
    }
    loop {
        match links.triggers.try_recv() {
            Ok(trigger) => {
                links.inject_barrier(trigger, source, watermarks.as_deref())?;
                if trigger.stop {
                    *stopped = true;
                    links.metrics.dropped_bad_timestamps.store(source.dropped(), Ordering::Relaxed);
                    return links.serve_remaining_triggers(source, watermarks.as_deref());
                }
            }
            Err(TryRecvError::Empty) => {}
            // The coordinator failed; its error is the one reported.
            Err(TryRecvError::Disconnected) => return Err(RunError::Stopped),
        }
        let polled = source.next_batch(spec.batch_size, &mut events)?;
        let now = Instant::now();
        let rejected = source.take_rejected();
        if !rejected.is_empty() {
            links
                .sink
                .send(SinkMessage::Batch {
                    from: usize::from(parallelism),
                    main: Vec::new(),
                    side: rejected,
                })
                .map_err(|_| RunError::Stopped)?;
        }
        if !events.is_empty() {
            links.metrics.key.add_in(events.len());
            let keys = match &env.dead_letter {
                None => keyer.extract_keys(&events)?,
                Some(output) => {
                    let (keys, letters) = failures::dead_letter_keys(keyer, &mut events, output)?;
                    if !letters.is_empty() {
                        links
                            .sink
                            .send(SinkMessage::Batch {
                                from: usize::from(parallelism),
                                main: Vec::new(),
                                side: letters,
                            })
                            .map_err(|_| RunError::Stopped)?;
                    }
                    keys
                }
            };
            links.metrics.key.add_out(keys.len());
            for (event, key) in events.drain(..).zip(keys.iter()) {
                if let Some(watermarks) = watermarks.as_deref_mut() {
                    watermarks.observe(polled.split, event.timestamp, now);
                }
                let group = key_group(key, spec.max_parallelism);
                let target = subtask_for_key_group(group, spec.max_parallelism, parallelism);
                routed[usize::from(target)].push(key, event);
            }
            for (batch, tx) in routed.iter_mut().zip(&links.subtasks) {
                if !batch.is_empty() {
                    let next = batch.with_capacity_of(bare);
                    let full = std::mem::replace(batch, next);
                    tx.send(SubtaskMessage::Events(full)).map_err(|_| RunError::Stopped)?;
                }
            }
        }
        if let Some(watermarks) = watermarks.as_deref_mut() {
            if polled.split_finished {
                watermarks.finish(polled.split);
            }
            if let Some(watermark) = watermarks.advance(now) {
                links.broadcast_watermark(watermark)?;
            }
        }
        if let (Some(progress), Some((done, total))) = (&options.progress, source.progress()) {
            progress(done, total);
        }
        if !polled.more {
            links.metrics.dropped_bad_timestamps.store(source.dropped(), Ordering::Relaxed);
            // A bounded source is exhausted: event time has ended, and a
            // final checkpoint commits the rest of the output.
            links.broadcast_watermark(i64::MAX)?;
            let _ = links.acks.send(Ack::SourceFinished);
            return links.serve_remaining_triggers(source, watermarks.as_deref());
        }
    }
}

/// A subtask's channels and where it writes local checkpoints.
struct SubtaskLinks {
    index: usize,
    sink: SyncSender<SinkMessage>,
    acks: Sender<Ack>,
    local_checkpoints: PathBuf,
    counts: Arc<LiveCounts>,
}

/// One keyed subtask: hand each batch and watermark to the operator and
/// forward what it emits; fire processing-time timers as the clock passes;
/// snapshot its state at each barrier.
fn run_subtask(
    mut operator: KeyedOperator,
    input: Receiver<SubtaskMessage>,
    links: SubtaskLinks,
) -> Result<(), RunError> {
    let _span = tracing::info_span!("subtask", index = links.index).entered();
    loop {
        let message = match operator.next_processing_timer() {
            Some(_) => match input.recv_timeout(TIMER_POLL) {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match input.recv() {
                Ok(message) => Some(message),
                Err(_) => break,
            },
        };
        match message {
            Some(SubtaskMessage::Events(batch)) => {
                links.counts.add_in(batch.len());
                operator.on_events(batch)?;
            }
            Some(SubtaskMessage::Watermark(watermark)) => operator.on_watermark(watermark)?,
            Some(SubtaskMessage::Barrier(id, form)) => {
                // What was emitted before the barrier belongs before it.
                forward_outputs(&mut operator, &links)?;
                let dir = links
                    .local_checkpoints
                    .join(format!("chk-{id}"))
                    .join(format!("subtask-{}", links.index));
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(CheckpointError::from)?;
                }
                std::fs::create_dir_all(dir.parent().unwrap_or(&links.local_checkpoints))
                    .map_err(CheckpointError::from)?;
                operator.checkpoint(&dir, form)?;
                let _ = links.acks.send(Ack::Subtask { id, index: links.index, dir });
                links
                    .sink
                    .send(SinkMessage::Barrier { from: links.index, id })
                    .map_err(|_| RunError::Stopped)?;
            }
            None => {}
        }
        operator.on_processing_time()?;
        forward_outputs(&mut operator, &links)?;
        operator.relieve()?;
    }
    operator.flush()
}

/// Send what the operator emitted to the sink thread.
fn forward_outputs(operator: &mut KeyedOperator, links: &SubtaskLinks) -> Result<(), RunError> {
    let (main, side, late_dropped) = operator.take_outputs();
    links.counts.add_late_dropped(late_dropped);
    if main.is_empty() && side.is_empty() {
        return Ok(());
    }
    links.counts.add_out(main.len());
    links
        .sink
        .send(SinkMessage::Batch { from: links.index, main, side })
        .map_err(|_| RunError::Stopped)
}

/// What the sinks record in a snapshot: each sink's pre-commit state.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SinkState {
    main: serde_json::Value,
    #[serde(default)]
    side: BTreeMap<String, serde_json::Value>,
}

#[allow(clippy::too_many_arguments)]
fn spawn_sink(
    spec: &PipelineSpec,
    options: &RunOptions,
    exactly_once: bool,
    recovered: Option<&serde_json::Value>,
    input: Receiver<SinkMessage>,
    inputs: usize,
    first_epoch: u64,
    acks: Sender<Ack>,
) -> Result<JoinHandle<Result<(), RunError>>, RunError> {
    let recovered: Option<SinkState> = recovered
        .filter(|v| !v.is_null())
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|e| RunError::Engine(format!("sink state in the snapshot: {e}")))?;
    let mode = |state: Option<&serde_json::Value>| {
        if exactly_once {
            SinkMode::ExactlyOnce(state.filter(|v| !v.is_null()).cloned())
        } else {
            SinkMode::Direct
        }
    };
    let mut sink = open_sink(&spec.sink, mode(recovered.as_ref().map(|r| &r.main)))?;
    let mut side_outputs = SideOutputs::open(&spec.side_outputs, |name| {
        mode(recovered.as_ref().and_then(|r| r.side.get(name)))
    })?;
    let delay = options.sink_delay;
    let handle = options.handle.clone();
    spawn("sink", move || {
        let report = &handle.metrics;
        let mut epochs = vec![first_epoch; inputs];
        let mut barriers: BTreeMap<u64, usize> = BTreeMap::new();
        for message in input {
            match message {
                SinkMessage::Batch { from, main, side } => {
                    let epoch = epochs[from];
                    sink.write(epoch, &main)?;
                    report.sink_written.fetch_add(main.len() as u64, Ordering::Relaxed);
                    side_outputs.route(epoch, side, report)?;
                    if let Some(delay) = delay {
                        std::thread::sleep(delay);
                    }
                }
                SinkMessage::Barrier { from, id } => {
                    sink.end_of_epoch(epochs[from])?;
                    side_outputs.end_of_epoch(epochs[from])?;
                    epochs[from] = id + 1;
                    let arrived = barriers.entry(id).or_default();
                    *arrived += 1;
                    if *arrived == inputs {
                        barriers.remove(&id);
                        let state = SinkState {
                            main: sink.pre_commit(id)?,
                            side: side_outputs.pre_commit(id)?,
                        };
                        let state = serde_json::to_value(state)
                            .map_err(|e| RunError::Engine(format!("sink state: {e}")))?;
                        let _ = acks.send(Ack::Sink { id, state });
                    }
                }
                SinkMessage::Complete(id) => {
                    sink.commit(id)?;
                    side_outputs.commit(id)?;
                }
            }
        }
        // With checkpoints, only a completed checkpoint makes output
        // visible (the final one at the end of the input); a run that
        // fails leaves its pending output to recovery.
        if !exactly_once {
            sink.flush()?;
            side_outputs.flush()?;
        }
        Ok(())
    })
}

/// Start a named pipeline thread.
fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> Result<T, RunError> + Send + 'static,
) -> Result<JoinHandle<Result<T, RunError>>, RunError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(work)
        .map_err(|e| RunError::Engine(format!("cannot start a thread: {e}")))
}

/// Wait for a pipeline thread, turning a panic into an error.
fn join<T>(thread: JoinHandle<Result<T, RunError>>, what: &str) -> Result<T, RunError> {
    thread.join().unwrap_or_else(|_| Err(RunError::Panicked(what.to_string())))
}

/// Load the function `field` of the spec names (a file, a stored function
/// of the data directory's store, or a native built-in) and check it can
/// play `role`.
fn load(
    loader: &FunctionLoader,
    function: &FunctionSpec,
    field: &'static str,
    role: Role,
    data_dir: &Path,
) -> Result<FunctionCode, RunError> {
    if let Some(name) = &function.native {
        let native = crate::bench::native::lookup(name).ok_or_else(|| {
            RunError::Deploy(format!(
                "{field}.native: no built-in function {name:?} (there are {})",
                crate::bench::native::NAMES.join(", ")
            ))
        })?;
        let plays = match role {
            Role::Key => native.key().is_some(),
            Role::Process => native.process().is_some(),
            Role::Aggregate => native.aggregate().is_some(),
            Role::WindowProcess => false,
        };
        return if plays {
            Ok(FunctionCode::Native(native))
        } else {
            Err(RunError::Deploy(format!(
                "{field}.native: {name} is not a {} function",
                role.world()
            )))
        };
    }
    let (label, bytes) = match (&function.wasm, &function.function) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read(path)
                .map_err(|source| RunError::ReadFunction { path: path.to_path_buf(), source })?,
        ),
        (None, Some(name)) => {
            let stored = FunctionStore::open(data_dir).and_then(|store| {
                let version = store.get(name, function.version)?;
                Ok((format!("function {name} version {}", version.version), store.bytes(&version)?))
            });
            stored.map_err(|source| RunError::StoredFunction { field, source })?
        }
        (None, None) => return Err(RunError::Deploy(format!("{field}: names no function"))),
    };
    let loaded = loader.load(&bytes).and_then(|f| f.require(role).map(|()| f));
    let short = match (&function.wasm, &function.function) {
        (Some(path), _) => path
            .file_name()
            .map_or_else(|| label.clone(), |name| name.to_string_lossy().into_owned()),
        _ => label.replace("function ", "").replace(" version ", " v"),
    };
    loaded
        .map(|f| FunctionCode::Wasm(LoadedFunction { label: short, ..f }))
        .map_err(|source| RunError::Load { function: label, source })
}

/// The sinks of the declared side outputs.
struct SideOutputs {
    sinks: BTreeMap<String, Box<dyn Sink>>,
    warned: Vec<String>,
}

impl SideOutputs {
    fn open(
        specs: &BTreeMap<String, SinkSpec>,
        mode: impl Fn(&str) -> SinkMode,
    ) -> Result<Self, RunError> {
        let sinks = specs
            .iter()
            .map(|(name, spec)| Ok((name.clone(), open_sink(spec, mode(name))?)))
            .collect::<Result<_, RunError>>()?;
        Ok(Self { sinks, warned: Vec::new() })
    }

    /// Write each event to its side output's sink, or count it as dropped.
    fn route(
        &mut self,
        epoch: u64,
        events: Vec<(String, Event)>,
        report: &LiveMetrics,
    ) -> Result<(), RunError> {
        let (mut written, mut dropped) = (0, 0);
        for (name, event) in events {
            match self.sinks.get_mut(&name) {
                Some(sink) => {
                    sink.write(epoch, std::slice::from_ref(&event))?;
                    written += 1;
                }
                None => {
                    if !self.warned.contains(&name) {
                        tracing::warn!(side_output = %name, "dropping events sent to a side output the spec does not declare");
                        self.warned.push(name);
                    }
                    dropped += 1;
                }
            }
        }
        // Counted once per batch, not per event.
        report.side_written.fetch_add(written, Ordering::Relaxed);
        report.side_dropped.fetch_add(dropped, Ordering::Relaxed);
        Ok(())
    }

    fn end_of_epoch(&mut self, epoch: u64) -> Result<(), RunError> {
        self.sinks
            .values_mut()
            .try_for_each(|sink| sink.end_of_epoch(epoch).map_err(RunError::from))
    }

    fn pre_commit(&mut self, id: u64) -> Result<BTreeMap<String, serde_json::Value>, RunError> {
        self.sinks.iter_mut().map(|(name, sink)| Ok((name.clone(), sink.pre_commit(id)?))).collect()
    }

    fn commit(&mut self, id: u64) -> Result<(), RunError> {
        self.sinks.values_mut().try_for_each(|sink| sink.commit(id).map_err(RunError::from))
    }

    fn flush(&mut self) -> Result<(), RunError> {
        self.sinks.values_mut().try_for_each(|sink| sink.flush().map_err(RunError::from))
    }
}
