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

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::operator::{KeyedOperator, OperatorPlan};
use super::spec::{PipelineSpec, SinkSpec, SourceSpec};
use crate::config;
use crate::connectors::{ConnectorError, DiscardSink, FileSink, FileSource, GeneratorSource, Sink, Source, SplitSource, StdoutSink};
use crate::runtime::{new_engine, CallError, FunctionLoader, HostCtx, KeyFunctionInstance, LoadError, LoadedFunction, Role};
use crate::state::layout::{self, Layout, LayoutError};
use crate::state::ttl::Ttl;
use crate::state::{key_group, subtask_for_key_group, CachedBackend, KeyedStateBackend, StateError};
use crate::window::WindowConfig;
use crate::time::SplitWatermarks;
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
    /// A function could not be loaded for its role.
    #[error("{path}: {source}")]
    Load {
        /// The `.wasm` file.
        path: std::path::PathBuf,
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
}

impl RunOptions {
    /// Options with everything else off.
    pub fn new(data_dir: std::path::PathBuf) -> Self {
        Self { data_dir, fresh: false, progress: None, sink_delay: None }
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
}

/// One batch of routed events for a subtask: (key, event) pairs.
type SubtaskBatch = Vec<(Vec<u8>, Event)>;

/// What flows from the source thread to a subtask, in order.
enum SubtaskMessage {
    /// Events to process.
    Events(SubtaskBatch),
    /// Event time has reached this watermark.
    Watermark(i64),
}

/// How often an idle subtask checks for due processing-time timers.
const TIMER_POLL: Duration = Duration::from_millis(50);

/// One batch of a subtask's output for the sink thread.
struct SinkBatch {
    main: Vec<Event>,
    side: Vec<(String, Event)>,
}

/// What the sink thread counted.
#[derive(Default)]
struct SinkReport {
    written: u64,
    side_written: u64,
    side_dropped: u64,
}

/// Run `spec` to completion (bounded sources) and report what happened.
pub fn run(spec: &PipelineSpec, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let _span = tracing::info_span!("pipeline", name = %spec.name).entered();
    let engine = new_engine(Default::default()).map_err(|e| RunError::Engine(format!("{e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(config::component_cache_dir(&options.data_dir))).map_err(|e| RunError::Engine(e.to_string()))?;
    let key_function = load(&loader, &spec.key.wasm, Role::Key)?;
    let window_function = match (&spec.aggregate, &spec.window_process) {
        (Some(aggregate), _) => Some((aggregate, Role::Aggregate)),
        (None, Some(process)) => Some((process, Role::WindowProcess)),
        (None, None) => None,
    };
    let plan = match (&spec.process, &spec.window, window_function) {
        (Some(process), _, _) => OperatorPlan::Process(load(&loader, &process.wasm, Role::Process)?),
        (None, Some(window), Some((function, role))) => {
            let config = WindowConfig {
                assigner: window.assigner().map_err(|e| RunError::Engine(e.to_string()))?,
                allowed_lateness: window.allowed_lateness().map_err(|e| RunError::Engine(e.to_string()))?,
                late_output: window.late_output.clone(),
                max_parallelism: spec.max_parallelism,
            };
            OperatorPlan::Window(load(&loader, &function.wasm, role)?, role, config)
        }
        _ => return Err(RunError::Engine("the spec has neither a process function nor a window with an aggregate".into())),
    };
    let layout = Layout { max_parallelism: spec.max_parallelism, parallelism: spec.parallelism };
    let state_dir = config::pipeline_state_dir(&options.data_dir, &spec.name);
    let backends = layout::open_subtasks(&state_dir, layout, spec.fresh || options.fresh)?;
    let mut keyer = KeyFunctionInstance::new(&key_function, "key")?;
    let mut source = open_source(&spec.source)?;

    let (sink_tx, sink_rx) = sync_channel::<SinkBatch>(CHANNEL_BATCHES * usize::from(spec.parallelism));
    let sink_thread = spawn_sink(spec, options, sink_rx)?;
    let cache_bytes = spec.state_cache_bytes / usize::from(spec.parallelism);
    let ttl_overrides: HashMap<String, Ttl> = spec.state_ttl.iter().filter_map(|(name, ttl)| Some((name.clone(), ttl.to_ttl()?))).collect();
    let mut subtask_txs = Vec::new();
    let mut subtask_threads = Vec::new();
    for (index, backend) in backends.into_iter().enumerate() {
        let (tx, rx) = sync_channel::<SubtaskMessage>(CHANNEL_BATCHES);
        let backend: Box<dyn KeyedStateBackend> = Box::new(CachedBackend::new(Box::new(backend), cache_bytes));
        let (max_parallelism, ttl_overrides) = (spec.max_parallelism, ttl_overrides.clone());
        let ctx = move |backend| HostCtx::new(&format!("process[{index}]"), Some(backend), max_parallelism).with_ttl_overrides(ttl_overrides);
        let plan = plan.clone();
        let sink = sink_tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("subtask-{index}"))
            .spawn(move || run_subtask(KeyedOperator::new(&plan, index, backend, ctx)?, index, rx, sink))
            .map_err(|e| RunError::Engine(format!("cannot start a thread: {e}")))?;
        subtask_txs.push(tx);
        subtask_threads.push(thread);
    }

    let mut summary = RunSummary::default();
    let source_result = feed(spec, options, source.as_mut(), &mut keyer, &subtask_txs, &sink_tx, &mut summary);
    drop(subtask_txs);
    drop(sink_tx);
    let mut errors: Vec<RunError> = source_result.err().into_iter().collect();
    for thread in subtask_threads {
        match join(thread, "subtask") {
            Ok(counts) => summary.subtasks.push(counts),
            Err(e) => errors.push(e),
        }
    }
    match join(sink_thread, "sink") {
        Ok(report) => {
            summary.records_out = report.written;
            summary.side_outputs_written = report.side_written;
            summary.side_outputs_dropped = report.side_dropped;
        }
        Err(e) => errors.push(e),
    }
    // A failing subtask or sink makes upstream threads see a closed channel
    // (`Stopped`); report the failure itself.
    if let Some(index) = errors.iter().position(|e| !matches!(e, RunError::Stopped)).or((!errors.is_empty()).then_some(0)) {
        return Err(errors.swap_remove(index));
    }
    summary.elapsed = started.elapsed();
    tracing::info!(records_in = summary.records_in, records_out = summary.records_out, "pipeline finished");
    Ok(summary)
}

/// Read the source, key each batch and route events to their subtasks.
fn feed(
    spec: &PipelineSpec,
    options: &RunOptions,
    source: &mut dyn Source,
    keyer: &mut KeyFunctionInstance,
    subtasks: &[SyncSender<SubtaskMessage>],
    sink: &SyncSender<SinkBatch>,
    summary: &mut RunSummary,
) -> Result<(), RunError> {
    let parallelism = spec.parallelism;
    let mut watermarks = spec.watermark.as_ref().and_then(|w| {
        let idle = w.idle_timeout().ok().flatten();
        w.delay_ms().map(|delay| SplitWatermarks::new(source.splits(), delay, idle, Instant::now()))
    });
    let broadcast = |message: &dyn Fn() -> SubtaskMessage| subtasks.iter().try_for_each(|tx| tx.send(message()).map_err(|_| RunError::Stopped));
    let per_subtask = spec.batch_size / usize::from(parallelism) + 1;
    let mut events: Vec<Event> = Vec::with_capacity(spec.batch_size);
    let mut routed: Vec<SubtaskBatch> = (0..parallelism).map(|_| Vec::with_capacity(per_subtask)).collect();
    loop {
        let polled = source.next_batch(spec.batch_size, &mut events)?;
        let now = Instant::now();
        let rejected = source.take_rejected();
        if !rejected.is_empty() {
            sink.send(SinkBatch { main: Vec::new(), side: rejected }).map_err(|_| RunError::Stopped)?;
        }
        if !events.is_empty() {
            summary.records_in += events.len() as u64;
            summary.key.records_in += events.len() as u64;
            let keys = keyer.extract_keys(&events)?;
            summary.key.records_out += keys.len() as u64;
            for (event, key) in events.drain(..).zip(keys) {
                if let Some(watermarks) = &mut watermarks {
                    watermarks.observe(polled.split, event.timestamp, now);
                }
                let group = key_group(&key, spec.max_parallelism);
                let target = subtask_for_key_group(group, spec.max_parallelism, parallelism);
                routed[usize::from(target)].push((key, event));
            }
            for (batch, tx) in routed.iter_mut().zip(subtasks) {
                if !batch.is_empty() {
                    let full = std::mem::replace(batch, Vec::with_capacity(per_subtask));
                    tx.send(SubtaskMessage::Events(full)).map_err(|_| RunError::Stopped)?;
                }
            }
        }
        if let Some(watermarks) = &mut watermarks {
            if polled.split_finished {
                watermarks.finish(polled.split);
            }
            if let Some(watermark) = watermarks.advance(now) {
                broadcast(&|| SubtaskMessage::Watermark(watermark))?;
            }
        }
        if let (Some(progress), Some((done, total))) = (&options.progress, source.progress()) {
            progress(done, total);
        }
        if !polled.more {
            summary.dropped_bad_timestamps = source.dropped();
            // A bounded source is exhausted: event time has ended.
            return broadcast(&|| SubtaskMessage::Watermark(i64::MAX));
        }
    }
}

/// One keyed subtask: hand each batch and watermark to the operator and
/// forward what it emits; fire processing-time timers as the clock passes.
fn run_subtask(mut operator: KeyedOperator, index: usize, input: Receiver<SubtaskMessage>, sink: SyncSender<SinkBatch>) -> Result<OperatorCounts, RunError> {
    let _span = tracing::info_span!("subtask", index).entered();
    let mut counts = OperatorCounts::default();
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
                counts.records_in += batch.len() as u64;
                operator.on_events(batch)?;
            }
            Some(SubtaskMessage::Watermark(watermark)) => operator.on_watermark(watermark)?,
            None => {}
        }
        operator.on_processing_time()?;
        forward_outputs(&mut operator, &sink, &mut counts)?;
    }
    operator.flush()?;
    Ok(counts)
}

