//! A worker of a whole cluster (`weir worker --cluster NAME`): it runs
//! every pipeline the cluster's control topic says is running, each as a
//! [`Worker`] in that pipeline's own group, and follows the topic — a new
//! deployment is started, a new version switched to, a stopped or deleted
//! pipeline stopped (its units with final checkpoints).
//!
//! A switch happens at a consistent point without a protocol of Weir's
//! own: every worker stops the old version's units (each commits a final
//! checkpoint) and leaves its group; a worker of the new version is
//! admitted only once the group is empty ([`super::admission`]) and then
//! restores every unit from those checkpoints, by stage `uid`. Until the
//! last worker of the old version has left, the new one waits and tries
//! again; a worker killed meanwhile leaves the group at its session
//! timeout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::blobs::{BlobError, FunctionBlobs};
use super::control::{ControlError, ControlTopic, Deployment, Desired, WorkerReport};
use super::layout::LayoutError;
use super::plan::{broker_partitions, InputPartitions};
use super::worker::{
    GroupState, Liveness, Readiness, Worker, WorkerConfig, WorkerError, WorkerStatus,
};
use super::{plan, ClusterPlan, PlanError};
use crate::connectors::kafka::admin::delete_topics;
use crate::runtime::native::NativeCatalog;
use crate::specification::{PipelineSpec, SpecError};

/// How often the control topic is read.
const POLL: Duration = Duration::from_millis(500);

/// How often a worker writes its status to the cluster's status topic.
pub const REPORT_EVERY: Duration = Duration::from_secs(2);

/// How long a pipeline whose worker could not start (another version's
/// members still in the group, a broker away) waits before it is tried
/// again.
const RETRY: Duration = Duration::from_secs(3);

/// What a cluster worker needs.
pub struct FleetConfig {
    /// The cluster's control topic.
    pub control: ControlTopic,
    /// Where the cluster's functions are (`s3://bucket/prefix`, …).
    pub functions: String,
    /// This worker's id.
    pub worker_id: String,
    /// Its local scratch (functions fetched, RocksDB working copies).
    pub data_dir: PathBuf,
    /// Native functions specs may name.
    pub natives: NativeCatalog,
    /// How long stopping a unit waits for its final checkpoint.
    pub stop_grace: Duration,
}

/// Why a deployment cannot run here.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The control topic failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A function could not be fetched.
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// The deployed spec is not valid.
    #[error("pipeline {pipeline}: {source}")]
    Spec {
        /// The pipeline.
        pipeline: String,
        /// Why.
        source: SpecError,
    },
    /// The deployed spec cannot be cut into units.
    #[error("pipeline {pipeline}: {source}")]
    Plan {
        /// The pipeline.
        pipeline: String,
        /// Why.
        source: PlanError,
    },
    /// A function field the deployment gives no stored function for.
    #[error("pipeline {pipeline}: {field} names no function stored in the cluster (deploy it with its function uploaded)")]
    Unstored {
        /// The pipeline.
        pipeline: String,
        /// The spec field.
        field: String,
    },
    /// A stopped deployment whose previous layout has drained: nothing
    /// to run.
    #[error("pipeline {pipeline} is stopped")]
    Stopped {
        /// The pipeline.
        pipeline: String,
    },
    /// The layout before a deployment has units that have not drained.
    #[error("pipeline {pipeline}: units {units} of its previous layout have not drained; the new layout waits for them")]
    Undrained {
        /// The pipeline.
        pipeline: String,
        /// The units, comma-separated.
        units: String,
    },
    /// Which units of the previous layout drained could not be read.
    #[error("pipeline {pipeline}: reading which units of its previous layout drained: {source}")]
    Drained {
        /// The pipeline.
        pipeline: String,
        /// Why.
        source: crate::connectors::ConnectorError,
    },
    /// A local file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What a cluster worker reports (`GET /v1/worker`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetStatus {
    /// The worker's id.
    pub worker_id: String,
    /// The control topic it follows.
    pub control_topic: String,
    /// Each pipeline it runs, at the version it runs.
    pub pipelines: Vec<FleetPipeline>,
    /// Pipelines that cannot run here now, and why.
    pub waiting: BTreeMap<String, String>,
    /// Where its HTTP endpoints are reached (servers route state lookups
    /// there), if it serves them.
    #[serde(default)]
    pub address: Option<String>,
}

