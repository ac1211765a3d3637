//! Loading functions: turn bytes into a compiled component that is known to
//! implement what the pipeline needs, compiling each distinct component
//! once and caching the machine code on disk by content digest.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::Engine;

use super::{host, HostCtx, Language, Role, WIT_VERSION};

/// Why a function could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes do not start with the Wasm magic number.
    #[error("not a WebAssembly file (it does not start with the `\\0asm` magic bytes)")]
    NotWasm,
    /// A core module that could not be turned into a component.
    #[error("core module cannot be made into a component: {0}")]
    Componentize(String),
    /// wasmtime rejected the component.
    #[error("invalid component: {0}")]
    Invalid(String),
    /// The component imports something the host does not provide.
    #[error("the component imports `{0}`, which the Weir host does not provide (it provides weir:function/state, timers, context, broadcast and types @{WIT_VERSION}, and WASI 0.2 without authority)")]
    UnknownImport(String),
    /// The component imports an interface functions are never granted.
    #[error("the component imports `{0}`, which Weir never grants functions: they get no network (wasi:sockets, wasi:http); state, time and output come through weir:function")]
    ForbiddenImport(String),
    /// The component's imports do not match what the host provides.
    #[error("the component cannot be linked: {0}")]
    Link(String),
    /// The component lacks an export its role needs.
    #[error("the component does not implement the `{world}` world: it lacks the export `{needed}` (it exports: {found})")]
    MissingExport {
        /// The world the role needs.
        world: &'static str,
        /// The interface that is missing.
        needed: String,
        /// What the component does export.
        found: String,
    },
    /// Reading or writing the compiled-code cache failed.
    #[error("component cache {path}: {source}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Hex SHA-256 of `bytes`: the identity of a component.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Return `bytes` as a component: unchanged if it is one, or encoded from a
/// core module that carries the component type `wit-bindgen` embeds.
pub fn componentize(bytes: &[u8]) -> Result<Cow<'_, [u8]>, LoadError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(LoadError::NotWasm);
    }
    if wasmparser::Parser::is_component(bytes) {
        return Ok(Cow::Borrowed(bytes));
    }
    if !has_component_type(bytes) {
        return Err(LoadError::Componentize(
            "it carries no component type; build it with the Weir SDK (which embeds one through wit-bindgen) or pass a component".into(),
        ));
    }
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder.validate(true).module(bytes).map_err(|e| LoadError::Componentize(format!("{e:#}")))?;
    encoder.encode().map(Cow::Owned).map_err(|e| LoadError::Componentize(format!("{e:#}")))
}

/// Whether a core module has a `component-type*` custom section, which is
/// what `wit-bindgen` embeds to describe the module's world.
fn has_component_type(bytes: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(bytes).any(|payload| {
        matches!(payload, Ok(wasmparser::Payload::CustomSection(section)) if section.name().starts_with("component-type"))
    })
}

/// A compiled, linked component with what it exports.
#[derive(Clone)]
pub struct LoadedFunction {
    /// Hex SHA-256 of the component bytes.
    pub digest: String,
    /// The component, linked to the host's imports and ready to instantiate.
    pub pre: InstancePre<HostCtx>,
    /// Names of the component's imports.
    pub imports: Vec<String>,
    /// Names of the component's exports.
    pub exports: Vec<String>,
    /// How a pipeline names it in errors (`revenue v2`, `revenue.wasm`);
    /// empty unless set.
    pub label: String,
    /// The language it is written in, which sets its default limits.
    pub language: Language,
    /// The types it declares for its states (for state lookups).
    pub state_types: std::sync::Arc<super::state_types::StateTypes>,
}

impl LoadedFunction {
    /// Check that the component can serve as `role`.
    pub fn require(&self, role: Role) -> Result<(), LoadError> {
        let Some(needed) = role.interfaces().into_iter().find(|i| !self.exports.contains(i)) else {
            return Ok(());
        };
        let found =
            if self.exports.is_empty() { "nothing".to_string() } else { self.exports.join(", ") };
        Err(LoadError::MissingExport { world: role.world(), needed, found })
    }

    /// The worlds this component implements, in [`Role::ALL`]'s order. A
    /// role another implemented role [extends](Role::extends) is reported
    /// as that one only: a broadcast process function is not also listed
    /// as a process function.
    pub fn worlds(&self) -> Vec<&'static str> {
        let roles: Vec<Role> = Role::ALL.into_iter().filter(|r| self.implements(*r)).collect();
        roles
            .iter()
            .filter(|r| !roles.iter().any(|other| other.extends() == Some(**r)))
            .map(|r| r.world())
            .collect()
    }

    /// Whether the component exports `role`'s interfaces.
    pub fn implements(&self, role: Role) -> bool {
        self.require(role).is_ok()
    }
}

