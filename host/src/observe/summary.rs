//! What a run reports: its counts per operator and the summary of a
//! finished run. Plain data, below the modules that fill it in.

use std::time::Duration;

use crate::checkpoint::{CompletedSnapshot, SnapshotKind};

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
    /// Each keyed subtask, every stage's in turn.
    pub subtasks: Vec<OperatorCounts>,
    /// Each keyed stage's name and its subtasks' counts.
    pub stages: Vec<(String, Vec<OperatorCounts>)>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// From the first event read to the last output written, if any was.
    pub processing: Option<Duration>,
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
    /// The written events' end-to-end latency, if recorded
    /// (`RunOptions::record_latency` of the runner).
    pub latency: Option<super::latency::LatencySummary>,
}
