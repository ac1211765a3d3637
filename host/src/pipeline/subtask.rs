//! One keyed subtask (on its own thread): hand each batch and watermark to
//! its operator and forward what it emits to the sink; fire
//! processing-time timers as the clock passes; snapshot its state at each
//! barrier, ack it and forward the barrier.
//!
//! Processing-time timers stop when the run ends (`End`, which the source
//! sends before the final barrier): at the end of a bounded input every
//! pending one fires first; at a stop they stay in the snapshot. So nothing
//! is emitted after the final barrier, where no checkpoint would commit it.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use super::error::RunError;
use super::live::LiveCounts;
use super::messages::{SinkMessage, SubtaskMessage};
use super::operator::KeyedOperator;
use crate::checkpoint::{Ack, CheckpointError};

/// How often an idle subtask checks for due processing-time timers.
const TIMER_POLL: Duration = Duration::from_millis(50);

/// A subtask's channels and where it writes local checkpoints.
pub(crate) struct Subtask {
    /// Which subtask (its input number at the sink).
    pub(crate) index: usize,
    /// From the source.
    pub(crate) input: Receiver<SubtaskMessage>,
    /// To the sink.
    pub(crate) sink: SyncSender<SinkMessage>,
    /// To the checkpoint coordinator.
    pub(crate) acks: Sender<Ack>,
    /// Where its snapshots go before the coordinator uploads them.
    pub(crate) local_checkpoints: PathBuf,
    /// Its live counters.
    pub(crate) counts: Arc<LiveCounts>,
}

impl Subtask {
    /// Run `operator` until the source's channel closes.
    pub(crate) fn run(self, mut operator: KeyedOperator) -> Result<(), RunError> {
        let _span = tracing::info_span!("subtask", index = self.index).entered();
        // After the input's end (or a stop): no processing-time timer fires.
        let mut ended = false;
        loop {
            let message = match operator.next_processing_timer().filter(|_| !ended) {
                Some(_) => match self.input.recv_timeout(TIMER_POLL) {
                    Ok(message) => Some(message),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match self.input.recv() {
                    Ok(message) => Some(message),
                    Err(_) => break,
                },
            };
            match message {
                Some(SubtaskMessage::Events(batch)) => {
                    self.counts.add_in(batch.len());
                    operator.on_events(batch)?;
                }
                Some(SubtaskMessage::Watermark(watermark)) => operator.on_watermark(watermark)?,
                Some(SubtaskMessage::Barrier(id, form)) => {
                    // Timers due by now fire before the barrier, and what was
                    // emitted before it belongs before it.
                    if !ended {
                        operator.on_processing_time()?;
                    }
                    self.forward_outputs(&mut operator)?;
                    let dir = self
                        .local_checkpoints
                        .join(format!("chk-{id}"))
                        .join(format!("subtask-{}", self.index));
                    if dir.exists() {
                        std::fs::remove_dir_all(&dir).map_err(CheckpointError::from)?;
                    }
                    std::fs::create_dir_all(dir.parent().unwrap_or(&self.local_checkpoints))
                        .map_err(CheckpointError::from)?;
                    operator.checkpoint(&dir, form)?;
                    let _ = self.acks.send(Ack::Subtask { id, index: self.index, dir });
                    self.sink
                        .send(SinkMessage::Barrier { from: self.index, id })
                        .map_err(|_| RunError::Stopped)?;
                }
                Some(SubtaskMessage::End { drained }) => {
                    if drained && !ended {
                        operator.end_processing_time()?;
                    }
                    ended = true;
                }
                None => {}
            }
            if !ended {
                operator.on_processing_time()?;
            }
            self.forward_outputs(&mut operator)?;
            operator.relieve()?;
        }
        operator.flush()
    }

    /// Send what the operator emitted to the sink thread.
    fn forward_outputs(&self, operator: &mut KeyedOperator) -> Result<(), RunError> {
        let (main, side, late_dropped) = operator.take_outputs();
        self.counts.add_late_dropped(late_dropped);
        if main.is_empty() && side.is_empty() {
            return Ok(());
        }
        self.counts.add_out(main.len());
        self.sink
            .send(SinkMessage::Batch { from: self.index, main, side })
            .map_err(|_| RunError::Stopped)
    }
}
