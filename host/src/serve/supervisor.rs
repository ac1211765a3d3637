//! The pipelines a `weir serve` runs: deploy, savepoint, stop, upgrade,
//! delete, and resuming after a restart.
//!
//! Each running pipeline is one [`pipeline::run`] on its own thread, with a
//! [`RunHandle`] for its live counters and for savepoint/stop requests.
//! Every change of a pipeline is written to the [`PipelineStore`] before it
//! takes effect, so after a crash (even `kill -9`) of the server, every
//! pipeline recorded as running starts again — from its newest completed
//! checkpoint, like any restart. Requests that cannot succeed are refused
//! before anything changes: the spec is parsed, its stored functions are
//! resolved and loaded for their roles, and its settings are checked first.
//!
//! One operation at a time per pipeline: a second one while a stop or an
//! upgrade is under way gets `409 busy`.
//!
//! A run that fails is restarted as the spec's `restart:` strategy says
//! ([`crate::specification::restart`]): after the delay, a timer starts it again
//! like any start (from its newest checkpoint). While it waits, the record
//! stays `running` (a server restart resumes it at once); a stop or delete
//! cancels the restart; when the attempts are used up it is `failed`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::runtime::native::NativeCatalog;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::limits::ServerLimits;
use super::restart::RestartStatus;
use super::ServeError;
use crate::checkpoint::{CheckpointStorage, SnapshotKind, SnapshotMetadata};
use crate::config;
use crate::observe::{RequestError, RunHandle, RunSummary};
use crate::pipeline::lock::{PipelineLock, ServerLock};
use crate::pipeline::{self, CheckedPipeline, RestoreFrom, RunError, RunOptions};
use crate::serve::grants::{self, Grants};
use crate::serve::restart::RestartTracker;
use crate::specification::{secrets, DeployedSpec, PipelineSpec};
use crate::store::{FunctionStore, PipelineRecord, PipelineState, PipelineStore, RestorePoint};

/// How long a savepoint (and the stop after it) may take.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a snapshot request waits for a run that is still starting.
const START_WAIT: Duration = Duration::from_secs(30);

/// A pipeline the server knows.
struct Entry {
    record: PipelineRecord,
    /// The current (or last) run in this process.
    run: Option<Run>,
    /// A stop, upgrade or delete is under way.
    busy: bool,
    /// Restarts after failures.
    restarts: Restarts,
}

/// The restarts of a pipeline after failed runs.
#[derive(Default)]
struct Restarts {
    tracker: RestartTracker,
    /// The message of the last failed run.
    last_failure: Option<String>,
    /// The restart waiting for its delay: (timer token, when, ms).
    pending: Option<(u64, i64)>,
}

impl Entry {
    fn new(record: PipelineRecord) -> Self {
        Self { record, run: None, busy: false, restarts: Restarts::default() }
    }

    /// Whether a run is under way (not waiting to restart).
    fn running(&self) -> bool {
        self.record.state == PipelineState::Running
            && self.run.is_some()
            && self.restarts.pending.is_none()
    }
}

/// One run of a pipeline.
struct Run {
    id: u64,
    handle: Arc<RunHandle>,
    started_at: i64,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A change to a running pipeline's function versions, parallelism or spec.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Upgrade {
    /// A whole new spec (same `name`); default: keep the deployed one. A
    /// secret property given as `<redacted>` (as a status shows it) keeps
    /// the value the deployed spec holds at the same place.
    #[serde(default)]
    pub spec: Option<String>,
    /// New versions of stored functions, by function name: a number or
    /// `"latest"`. Functions not named keep their versions.
    #[serde(default)]
    pub functions: BTreeMap<String, VersionChoice>,
    /// New parallelism (≤ the spec's `max_parallelism`).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 32768)]
    pub parallelism: Option<u16>,
    /// Start even though an exactly-once Kafka sink's commit marker
    /// disagrees with the snapshots (see `weir run --override-kafka-marker`).
    #[serde(default)]
    pub override_kafka_marker: bool,
}

/// A function version to upgrade to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionChoice {
    /// The newest uploaded.
    Latest,
    /// This one.
    Exactly(u32),
}

impl serde::Serialize for VersionChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Latest => serializer.serialize_str("latest"),
            Self::Exactly(version) => serializer.serialize_u32(*version),
        }
    }
}

impl<'de> serde::Deserialize<'de> for VersionChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u32),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Number(n) => Ok(Self::Exactly(n)),
            Raw::Text(t) if t == "latest" => Ok(Self::Latest),
            Raw::Text(t) => t.parse().map(Self::Exactly).map_err(|_| {
                serde::de::Error::custom(format!(
                    "{t:?} is neither a version number nor \"latest\""
                ))
            }),
        }
    }
}

impl utoipa::PartialSchema for VersionChoice {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let number = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0))
            .maximum(Some(u32::MAX));
        let text =
            ObjectBuilder::new().schema_type(Type::String).pattern(Some("^(latest|[0-9]{1,9})$"));
        OneOfBuilder::new()
            .item(number)
            .item(text)
            .description(Some("A version number, or `\"latest\"`"))
            .into()
    }
}

impl utoipa::ToSchema for VersionChoice {}

/// A pipeline as the API shows it.
pub struct PipelineView {
    /// Its record.
    pub record: PipelineRecord,
    /// Its current or last run in this process, if any: the live handle
    /// and when it started.
    pub run: Option<(Arc<RunHandle>, i64)>,
    /// Its restarts after failures.
    pub restart: RestartStatus,
}

/// How often the rates of running pipelines are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Sample every running pipeline's counters once a second (the rates of
/// the status and `/metrics`), for as long as the supervisor exists.
fn spawn_sampler(supervisor: std::sync::Weak<Supervisor>) {
    let sampling = move || {
        while let Some(supervisor) = supervisor.upgrade() {
            let handles: Vec<Arc<RunHandle>> = supervisor
                .lock()
                .values()
                .filter_map(|e| e.run.as_ref().map(|r| r.handle.clone()))
                .collect();
            drop(supervisor);
            handles.iter().filter(|h| h.listening()).for_each(|h| h.metrics.tick());
            std::thread::sleep(SAMPLE_EVERY);
        }
    };
    if let Err(error) = std::thread::Builder::new().name("metrics-sampler".into()).spawn(sampling) {
        tracing::warn!(%error, "cannot start the metrics sampler: rates will read zero");
    }
}

