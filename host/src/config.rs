//! Where the host keeps its files. Every default works on a laptop with no
//! services running. Every path inside the data directory is built here.
//!
//! ```text
//! <data dir>/
//!   cache/components/<digest>-<engine>.cwasm    compiled functions
//!   functions/blobs/<sha256>.wasm               uploaded functions (HTTP API)
//!   functions/index.json                        their names and versions
//!   api/pipelines/<name>.json                   pipelines deployed through the HTTP API
//!   api/lock                                    held by the `weir serve` serving the directory
//!   pipelines/<name>/state/layout.json          key groups and parallelism of the state
//!   pipelines/<name>/state/subtask-<i>/         RocksDB keyed state of subtask i
//!   pipelines/<name>/local-checkpoints/chk-<N>/ local copy of the newest checkpoint
//!   pipelines/<name>/control/                   requests to the running pipeline
//!   pipelines/<name>/lock                       held by the process running the pipeline
//!   checkpoints/<name>/…                        checkpoint storage (default)
//!   kafka-transactional-ids/<prefix>            the pipeline owning each Kafka id prefix
//!   files/…                                     the files root: tenants' files (HTTP API)
//! ```
//!
//! Relative paths in a spec deployed through the HTTP API (`resources`,
//! file sources and sinks) are resolved inside the files root
//! `<data dir>/files/`, which holds nothing of the server's own; what such
//! a spec may reach is decided by [`crate::serve::grants`].

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

/// Directory of the function store (uploaded functions).
pub fn function_store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("functions")
}

/// Directory of the pipeline store (pipelines deployed through the API).
pub fn pipeline_store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("api").join("pipelines")
}

/// Directory of everything one pipeline keeps locally (state, local
/// checkpoint copies, control files).
pub fn pipeline_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    data_dir.join("pipelines").join(pipeline)
}

/// Directory of one pipeline's keyed state.
pub fn pipeline_state_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    pipeline_dir(data_dir, pipeline).join("state")
}

/// Directory of the keyed state of a graph pipeline's stages (one
/// directory per stage uid).
pub fn pipeline_operators_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    pipeline_dir(data_dir, pipeline).join("operators")
}

/// Directory of one pipeline's local checkpoint copies.
pub fn local_checkpoints_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    pipeline_dir(data_dir, pipeline).join("local-checkpoints")
}

/// Directory through which a running pipeline takes requests.
pub fn control_dir(data_dir: &Path, pipeline: &str) -> PathBuf {
    pipeline_dir(data_dir, pipeline).join("control")
}

/// The lock file that one process at a time holds to run a pipeline.
pub fn pipeline_lock_path(data_dir: &Path, pipeline: &str) -> PathBuf {
    pipeline_dir(data_dir, pipeline).join("lock")
}

/// The lock file that one `weir serve` at a time holds to serve the data
/// directory.
pub fn server_lock_path(data_dir: &Path) -> PathBuf {
    data_dir.join("api").join("lock")
}

/// Directory recording which pipeline owns each Kafka
/// `transactional_id_prefix` on this host.
pub fn kafka_transactional_ids_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("kafka-transactional-ids")
}

/// The files root: where relative paths of a spec deployed through the
/// HTTP API resolve, and what such a spec may read and write by default.
pub fn files_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("files")
}

/// Directory of the default checkpoint storage.
pub fn checkpoints_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("checkpoints")
}

/// The default checkpoint storage: `file://<data dir>/checkpoints`.
pub fn default_checkpoint_storage(data_dir: &Path) -> std::io::Result<String> {
    let dir = checkpoints_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    Ok(format!("file://{}", std::fs::canonicalize(dir)?.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_directories_of_earlier_runs_are_found_where_they_were() {
        let data = Path::new("/data");
        assert_eq!(component_cache_dir(data), Path::new("/data/cache/components"));
        assert_eq!(function_store_dir(data), Path::new("/data/functions"));
        assert_eq!(pipeline_store_dir(data), Path::new("/data/api/pipelines"));
        assert_eq!(pipeline_state_dir(data, "p"), Path::new("/data/pipelines/p/state"));
        assert_eq!(
            local_checkpoints_dir(data, "p"),
            Path::new("/data/pipelines/p/local-checkpoints")
        );
        assert_eq!(control_dir(data, "p"), Path::new("/data/pipelines/p/control"));
        assert_eq!(pipeline_lock_path(data, "p"), Path::new("/data/pipelines/p/lock"));
        assert_eq!(server_lock_path(data), Path::new("/data/api/lock"));
        assert_eq!(kafka_transactional_ids_dir(data), Path::new("/data/kafka-transactional-ids"));
        assert_eq!(checkpoints_dir(data), Path::new("/data/checkpoints"));
        assert_eq!(files_dir(data), Path::new("/data/files"));
    }
}