/// One pipeline a cluster worker runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetPipeline {
    /// The version of the deployment.
    pub version: u64,
    /// Its worker's status.
    #[serde(flatten)]
    pub worker: WorkerStatus,
}

/// A pipeline's worker running here.
struct Member {
    version: u64,
    worker: Arc<Worker>,
    shutdown: Arc<AtomicBool>,
    thread: JoinHandle<Result<(), WorkerError>>,
}

/// A worker of every pipeline a cluster runs.
pub struct Fleet {
    config: FleetConfig,
    blobs: FunctionBlobs,
    members: Mutex<BTreeMap<String, Member>>,
    /// Pipelines not running here, why, and when to try again.
    waiting: Mutex<BTreeMap<String, (String, Instant)>>,
    /// The control topic has been read to its end once.
    caught_up: AtomicBool,
    /// Where its HTTP endpoints are reached.
    address: std::sync::OnceLock<String>,
    /// Previous layouts known drained, by pipeline and version.
    drained: Mutex<std::collections::BTreeSet<(String, u64)>>,
}

impl Fleet {
    /// A worker of `config`'s cluster, running nothing yet.
    pub fn new(config: FleetConfig) -> Result<Arc<Self>, FleetError> {
        let blobs = FunctionBlobs::open(&config.functions)?;
        Ok(Arc::new(Fleet {
            config,
            blobs,
            members: Mutex::default(),
            waiting: Mutex::default(),
            caught_up: AtomicBool::new(false),
            address: std::sync::OnceLock::new(),
            drained: Mutex::default(),
        }))
    }

    fn members(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Instant)>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it does its share: the control topic read, and every
    /// pipeline it runs ready (the first that is not says why, named).
    pub fn readiness(&self) -> Readiness {
        if !self.caught_up.load(Ordering::Relaxed) {
            let mut starting = Readiness::of(GroupState::Starting, 0, Vec::new());
            starting.reason = Some("starting: reading the cluster's control topic".into());
            return starting;
        }
        let members = self.members();
        let each: Vec<(&String, Readiness)> =
            members.iter().map(|(name, m)| (name, m.worker.readiness())).collect();
        let units = each.iter().map(|(_, r)| r.units).sum();
        let failing = each.iter().flat_map(|(_, r)| r.failing.clone()).collect();
        match each.iter().find(|(_, r)| !r.ready) {
            None => Readiness::of(GroupState::Member, units, Vec::new()),
            Some((name, first)) => Readiness {
                ready: false,
                group: first.group,
                units,
                reason: Some(format!(
                    "pipeline {name}: {}",
                    first.reason.clone().unwrap_or_default()
                )),
                failing,
            },
        }
    }

    /// Whether every pipeline's worker loop turns (the longest wait since
    /// a turn is the one reported).
    pub fn liveness(&self) -> Liveness {
        let members = self.members();
        let worst =
            members.values().map(|m| m.worker.liveness()).max_by_key(|l| l.since_last_turn_ms);
        worst.unwrap_or(Liveness {
            alive: true,
            group: GroupState::Member,
            since_last_turn_ms: 0,
            limit_ms: 0,
        })
    }

    /// Say where its HTTP endpoints are reached (`http://host:port`), in
    /// its reports from now on.
    pub fn advertise(&self, url: String) {
        let _ = self.address.set(url);
    }

    /// The live handle of unit `unit` of pipeline `pipeline`, while it
    /// runs here.
    pub fn unit_handle(
        &self,
        pipeline: &str,
        unit: &str,
    ) -> Option<Arc<crate::observe::RunHandle>> {
        self.members().get(pipeline)?.worker.unit_handle(pipeline, unit)
    }

