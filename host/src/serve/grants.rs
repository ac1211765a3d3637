//! What a spec deployed through `weir serve` may touch on the host: the
//! one place that decides it. `weir run` never asks (its user owns the
//! machine).
//!
//! * **Files.** Relative paths resolve inside the files root
//!   `<data dir>/files/` ([`config::files_dir`]). Every file a spec names —
//!   file sources and sinks (each connector says what it touches through
//!   [`SourceConfig::host_access`](crate::connectors::SourceConfig::host_access)),
//!   `resources:`, Kafka certificate and key files — must lie inside the
//!   files root or a directory the operator grants: `--allow-read DIR`
//!   (reading) or `--allow-write DIR` (writing; reading too). A path is
//!   checked through a `cap-std` directory opened at the root, so `..`, an
//!   absolute path or a symbolic link cannot lead out of it; a sink's
//!   missing parent directories are created through it.
//! * **Checkpoint storage and restores.** `checkpoint.storage` is unset
//!   (`<data dir>/checkpoints`) or under an `--allow-storage URL` root;
//!   storage is never writable by a spec (a `file://` root may not overlap
//!   the files root or an `--allow-write` directory), since a restore
//!   loads the state files it holds; and two pipelines' snapshot homes
//!   (`<storage>/<name>`, [`Grants::storage_home`]) never overlap (the
//!   supervisor compares a new spec's with every other pipeline's). A snapshot to restore is this
//!   pipeline's own in the default storage (`<pipeline name>/chk-N`,
//!   `<pipeline name>/savepoints/sp-N`) or lies under an `--allow-storage`
//!   root. Locations are compared normalized: URLs without dot segments,
//!   local paths resolved as above.
//! * **Kafka.** Properties come from the allow-list of
//!   [`kafka::served_property`](crate::connectors::kafka::served_property);
//!   with `--allow-kafka host:port,…` every broker of a spec must be listed.
//! * **Schema registries.** With `--allow-schema-registry URL` a spec's
//!   `schema_registry.url` must lie under one of the URLs given (same
//!   scheme, host and port; its path below the given one).
//!
//! The server's own records are never under a tenant-writable or -readable
//! root: [`Grants::new`] refuses a grant that holds the data directory or
//! lies inside it (but for the files root and the checkpoint directory).
//! A refusal ([`NotGranted`]) names the field, the rule and the flag that
//! grants it. It never reads or writes a file outside the roots it checks.

use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::config;
use crate::connectors::kafka::{served_property, ServedProperty};
use crate::connectors::Access;
use crate::specification::PipelineSpec;

/// What the operator grants with `weir serve` flags.
#[derive(Debug, Clone, Default)]
pub struct GrantsConfig {
    /// `--allow-read DIR`: directories a spec may read.
    pub allow_read: Vec<PathBuf>,
    /// `--allow-write DIR`: directories a spec may write (and read).
    pub allow_write: Vec<PathBuf>,
    /// `--allow-storage URL`: checkpoint storage roots a spec may use and
    /// restore from.
    pub allow_storage: Vec<String>,
    /// `--allow-kafka host:port,…`: the only brokers a spec may name, if set.
    pub allow_kafka: Option<Vec<String>>,
    /// `--allow-schema-registry URL`: the only schema registries a spec may
    /// call (the URL or below it), if any are given.
    pub allow_schema_registry: Vec<String>,
}

/// A grant that cannot be made: `weir serve` does not start.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {value}: {message}")]
pub struct GrantError {
    /// The flag.
    pub flag: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub message: String,
}

/// A spec asks for what the server does not grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct NotGranted {
    /// The field (`sink.path`, `properties.plugin.library.paths`, `restore`).
    pub field: String,
    /// The rule and the way out.
    pub message: String,
}

impl NotGranted {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// A directory a spec may reach, as given and as resolved.
#[derive(Debug, Clone)]
struct Root {
    given: PathBuf,
    canonical: PathBuf,
}

impl Root {
    fn new(path: &Path) -> std::io::Result<Self> {
        let canonical = std::fs::canonicalize(path)?;
        if !canonical.is_dir() {
            return Err(std::io::Error::other("not a directory"));
        }
        Ok(Self { given: path.to_path_buf(), canonical })
    }

    /// The part of `path` below this root, compared as given and resolved.
    fn rest<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.given).or_else(|_| path.strip_prefix(&self.canonical)).ok()
    }

    fn contains(&self, other: &Path) -> bool {
        other.starts_with(&self.canonical)
    }
}

/// A storage root given with `--allow-storage`.
#[derive(Debug, Clone)]
enum StorageRoot {
    /// `file:///dir`.
    File(Root),
    /// Another object store: its normalized location.
    Url(UrlLocation),
}

/// An object-store location without dot segments: scheme, host (bucket)
/// and path segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UrlLocation {
    scheme: String,
    host: String,
    segments: Vec<String>,
}

