//! A source task (on its own thread): read the source, route each batch
//! (keyed to the subtasks of the stages it feeds, through the transforms
//! chained into it, to sinks; see [`Router`]), advance watermarks per split
//! (and say when every split is idle), and inject barriers when the
//! checkpoint coordinator asks, recording the source's position (and
//! watermarks) in the snapshot.
//!
//! Batches are cut adaptively: a batch goes on when it is full, or when
//! its oldest event has waited the pipeline's `batch_linger`, so a high
//! rate keeps full batches (cheap Wasm calls) and a low rate waits at most
//! the linger. Held events go on before any barrier (the source's position
//! is past them) and before any watermark (it may not overtake them).
//!
//! Its time is idle while the source waits for input — a read that found
//! nothing, and the waits a source reports of reads that found something
//! ([`Source::take_waited`]: a paced generator's sleep, a Kafka fetch's
//! wait for a first record) — backpressured while the router waits for
//! room downstream, and busy otherwise.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::error::RunError;
use super::messages::SubtaskMessage;
use super::options::ProgressFn;
use super::router::Router;
use crate::checkpoint::{Ack, LocatedSnapshot, SnapshotKind, Trigger};
use crate::connectors::Source;
use crate::observe::live::{LiveCounts, LiveMetrics, Stopwatch};
use crate::runtime::packed::{Emitted, PackedEvents};
use crate::specification::PipelineSpec;
use crate::state::SnapshotForm;
use crate::time::{SplitWatermarks, WatermarkSnapshot};

/// What the source records in a snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SourceState {
    position: serde_json::Value,
    #[serde(default)]
    watermarks: Option<WatermarkSnapshot>,
}

/// A source of a run: the source and the watermarks per split.
pub(crate) struct SourceTask {
    /// Events read per call.
    batch_size: usize,
    /// How long a batch that is not full may wait for more events.
    linger: Duration,
    source: Box<dyn Source>,
    watermarks: Option<SplitWatermarks>,
    /// The watermark the restored snapshot was taken at.
    resumed_watermark: Option<i64>,
}

/// The source task's channels and counters.
pub(crate) struct SourceLinks<'a> {
    /// Where its events go.
    pub(crate) router: Router<'a>,
    /// Snapshots the coordinator asks for.
    pub(crate) triggers: Receiver<Trigger>,
    /// To the coordinator.
    pub(crate) acks: Sender<Ack>,
    /// The run's counters.
    pub(crate) metrics: &'a LiveMetrics,
    /// The source's index among the pipeline's.
    pub(crate) source: usize,
    /// The source task's own counters.
    pub(crate) counts: std::sync::Arc<LiveCounts>,
}

impl SourceTask {
    /// A source of `spec`, reading `source`.
    pub(crate) fn new(spec: &PipelineSpec, source: Box<dyn Source>) -> Self {
        let watermarks = spec.watermark.as_ref().and_then(|w| {
            let idle = w.idle_timeout;
            w.delay_ms()
                .map(|delay| SplitWatermarks::new(source.splits(), delay, idle, Instant::now()))
        });
        Self {
            batch_size: spec.batch_size,
            linger: spec.batch_linger,
            source,
            watermarks,
            resumed_watermark: None,
        }
    }

