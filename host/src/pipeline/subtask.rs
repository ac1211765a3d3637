//! One keyed subtask (on its own thread): take batches from every input
//! channel (one per upstream producer and input), hand them to its
//! operator and route what it emits ([`Router`]); fire processing-time
//! timers as the clock passes; advance event time to the minimum of its
//! inputs' watermarks (an idle input does not hold it back); snapshot its
//! state once barrier N came from every input (aligned: an input that
//! delivered N is not read again until the others have), ack it and
//! forward the barrier.
//!
//! Processing-time timers stop when every input has ended (`End`, which
//! sources send before their final barrier): at the end of bounded input
//! every pending one fires first; at a stop they stay in the snapshot. So
//! nothing is emitted after the final barrier, where no checkpoint would
//! commit it.

use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Select};

use super::error::RunError;
use super::graph::StageInput;
use super::live::LiveCounts;
use super::messages::SubtaskMessage;
use super::operator::KeyedOperator;
use super::router::Router;
use crate::checkpoint::{Ack, CheckpointError};
use crate::state::SnapshotForm;

/// How often an idle subtask checks for due processing-time timers.
const TIMER_POLL: Duration = Duration::from_millis(50);

/// One input channel and what the subtask knows of it.
pub(crate) struct Input {
    /// The channel.
    pub(crate) channel: Receiver<SubtaskMessage>,
    /// Which input of the operator it feeds.
    pub(crate) role: StageInput,
    open: bool,
    /// Barrier of the checkpoint being aligned arrived: not read until
    /// every input's has.
    blocked: bool,
    watermark: i64,
    idle: bool,
    ended: Option<bool>,
}

impl Input {
    /// `channel`, feeding input `role`.
    pub(crate) fn new(channel: Receiver<SubtaskMessage>, role: StageInput) -> Self {
        Self {
            channel,
            role,
            open: true,
            blocked: false,
            watermark: i64::MIN,
            idle: false,
            ended: None,
        }
    }
}

/// A subtask's channels and where it writes local checkpoints.
pub(crate) struct Subtask {
    /// Its stage's name and its index there, for logs.
    pub(crate) stage: String,
    /// Its index in its stage.
    pub(crate) index: usize,
    /// Its number among every subtask of the pipeline (its snapshot slot).
    pub(crate) slot: usize,
    /// Its inputs.
    pub(crate) inputs: Vec<Input>,
    /// To the checkpoint coordinator.
    pub(crate) acks: Sender<Ack>,
    /// Where its snapshots go before the coordinator uploads them.
    pub(crate) local_checkpoints: PathBuf,
    /// Its live counters.
    pub(crate) counts: Arc<LiveCounts>,
}

