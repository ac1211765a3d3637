//! Checkpoint storage through `object_store`.
//!
//! ```text
//! <root>/<pipeline>/shared/<name>         files shared by checkpoints (SSTs…)
//! <root>/<pipeline>/chk-<N>/g<G>/<name>   files of checkpoint N alone
//! <root>/<pipeline>/generations/<G>       the newest writer's claim
//! <root>/<pipeline>/chk-<N>/_metadata     written last: N is complete
//! <root>/<pipeline>/savepoints/sp-<N>/…   savepoints (self-contained)
//! ```
//!
//! `file:///abs/dir` (the default, under the data directory),
//! `s3://bucket/prefix` (credentials, region and endpoint from the `AWS_*`
//! environment variables) and `memory://` (tests) are supported. Writes of one object are atomic (the
//! local store writes a temporary file and renames it), so a checkpoint
//! without `_metadata` was never completed and is ignored.
//!
//! A `_metadata` that exists but cannot be read is not taken for absent:
//! reads are retried, and one that still fails (or does not parse) is an
//! error — start-up fails naming it, and retention deletes no shared file
//! while it lasts (the checkpoint may be complete and need them).
//! `_metadata` is written create-only, so two writers sharing a store
//! never overwrite each other's checkpoint, and each run writes under a
//! generation of its own ([`generations`]) so that one paused and woken
//! after another took over harms nothing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::metadata::{SnapshotKind, SnapshotMetadata};

mod generations;

pub use generations::{of_shared as generation_of_shared, of_snapshot_file as generation_of_file};

/// The name of the file that marks a checkpoint complete.
const METADATA: &str = "_metadata";

/// How many times a `_metadata` read is tried before it counts as failed.
const READ_ATTEMPTS: u32 = 4;

/// The pause before the first retry of a failed read; doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The highest snapshot id a pipeline may find in its storage: far beyond
/// what checkpoints every millisecond for millions of years reach, and far
/// enough below `u64::MAX` that counting on never wraps.
pub const MAX_SNAPSHOT_ID: u64 = 1 << 62;

