//! Running a pipeline in this process: its graph of threads.
//!
//! ```text
//! source threads:  source → chained transforms → key function of each
//!                  keyed stage it feeds → route by key group ──┐ bounded channels
//!                  (+ watermarks per split, broadcast in-band)  │ (events, watermarks,
//! stage subtasks:  keyed operator (process / co-process        │  barriers), one per
//!                  function + timers, windows, a join), own    │  producer and subtask
//!                  Wasm store, own RocksDB + cache; its output │
//!                  routed the same way to later stages ────────┤
//! sink thread:     every sink ◄─────────────────────────────────┘
//! ```
//!
//! Batches, not events, cross threads and the Wasm boundary. Every channel
//! is bounded, so a slow sink slows the subtasks and they slow the
//! sources: nothing is dropped and nothing is buffered without bound. A key
//! always goes to the same subtask of a stage, which handles its events in
//! the order each producer sent them.
//!
//! Checkpoints (see [`crate::checkpoint`]) travel the same channels: the
//! coordinator thread asks every source for snapshot N; each records its
//! positions and sends barrier N behind the events before it; a subtask
//! aligns barrier N over its inputs (an input whose barrier came is not
//! read until every input's has), snapshots its state and forwards it; the
//! sink pre-commits once barrier N came from every producer, and commits
//! when the coordinator says N is complete. The sink tags what each
//! producer sends with that producer's epoch, so it never holds one back.
//!
//! This module is the outline; each part has its own: [`load`](super::load)
//! (functions and plan), [`restore`](super::restore) (where a run starts),
//! [`source_task`](super::source_task), [`subtask`](super::subtask),
//! [`router`](super::router) and [`sink_task`](super::sink_task).

use std::sync::mpsc::{channel, sync_channel};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use super::load::{prepare, CheckedPipeline, FunctionTable};
use super::lock::PipelineLock;
use super::messages::{SinkMessage, SubtaskMessage, CHANNEL_BATCHES};
use super::operator::{KeyedOperator, OperatorPlan};
use super::restore::{cached_backends, prepare_state};
use super::router::{PortsPlan, RoutePlan, Router, RouterLinks};
use super::sink_task::{open_sinks, SinkTask};
use super::source_task::{SourceLinks, SourceTask};
use super::subtask::{Input, Subtask};
use super::thread::{join, spawn};
use crate::checkpoint::{
    Ack, CheckpointError, CheckpointSettings, ControlDir, Coordinator, CoordinatorConfig,
    SnapshotKind, Trigger,
};
use crate::config;
use crate::connectors::{open_source, Cancelled};
use crate::observe::latency::LatencyRecorder;
use crate::observe::live::LiveCounts;
use crate::specification::graph::{Graph, Outputs, Route, StageInput};
use crate::specification::PipelineSpec;

pub use super::error::RunError;
pub use super::options::{ProgressFn, RestoreFrom, RunOptions};
pub use super::restore::checkpoint_storage;
use crate::observe::summary::RunSummary;

/// Run `spec` to completion (bounded sources) or until asked to stop, and
/// report what happened.
pub fn run(spec: &PipelineSpec, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let _span = tracing::info_span!("pipeline", name = %spec.name).entered();
    // Before anything of the pipeline's is touched; held until the run ends.
    let _lock = PipelineLock::acquire(&options.data_dir, &spec.name, options.served)?;
    unless_cancelled(options)?;
    let checked = prepare(spec.clone(), &options.data_dir, &options.natives)?;
    run_locked(checked, options, started)
}

/// Fail a run cancelled while it starts ([`CheckpointError::Cancelled`]),
/// as its coordinator would once running. Asked between the steps of a
/// start (loading functions, opening sources, restoring, fencing and
/// opening sinks, each seconds on a busy host): without it a run cancelled
/// while starting went through every step before it ended, past the
/// bound a stop waits for it.
fn unless_cancelled(options: &RunOptions) -> Result<(), RunError> {
    if options.handle.is_cancelled() {
        return Err(CheckpointError::Cancelled.into());
    }
    Ok(())
}

/// Run a pipeline checked (and its functions loaded) beforehand, as
/// [`run`] does: what a deploy starts after checking it.
pub fn run_checked(checked: CheckedPipeline, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let name = checked.spec.name.clone();
    let _span = tracing::info_span!("pipeline", name = %name).entered();
    let _lock = PipelineLock::acquire(&options.data_dir, &name, options.served)?;
    unless_cancelled(options)?;
    run_locked(checked, options, started)
}

