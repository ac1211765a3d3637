//! The function store: uploaded functions, content-addressed and versioned
//! by name.
//!
//! ```text
//! <data dir>/functions/blobs/<sha256>.wasm   each component once (componentized)
//! <data dir>/functions/index.json            name → versions (digest, worlds, size, time)
//! ```
//!
//! A cluster's server (`weir serve --cluster`) keeps the same index in the
//! cluster's control topic (a `function/<name>` record per function, each
//! change one transaction) and the components in the cluster's storage
//! (`<storage>/functions/<sha256>.wasm`), where every worker fetches them
//! by digest: a [`SharedFunctions`] (`cluster::functions`). Everything else — validation, versions,
//! idempotent uploads, deletes — is the same code for both.
//!
//! An upload is validated (componentized if it is a core module, compiled
//! and linked, which also fills the compiled-code cache) before anything is
//! stored. Uploading the bytes a name's newest version already has is a
//! no-op that returns that version. Names are checked (`[a-z0-9-]{1,63}`)
//! and never become paths: files are only reached through a `cap-std`
//! directory handle on the store, under names the store makes itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::runtime::{componentize, digest, FunctionLoader, LoadError};

/// Why the store refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A function name outside `[a-z0-9-]{1,63}`.
    #[error("invalid function name {0:?}: use {rule}", rule = crate::names::NAME_RULE)]
    InvalidName(String),
    /// The upload is not a usable function.
    #[error(transparent)]
    Invalid(#[from] LoadError),
    /// No such function (or version).
    #[error("no function {0}")]
    NotFound(String),
    /// The function is still used by pipelines.
    #[error("function {name} is used by pipeline(s) {}", pipelines.join(", "))]
    InUse {
        /// The function.
        name: String,
        /// The pipelines using it.
        pipelines: Vec<String>,
    },
    /// Reading or writing the store failed.
    #[error("function store {path}: {source}")]
    Io {
        /// The store's directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The index could not be read.
    #[error("function store index is corrupt: {0}")]
    Corrupt(String),
    /// The cluster's control topic or storage failed.
    #[error("the cluster's function store: {0}")]
    Cluster(String),
}

/// A decision on one function's record, given every function's: the
/// record to write (`Some(None)`: delete it), or `None` to write nothing.
pub type Decide<'a> =
    dyn FnMut(&BTreeMap<String, Vec<u8>>) -> Result<Option<Option<Vec<u8>>>, StoreError> + 'a;

/// Where a cluster keeps the function store shared by its servers
/// (`cluster::functions` implements it on its control topic and storage).
pub trait SharedFunctions: Send + Sync {
    /// Every function's versions, by name, as [`SharedFunctions::change`]
    /// wrote them (JSON).
    fn read(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError>;
    /// Change function `name`'s record as `decide` says, given every
    /// function's: one atomic read-decide-write (`decide` may run more
    /// than once).
    fn change(&self, name: &str, decide: &mut Decide<'_>) -> Result<(), StoreError>;
    /// Store `component` unless it is stored; its SHA-256 (hex).
    fn put(&self, component: &[u8]) -> Result<String, StoreError>;
    /// The component stored as `sha256`, checked against it.
    fn get(&self, sha256: &str) -> Result<Vec<u8>, StoreError>;
}

/// One stored version of a function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FunctionVersion {
    /// The function's name.
    pub name: String,
    /// 1, 2, … in upload order.
    pub version: u32,
    /// Hex SHA-256 of the stored component.
    pub digest: String,
    /// The Weir worlds it implements (`weir:function/key-function`, …).
    pub worlds: Vec<String>,
    /// Bytes of the component.
    pub size: u64,
    /// Upload time, ms since the epoch.
    pub uploaded_at: i64,
}

type Index = BTreeMap<String, Vec<FunctionVersion>>;

const INDEX: &str = "index.json";
const BLOBS: &str = "blobs";

/// The store of one data directory, or of one cluster.
pub struct FunctionStore {
    place: Place,
    /// Serializes changes to a local store (blobs, the index).
    lock: Mutex<()>,
}

/// Where a store keeps its index and components.
enum Place {
    /// Under a data directory.
    Local { root: Dir, path: PathBuf },
    /// Shared by a cluster's servers.
    Cluster(Box<dyn SharedFunctions>),
}

impl FunctionStore {
    /// Open (creating) the store under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let path = crate::config::function_store_dir(data_dir);
        let io = |source| StoreError::Io { path: path.clone(), source };
        std::fs::create_dir_all(path.join(BLOBS)).map_err(io)?;
        let root = Dir::open_ambient_dir(&path, ambient_authority()).map_err(io)?;
        Ok(Self { place: Place::Local { root, path }, lock: Mutex::new(()) })
    }

    /// The store of a cluster, kept in `shared`.
    pub fn cluster(shared: Box<dyn SharedFunctions>) -> Self {
        Self { place: Place::Cluster(shared), lock: Mutex::new(()) }
    }

    /// Whether it is a cluster's store.
    pub fn is_cluster(&self) -> bool {
        matches!(self.place, Place::Cluster(_))
    }

    fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io { path: path.to_path_buf(), source }
    }

    fn read_index(&self) -> Result<Index, StoreError> {
        match &self.place {
            Place::Local { root, path } => match root.read(INDEX) {
                Ok(bytes) => {
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt(e.to_string()))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index::new()),
                Err(e) => Err(Self::io(path)(e)),
            },
            Place::Cluster(shared) => cluster_index(&shared.read()?),
        }
    }

    /// Change the index as `decide` says, given the index as it is: under
    /// the store's lock on one machine, as one control-topic transaction on
    /// a cluster (so `decide` may run more than once).
    fn change_index<T>(
        &self,
        name: &str,
        mut decide: impl FnMut(&mut Index) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.place {
            Place::Local { root, path } => {
                let _guard = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut index = self.read_index()?;
                let before = index.clone();
                let answer = decide(&mut index)?;
                if index != before {
                    let text = serde_json::to_vec_pretty(&index)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    super::write_atomically(root, INDEX, &text).map_err(Self::io(path))?;
                }
                Ok(answer)
            }
            Place::Cluster(shared) => {
                let mut answer = None;
                shared.change(name, &mut |records| {
                    let mut index = cluster_index(records)?;
                    let before = index.get(name).cloned();
                    answer = Some(decide(&mut index)?);
                    let after = index.get(name);
                    if after == before.as_ref() {
                        return Ok(None);
                    }
                    let value = after
                        .map(serde_json::to_vec)
                        .transpose()
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    Ok(Some(value))
                })?;
                answer.ok_or_else(|| StoreError::Corrupt("a change decided nothing".into()))
            }
        }
    }

    /// Store `component` (whose digest is `digest`) unless it is stored.
    fn put_blob(&self, digest: &str, component: &[u8]) -> Result<(), StoreError> {
        match &self.place {
            Place::Local { root, path } => {
                // One writer of a blob at a time (they share a temporary name).
                let _guard = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let io = Self::io(path);
                let blobs = root.open_dir(BLOBS).map_err(&io)?;
                let blob = format!("{digest}.wasm");
                if !blobs.exists(&blob) {
                    super::write_atomically(&blobs, &blob, component).map_err(io)?;
                }
                Ok(())
            }
            Place::Cluster(shared) => {
                let stored = shared.put(component)?;
                match stored == digest {
                    true => Ok(()),
                    false => Err(StoreError::Corrupt(format!("stored as {stored}, not {digest}"))),
                }
            }
        }
    }

    /// Validate and store `bytes` as the next version of `name`; the version,
    /// and whether this call created it (false: the newest version already
    /// had these bytes).
    pub fn upload(
        &self,
        name: &str,
        bytes: &[u8],
        loader: &FunctionLoader,
    ) -> Result<(FunctionVersion, bool), StoreError> {
        check_name(name)?;
        let component = componentize(bytes)?;
        let loaded = loader.load(&component)?;
        // The component first: an index entry never names a missing one.
        self.put_blob(&loaded.digest, &component)?;
        crate::fault::point("function-after-blob");
        self.change_index(name, |index| {
            let versions = index.entry(name.to_string()).or_default();
            if let Some(newest) = versions.last().filter(|v| v.digest == loaded.digest) {
                return Ok((newest.clone(), false));
            }
            let version = FunctionVersion {
                name: name.to_string(),
                version: versions.last().map_or(1, |v| v.version + 1),
                digest: loaded.digest.clone(),
                worlds: loaded.worlds().into_iter().map(String::from).collect(),
                size: component.len() as u64,
                uploaded_at: crate::clock::now_millis(),
            };
            versions.push(version.clone());
            Ok((version, true))
        })
    }

    /// Every function with its versions, by name.
    pub fn list(&self) -> Result<Index, StoreError> {
        self.read_index()
    }

    /// Version `version` of `name` (the newest when `None`).
    pub fn get(&self, name: &str, version: Option<u32>) -> Result<FunctionVersion, StoreError> {
        check_name(name)?;
        let index = self.read_index()?;
        let versions = index.get(name).ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        let found = match version {
            Some(v) => versions.iter().find(|f| f.version == v),
            None => versions.last(),
        };
        found.cloned().ok_or_else(|| {
            StoreError::NotFound(format!("{name} version {}", version.unwrap_or_default()))
        })
    }

    /// The stored component of `function`.
    pub fn bytes(&self, function: &FunctionVersion) -> Result<Vec<u8>, StoreError> {
        let blob = format!("{}.wasm", hex_digest(&function.digest)?);
        let bytes = match &self.place {
            Place::Local { root, path } => {
                root.open_dir(BLOBS).and_then(|d| d.read(&blob)).map_err(Self::io(path))?
            }
            Place::Cluster(shared) => shared.get(&function.digest)?,
        };
        if digest(&bytes) != function.digest {
            return Err(StoreError::Corrupt(format!(
                "{} does not match its digest",
                function.name
            )));
        }
        Ok(bytes)
    }

    /// Remove `name` and its versions, unless `used_by` names pipelines
    /// using it. On one machine, components no other function references
    /// are deleted; a cluster keeps them (a deployment names its functions
    /// by digest, and a worker may be fetching one).
    pub fn delete(&self, name: &str, used_by: &[String]) -> Result<(), StoreError> {
        check_name(name)?;
        if !used_by.is_empty() {
            return Err(StoreError::InUse { name: name.to_string(), pipelines: used_by.to_vec() });
        }
        let (removed, index) = self.change_index(name, |index| {
            let removed =
                index.remove(name).ok_or_else(|| StoreError::NotFound(name.to_string()))?;
            Ok((removed, index.clone()))
        })?;
        if let Place::Local { root, path } = &self.place {
            let blobs = root.open_dir(BLOBS).map_err(Self::io(path))?;
            for version in removed {
                let still_used = index.values().flatten().any(|v| v.digest == version.digest);
                if !still_used {
                    let _ = blobs.remove_file(format!("{}.wasm", hex_digest(&version.digest)?));
                }
            }
        }
        Ok(())
    }
}

