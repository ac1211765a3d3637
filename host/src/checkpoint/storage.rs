//! Checkpoint storage through `object_store`.
//!
//! ```text
//! <root>/<pipeline>/shared/<name>         files shared by checkpoints (SSTs…)
//! <root>/<pipeline>/chk-<N>/<name>        files of checkpoint N alone
//! <root>/<pipeline>/chk-<N>/_metadata     written last: N is complete
//! ```
//!
//! `file:///abs/dir` (the default, under the data directory) and
//! `memory://` work out of the box. Writes of one object are atomic (the
//! local store writes a temporary file and renames it), so a checkpoint
//! without readable `_metadata` was never completed and is ignored.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

/// The name of the file that marks a checkpoint complete.
const METADATA: &str = "_metadata";

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
    /// The async runtime for object-store calls could not start.
    #[error("checkpoint storage runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// What a completed checkpoint consists of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Checkpoint number, increasing.
    pub id: u64,
    /// When it completed (ms since the epoch).
    pub completed_at: i64,
    /// Names of the shared files it references.
    pub shared_files: BTreeSet<String>,
    /// Names of its own files under `chk-<id>/`.
    pub own_files: BTreeSet<String>,
    /// Source positions to resume from (source-specific JSON).
    pub source_positions: serde_json::Value,
    /// Bytes of all files it references.
    pub size_bytes: u64,
    /// Bytes it uploaded itself (not already stored).
    pub incremental_bytes: u64,
}

/// What [`CheckpointStorage::retain`] deleted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RetainReport {
    /// Checkpoints deleted.
    pub checkpoints: Vec<u64>,
    /// Shared files deleted (no retained checkpoint references them).
    pub shared_files: Vec<String>,
}

/// One pipeline's checkpoint storage.
pub struct CheckpointStorage {
    store: Arc<dyn ObjectStore>,
    base: Path,
    runtime: tokio::runtime::Runtime,
}

impl CheckpointStorage {
    /// Storage at `url` (`file:///abs/dir` or `memory://`) for `pipeline`.
    pub fn open(url: &str, pipeline: &str) -> Result<Self, CheckpointError> {
        let bad = |message: String| CheckpointError::Url { url: url.to_string(), message };
        let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if parsed.scheme() == "file" {
            // The local store needs its directory to exist.
            let dir = parsed.to_file_path().map_err(|()| bad("not an absolute file path".into()))?;
            std::fs::create_dir_all(&dir).map_err(|e| bad(e.to_string()))?;
        }
        let (store, prefix) = object_store::parse_url(&parsed).map_err(|e| bad(e.to_string()))?;
        let base = prefix.join(pipeline);
        let runtime = tokio::runtime::Builder::new_current_thread().build()?;
        Ok(Self { store: Arc::from(store), base, runtime })
    }

    fn shared_path(&self, name: &str) -> Path {
        self.base.clone().join("shared").join(name)
    }