/// Runs the deployed pipelines of one data directory.
pub struct Supervisor {
    data_dir: PathBuf,
    /// What deploys and upgrades may ask for.
    limits: ServerLimits,
    /// The built-in functions a spec may name with `native:`.
    natives: NativeCatalog,
    /// What a spec may touch on the host.
    grants: Grants,
    store: PipelineStore,
    pipelines: Mutex<BTreeMap<String, Entry>>,
    next_run: std::sync::atomic::AtomicU64,
    /// The server is shutting down: runs that end keep their records as
    /// they are (a restarted server runs them again) and none restarts.
    shutting_down: std::sync::atomic::AtomicBool,
    /// This server's hold on the data directory.
    _server: ServerLock,
}

impl Supervisor {
    /// Open the store and start every pipeline recorded as running;
    /// deploys and upgrades may ask for at most `limits`, `native:` names a
    /// function of `natives`, and specs touch on the host only what
    /// `grants` allows (checked again at every start).
    pub fn open(
        data_dir: &Path,
        limits: ServerLimits,
        natives: NativeCatalog,
        grants: Grants,
    ) -> Result<Arc<Self>, ServeError> {
        // Before any record is read: a second server would rewrite them.
        let server = ServerLock::acquire(data_dir)
            .map_err(|e| ServeError::conflict("data_dir_in_use", e.to_string()))?;
        let store = PipelineStore::open(data_dir)?;
        let records = store.list()?;
        let supervisor = Arc::new(Self {
            data_dir: data_dir.to_path_buf(),
            limits,
            natives,
            grants,
            store,
            pipelines: Mutex::default(),
            next_run: 1.into(),
            shutting_down: false.into(),
            _server: server,
        });
        let mut pipelines = supervisor.lock();
        for (name, record) in records {
            let running = record.state == PipelineState::Running;
            pipelines.insert(name.clone(), Entry::new(record));
            if running {
                tracing::info!(pipeline = %name, "resuming a pipeline that was running");
                let entry = pipelines.get_mut(&name).expect("just inserted");
                supervisor.start(entry, false, None);
            }
        }
        drop(pipelines);
        spawn_sampler(Arc::downgrade(&supervisor));
        Ok(supervisor)
    }

    /// What deploys and upgrades may ask for.
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.pipelines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The names of the pipelines using stored function `name`.
    pub fn users_of(&self, function: &str) -> Vec<String> {
        self.lock()
            .values()
            .filter(|e| e.record.uses_function(function))
            .map(|e| e.record.name.clone())
            .collect()
    }

    /// Every pipeline.
    pub fn list(&self) -> Vec<PipelineView> {
        self.lock().values().map(view).collect()
    }

    /// One pipeline.
    pub fn get(&self, name: &str) -> Result<PipelineView, ServeError> {
        self.lock().get(name).map(view).ok_or_else(|| no_pipeline(name))
    }

    /// The pipeline's completed checkpoints and savepoints, newest first.
    pub fn snapshots(
        &self,
        name: &str,
    ) -> Result<(CheckpointStorage, Vec<SnapshotMetadata>), ServeError> {
        let record = self.get(name)?.record;
        let spec = record
            .spec(&self.data_dir)
            .map_err(|e| ServeError::internal(format!("the stored spec no longer parses: {e}")))?;
        let storage = checkpoint_storage(&spec, &self.data_dir)?;
        let mut all = storage.completed().map_err(unavailable)?;
        all.extend(storage.completed_of(SnapshotKind::Savepoint).map_err(unavailable)?);
        all.sort_by_key(|m| std::cmp::Reverse(m.id));
        Ok((storage, all))
    }

    /// Deploy `spec_text` (YAML or JSON) and start it, optionally from the
    /// snapshot at `restore`, overriding a disagreeing commit marker of an
    /// exactly-once sink if `override_commit_marker`. The route reads at most
    /// `--max-spec-bytes` of it.
    pub fn deploy(
        self: &Arc<Self>,
        spec_text: &str,
        restore: Option<&str>,
        override_commit_marker: bool,
        functions: &FunctionStore,
    ) -> Result<PipelineView, ServeError> {
        // Nothing is stored yet that a `<redacted>` could stand for.
        let spec_text = secrets::restore(spec_text, None)
            .map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let spec =
            PipelineSpec::parse(&spec_text).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let mut record = PipelineRecord {
            name: spec.name.clone(),
            spec: spec_text.to_string(),
            pins: BTreeMap::new(),
            parallelism: None,
            restore: None,
            state: PipelineState::Running,
            failure: None,
            last_savepoint: None,
            deployed_at: crate::clock::now_millis(),
            generation: 1,
        };
        {
            let pipelines = self.lock();
            if pipelines.contains_key(&record.name) {
                return Err(ServeError::conflict(
                    "exists",
                    format!(
                        "pipeline {} already exists: upgrade it, or delete it first",
                        record.name
                    ),
                ));
            }
            self.limits.check_new_pipeline(pipelines.len())?;
        }
        record.pins = pin_functions(&spec, &BTreeMap::new(), &BTreeMap::new(), functions)?;
        let checked = self.check(&record, Some(spec))?;
        if let Some(location) = restore {
            self.grants.check_restore("restore", checked.spec(), location)?;
            let snapshot = CheckpointStorage::locate(location)
                .map_err(|e| ServeError::invalid_spec(format!("restore: {e}")))?;
            record.restore =
                Some(RestorePoint { location: location.to_string(), id: snapshot.metadata.id });
        }
        let mut pipelines = self.lock();
        if pipelines.contains_key(&record.name) {
            return Err(ServeError::conflict(
                "exists",
                format!("pipeline {} already exists", record.name),
            ));
        }
        self.limits.check_new_pipeline(pipelines.len())?;
        self.store.put(&record)?;
        let name = record.name.clone();
        let entry = pipelines.entry(name).or_insert(Entry::new(record));
        self.start(entry, override_commit_marker, Some(checked));
        Ok(view(entry))
    }