/// The function index a cluster's shared store holds.
fn cluster_index(records: &BTreeMap<String, Vec<u8>>) -> Result<Index, StoreError> {
    let parse = |(name, value): (&String, &Vec<u8>)| {
        let versions = serde_json::from_slice(value).map_err(|e| {
            StoreError::Corrupt(format!("function {name} in the control topic: {e}"))
        })?;
        Ok((name.clone(), versions))
    };
    records.iter().map(parse).collect()
}

/// A function name ([`crate::names::NAME_RULE`]).
fn check_name(name: &str) -> Result<(), StoreError> {
    crate::names::is_valid_name(name)
        .then_some(())
        .ok_or_else(|| StoreError::InvalidName(name.chars().take(80).collect()))
}

/// A digest from the index, checked to be hex before it names a file.
fn hex_digest(digest: &str) -> Result<&str, StoreError> {
    let valid = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then_some(digest).ok_or_else(|| StoreError::Corrupt(format!("digest {digest:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::loader::tests::core_module_for;
    use crate::runtime::{new_engine, EngineLimits};

    fn loader() -> FunctionLoader {
        FunctionLoader::new(
            new_engine(EngineLimits { instances: 4, ..Default::default() }).unwrap(),
            None,
        )
        .unwrap()
    }

    #[test]
    fn uploads_are_validated_versioned_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = FunctionStore::open(dir.path()).unwrap();
        let loader = loader();
        let key = core_module_for("key-function");
        let (first, created) = store.upload("revenue", &key, &loader).unwrap();
        assert!(created);
        assert_eq!(
            (first.version, first.worlds.clone()),
            (1, vec!["weir:function/key-function".to_string()])
        );
        assert_eq!(
            store.upload("revenue", &key, &loader).unwrap(),
            (first.clone(), false),
            "the same bytes again: the same version"
        );
        let process = core_module_for("process-function");
        let (second, _) = store.upload("revenue", &process, &loader).unwrap();
        assert_eq!(second.version, 2);
        assert_eq!(store.get("revenue", None).unwrap(), second);
        assert_eq!(store.get("revenue", Some(1)).unwrap(), first);
        let component = store.bytes(&first).unwrap();
        assert!(wasmparser::Parser::is_component(&component), "stored componentized");
        assert_eq!(store.list().unwrap()["revenue"].len(), 2);

        // Reopening sees the same store.
        let reopened = FunctionStore::open(dir.path()).unwrap();
        assert_eq!(reopened.get("revenue", None).unwrap(), second);
    }

    #[test]
    fn bad_names_and_bad_bytes_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FunctionStore::open(dir.path()).unwrap();
        let loader = loader();
        let key = core_module_for("key-function");
        for name in ["", "../../etc", "UPPER", "a/b", &"x".repeat(64), "name\0"] {
            assert!(
                matches!(store.upload(name, &key, &loader), Err(StoreError::InvalidName(_))),
                "{name:?}"
            );
        }
        assert!(matches!(store.upload("junk", b"not wasm", &loader), Err(StoreError::Invalid(_))));
        assert!(matches!(
            store.upload("cut", &key[..key.len() / 2], &loader),
            Err(StoreError::Invalid(_))
        ));
        assert!(store.list().unwrap().is_empty());
        assert!(matches!(store.get("../x", None), Err(StoreError::InvalidName(_))));
        assert!(matches!(store.get("missing", None), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn delete_refuses_while_used_and_keeps_shared_components() {
        let dir = tempfile::tempdir().unwrap();
        let store = FunctionStore::open(dir.path()).unwrap();
        let loader = loader();
        let key = core_module_for("key-function");
        let (a, _) = store.upload("a", &key, &loader).unwrap();
        store.upload("b", &key, &loader).unwrap();
        assert!(matches!(
            store.delete("a", &["orders".to_string()]),
            Err(StoreError::InUse { .. })
        ));
        store.delete("a", &[]).unwrap();
        assert!(matches!(store.get("a", None), Err(StoreError::NotFound(_))));
        assert!(store.bytes(&a).is_ok(), "b still uses the same component");
        store.delete("b", &[]).unwrap();
        assert!(store.bytes(&a).is_err(), "no one uses it any more");
    }
}