    /// What it runs.
    pub fn status(&self) -> FleetStatus {
        let pipelines = self
            .members()
            .values()
            .map(|m| FleetPipeline { version: m.version, worker: m.worker.status() })
            .collect();
        let waiting =
            self.waiting().iter().map(|(name, (why, _))| (name.clone(), why.clone())).collect();
        FleetStatus {
            worker_id: self.config.worker_id.clone(),
            control_topic: self.config.control.topic().to_string(),
            pipelines,
            waiting,
            address: self.address.get().cloned(),
        }
    }

    /// Follow the control topic and run what it deploys until `shutdown`
    /// is set; then stop every pipeline (final checkpoints). The pipelines
    /// whose stop was not clean, if any.
    pub fn run(&self, shutdown: &AtomicBool) -> Result<Vec<String>, FleetError> {
        self.config.control.ensure()?;
        let status_topic = self.config.control.status_topic();
        status_topic.ensure()?;
        let reports = status_topic.writer()?;
        let mut reader = self.config.control.reader()?;
        reader.catch_up()?;
        self.caught_up.store(true, Ordering::Relaxed);
        tracing::info!(
            topic = self.config.control.topic(),
            deployed = reader.deployments().len(),
            "cluster worker following the control topic"
        );
        let mut reported = Instant::now() - REPORT_EVERY;
        while !shutdown.load(Ordering::Relaxed) {
            self.reconcile(reader.deployments());
            if reported.elapsed() >= REPORT_EVERY {
                reported = Instant::now();
                if let Err(error) = reports.report(&self.report()) {
                    tracing::warn!(%error, "cannot report this worker's status; trying again");
                }
            }
            if let Err(error) = reader.poll(POLL) {
                tracing::warn!(%error, "reading the control topic; trying again");
                std::thread::sleep(POLL);
            }
        }
        let names: Vec<String> = self.members().keys().cloned().collect();
        let unclean = self.stop(&names);
        if let Err(error) = reports.retract(&self.config.worker_id) {
            tracing::warn!(%error, "cannot take this worker's status report back");
        }
        Ok(unclean)
    }

    /// Its status as the status topic keeps it.
    fn report(&self) -> WorkerReport {
        WorkerReport {
            worker_id: self.config.worker_id.clone(),
            reported_at: crate::clock::now_millis(),
            status: serde_json::to_value(self.status()).unwrap_or_default(),
        }
    }

    /// Make what runs here match `deployments`.
    fn reconcile(&self, deployments: &BTreeMap<String, Deployment>) {
        // Pipelines whose worker ended on its own (an error): retried later.
        let ended: Vec<String> = self
            .members()
            .iter()
            .filter(|(_, m)| m.thread.is_finished())
            .map(|(name, _)| name.clone())
            .collect();
        for name in ended {
            if let Some(member) = self.members().remove(&name) {
                let drained = member.worker.draining();
                let why = match member.thread.join() {
                    Ok(Ok(())) if drained => {
                        // Its layout drained: the next version starts now.
                        tracing::info!(pipeline = %name, version = member.version, "the previous layout drained");
                        continue;
                    }
                    Ok(Ok(())) => "its worker ended".to_string(),
                    Ok(Err(error)) => error.to_string(),
                    Err(_) => "its worker panicked".to_string(),
                };
                tracing::warn!(pipeline = %name, %why, ?RETRY, "pipeline worker ended; starting it again");
                self.waiting().insert(name, (why, Instant::now() + RETRY));
            }
        }
        // Changed, stopped or deleted: stopped here (all at once) — or
        // drained, when the new version changes the layout it runs.
        let mut outdated = Vec::new();
        for (name, member) in self.members().iter() {
            match deployments.get(name) {
                Some(d) if d.desired == Desired::Running && d.version == member.version => {}
                // A rescale, or a stop or savepoint that drains first.
                Some(d) if d.previous.as_ref().is_some_and(|p| p.version == member.version) => {
                    member.worker.drain();
                }
                _ => outdated.push(name.clone()),
            }
        }
        if !outdated.is_empty() {
            for unclean in self.stop(&outdated) {
                tracing::warn!(%unclean, "a pipeline's units stopped without final checkpoints");
            }
        }
        self.waiting().retain(|name, _| deployments.contains_key(name));
        for (name, deployment) in deployments {
            let due = self.waiting().get(name).is_none_or(|(_, at)| Instant::now() >= *at);
            if self.members().contains_key(name) || !due {
                continue;
            }
            // A stopped pipeline runs nothing, but its previous layout
            // (a stop with a savepoint) still drains.
            let running = deployment.desired == Desired::Running;
            if !running && (deployment.previous.is_none() || self.drained_before(deployment)) {
                continue;
            }
            match self.start(deployment) {
                Ok(member) => {
                    tracing::info!(pipeline = %name, version = deployment.version, "pipeline started here");
                    self.waiting().remove(name);
                    self.members().insert(name.clone(), member);
                }
                Err(error) => {
                    tracing::warn!(pipeline = %name, %error, ?RETRY, "pipeline cannot start here yet");
                    self.waiting()
                        .insert(name.clone(), (error.to_string(), Instant::now() + RETRY));
                }
            }
        }
    }