    /// Check that `record` can run — its spec (`parsed`, its text already
    /// parsed, or parsed here) with pins applied and the server's limits
    /// capping its defaults, its grants, its settings, its functions for
    /// their roles — and keep the checked pipeline for the run.
    fn check(
        &self,
        record: &PipelineRecord,
        parsed: Option<PipelineSpec>,
    ) -> Result<CheckedPipeline, ServeError> {
        let spec = match parsed {
            Some(parsed) => record.apply(parsed, &self.data_dir),
            None => record.spec(&self.data_dir),
        };
        let mut spec = spec.map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        if let Some((field, _)) = spec.functions().into_iter().find(|(_, f)| f.wasm.is_some()) {
            return Err(ServeError::invalid_spec(format!("{field}.wasm: a deployed pipeline names stored functions (`function: <name>`), not files on the server; upload it with PUT /v1/functions/<name>")));
        }
        self.limits.check_spec(&spec)?;
        self.limits.cap_defaults(&mut spec);
        // Before anything opens a file or connects.
        self.grants.check_spec(&spec)?;
        self.check_storage_apart(&spec)?;
        pipeline::prepare(spec, &self.data_dir, &self.natives).map_err(|e| match e {
            RunError::StoredFunction { .. }
            | RunError::Load { .. }
            | RunError::Deploy(_)
            | RunError::ExactlyOnce(_) => ServeError::invalid_pipeline(e.to_string()),
            other => ServeError::internal(other.to_string()),
        })
    }

    /// Refuse checkpoint storage that overlaps another pipeline's: one
    /// pipeline's snapshots inside another's directory would be listed,
    /// restored or deleted by the other's retention.
    fn check_storage_apart(&self, spec: &PipelineSpec) -> Result<(), ServeError> {
        let Some(home) = self.grants.storage_home(spec) else { return Ok(()) };
        let others: Vec<PipelineRecord> = self
            .lock()
            .values()
            .filter(|entry| entry.record.name != spec.name)
            .map(|entry| entry.record.clone())
            .collect();
        for other in others {
            let Ok(theirs) = other.spec(&self.data_dir) else { continue };
            let Some(theirs) = self.grants.storage_home(&theirs) else { continue };
            if grants::homes_overlap(&home, &theirs) {
                return Err(ServeError::invalid_spec(format!(
                    "checkpoint.storage: this pipeline's snapshots would be kept at {}, which overlaps pipeline {}'s at {}: two pipelines' checkpoint storage never overlaps (one's retention would delete the other's files); leave checkpoint.storage unset, or give a location apart from every other pipeline's",
                    home.join("/"),
                    other.name,
                    theirs.join("/")
                )));
            }
        }
        Ok(())
    }

    /// Take a savepoint of a running pipeline; its location.
    pub fn savepoint(&self, name: &str) -> Result<String, ServeError> {
        let handle = self.running_handle(name, false)?;
        let location = self.request_snapshot(name, &handle, SnapshotKind::Savepoint, false)?;
        let mut pipelines = self.lock();
        if let Some(entry) = pipelines.get_mut(name) {
            entry.record.last_savepoint = Some(location.clone());
            self.store.put(&entry.record)?;
        }
        Ok(location)
    }

    /// Stop a running pipeline gracefully (a final snapshot; a savepoint if
    /// `savepoint`), and wait until it has stopped. The snapshot's location.
    pub fn stop(&self, name: &str, savepoint: bool) -> Result<String, ServeError> {
        if self.cancel_restart(name, savepoint)? {
            // No run to snapshot: it stops at its newest snapshot.
            let (storage, snapshots) = self.snapshots(name)?;
            let newest = snapshots.first();
            return Ok(newest
                .map(|m| storage.describe(&storage.snapshot_dir(m.kind, m.id)))
                .unwrap_or_default());
        }
        self.running_handle(name, true)?;
        let result = self.stop_run(name, savepoint);
        self.finish_operation(name, |record| {
            if let Ok(location) = &result {
                record.state = PipelineState::Stopped;
                if savepoint {
                    record.last_savepoint = Some(location.clone());
                }
            }
        })?;
        result
    }

    /// Savepoint, stop, and start again with `upgrade` applied, from that
    /// savepoint. A pipeline that is not running (stopped, failed) starts
    /// again from its newest savepoint or checkpoint.
    pub fn upgrade(
        self: &Arc<Self>,
        name: &str,
        upgrade: &Upgrade,
        functions: &FunctionStore,
    ) -> Result<PipelineView, ServeError> {
        let mut record = {
            let mut pipelines = self.lock();
            let entry = pipelines.get_mut(name).ok_or_else(|| no_pipeline(name))?;
            if entry.busy {
                return Err(busy(name));
            }
            entry.busy = true;
            entry.record.clone()
        };
        let result = self.upgraded(&mut record, upgrade, functions);
        let mut pipelines = self.lock();
        let entry = pipelines.get_mut(name).ok_or_else(|| no_pipeline(name))?;
        entry.busy = false;
        let checked = result?;
        entry.record = record;
        entry.restarts = Restarts::default();
        self.store.put(&entry.record)?;
        self.start(entry, upgrade.override_kafka_marker, Some(checked));
        Ok(view(entry))
    }