/// Whether the host provides the import `name`: the `weir:function`
/// interfaces of this version, and WASI 0.2 (sandboxed).
fn is_provided(name: &str) -> bool {
    let weir = ["state", "timers", "context", "broadcast", "types"]
        .iter()
        .any(|i| name == format!("weir:function/{i}@{WIT_VERSION}"));
    weir || name.starts_with("wasi:") && name.contains("@0.2.")
}

/// Whether `name` is a WASI interface no function may import: the network.
fn is_forbidden(name: &str) -> bool {
    name.starts_with("wasi:sockets/") || name.starts_with("wasi:http/")
}

/// Loads, compiles and links functions, caching compiled code in a directory.
pub struct FunctionLoader {
    engine: Engine,
    linker: Linker<HostCtx>,
    cache_dir: Option<PathBuf>,
}

impl FunctionLoader {
    /// A loader for `engine`; with `cache_dir`, compiled code is kept there
    /// and reused across runs.
    pub fn new(engine: Engine, cache_dir: Option<PathBuf>) -> Result<Self, LoadError> {
        let mut linker = Linker::new(&engine);
        host::add_to_linker(&mut linker).map_err(|e| LoadError::Link(format!("{e:#}")))?;
        Ok(Self { engine, linker, cache_dir })
    }

    /// The engine components are compiled for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Validate, componentize if needed, and compile `bytes`.
    pub fn load(&self, bytes: &[u8]) -> Result<LoadedFunction, LoadError> {
        let bytes = componentize(bytes)?;
        let digest = digest(&bytes);
        let component = match &self.cache_dir {
            Some(dir) => self.load_cached(dir, &digest, &bytes)?,
            None => Component::new(&self.engine, &*bytes)
                .map_err(|e| LoadError::Invalid(format!("{e:#}")))?,
        };
        let ty = component.component_type();
        let imports: Vec<String> =
            ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        if let Some(name) = imports.iter().find(|name| is_forbidden(name)) {
            return Err(LoadError::ForbiddenImport(name.clone()));
        }
        if let Some(name) = imports.iter().find(|name| !is_provided(name)) {
            return Err(LoadError::UnknownImport(name.clone()));
        }
        let exports = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let language = Language::of(&bytes);
        let state_types = std::sync::Arc::new(super::state_types::StateTypes::of(&bytes));
        Ok(LoadedFunction {
            digest,
            pre,
            imports,
            exports,
            label: String::new(),
            language,
            state_types,
        })
    }

