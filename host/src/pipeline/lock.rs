//! One process runs a pipeline at a time: an exclusive lock per pipeline
//! and data directory (`<data dir>/pipelines/<name>/lock`), taken before a
//! run touches its state, checkpoints or sinks. Two runners of one
//! pipeline would move each other's live RocksDB aside, delete each
//! other's checkpoints and truncate each other's output.
//!
//! The lock is the operating system's (`flock`), held by an open file: it
//! is released when the holder ends, however it ends (`kill -9`
//! included), so a lock never goes stale. The file holds the holder's pid
//! and whether `weir serve` runs the pipeline, to tell a refused process
//! whom to stop. It must never be deleted while it may be held (a new file
//! would be a second lock): deleting a pipeline leaves it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::Path;

use super::error::RunError;
use crate::config;

/// The exclusive right to run one pipeline on one data directory; held
/// until dropped (or the process ends).
#[derive(Debug)]
pub(crate) struct PipelineLock {
    _file: File,
}

/// Who holds a pipeline's lock, as its lock file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Holder {
    pid: u32,
    /// Run by `weir serve` (else by `weir run`).
    served: bool,
}

impl PipelineLock {
    /// Take pipeline `pipeline`'s lock on `data_dir` for this process (a
    /// `weir serve` if `served`), or say who holds it.
    pub(crate) fn acquire(data_dir: &Path, pipeline: &str, served: bool) -> Result<Self, RunError> {
        let path = config::pipeline_lock_path(data_dir, pipeline);
        let io = |source| RunError::Io { doing: "cannot open the pipeline's lock file", source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {
                let holder = Holder { pid: std::process::id(), served };
                let bytes = serde_json::to_vec(&holder).unwrap_or_default();
                file.set_len(0).and_then(|()| file.write_all(&bytes)).map_err(io)?;
                Ok(Self { _file: file })
            }
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = serde_json::from_str::<Holder>(&text).ok();
                let stop = match holder {
                    Some(Holder { served: true, .. }) => format!("weir pipeline stop {pipeline}"),
                    _ => format!("weir stop <spec> --data-dir {}", data_dir.display()),
                };
                Err(RunError::AlreadyRunning {
                    pipeline: pipeline.to_string(),
                    holder: match holder {
                        Some(Holder { pid, served: true }) => format!("pid {pid}, in `weir serve`"),
                        Some(Holder { pid, served: false }) => format!("pid {pid}"),
                        None => "by another process".to_string(),
                    },
                    data_dir: data_dir.to_path_buf(),
                    stop,
                })
            }
            Err(TryLockError::Error(source)) => {
                Err(RunError::Io { doing: "cannot lock the pipeline's lock file", source })
            }
        }
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
        assert!(
            message.starts_with(&format!(
                "pipeline orders is already running (pid {pid}) on data dir {}",
                dir.path().display()
            )),
            "{message}"
        );
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
}