/// Why checkpoint storage failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The storage URL is not usable.
    #[error("checkpoint storage {url}: {message}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The object store failed.
    #[error("checkpoint storage: {0}")]
    Store(#[from] object_store::Error),
    /// Metadata could not be encoded.
    #[error("checkpoint metadata: {0}")]
    Metadata(#[from] serde_json::Error),
    /// A local file operation failed.
    #[error("checkpoint files: {0}")]
    Io(#[from] std::io::Error),
    /// A snapshot's files do not match its metadata.
    #[error("corrupt snapshot: {0}")]
    Corrupt(String),
    /// Local state could not be read or written.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The local state directory could not be set up.
    #[error(transparent)]
    Layout(#[from] crate::state::layout::LayoutError),
    /// The final snapshot of a run (at its end, or for a stop) did not
    /// complete within the timeout.
    #[error("snapshot {0} expired before every task acknowledged it")]
    Expired(u64),
    /// The final snapshot of a run (at its end, or for a stop) was not
    /// stored within the timeout.
    #[error("snapshot {id} was not stored within checkpoint.timeout {timeout}: raise checkpoint.timeout or use faster checkpoint storage")]
    StoreTooSlow {
        /// The snapshot.
        id: u64,
        /// The timeout.
        timeout: String,
    },
    /// The run was told to stop at once (its unit revoked or lost, or the
    /// process stopping) while restoring or checkpointing.
    #[error("cancelled: the run was told to stop at once (its unit was revoked or lost, or the process is stopping); nothing after its last completed checkpoint was committed")]
    Cancelled,
    /// A snapshot cannot be restored into this pipeline.
    #[error("cannot restore {what}: {message}")]
    Incompatible {
        /// The snapshot.
        what: String,
        /// Why.
        message: String,
    },
    /// A snapshot's metadata exists (or may) but could not be read, even
    /// after retries: the snapshot may be complete.
    #[error("cannot read the metadata of snapshot {location}: {source}; it may be complete, so Weir neither starts from an older snapshot nor deletes the files it references — make the storage readable and run again, or name the snapshot to start from with --restore <dir>")]
    UnreadableMetadata {
        /// The snapshot's directory.
        location: String,
        /// What the store said.
        source: object_store::Error,
    },
    /// A snapshot's metadata was read but is not valid.
    #[error("corrupt metadata in snapshot {location}: {message}; name the snapshot to start from with --restore <dir>, or move {location} away to fall back to the one before it")]
    CorruptMetadata {
        /// The snapshot's directory.
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// A newer run claimed the storage (see [`generations`]): this
    /// writer was paused or cut off and another owns the pipeline now.
    #[error("checkpoint storage {location} was claimed by a newer run (generation {newer}; this run is generation {generation}): another process or worker owns this pipeline or unit now — this one was paused, cut off or left running; it stops without completing a checkpoint, and its output is not committed")]
    Superseded {
        /// The pipeline's storage.
        location: String,
        /// This writer's generation.
        generation: u64,
        /// The newest generation claimed.
        newer: u64,
    },
    /// Another writer completed a snapshot of the same id first.
    #[error("snapshot {location} was already completed by another writer: two processes are checkpointing pipeline {pipeline} into the same storage; stop the other one (each pipeline runs in one process, with its own checkpoint storage)")]
    AlreadyCompleted {
        /// The snapshot's directory.
        location: String,
        /// The pipeline.
        pipeline: String,
    },
}

/// What [`CheckpointStorage::retain`] deleted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RetainReport {
    /// Checkpoints deleted.
    pub checkpoints: Vec<u64>,
    /// Shared files deleted (no retained checkpoint references them).
    pub shared_files: Vec<String>,
}

/// One pipeline's checkpoint and savepoint storage.
pub struct CheckpointStorage {
    store: Arc<dyn ObjectStore>,
    /// How a user names the store's root: `` for the local file system,
    /// else `scheme://host`.
    root: String,
    base: Path,
    runtime: tokio::runtime::Runtime,
    /// This writer's generation (see [`generations`]); `0` until claimed.
    generation: u64,
}

/// A snapshot found by [`CheckpointStorage::locate`]: its metadata, and the
/// storage and directory holding its files.
pub struct LocatedSnapshot {
    /// Storage rooted at the snapshot's pipeline directory.
    pub storage: CheckpointStorage,
    /// The snapshot's directory.
    pub dir: Path,
    /// Its metadata.
    pub metadata: SnapshotMetadata,
}

impl CheckpointStorage {
    /// Storage at `url` (`file:///abs/dir`, `s3://bucket/prefix`, `memory://`)
    /// for `pipeline`.
    pub fn open(url: &str, pipeline: &str) -> Result<Self, CheckpointError> {
        let (store, root, prefix) = parse_store(url)?;
        Self::with_store(store, root, prefix.join(pipeline))
    }

    fn with_store(
        store: Arc<dyn ObjectStore>,
        root: String,
        base: Path,
    ) -> Result<Self, CheckpointError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Self { store, root, base, runtime, generation: 0 })
    }

    /// Find the snapshot a user named for `--restore`: a checkpoint or
    /// savepoint directory, as a local path or a URL.
    pub fn locate(reference: &str) -> Result<LocatedSnapshot, CheckpointError> {
        let url = if reference.contains("://") {
            reference.to_string()
        } else {
            let path = std::fs::canonicalize(reference).map_err(|e| CheckpointError::Url {
                url: reference.to_string(),
                message: e.to_string(),
            })?;
            format!("file://{}", path.display())
        };
        let (store, root, dir) = parse_store(&url)?;
        let parts: Vec<String> = dir.parts().map(|p| p.as_ref().to_string()).collect();
        let bad = |message: &str| CheckpointError::Url {
            url: reference.to_string(),
            message: message.to_string(),
        };
        let name = parts
            .last()
            .ok_or_else(|| bad("names no checkpoint (chk-N) or savepoint (sp-N) directory"))?;
        // chk-N lives in <pipeline>/, sp-N in <pipeline>/savepoints/.
        let depth = if name.starts_with("chk-") {
            1
        } else if name.starts_with("sp-")
            && parts.len() >= 2
            && parts[parts.len() - 2] == "savepoints"
        {
            2
        } else {
            return Err(bad("is not a checkpoint (…/<pipeline>/chk-N) or savepoint (…/<pipeline>/savepoints/sp-N) directory"));
        };
        let base = Path::from_iter(parts[..parts.len() - depth].iter().map(String::as_str));
        let storage = Self::with_store(store, root, base)?;
        let metadata = storage.read_metadata(&dir)?.ok_or_else(|| CheckpointError::Url {
            url: reference.to_string(),
            message: format!("has no {METADATA}: not a completed checkpoint or savepoint"),
        })?;
        Ok(LocatedSnapshot { storage, dir, metadata })
    }

    /// `metadata`'s snapshot in this storage, ready to restore.
    pub fn into_located(self, metadata: SnapshotMetadata) -> LocatedSnapshot {
        let dir = self.snapshot_dir(metadata.kind, metadata.id);
        LocatedSnapshot { storage: self, dir, metadata }
    }

    /// Where the files of checkpoint `id` go.
    pub fn checkpoint_dir(&self, id: u64) -> Path {
        self.base.clone().join(format!("chk-{id}"))
    }

    /// Where the files of savepoint `id` go.
    pub fn savepoint_dir(&self, id: u64) -> Path {
        self.base.clone().join("savepoints").join(format!("sp-{id}"))
    }

    /// The directory of a snapshot of `kind` and `id`.
    pub fn snapshot_dir(&self, kind: SnapshotKind, id: u64) -> Path {
        match kind {
            SnapshotKind::Checkpoint => self.checkpoint_dir(id),
            SnapshotKind::Savepoint => self.savepoint_dir(id),
        }
    }

    /// A human-readable location of `dir` (a local path for `file://`).
    pub fn describe(&self, dir: &Path) -> String {
        format!("{}/{dir}", self.root)
    }

    fn shared_path(&self, name: &str) -> Path {
        self.base.clone().join("shared").join(name)
    }

    /// Store a shared file unless one of that name exists (shared files are
    /// immutable and named by content). Returns whether it was uploaded.
    pub fn put_shared(&self, name: &str, bytes: Vec<u8>) -> Result<bool, CheckpointError> {
        let path = self.shared_path(name);
        self.runtime.block_on(async {
            match self.store.head(&path).await {
                Ok(_) => Ok(false),
                Err(object_store::Error::NotFound { .. }) => {
                    self.store.put(&path, PutPayload::from(bytes)).await?;
                    Ok(true)
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    /// [`Self::put_shared`] for the local file `local`: on the local file
    /// system a hard link to it, synced (no copy; `local` must not change
    /// again, as an SST or a changelog does not), elsewhere or across file
    /// systems its bytes uploaded.
    pub fn put_shared_file(
        &self,
        name: &str,
        local: &std::path::Path,
    ) -> Result<bool, CheckpointError> {
        if self.root.is_empty() {
            let target = std::path::Path::new("/").join(self.shared_path(name).as_ref());
            if target.exists() {
                return Ok(false);
            }
            let parent = target.parent().unwrap_or(std::path::Path::new("/"));
            std::fs::create_dir_all(parent)?;
            match std::fs::hard_link(local, &target) {
                Ok(()) => {
                    // Durable as an upload is: the file's data and its name.
                    std::fs::File::open(&target)?.sync_all()?;
                    std::fs::File::open(parent)?.sync_all()?;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(_) => {} // another file system: copied below
            }
        }
        self.put_shared(name, std::fs::read(local)?)
    }

    /// Read a shared file.
    pub fn get_shared(&self, name: &str) -> Result<Vec<u8>, CheckpointError> {
        self.get(&self.shared_path(name))
    }

    /// Store `bytes` as `name` in the snapshot directory `dir`.
    pub fn put(&self, dir: &Path, name: &str, bytes: Vec<u8>) -> Result<(), CheckpointError> {
        let path = join(dir, name);
        self.runtime
            .block_on(async { Ok(self.store.put(&path, PutPayload::from(bytes)).await.map(drop)?) })
    }

    /// Read `name` from the snapshot directory `dir`.
    pub fn get_file(&self, dir: &Path, name: &str) -> Result<Vec<u8>, CheckpointError> {
        self.get(&join(dir, name))
    }

    fn get(&self, path: &Path) -> Result<Vec<u8>, CheckpointError> {
        self.runtime.block_on(async { Ok(self.store.get(path).await?.bytes().await?.to_vec()) })
    }

    /// Mark a snapshot complete by writing its metadata, last. The write
    /// is create-only: metadata another writer stored first for the same
    /// snapshot is an error, never overwritten.
    pub fn commit(&self, metadata: &SnapshotMetadata) -> Result<(), CheckpointError> {
        let bytes = serde_json::to_vec_pretty(metadata)?;
        let dir = self.snapshot_dir(metadata.kind, metadata.id);
        let path = join(&dir, METADATA);
        let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let put = PutPayload::from(bytes.clone());
        match self.runtime.block_on(self.store.put_opts(&path, put, create)) {
            Ok(_) => Ok(()),
            // A retried write of ours that had landed is no conflict.
            Err(object_store::Error::AlreadyExists { .. })
                if self.get(&path).ok().as_deref() == Some(&bytes[..]) =>
            {
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                Err(CheckpointError::AlreadyCompleted {
                    location: self.describe(&dir),
                    pipeline: metadata.pipeline.clone(),
                })
            }
            Err(object_store::Error::NotImplemented { .. }) => {
                tracing::warn!(location = %self.describe(&dir), "the checkpoint store cannot write create-only (conditional put disabled?); writing the metadata unconditionally");
                self.put(&dir, METADATA, bytes)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The metadata in snapshot directory `dir`: `None` when there is none
    /// (never completed, or being deleted). Failed reads are retried with
    /// backoff; one that keeps failing, or metadata that does not parse, is
    /// an error — never taken for absent.
    fn read_metadata(&self, dir: &Path) -> Result<Option<SnapshotMetadata>, CheckpointError> {
        let path = join(dir, METADATA);
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        let bytes = loop {
            match self.get(&path) {
                Ok(bytes) => break bytes,
                Err(CheckpointError::Store(object_store::Error::NotFound { .. })) => {
                    return Ok(None)
                }
                Err(error) if attempt >= READ_ATTEMPTS => {
                    return Err(match error {
                        CheckpointError::Store(source) => CheckpointError::UnreadableMetadata {
                            location: self.describe(dir),
                            source,
                        },
                        other => other,
                    })
                }
                Err(error) => {
                    tracing::warn!(location = %self.describe(dir), attempt, %error, "cannot read snapshot metadata; retrying");
                    std::thread::sleep(backoff);
                    backoff *= 2;
                    attempt += 1;
                }
            }
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| CheckpointError::CorruptMetadata {
            location: self.describe(dir),
            message: e.to_string(),
        })
    }

    /// Ids of the snapshot directories (`prefix` + id) directly under `dir`,
    /// complete or not, in increasing order.
    fn ids(&self, dir: &Path, prefix: &str) -> Result<BTreeSet<u64>, CheckpointError> {
        let listing = self.runtime.block_on(self.store.list_with_delimiter(Some(dir)))?;
        Ok(listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename()?.strip_prefix(prefix)?.parse().ok())
            .collect())
    }

    /// The highest id of any checkpoint or savepoint directory, complete or
    /// not: new snapshots must take higher ids.
    pub fn highest_id(&self) -> Result<u64, CheckpointError> {
        let checkpoints = self.ids(&self.base, "chk-")?;
        let savepoints = self.ids(&self.base.clone().join("savepoints"), "sp-")?;
        let highest =
            checkpoints.last().copied().unwrap_or(0).max(savepoints.last().copied().unwrap_or(0));
        if highest > MAX_SNAPSHOT_ID {
            return Err(CheckpointError::Corrupt(format!(
                "snapshot id {highest} in {}: beyond any id Weir writes ({MAX_SNAPSHOT_ID}), so not a snapshot of this pipeline (a directory put there by hand, or another pipeline's?); new ids would wrap around and retention would delete each new checkpoint. Move it out of the pipeline's checkpoint storage",
                self.describe(&self.base)
            )));
        }
        Ok(highest)
    }

    /// Every completed snapshot of `kind`, newest first. A directory
    /// without metadata is skipped (never completed); metadata that cannot
    /// be read, or names another snapshot, is an error.
    pub fn completed_of(
        &self,
        kind: SnapshotKind,
    ) -> Result<Vec<SnapshotMetadata>, CheckpointError> {
        let scan = self.scan(kind)?;
        match scan.unreadable.into_iter().next() {
            Some((_, error)) => Err(error),
            None => Ok(scan.completed),
        }
    }

    /// The snapshot directories of `kind`, newest first: the completed
    /// ones, and those whose metadata could not be read (with why).
    fn scan(&self, kind: SnapshotKind) -> Result<Scan, CheckpointError> {
        let ids = match kind {
            SnapshotKind::Checkpoint => self.ids(&self.base, "chk-")?,
            SnapshotKind::Savepoint => self.ids(&self.base.clone().join("savepoints"), "sp-")?,
        };
        let mut scan = Scan::default();
        for id in ids.into_iter().rev() {
            let dir = self.snapshot_dir(kind, id);
            match self.read_metadata(&dir) {
                Ok(Some(metadata)) if metadata.id == id && metadata.kind == kind => {
                    scan.completed.push(metadata)
                }
                Ok(Some(metadata)) => {
                    let message = format!(
                        "it names {:?} {}, not the directory's {kind:?} {id}",
                        metadata.kind, metadata.id
                    );
                    let location = self.describe(&dir);
                    scan.unreadable
                        .push((id, CheckpointError::CorruptMetadata { location, message }))
                }
                // In flight, abandoned, or being deleted: never completed.
                Ok(None) => tracing::debug!(id, "skipping a snapshot without metadata"),
                Err(error) => scan.unreadable.push((id, error)),
            }
        }
        Ok(scan)
    }

    /// Every completed checkpoint, newest first (see [`Self::completed_of`]).
    pub fn completed(&self) -> Result<Vec<SnapshotMetadata>, CheckpointError> {
        self.completed_of(SnapshotKind::Checkpoint)
    }

    /// Keep the newest `keep` completed checkpoints, checkpoint `pinned`
    /// (one a restart may need) and every checkpoint from `committed` (the
    /// newest one whose output this run knows committed: a new owner
    /// restores from it) onwards: delete older checkpoint directories
    /// (complete or not), then every shared file no remaining checkpoint
    /// references. What a newer generation wrote is never deleted, and
    /// nothing is once a newer generation claimed the storage (see
    /// [`generations`]). Savepoints are self-contained and never touched.
    /// A checkpoint whose metadata cannot be read is never deleted, and
    /// while there is one no shared file is (it may reference any of
    /// them): this round deletes only older checkpoints, and says why.
    pub fn retain(
        &self,
        keep: usize,
        pinned: Option<u64>,
        committed: Option<u64>,
    ) -> Result<RetainReport, CheckpointError> {
        self.check_current()?;
        self.sweep(keep, pinned, committed)
    }

    /// [`Self::retain`] after its check that this writer is current: what
    /// a writer paused right after that check does on waking.
    fn sweep(
        &self,
        keep: usize,
        pinned: Option<u64>,
        committed: Option<u64>,
    ) -> Result<RetainReport, CheckpointError> {
        let Scan { completed, unreadable } = self.scan(SnapshotKind::Checkpoint)?;
        let oldest_kept = match completed[..keep.min(completed.len())].last() {
            Some(oldest) => oldest.id,
            None if keep == 0 => u64::MAX,
            None => 0,
        };
        let below = oldest_kept.min(committed.unwrap_or(u64::MAX));
        let deletable = |id: u64| id < below && Some(id) != pinned;
        let (doomed, remaining): (Vec<&SnapshotMetadata>, Vec<&SnapshotMetadata>) =
            completed.iter().partition(|m| deletable(m.id) && m.generation <= self.generation);
        let referenced: BTreeSet<&str> = remaining.iter().flat_map(|m| m.shared_files()).collect();
        for (id, error) in &unreadable {
            tracing::warn!(id, %error, "retention keeps this checkpoint and every shared file while its metadata cannot be read");
        }
        let unreadable: BTreeSet<u64> = unreadable.into_iter().map(|(id, _)| id).collect();
        let completed_ids: BTreeSet<u64> = completed.iter().map(|m| m.id).collect();
        // Never completed (abandoned, or in flight: deleted only when no
        // newer generation wrote into it).
        let incomplete: Vec<u64> = self
            .ids(&self.base, "chk-")?
            .into_iter()
            .filter(|id| !completed_ids.contains(id) && !unreadable.contains(id) && deletable(*id))
            .collect();
        let mut report = RetainReport::default();
        self.runtime.block_on(async {
            for id in doomed.iter().map(|m| m.id).chain(incomplete) {
                let dir = self.checkpoint_dir(id);
                let files: Vec<_> = self.store.list(Some(&dir)).try_collect().await?;
                if files.iter().any(|f| generation_of_file(&dir, &f.location) > self.generation) {
                    continue;
                }
                // Metadata first: from then on the checkpoint is incomplete.
                match self.store.delete(&dir.clone().join(METADATA)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                for file in files.iter().filter(|f| f.location.filename() != Some(METADATA)) {
                    self.store.delete(&file.location).await?;
                }
                report.checkpoints.push(id);
            }
            if !unreadable.is_empty() {
                return Ok(());
            }
            let shared = self.base.clone().join("shared");
            let files: Vec<_> = self.store.list(Some(&shared)).try_collect().await?;
            for file in files {
                let name = file.location.filename().unwrap_or_default().to_string();
                if !referenced.contains(name.as_str())
                    && generation_of_shared(&name) <= self.generation
                {
                    self.store.delete(&file.location).await?;
                    report.shared_files.push(name);
                }
            }
            Ok::<_, CheckpointError>(())
        })?;
        report.checkpoints.sort();
        report.shared_files.sort();
        if self.generation > 0 {
            self.prune_claims()?;
        }
        Ok(report)
    }
}

/// What [`CheckpointStorage::scan`] found.
#[derive(Default)]
struct Scan {
    /// Completed snapshots, newest first.
    completed: Vec<SnapshotMetadata>,
    /// Snapshots whose metadata could not be read, newest first, and why.
    unreadable: Vec<(u64, CheckpointError)>,
}

/// `dir/name`, where `name` may contain `/`.
fn join(dir: &Path, name: &str) -> Path {
    name.split('/').fold(dir.clone(), |path, part| path.join(part))
}

/// The store at `url`, how to name its root, and the path `url` names in it.
pub(crate) fn parse_store(
    url: &str,
) -> Result<(Arc<dyn ObjectStore>, String, Path), CheckpointError> {
    let bad = |message: String| CheckpointError::Url { url: url.to_string(), message };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if parsed.scheme() == "file" {
        // The local store needs its directory to exist; it syncs what it
        // writes (a completed checkpoint must survive a power cut) and
        // removes directories that deleting a checkpoint empties.
        let dir = parsed.to_file_path().map_err(|()| bad("not an absolute file path".into()))?;
        std::fs::create_dir_all(&dir).map_err(|e| bad(e.to_string()))?;
        let store = object_store::local::LocalFileSystem::new()
            .with_automatic_cleanup(true)
            .with_fsync(true);
        let prefix = Path::from_url_path(parsed.path()).map_err(|e| bad(e.to_string()))?;
        return Ok((Arc::new(store), String::new(), prefix));
    }
    // Credentials and endpoints come from the environment, as for the
    // cloud tools: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
    // AWS_ENDPOINT (an S3-compatible server), AWS_ALLOW_HTTP, …
    let options = std::env::vars().filter(|(key, _)| key.starts_with("AWS_"));
    let (store, prefix) =
        object_store::parse_url_opts(&parsed, options).map_err(|e| bad(e.to_string()))?;
    let root = format!("{}://{}", parsed.scheme(), parsed.host_str().unwrap_or_default());
    Ok((Arc::from(store), root, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::{StateFiles, StoredFile};

    pub(crate) fn metadata(id: u64, shared: &[&str]) -> SnapshotMetadata {
        let files = shared
            .iter()
            .map(|s| StoredFile { name: s.to_string(), shared: Some(s.to_string()), size: 1 })
            .collect();
        SnapshotMetadata {
            id,
            kind: SnapshotKind::Checkpoint,
            pipeline: "orders".into(),
            completed_at: id as i64,
            operator_uid: "process".into(),
            max_parallelism: 128,
            parallelism: 1,
            state: StateFiles::Rocksdb { subtasks: vec![files] },
            operators: Vec::new(),
            source: serde_json::json!({ "offset": id }),
            sink: serde_json::Value::Null,
            last_committed: None,
            size_bytes: 0,
            incremental_bytes: 0,
            duration_ms: 0,
            alignment_ms: 0,
            generation: 0,
        }
    }

    fn file_storage(dir: &std::path::Path) -> CheckpointStorage {
        CheckpointStorage::open(&format!("file://{}", dir.display()), "orders").unwrap()
    }

    #[test]
    fn an_id_beyond_what_weir_writes_is_refused_instead_of_wrapping() {
        let dir = tempfile::tempdir().unwrap();
        let storage = file_storage(dir.path());
        storage.put(&storage.checkpoint_dir(7), "subtask-0/MANIFEST", b"7".to_vec()).unwrap();
        assert_eq!(storage.highest_id().unwrap(), 7);
        // Another pipeline's directory named like a checkpoint, or one
        // made by hand: the next id would wrap to 0.
        std::fs::create_dir_all(dir.path().join("orders/chk-18446744073709551615/x")).unwrap();
        std::fs::write(dir.path().join("orders/chk-18446744073709551615/x/f"), b"").unwrap();
        let error = storage.highest_id().unwrap_err().to_string();
        assert!(error.contains("18446744073709551615") && error.contains("Move it out"), "{error}");
    }

    #[test]
    fn shared_files_upload_once_and_commit_marks_completion() {
        let dir = tempfile::tempdir().unwrap();
        let storage = file_storage(dir.path());
        assert!(storage.put_shared("000001.sst", b"a".to_vec()).unwrap());
        assert!(!storage.put_shared("000001.sst", b"a".to_vec()).unwrap(), "already stored");
        storage.put(&storage.checkpoint_dir(1), "subtask-0/MANIFEST", b"7".to_vec()).unwrap();
        assert!(storage.completed().unwrap().is_empty(), "no metadata, not complete");
        assert_eq!(storage.highest_id().unwrap(), 1, "incomplete directories still take their id");
        storage.commit(&metadata(1, &["000001.sst"])).unwrap();
        assert_eq!(storage.completed().unwrap(), vec![metadata(1, &["000001.sst"])]);
        assert_eq!(storage.get_shared("000001.sst").unwrap(), b"a");
        assert_eq!(
            storage.get_file(&storage.checkpoint_dir(1), "subtask-0/MANIFEST").unwrap(),
            b"7"
        );
        assert!(
            dir.path().join("orders/chk-1/_metadata").exists(),
            "layout: <root>/<pipeline>/chk-N/"
        );
        assert!(dir.path().join("orders/shared/000001.sst").exists());
        let located =
            CheckpointStorage::locate(&storage.describe(&storage.checkpoint_dir(1))).unwrap();
        assert_eq!(located.metadata.id, 1);
        assert_eq!(
            located.storage.get_shared("000001.sst").unwrap(),
            b"a",
            "a located checkpoint finds its shared files"
        );
    }

    #[test]
    fn s3_urls_open_without_contacting_the_store() {
        let storage = CheckpointStorage::open("s3://bucket/prefix", "orders").unwrap();
        assert_eq!(storage.describe(&storage.checkpoint_dir(3)), "s3://bucket/prefix/orders/chk-3");
        assert!(CheckpointStorage::open("ftp://host/x", "orders").is_err());
    }

    #[test]
    fn corrupt_metadata_is_an_error_not_an_incomplete_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let storage = file_storage(dir.path());
        storage.commit(&metadata(1, &[])).unwrap();
        storage.commit(&metadata(2, &[])).unwrap();
        std::fs::write(dir.path().join("orders/chk-2/_metadata"), b"{ truncated").unwrap();
        storage.put(&storage.checkpoint_dir(3), "state", b"x".to_vec()).unwrap();
        let error = storage.completed().unwrap_err();
        assert!(matches!(error, CheckpointError::CorruptMetadata { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains("orders/chk-2") && message.contains("--restore"), "{message}");
        assert_eq!(storage.highest_id().unwrap(), 3);
        // A directory without metadata (3) is incomplete, not an error.
        std::fs::remove_file(dir.path().join("orders/chk-2/_metadata")).unwrap();
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![1]);
    }

    #[test]
    fn metadata_is_written_create_only() {
        let dir = tempfile::tempdir().unwrap();
        for storage in
            [file_storage(dir.path()), CheckpointStorage::open("memory://", "orders").unwrap()]
        {
            storage.commit(&metadata(1, &["a"])).unwrap();
            storage.commit(&metadata(1, &["a"])).expect("the same metadata again is no conflict");
            let error = storage.commit(&metadata(1, &["b"])).unwrap_err();
            assert!(matches!(error, CheckpointError::AlreadyCompleted { .. }), "{error}");
            assert!(error.to_string().contains("orders/chk-1"), "{error}");
            assert_eq!(
                storage.completed().unwrap(),
                vec![metadata(1, &["a"])],
                "the first writer's metadata stays"
            );
        }
    }

    #[test]
    fn metadata_is_written_create_only_on_s3() {
        // The moto server of `scripts/dev s3 start` (`scripts/dev test`
        // exports its endpoint); skipped without one.
        let Ok(endpoint) = std::env::var("WEIR_TEST_S3_ENDPOINT") else {
            eprintln!("skipped: WEIR_TEST_S3_ENDPOINT is not set (scripts/dev s3 start)");
            return;
        };
        let bucket = format!("guard-{}-{}", std::process::id(), crate::clock::now_millis());
        let created = reqwest::blocking::Client::new()
            .put(format!("{endpoint}/{bucket}"))
            .send()
            .expect("the S3 server answers");
        assert!(created.status().is_success(), "create bucket: {}", created.status());
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_bucket_name(&bucket)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap();
        let storage = CheckpointStorage::with_store(
            Arc::new(store),
            format!("s3://{bucket}"),
            "orders".into(),
        )
        .unwrap();
        storage.commit(&metadata(1, &["a"])).unwrap();
        storage.commit(&metadata(1, &["a"])).expect("the same metadata again is no conflict");
        let error = storage.commit(&metadata(1, &["b"])).unwrap_err();
        assert!(matches!(error, CheckpointError::AlreadyCompleted { .. }), "{error}");
        assert!(error.to_string().contains(&format!("s3://{bucket}/orders/chk-1")), "{error}");
        assert_eq!(storage.completed().unwrap(), vec![metadata(1, &["a"])]);
    }

    /// A store whose next `failures` reads of a `_metadata` fail.
    #[derive(Debug)]
    struct FlakyStore {
        inner: object_store::memory::InMemory,
        failures: std::sync::atomic::AtomicU32,
    }

    impl std::fmt::Display for FlakyStore {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "FlakyStore")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for FlakyStore {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            use std::sync::atomic::Ordering;
            let fail = location.filename() == Some(METADATA)
                && self
                    .failures
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if fail {
                return Err(object_store::Error::Generic {
                    store: "FlakyStore",
                    source: "connection reset by peer".into(),
                });
            }
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// Storage on a [`FlakyStore`] holding checkpoints 1..=3 (files a..d,
    /// as in the retention tests), and the store to make reads fail.
    fn flaky_storage() -> (CheckpointStorage, Arc<FlakyStore>) {
        let store = Arc::new(FlakyStore {
            inner: object_store::memory::InMemory::new(),
            failures: 0.into(),
        });
        let storage =
            CheckpointStorage::with_store(store.clone(), "memory://".into(), Path::from("orders"))
                .unwrap();
        for name in ["a", "b", "c", "d"] {
            storage.put_shared(name, name.as_bytes().to_vec()).unwrap();
        }
        for (id, files) in [(1, ["a", "b"]), (2, ["b", "c"]), (3, ["c", "d"])] {
            storage.commit(&metadata(id, &files)).unwrap();
        }
        (storage, store)
    }

    #[test]
    fn a_transient_metadata_read_error_is_retried() {
        let (storage, store) = flaky_storage();
        store.failures.store(READ_ATTEMPTS - 1, std::sync::atomic::Ordering::SeqCst);
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![3, 2, 1], "the newest checkpoint read on its last attempt");
        assert_eq!(store.failures.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn a_persistent_metadata_read_error_fails_loudly_and_retention_deletes_nothing_shared() {
        let (storage, store) = flaky_storage();
        store.failures.store(u32::MAX, std::sync::atomic::Ordering::SeqCst);
        let error = storage.completed().unwrap_err();
        assert!(matches!(error, CheckpointError::UnreadableMetadata { .. }), "{error}");
        let message = error.to_string();
        assert!(
            message.contains("orders/chk-3") && message.contains("connection reset by peer"),
            "names the checkpoint and the storage error: {message}"
        );
        assert!(message.contains("--restore"), "and the way out: {message}");

        // Every metadata unreadable: retention deletes nothing at all.
        let report = storage.retain(1, None, None).unwrap();
        assert_eq!(report, RetainReport::default());

        // Only the newest unreadable: older checkpoints go, no shared file.
        store.failures.store(READ_ATTEMPTS, std::sync::atomic::Ordering::SeqCst);
        let report = storage.retain(1, None, None).unwrap();
        assert_eq!(report, RetainReport { checkpoints: vec![1], shared_files: vec![] });
        for name in ["a", "b", "c", "d"] {
            assert!(storage.get_shared(name).is_ok(), "{name} is kept");
        }
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![3, 2], "the unreadable checkpoint 3 is kept, and 2 with it");

        // Readable again: a normal round.
        let report = storage.retain(1, None, None).unwrap();
        assert_eq!(
            report,
            RetainReport { checkpoints: vec![2], shared_files: vec!["a".into(), "b".into()] }
        );
    }

    #[test]
    fn deleting_every_checkpoint_deletes_their_directories_too() {
        let storage = CheckpointStorage::open("memory://", "orders").unwrap();
        storage.put_shared("a", b"a".to_vec()).unwrap();
        storage.commit(&metadata(1, &["a"])).unwrap();
        storage.commit(&metadata(2, &["a"])).unwrap();
        let report = storage.retain(0, None, None).unwrap();
        assert_eq!(
            report,
            RetainReport { checkpoints: vec![1, 2], shared_files: vec!["a".into()] }
        );
        assert!(storage.completed().unwrap().is_empty());
    }

    #[test]
    fn retention_deletes_only_unreferenced_shared_files() {
        let storage = CheckpointStorage::open("memory://", "orders").unwrap();
        for name in ["a", "b", "c", "d"] {
            storage.put_shared(name, name.as_bytes().to_vec()).unwrap();
        }
        storage.commit(&metadata(1, &["a", "b"])).unwrap();
        storage.commit(&metadata(2, &["b", "c"])).unwrap();
        storage.commit(&metadata(3, &["c", "d"])).unwrap();
        let mut savepoint = metadata(4, &[]);
        savepoint.kind = SnapshotKind::Savepoint;
        storage.commit(&savepoint).unwrap();
        let report = storage.retain(2, None, None).unwrap();
        assert_eq!(
            report,
            RetainReport { checkpoints: vec![1], shared_files: vec!["a".to_string()] }
        );
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![3, 2]);
        assert!(storage.get_shared("b").is_ok() && storage.get_shared("a").is_err());
        assert_eq!(
            storage.completed_of(SnapshotKind::Savepoint).unwrap(),
            vec![savepoint],
            "savepoints are never retired"
        );
    }

    #[test]
    fn retention_keeps_a_pinned_checkpoint_and_its_files() {
        // A run restored checkpoint 1 (the last one whose output is
        // committed); runs killed before their first commit completed 2..4.
        let storage = CheckpointStorage::open("memory://", "orders").unwrap();
        for name in ["a", "b", "c", "d"] {
            storage.put_shared(name, name.as_bytes().to_vec()).unwrap();
        }
        for (id, files) in [(1, ["a", "b"]), (2, ["b", "c"]), (3, ["c", "d"]), (4, ["d", "d"])] {
            storage.commit(&metadata(id, &files)).unwrap();
        }
        let report = storage.retain(2, Some(1), None).unwrap();
        assert_eq!(
            report,
            RetainReport { checkpoints: vec![2], shared_files: vec![] },
            "c stays for 3, a and b for the pinned 1"
        );
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![4, 3, 1]);
        assert!(storage.get_shared("a").is_ok());
        let report = storage.retain(2, None, None).unwrap();
        assert_eq!(report.checkpoints, vec![1], "unpinned, it goes");
    }
}