impl UrlLocation {
    fn starts_with(&self, root: &Self) -> bool {
        self.scheme == root.scheme
            && self.host == root.host
            && self.segments.starts_with(&root.segments)
    }
}

/// A storage URL or snapshot location, normalized.
enum Location {
    File(PathBuf),
    Url(UrlLocation),
}

/// Parse `text` (a URL, or a local path if it has no `://`).
fn location(text: &str) -> Result<Location, String> {
    if !text.contains("://") {
        let path = PathBuf::from(text);
        if path.is_relative() {
            return Err("a relative location is not allowed; give the absolute location as GET /v1/pipelines/<name>/checkpoints lists it".into());
        }
        return Ok(Location::File(path));
    }
    let url = url::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL are not allowed".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("a query or fragment in the URL is not allowed".into());
    }
    if url.scheme() == "file" {
        let path =
            url.to_file_path().map_err(|()| "not an absolute local file path".to_string())?;
        return Ok(Location::File(path));
    }
    let mut segments = Vec::new();
    for segment in url.path_segments().into_iter().flatten().filter(|s| !s.is_empty()) {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
        if decoded == "." || decoded == ".." || decoded.contains('/') {
            return Err(format!("the path segment {segment:?} is not allowed"));
        }
        segments.push(decoded.into_owned());
    }
    Ok(Location::Url(UrlLocation {
        scheme: url.scheme().to_ascii_lowercase(),
        host: format!(
            "{}{}",
            url.host_str().unwrap_or_default().to_ascii_lowercase(),
            url.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        segments,
    }))
}

/// A local directory as comparable components: resolved through symbolic
/// links as far as it exists, the rest with dot segments applied.
fn file_components(path: &Path) -> Vec<String> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        resolved.push(name);
    }
    let mut components = vec!["file".to_string()];
    for component in resolved.components() {
        match component {
            Component::Normal(name) => components.push(name.to_string_lossy().into_owned()),
            Component::ParentDir if components.len() > 1 => {
                components.pop();
            }
            _ => {}
        }
    }
    components
}

/// Whether one pipeline's snapshot home lies in (or is) another's.
pub fn homes_overlap(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// What to create inside a root before resolving a path there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    Nothing,
    /// The path's parent directories (a file to write).
    Parents,
    /// The path itself, as a directory (checkpoint storage).
    Directory,
}

/// What the operator grants a spec deployed through `weir serve`.
#[derive(Debug, Clone)]
pub struct Grants {
    /// `<data dir>/files`.
    files: Root,
    /// `<data dir>/checkpoints`, the default checkpoint storage.
    checkpoints: Root,
    read: Vec<Root>,
    write: Vec<Root>,
    storage: Vec<StorageRoot>,
    kafka: Option<Vec<String>>,
    /// The registries a spec may call (normalized URLs); empty: any.
    registries: Vec<url::Url>,
}

