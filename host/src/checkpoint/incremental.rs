//! Incremental RocksDB snapshots: upload a subtask's local checkpoint,
//! sending only SST files not stored already, and bring one back.
//!
//! SST files never change once written, so each is stored once under
//! `shared/<xxh3-128 of its bytes>.sst` and referenced by every checkpoint
//! that contains it; so are changelogs (`.wcl`, see
//! [`changelog`](crate::state::changelog)). The small mutable files (MANIFEST, CURRENT, OPTIONS)
//! go under the checkpoint's own directory as `subtask-<i>/<name>`. Naming
//! shared files by content (not by RocksDB's file number) keeps a restored
//! database, which reuses file numbers, from clashing with files a crashed
//! run uploaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use object_store::path::Path as StorePath;

use super::metadata::StoredFile;
use super::{CheckpointError, CheckpointStorage};

/// What one subtask's upload did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// The files of the checkpoint, by name.
    pub files: Vec<StoredFile>,
    /// Bytes of all of them.
    pub size: u64,
    /// Bytes actually sent.
    pub sent: u64,
}

/// SST files of one subtask's live database already in shared storage, by
/// local file name: reused without reading them again.
pub type KnownFiles = HashMap<String, StoredFile>;

/// The extension under which a file that never changes once written (an
/// SST, a changelog) is stored in shared storage; `None` for the others.
fn immutable_extension(name: &str) -> Option<&'static str> {
    if name.ends_with(".sst") {
        Some("sst")
    } else if crate::state::changelog::is_changelog(name) {
        Some("wcl")
    } else {
        None
    }
}

/// XXH3-128 of the file at `path`, read through a small buffer (no copy
/// of the whole file in memory).
fn hash_file(path: &Path) -> std::io::Result<u128> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buffer = vec![0; 1 << 16];
    loop {
        match file.read(&mut buffer)? {
            0 => return Ok(hasher.digest128()),
            read => hasher.update(&buffer[..read]),
        }
    }
}

/// Upload the RocksDB checkpoint in `local` as subtask `subtask`'s part of
/// the snapshot in `dir`. `known` holds the SSTs earlier checkpoints of the
/// same database stored, and is updated.
pub fn upload(
    storage: &CheckpointStorage,
    dir: &StorePath,
    subtask: usize,
    local: &Path,
    known: &mut KnownFiles,
) -> Result<Uploaded, CheckpointError> {
    let mut uploaded = Uploaded::default();
    let mut now_known = KnownFiles::new();
    let mut names: Vec<(String, PathBuf, u64)> = Vec::new();
    for entry in std::fs::read_dir(local)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_file() {
            names.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
                metadata.len(),
            ));
        }
    }
    names.sort();
    for (name, path, size) in names {
        let stored = if let Some(extension) = immutable_extension(&name) {
            match known.get(&name).filter(|f| f.size == size) {
                Some(file) => file.clone(),
                None => {
                    let shared = storage.shared_name(hash_file(&path)?, extension);
                    if storage.put_shared_file(&shared, &path)? {
                        uploaded.sent += size;
                    }
                    StoredFile { name: name.clone(), shared: Some(shared), size }
                }
            }
        } else {
            storage.put(dir, &format!("subtask-{subtask}/{name}"), std::fs::read(&path)?)?;
            uploaded.sent += size;
            StoredFile { name: name.clone(), shared: None, size }
        };
        uploaded.size += size;
        if stored.shared.is_some() {
            now_known.insert(name, stored.clone());
        }
        uploaded.files.push(stored);
    }
    *known = now_known;
    Ok(uploaded)
}