    /// Apply `upgrade` to `record` (checked before the running pipeline is
    /// touched), then savepoint and stop the running pipeline; the checked
    /// pipeline the upgrade runs.
    fn upgraded(
        &self,
        record: &mut PipelineRecord,
        upgrade: &Upgrade,
        functions: &FunctionStore,
    ) -> Result<CheckedPipeline, ServeError> {
        let old_spec = PipelineSpec::parse(&record.spec)
            .map_err(|e| ServeError::internal(format!("the stored spec no longer parses: {e}")))?;
        let mut next = record.clone();
        if let Some(text) = &upgrade.spec {
            self.limits.check_spec_size(text)?;
            let text = secrets::restore(text, Some(&record.spec))
                .map_err(|e| ServeError::invalid_spec(e.to_string()))?;
            let spec =
                PipelineSpec::parse(&text).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
            if spec.name != record.name {
                return Err(ServeError::invalid_spec(format!(
                    "name: the upgraded spec names {:?}, not {:?}",
                    spec.name, record.name
                )));
            }
            next.spec = text.into_owned();
            next.parallelism = None;
        }
        let spec =
            PipelineSpec::parse(&next.spec).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let kept = kept_pins(&old_spec, &spec, &next.pins);
        next.pins = pin_functions(&spec, &kept, &upgrade.functions, functions)?;
        if let Some(parallelism) = upgrade.parallelism {
            next.parallelism = Some(parallelism);
        }
        next.generation += 1;
        next.failure = None;
        let checked = self.check(&next, None)?;
        if self.lock().get(&record.name).is_some_and(Entry::running) {
            let location = self.stop_run(&record.name, true)?;
            let id = CheckpointStorage::locate(&location).map_err(internal)?.metadata.id;
            next.last_savepoint = Some(location.clone());
            next.restore = Some(RestorePoint { location, id });
        } else {
            next.restore = newest_savepoint(&self.data_dir, &spec)?.or(next.restore);
            if let Some(point) = &next.restore {
                self.grants.check_restore("restore", checked.spec(), &point.location)?;
            }
        }
        next.state = PipelineState::Running;
        *record = next;
        Ok(checked)
    }

