//! The pipeline store: what the HTTP API deployed, so a restarted server
//! runs again what was running.
//!
//! ```text
//! <data dir>/api/pipelines/<name>.json   one record per pipeline, written atomically
//! ```
//!
//! A record keeps the spec as the user sent it plus what deploys and
//! upgrades decided on top of it (function versions pinned, parallelism,
//! the savepoint to start from), and the pipeline's last known state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::names::is_valid_name;

/// Where a pipeline stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineState {
    /// Running (or starting); resumed when the server restarts.
    Running,
    /// Its bounded input is done and all its output committed.
    Finished,
    /// Stopped on request.
    Stopped,
    /// Stopped by an error (see the record's `failure`).
    Failed,
}

impl PipelineState {
    /// Every state.
    pub const ALL: [PipelineState; 4] = [
        PipelineState::Running,
        PipelineState::Finished,
        PipelineState::Stopped,
        PipelineState::Failed,
    ];

    /// Its name, as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            PipelineState::Running => "running",
            PipelineState::Finished => "finished",
            PipelineState::Stopped => "stopped",
            PipelineState::Failed => "failed",
        }
    }
}

/// A snapshot a pipeline is to start from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RestorePoint {
    /// Its location (path or URL).
    pub location: String,
    /// Its id: checkpoints with higher ids are newer.
    pub id: u64,
}

/// One deployed pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineRecord {
    /// The pipeline's name (the spec's `name`).
    pub name: String,
    /// The spec as deployed (YAML or JSON text).
    pub spec: String,
    /// The version of each stored function, by spec field (`key`, `process`, …).
    pub pins: BTreeMap<String, u32>,
    /// Parallelism set by an upgrade, overriding the spec's.
    #[serde(default)]
    pub parallelism: Option<u16>,
    /// Start from this snapshot unless a newer checkpoint exists (set by
    /// upgrades and deploys from a savepoint).
    #[serde(default)]
    pub restore: Option<RestorePoint>,
    /// The last known state.
    pub state: PipelineState,
    /// Why it failed.
    #[serde(default)]
    pub failure: Option<String>,
    /// The newest savepoint taken through the API.
    #[serde(default)]
    pub last_savepoint: Option<String>,
    /// Deploy time, ms since the epoch.
    pub deployed_at: i64,
    /// 1 at deploy, +1 per upgrade.
    pub generation: u32,
}

/// The records of one data directory.
pub struct PipelineStore {
    dir: Dir,
    path: PathBuf,
}

impl PipelineStore {
    /// Open (creating) the store under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let path = crate::config::pipeline_store_dir(data_dir);
        let io = |source| StoreError::Io { path: path.clone(), source };
        std::fs::create_dir_all(&path).map_err(io)?;
        let dir = Dir::open_ambient_dir(&path, ambient_authority()).map_err(io)?;
        Ok(Self { dir, path })
    }

    fn io(&self) -> impl Fn(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io { path: self.path.clone(), source }
    }

    fn file(name: &str) -> Result<String, StoreError> {
        is_valid_name(name)
            .then(|| format!("{name}.json"))
            .ok_or_else(|| StoreError::InvalidName(name.chars().take(80).collect()))
    }

    /// Every record, by name. An unreadable record is skipped with a warning.
    pub fn list(&self) -> Result<BTreeMap<String, PipelineRecord>, StoreError> {
        let mut records = BTreeMap::new();
        for entry in self.dir.entries().map_err(self.io())? {
            let name = entry.map_err(self.io())?.file_name();
            let Some(stem) =
                name.to_str().and_then(|n| n.strip_suffix(".json")).filter(|n| is_valid_name(n))
            else {
                continue;
            };
            let parsed = self.dir.read(&name).map_err(|e| e.to_string()).and_then(|bytes| {
                serde_json::from_slice::<PipelineRecord>(&bytes).map_err(|e| e.to_string())
            });
            match parsed {
                Ok(record) if record.name == stem => {
                    records.insert(record.name.clone(), record);
                }
                Ok(_) => tracing::warn!(
                    file = stem,
                    "skipping a pipeline record that names another pipeline"
                ),
                Err(error) => {
                    tracing::warn!(file = stem, %error, "skipping an unreadable pipeline record")
                }
            }
        }
        Ok(records)
    }

    /// Write `record` (replacing the one of the same name).
    pub fn put(&self, record: &PipelineRecord) -> Result<(), StoreError> {
        let file = Self::file(&record.name)?;
        let bytes =
            serde_json::to_vec_pretty(record).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        super::write_atomically(&self.dir, &file, &bytes).map_err(self.io())
    }

    /// Remove the record of `name` (no error if there is none).
    pub fn delete(&self, name: &str) -> Result<(), StoreError> {
        match self.dir.remove_file(Self::file(name)?) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.io()(e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record of a pipeline using function `revenue`, versions pinned.
    pub(crate) fn record(name: &str) -> PipelineRecord {
        PipelineRecord {
            name: name.to_string(),
            spec: format!("name: {name}\nsource: {{ type: generator, count: 10 }}\nkey: {{ function: revenue }}\nprocess: {{ function: revenue }}\nsink: {{ type: discard }}\n"),
            pins: BTreeMap::from([("key".to_string(), 1), ("process".to_string(), 2)]),
            parallelism: Some(3),
            restore: None,
            state: PipelineState::Running,
            failure: None,
            last_savepoint: None,
            deployed_at: 1,
            generation: 1,
        }
    }

    #[test]
    fn records_round_trip_and_apply_pins() {
        let dir = tempfile::tempdir().unwrap();
        let store = PipelineStore::open(dir.path()).unwrap();
        store.put(&record("orders")).unwrap();
        store.put(&record("payments")).unwrap();
        store.delete("payments").unwrap();
        store.delete("never-there").unwrap();
        let reopened = PipelineStore::open(dir.path()).unwrap().list().unwrap();
        assert_eq!(reopened.keys().collect::<Vec<_>>(), ["orders"]);
        assert_eq!(reopened["orders"], record("orders"));
    }

    #[test]
    fn names_never_become_paths() {
        let dir = tempfile::tempdir().unwrap();
        let store = PipelineStore::open(dir.path()).unwrap();
        for name in ["../../etc/passwd", "a/b", "UPPER", ""] {
            assert!(
                matches!(store.put(&record(name)), Err(StoreError::InvalidName(_))),
                "{name:?}"
            );
            assert!(matches!(store.delete(name), Err(StoreError::InvalidName(_))), "{name:?}");
        }
        std::fs::write(dir.path().join("api/pipelines/broken.json"), b"{not json").unwrap();
        assert!(store.list().unwrap().is_empty(), "an unreadable record is skipped");
    }
}
