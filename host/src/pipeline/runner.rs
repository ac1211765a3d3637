//! Running a pipeline in this process: source → key function → group by
//! key → process function (with RocksDB state) → sink, one batch at a time.
//!
//! Everything runs on the calling thread with parallelism 1; the batch is
//! the unit that crosses the Wasm boundary, so each function is called once
//! per batch, not once per event.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::spec::{PipelineSpec, SinkSpec, SourceSpec};
use crate::config;
use crate::connectors::{ConnectorError, FileSink, FileSource, GeneratorSource, Sink, Source, StdoutSink};
use crate::runtime::bindings::weir::function::types::KeyedEvents;
use crate::runtime::{new_engine, CallError, FunctionLoader, HostCtx, KeyFunctionInstance, LoadError, LoadedFunction, ProcessFunctionInstance, Role};
use crate::state::{RocksDbBackend, StateError};
use crate::Event;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A function file could not be read.
    #[error("cannot read function {path}: {source}")]
    ReadFunction {
        /// The `.wasm` file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A function could not be loaded for its role.
    #[error("{path}: {source}")]
    Load {
        /// The `.wasm` file.
        path: PathBuf,
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
    /// Preparing the state directory failed.
    #[error("state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The wasmtime engine could not be set up.
    #[error("wasm engine: {0}")]
    Engine(String),
}

/// How to run a pipeline.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The host's data directory (state, compiled-code cache).
    pub data_dir: PathBuf,
    /// Start from empty state even if the spec does not say `fresh: true`.
    pub fresh: bool,
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
    /// Batches passed to the functions.
    pub batches: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

/// Run `spec` to completion (bounded sources) and report what happened.
pub fn run(spec: &PipelineSpec, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let _span = tracing::info_span!("pipeline", name = %spec.name).entered();
    let engine = new_engine(Default::default()).map_err(|e| RunError::Engine(format!("{e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(config::component_cache_dir(&options.data_dir))).map_err(|e| RunError::Engine(e.to_string()))?;
    let key_function = load(&loader, &spec.key.wasm, Role::Key)?;
    let process_function = load(&loader, &spec.process.wasm, Role::Process)?;

    let backend = open_state(&options.data_dir, &spec.name, spec.fresh || options.fresh)?;
    let mut keyer = KeyFunctionInstance::new(&key_function, "key")?;
    let ctx = HostCtx::new("process", Some(Box::new(backend)), spec.max_parallelism);
    let mut processor = ProcessFunctionInstance::new(&process_function, "process", ctx)?;
    let mut source = open_source(&spec.source)?;
    let mut sink = open_sink(&spec.sink)?;
    let mut side_sinks = SideOutputs::open(&spec.side_outputs)?;

    let mut summary = RunSummary::default();
    let mut events: Vec<Event> = Vec::with_capacity(spec.batch_size);
    let mut grouper = KeyGrouper::default();
    loop {
        let more = source.next_batch(spec.batch_size, &mut events)?;
        if !events.is_empty() {
            summary.records_in += events.len() as u64;
            summary.batches += 1;
            let keys = keyer.extract_keys(&events)?;
            let batch = grouper.group(events.drain(..), keys);
            processor.process(batch)?;
            let ctx = processor.ctx();
            summary.records_out += ctx.outputs.len() as u64;
            side_sinks.route(ctx.side_outputs.drain(..), &mut summary)?;
            sink.write(&ctx.outputs)?;
            ctx.outputs.clear();
        }
        if !more {
            break;
        }
    }
    sink.flush()?;
    side_sinks.flush()?;
    if let Some(backend) = processor.ctx().backend_mut() {
        backend.flush()?;
    }
    summary.elapsed = started.elapsed();
    tracing::info!(records_in = summary.records_in, records_out = summary.records_out, "pipeline finished");
    Ok(summary)
}

fn load(loader: &FunctionLoader, path: &Path, role: Role) -> Result<LoadedFunction, RunError> {
    let bytes = std::fs::read(path).map_err(|source| RunError::ReadFunction { path: path.to_path_buf(), source })?;
    let function = loader.load(&bytes).and_then(|f| f.require(role).map(|()| f));
    function.map_err(|source| RunError::Load { path: path.to_path_buf(), source })
}

fn open_state(data_dir: &Path, pipeline: &str, fresh: bool) -> Result<RocksDbBackend, RunError> {
    let dir = config::pipeline_state_dir(data_dir, pipeline).join("subtask-0");
    let io = |source| RunError::StateDir { path: dir.clone(), source };
    if fresh && dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io)?;
    }
    std::fs::create_dir_all(&dir).map_err(io)?;
    Ok(RocksDbBackend::open(&dir)?)
}

fn open_source(spec: &SourceSpec) -> Result<Box<dyn Source>, RunError> {
    Ok(match spec {
        SourceSpec::File { path, timestamp_field } => Box::new(FileSource::open(path, timestamp_field.clone())?),
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
    fn route(&mut self, events: impl Iterator<Item = (String, Event)>, summary: &mut RunSummary) -> Result<(), RunError> {
        for (name, event) in events {
            match self.sinks.get_mut(&name) {
                Some(sink) => {
                    sink.write(std::slice::from_ref(&event))?;
                    summary.side_outputs_written += 1;
                }
                None => {
                    if !self.warned.contains(&name) {
                        tracing::warn!(side_output = %name, "dropping events sent to a side output the spec does not declare");
                        self.warned.push(name);
                    }
                    summary.side_outputs_dropped += 1;
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RunError> {
        self.sinks.values_mut().try_for_each(|sink| sink.flush().map_err(RunError::from))
    }
}

/// Groups a batch by key, keeping keys in order of first appearance and
/// each key's events in arrival order. Reuses its allocations.
#[derive(Default)]
struct KeyGrouper {
    index: HashMap<Vec<u8>, usize>,
    groups: Vec<KeyedEvents>,
}

impl KeyGrouper {
    fn group(&mut self, events: impl Iterator<Item = Event>, keys: Vec<Vec<u8>>) -> &[KeyedEvents] {
        self.index.clear();
        self.groups.clear();
        for (event, key) in events.zip(keys) {
            match self.index.get(&key) {
                Some(&i) => self.groups[i].events.push(event),
                None => {
                    self.index.insert(key.clone(), self.groups.len());
                    self.groups.push(KeyedEvents { key, events: vec![event] });
                }
            }
        }
        &self.groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_first_appearance_and_arrival_order() {
        let event = |v: &str| Event { key: None, value: v.as_bytes().to_vec(), timestamp: 0, headers: vec![] };
        let events = vec![event("a1"), event("b1"), event("a2"), event("c1"), event("b2")];
        let keys = ["a", "b", "a", "c", "b"].iter().map(|k| k.as_bytes().to_vec()).collect();
        let mut grouper = KeyGrouper::default();
        let groups = grouper.group(events.into_iter(), keys);
        let shape: Vec<(String, Vec<String>)> = groups
            .iter()
            .map(|g| (String::from_utf8(g.key.clone()).unwrap(), g.events.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect()))
            .collect();
        assert_eq!(shape, vec![
            ("a".into(), vec!["a1".into(), "a2".into()]),
            ("b".into(), vec!["b1".into(), "b2".into()]),
            ("c".into(), vec!["c1".into()]),
        ]);
    }
}
