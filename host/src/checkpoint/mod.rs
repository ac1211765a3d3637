//! Checkpoints and savepoints.
//!
//! So far this holds the storage layer: where checkpoint files and their
//! metadata live (through `object_store`), how a checkpoint is committed
//! atomically (metadata written last), how completed checkpoints are
//! found (unreadable ones skipped), and retention that deletes a shared
//! file only when no retained checkpoint references it. The coordinator,
//! barriers, RocksDB snapshots and restore build on it.

mod storage;

pub use storage::{CheckpointError, CheckpointMetadata, CheckpointStorage, RetainReport};