impl Grants {
    /// The grants of a server on `data_dir`; creates the files root and
    /// the checkpoint directory. Refuses a grant that does not exist, or
    /// would expose the server's own records.
    pub fn new(data_dir: &Path, config: &GrantsConfig) -> Result<Self, GrantError> {
        let made = |flag: &'static str, dir: &Path| {
            let io = |e: std::io::Error| GrantError {
                flag,
                value: dir.display().to_string(),
                message: e.to_string(),
            };
            std::fs::create_dir_all(dir).map_err(io)?;
            Root::new(dir).map_err(io)
        };
        let files = made("--data-dir", &config::files_dir(data_dir))?;
        let checkpoints = made("--data-dir", &config::checkpoints_dir(data_dir))?;
        let data = files.canonical.parent().map(Path::to_path_buf).unwrap_or_default();
        let grant = |flag: &'static str, dir: &Path| -> Result<Root, GrantError> {
            let error =
                |message: String| GrantError { flag, value: dir.display().to_string(), message };
            let root = Root::new(dir).map_err(|e| error(format!("cannot be granted: {e}")))?;
            let inside_own = match flag {
                "--allow-storage" => checkpoints.contains(&root.canonical),
                _ => files.contains(&root.canonical),
            };
            if data.starts_with(&root.canonical)
                || (root.canonical.starts_with(&data) && !inside_own)
            {
                return Err(error(format!(
                    "holds the server's own records (the data directory {}): grant a directory outside it, or use the files root {}",
                    data.display(),
                    files.canonical.display()
                )));
            }
            Ok(root)
        };
        let read: Vec<Root> =
            config.allow_read.iter().map(|d| grant("--allow-read", d)).collect::<Result<_, _>>()?;
        let write: Vec<Root> = config
            .allow_write
            .iter()
            .map(|d| grant("--allow-write", d))
            .collect::<Result<_, _>>()?;
        let mut storage = Vec::new();
        for url in &config.allow_storage {
            let error = |message: String| GrantError {
                flag: "--allow-storage",
                value: url.clone(),
                message,
            };
            storage.push(match location(url).map_err(&error)? {
                Location::File(_) if !url.contains("://") => {
                    return Err(error("give a URL: file:///dir, s3://bucket/prefix".into()))
                }
                Location::File(dir) => {
                    std::fs::create_dir_all(&dir).map_err(|e| error(e.to_string()))?;
                    StorageRoot::File(grant("--allow-storage", &dir)?)
                }
                Location::Url(root) => StorageRoot::Url(root),
            });
        }
        // Checkpoint storage is never writable by tenants: a restore loads
        // the state files it holds.
        for storage in &storage {
            let StorageRoot::File(storage) = storage else { continue };
            for writable in std::iter::once(&files).chain(&write) {
                let (a, b) = (&storage.canonical, &writable.canonical);
                if a.starts_with(b) || b.starts_with(a) {
                    return Err(GrantError {
                        flag: "--allow-storage",
                        value: storage.given.display().to_string(),
                        message: format!("overlaps {}, which pipelines may write: a pipeline could write files into checkpoint storage (the state a restore loads); grant storage and --allow-write directories apart", b.display()),
                    });
                }
            }
        }
        let kafka = config
            .allow_kafka
            .as_ref()
            .map(|brokers| brokers.iter().flat_map(|b| b.split(',')).filter_map(broker).collect());
        let mut registries = Vec::new();
        for given in &config.allow_schema_registry {
            let url = registry_url(given).ok_or_else(|| GrantError {
                flag: "--allow-schema-registry",
                value: given.clone(),
                message: "is not an http:// or https:// URL".into(),
            })?;
            registries.push(url);
        }
        Ok(Self { files, checkpoints, read, write, storage, kafka, registries })
    }

    /// The files root, `<data dir>/files`.
    pub fn files_root(&self) -> &Path {
        &self.files.given
    }

    /// Check everything `spec` (paths resolved, as a deployed record runs
    /// it) touches on the host; creates a file sink's missing directories
    /// inside its root.
    pub fn check_spec(&self, spec: &PipelineSpec) -> Result<(), NotGranted> {
        if let Some(dir) = &spec.resources {
            self.check_read("resources", dir)?;
        }
        if let Some(url) = spec.checkpoint.as_ref().and_then(|c| c.storage.as_deref()) {
            self.check_storage("checkpoint.storage", url)?;
        }
        let mut accesses = Vec::new();
        if let Some(source) = &spec.source {
            accesses.push(("source".to_string(), source.config().host_access()));
        }
        if let Some(sink) = &spec.sink {
            accesses.push(("sink".to_string(), sink.config().host_access()));
        }
        for (name, sink) in &spec.side_outputs {
            accesses.push((format!("side_outputs.{name}"), sink.config().host_access()));
        }
        for (name, node) in &spec.operators {
            if let Some(source) = &node.source {
                accesses.push((format!("operators.{name}.source"), source.config().host_access()));
            }
            if let Some(sink) = &node.sink {
                accesses.push((format!("operators.{name}.sink"), sink.config().host_access()));
            }
        }
        for (section, accesses) in accesses {
            for access in accesses {
                self.check_access(&section, access)?;
            }
        }
        Ok(())
    }

    fn check_access(&self, section: &str, access: Access) -> Result<(), NotGranted> {
        match access {
            Access::Read { field, path } => self.check_read(&format!("{section}.{field}"), &path),
            Access::Write { field, path } => self.check_write(&format!("{section}.{field}"), &path),
            Access::KafkaBrokers { field, servers } => {
                let Some(allowed) = &self.kafka else { return Ok(()) };
                for server in servers.split(',').filter(|s| !s.trim().is_empty()) {
                    if !broker(server).is_some_and(|b| allowed.contains(&b)) {
                        return Err(NotGranted::new(
                            format!("{section}.{field}"),
                            format!(
                                "broker {:?} is not one this server may connect to ({}): name one of them, or start weir serve with --allow-kafka listing it",
                                server.trim(),
                                allowed.join(",")
                            ),
                        ));
                    }
                }
                Ok(())
            }
            Access::SchemaRegistry { field, url } => {
                if self.registries.is_empty() {
                    return Ok(());
                }
                let granted = registry_url(&url).is_some_and(|url| {
                    self.registries.iter().any(|root| {
                        root.scheme() == url.scheme()
                            && root.host_str() == url.host_str()
                            && root.port_or_known_default() == url.port_or_known_default()
                            && url.path().starts_with(root.path())
                    })
                });
                if granted {
                    return Ok(());
                }
                let allowed: Vec<&str> = self.registries.iter().map(url::Url::as_str).collect();
                Err(NotGranted::new(
                    format!("{section}.{field}"),
                    format!(
                        "schema registry {url:?} is not one this server may call ({}): name one of them, or start weir serve with --allow-schema-registry giving it",
                        allowed.join(", ")
                    ),
                ))
            }
            Access::KafkaProperties { field, properties } => {
                for (name, value) in properties {
                    let field = format!("{section}.{field}.{name}");
                    match served_property(&name) {
                        ServedProperty::Allowed => {}
                        ServedProperty::ReadsFile if value.trim() == "probe" && name.trim().eq_ignore_ascii_case("ssl.ca.location") => {}
                        ServedProperty::ReadsFile => self.check_read(&field, Path::new(&value))?,
                        ServedProperty::Refused(why) => {
                            return Err(NotGranted::new(
                                field,
                                format!("{why}; a pipeline deployed through weir serve may set the security and tuning properties listed in docs/security.md, and certificate and key files inside the files root or an --allow-read directory; remove it (or run the pipeline with weir run)"),
                            ))
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// `path` (absolute, or relative to the files root) may be read.
    fn check_read(&self, field: &str, path: &Path) -> Result<(), NotGranted> {
        let roots = std::iter::once(&self.files).chain(&self.write).chain(&self.read);
        self.check_path(field, path, roots, Create::Nothing, "--allow-read")
    }

    /// `path` may be written (its missing parents are created).
    fn check_write(&self, field: &str, path: &Path) -> Result<(), NotGranted> {
        let roots = std::iter::once(&self.files).chain(&self.write);
        self.check_path(field, path, roots, Create::Parents, "--allow-write")
    }

    fn check_path<'a>(
        &self,
        field: &str,
        path: &Path,
        roots: impl Iterator<Item = &'a Root> + Clone,
        create: Create,
        flag: &str,
    ) -> Result<(), NotGranted> {
        let path = self.absolute(path);
        let mut why = None;
        for root in roots.clone() {
            let Some(rest) = root.rest(&path) else { continue };
            match resolve_inside(root, rest, create) {
                Ok(_) => return Ok(()),
                Err(reason) => why = Some(reason),
            }
        }
        let granted: Vec<String> = roots.skip(1).map(|r| r.given.display().to_string()).collect();
        let granted = match granted.is_empty() {
            true => String::new(),
            false => format!(", and {flag} {}", granted.join(", ")),
        };
        let what = if flag == "--allow-write" { "writes" } else { "reads" };
        let normal = lexically_normal(&path);
        let dir = normal.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(&normal);
        Err(NotGranted::new(
            field,
            format!(
                "{} is outside the files this server {what} for a pipeline{} (its files root {}{granted}): use a path inside the files root (a relative one), or start weir serve with {flag} {}",
                path.display(),
                why.map(|w| format!(" ({w})")).unwrap_or_default(),
                self.files.given.display(),
                dir.display()
            ),
        ))
    }

    /// `path`, relative ones inside the files root.
    fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_relative() {
            self.files.given.join(path)
        } else {
            path.to_path_buf()
        }
    }

    /// Whether a spec may use checkpoint storage `url`.
    pub fn check_storage(&self, field: &str, url: &str) -> Result<(), NotGranted> {
        let refuse = |why: String| {
            NotGranted::new(
                field,
                format!("{url} {why}: leave checkpoint.storage unset (the server's own checkpoint storage), or start weir serve with --allow-storage naming it or a root above it (apart from the directories pipelines may write)"),
            )
        };
        match location(url).map_err(|e| refuse(format!("is not usable ({e})")))? {
            Location::File(path) if url.contains("://") => {
                let roots = std::iter::once(&self.checkpoints).chain(self.storage_dirs());
                if roots.into_iter().any(|root| inside(root, &path, Create::Directory)) {
                    return Ok(());
                }
                Err(refuse("is outside the storage this server grants".into()))
            }
            Location::File(_) => Err(refuse("is not a URL".into())),
            Location::Url(location) if self.under_storage_url(&location) => Ok(()),
            Location::Url(_) => Err(refuse("is not under an --allow-storage root".into())),
        }
    }

    /// Where `spec`'s pipeline keeps its snapshots — its checkpoint storage
    /// (the server's own unless set) and, below it, its name, as
    /// checkpoint storage lays them out — normalized for comparison (a
    /// local directory resolved through symbolic links; a URL by scheme,
    /// host and path segments). `None` when the storage is not usable
    /// (then [`Grants::check_spec`] refuses it).
    pub fn storage_home(&self, spec: &PipelineSpec) -> Option<Vec<String>> {
        let mut home = match spec.checkpoint.as_ref().and_then(|c| c.storage.as_deref()) {
            None => file_components(&self.checkpoints.canonical),
            Some(url) => match location(url).ok()? {
                Location::File(path) => file_components(&path),
                Location::Url(url) => {
                    [url.scheme, url.host].into_iter().chain(url.segments).collect()
                }
            },
        };
        home.push(spec.name.clone());
        Some(home)
    }

    /// The `--allow-storage` roots that are local directories.
    fn storage_dirs(&self) -> impl Iterator<Item = &Root> {
        self.storage.iter().filter_map(|s| match s {
            StorageRoot::File(root) => Some(root),
            StorageRoot::Url(_) => None,
        })
    }

    /// Whether `location` lies under an `--allow-storage` URL root.
    fn under_storage_url(&self, location: &UrlLocation) -> bool {
        self.storage
            .iter()
            .any(|s| matches!(s, StorageRoot::Url(root) if location.starts_with(root)))
    }

    /// Whether `spec`'s pipeline may restore the snapshot at `location`:
    /// one of its own (in `<storage>/<its name>/`, of storage it may use),
    /// or under an `--allow-storage` root.
    pub fn check_restore(
        &self,
        field: &str,
        spec: &PipelineSpec,
        location_text: &str,
    ) -> Result<(), NotGranted> {
        let refuse = |why: String| {
            NotGranted::new(
                field,
                format!("{location_text} {why}: a pipeline restores its own checkpoints and savepoints (GET /v1/pipelines/{}/checkpoints lists them); start weir serve with --allow-storage naming a root above it to restore from elsewhere", spec.name),
            )
        };
        match location(location_text).map_err(|e| refuse(format!("is not usable ({e})")))? {
            Location::File(path) => {
                if self.storage_dirs().any(|root| inside(root, &path, Create::Nothing)) {
                    return Ok(());
                }
                // In the server's own storage, only this pipeline's snapshots.
                let own = &self.checkpoints;
                let resolved = own
                    .rest(&path)
                    .and_then(|rest| resolve_inside(own, rest, Create::Nothing).ok());
                let parts: Vec<String> = resolved
                    .iter()
                    .filter_map(|r| r.strip_prefix(&own.canonical).ok())
                    .flat_map(|inside| inside.iter().map(|p| p.to_string_lossy().into_owned()))
                    .collect();
                if snapshot_of(&parts) == Some(spec.name.as_str()) {
                    return Ok(());
                }
                Err(refuse("is not a snapshot of this pipeline in storage it may use".into()))
            }
            Location::Url(location) if self.under_storage_url(&location) => Ok(()),
            Location::Url(_) => Err(refuse("is not under an --allow-storage root".into())),
        }
    }
}

/// `path` without `.` and `..` components, resolved by text alone (for
/// naming the directory a flag would grant, never for a check).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// The pipeline whose snapshot directory `parts` names
/// (`…/<pipeline>/chk-N`, `…/<pipeline>/savepoints/sp-N`).
fn snapshot_of(parts: &[String]) -> Option<&str> {
    let numbered = |name: &str, prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match parts {
        [.., pipeline, last] if numbered(last, "chk-") => Some(pipeline),
        [.., pipeline, savepoints, last] if savepoints == "savepoints" && numbered(last, "sp-") => {
            Some(pipeline)
        }
        _ => None,
    }
}

/// A broker as `--allow-kafka` and `bootstrap_servers` are compared:
/// lower case, without a `protocol://`, with the default port 9092.
/// A registry URL as grants compare it: http or https, no credentials, a
/// path ending in `/` (so `/api` does not grant `/apis`).
fn registry_url(text: &str) -> Option<url::Url> {
    let mut url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || !url.username().is_empty()
    {
        return None;
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url.set_query(None);
    url.set_fragment(None);
    Some(url)
}

fn broker(text: &str) -> Option<String> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.rsplit("://").next().unwrap_or_default().trim_end_matches('/');
    if text.is_empty() {
        return None;
    }
    let has_port = match text.rfind(']') {
        Some(bracket) => text[bracket..].contains(':'),
        None => text.matches(':').count() == 1,
    };
    Some(if has_port { text.to_string() } else { format!("{text}:9092") })
}

/// Whether `path` lies below `root` and resolves inside it (creating what
/// `create` says).
fn inside(root: &Root, path: &Path, create: Create) -> bool {
    root.rest(path).is_some_and(|rest| resolve_inside(root, rest, create).is_ok())
}

/// Resolve `rest` (a path below `root`) inside the root through `cap-std`,
/// creating what `create` says: the path as the host will open it, or why
/// it leads out of the root.
fn resolve_inside(root: &Root, rest: &Path, create: Create) -> Result<PathBuf, String> {
    // `..` above the root is refused before anything is touched.
    let mut depth = 0usize;
    for component in rest.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => return Err("`..` leads out of it".into()),
        }
    }
    let dir = Dir::open_ambient_dir(&root.canonical, ambient_authority())
        .map_err(|e| format!("cannot open it: {e}"))?;
    let made = match create {
        Create::Nothing => None,
        Create::Parents => rest.parent().filter(|p| !p.as_os_str().is_empty()),
        Create::Directory => Some(rest).filter(|p| !p.as_os_str().is_empty()),
    };
    if let Some(dirs) = made {
        // Through the root: a link out of it makes this fail, creating nothing outside.
        let _ = dir.create_dir_all(dirs);
    }
    // The nearest part that exists must resolve inside the root; what is
    // missing below it is plain names.
    let mut existing = rest;
    while !existing.as_os_str().is_empty() && dir.symlink_metadata(existing).is_err() {
        existing = existing.parent().unwrap_or(Path::new(""));
    }
    let missing = rest.strip_prefix(existing).unwrap_or(rest);
    if missing.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err("`..` below a missing directory".into());
    }
    let resolved = if existing.as_os_str().is_empty() {
        PathBuf::new()
    } else {
        match dir.canonicalize(existing) {
            Ok(inside) => inside,
            // cap-std does not follow absolute links: one may still stay inside.
            Err(_) => std::fs::canonicalize(root.canonical.join(existing))
                .ok()
                .and_then(|p| p.strip_prefix(&root.canonical).map(Path::to_path_buf).ok())
                .ok_or_else(|| "a symbolic link leads out of it".to_string())?,
        }
    };
    Ok(root.canonical.join(resolved).join(missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Server {
        _dir: tempfile::TempDir,
        data: PathBuf,
        /// A directory outside the data directory, not granted.
        outside: PathBuf,
        /// A granted directory (read or write, as the test says).
        granted: PathBuf,
    }

    fn server() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let (outside, granted) = (dir.path().join("outside"), dir.path().join("granted"));
        for d in [&data, &outside, &granted] {
            std::fs::create_dir_all(d).unwrap();
        }
        Server { _dir: dir, data, outside, granted }
    }

    fn grants(server: &Server, config: GrantsConfig) -> Grants {
        Grants::new(&server.data, &config).unwrap()
    }

    fn spec(text: &str, files: &Path) -> PipelineSpec {
        let source =
            if text.contains("source:") { "" } else { "source: { type: generator, count: 1 }\n" };
        let sink = if text.contains("sink:") { "" } else { "sink: { type: discard }\n" };
        let mut spec = PipelineSpec::parse(&format!(
            "name: p\n{source}{sink}key: {{ function: f }}\nprocess: {{ function: f }}\n{text}"
        ))
        .unwrap();
        spec.resolve_paths(files);
        spec
    }

    fn check(grants: &Grants, text: &str) -> Result<(), String> {
        grants.check_spec(&spec(text, grants.files_root())).map_err(|e| e.to_string())
    }

    fn sink(path: &Path) -> String {
        format!("sink: {{ type: file, path: {path:?} }}\n")
    }

    #[test]
    fn relative_paths_stay_inside_the_files_root() {
        let server = server();
        let grants = grants(&server, GrantsConfig::default());
        check(&grants, "sink: { type: file, path: out/x.jsonl }\n").unwrap();
        assert!(server.data.join("files/out").is_dir(), "the sink's directory is made");
        check(&grants, "sink: { type: file, path: out/../y.jsonl }\n").unwrap();
        let escape = check(&grants, "sink: { type: file, path: ../../x }\n").unwrap_err();
        assert!(
            escape.starts_with("sink.path: ")
                && escape.contains("outside the files")
                && escape.contains("--allow-write"),
            "{escape}"
        );
        // A missing directory cannot hide a `..` either.
        assert!(check(&grants, "sink: { type: file, path: new/../../../x }\n").is_err());
        assert!(!server.data.join("files/new").exists());
        // Nor a relative path into the server's own records.
        assert!(check(&grants, "sink: { type: file, path: ../api/pipelines/p.json }\n").is_err());
    }

    #[test]
    fn absolute_paths_need_a_grant() {
        let server = server();
        let none = grants(&server, GrantsConfig::default());
        let target = server.outside.join("x");
        let refused = check(&none, &sink(&target)).unwrap_err();
        assert!(
            refused.contains(&format!("--allow-write {}", server.outside.display())),
            "{refused}"
        );
        let read = check(&none, "source: { type: file, path: /etc/passwd }\n").unwrap_err();
        assert!(read.starts_with("source.path: /etc/passwd is outside"), "{read}");
        let writer = grants(
            &server,
            GrantsConfig { allow_write: vec![server.granted.clone()], ..Default::default() },
        );
        check(&writer, &sink(&server.granted.join("sub/x.jsonl"))).unwrap();
        assert!(server.granted.join("sub").is_dir());
        assert!(check(&writer, &sink(&target)).is_err());
        // `..` out of a grant.
        assert!(check(&writer, &sink(&server.granted.join("../outside/x"))).is_err());
        assert!(!target.exists());
        // A read grant does not let a spec write.
        let reader = grants(
            &server,
            GrantsConfig { allow_read: vec![server.granted.clone()], ..Default::default() },
        );
        assert!(check(&reader, &sink(&server.granted.join("y"))).is_err());
        check(&reader, &format!("resources: {:?}\n", server.granted)).unwrap();
        let everything = check(&reader, "resources: /\n").unwrap_err();
        assert!(everything.starts_with("resources: / is outside"), "{everything}");
    }

    #[test]
    fn symbolic_links_may_not_lead_out() {
        let server = server();
        let grants = grants(&server, GrantsConfig::default());
        let files = server.data.join("files");
        std::os::unix::fs::symlink(&server.outside, files.join("out")).unwrap();
        std::os::unix::fs::symlink(server.outside.join("x"), files.join("x")).unwrap();
        let refused = check(&grants, "sink: { type: file, path: out/x }\n").unwrap_err();
        assert!(refused.contains("symbolic link") || refused.contains("outside"), "{refused}");
        assert!(check(&grants, "sink: { type: file, path: x }\n").is_err());
        assert!(check(&grants, "sink: { type: file, path: out/new/x }\n").is_err());
        assert!(!server.outside.join("new").exists(), "nothing made through the link");
        // Links that stay inside are fine, relative or absolute.
        std::fs::create_dir(files.join("real")).unwrap();
        std::os::unix::fs::symlink("real", files.join("here")).unwrap();
        std::os::unix::fs::symlink(files.join("real"), files.join("there")).unwrap();
        check(&grants, "sink: { type: file, path: here/x }\n").unwrap();
        check(&grants, "sink: { type: file, path: there/x }\n").unwrap();
    }

    #[test]
    fn grants_may_not_expose_the_data_directory() {
        let server = server();
        let parent = server.data.parent().unwrap().to_path_buf();
        for config in [
            GrantsConfig { allow_write: vec![parent.clone()], ..Default::default() },
            GrantsConfig { allow_read: vec![parent.clone()], ..Default::default() },
            GrantsConfig { allow_write: vec![server.data.join("api")], ..Default::default() },
            GrantsConfig { allow_write: vec![server.data.clone()], ..Default::default() },
            GrantsConfig {
                allow_storage: vec![format!("file://{}", server.data.display())],
                ..Default::default()
            },
        ] {
            std::fs::create_dir_all(server.data.join("api")).unwrap();
            let error = Grants::new(&server.data, &config).unwrap_err().to_string();
            assert!(error.contains("the server's own records"), "{error}");
        }
        std::fs::create_dir_all(server.data.join("files/shared")).unwrap();
        Grants::new(
            &server.data,
            &GrantsConfig {
                allow_write: vec![server.data.join("files/shared")],
                allow_storage: vec![format!("file://{}/checkpoints", server.data.display())],
                ..Default::default()
            },
        )
        .unwrap();
        let overlap = GrantsConfig {
            allow_write: vec![server.granted.clone()],
            allow_storage: vec![format!("file://{}/ckpt", server.granted.display())],
            ..Default::default()
        };
        let error = Grants::new(&server.data, &overlap).unwrap_err().to_string();
        assert!(error.starts_with("--allow-storage ") && error.contains("overlaps"), "{error}");
        let missing = GrantsConfig { allow_read: vec![parent.join("nope")], ..Default::default() };
        assert!(Grants::new(&server.data, &missing)
            .unwrap_err()
            .to_string()
            .contains("--allow-read"));
    }

    #[test]
    fn checkpoint_storage_needs_a_grant() {
        let server = server();
        let grants = grants(
            &server,
            GrantsConfig {
                allow_write: vec![server.granted.clone()],
                allow_storage: vec!["s3://bucket/weir".into()],
                ..Default::default()
            },
        );
        let storage = |url: &str| {
            check(&grants, &format!("checkpoint: {{ interval: 1s, storage: {url:?} }}\n"))
        };
        storage("s3://bucket/weir/team").unwrap();
        storage("s3://bucket/weir").unwrap();
        assert!(storage("s3://bucket/other").is_err());
        assert!(storage("s3://bucket/weir/../other").is_err());
        assert!(storage("s3://bucket/weir/%2e%2e/other").is_err());
        assert!(storage("s3://other/weir").is_err());
        storage(&format!("file://{}/checkpoints", server.data.display())).unwrap();
        // Not where pipelines write files: the state a restore loads.
        assert!(storage(&format!("file://{}/ckpt", server.granted.display())).is_err());
        assert!(storage(&format!("file://{}/files/ckpt", server.data.display())).is_err());
        let refused = storage(&format!("file://{}", server.outside.display())).unwrap_err();
        assert!(
            refused.starts_with("checkpoint.storage: ") && refused.contains("--allow-storage"),
            "{refused}"
        );
        assert!(storage(&format!("file://{}/../outside", server.granted.display())).is_err());
        assert!(storage(&format!("file://{}/api", server.data.display())).is_err());
        assert!(storage("memory://").is_err());
        assert!(!server.outside.join("ckpt").exists());
    }

    #[test]
    fn restores_name_this_pipelines_snapshots_or_an_allowed_root() {
        let server = server();
        let checkpoints = server.data.join("checkpoints");
        for dir in ["p/chk-3", "p/savepoints/sp-4", "other/chk-3"] {
            std::fs::create_dir_all(checkpoints.join(dir)).unwrap();
        }
        std::fs::create_dir_all(server.outside.join("p/chk-1")).unwrap();
        let grants = grants(
            &server,
            GrantsConfig { allow_storage: vec!["s3://bucket/shared".into()], ..Default::default() },
        );
        let spec = spec("", grants.files_root());
        let restore = |location: &str| {
            grants.check_restore("restore", &spec, location).map_err(|e| e.to_string())
        };
        restore(&checkpoints.join("p/chk-3").display().to_string()).unwrap();
        restore(&format!("file://{}", checkpoints.join("p/savepoints/sp-4").display())).unwrap();
        let other = restore(&checkpoints.join("other/chk-3").display().to_string()).unwrap_err();
        assert!(other.starts_with("restore: ") && other.contains("--allow-storage"), "{other}");
        assert!(restore(&format!("{}/p/../other/chk-3", checkpoints.display())).is_err());
        assert!(restore(&format!("file://{}/p/../other/chk-3", checkpoints.display())).is_err());
        assert!(restore(&server.outside.join("p/chk-1").display().to_string()).is_err());
        assert!(restore("s3://bucket/elsewhere/p/chk-1").is_err());
        restore("s3://bucket/shared/q/chk-1").unwrap();
        assert!(restore("p/chk-3").is_err());
    }

    #[test]
    fn kafka_properties_and_brokers() {
        let server = server();
        std::fs::write(server.granted.join("ca.pem"), "x").unwrap();
        let grants = grants(
            &server,
            GrantsConfig {
                allow_read: vec![server.granted.clone()],
                allow_kafka: Some(vec!["kafka-1:9092,Kafka-2".into()]),
                ..Default::default()
            },
        );
        let kafka = |servers: &str, properties: &str| {
            check(&grants, &format!("sink: {{ type: kafka, bootstrap_servers: {servers:?}, topic: t, properties: {{ {properties} }} }}\n"))
        };
        kafka("kafka-1:9092,kafka-2:9092", "linger.ms: '5', security.protocol: SSL").unwrap();
        kafka("kafka-1", &format!("ssl.ca.location: {:?}", server.granted.join("ca.pem"))).unwrap();
        kafka("kafka-1", "ssl.ca.location: probe").unwrap();
        let file = kafka("kafka-1", "ssl.key.location: /etc/shadow").unwrap_err();
        assert!(
            file.starts_with("sink.properties.ssl.key.location: /etc/shadow is outside"),
            "{file}"
        );
        // plugin.library.paths and the like are refused when the spec is read.
        let unknown = kafka("kafka-1", "interceptors: x").unwrap_err();
        assert!(unknown.contains("not on the list"), "{unknown}");
        let broker = kafka("kafka-1,evil:9092", "").unwrap_err();
        assert!(
            broker.starts_with("sink.bootstrap_servers: ")
                && broker.contains("\"evil:9092\"")
                && broker.contains("--allow-kafka"),
            "{broker}"
        );
        // Without --allow-kafka, any broker.
        let open = super::Grants::new(&server.data, &GrantsConfig::default()).unwrap();
        open.check_spec(&spec(
            "sink: { type: kafka, bootstrap_servers: anywhere:1, topic: t }\n",
            open.files_root(),
        ))
        .unwrap();
    }

    #[test]
    fn schema_registries_under_the_granted_urls_only() {
        let server = server();
        let grants = grants(
            &server,
            GrantsConfig {
                allow_schema_registry: vec!["http://registry:8080/apis/ccompat/v7".into()],
                ..Default::default()
            },
        );
        let registry = |url: &str| {
            check(&grants, &format!("source: {{ type: kafka, bootstrap_servers: k:9092, topics: [t], format: avro, schema_registry: {{ url: {url:?} }} }}\nsink: {{ type: stdout }}\n"))
        };
        registry("http://registry:8080/apis/ccompat/v7").unwrap();
        registry("http://REGISTRY:8080/apis/ccompat/v7/").unwrap();
        for refused in [
            "http://registry:8080/apis/ccompat/v7x",
            "http://registry:8080/apis",
            "https://registry:8080/apis/ccompat/v7",
            "http://registry:8081/apis/ccompat/v7",
            "http://127.0.0.1:8080/apis/ccompat/v7",
            "http://user:pw@registry:8080/apis/ccompat/v7",
        ] {
            let error = registry(refused).unwrap_err();
            assert!(
                error.starts_with("source.schema_registry.url: ")
                    && error.contains("--allow-schema-registry"),
                "{refused}: {error}"
            );
        }
        // Its certificate files are read by the same rules as Kafka's.
        let ca = check(&grants, "source: { type: kafka, bootstrap_servers: k:9092, topics: [t], format: avro, schema_registry: { url: \"http://registry:8080/apis/ccompat/v7\", properties: { ssl.ca.location: /etc/shadow } } }\nsink: { type: stdout }\n").unwrap_err();
        assert!(
            ca.starts_with(
                "source.schema_registry.properties.ssl.ca.location: /etc/shadow is outside"
            ),
            "{ca}"
        );
        let bad = super::Grants::new(
            &server.data,
            &GrantsConfig { allow_schema_registry: vec!["ftp://x".into()], ..Default::default() },
        );
        assert!(bad.is_err(), "a grant that is not an http URL is refused");
    }
}
