//! The exactly-once contract between a pipeline and a transactional sink:
//! what the pipeline may ask of a sink whose output commits in
//! transactions tied to checkpoints, so that a restore can be checked
//! against what the external system really committed. The pipeline and
//! the API speak only this; each sink keeps its own transaction logic.
//!
//! A sink that writes exactly-once ([`SinkMode::ExactlyOnce`]):
//!
//! 1. **before the run** ([`TransactionalSink::check_settings`]) refuses
//!    checkpoint settings under which its transactions cannot outlive a
//!    checkpoint, and claims whatever must be unique to the pipeline (a
//!    transactional-id prefix);
//! 2. **in each checkpoint** records its pending output in the sink state
//!    of the snapshot (pre-commit at the barrier), and commits when the
//!    checkpoint completes, writing the snapshot's id as its **commit
//!    marker** in the same transaction;
//! 3. **at a restore** ([`TransactionalSink::committed`]) fences what an
//!    earlier run left open and says which snapshot's output the external
//!    system holds; the pipeline restores that snapshot, and refuses to
//!    start — naming the cause and [`OVERRIDE`] as the way out — when the
//!    marker disagrees with what the stored checkpoints record;
//! 4. **on an override or a first run** ([`TransactionalSink::set_committed`])
//!    moves the marker to the snapshot the run starts from (`0`: nothing
//!    committed yet), so that a marker found absent later means it was lost.
//!
//! Adding a transactional sink: implement [`TransactionalSink`] for its
//! config and return it from [`SinkConfig::transactional`].
//!
//! [`SinkMode::ExactlyOnce`]: super::SinkMode::ExactlyOnce
//! [`SinkConfig::transactional`]: super::SinkConfig::transactional

use std::path::Path;

use super::ConnectorError;
use crate::checkpoint::CheckpointSettings;

/// How a user tells a run to trust the stored checkpoints over a
/// transactional sink's commit marker (`weir run --override-kafka-marker`,
/// the API's `override_kafka_marker=true`), as errors name it.
pub const OVERRIDE: &str = "--override-kafka-marker (API: override_kafka_marker=true)";

/// Which snapshot's output the external system holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMarker {
    /// No marker: the pipeline never ran, or the marker is gone (expired,
    /// deleted, renamed, recreated).
    Absent,
    /// The output of this snapshot is the last one committed; `0` means the
    /// marker was set up before any commit (nothing committed yet).
    At(u64),
}

/// Why a sink cannot be exactly-once with the pipeline's settings (the
/// sink's own error, which names the setting and the way out).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct NotExactlyOnce(pub Box<dyn std::error::Error + Send + Sync>);

/// A sink whose output commits in transactions tied to checkpoints (see
/// the module doc for the contract).
pub trait TransactionalSink {
    /// Refuse `settings` (the pipeline's checkpoints; `None`: none) under
    /// which this sink cannot be exactly-once, then claim for `pipeline`
    /// what must be unique to it on the host whose data directory is
    /// `data_dir`.
    fn check_settings(
        &self,
        settings: Option<&CheckpointSettings>,
        pipeline: &str,
        data_dir: &Path,
    ) -> Result<(), NotExactlyOnce>;

    /// Fence what earlier runs left open, then read the commit marker.
    fn committed(&self) -> Result<CommitMarker, ConnectorError>;

    /// Set the commit marker to snapshot `id` (`0`: nothing committed).
    fn set_committed(&self, id: u64) -> Result<(), ConnectorError>;

    /// The marker as people find it, for errors ("the Kafka commit marker
    /// (consumer group g on topic t partition 0)").
    fn marker_name(&self) -> Result<String, ConnectorError>;
}
