//! The source task (on the runner's own thread): read the source, key each
//! batch and route its events to their subtasks, advance watermarks, and
//! inject barriers when the checkpoint coordinator asks, recording the
//! source's position (and watermarks) in the snapshot.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError};
use std::time::Instant;

use super::error::RunError;
use super::failures;
use super::live::LiveMetrics;
use super::messages::{SinkMessage, SubtaskMessage};
use super::operator::{FunctionEnv, OperatorPlan, RoutedBatch};
use super::options::ProgressFn;
use super::spec::PipelineSpec;
use crate::checkpoint::{Ack, LocatedSnapshot, SnapshotKind, Trigger};
use crate::connectors::Source;
use crate::runtime::KeyFunctionInstance;
use crate::state::{key_group, subtask_for_key_group, SnapshotForm};
use crate::time::{SplitWatermarks, WatermarkSnapshot};
use crate::Event;

/// What the source records in a snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SourceState {
    position: serde_json::Value,
    #[serde(default)]
    watermarks: Option<WatermarkSnapshot>,
}

/// The source side of a run: the source, the key function and the
/// watermarks per split.
pub(crate) struct SourceTask<'a> {
    spec: &'a PipelineSpec,
    source: Box<dyn Source>,
    keyer: KeyFunctionInstance,
    /// The side output of the `dead-letter` failure policy, if chosen.
    dead_letter: Option<&'a str>,
    watermarks: Option<SplitWatermarks>,
    /// The watermark the restored snapshot was taken at.
    resumed_watermark: Option<i64>,
    /// Route events packed (see [`RoutedBatch`]).
    bare: bool,
}

/// The source task's channels and counters.
pub(crate) struct SourceLinks<'a> {
    /// To each subtask.
    pub(crate) subtasks: Vec<SyncSender<SubtaskMessage>>,
    /// To the sink (events the source sets aside, and barriers).
    pub(crate) sink: SyncSender<SinkMessage>,
    /// Snapshots the coordinator asks for.
    pub(crate) triggers: Receiver<Trigger>,
    /// To the coordinator.
    pub(crate) acks: Sender<Ack>,
    /// The run's counters.
    pub(crate) metrics: &'a LiveMetrics,
}

impl<'a> SourceTask<'a> {
    /// The source task of `spec`, reading `source` and keying with `keyer`
    /// for the keyed stage `plan` runs.
    pub(crate) fn new(
        spec: &'a PipelineSpec,
        source: Box<dyn Source>,
        keyer: KeyFunctionInstance,
        env: &'a FunctionEnv,
        plan: &OperatorPlan,
    ) -> Self {
        let watermarks = spec.watermark.as_ref().and_then(|w| {
            let idle = w.idle_timeout;
            w.delay_ms()
                .map(|delay| SplitWatermarks::new(source.splits(), delay, idle, Instant::now()))
        });
        Self {
            spec,
            source,
            keyer,
            dead_letter: env.dead_letter.as_deref(),
            watermarks,
            resumed_watermark: None,
            bare: plan.takes_packed_events(env.dead_letter.is_some()),
        }
    }

    /// Seek the source to where `snapshot` recorded it, and take up its
    /// watermarks.
    pub(crate) fn resume(&mut self, snapshot: &LocatedSnapshot) -> Result<(), RunError> {
        let resume = |message: String| RunError::Resume { id: snapshot.metadata.id, message };
        let state: SourceState = serde_json::from_value(snapshot.metadata.source.clone())
            .map_err(|e| resume(format!("source state: {e}")))?;
        self.source.seek(&state.position).map_err(|e| resume(e.to_string()))?;
        if let (Some(watermarks), Some(saved)) = (&mut self.watermarks, &state.watermarks) {
            self.resumed_watermark = watermarks.restore(saved);
        }
        Ok(())
    }

