//! The on-disk layout of a pipeline's keyed state, and rescaling it.
//!
//! ```text
//! <state dir>/layout.json      {"max_parallelism":128,"parallelism":4}
//! <state dir>/subtask-<i>/     RocksDB holding only subtask i's key groups
//! ```
//!
//! `max_parallelism` is fixed for the life of the state. When a pipeline
//! restarts with another parallelism, every entry is moved to the database
//! of the subtask that now owns its key group (the first two bytes of every
//! state key), then the layout is switched over.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    subtask_for_key_group, KeyedStateBackend, RocksDbBackend, StateError, BROADCAST_KEY_GROUP,
};

/// Entries moved per write batch while rescaling.
const RESCALE_BATCH: usize = 10_000;

/// Why the state directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The state was created with another number of key groups.
    #[error("state in {dir} was created with max_parallelism {stored}, not {wanted}: it is fixed for the life of the state (start over with --fresh)")]
    MaxParallelism {
        /// The state directory.
        dir: PathBuf,
        /// What `layout.json` says.
        stored: u16,
        /// What the spec asks for.
        wanted: u16,
    },
    /// A file operation failed.
    #[error("state directory {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `layout.json` is unreadable.
    #[error("state layout {path} is corrupt: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// RocksDB failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// How the state is partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Number of key groups.
    pub max_parallelism: u16,
    /// Number of subtasks (databases).
    pub parallelism: u16,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LayoutError + '_ {
    move |source| LayoutError::Io { path: path.to_path_buf(), source }
}

/// Open the state in `dir` as `layout`, one database per subtask, creating
/// it, discarding it (`fresh`) or rescaling it as needed.
pub fn open_subtasks(
    dir: &Path,
    layout: Layout,
    fresh: bool,
) -> Result<Vec<RocksDbBackend>, LayoutError> {
    if fresh && dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io(dir))?;
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let file = dir.join("layout.json");
    match read_layout(&file)? {
        Some(stored) if stored.max_parallelism != layout.max_parallelism => {
            return Err(LayoutError::MaxParallelism {
                dir: dir.to_path_buf(),
                stored: stored.max_parallelism,
                wanted: layout.max_parallelism,
            });
        }
        Some(stored) if stored.parallelism != layout.parallelism => rescale(dir, stored, layout)?,
        Some(_) => {}
        None => write_layout(&file, layout)?,
    }
    (0..layout.parallelism).map(|i| Ok(RocksDbBackend::open(&subtask_dir(dir, i))?)).collect()
}

fn read_layout(file: &Path) -> Result<Option<Layout>, LayoutError> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LayoutError::Corrupt { path: file.to_path_buf(), message: e.to_string() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(file)(e)),
    }
}

fn write_layout(file: &Path, layout: Layout) -> Result<(), LayoutError> {
    let tmp = file.with_extension("json.tmp");
    let text = serde_json::to_vec(&layout)
        .map_err(|e| LayoutError::Corrupt { path: file.to_path_buf(), message: e.to_string() })?;
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, file).map_err(io(file))
}

fn rescale(dir: &Path, from: Layout, to: Layout) -> Result<(), LayoutError> {
    tracing::info!(from = from.parallelism, to = to.parallelism, "rescaling keyed state");
    let staging = dir.join(format!("rescale-{}", to.parallelism));
    let mut distributor = Distributor::create(&staging, to)?;
    for index in 0..from.parallelism {
        // Broadcast state is the same in every subtask: copied from the first.
        RocksDbBackend::open(&subtask_dir(dir, index))?.for_each(|key, value| {
            if index > 0 && key.get(..2) == Some(&BROADCAST_KEY_GROUP.to_be_bytes()[..]) {
                return Ok(());
            }
            distributor.add(key, value)
        })?;
    }
    distributor.finish()?;
    install(dir, &staging, to)
}