/// Write subtask `subtask`'s database of the snapshot in `dir` into the new
/// directory `target`. Files found with the right size in `local_copy` (the
/// local checkpoint the snapshot was uploaded from, if there may be one)
/// are hard-linked (SSTs) or copied instead of downloaded; `cancelled` is
/// asked before each file. Returns the SSTs the snapshot stores.
pub fn download(
    storage: &CheckpointStorage,
    dir: &StorePath,
    subtask: usize,
    files: &[StoredFile],
    local_copy: Option<&Path>,
    target: &Path,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<KnownFiles, CheckpointError> {
    std::fs::create_dir_all(target)?;
    let mut known = KnownFiles::new();
    for file in files {
        if cancelled() {
            return Err(CheckpointError::Cancelled);
        }
        if file.name.contains('/') || file.name.starts_with('.') {
            return Err(CheckpointError::Corrupt(format!(
                "file name {:?} in checkpoint metadata",
                file.name
            )));
        }
        let destination = target.join(&file.name);
        let local = local_copy
            .map(|dir| dir.join(&file.name))
            .filter(|local| std::fs::metadata(local).is_ok_and(|m| m.len() == file.size));
        match (&file.shared, local) {
            (Some(_), Some(local)) => std::fs::hard_link(&local, &destination)
                .or_else(|_| std::fs::copy(&local, &destination).map(drop))?,
            (None, Some(local)) => std::fs::copy(&local, &destination).map(drop)?,
            (Some(shared), None) => {
                crate::files::write(&destination, &storage.get_shared(shared)?)?
            }
            (None, None) => crate::files::write(
                &destination,
                &storage.get_file(dir, &format!("subtask-{subtask}/{}", file.name))?,
            )?,
        }
        if std::fs::metadata(&destination)?.len() != file.size {
            return Err(CheckpointError::Corrupt(format!(
                "{} has another size than the checkpoint recorded",
                file.name
            )));
        }
        if file.shared.is_some() {
            known.insert(file.name.clone(), file.clone());
        }
    }
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{KeyedStateBackend, RocksDbBackend};

    #[test]
    fn files_hash_as_their_bytes_do() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("f"), &bytes).unwrap();
        assert_eq!(hash_file(&dir.path().join("f")).unwrap(), xxhash_rust::xxh3::xxh3_128(&bytes));
    }

    #[test]
    fn a_small_change_uploads_far_less_than_the_state_and_restores_exactly() {
        let local_store = tempfile::tempdir().unwrap();
        upload_and_restore(&CheckpointStorage::open("memory://", "p").unwrap(), None);
        let url = format!("file://{}", local_store.path().display());
        upload_and_restore(
            &CheckpointStorage::open(&url, "p").unwrap(),
            Some(&local_store.path().join("p").join("shared")),
        );
    }

    /// Upload two checkpoints of a database to `storage` and restore the
    /// second; `local_shared`: where a local `storage` keeps shared files
    /// (they must be links to the checkpoint's own).
    fn upload_and_restore(storage: &CheckpointStorage, local_shared: Option<&Path>) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("live")).unwrap();
        for i in 0..20_000u32 {
            db.put(format!("key-{i:08}").as_bytes(), &[i as u8; 100]).unwrap();
        }
        let mut known = KnownFiles::new();
        db.checkpoint(&dir.path().join("chk-1"), crate::state::SnapshotForm::Database).unwrap();
        let first =
            upload(storage, &storage.checkpoint_dir(1), 0, &dir.path().join("chk-1"), &mut known)
                .unwrap();
        assert_eq!(first.sent, first.size, "the first checkpoint sends everything");
        if let Some(shared) = local_shared {
            use std::os::unix::fs::MetadataExt;
            let files: Vec<_> =
                std::fs::read_dir(shared).unwrap().map(|e| e.unwrap().path()).collect();
            assert!(
                !files.is_empty()
                    && files.iter().all(|f| std::fs::metadata(f).unwrap().nlink() >= 2),
                "linked, not copied: {files:?}"
            );
        }
        db.put(b"key-00000007", b"changed").unwrap();
        db.checkpoint(&dir.path().join("chk-2"), crate::state::SnapshotForm::Database).unwrap();
        let second =
            upload(storage, &storage.checkpoint_dir(2), 0, &dir.path().join("chk-2"), &mut known)
                .unwrap();
        assert!(
            second.sent * 10 < second.size,
            "incremental: sent {} of {}",
            second.sent,
            second.size
        );

        let restored = dir.path().join("restored");
        let go_on = || false;
        download(storage, &storage.checkpoint_dir(2), 0, &second.files, None, &restored, &go_on)
            .unwrap();
        let copy = RocksDbBackend::open(&restored).unwrap();
        assert_eq!(copy.get(b"key-00000007").unwrap().as_deref(), Some(&b"changed"[..]));
        assert_eq!(
            copy.get(b"key-00019999").unwrap().as_deref(),
            Some(&[19_999u32 as u8; 100][..])
        );
        let linked = dir.path().join("linked");
        download(
            storage,
            &storage.checkpoint_dir(2),
            0,
            &second.files,
            Some(&dir.path().join("chk-2")),
            &linked,
            &go_on,
        )
        .unwrap();
        // Cancelled, a restore stops before the next file.
        let cancelled = download(
            storage,
            &storage.checkpoint_dir(2),
            0,
            &second.files,
            None,
            &dir.path().join("cancelled"),
            &|| true,
        );
        assert!(matches!(cancelled, Err(CheckpointError::Cancelled)));
        assert_eq!(
            RocksDbBackend::open(&linked).unwrap().get(b"key-00000001").unwrap().as_deref(),
            Some(&[1u8; 100][..])
        );
    }
}
