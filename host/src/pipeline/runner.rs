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
//!
//! This module is the outline; each part has its own: [`load`](super::load)
//! (functions and plan), [`restore`](super::restore) (where a run starts),
//! [`source_task`](super::source_task), [`subtask`](super::subtask) and
//! [`sink_task`](super::sink_task).

use std::sync::mpsc::{channel, sync_channel};
use std::time::Instant;

use super::load::{prepare, Prepared};
use super::lock::PipelineLock;
use super::messages::{SinkMessage, SubtaskMessage, CHANNEL_BATCHES};
use super::operator::{FunctionCode, KeyedOperator};
use super::restore::{cached_backends, prepare_state};
use super::sink_task::{open_sinks, SinkTask};
use super::source_task::{SourceLinks, SourceTask};
use super::spec::PipelineSpec;
use super::subtask::Subtask;
use super::thread::{join, spawn};
use crate::checkpoint::{
    Ack, CheckpointSettings, ControlDir, Coordinator, CoordinatorConfig, SnapshotKind, Trigger,
};
use crate::config;
use crate::connectors::open_source;
use crate::runtime::KeyFunctionInstance;

pub use super::error::RunError;
pub use super::load::check;
pub use super::options::{ProgressFn, RestoreFrom, RunOptions};
pub use super::restore::checkpoint_storage;
pub use super::summary::{OperatorCounts, RunSummary};

/// Run `spec` to completion (bounded sources) or until asked to stop, and
/// report what happened.
pub fn run(spec: &PipelineSpec, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let _span = tracing::info_span!("pipeline", name = %spec.name).entered();
    // Before anything of the pipeline's is touched; held until the run ends.
    let _lock = PipelineLock::acquire(&options.data_dir, &spec.name, options.served)?;
    let Prepared { settings, kafka_exactly_once, key_function, plan, env } =
        prepare(spec, &options.data_dir, &options.natives)?;
    let keyer = match &key_function {
        FunctionCode::Wasm(function) => {
            let name = format!("{} (key)", function.label);
            KeyFunctionInstance::new(function, &name, env.ctx(&name, None)?)?
        }
        FunctionCode::Native(native) => KeyFunctionInstance::native(
            native.key().ok_or_else(|| RunError::Deploy("not a key function".into()))?,
            "key",
        ),
    };
    // Transient failures (a broker outage) are retried for as long as a
    // checkpoint may take.
    let retry_budget = CheckpointSettings::retry_budget(settings.as_ref());
    let mut opened = open_source(&spec.source, &spec.name)?;
    opened.set_retry_budget(retry_budget);
    let mut source = SourceTask::new(spec, opened, keyer, &env, &plan);
    tracing::debug!(elapsed = ?started.elapsed(), "functions loaded, source open");
    let parallelism = usize::from(spec.parallelism);
    let start = prepare_state(spec, options, settings.as_ref(), kafka_exactly_once.as_ref())?;
    tracing::debug!(elapsed = ?started.elapsed(), "state ready");
    if let Some(snapshot) = &start.snapshot {
        source.resume(snapshot)?;
    }

    let (sink_tx, sink_rx) = sync_channel::<SinkMessage>(CHANNEL_BATCHES * parallelism);
    let (ack_tx, ack_rx) = channel::<Ack>();
    let (trigger_tx, trigger_rx) = channel::<Trigger>();
    let metrics = &options.handle.metrics;
    metrics.set_restored_from(start.snapshot.as_ref().map(|s| (s.metadata.kind, s.metadata.id)));
    let sink_state = start.snapshot.as_ref().map(|s| &s.metadata.sink);
    let (sink, side_outputs) = open_sinks(spec, settings.is_some(), sink_state, retry_budget)?;
    let sink_task = SinkTask {
        sink,
        side_outputs,
        inputs: parallelism + 1,
        first_epoch: start.first_id,
        exactly_once: settings.is_some(),
        committed: start.committed,
        delay: options.sink_delay,
        handle: options.handle.clone(),
        acks: ack_tx.clone(),
    };
    let sink_thread = spawn("sink", move || sink_task.run(sink_rx))?;

    let control = ControlDir::new(config::control_dir(&options.data_dir, &spec.name));
    control
        .claim()
        .map_err(|source| RunError::Io { doing: "cannot write the control directory", source })?;
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
    let backends =
        cached_backends(start.backends, &start.local_checkpoints, settings.as_ref(), cache_bytes)?;
    let mut subtask_txs = Vec::new();
    let mut subtask_threads = Vec::new();
    let subtask_counts = metrics.start_subtasks(parallelism);
    for ((index, backend), counts) in backends.into_iter().enumerate().zip(subtask_counts) {
        let (tx, rx) = sync_channel::<SubtaskMessage>(CHANNEL_BATCHES);
        let subtask = Subtask {
            index,
            input: rx,
            sink: sink_tx.clone(),
            acks: ack_tx.clone(),
            local_checkpoints: start.local_checkpoints.clone(),
            counts,
        };
        let (plan, env) = (plan.clone(), env.clone());
        let shutdown = ack_tx.clone();
        subtask_threads.push(spawn(&format!("subtask-{index}"), move || {
            let result = KeyedOperator::new(&plan, index, backend, &env)
                .and_then(|operator| subtask.run(operator));
            if result.is_err() {
                // The coordinator stops waiting for this subtask's acks (a
                // source already at its end would otherwise only notice at
                // the checkpoint timeout).
                let _ = shutdown.send(Ack::Shutdown);
            }
            result
        })?);
        subtask_txs.push(tx);
    }

    let links = SourceLinks {
        subtasks: subtask_txs,
        sink: sink_tx,
        triggers: trigger_rx,
        acks: ack_tx.clone(),
        metrics,
    };
    tracing::debug!(elapsed = ?started.elapsed(), "pipeline started");
    let source_result = source.run(&links, options.progress.as_ref());
    if source_result.is_err() {
        let _ = ack_tx.send(Ack::Shutdown);
    }
    drop((links, ack_tx));
    let mut errors: Vec<RunError> = Vec::new();
    let stopped = source_result.unwrap_or_else(|e| {
        errors.push(e);
        false
    });
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