/// Builds the subtask databases of a layout from entries in any order,
/// writing each to the subtask that owns its key group (the first two
/// bytes of every state key), in batches.
pub struct Distributor {
    layout: Layout,
    targets: Vec<RocksDbBackend>,
    pending: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl Distributor {
    /// Empty databases for `layout` under `staging` (emptied first).
    pub fn create(staging: &Path, layout: Layout) -> Result<Self, LayoutError> {
        if staging.exists() {
            std::fs::remove_dir_all(staging).map_err(io(staging))?;
        }
        let targets = (0..layout.parallelism)
            .map(|i| RocksDbBackend::open(&subtask_dir(staging, i)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { layout, pending: vec![Vec::new(); targets.len()], targets })
    }

    /// Add one entry (an entry of broadcast state to every subtask).
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        let group = key.get(..2).map_or(0, |g| u16::from_be_bytes([g[0], g[1]]));
        if group == BROADCAST_KEY_GROUP {
            for target in 0..self.targets.len() {
                self.pending[target].push((key.to_vec(), value.to_vec()));
                if self.pending[target].len() >= RESCALE_BATCH {
                    flush_moves(&mut self.targets[target], &mut self.pending[target])?;
                }
            }
            return Ok(());
        }
        let target = usize::from(subtask_for_key_group(
            group,
            self.layout.max_parallelism,
            self.layout.parallelism,
        ));
        self.pending[target].push((key.to_vec(), value.to_vec()));
        if self.pending[target].len() >= RESCALE_BATCH {
            flush_moves(&mut self.targets[target], &mut self.pending[target])?;
        }
        Ok(())
    }

    /// Write what is pending and make it durable.
    pub fn finish(mut self) -> Result<(), StateError> {
        for (target, moves) in self.targets.iter_mut().zip(&mut self.pending) {
            flush_moves(target, moves)?;
            target.flush()?;
        }
        Ok(())
    }
}

/// Replace the subtask databases in `dir` by those built in `staging` (its
/// `subtask-<i>` directories, closed) and record `layout`.
pub fn install(dir: &Path, staging: &Path, layout: Layout) -> Result<(), LayoutError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let retired = dir.join("retired");
    if retired.exists() {
        std::fs::remove_dir_all(&retired).map_err(io(&retired))?;
    }
    std::fs::create_dir_all(&retired).map_err(io(&retired))?;
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if name.starts_with("subtask-") {
            std::fs::rename(&path, retired.join(&name)).map_err(io(&path))?;
        }
    }
    for index in 0..layout.parallelism {
        std::fs::rename(subtask_dir(staging, index), subtask_dir(dir, index))
            .map_err(io(staging))?;
    }
    write_layout(&dir.join("layout.json"), layout)?;
    std::fs::remove_dir_all(&retired).map_err(io(&retired))?;
    std::fs::remove_dir_all(staging).map_err(io(staging))
}

/// The directory of subtask `index`'s database under `dir`.
pub fn subtask_dir(dir: &Path, index: u16) -> PathBuf {
    dir.join(format!("subtask-{index}"))
}

fn flush_moves(
    target: &mut RocksDbBackend,
    moves: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<(), StateError> {
    target.write_batch(&mut moves.iter().map(|(k, v)| (k.as_slice(), Some(v.as_slice()))))?;
    moves.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{key_group, StateKey, StateKind};

    fn key(i: u32, max: u16) -> Vec<u8> {
        let user = i.to_string();
        StateKey::new(key_group(user.as_bytes(), max), "v", StateKind::Value, user.as_bytes(), b"")
            .encode()
    }

    #[test]
    fn rescaling_moves_every_entry_to_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let max = 16;
        let mut dbs =
            open_subtasks(dir.path(), Layout { max_parallelism: max, parallelism: 1 }, false)
                .unwrap();
        for i in 0..500u32 {
            dbs[0].put(&key(i, max), &i.to_le_bytes()).unwrap();
        }
        drop(dbs);
        for parallelism in [3u16, 2, 5] {
            let mut dbs =
                open_subtasks(dir.path(), Layout { max_parallelism: max, parallelism }, false)
                    .unwrap();
            let mut seen = 0;
            for (index, db) in dbs.iter_mut().enumerate() {
                db.for_each(|k, _| {
                    let group = u16::from_be_bytes([k[0], k[1]]);
                    assert_eq!(usize::from(subtask_for_key_group(group, max, parallelism)), index);
                    seen += 1;
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(seen, 500, "nothing lost or duplicated rescaling to {parallelism}");
        }
        let err = open_subtasks(dir.path(), Layout { max_parallelism: 32, parallelism: 5 }, false)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("max_parallelism 16"), "{err}");
        let fresh = open_subtasks(dir.path(), Layout { max_parallelism: 32, parallelism: 2 }, true)
            .unwrap();
        assert_eq!(fresh.len(), 2);
    }
}