    /// Stop the pipelines `names` runs here, all at once; those whose
    /// stop was not clean, with why.
    fn stop(&self, names: &[String]) -> Vec<String> {
        let members: Vec<(String, Member)> = {
            let mut members = self.members();
            names.iter().filter_map(|n| Some((n.clone(), members.remove(n)?))).collect()
        };
        for (_, member) in &members {
            member.shutdown.store(true, Ordering::Relaxed);
        }
        members
            .into_iter()
            .filter_map(|(name, member)| match member.thread.join() {
                Ok(Ok(())) => {
                    tracing::info!(pipeline = %name, version = member.version, "pipeline stopped here");
                    None
                }
                Ok(Err(error)) => Some(format!("{name}: {error}")),
                Err(_) => Some(format!("{name}: its worker panicked")),
            })
            .collect()
    }

    /// Start `deployment`'s worker on a thread of its own — or, while the
    /// layout before it has not drained, a worker draining that one.
    fn start(&self, deployment: &Deployment) -> Result<Member, FleetError> {
        let Some(previous) = &deployment.previous else {
            let (plan, seeds) = self.layout_of(deployment)?;
            return self.launch(deployment, plan, seeds);
        };
        let before = self.plan(previous)?;
        let drained = self.drained_units(deployment, &before)?;
        if !super::drained::undrained(&before, &drained).is_empty() {
            tracing::info!(pipeline = %deployment.pipeline, version = previous.version, "draining the previous layout first");
            // Started as it would be (its tasks seeded if they never ran),
            // then drained.
            let (plan, seeds) = self.layout_of(previous)?;
            let member = self.launch(previous, plan, seeds)?;
            member.worker.drain();
            return Ok(member);
        }
        self.drained
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(previous_key(deployment));
        if deployment.desired != Desired::Running {
            return Err(FleetError::Stopped { pipeline: deployment.pipeline.clone() });
        }
        let plan = self.plan(deployment)?;
        // Nothing is left unread in the old exchange topics: they go (the
        // old units topic stays, its drained records naming the seeds).
        let old: Vec<&str> = before
            .exchanges
            .iter()
            .filter(|e| plan.exchanges.iter().all(|n| n.name != e.name))
            .map(|e| e.name.as_str())
            .collect();
        if let Err(error) = delete_topics(&before.bootstrap_servers, &before.properties, &old) {
            tracing::warn!(%error, topics = ?old, "cannot delete the drained layout's exchange topics; they stay (empty of unread records)");
        }
        let seeds = self.seeds_after(deployment, &plan, &before, &drained)?;
        self.launch(deployment, plan, seeds)
    }