    /// Read the source, key each batch and route events to their subtasks
    /// (packed if `bare`: see [`RoutedBatch`]); inject barriers when the
    /// coordinator asks. Returns whether the run was stopped (rather than
    /// reaching the end of its input); dropping `links` afterwards tells the
    /// subtasks and the sink the input ended.
    pub(crate) fn run(
        self,
        links: &SourceLinks<'_>,
        progress: Option<&ProgressFn>,
    ) -> Result<bool, RunError> {
        let Self {
            spec,
            mut source,
            mut keyer,
            dead_letter,
            mut watermarks,
            resumed_watermark,
            bare,
        } = self;
        let source = source.as_mut();
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
                    if trigger.stop {
                        // Nothing may be emitted after the stop's barrier.
                        links.broadcast(|| SubtaskMessage::End { drained: false })?;
                    }
                    links.inject_barrier(trigger, source, watermarks.as_ref())?;
                    if trigger.stop {
                        links
                            .metrics
                            .dropped_bad_timestamps
                            .store(source.dropped(), Ordering::Relaxed);
                        links.serve_remaining_triggers(source, watermarks.as_ref())?;
                        return Ok(true);
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
                links.set_aside(rejected)?;
            }
            if !events.is_empty() {
                links.metrics.key.add_in(events.len());
                let keys = match dead_letter {
                    None => keyer.extract_keys(&events)?,
                    Some(output) => {
                        let (keys, letters) =
                            failures::dead_letter_keys(&mut keyer, &mut events, output)?;
                        if !letters.is_empty() {
                            links.set_aside(letters)?;
                        }
                        keys
                    }
                };
                links.metrics.key.add_out(keys.len());
                for (event, key) in events.drain(..).zip(keys.iter()) {
                    if let Some(watermarks) = watermarks.as_mut() {
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
            if let Some(watermarks) = watermarks.as_mut() {
                if polled.split_finished {
                    watermarks.finish(polled.split);
                }
                if let Some(watermark) = watermarks.advance(now) {
                    links.broadcast_watermark(watermark)?;
                }
            }
            if let (Some(progress), Some((done, total))) = (progress, source.progress()) {
                progress(done, total);
            }
            if !polled.more {
                links.metrics.dropped_bad_timestamps.store(source.dropped(), Ordering::Relaxed);
                // A bounded source is exhausted: event time has ended, and a
                // final checkpoint commits the rest of the output.
                links.broadcast_watermark(i64::MAX)?;
                // Processing time ends too: pending timers fire before the
                // final barrier, and none after it.
                links.broadcast(|| SubtaskMessage::End { drained: true })?;
                let _ = links.acks.send(Ack::SourceFinished);
                links.serve_remaining_triggers(source, watermarks.as_ref())?;
                return Ok(false);
            }
        }
    }
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

    /// Send events the source set aside (rejected records, dead letters)
    /// to their side outputs, as the sink's last input.
    fn set_aside(&self, side: Vec<(String, Event)>) -> Result<(), RunError> {
        self.sink
            .send(SinkMessage::Batch { from: self.subtasks.len(), main: Vec::new(), side })
            .map_err(|_| RunError::Stopped)
    }

    /// Record the source's state and send barrier `trigger.id` downstream.
    fn inject_barrier(
        &self,
        trigger: Trigger,
        source: &mut dyn Source,
        watermarks: Option<&SplitWatermarks>,
    ) -> Result<(), RunError> {
        if crate::fault::fails("source-barrier") {
            return Err(RunError::Io {
                doing: "fault injected at source-barrier (WEIR_FAULT)",
                source: std::io::Error::other("the run fails here once"),
            });
        }
        let position = source.position();
        source.on_barrier(&position);
        let state = SourceState { position, watermarks: watermarks.map(SplitWatermarks::snapshot) };
        let state = serde_json::to_value(state).map_err(|source| RunError::SnapshotState {
            what: "cannot encode the source state",
            source,
        })?;
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
