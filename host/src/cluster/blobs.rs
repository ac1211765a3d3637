//! A cluster's functions in object storage, content-addressed: each stored
//! once as `<storage>/functions/<sha256>.wasm`, written create-only, and
//! checked against its name when read, so every worker runs exactly the
//! bytes that were deployed (docs/cluster.md, "Control plane").

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::checkpoint::{parse_store, CheckpointError};
use crate::runtime::digest;

/// Why a function could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The storage URL is not usable.
    #[error(transparent)]
    Url(#[from] CheckpointError),
    /// The store failed.
    #[error("function storage {location}: {source}")]
    Store {
        /// Where.
        location: String,
        /// What the store said.
        source: object_store::Error,
    },
    /// Stored bytes that are not what their name says.
    #[error("function {location} does not hash to its name (sha256 {found}): the stored copy was changed or damaged; deploy the function again")]
    Mismatch {
        /// Where.
        location: String,
        /// The SHA-256 of what was read.
        found: String,
    },
    /// A name that is not a SHA-256.
    #[error("{0:?} is not the hex SHA-256 of a function")]
    NotADigest(String),
}

/// The functions of one cluster.
pub struct FunctionBlobs {
    store: Arc<dyn ObjectStore>,
    root: String,
    base: Path,
    runtime: tokio::runtime::Runtime,
}

impl FunctionBlobs {
    /// The functions under storage `url` (`s3://bucket/prefix`,
    /// `file:///dir`, as checkpoint storage takes them).
    pub fn open(url: &str) -> Result<Self, BlobError> {
        let (store, root, prefix) = parse_store(url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(CheckpointError::Io)?;
        Ok(FunctionBlobs { store, root, base: prefix.join("functions"), runtime })
    }

    fn path(&self, sha256: &str) -> Result<Path, BlobError> {
        let valid = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(BlobError::NotADigest(sha256.chars().take(80).collect()));
        }
        Ok(self.base.clone().join(format!("{}.wasm", sha256.to_ascii_lowercase())))
    }

    fn describe(&self, path: &Path) -> String {
        format!("{}/{path}", self.root)
    }

    /// Store `bytes` unless stored already; their SHA-256 (hex).
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        let sha256 = digest(bytes);
        let path = self.path(&sha256)?;
        let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let payload = PutPayload::from(bytes.to_vec());
        match self.runtime.block_on(self.store.put_opts(&path, payload, create)) {
            // Already there: the same name is the same bytes.
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(sha256),
            Err(object_store::Error::NotImplemented { .. }) => {
                let payload = PutPayload::from(bytes.to_vec());
                self.runtime.block_on(self.store.put(&path, payload)).map_err(|source| {
                    BlobError::Store { location: self.describe(&path), source }
                })?;
                Ok(sha256)
            }
            Err(source) => Err(BlobError::Store { location: self.describe(&path), source }),
        }
    }

    /// The bytes stored as `sha256`, checked against it.
    pub fn get(&self, sha256: &str) -> Result<Vec<u8>, BlobError> {
        let path = self.path(sha256)?;
        let location = self.describe(&path);
        let bytes = self
            .runtime
            .block_on(async { self.store.get(&path).await?.bytes().await })
            .map_err(|source| BlobError::Store { location: location.clone(), source })?;
        let found = digest(&bytes);
        if !found.eq_ignore_ascii_case(sha256) {
            return Err(BlobError::Mismatch { location, found });
        }
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_stored_once_by_content_and_checked_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = FunctionBlobs::open(&format!("file://{}", dir.path().display())).unwrap();
        let sha = blobs.put(b"a function").unwrap();
        assert_eq!(blobs.put(b"a function").unwrap(), sha, "stored once");
        assert_eq!(blobs.get(&sha).unwrap(), b"a function");
        // Damaged in storage: refused, naming why.
        std::fs::write(dir.path().join("functions").join(format!("{sha}.wasm")), b"changed")
            .unwrap();
        assert!(matches!(blobs.get(&sha), Err(BlobError::Mismatch { .. })));
        assert!(matches!(blobs.get("../../etc/passwd"), Err(BlobError::NotADigest(_))));
    }
}