/// Open every source of `graph`: its readers, in the order of the graph's
/// sources.
fn open_sources(
    spec: &PipelineSpec,
    graph: &Graph,
    retry_budget: Duration,
    options: &RunOptions,
) -> Result<Vec<Reader>, RunError> {
    let mut sources = Vec::new();
    for (node, source) in graph.sources.iter().enumerate() {
        unless_cancelled(options)?;
        let opened = open_source(&source.spec, &spec.name)?;
        let count = opened.len();
        for (index, mut reader) in opened.into_iter().enumerate() {
            reader.set_retry_budget(retry_budget);
            let name = reader_name(&source.name, index, count);
            sources.push(Reader { node, name, task: SourceTask::new(spec, reader) });
        }
    }
    Ok(sources)
}

/// The run itself, the pipeline's lock held.
fn run_locked(
    checked: CheckedPipeline,
    options: &RunOptions,
    started: Instant,
) -> Result<RunSummary, RunError> {
    let CheckedPipeline { spec, settings, graph, plans, code, env } = checked;
    let spec = &spec;
    // Transient failures (a broker outage) are retried for as long as a
    // checkpoint may take.
    let retry_budget = CheckpointSettings::retry_budget(settings.as_ref());
    // Opening the sources (Kafka: a client and its metadata) and preparing
    // the state (fencing, the marker, the restore) both wait on brokers or
    // storage: done at once, as a restarted or moved run waits on both.
    let span = tracing::Span::current();
    let (sources, start) = std::thread::scope(|scope| {
        let opening = scope.spawn(|| {
            let _span = span.enter();
            let opened = open_sources(spec, &graph, retry_budget, options);
            tracing::debug!(elapsed = ?started.elapsed(), "sources open");
            opened
        });
        let start = unless_cancelled(options)
            .and_then(|()| prepare_state(spec, &graph, options, settings.as_ref()));
        tracing::debug!(elapsed = ?started.elapsed(), "state ready");
        let sources =
            opening.join().unwrap_or_else(|_| Err(RunError::Panicked("source opening".into())));
        (sources, start)
    });
    let mut sources = sources?;
    let start = start?;
    if let Some(snapshot) = start.snapshot.as_ref().or(start.positions.as_ref()) {
        let recorded = &snapshot.metadata.source;
        for (node, source) in graph.sources.iter().enumerate() {
            let states = recorded_states(recorded, &source.name, graph.sources.len() == 1);
            if states.is_empty() {
                tracing::info!(source = %source.name, "the snapshot holds no position of this source: it starts from the beginning");
                continue;
            }
            let readers: Vec<&mut Reader> = sources.iter_mut().filter(|r| r.node == node).collect();
            // Read as when the snapshot was taken: each reader takes up its
            // own splits' event time.
            let same = states.len() == readers.len();
            for reader in readers {
                let own = states.iter().position(|(name, _)| *name == reader.name);
                reader.task.resume(snapshot, &states, own.filter(|_| same))?;
            }
        }
    }

    let producers = sources.len() + graph.subtasks();
    let (sink_tx, sink_rx) = sync_channel::<SinkMessage>(CHANNEL_BATCHES * graph.subtasks().max(1));
    let (ack_tx, ack_rx) = channel::<Ack>();
    let (trigger_tx, trigger_rx) = channel::<Trigger>();
    let metrics = &options.handle.metrics;
    metrics.set_restored_from(start.snapshot.as_ref().map(|s| (s.metadata.kind, s.metadata.id)));
    let sink_state = start.snapshot.as_ref().map(|s| &s.metadata.sink);
    unless_cancelled(options)?;
    let cancelled: Cancelled = {
        let handle = options.handle.clone();
        Arc::new(move || handle.is_cancelled())
    };
    let sinks = open_sinks(&graph, settings.is_some(), sink_state, retry_budget, &cancelled)?;
    unless_cancelled(options)?;
    let sink_count = sinks.len();
    let sink_task = SinkTask {
        sinks,
        inputs: producers,
        first_epoch: start.first_id,
        exactly_once: settings.is_some(),
        committed: start.committed,
        linger: spec.batch_linger,
        delay: options.sink_delay,
        latency: options.record_latency.then(|| {
            // Exactly-once output is visible when its checkpoint commits.
            let recorder = if settings.is_some() {
                LatencyRecorder::until_commit()
            } else {
                LatencyRecorder::default()
            }
            .after_warm_up(options.latency_warm_up);
            match options.latency_log_every {
                Some(every) => recorder.logging_every(every),
                None => recorder,
            }
        }),
        handle: options.handle.clone(),
        acks: ack_tx.clone(),
    };
    let sink_shutdown = ack_tx.clone();
    let sink_thread = spawn("sink", move || {
        let result = sink_task.run(sink_rx);
        if result.is_err() {
            // As for a failing subtask: the coordinator stops waiting for
            // the sink's acks (a source at its end would otherwise wait
            // for the checkpoint timeout).
            let _ = sink_shutdown.send(Ack::Shutdown);
        }
        result
    })?;

    let control = ControlDir::new(config::control_dir(&options.data_dir, &spec.name));
    control
        .claim()
        .map_err(|source| RunError::Io { doing: "cannot write the control directory", source })?;
    let complete_tx = sink_tx.clone();
    let coordinator = Coordinator::new(
        CoordinatorConfig {
            pipeline: spec.name.clone(),
            cancelled: {
                let handle = options.handle.clone();
                Box::new(move || handle.is_cancelled())
            },
            operators: graph.stage_layouts(),
            sources: sources.iter().map(|r| r.name.clone()).collect(),
            max_parallelism: spec.max_parallelism,
            schedule: settings.clone(),
            local_dir: start.local_checkpoints.clone(),
            control: control.clone(),
            inbox: Some(options.handle.open_requests()),
            on_snapshot: {
                let handle = options.handle.clone();
                Box::new(move |snapshot| handle.metrics.snapshot_completed(snapshot))
            },
            on_failure: {
                let handle = options.handle.clone();
                Box::new(move || {
                    handle
                        .metrics
                        .snapshots_failed
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                })
            },
            on_drain: {
                let handle = options.handle.clone();
                Box::new(move |id| handle.drain_at(id))
            },
            first_id: start.first_id,
            restored_checkpoint: start
                .snapshot
                .as_ref()
                .filter(|s| s.metadata.kind == SnapshotKind::Checkpoint)
                .map(|s| s.metadata.id),
            restored: start.snapshot.is_some(),
            known: start.known,
        },
        start.storage,
        trigger_tx,
        ack_rx,
        Box::new(move |id| complete_tx.send(SinkMessage::Complete(id)).is_ok()),
    );
    let coordinator_thread = spawn("coordinator", move || Ok(coordinator.run()?))?;
    // Every source takes part in every snapshot.
    let mut source_triggers = Vec::new();
    let mut trigger_fanout = Vec::new();
    for _ in &sources {
        let (tx, rx) = channel::<Trigger>();
        trigger_fanout.push(tx);
        source_triggers.push(rx);
    }
    let fanout_thread = spawn("triggers", move || {
        for trigger in trigger_rx {
            trigger_fanout.retain(|tx| tx.send(trigger).is_ok());
        }
        Ok(())
    })?;

    // Channels first (every producer's routes), then the threads.
    let line = spec.operators.is_empty();
    let mut wiring = Wiring::new(&graph, &plans, &code, env.dead_letter.is_some(), line);
    let source_plans: Vec<PortsPlan> = sources
        .iter()
        .map(|r| wiring.ports(&graph.sources[r.node].outputs))
        .collect::<Result<_, _>>()?;
    let mut stage_plans: Vec<Vec<PortsPlan>> = Vec::new();
    for stage in &graph.stages {
        let plans = (0..stage.parallelism)
            .map(|_| wiring.ports(&stage.outputs))
            .collect::<Result<Vec<_>, _>>()?;
        stage_plans.push(plans);
    }
    let mut inputs = wiring.inputs;

    let subtask_counts = metrics.start_stages(
        &graph
            .stages
            .iter()
            .map(|s| (s.name.clone(), usize::from(s.parallelism)))
            .collect::<Vec<_>>(),
    );
    let mut topology = graph.topology();
    for (node, (_, tasks)) in topology.sources.iter_mut().enumerate() {
        *tasks = sources.iter().filter(|r| r.node == node).count();
    }
    let source_counts = metrics.start_sources(topology);
    let mut counts = subtask_counts.into_iter();
    let mut subtask_threads = Vec::new();
    let mut slot = 0;
    let stage_backends = start.backends.into_iter();
    for (((stage, backends), plans), (operator_plan, stage_inputs)) in graph
        .stages
        .iter()
        .zip(stage_backends)
        .zip(stage_plans)
        .zip(plans.iter().zip(inputs.drain(..)))
    {
        let cache_bytes = spec.state_cache_bytes / graph.subtasks().max(1);
        let backends = cached_backends(
            backends,
            slot,
            &start.local_checkpoints,
            settings.as_ref(),
            cache_bytes,
        )?;
        let queries = options.handle.state.open_stage(
            &stage.name,
            &stage.uid,
            usize::from(stage.parallelism),
            env.max_parallelism,
            operator_plan.state_types(),
        );
        for ((((index, backend), ports), channels), queries) in
            backends.into_iter().enumerate().zip(plans).zip(stage_inputs).zip(queries)
        {
            let subtask_counts: Arc<LiveCounts> = counts.next().unwrap_or_default();
            let subtask = Subtask {
                stage: stage.name.clone(),
                index,
                slot,
                inputs: channels,
                acks: ack_tx.clone(),
                local_checkpoints: start.local_checkpoints.clone(),
                counts: subtask_counts.clone(),
                queries: Some(queries),
                language: operator_plan.language(),
            };
            let (plan, env, handle) = (operator_plan.clone(), env.clone(), options.handle.clone());
            let (role, owner) = (stage.role(), format!("{}[{index}]", stage.name));
            let links_sink = sink_tx.clone();
            let from = sources.len() + slot;
            let shutdown = ack_tx.clone();
            subtask_threads.push(spawn(&format!("{}-{index}", stage.name), move || {
                let result =
                    KeyedOperator::new(&plan, role, index, backend, &env).and_then(|operator| {
                        let links = RouterLinks {
                            sink: links_sink,
                            from,
                            sinks: sink_count,
                            metrics: &handle.metrics,
                            counts: subtask_counts,
                        };
                        let router = Router::new(ports, &owner, &env, links)?;
                        subtask.run(operator, router)
                    });
                if result.is_err() {
                    // The coordinator stops waiting for this subtask's acks (a
                    // source already at its end would otherwise only notice at
                    // the checkpoint timeout).
                    let _ = shutdown.send(Ack::Shutdown);
                }
                result
            })?);
            slot += 1;
        }
    }

    tracing::debug!(elapsed = ?started.elapsed(), "pipeline started");
    let mut source_threads = Vec::new();
    for ((index, (Reader { name, task, .. }, ports)), triggers) in
        sources.into_iter().zip(source_plans).enumerate().zip(source_triggers)
    {
        let (env, handle, sink, acks) =
            (env.clone(), options.handle.clone(), sink_tx.clone(), ack_tx.clone());
        let progress = options.progress.clone();
        let counts = source_counts.get(index).cloned().unwrap_or_default();
        source_threads.push(spawn(&format!("source-{name}"), move || {
            let metrics = &handle.metrics;
            let links = RouterLinks {
                sink,
                from: index,
                sinks: sink_count,
                metrics,
                counts: counts.clone(),
            };
            let result = Router::new(ports, &name, &env, links).and_then(|router| {
                let mut links = SourceLinks {
                    router,
                    triggers,
                    acks: acks.clone(),
                    metrics,
                    source: index,
                    counts,
                };
                task.run(&mut links, progress.as_ref())
            });
            if result.is_err() {
                let _ = acks.send(Ack::Shutdown);
            }
            result
        })?);
    }
    drop((sink_tx, ack_tx));
    let mut errors: Vec<RunError> = Vec::new();
    let mut stopped = false;
    for thread in source_threads {
        match join(thread, "source") {
            Ok(was_stopped) => stopped |= was_stopped,
            Err(e) => errors.push(e),
        }
    }
    for thread in subtask_threads {
        errors.extend(join(thread, "subtask").err());
    }
    errors.extend(join(sink_thread, "sink").err());
    let mut snapshots_expired = 0;
    match join(coordinator_thread, "coordinator") {
        Ok(report) => snapshots_expired = report.expired,
        Err(e) => errors.push(e),
    }
    errors.extend(join(fanout_thread, "triggers").err());
    options.handle.close_requests(errors.iter().any(|e| !matches!(e, RunError::Stopped)));
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

/// One source task: a reader of a source node (a node read in parallel
/// has several, each with its share of the input).
struct Reader {
    /// Its source node, by index in the graph.
    node: usize,
    /// Its name in snapshots and thread names: the node's, or
    /// `<node>#<i>` when the node has several readers.
    name: String,
    task: SourceTask,
}

/// The name of reader `index` of `count` of source node `node`.
fn reader_name(node: &str, index: usize, count: usize) -> String {
    if count == 1 {
        node.to_string()
    } else {
        format!("{node}#{index}")
    }
}

/// What a snapshot's `recorded` source states hold for source node
/// `node`, by reader name: the whole of it when the pipeline has one
/// source (`only`) that one reader read, else its entries for `node` and
/// each `node#<i>`. Null entries (no position) are left out.
fn recorded_states<'a>(
    recorded: &'a serde_json::Value,
    node: &str,
    only: bool,
) -> Vec<(String, &'a serde_json::Value)> {
    if only && recorded.get("position").is_some() {
        return vec![(node.to_string(), recorded)];
    }
    let Some(entries) = recorded.as_object() else { return Vec::new() };
    let of_node = |name: &str| {
        name == node
            || name
                .strip_prefix(node)
                .and_then(|rest| rest.strip_prefix('#'))
                .is_some_and(|index| index.parse::<usize>().is_ok())
    };
    entries
        .iter()
        .filter(|(name, state)| of_node(name) && !state.is_null())
        .map(|(name, state)| (name.clone(), state))
        .collect()
}

