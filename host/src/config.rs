//! Where the host keeps its files. Every default works on a laptop with no
//! services running.
//!
//! ```text
//! <data dir>/
//!   cache/components/<digest>-<engine>.cwasm   compiled functions
//!   pipelines/<name>/state/subtask-<i>/        RocksDB keyed state
//!   pipelines/<name>/local-checkpoints/chk-<N>/ local copy of the newest checkpoint
//!   pipelines/<name>/control/                  requests to the running pipeline
//!   checkpoints/<name>/…                       checkpoint storage (default)
//! ```

use std::path::{Path, PathBuf};

/// Environment variable that overrides the default data directory.
pub const DATA_DIR_ENV: &str = "WEIR_DATA_DIR";

/// The data directory when none is given: `$WEIR_DATA_DIR`, else
/// `$XDG_DATA_HOME/weir`, else `~/.local/share/weir`, else `./.weir`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("weir");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/weir"),
        None => PathBuf::from(".weir"),
    }
}

/// Directory of compiled-function cache files.
pub fn component_cache_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("cache").join("components")
}

/// Directory of one pipeline's keyed state.
pub fn pipeline_state_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    data_dir.join("pipelines").join(pipeline).join("state")
}

/// Directory of one pipeline's local checkpoint copies.
pub fn local_checkpoints_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    data_dir.join("pipelines").join(pipeline).join("local-checkpoints")
}

/// Directory through which a running pipeline takes requests.
pub fn control_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    data_dir.join("pipelines").join(pipeline).join("control")
}

/// The default checkpoint storage: `file://<data dir>/checkpoints`.
pub fn default_checkpoint_storage(data_dir: &Path) -> std::io::Result<String> {
    let dir = data_dir.join("checkpoints");
    std::fs::create_dir_all(&dir)?;
    Ok(format!("file://{}", std::fs::canonicalize(dir)?.display()))
}