    /// `deployment`'s plan, and where its tasks take their state from on
    /// their first start: the drained tasks of the layout before it, or the
    /// snapshot it was deployed from.
    fn layout_of(
        &self,
        deployment: &Deployment,
    ) -> Result<(ClusterPlan, BTreeMap<String, crate::pipeline::Seed>), FleetError> {
        let plan = self.plan(deployment)?;
        let seeds = match (&deployment.previous, &deployment.restore) {
            (Some(previous), _) => {
                let before = self.plan(previous)?;
                let drained = self.drained_units(deployment, &before)?;
                self.seeds_after(deployment, &plan, &before, &drained)?
            }
            (None, Some(location)) => super::layout::snapshot_seeds(&plan, location),
            (None, None) => BTreeMap::new(),
        };
        Ok((plan, seeds))
    }

    /// Where the tasks of `plan` (of `deployment`) take their state from:
    /// the drained tasks of `before` — every unit of which must have
    /// drained (`drained`), so no task is seeded partially.
    fn seeds_after(
        &self,
        deployment: &Deployment,
        plan: &ClusterPlan,
        before: &ClusterPlan,
        drained: &BTreeMap<String, u64>,
    ) -> Result<BTreeMap<String, crate::pipeline::Seed>, FleetError> {
        let left = super::drained::undrained(before, drained);
        if !left.is_empty() {
            return Err(FleetError::Undrained {
                pipeline: deployment.pipeline.clone(),
                units: left.join(", "),
            });
        }
        let seeds = super::layout::seeds(plan, before, drained);
        tracing::info!(pipeline = %deployment.pipeline, version = deployment.version, seeded = seeds.len(), "the previous layout drained: its tasks seed the new ones");
        Ok(seeds)
    }

    /// Which units of `before` (the layout before `deployment`) drained.
    fn drained_units(
        &self,
        deployment: &Deployment,
        before: &ClusterPlan,
    ) -> Result<BTreeMap<String, u64>, FleetError> {
        super::drained::drained_units(before)
            .map_err(|source| FleetError::Drained { pipeline: deployment.pipeline.clone(), source })
    }

    /// Whether `deployment`'s previous layout is known to have drained
    /// (asked of Kafka until it has, at most every [`RETRY`]).
    fn drained_before(&self, deployment: &Deployment) -> bool {
        let key = previous_key(deployment);
        if self.drained.lock().unwrap_or_else(PoisonError::into_inner).contains(&key) {
            return true;
        }
        let Some(previous) = &deployment.previous else { return true };
        let drained = self
            .plan(previous)
            .ok()
            .and_then(|plan| super::drained::all_drained(&plan).ok())
            .unwrap_or(false);
        if drained {
            self.drained.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
        } else {
            // Asked again once the pipeline's retry is due.
            self.waiting().insert(
                deployment.pipeline.clone(),
                ("its previous layout drains".into(), Instant::now() + RETRY),
            );
        }
        drained
    }

    /// `deployment`'s plan, its functions fetched.
    fn plan(&self, deployment: &Deployment) -> Result<ClusterPlan, FleetError> {
        let spec = self.materialize(deployment)?;
        plan(&spec, &broker_partitions)
            .map_err(|source| FleetError::Plan { pipeline: deployment.pipeline.clone(), source })
    }

    /// Run `plan` (of `deployment`), tasks of a new layout seeded by
    /// `seeds`, on a thread of its own.
    fn launch(
        &self,
        deployment: &Deployment,
        plan: ClusterPlan,
        seeds: BTreeMap<String, crate::pipeline::Seed>,
    ) -> Result<Member, FleetError> {
        let worker = Worker::new(WorkerConfig {
            plan,
            worker_id: self.config.worker_id.clone(),
            data_dir: self.config.data_dir.clone(),
            natives: self.config.natives.clone(),
            stop_grace: self.config.stop_grace,
            seeds,
            restore: deployment.restore.clone().filter(|_| deployment.previous.is_none()),
        });
        let shutdown = Arc::new(AtomicBool::new(false));
        let thread = {
            let (worker, shutdown) = (Arc::clone(&worker), Arc::clone(&shutdown));
            std::thread::Builder::new()
                .name(format!("pipeline {}", deployment.pipeline))
                .spawn(move || worker.run(&shutdown))
                .map_err(|source| FleetError::Io { path: self.config.data_dir.clone(), source })?
        };
        Ok(Member { version: deployment.version, worker, shutdown, thread })
    }