    fn load_cached(&self, dir: &Path, digest: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut hasher);
        let path = dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish()));
        let io = |source| LoadError::Cache { path: path.clone(), source };
        if path.exists() {
            // SAFETY: the file was written by `precompile_component` below into
            // the host's own data directory, under a name derived from the
            // component's digest and this engine's compatibility hash.
            #[allow(unsafe_code)]
            if let Ok(component) = unsafe { Component::deserialize_file(&self.engine, &path) } {
                return Ok(component);
            }
            tracing::warn!(path = %path.display(), "ignoring unusable compiled-code cache entry");
        }
        let compiled = self
            .engine
            .precompile_component(bytes)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        std::fs::create_dir_all(dir).map_err(io)?;
        // Unique per writer (threads of one server compile concurrently).
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp{}-{write}", std::process::id()));
        crate::files::write(&tmp, &compiled).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        // SAFETY: `compiled` was produced by this engine just now.
        #[allow(unsafe_code)]
        unsafe { Component::deserialize(&self.engine, &compiled) }
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::{new_engine, EngineLimits};

    /// A core module implementing `world`, with the component type that
    /// `wit-bindgen` would embed.
    pub(crate) fn core_module_for(world: &str) -> Vec<u8> {
        module_with_world(None, world)
    }

    /// `wat` (a core module with the exports `wit-bindgen` would make), or
    /// a dummy module whose functions trap, with the component type of
    /// `world` embedded.
    pub(crate) fn module_with_world(wat: Option<&str>, world: &str) -> Vec<u8> {
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) =
            resolve.push_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../wit")).unwrap();
        let world = resolve.select_world(&[package], Some(world)).unwrap();
        let mangling = wit_parser::ManglingAndAbi::Legacy(wit_parser::LiftLowerAbi::Sync);
        let mut module = match wat {
            Some(wat) => wat::parse_str(wat).unwrap(),
            None => wit_component::dummy_module(&resolve, world, mangling),
        };
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .unwrap();
        module
    }

    fn loader(cache: Option<PathBuf>) -> FunctionLoader {
        FunctionLoader::new(
            new_engine(EngineLimits { instances: 4, ..Default::default() }).unwrap(),
            cache,
        )
        .unwrap()
    }

    #[test]
    fn componentizes_a_core_module_with_a_component_type() {
        let module = core_module_for("key-function");
        assert!(!wasmparser::Parser::is_component(&module));
        let component = componentize(&module).unwrap();
        assert!(wasmparser::Parser::is_component(&component));
        let function = loader(None).load(&module).unwrap();
        assert_eq!(function.worlds(), vec!["weir:function/key-function"]);
        function.require(Role::Key).unwrap();
        let err = function.require(Role::Process).unwrap_err().to_string();
        assert!(
            err.contains("weir:function/process-function")
                && err.contains("weir:function/process-fn@0.2.0")
                && err.contains("weir:function/key-fn@0.2.0"),
            "{err}"
        );
    }

    #[test]
    fn a_component_passes_through_unchanged() {
        let component = componentize(&core_module_for("process-function")).unwrap().into_owned();
        assert_eq!(componentize(&component).unwrap().as_ref(), component.as_slice());
        assert_eq!(
            loader(None).load(&component).unwrap().worlds(),
            vec!["weir:function/process-function"]
        );
    }

    #[test]
    fn graph_roles_are_detected_by_their_exports() {
        let loader = loader(None);
        let transform = loader.load(&core_module_for("transform-function")).unwrap();
        assert_eq!(transform.worlds(), vec!["weir:function/transform-function"]);
        transform.require(Role::Transform).unwrap();
        let co = loader.load(&core_module_for("co-process-function")).unwrap();
        assert_eq!(co.worlds(), vec!["weir:function/co-process-function"]);
        assert!(co.require(Role::Process).is_err());
        let broadcast = loader.load(&core_module_for("broadcast-process-function")).unwrap();
        assert_eq!(broadcast.worlds(), vec!["weir:function/broadcast-process-function"]);
        broadcast.require(Role::BroadcastProcess).unwrap();
        broadcast.require(Role::Process).unwrap();
        assert!(broadcast.imports.contains(&format!("weir:function/broadcast@{WIT_VERSION}")));
        let plain = loader.load(&core_module_for("process-function")).unwrap();
        let err = plain.require(Role::BroadcastProcess).unwrap_err().to_string();
        assert!(
            err.contains("weir:function/broadcast-process-function")
                && err.contains("lacks the export `weir:function/broadcast-fn@0.2.0`"),
            "{err}"
        );
    }

    #[test]
    fn rejects_what_is_not_a_function() {
        let loader = loader(None);
        assert!(matches!(loader.load(b"hello"), Err(LoadError::NotWasm)));
        let plain = wat::parse_str("(module (func (export \"f\")))").unwrap();
        assert!(
            matches!(loader.load(&plain), Err(LoadError::Componentize(m)) if m.contains("no component type"))
        );
        let component = componentize(&core_module_for("key-function")).unwrap().into_owned();
        assert!(matches!(
            loader.load(&component[..component.len() - 3]),
            Err(LoadError::Invalid(_))
        ));
        let needy = wat::parse_str(r#"(component (import "example:net/socket@1.0.0" (instance)))"#)
            .unwrap();
        assert!(
            matches!(loader.load(&needy), Err(LoadError::UnknownImport(name)) if name == "example:net/socket@1.0.0")
        );
        let networked = wat::parse_str(
            r#"(component (import "wasi:sockets/tcp-create-socket@0.2.0" (instance)))"#,
        )
        .unwrap();
        let error = loader.load(&networked).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.contains("wasi:sockets/tcp-create-socket@0.2.0") && error.contains("no network"),
            "{error}"
        );
    }

    #[test]
    fn compiled_code_is_cached_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let module = core_module_for("key-function");
        let first = loader(Some(dir.path().to_path_buf())).load(&module).unwrap();
        let cached: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(cached.len(), 1);
        assert!(cached[0].starts_with(&first.digest) && cached[0].ends_with(".cwasm"));
        let second = loader(Some(dir.path().to_path_buf())).load(&module).unwrap();
        assert_eq!(second.digest, first.digest);
        assert_eq!(second.worlds(), first.worlds());
        // Cache files are mapped into memory: drop the components before
        // damaging the file (the loader itself only ever replaces files).
        let digest = first.digest.clone();
        drop((first, second));
        std::fs::write(dir.path().join(&cached[0]), b"corrupt").unwrap();
        assert_eq!(
            loader(Some(dir.path().to_path_buf())).load(&module).unwrap().digest,
            digest,
            "a corrupt cache entry is recompiled"
        );
    }
}
