//! Why a run failed: the one error type of `pipeline/`, with a variant per
//! kind of failure (a function, a connector, state, checkpoints, a thread,
//! I/O, …). It sits below every other module of `pipeline/`, so each can
//! return it without importing the runner.

use std::path::PathBuf;

use crate::checkpoint::CheckpointError;
use crate::connectors::ConnectorError;
use crate::runtime::{CallError, LoadError};
use crate::state::layout::LayoutError;
use crate::state::StateError;
use crate::store::StoreError;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A function file could not be read.
    #[error("cannot read function {path}: {source}")]
    ReadFunction {
        /// The `.wasm` file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A stored function could not be found or read.
    #[error("{field}: {source}")]
    StoredFunction {
        /// The spec field naming it (`process`, …).
        field: &'static str,
        /// What the function store said.
        source: StoreError,
    },
    /// A function could not be loaded for its role.
    #[error("{function}: {source}")]
    Load {
        /// The `.wasm` file, or the stored function and version.
        function: String,
        /// Why it was rejected.
        source: LoadError,
    },
    /// A function call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A source or sink failed.
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    /// The state backend failed.
    #[error("state: {0}")]
    State(#[from] StateError),
    /// The state directory could not be opened.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The window operator failed.
    #[error(transparent)]
    Window(#[from] crate::window::WindowError),
    /// A join failed.
    #[error(transparent)]
    Join(#[from] crate::join::JoinError),
    /// Checkpointing or restoring failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Another process holds the pipeline's lock on this data directory.
    #[error(transparent)]
    Locked(#[from] super::lock::LockError),
    /// `--restore latest` found no completed checkpoint.
    #[error("nothing to restore: pipeline {0} has no completed checkpoint")]
    NothingToRestore(String),
    /// A snapshot's source or sink state does not fit this pipeline.
    #[error("cannot resume from snapshot {id}: {message}")]
    Resume {
        /// The snapshot.
        id: u64,
        /// What does not fit.
        message: String,
    },
    /// An exactly-once sink's commit marker disagrees with the
    /// stored snapshots: absent or older than a recorded commit, or not
    /// the snapshot asked to restore.
    #[error("cannot start pipeline {pipeline}: {message}")]
    CommitMarker {
        /// The pipeline.
        pipeline: String,
        /// What the marker and the snapshots say, and the way out.
        message: String,
    },
    /// The source's or the sinks' state could not be written into a
    /// snapshot, or read back from one.
    #[error("{what}: {source}")]
    SnapshotState {
        /// What was being encoded or decoded.
        what: &'static str,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The pipeline's configuration cannot work (found before it starts).
    #[error("cannot deploy: {0}")]
    Deploy(String),
    /// An exactly-once sink that cannot work with the pipeline's settings
    /// (found before it starts).
    #[error("cannot deploy: {0}")]
    ExactlyOnce(#[from] crate::connectors::NotExactlyOnce),
    /// The wasmtime engine could not be set up.
    #[error("wasm engine: {0}")]
    Engine(String),
    /// A file or directory the run keeps (not state or checkpoints) could
    /// not be written.
    #[error("{doing}: {source}")]
    Io {
        /// What the run was doing.
        doing: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A pipeline thread could not be started.
    #[error("cannot start the {name} thread: {source}")]
    Thread {
        /// The thread's name.
        name: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A pipeline thread panicked (a bug in Weir).
    #[error("{0} thread panicked")]
    Panicked(String),
    /// A downstream thread stopped early; its own error says why, and is
    /// the one reported.
    #[error("a downstream operator stopped")]
    Stopped,
}

impl RunError {
    /// Whether running again cannot help until someone acts: the start was
    /// refused on purpose (a commit marker that disagrees with the
    /// checkpoints, a snapshot that does not fit, settings that cannot
    /// work) or a function cannot be loaded. `weir serve` records such a
    /// failure instead of restarting the pipeline.
    pub fn needs_operator(&self) -> bool {
        matches!(
            self,
            RunError::CommitMarker { .. }
                | RunError::Resume { .. }
                | RunError::NothingToRestore(_)
                | RunError::Deploy(_)
                | RunError::ExactlyOnce(_)
                | RunError::ReadFunction { .. }
                | RunError::StoredFunction { .. }
                | RunError::Load { .. }
        )
    }
}