    /// `deployment`'s spec with each function fetched from the cluster's
    /// storage into this worker's data directory (checked by digest).
    fn materialize(&self, deployment: &Deployment) -> Result<PipelineSpec, FleetError> {
        materialize(deployment, &self.blobs, &self.config.data_dir.join("cluster-functions"))
    }
}

/// The key of `deployment`'s previous layout among those known drained.
fn previous_key(deployment: &Deployment) -> (String, u64) {
    let version = deployment.previous.as_ref().map_or(0, |p| p.version);
    (deployment.pipeline.clone(), version)
}

/// `deployment`'s spec with each function fetched from `blobs` into `dir`
/// (checked by digest) and named by its path there: what a worker runs.
pub fn materialize(
    deployment: &Deployment,
    blobs: &FunctionBlobs,
    dir: &Path,
) -> Result<PipelineSpec, FleetError> {
    let pipeline = deployment.pipeline.clone();
    let invalid = |source| FleetError::Spec { pipeline: pipeline.clone(), source };
    let mut spec = PipelineSpec::parse(&deployment.spec).map_err(invalid)?;
    super::layout::in_layout(&mut spec, deployment.layout);
    for (field, function) in spec.functions_mut() {
        if function.native.is_some() {
            continue;
        }
        let Some(sha256) = deployment.functions.get(&field) else {
            return Err(FleetError::Unstored { pipeline, field });
        };
        let path = fetch(blobs, dir, sha256)?;
        function.wasm = Some(path);
        function.function = None;
        function.version = None;
    }
    spec.validate().map_err(invalid)?;
    Ok(spec)
}

/// `next` (its version set) as it follows the pipeline's `current`
/// deployment, if any: in the same layout, or in a new one that drains
/// `current`'s first (see [`super::layout::follow`]), its plans made with
/// the functions from `blobs` (fetched into `dir`) and the input
/// partitions the brokers have now.
pub fn follow(
    current: Option<&Deployment>,
    next: Deployment,
    blobs: &FunctionBlobs,
    dir: &Path,
) -> Result<Deployment, LayoutError> {
    let Some(current) = current else { return Ok(next) };
    let planned = |deployment: &Deployment| -> Result<ClusterPlan, LayoutError> {
        let spec =
            materialize(deployment, blobs, dir).map_err(|e| LayoutError::Plan(e.to_string()))?;
        plan(&spec, &broker_partitions).map_err(|e| LayoutError::Plan(e.to_string()))
    };
    let drained = |deployment: &Deployment| -> Result<bool, LayoutError> {
        super::drained::all_drained(&planned(deployment)?)
            .map_err(|e| LayoutError::Kafka(e.to_string()))
    };
    super::layout::follow(current, next, &planned, &drained)
}