    /// Seek the source to where `states` (the readers' states of its node
    /// in `snapshot`, by name) recorded it, and take up its event time: the
    /// splits' of state `own` (the snapshot was taken with the same
    /// readers), else the least watermark the readers had emitted.
    pub(crate) fn resume(
        &mut self,
        snapshot: &LocatedSnapshot,
        states: &[(String, &serde_json::Value)],
        own: Option<usize>,
    ) -> Result<(), RunError> {
        let resume = |message: String| RunError::Resume { id: snapshot.metadata.id, message };
        let states: Vec<SourceState> = states
            .iter()
            .map(|(name, state)| {
                serde_json::from_value((*state).clone())
                    .map_err(|e| resume(format!("state of source {name}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let positions: Vec<serde_json::Value> = states.iter().map(|s| s.position.clone()).collect();
        self.source.seek_merged(&positions).map_err(|e| resume(e.to_string()))?;
        let Some(watermarks) = &mut self.watermarks else { return Ok(()) };
        match own.and_then(|i| states[i].watermarks.as_ref()) {
            Some(saved) => {
                self.resumed_watermark = watermarks.restore(saved, &self.source.split_names())
            }
            None => {
                let emitted: Option<Vec<i64>> =
                    states.iter().map(|s| s.watermarks.as_ref().map(|w| w.emitted)).collect();
                self.resumed_watermark =
                    emitted.and_then(|e| e.into_iter().min()).filter(|&w| w > i64::MIN);
            }
        }
        Ok(())
    }

    /// Read the source and route each batch; inject barriers when the
    /// coordinator asks. Returns whether the run was stopped (rather than
    /// reaching the end of its input); dropping `links` afterwards tells
    /// everything downstream the input ended.
    pub(crate) fn run(
        self,
        links: &mut SourceLinks<'_>,
        progress: Option<&ProgressFn>,
    ) -> Result<bool, RunError> {
        let Self { batch_size, linger, mut source, mut watermarks, resumed_watermark } = self;
        let source = source.as_mut();
        let mut events = PackedEvents::default();
        // When the oldest event of `events` was read.
        let mut held_since: Option<Instant> = None;
        if let Some(watermark) = resumed_watermark {
            // Operators continue from the watermark the snapshot was taken at.
            links.broadcast_watermark(watermark)?;
        }
        let mut idle = false;
        // A source reporting its own watermarks (a cluster task's exchange
        // input) is not judged by its events' timestamps.
        let reports = source.reports_watermarks();
        let mut reported = Vec::new();
        let mut splits_reported: Option<Instant> = None;
        loop {
            match links.triggers.try_recv() {
                Ok(trigger) => {
                    // The position recorded is past the held events.
                    links.emit(&mut events)?;
                    held_since = None;
                    if trigger.stop {
                        // Nothing may be emitted after the stop's barrier.
                        links.router.broadcast(|| SubtaskMessage::End { drained: false })?;
                    }
                    links.inject_barrier(trigger, source, watermarks.as_ref())?;
                    if trigger.stop {
                        links
                            .metrics
                            .dropped_bad_timestamps
                            .fetch_add(source.dropped(), Ordering::Relaxed);
                        links.serve_remaining_triggers(source, watermarks.as_ref())?;
                        return Ok(true);
                    }
                }
                Err(TryRecvError::Empty) => {}
                // The coordinator failed; its error is the one reported.
                Err(TryRecvError::Disconnected) => return Err(RunError::Stopped),
            }
            source.set_max_wait(held_since.map(|since| linger.saturating_sub(since.elapsed())));
            let reading = Stopwatch::start();
            let before = events.len();
            let polled = source.next_packed(batch_size - before, &mut events)?;
            let waited = source.take_waited();
            if events.len() == before {
                // A poll that found nothing waited for input.
                links.counts.add_idle(reading.elapsed());
            } else if !waited.is_zero() {
                // One that found some after waiting (a paced source's sleep
                // until they were due, a fetch waiting for a first record)
                // waited for that long: idle, not busy. Capped by the
                // stopwatch, which measures nothing when timing is off.
                links.counts.add_idle(waited.min(reading.elapsed()));
            }
            let now = Instant::now();
            let rejected = source.take_rejected();
            if !rejected.is_empty() {
                links.router.emit_side(rejected)?;
            }
            if events.len() > before {
                if let Some(watermarks) = watermarks.as_mut().filter(|_| !reports) {
                    for &timestamp in &events.timestamps()[before..] {
                        watermarks.observe(polled.split, timestamp, now);
                    }
                }
                idle = false;
                held_since.get_or_insert(now);
                links.metrics.read_at(now);
            }
            let due = events.len() >= batch_size
                || !polled.more
                || held_since.is_some_and(|since| now.duration_since(since) >= linger);
            if due && !events.is_empty() {
                links.emit(&mut events)?;
                held_since = None;
            }
            source.take_watermarks(&mut reported);
            for (split, mark) in reported.drain(..) {
                if let Some(watermarks) = watermarks.as_mut() {
                    watermarks.announce(split, mark, now);
                }
            }
            if source.inputs_ended() {
                // Read to its producers' ends: a drained stop may follow.
                links.counts.set_inputs_ended();
            }
            // While events are held, event time waits for them.
            if let Some(watermarks) = watermarks.as_mut() {
                if polled.split_finished {
                    watermarks.finish(polled.split);
                }
                if events.is_empty() {
                    if let Some(watermark) = watermarks.advance(now) {
                        links.broadcast_watermark(watermark)?;
                    }
                    if !idle && watermarks.all_idle(now) {
                        idle = true;
                        links.router.broadcast(|| SubtaskMessage::Idle)?;
                    }
                }
            }
            if splits_reported.is_none_or(|at| now.duration_since(at) >= SPLITS_EVERY) {
                splits_reported = Some(now);
                links.counts.set_splits(split_metrics(source, watermarks.as_ref()));
            }
            if let (Some(progress), Some((done, total))) = (progress, source.progress()) {
                progress(done, total);
            }
            if !polled.more {
                links.metrics.dropped_bad_timestamps.fetch_add(source.dropped(), Ordering::Relaxed);
                // A bounded source is exhausted: event time has ended, and a
                // final checkpoint commits the rest of the output.
                links.broadcast_watermark(i64::MAX)?;
                // Processing time ends too: pending timers fire before the
                // final barrier, and none after it.
                links.router.broadcast(|| SubtaskMessage::End { drained: true })?;
                let _ = links.acks.send(Ack::SourceFinished);
                links.serve_remaining_triggers(source, watermarks.as_ref())?;
                return Ok(false);
            }
        }
    }
}

/// How often a source reports its splits' watermarks and lag.
const SPLITS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Each split of `source`: its name, watermark and lag.
fn split_metrics(
    source: &dyn Source,
    watermarks: Option<&SplitWatermarks>,
) -> Vec<crate::observe::sampling::SplitMetrics> {
    let marks = watermarks.map(SplitWatermarks::split_watermarks).unwrap_or_default();
    let lag = source.lag();
    source
        .split_names()
        .into_iter()
        .enumerate()
        .map(|(i, split)| crate::observe::sampling::SplitMetrics {
            split,
            watermark: marks.get(i).copied().flatten(),
            lag: lag.get(i).copied().flatten(),
        })
        .collect()
}

impl SourceLinks<'_> {
    /// Hand the held `events` on as one batch (nothing if there are none).
    fn emit(&mut self, events: &mut PackedEvents) -> Result<(), RunError> {
        if events.is_empty() {
            return Ok(());
        }
        self.counts.add_out(events.len());
        let next = events.with_capacity_of();
        let batch = std::mem::replace(events, next);
        self.router.emit(None, Emitted::Packed(batch))?;
        self.router.flush()
    }

    /// Event time has reached `watermark`: tell every subtask downstream.
    fn broadcast_watermark(&mut self, watermark: i64) -> Result<(), RunError> {
        self.metrics.set_watermark(self.source, watermark);
        self.counts.set_watermark(watermark);
        self.router.broadcast(|| SubtaskMessage::Watermark(watermark))
    }

    /// Record the source's state and send barrier `trigger.id` downstream.
    fn inject_barrier(
        &mut self,
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
        let state = SourceState {
            position,
            watermarks: watermarks.map(|w| w.snapshot(source.split_names())),
        };
        let state = serde_json::to_value(state).map_err(|source| RunError::SnapshotState {
            what: "cannot encode the source state",
            source,
        })?;
        let _ = self.acks.send(Ack::Source { id: trigger.id, source: self.source, state });
        // Savepoints are encoded from a database; checkpoints may be changelogs.
        let form = if trigger.kind == SnapshotKind::Savepoint {
            SnapshotForm::Database
        } else {
            SnapshotForm::Chained
        };
        self.router.barrier(trigger.id, form)
    }

    /// After the input ended or a stop: take part in the snapshots the
    /// coordinator still asks for, until it is done.
    fn serve_remaining_triggers(
        &mut self,
        source: &mut dyn Source,
        watermarks: Option<&SplitWatermarks>,
    ) -> Result<(), RunError> {
        while let Ok(trigger) = self.triggers.recv() {
            self.inject_barrier(trigger, source, watermarks)?;
        }
        Ok(())
    }
}