    fn checkpoint_dir(&self, id: u64) -> Path {
        self.base.clone().join(format!("chk-{id}"))
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

    /// Read a shared file.
    pub fn get_shared(&self, name: &str) -> Result<Vec<u8>, CheckpointError> {
        let path = self.shared_path(name);
        self.runtime.block_on(async { Ok(self.store.get(&path).await?.bytes().await?.to_vec()) })
    }

    /// Store a file belonging to checkpoint `id` only.
    pub fn put_own(&self, id: u64, name: &str, bytes: Vec<u8>) -> Result<(), CheckpointError> {
        let path = self.checkpoint_dir(id).join(name);
        self.runtime.block_on(async { Ok(self.store.put(&path, PutPayload::from(bytes)).await.map(drop)?) })
    }

    /// Read a file of checkpoint `id`.
    pub fn get_own(&self, id: u64, name: &str) -> Result<Vec<u8>, CheckpointError> {
        let path = self.checkpoint_dir(id).join(name);
        self.runtime.block_on(async { Ok(self.store.get(&path).await?.bytes().await?.to_vec()) })
    }

    /// Mark a checkpoint complete by writing its metadata, last.
    pub fn commit(&self, metadata: &CheckpointMetadata) -> Result<(), CheckpointError> {
        let bytes = serde_json::to_vec_pretty(metadata)?;
        let path = self.checkpoint_dir(metadata.id).join(METADATA);
        self.runtime.block_on(async { Ok(self.store.put(&path, PutPayload::from(bytes)).await.map(drop)?) })
    }

    /// Every completed checkpoint, newest first. A checkpoint directory
    /// whose metadata is missing or unreadable is skipped with a warning.
    pub fn completed(&self) -> Result<Vec<CheckpointMetadata>, CheckpointError> {
        self.runtime.block_on(async {
            let objects: Vec<_> = self.store.list(Some(&self.base)).try_collect().await?;
            let mut ids: BTreeSet<u64> = BTreeSet::new();
            for object in &objects {
                let mut parts = object.location.parts().skip(self.base.parts().count());
                if let Some(id) = parts.next().and_then(|dir| dir.as_ref().strip_prefix("chk-").and_then(|n| n.parse().ok())) {
                    ids.insert(id);
                }
            }
            let mut completed = Vec::new();
            for id in ids.into_iter().rev() {
                let path = self.checkpoint_dir(id).join(METADATA);
                let read = match self.store.get(&path).await {
                    Ok(result) => result.bytes().await.map_err(CheckpointError::from).and_then(|b| Ok(serde_json::from_slice::<CheckpointMetadata>(&b)?)),
                    Err(e) => Err(e.into()),
                };
                match read {
                    Ok(metadata) if metadata.id == id => completed.push(metadata),
                    Ok(_) => tracing::warn!(checkpoint = id, "skipping checkpoint whose metadata names another id"),
                    Err(error) => tracing::warn!(checkpoint = id, %error, "skipping checkpoint without readable metadata"),
                }
            }
            Ok(completed)
        })
    }

    /// Keep the newest `keep` completed checkpoints: delete older ones
    /// (and any incomplete one older than the newest kept), then every
    /// shared file that neither a kept checkpoint nor `pinned` (savepoints)
    /// references.
    pub fn retain(&self, keep: usize, pinned: &[CheckpointMetadata]) -> Result<RetainReport, CheckpointError> {
        let completed = self.completed()?;
        let (kept, doomed) = completed.split_at(keep.min(completed.len()));
        let referenced: BTreeSet<&String> = kept.iter().chain(pinned).flat_map(|m| &m.shared_files).collect();
        let mut report = RetainReport::default();
        self.runtime.block_on(async {
            for metadata in doomed {
                // Metadata first: from then on the checkpoint is incomplete.
                self.store.delete(&self.checkpoint_dir(metadata.id).join(METADATA)).await?;
                let dir = self.checkpoint_dir(metadata.id);
                let files: Vec<_> = self.store.list(Some(&dir)).try_collect().await?;
                for file in files {
                    self.store.delete(&file.location).await?;
                }
                report.checkpoints.push(metadata.id);
            }
            let shared = self.base.clone().join("shared");
            let files: Vec<_> = self.store.list(Some(&shared)).try_collect().await?;
            for file in files {
                let name = file.location.filename().unwrap_or_default().to_string();
                if !referenced.contains(&name) {
                    self.store.delete(&file.location).await?;
                    report.shared_files.push(name);
                }
            }
            Ok::<_, CheckpointError>(())
        })?;
        report.shared_files.sort();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(id: u64, shared: &[&str]) -> CheckpointMetadata {
        CheckpointMetadata {
            id,
            completed_at: id as i64,
            shared_files: shared.iter().map(|s| s.to_string()).collect(),
            own_files: BTreeSet::new(),
            source_positions: serde_json::json!({ "offset": id }),
            size_bytes: 0,
            incremental_bytes: 0,
        }
    }

    fn file_storage(dir: &std::path::Path) -> CheckpointStorage {
        CheckpointStorage::open(&format!("file://{}", dir.display()), "orders").unwrap()
    }

    #[test]
    fn shared_files_upload_once_and_commit_marks_completion() {
        let dir = tempfile::tempdir().unwrap();
        let storage = file_storage(dir.path());
        assert!(storage.put_shared("000001.sst", b"a".to_vec()).unwrap());
        assert!(!storage.put_shared("000001.sst", b"a".to_vec()).unwrap(), "already stored");
        storage.put_own(1, "offsets", b"7".to_vec()).unwrap();
        assert!(storage.completed().unwrap().is_empty(), "no metadata, not complete");
        storage.commit(&metadata(1, &["000001.sst"])).unwrap();
        assert_eq!(storage.completed().unwrap(), vec![metadata(1, &["000001.sst"])]);
        assert_eq!(storage.get_shared("000001.sst").unwrap(), b"a");
        assert_eq!(storage.get_own(1, "offsets").unwrap(), b"7");
        assert!(dir.path().join("orders/chk-1/_metadata").exists(), "layout: <root>/<pipeline>/chk-N/");
        assert!(dir.path().join("orders/shared/000001.sst").exists());
    }

    #[test]
    fn unreadable_metadata_falls_back_to_the_previous_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let storage = file_storage(dir.path());
        storage.commit(&metadata(1, &[])).unwrap();
        storage.commit(&metadata(2, &[])).unwrap();
        std::fs::write(dir.path().join("orders/chk-2/_metadata"), b"{ truncated").unwrap();
        storage.put_own(3, "state", b"x".to_vec()).unwrap();
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![1]);
    }

    #[test]
    fn retention_deletes_only_unreferenced_shared_files() {
        let storage = CheckpointStorage::open("memory://", "orders").unwrap();
        for name in ["a", "b", "c", "d", "s"] {
            storage.put_shared(name, name.as_bytes().to_vec()).unwrap();
        }
        storage.commit(&metadata(1, &["a", "b"])).unwrap();
        storage.commit(&metadata(2, &["b", "c"])).unwrap();
        storage.commit(&metadata(3, &["c", "d"])).unwrap();
        let savepoint = metadata(0, &["s"]);
        let report = storage.retain(2, std::slice::from_ref(&savepoint)).unwrap();
        assert_eq!(report, RetainReport { checkpoints: vec![1], shared_files: vec!["a".to_string()] });
        let ids: Vec<u64> = storage.completed().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![3, 2]);
        assert!(storage.get_shared("b").is_ok() && storage.get_shared("s").is_ok() && storage.get_shared("a").is_err());
    }
}
