//! What flows between a pipeline's threads: the source → subtask and
//! subtask/source → sink messages, and how many batches a channel holds.

use super::operator::RoutedBatch;
use crate::runtime::packed::PackedEvents;
use crate::state::SnapshotForm;
use crate::Event;

/// Batches a channel holds before its sender waits.
pub(crate) const CHANNEL_BATCHES: usize = 4;

/// What flows from a producer (a source or an upstream subtask) to a
/// subtask, in order.
pub(crate) enum SubtaskMessage {
    /// Events to process.
    Events(RoutedBatch),
    /// Events of a broadcast input, for every subtask.
    Broadcast(Vec<Event>),
    /// Event time has reached this watermark.
    Watermark(i64),
    /// The producer is idle (every split of its source is): until its
    /// next watermark or events it does not hold event time back.
    Idle,
    /// Snapshot this state for checkpoint/savepoint `id`, in `form`, then
    /// forward it.
    Barrier(u64, SnapshotForm),
    /// The run is ending: fire no processing-time timer from now on, so
    /// nothing is emitted after the final barrier (which an exactly-once
    /// sink would never commit). `drained`: a bounded input is exhausted,
    /// and processing time ends with it — first fire every pending
    /// processing-time timer, as the final watermark fires the event-time
    /// ones. Otherwise (a stop) pending timers stay in the snapshot, to fire
    /// in the run that restores it.
    End {
        /// The input is exhausted (not stopped).
        drained: bool,
    },
}

/// What flows into the sink thread, in order per input (every producer —
/// each source and each keyed subtask — is one input).
pub(crate) enum SinkMessage {
    /// Output of input `from` for sink `sink`.
    Batch {
        /// The input.
        from: usize,
        /// The sink (its index among the pipeline's sinks).
        sink: usize,
        /// The events.
        events: PackedEvents,
    },
    /// Barrier `id` from input `from`: what it sends next is after `id`.
    Barrier {
        /// The input.
        from: usize,
        /// The snapshot.
        id: u64,
    },
    /// Input `from` has reached event time `mark` (`None`: it is idle);
    /// a sink that passes event time on (a cluster exchange) writes it.
    Watermark {
        /// The input.
        from: usize,
        /// Its watermark, or `None` while idle.
        mark: Option<i64>,
    },
    /// Snapshot `id` is complete: commit its output.
    Complete(u64),
}
