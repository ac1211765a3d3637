//! Checkpoints and savepoints: consistent snapshots of a running pipeline
//! (keyed state, source positions, pending sink output), stored through
//! `object_store`, and recovery from them.
//!
//! * [`storage`](CheckpointStorage): where snapshot files and their metadata live;
//!   metadata written last marks completion; retention.
//! * [`coordinator`](Coordinator): triggers, barrier acknowledgements, commit.
//! * `incremental`: RocksDB checkpoints uploaded by content, only new SSTs.
//! * `canonical`: the backend-independent savepoint format.
//! * `reinstate`: keyed state back from a snapshot, staged then switched in
//!   (`pipeline::restore` decides which snapshot a run starts from).
//! * [`control`](ControlDir): savepoint / stop requests to a running pipeline.
//! * [`settings`](CheckpointSettings): interval, min pause, timeout,
//!   retention and storage of a pipeline's checkpoints.

mod canonical;
mod control;
mod coordinator;
mod incremental;
mod metadata;
mod reinstate;
mod settings;
mod storage;

pub use control::{ControlDir, Request, Response};
pub use coordinator::{
    Ack, CompletedSnapshot, Coordinator, CoordinatorConfig, CoordinatorReport, Trigger,
};
pub use incremental::KnownFiles;
pub use metadata::{
    CanonicalFile, OperatorSnapshot, SnapshotKind, SnapshotMetadata, StateFiles, StoredFile,
};
pub use reinstate::{restore, RestoreTarget};
pub use settings::{CheckpointSettings, SettingsError, MIN_INTERVAL};
pub(crate) use storage::parse_store;
pub use storage::{
    CheckpointError, CheckpointStorage, LocatedSnapshot, RetainReport, MAX_SNAPSHOT_ID,
};