/// Send what the operator emitted to the sink thread.
fn forward_outputs(operator: &mut KeyedOperator, sink: &SyncSender<SinkBatch>, counts: &mut OperatorCounts) -> Result<(), RunError> {
    let (main, side, late_dropped) = operator.take_outputs();
    counts.late_dropped += late_dropped;
    if main.is_empty() && side.is_empty() {
        return Ok(());
    }
    counts.records_out += main.len() as u64;
    sink.send(SinkBatch { main, side }).map_err(|_| RunError::Stopped)
}

fn spawn_sink(spec: &PipelineSpec, options: &RunOptions, input: Receiver<SinkBatch>) -> Result<JoinHandle<Result<SinkReport, RunError>>, RunError> {
    let mut sink = open_sink(&spec.sink)?;
    let mut side_outputs = SideOutputs::open(&spec.side_outputs)?;
    let delay = options.sink_delay;
    std::thread::Builder::new()
        .name("sink".into())
        .spawn(move || {
            let mut report = SinkReport::default();
            for batch in input {
                sink.write(&batch.main)?;
                report.written += batch.main.len() as u64;
                side_outputs.route(batch.side, &mut report)?;
                if let Some(delay) = delay {
                    std::thread::sleep(delay);
                }
            }
            sink.flush()?;
            side_outputs.flush()?;
            Ok(report)
        })
        .map_err(|e| RunError::Engine(format!("cannot start a thread: {e}")))
}