impl Subtask {
    /// Run `operator` until every input channel closes, routing its output
    /// through `router`.
    pub(crate) fn run(
        mut self,
        mut operator: KeyedOperator,
        mut router: Router<'_>,
    ) -> Result<(), RunError> {
        let _span =
            tracing::info_span!("subtask", stage = %self.stage, index = self.index).entered();
        // Every input ended (or a stop): no processing-time timer fires.
        let mut ended = false;
        let mut watermark = i64::MIN;
        let mut idle = false;
        let mut aligning: Option<(u64, SnapshotForm)> = None;
        loop {
            let readable: Vec<usize> = (0..self.inputs.len())
                .filter(|&i| self.inputs[i].open && !self.inputs[i].blocked)
                .collect();
            if readable.is_empty() && self.inputs.iter().all(|i| !i.open) {
                break;
            }
            let timers = operator.next_processing_timer().filter(|_| !ended).is_some();
            let received = if readable.is_empty() {
                None
            } else {
                let mut select = Select::new();
                for &i in &readable {
                    select.recv(&self.inputs[i].channel);
                }
                let chosen = if timers {
                    select.select_timeout(TIMER_POLL).ok()
                } else {
                    Some(select.select())
                };
                chosen.map(|operation| {
                    let input = readable[operation.index()];
                    (input, operation.recv(&self.inputs[input].channel))
                })
            };
            match received {
                Some((input, Ok(message))) => match message {
                    SubtaskMessage::Events(batch) => {
                        self.counts.add_in(batch.len());
                        let StageInput::Keyed(side) = self.inputs[input].role else {
                            return Err(RunError::Deploy(
                                "keyed events on a broadcast input".into(),
                            ));
                        };
                        self.inputs[input].idle = false;
                        operator.on_events(side, batch)?;
                    }
                    SubtaskMessage::Broadcast(events) => {
                        self.counts.add_in(events.len());
                        operator.on_broadcast(events)?;
                    }
                    SubtaskMessage::Watermark(mark) => {
                        let slot = &mut self.inputs[input];
                        slot.watermark = slot.watermark.max(mark);
                        slot.idle = false;
                    }
                    SubtaskMessage::Idle => self.inputs[input].idle = true,
                    SubtaskMessage::Barrier(id, form) => {
                        self.inputs[input].blocked = true;
                        aligning = Some((id, form));
                    }
                    SubtaskMessage::End { drained } => self.inputs[input].ended = Some(drained),
                },
                Some((input, Err(_))) => {
                    let slot = &mut self.inputs[input];
                    slot.open = false;
                    slot.ended.get_or_insert(false);
                }
                None => {}
            }
            // Event time: the least watermark of the inputs that are not idle.
            let active = self.inputs.iter().filter(|i| !i.idle && i.open);
            if let Some(least) = active.map(|i| i.watermark).min() {
                if least > watermark {
                    watermark = least;
                    operator.on_watermark(watermark)?;
                    self.forward_outputs(&mut operator, &mut router)?;
                    router.broadcast(|| SubtaskMessage::Watermark(watermark))?;
                    idle = false;
                }
            }
            let all_idle = self.inputs.iter().filter(|i| i.open).all(|i| i.idle)
                && self.inputs.iter().any(|i| i.open);
            if all_idle && !idle {
                router.broadcast(|| SubtaskMessage::Idle)?;
                idle = true;
            }
            if !ended && self.inputs.iter().all(|i| i.ended.is_some()) {
                ended = true;
                if self.inputs.iter().all(|i| i.ended == Some(true)) {
                    operator.end_processing_time()?;
                }
                self.forward_outputs(&mut operator, &mut router)?;
                let drained = self.inputs.iter().all(|i| i.ended == Some(true));
                router.broadcast(|| SubtaskMessage::End { drained })?;
            }
            if let Some((id, form)) = aligning {
                if self.inputs.iter().all(|i| i.blocked || !i.open) {
                    aligning = None;
                    self.snapshot(id, form, ended, &mut operator, &mut router)?;
                    self.inputs.iter_mut().for_each(|i| i.blocked = false);
                }
            }
            if !ended {
                operator.on_processing_time()?;
            }
            self.forward_outputs(&mut operator, &mut router)?;
            operator.relieve()?;
        }
        router.flush()?;
        operator.flush()
    }

    /// Barrier `id` came from every input: snapshot the state, ack, and
    /// forward the barrier.
    fn snapshot(
        &self,
        id: u64,
        form: SnapshotForm,
        ended: bool,
        operator: &mut KeyedOperator,
        router: &mut Router<'_>,
    ) -> Result<(), RunError> {
        // Timers due by now fire before the barrier, and what was emitted
        // before it belongs before it.
        if !ended {
            operator.on_processing_time()?;
        }
        self.forward_outputs(operator, router)?;
        let dir =
            self.local_checkpoints.join(format!("chk-{id}")).join(format!("subtask-{}", self.slot));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(CheckpointError::from)?;
        }
        std::fs::create_dir_all(dir.parent().unwrap_or(&self.local_checkpoints))
            .map_err(CheckpointError::from)?;
        operator.checkpoint(&dir, form)?;
        let _ = self.acks.send(Ack::Subtask { id, index: self.slot, dir });
        router.barrier(id, form)
    }

    /// Route what the operator emitted.
    fn forward_outputs(
        &self,
        operator: &mut KeyedOperator,
        router: &mut Router<'_>,
    ) -> Result<(), RunError> {
        let (main, side, late_dropped) = operator.take_outputs();
        self.counts.add_late_dropped(late_dropped);
        if main.is_empty() && side.is_empty() {
            return Ok(());
        }
        self.counts.add_out(main.len());
        router.emit(None, main)?;
        router.emit_side(side)?;
        router.flush()
    }
}
