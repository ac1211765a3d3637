//! One process runs a pipeline at a time: an exclusive lock per pipeline
//! and data directory (`<data dir>/pipelines/<name>/lock`), taken before a
//! run touches its state, checkpoints or sinks. Two runners of one
//! pipeline would move each other's live RocksDB aside, delete each
//! other's checkpoints and truncate each other's output. Likewise one
//! `weir serve` at a time serves a data directory (`<data dir>/api/lock`):
//! a second would resume, fail and rewrite the first one's pipelines.
//!
//! The locks are the operating system's (`flock`), held by an open file:
//! released when the holder ends, however it ends (`kill -9` included), so
//! a lock never goes stale. The file holds the holder's pid and whether it
//! is a `weir serve`, to tell a refused process whom to stop. A lock file
//! must never be deleted while it may be held (a new file would be a
//! second lock): deleting a pipeline leaves it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::config;

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (or run) holds the pipeline's lock.
    #[error("pipeline {pipeline} is already running ({holder}) on data dir {data_dir}; stop it with `{stop}` first", data_dir = data_dir.display())]
    PipelineRunning {
        /// The pipeline.
        pipeline: String,
        /// Who runs it: its pid, and whether in `weir serve`.
        holder: String,
        /// The data directory.
        data_dir: PathBuf,
        /// The command that stops it.
        stop: String,
    },
    /// Another `weir serve` serves the data directory.
    #[error("data dir {data_dir} is already served by another `weir serve` ({holder}); stop it first, or give this one another --data-dir", data_dir = data_dir.display())]
    Served {
        /// Its pid.
        holder: String,
        /// The data directory.
        data_dir: PathBuf,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {path}: {source}", path = path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The exclusive right to run one pipeline on one data directory; held
/// until dropped (or the process ends).
#[derive(Debug)]
pub(crate) struct PipelineLock {
    _file: File,
}

/// The exclusive right to serve one data directory with `weir serve`.
#[derive(Debug)]
pub(crate) struct ServerLock {
    _file: File,
}

/// Who holds a lock, as its lock file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Holder {
    pid: u32,
    /// A `weir serve` (else a `weir run`).
    served: bool,
}

impl Holder {
    /// How a refused process is told of `holder`.
    fn describe(holder: Option<Self>) -> String {
        match holder {
            Some(Holder { pid, served: true }) => format!("pid {pid}, in `weir serve`"),
            Some(Holder { pid, served: false }) => format!("pid {pid}"),
            None => "by another process".to_string(),
        }
    }
}

impl PipelineLock {
    /// Take pipeline `pipeline`'s lock on `data_dir` for this process (a
    /// `weir serve` if `served`), or say who holds it.
    pub(crate) fn acquire(
        data_dir: &Path,
        pipeline: &str,
        served: bool,
    ) -> Result<Self, LockError> {
        let path = config::pipeline_lock_path(data_dir, pipeline);
        match try_lock(&path, served)? {
            Ok(file) => Ok(Self { _file: file }),
            Err(holder) => Err(LockError::PipelineRunning {
                pipeline: pipeline.to_string(),
                holder: Holder::describe(holder),
                data_dir: data_dir.to_path_buf(),
                stop: match holder {
                    Some(Holder { served: true, .. }) => format!("weir pipeline stop {pipeline}"),
                    _ => format!("weir stop <spec> --data-dir {}", data_dir.display()),
                },
            }),
        }
    }
}

impl ServerLock {
    /// Take `data_dir`'s server lock for this process, or say who holds it.
    pub(crate) fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        match try_lock(&config::server_lock_path(data_dir), true)? {
            Ok(file) => Ok(Self { _file: file }),
            Err(holder) => Err(LockError::Served {
                holder: Holder::describe(holder),
                data_dir: data_dir.to_path_buf(),
            }),
        }
    }
}

/// Lock `path` (created if need be) and write this process into it; or,
/// if another holds it, who does (if its file says).
fn try_lock(path: &Path, served: bool) -> Result<Result<File, Option<Holder>>, LockError> {
    let io = |source| LockError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {
            let holder = Holder { pid: std::process::id(), served };
            let bytes = serde_json::to_vec(&holder).unwrap_or_default();
            file.set_len(0).and_then(|()| file.write_all(&bytes)).map_err(io)?;
            Ok(Ok(file))
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Ok(Err(serde_json::from_str(&text).ok()))
        }
        Err(TryLockError::Error(source)) => Err(io(source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = PipelineLock::acquire(dir.path(), "orders", false).unwrap();
        let error = PipelineLock::acquire(dir.path(), "orders", false).unwrap_err();
        let message = error.to_string();
        let pid = std::process::id();
        let running = format!(
            "pipeline orders is already running (pid {pid}) on data dir {}",
            dir.path().display()
        );
        assert!(message.starts_with(&running), "{message}");
        assert!(message.contains("weir stop <spec> --data-dir"), "{message}");
        let other = PipelineLock::acquire(dir.path(), "payments", true).expect("another pipeline");
        drop(first);
        let again = PipelineLock::acquire(dir.path(), "orders", true).expect("free again");
        let error = PipelineLock::acquire(dir.path(), "payments", false).unwrap_err().to_string();
        assert!(
            error.contains(&format!("(pid {pid}, in `weir serve`)"))
                && error.contains("weir pipeline stop payments"),
            "{error}"
        );
        drop((again, other));
    }

    #[test]
    fn one_server_per_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let first = ServerLock::acquire(dir.path()).unwrap();
        let error = ServerLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains(&format!(
                "already served by another `weir serve` (pid {}",
                std::process::id()
            )),
            "{error}"
        );
        drop(first);
        ServerLock::acquire(dir.path()).expect("free again");
    }
}
