//! What a completed checkpoint or savepoint records: its `_metadata`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Checkpoints are taken by the host on a schedule and belong to it;
/// savepoints are taken on request and belong to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotKind {
    /// Periodic, incremental, in the state backend's own format.
    Checkpoint,
    /// On demand, self-contained, in the canonical format.
    Savepoint,
}

impl SnapshotKind {
    /// `checkpoint` or `savepoint`, as users read it.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotKind::Checkpoint => "checkpoint",
            SnapshotKind::Savepoint => "savepoint",
        }
    }
}

/// A file of a subtask's RocksDB checkpoint and where it is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// The file's name inside the database directory.
    pub name: String,
    /// Its name under `shared/` (immutable files, named by content), or
    /// `None` when it is stored under the checkpoint's own directory as
    /// `subtask-<i>/<name>`.
    pub shared: Option<String>,
    /// Its size in bytes.
    pub size: u64,
}

/// One file of a canonical savepoint: the entries of a range of key
/// groups, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanonicalFile {
    /// File name under the savepoint's directory.
    pub name: String,
    /// First key group the file may hold.
    pub first_key_group: u16,
    /// Last key group the file may hold.
    pub last_key_group: u16,
    /// Number of entries.
    pub entries: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Where the keyed state of a snapshot is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "format")]
pub enum StateFiles {
    /// One RocksDB checkpoint per subtask (restorable at the same layout,
    /// or rescaled after restore).
    Rocksdb {
        /// Files of each subtask's database, by subtask index.
        subtasks: Vec<Vec<StoredFile>>,
    },
    /// Backend-independent entries by key group.
    Canonical {
        /// The operator's data files.
        files: Vec<CanonicalFile>,
    },
}

/// The state of one keyed stage in a snapshot of a graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorSnapshot {
    /// The stage's uid.
    pub uid: String,
    /// Its subtasks when it was taken.
    pub parallelism: u16,
    /// The number of its first subtask among every subtask of the
    /// pipeline: subtask `i`'s files (and local copy) are those of
    /// `subtask-<first_slot + i>`.
    pub first_slot: usize,
    /// Its state.
    pub state: StateFiles,
}

impl OperatorSnapshot {
    /// Every keyed stage's state as `_metadata` records it: the first
    /// stage's in the top-level fields (empty when there is none: a
    /// pipeline of transforms has no state), and the list of all only
    /// when there are several.
    pub fn recorded(
        mut operators: Vec<OperatorSnapshot>,
    ) -> (OperatorSnapshot, Vec<OperatorSnapshot>) {
        let first = operators.first().cloned().unwrap_or(OperatorSnapshot {
            uid: String::new(),
            parallelism: 0,
            first_slot: 0,
            state: StateFiles::Rocksdb { subtasks: Vec::new() },
        });
        if operators.len() == 1 {
            operators.clear();
        }
        (first, operators)
    }
}

/// The `_metadata` of a completed checkpoint or savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMetadata {
    /// Checkpoint number, increasing (savepoints share the sequence).
    pub id: u64,
    /// Checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// The pipeline's name.
    pub pipeline: String,
    /// When it completed (ms since the epoch).
    pub completed_at: i64,
    /// The (first) keyed operator's uid.
    pub operator_uid: String,
    /// Key groups of the state.
    pub max_parallelism: u16,
    /// The (first) keyed operator's subtasks when it was taken.
    pub parallelism: u16,
    /// The (first) keyed operator's state.
    pub state: StateFiles,
    /// Every keyed stage's state, when the pipeline has several (empty
    /// when it has one: the fields above are its).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<OperatorSnapshot>,
    /// Source positions and watermarks to resume from (with several
    /// sources, an object of each one's by name).
    pub source: serde_json::Value,
    /// What the sinks need to finish or discard pending output.
    pub sink: serde_json::Value,
    /// The newest earlier snapshot whose output the sinks are known to have
    /// committed when this one was taken (their commit had returned, or an
    /// exactly-once Kafka sink's commit marker named it at the run's
    /// start); `None` if none is known (and in metadata written before
    /// Weir recorded it). A start checks the Kafka commit marker against it.
    #[serde(default)]
    pub last_committed: Option<u64>,
    /// Bytes of all files it references.
    pub size_bytes: u64,
    /// Bytes it uploaded itself (not already stored).
    pub incremental_bytes: u64,
    /// Milliseconds from trigger to completion.
    pub duration_ms: u64,
    /// The longest any subtask waited from its first barrier to its last,
    /// in ms (0 in metadata written before Weir recorded it).
    #[serde(default)]
    pub alignment_ms: u64,
    /// The generation of the run that wrote it (see
    /// [`generations`](super::storage)); its own files are under `g<G>/`
    /// in its directory. `0`: written before generations existed.
    #[serde(default)]
    pub generation: u64,
}

impl SnapshotMetadata {
    /// Names (under `shared/`) of the shared files it references.
    pub fn shared_files(&self) -> BTreeSet<&str> {
        let states = std::iter::once(&self.state).chain(self.operators.iter().map(|o| &o.state));
        states
            .flat_map(|state| match state {
                StateFiles::Rocksdb { subtasks } => {
                    subtasks.iter().flatten().filter_map(|f| f.shared.as_deref()).collect()
                }
                StateFiles::Canonical { .. } => Vec::new(),
            })
            .collect()
    }

    /// Every keyed stage's state (none for a pipeline of transforms only).
    pub fn operator_states(&self) -> Vec<OperatorSnapshot> {
        if !self.operators.is_empty() {
            return self.operators.clone();
        }
        if self.operator_uid.is_empty() {
            return Vec::new();
        }
        vec![OperatorSnapshot {
            uid: self.operator_uid.clone(),
            parallelism: self.parallelism,
            first_slot: 0,
            state: self.state.clone(),
        }]
    }
}
