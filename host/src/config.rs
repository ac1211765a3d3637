//! Where the host keeps its files. Every default works on a laptop with no
//! services running.
//!
//! ```text
//! <data dir>/
//!   cache/components/<digest>-<engine>.cwasm   compiled functions
//!   pipelines/<name>/state/subtask-<i>/        RocksDB keyed state
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