    /// Stop the pipeline if it runs, then forget it: its record, local
    /// state and checkpoints (savepoints are kept).
    pub fn delete(&self, name: &str) -> Result<(), ServeError> {
        let running = {
            let mut pipelines = self.lock();
            let entry = pipelines.get_mut(name).ok_or_else(|| no_pipeline(name))?;
            if entry.busy {
                return Err(busy(name));
            }
            entry.busy = true;
            let running = entry.running();
            entry.restarts.pending = None;
            running
        };
        if running {
            match self.stop_run(name, false) {
                Err(error) if error.code() != ENDED => {
                    self.finish_operation(name, |_| {})?;
                    return Err(error);
                }
                _ => {}
            }
        }
        // Nothing is deleted while another process runs the pipeline here.
        let guard = match PipelineLock::acquire(&self.data_dir, name, true) {
            Ok(guard) => guard,
            Err(error) => {
                self.finish_operation(name, |_| {})?;
                return Err(ServeError::conflict("running_elsewhere", error.to_string()));
            }
        };
        let mut pipelines = self.lock();
        let Some(entry) = pipelines.remove(name) else { return Ok(()) };
        self.store.delete(name)?;
        if let Ok(spec) = entry.record.spec(&self.data_dir) {
            // Checkpoints in storage this server no longer grants are left alone.
            let url = spec.checkpoint.as_ref().and_then(|c| c.storage.as_deref());
            let granted =
                url.is_none_or(|url| self.grants.check_storage("checkpoint.storage", url).is_ok());
            if let Some(storage) =
                granted.then(|| checkpoint_storage(&spec, &self.data_dir).ok()).flatten()
            {
                if let Err(error) = storage.delete_all() {
                    tracing::warn!(pipeline = name, %error, "cannot delete the checkpoints of a deleted pipeline");
                }
            }
        }
        // Everything but the lock file, which must outlive any holder.
        let lock = config::pipeline_lock_path(&self.data_dir, name);
        let dir = config::pipeline_dir(&self.data_dir, name);
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path != lock {
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                if let Err(error) = removed {
                    tracing::warn!(path = %path.display(), %error, "cannot delete a deleted pipeline's file");
                }
            }
        }
        drop(guard);
        Ok(())
    }

    /// The handle of the running pipeline `name`; marks it busy if `claim`.
    fn running_handle(&self, name: &str, claim: bool) -> Result<Arc<RunHandle>, ServeError> {
        let mut pipelines = self.lock();
        let entry = pipelines.get_mut(name).ok_or_else(|| no_pipeline(name))?;
        if entry.busy {
            return Err(busy(name));
        }
        if let Some((_, at)) = entry.restarts.pending {
            return Err(restarting(name, at));
        }
        let handle = match (&entry.run, entry.record.state) {
            (Some(run), PipelineState::Running) => run.handle.clone(),
            _ => {
                return Err(ServeError::conflict(
                    "not_running",
                    format!("pipeline {name} is not running (it is {})", entry.record.state.name()),
                ))
            }
        };
        entry.busy |= claim;
        Ok(handle)
    }

    /// Ask the running pipeline to snapshot and stop, and wait for its
    /// thread to end. The snapshot's location.
    fn stop_run(&self, name: &str, savepoint: bool) -> Result<String, ServeError> {
        let handle = self
            .lock()
            .get(name)
            .and_then(|e| e.run.as_ref())
            .map(|r| r.handle.clone())
            .ok_or_else(|| no_pipeline(name))?;
        let kind = if savepoint { SnapshotKind::Savepoint } else { SnapshotKind::Checkpoint };
        let requested = self.request_snapshot(name, &handle, kind, true);
        // After a stop, or a run that ended on its own; a failed snapshot
        // leaves the run running.
        if requested.as_ref().map_or_else(|e| e.code() == ENDED, |_| true) {
            self.join_run(name);
        }
        requested
    }

    /// Wait for the thread of `name`'s run to end, if it has one.
    fn join_run(&self, name: &str) {
        let thread =
            self.lock().get_mut(name).and_then(|e| e.run.as_mut()).and_then(|r| r.thread.take());
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Ask `handle`'s run of `name` for a snapshot of `kind` (and to stop
    /// after it if `stop`). A run still starting (not listening yet) is
    /// asked again for up to [`START_WAIT`]; a run that ends meanwhile (its
    /// source finished) makes it a conflict, not a failed snapshot.
    fn request_snapshot(
        &self,
        name: &str,
        handle: &Arc<RunHandle>,
        kind: SnapshotKind,
        stop: bool,
    ) -> Result<String, ServeError> {
        let deadline = std::time::Instant::now() + START_WAIT;
        loop {
            let error = match handle.request(kind, stop, SNAPSHOT_TIMEOUT) {
                Ok(location) => return Ok(location),
                Err(error @ (RequestError::NotListening | RequestError::EndedFirst)) => error,
                Err(error) => return Err(ServeError::snapshot_failed(error.to_string())),
            };
            let (ended, state) = {
                let pipelines = self.lock();
                let entry = pipelines.get(name);
                let run =
                    entry.and_then(|e| e.run.as_ref()).filter(|r| Arc::ptr_eq(&r.handle, handle));
                let ended = run.and_then(|r| r.thread.as_ref()).is_none_or(|t| t.is_finished());
                (ended, entry.map_or("deleted", |e| e.record.state.name()))
            };
            if ended {
                return Err(ServeError::conflict(
                    ENDED,
                    format!(
                        "pipeline {name} ended before the {} was taken (it is {state})",
                        kind.name()
                    ),
                ));
            }
            if std::time::Instant::now() >= deadline {
                return Err(ServeError::conflict(
                    "starting",
                    format!("pipeline {name} is still starting ({error}): try again later"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// End an operation on `name`: apply `change` to its record, store it,
    /// and clear the busy mark.
    fn finish_operation(
        &self,
        name: &str,
        change: impl FnOnce(&mut PipelineRecord),
    ) -> Result<(), ServeError> {
        let mut pipelines = self.lock();
        let Some(entry) = pipelines.get_mut(name) else { return Ok(()) };
        entry.busy = false;
        change(&mut entry.record);
        self.store.put(&entry.record)?;
        Ok(())
    }

    /// Start a run of `entry` on its own thread (overriding a disagreeing
    /// commit marker if `override_commit_marker`: this run only): of
    /// `checked` when the caller just checked it (a deploy, an upgrade),
    /// else of its record parsed, capped and granted again (a restart, a
    /// server's start: a server restarted with fewer grants does not run it).
    fn start(
        self: &Arc<Self>,
        entry: &mut Entry,
        override_commit_marker: bool,
        checked: Option<CheckedPipeline>,
    ) {
        let name = entry.record.name.clone();
        let run = match checked {
            Some(checked) => Startable::Checked(Box::new(checked)),
            None => {
                let mut spec = match entry.record.spec(&self.data_dir) {
                    Ok(spec) => spec,
                    Err(error) => {
                        return self.record_end(
                            entry,
                            Err(format!("the stored spec no longer parses: {error}")),
                        )
                    }
                };
                self.limits.cap_defaults(&mut spec);
                if let Err(error) = self.grants.check_spec(&spec) {
                    return self.not_granted(entry, error);
                }
                Startable::Spec(Box::new(spec))
            }
        };
        let spec = run.spec();
        let mut options = RunOptions::new(self.data_dir.clone()).with_natives(self.natives.clone());
        options.served = true;
        options.sink_delay = crate::fault::sink_delay();
        options.override_commit_marker = override_commit_marker;
        options.restore = match restore_choice(spec, &self.data_dir, entry.record.restore.as_ref())
        {
            Ok(restore) => restore,
            Err(error) => return self.failed(entry, error.to_string(), Duration::ZERO),
        };
        if let Some(RestoreFrom::Path(location)) = &options.restore {
            // A deploy or an upgrade granted its restore point already.
            if matches!(run, Startable::Spec(_)) {
                if let Err(error) = self.grants.check_restore("restore", spec, location) {
                    return self.not_granted(entry, error);
                }
            }
        }
        let handle = options.handle.clone();
        let id = self.next_run.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let supervisor = Arc::clone(self);
        let thread =
            std::thread::Builder::new().name(format!("pipeline-{name}")).spawn(move || {
                let result = match run {
                    Startable::Checked(checked) => pipeline::run_checked(*checked, &options),
                    Startable::Spec(spec) => pipeline::run(&spec, &options),
                };
                supervisor.run_ended(&name, id, result);
            });
        match thread {
            Ok(thread) => {
                entry.run = Some(Run {
                    id,
                    handle,
                    started_at: crate::clock::now_millis(),
                    thread: Some(thread),
                })
            }
            Err(error) => self.record_end(entry, Err(format!("cannot start a thread: {error}"))),
        }
    }

    /// `entry` cannot start: its spec asks for what this server does not
    /// grant (any more). Failed, not restarted.
    fn not_granted(&self, entry: &mut Entry, error: crate::serve::grants::NotGranted) {
        tracing::warn!(pipeline = %entry.record.name, %error, "pipeline not started: not granted");
        self.record_end(
            entry,
            Err(format!("not started: {error} (not restarted: this server does not grant it; start weir serve with the grant, or upgrade the pipeline with a spec it grants)")),
        );
    }

    /// Stop every running pipeline for the server's shutdown, all at
    /// once: each with a final checkpoint within `grace`, then cancelled
    /// ([`pipeline::stop_run`]), so this returns within about `grace` plus
    /// [`pipeline::CANCEL_WAIT`]. Records keep their state (a restarted
    /// server runs again what was running) and nothing restarts meanwhile.
    /// Why stops were not clean.
    pub fn shutdown(&self, grace: Duration) -> Vec<String> {
        self.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        let runs: Vec<_> = self
            .lock()
            .iter_mut()
            .filter_map(|(name, entry)| {
                let run = entry.run.as_mut()?;
                Some((name.clone(), run.handle.clone(), run.thread.take()?))
            })
            .collect();
        tracing::info!(
            pipelines = runs.len(),
            ?grace,
            "shutting down: stopping every pipeline with a final checkpoint"
        );
        std::thread::scope(|scope| {
            let stops: Vec<_> = runs
                .into_iter()
                .map(|(name, handle, thread)| {
                    scope.spawn(move || pipeline::stop_run(&name, &handle, thread, Some(grace)).0)
                })
                .collect();
            stops.into_iter().filter_map(|stop| stop.join().ok().flatten()).collect()
        })
    }

    /// A run's thread ended with `result`.
    fn run_ended(self: &Arc<Self>, name: &str, id: u64, result: Result<RunSummary, RunError>) {
        if self.shutting_down.load(std::sync::atomic::Ordering::SeqCst) {
            tracing::debug!(pipeline = name, "a run ended during the shutdown; its record stays");
            return;
        }
        let mut pipelines = self.lock();
        let Some(entry) =
            pipelines.get_mut(name).filter(|e| e.run.as_ref().is_some_and(|r| r.id == id))
        else {
            return;
        };
        match result {
            Ok(summary) => self.record_end(entry, Ok(summary.stopped)),
            Err(error) if error.needs_operator() => {
                tracing::warn!(pipeline = name, %error, "pipeline failed; a restart cannot help");
                self.record_end(entry, Err(format!("{error} (not restarted: running it again cannot help until this is dealt with)")));
            }
            Err(error) => {
                tracing::warn!(pipeline = name, %error, "pipeline failed");
                let started = entry.run.as_ref().map_or(0, |r| r.started_at);
                let ran = crate::clock::now_millis().saturating_sub(started);
                let ran = Duration::from_millis(u64::try_from(ran).unwrap_or(0));
                self.failed(entry, error.to_string(), ran);
            }
        }
    }

    /// A run of `entry` failed with `reason` after running for `ran` (or
    /// could not start): schedule its restart as its strategy says, or
    /// record the failure. A failure during a stop, upgrade or delete is
    /// only recorded.
    fn failed(self: &Arc<Self>, entry: &mut Entry, reason: String, ran: Duration) {
        let strategy = match entry.record.spec(&self.data_dir).map(|s| s.restart_strategy()) {
            Ok(Ok(strategy)) if !entry.busy => strategy,
            _ => return self.record_end(entry, Err(reason)),
        };
        let restarts = &mut entry.restarts;
        restarts.last_failure = Some(reason.clone());
        let Some(delay) = restarts.tracker.next(&strategy, ran) else {
            let reason = match strategy.attempts() {
                Some(0) => reason,
                attempts => format!(
                    "{reason} (gave up after {} restart(s): restart.attempts is {}; fix the cause, then start it again with POST /v1/pipelines/{}/upgrade)",
                    restarts.tracker.total,
                    attempts.map_or("unlimited".to_string(), |a| a.to_string()),
                    entry.record.name,
                ),
            };
            return self.record_end(entry, Err(reason));
        };
        let token = self.next_run.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        let at = crate::clock::now_millis().saturating_add(delay_ms);
        let name = entry.record.name.clone();
        tracing::warn!(pipeline = %name, restart = restarts.tracker.total, delay = %humantime::format_duration(delay), "restarting the failed pipeline after a delay");
        restarts.pending = Some((token, at));
        // Still running as far as a server restart is concerned.
        entry.record.state = PipelineState::Running;
        entry.record.failure = None;
        if let Err(error) = self.store.put(&entry.record) {
            tracing::error!(pipeline = %name, %error, "cannot record a pending restart");
        }
        if let Err(error) = self.arm(name, token, delay) {
            entry.restarts.pending = None;
            let reason = entry.restarts.last_failure.clone().unwrap_or_default();
            self.record_end(entry, Err(format!("{reason}; cannot start a restart timer: {error}")));
        }
    }

    /// After `delay`, restart `name` if restart `token` is still pending.
    fn arm(self: &Arc<Self>, name: String, token: u64, delay: Duration) -> std::io::Result<()> {
        let supervisor = Arc::clone(self);
        std::thread::Builder::new().name(format!("restart-{name}")).spawn(move || {
            std::thread::sleep(delay);
            supervisor.restart_due(&name, token);
        })?;
        Ok(())
    }

    /// Restart `token`'s delay is over: start the pipeline again, unless the
    /// restart was cancelled (stop, delete, upgrade) since.
    fn restart_due(self: &Arc<Self>, name: &str, token: u64) {
        if self.shutting_down.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let mut pipelines = self.lock();
        let Some(entry) = pipelines.get_mut(name) else { return };
        if entry.restarts.pending.map(|(t, _)| t) != Some(token) {
            return;
        }
        if entry.busy {
            // An operation decides; look again shortly if it leaves the restart pending.
            if let Err(error) = self.arm(name.to_string(), token, Duration::from_millis(200)) {
                entry.restarts.pending = None;
                self.record_end(entry, Err(format!("cannot start a restart timer: {error}")));
            }
            return;
        }
        entry.restarts.pending = None;
        tracing::info!(
            pipeline = name,
            restart = entry.restarts.tracker.total,
            "restarting the failed pipeline"
        );
        self.start(entry, false, None);
    }

    /// If `name` waits to restart, cancel that and mark it stopped (true);
    /// a savepoint cannot be taken then.
    fn cancel_restart(&self, name: &str, savepoint: bool) -> Result<bool, ServeError> {
        let mut pipelines = self.lock();
        let entry = pipelines.get_mut(name).ok_or_else(|| no_pipeline(name))?;
        if entry.busy {
            return Err(busy(name));
        }
        let Some((_, at)) = entry.restarts.pending else { return Ok(false) };
        if savepoint {
            return Err(restarting(name, at));
        }
        entry.restarts.pending = None;
        entry.record.state = PipelineState::Stopped;
        self.store.put(&entry.record)?;
        Ok(true)
    }

    /// Record how a run ended: `Ok(stopped on request)` or the failure.
    fn record_end(&self, entry: &mut Entry, outcome: Result<bool, String>) {
        let (state, failure) = match outcome {
            Ok(true) => (PipelineState::Stopped, None),
            Ok(false) => (PipelineState::Finished, None),
            Err(reason) => (PipelineState::Failed, Some(reason)),
        };
        entry.record.state = state;
        entry.record.failure = failure;
        if let Err(error) = self.store.put(&entry.record) {
            tracing::error!(pipeline = %entry.record.name, %error, "cannot record the end of a run");
        }
    }
}

/// Which snapshot a (re)started pipeline begins from: the record's restore
/// point unless a newer checkpoint exists (taken since by this pipeline);
/// else the default (its newest checkpoint).
fn restore_choice(
    spec: &PipelineSpec,
    data_dir: &Path,
    restore: Option<&RestorePoint>,
) -> Result<Option<RestoreFrom>, ServeError> {
    let Some(point) = restore else { return Ok(None) };
    let newest =
        checkpoint_storage(spec, data_dir)?.completed().map_err(unavailable)?.first().map(|m| m.id);
    Ok(if newest.is_some_and(|n| n > point.id) {
        None
    } else {
        Some(RestoreFrom::Path(point.location.clone()))
    })
}

/// The newest savepoint of a pipeline, as a restore point.
fn newest_savepoint(
    data_dir: &Path,
    spec: &PipelineSpec,
) -> Result<Option<RestorePoint>, ServeError> {
    let storage = checkpoint_storage(spec, data_dir)?;
    let newest =
        storage.completed_of(SnapshotKind::Savepoint).map_err(unavailable)?.into_iter().next();
    Ok(newest.map(|m| RestorePoint {
        location: storage.describe(&storage.savepoint_dir(m.id)),
        id: m.id,
    }))
}

/// The pins an upgrade from `old` to `new` keeps: a field keeps its pin
/// when it still names the same function.
pub(super) fn kept_pins(
    old: &PipelineSpec,
    new: &PipelineSpec,
    pins: &BTreeMap<String, u32>,
) -> BTreeMap<String, u32> {
    let named = |s: &PipelineSpec, field: &str| {
        s.functions()
            .into_iter()
            .find(|(f, _)| f.as_str() == field)
            .and_then(|(_, f)| f.function.clone())
    };
    pins.iter()
        .filter(|(field, _)| named(new, field).is_some() && named(new, field) == named(old, field))
        .map(|(f, v)| (f.clone(), *v))
        .collect()
}

/// The version of every stored function `spec` names, by field: the
/// spec's own `version`, else a `choice` for that function, else `kept`,
/// else the newest. Each must exist.
pub(super) fn pin_functions(
    spec: &PipelineSpec,
    kept: &BTreeMap<String, u32>,
    choices: &BTreeMap<String, VersionChoice>,
    functions: &FunctionStore,
) -> Result<BTreeMap<String, u32>, ServeError> {
    if let Some(unknown) = choices.keys().find(|name| {
        !spec.functions().iter().any(|(_, f)| f.function.as_deref() == Some(name.as_str()))
    }) {
        return Err(ServeError::invalid_spec(format!(
            "functions.{unknown}: the pipeline uses no function of that name"
        )));
    }
    let mut pins = BTreeMap::new();
    for (field, function) in spec.functions() {
        let Some(name) = &function.function else { continue };
        let wanted = match (function.version, choices.get(name)) {
            (Some(version), _) | (None, Some(&VersionChoice::Exactly(version))) => Some(version),
            (None, Some(VersionChoice::Latest)) => None,
            (None, None) => kept.get(&field).copied(),
        };
        let stored = functions
            .get(name, wanted)
            .map_err(|e| ServeError::invalid_pipeline(format!("{field}.function: {e}")))?;
        pins.insert(field.to_string(), stored.version);
    }
    Ok(pins)
}

/// The pipeline's checkpoint storage, as its runs open it.
fn checkpoint_storage(
    spec: &PipelineSpec,
    data_dir: &Path,
) -> Result<CheckpointStorage, ServeError> {
    pipeline::checkpoint_storage(spec, data_dir).map_err(unavailable)
}

fn view(entry: &Entry) -> PipelineView {
    PipelineView {
        record: entry.record.clone(),
        run: entry.run.as_ref().map(|r| (r.handle.clone(), r.started_at)),
        restart: RestartStatus {
            restarts: entry.restarts.tracker.total,
            last_failure: entry.restarts.last_failure.clone(),
            next_attempt_at: entry.restarts.pending.map(|(_, at)| at),
        },
    }
}

/// The code of a request refused because the run ended on its own while
/// it waited for a snapshot.
const ENDED: &str = "not_running";

/// What a run starts from: a pipeline checked just before, or a spec the
/// run checks and loads itself.
enum Startable {
    /// Checked by a deploy or an upgrade, its functions loaded.
    Checked(Box<CheckedPipeline>),
    /// A record's spec, parsed, capped and granted again.
    Spec(Box<PipelineSpec>),
}

impl Startable {
    fn spec(&self) -> &PipelineSpec {
        match self {
            Startable::Checked(checked) => checked.spec(),
            Startable::Spec(spec) => spec,
        }
    }
}

fn no_pipeline(name: &str) -> ServeError {
    ServeError::not_found(format!("no pipeline {:?}", name.chars().take(80).collect::<String>()))
}

fn busy(name: &str) -> ServeError {
    ServeError::conflict(
        "busy",
        format!(
            "pipeline {name} is being stopped, upgraded or deleted; try again when that is done"
        ),
    )
}

fn restarting(name: &str, at: i64) -> ServeError {
    ServeError::conflict(
        "restarting",
        format!("pipeline {name} failed and waits to restart (at {at} ms since the epoch): it has no running state; stop it (without a savepoint) to cancel the restart, or try again once it runs"),
    )
}

/// The pipeline's checkpoint storage cannot be opened or listed.
fn unavailable(error: impl std::fmt::Display) -> ServeError {
    ServeError::storage_unavailable(format!("the checkpoint storage cannot be read: {error}"))
}

fn internal(error: impl std::fmt::Display) -> ServeError {
    ServeError::internal(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::grants::GrantsConfig;
    use crate::serve::ServeErrorKind;

    /// A supervisor on a fresh data directory, with the default limits and
    /// grants and no native functions.
    fn supervisor() -> (tempfile::TempDir, Arc<Supervisor>, FunctionStore) {
        let dir = tempfile::tempdir().unwrap();
        let grants = Grants::new(dir.path(), &GrantsConfig::default()).unwrap();
        let supervisor =
            Supervisor::open(dir.path(), ServerLimits::default(), NativeCatalog::default(), grants)
                .unwrap();
        let functions = FunctionStore::open(dir.path()).unwrap();
        (dir, supervisor, functions)
    }

    /// A pipeline of `count` generated events straight into a discarding
    /// sink: no functions, so it needs nothing uploaded.
    fn bounded(name: &str, count: u64) -> String {
        format!(
            "name: {name}\noperators:\n  src: {{ source: {{ type: generator, count: {count} }} }}\n  out: {{ inputs: [src], sink: {{ type: discard }} }}\n"
        )
    }

    /// The error of `result`, which must be one.
    fn refused<T>(result: Result<T, ServeError>) -> ServeError {
        match result {
            Ok(_) => panic!("not refused"),
            Err(error) => error,
        }
    }

    fn kind(error: ServeError) -> (ServeErrorKind, &'static str) {
        match error {
            ServeError::Refused { kind, code, .. } => (kind, code),
            other => panic!("not a refusal: {other}"),
        }
    }

    /// Wait (polling) until `name`'s run has ended; its final state.
    fn ended(supervisor: &Supervisor, name: &str) -> PipelineState {
        for _ in 0..600 {
            let view = supervisor.get(name).unwrap();
            if view.record.state != PipelineState::Running {
                return view.record.state;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("pipeline {name} still running after 30 s");
    }

    #[test]
    fn a_deploy_refuses_what_cannot_run_and_keeps_nothing() {
        let (_dir, supervisor, functions) = supervisor();
        let malformed = refused(supervisor.deploy("name: [", None, false, &functions));
        assert_eq!(kind(malformed), (ServeErrorKind::InvalidSpec, "invalid_spec"));
        let missing = "name: m\nsource: { type: generator, count: 1 }\nkey: { function: nowhere }\nprocess: { function: nowhere }\nsink: { type: discard }\n";
        let error = refused(supervisor.deploy(missing, None, false, &functions));
        assert!(error.to_string().contains("key.function: no function nowhere"), "{error}");
        let file = "name: f\nsource: { type: generator, count: 1 }\nkey: { wasm: k.wasm }\nprocess: { wasm: k.wasm }\nsink: { type: discard }\n";
        let error = refused(supervisor.deploy(file, None, false, &functions));
        assert_eq!(kind(error).0, ServeErrorKind::InvalidSpec);
        let wide = format!("{}batch_size: 65537\n", bounded("w", 1));
        let error = refused(supervisor.deploy(&wide, None, false, &functions));
        assert_eq!(kind(error), (ServeErrorKind::LimitExceeded, "limit_exceeded"));
        for name in ["m", "f", "w"] {
            assert_eq!(kind(refused(supervisor.get(name))).0, ServeErrorKind::NotFound);
        }
    }

    #[test]
    fn checkpoint_storage_inside_another_pipelines_is_refused() {
        let (dir, supervisor, functions) = supervisor();
        let checkpointed = |name: &str, storage: Option<String>| {
            let storage = storage.map(|url| format!(", storage: {url:?}")).unwrap_or_default();
            format!("{}checkpoint: {{ interval: 1s{storage} }}\n", bounded(name, 10))
        };
        supervisor.deploy(&checkpointed("victim", None), None, false, &functions).unwrap();
        let root = std::fs::canonicalize(dir.path().join("checkpoints")).unwrap();
        // Inside the victim's directory, named like one of its checkpoints.
        let inside = Some(format!("file://{}/victim", root.display()));
        let error = refused(supervisor.deploy(
            &checkpointed("chk-4611686018427387903", inside),
            None,
            false,
            &functions,
        ));
        let text = error.to_string();
        assert!(text.contains("overlaps pipeline victim"), "{text}");
        assert_eq!(kind(error).0, ServeErrorKind::InvalidSpec);
        // Around another's: a pipeline named like the directory another
        // pipeline's storage was put in.
        let nested = Some(format!("file://{}/outer", root.display()));
        supervisor.deploy(&checkpointed("inner", nested), None, false, &functions).unwrap();
        let error =
            refused(supervisor.deploy(&checkpointed("outer", None), None, false, &functions));
        assert!(error.to_string().contains("overlaps pipeline inner"), "{error}");
        // Beside it: the server's storage under another name is fine.
        let beside = Some(format!("file://{}", root.display()));
        supervisor.deploy(&checkpointed("neighbour", beside), None, false, &functions).unwrap();
    }

    #[test]
    fn a_deployed_pipeline_runs_to_its_end_and_is_deleted() {
        let (_dir, supervisor, functions) = supervisor();
        let view = supervisor.deploy(&bounded("b", 1000), None, false, &functions).unwrap();
        assert_eq!(view.record.generation, 1);
        let again = refused(supervisor.deploy(&bounded("b", 1000), None, false, &functions));
        assert_eq!(kind(again), (ServeErrorKind::Conflict, "exists"));
        assert_eq!(ended(&supervisor, "b"), PipelineState::Finished);
        let summary = supervisor.get("b").unwrap().run.map(|(handle, _)| handle);
        assert!(summary.is_some(), "the finished run is kept for its status");
        supervisor.delete("b").unwrap();
        assert_eq!(kind(refused(supervisor.get("b"))).0, ServeErrorKind::NotFound);
        assert_eq!(kind(refused(supervisor.delete("b"))).0, ServeErrorKind::NotFound);
    }
    #[test]
    fn a_running_pipeline_takes_a_savepoint_stops_and_upgrades_from_it() {
        let (_dir, supervisor, functions) = supervisor();
        let spec = "name: s\ncheckpoint: { interval: 1s }\noperators:\n  src: { source: { type: generator, count: 100000000, rate: 2000 } }\n  out: { inputs: [src], sink: { type: discard } }\n";
        supervisor.deploy(spec, None, false, &functions).unwrap();
        // The run answers once it has started.
        let savepoint = (0..600)
            .find_map(|_| match supervisor.savepoint("s") {
                Ok(location) => Some(location),
                Err(error) => {
                    assert_eq!(kind(error).0, ServeErrorKind::Conflict, "only while starting");
                    std::thread::sleep(Duration::from_millis(50));
                    None
                }
            })
            .expect("a savepoint within 30 s");
        assert_eq!(supervisor.get("s").unwrap().record.last_savepoint, Some(savepoint));
        let stopped_at = supervisor.stop("s", true).unwrap();
        let view = supervisor.get("s").unwrap();
        assert_eq!(view.record.state, PipelineState::Stopped);
        assert_eq!(
            kind(refused(supervisor.savepoint("s"))),
            (ServeErrorKind::Conflict, "not_running")
        );
        let upgrade = Upgrade { parallelism: Some(2), ..Upgrade::default() };
        let upgraded = supervisor.upgrade("s", &upgrade, &functions).unwrap();
        assert_eq!(upgraded.record.generation, 2);
        assert_eq!(upgraded.record.state, PipelineState::Running);
        assert_eq!(upgraded.record.parallelism, Some(2));
        assert_eq!(
            upgraded.record.restore.map(|point| point.location),
            Some(stopped_at),
            "the upgrade starts from the stop's savepoint"
        );
        supervisor.delete("s").unwrap();
        assert_eq!(kind(refused(supervisor.get("s"))).0, ServeErrorKind::NotFound);
    }
}