/// Builds every producer's routes, making a channel to each subtask a
/// route reaches and keeping its receiving end for that subtask.
struct Wiring<'a> {
    graph: &'a Graph,
    plans: &'a [OperatorPlan],
    code: &'a FunctionTable,
    dead_letter: bool,
    /// A line spec (its functions keep their short labels).
    line: bool,
    /// Per stage, per subtask: its input channels.
    inputs: Vec<Vec<Vec<Input>>>,
}

impl<'a> Wiring<'a> {
    fn new(
        graph: &'a Graph,
        plans: &'a [OperatorPlan],
        code: &'a FunctionTable,
        dead_letter: bool,
        line: bool,
    ) -> Self {
        let inputs =
            graph.stages.iter().map(|s| (0..s.parallelism).map(|_| Vec::new()).collect()).collect();
        Self { graph, plans, code, dead_letter, line, inputs }
    }

    /// One producer's routes for `outputs`.
    fn ports(&mut self, outputs: &Outputs) -> Result<PortsPlan, RunError> {
        let mut plan = PortsPlan::default();
        for (port, routes) in &outputs.ports {
            let mut planned = Vec::new();
            for route in routes {
                planned.push(match route {
                    Route::Sink(index) => RoutePlan::Sink(*index),
                    Route::KeyedSink { sink, key } => {
                        RoutePlan::KeyedSink { key: self.code.get(key)?, sink: *sink }
                    }
                    Route::Stage { stage, input, key } => {
                        let mut subtasks = Vec::new();
                        for inputs in &mut self.inputs[*stage] {
                            let (tx, rx) = bounded::<SubtaskMessage>(CHANNEL_BATCHES);
                            inputs.push(Input::new(rx, *input));
                            subtasks.push(tx);
                        }
                        match (input, key) {
                            (StageInput::Keyed(side), Some(key)) => {
                                let node = &self.graph.stages[*stage];
                                RoutePlan::Keyed {
                                    key: self.code.get(key)?,
                                    name: if self.line { String::new() } else { node.name.clone() },
                                    bare: *side == 0
                                        && node.keyed_inputs == 1
                                        && self.plans[*stage].takes_packed_events(self.dead_letter),
                                    subtasks,
                                }
                            }
                            _ => RoutePlan::Broadcast(subtasks),
                        }
                    }
                    Route::Transform { name, function, outputs } => RoutePlan::Transform {
                        code: self.code.get(function)?,
                        name: name.clone(),
                        outputs: self.ports(outputs)?,
                    },
                });
            }
            plan.ports.insert(port.clone(), planned);
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(states: &[(String, &serde_json::Value)]) -> Vec<String> {
        states.iter().map(|(name, _)| name.clone()).collect()
    }

    #[test]
    fn a_source_finds_the_states_of_every_reader_it_had() {
        let one = json!({"position": {"offsets": {}}});
        // One source, one reader: the state itself.
        assert_eq!(names(&recorded_states(&one, "source", true)), ["source"]);
        // One source, three readers.
        let three = json!({"source#0": one, "source#1": one, "source#2": one});
        assert_eq!(
            names(&recorded_states(&three, "source", true)),
            ["source#0", "source#1", "source#2"]
        );
        // Several sources: each its own, and not a source named alike.
        let graph =
            json!({"orders": one, "orders#0": one, "orders-2": one, "orders#x": one, "refs": null});
        assert_eq!(names(&recorded_states(&graph, "orders", false)), ["orders", "orders#0"]);
        assert!(recorded_states(&graph, "refs", false).is_empty(), "no position");
        assert!(recorded_states(&json!(null), "source", true).is_empty());
        assert_eq!(reader_name("orders", 0, 1), "orders");
        assert_eq!(reader_name("orders", 1, 3), "orders#1");
    }
}