/// The function `sha256` as a local file under `dir` (fetched once).
fn fetch(blobs: &FunctionBlobs, dir: &Path, sha256: &str) -> Result<PathBuf, FleetError> {
    let path = dir.join(format!("{}.wasm", sha256.to_ascii_lowercase()));
    if path.exists() {
        return Ok(path);
    }
    let bytes = blobs.get(sha256)?;
    let io = |source| FleetError::Io { path: path.clone(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    crate::files::write(&path, &bytes).map_err(io)?;
    Ok(path)
}

/// Check `spec_text` as the workers will run it (valid, and cut into
/// units with the input partitions `inputs` gives), store each function it
/// names by path in `blobs`, and make the deployment of it at `version`:
/// what `weir cluster deploy` publishes to the control topic. Functions
/// are read from their paths (relative ones from `base`); stored functions
/// by name are not known here. A spec the workers could not run is refused
/// here, before anything is stored or published.
pub fn deployment_of(
    spec_text: &str,
    base: &Path,
    blobs: &FunctionBlobs,
    inputs: InputPartitions<'_>,
    version: u64,
    desired: Desired,
) -> Result<Deployment, FleetError> {
    let mut spec = PipelineSpec::parse(spec_text)
        .map_err(|source| FleetError::Spec { pipeline: "(spec)".into(), source })?;
    spec.resolve_paths(base);
    let pipeline = spec.name.clone();
    plan(&spec, inputs)
        .map_err(|source| FleetError::Plan { pipeline: pipeline.clone(), source })?;
    let mut paths = Vec::new();
    for (field, function) in spec.functions_mut() {
        if function.native.is_some() {
            continue;
        }
        match function.wasm.clone() {
            Some(path) => paths.push((field, path)),
            None => return Err(FleetError::Unstored { pipeline, field }),
        }
    }
    let mut functions = BTreeMap::new();
    for (field, path) in paths {
        let bytes = std::fs::read(&path).map_err(|source| FleetError::Io { path, source })?;
        functions.insert(field, blobs.put(&bytes)?);
    }
    Ok(Deployment {
        pipeline,
        version,
        desired,
        spec: spec_text.to_string(),
        functions,
        pins: BTreeMap::new(),
        deployed_at: crate::clock::now_millis(),
        layout: 0,
        previous: None,
        restore: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::kafka::KafkaSourceConfig;

    fn blobs(dir: &Path) -> FunctionBlobs {
        FunctionBlobs::open(&format!("file://{}", dir.display())).unwrap()
    }

    const SOURCE: &str =
        "{ type: kafka, bootstrap_servers: \"b:9092\", topics: [orders], timestamp_field: t }";
    const SINK: &str = "{ type: kafka, bootstrap_servers: \"b:9092\", topic: out, delivery: exactly-once, transactional_id_prefix: p, transaction_timeout: 5m }";

    fn spec(functions: &str) -> String {
        format!(
            "name: orders\nparallelism: 2\ncheckpoint: {{ interval: 1s, storage: \"s3://b/p\" }}\nsource: {SOURCE}\n{functions}sink: {SINK}\n"
        )
    }

    fn two_partitions(_: &KafkaSourceConfig) -> Result<Vec<(String, i32)>, PlanError> {
        Ok(vec![("orders".into(), 0), ("orders".into(), 1)])
    }

    #[test]
    fn a_deployment_stores_its_functions_by_content_and_refuses_what_workers_could_not_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.wasm"), b"the function").unwrap();
        let store = blobs(&dir.path().join("store"));
        let text = spec("key: { wasm: f.wasm }\nprocess: { wasm: f.wasm }\n");
        let deployment =
            deployment_of(&text, dir.path(), &store, &two_partitions, 1, Desired::Running).unwrap();
        let sha = crate::runtime::digest(b"the function");
        assert_eq!(deployment.functions["key"], sha);
        assert_eq!(deployment.functions["process"], sha);
        assert_eq!(store.get(&sha).unwrap(), b"the function");
        assert_eq!(deployment.spec, text, "the text as given");

        // A stored function by name: not something a cluster has.
        let named = spec("key: { function: revenue }\nprocess: { wasm: f.wasm }\n");
        let refused =
            deployment_of(&named, dir.path(), &store, &two_partitions, 1, Desired::Running);
        assert!(matches!(refused, Err(FleetError::Unstored { ref field, .. }) if field == "key"));
        // No checkpoint storage: the plan refuses it, nothing is stored.
        let empty = blobs(&dir.path().join("empty"));
        let unplanned = spec("key: { wasm: f.wasm }\nprocess: { wasm: f.wasm }\n")
            .replace("checkpoint: { interval: 1s, storage: \"s3://b/p\" }\n", "");
        let refused =
            deployment_of(&unplanned, dir.path(), &empty, &two_partitions, 1, Desired::Running);
        assert!(matches!(refused, Err(FleetError::Plan { .. })), "{refused:?}");
        assert!(!dir.path().join("empty").join("functions").exists(), "nothing stored");
    }
}