/// Wait for a pipeline thread, turning a panic into an error.
fn join<T>(thread: JoinHandle<Result<T, RunError>>, what: &str) -> Result<T, RunError> {
    thread.join().unwrap_or_else(|_| Err(RunError::Panicked(what.to_string())))
}

fn load(loader: &FunctionLoader, path: &Path, role: Role) -> Result<LoadedFunction, RunError> {
    let bytes = std::fs::read(path).map_err(|source| RunError::ReadFunction { path: path.to_path_buf(), source })?;
    let function = loader.load(&bytes).and_then(|f| f.require(role).map(|()| f));
    function.map_err(|source| RunError::Load { path: path.to_path_buf(), source })
}

fn open_source(spec: &SourceSpec) -> Result<Box<dyn Source>, RunError> {
    Ok(match spec {
        SourceSpec::File { path, paths, timestamp_field, on_bad_timestamp } => {
            let open = |path: &std::path::PathBuf| -> Result<Box<dyn Source>, RunError> {
                Ok(Box::new(FileSource::open(path, timestamp_field.clone())?.with_bad_timestamps(on_bad_timestamp.clone())))
            };
            match path {
                Some(path) => open(path)?,
                None => Box::new(SplitSource::new(paths.iter().map(open).collect::<Result<_, _>>()?)),
            }
        }
        SourceSpec::Generator { count, keys, seed, start_time, interval_ms } => {
            let start = crate::connectors::parse_rfc3339_millis(start_time).unwrap_or(0);
            Box::new(GeneratorSource::new(*count, *keys, *seed, start, *interval_ms))
        }
    })
}

fn open_sink(spec: &SinkSpec) -> Result<Box<dyn Sink>, RunError> {
    Ok(match spec {
        SinkSpec::File { path } => Box::new(FileSink::create(path)?),
        SinkSpec::Stdout {} => Box::new(StdoutSink::new()),
        SinkSpec::Discard {} => Box::new(DiscardSink),
    })
}

/// The sinks of the declared side outputs.
struct SideOutputs {
    sinks: BTreeMap<String, Box<dyn Sink>>,
    warned: Vec<String>,
}

impl SideOutputs {
    fn open(specs: &BTreeMap<String, SinkSpec>) -> Result<Self, RunError> {
        let sinks = specs.iter().map(|(name, spec)| Ok((name.clone(), open_sink(spec)?))).collect::<Result<_, RunError>>()?;
        Ok(Self { sinks, warned: Vec::new() })
    }

    /// Write each event to its side output's sink, or count it as dropped.
    fn route(&mut self, events: Vec<(String, Event)>, report: &mut SinkReport) -> Result<(), RunError> {
        for (name, event) in events {
            match self.sinks.get_mut(&name) {
                Some(sink) => {
                    sink.write(std::slice::from_ref(&event))?;
                    report.side_written += 1;
                }
                None => {
                    if !self.warned.contains(&name) {
                        tracing::warn!(side_output = %name, "dropping events sent to a side output the spec does not declare");
                        self.warned.push(name);
                    }
                    report.side_dropped += 1;
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RunError> {
        self.sinks.values_mut().try_for_each(|sink| sink.flush().map_err(RunError::from))
    }
}
