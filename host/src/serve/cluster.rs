//! The pipelines of a cluster, as `weir serve --cluster` operates them:
//! the same deploy, status, stop, upgrade and delete as one machine's
//! [`Supervisor`](super::Supervisor), with the cluster's control topic as
//! the store of specs and versions and the workers' reports as the status
//! (docs/cluster.md, "Serving a cluster").
//!
//! A server runs nothing itself and keeps nothing of its own: every change
//! is one transaction on the control topic ([`ControlTopic::transact`]),
//! which the workers follow; any number of servers may serve one cluster.
//! A request is checked as on one machine before anything is written — the
//! spec parsed and within the server's limits and grants, its stored
//! functions resolved to versions and digests, fetched and loaded for
//! their roles, the pipeline cut into units — so a deployment the workers
//! could not run is refused here, not discovered on every worker.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::grants::Grants;
use super::limits::ServerLimits;
use super::supervisor::{kept_pins, pin_functions};
use super::{ServeError, Upgrade};
use crate::checkpoint::{CheckpointStorage, SnapshotKind, SnapshotMetadata};
use crate::cluster::blobs::FunctionBlobs;
use crate::cluster::control::{ControlChange, ControlReader, ControlState, WorkerReport};
use crate::cluster::drained;
use crate::cluster::fleet::{follow, materialize};
use crate::cluster::layout::LayoutError;
use crate::cluster::plan::broker_partitions;
use crate::cluster::worker::UnitStatus;
use crate::cluster::{
    plan, ClusterPlan, ControlTopic, Deployment, Desired, FleetStatus, PlanError, Unit, UnitRole,
};
use crate::connectors::kafka::KafkaSinkConfig;
use crate::connectors::SinkSpec;
use crate::runtime::native::NativeCatalog;
use crate::specification::{secrets, PipelineSpec};
use crate::state::{key_group, subtask_for_key_group};
use crate::store::FunctionStore;

/// How long a stop waits for the workers to report the pipeline's units
/// stopped.
const STOP_WAIT: Duration = Duration::from_secs(90);

/// A worker report older than this is from a worker that may be gone: its
/// units are not shown as running.
pub const STALE_REPORT: Duration = Duration::from_secs(15);

/// A cluster pipeline as the API shows it.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// Its record in the control topic.
    pub deployment: Deployment,
    /// Its units that workers report running (at any version), each with
    /// its worker and the version that worker runs.
    pub units: Vec<ClusterUnit>,
    /// Workers that cannot run it now, and why.
    pub waiting: BTreeMap<String, String>,
    /// Where each worker running a unit of it is reached.
    pub addresses: BTreeMap<String, String>,
}

/// One unit's completed snapshots.
pub struct UnitSnapshots {
    /// The unit.
    pub unit: String,
    /// Its checkpoint storage.
    pub storage: CheckpointStorage,
    /// Its completed checkpoints and savepoints, newest first.
    pub snapshots: Vec<SnapshotMetadata>,
}

/// Where a state lookup goes: the unit owning the key and its worker.
#[derive(Debug, Clone)]
pub struct LookupRoute {
    /// The worker's URL for it (`…/v1/pipelines/{p}/units/{u}/state`).
    pub url: String,
    /// The cluster token to bear.
    pub token: String,
    /// The unit that owns the key.
    pub unit: String,
    /// Its worker.
    pub worker: String,
    /// The operator to name in the unit (`None`: its only one).
    pub operator: Option<String>,
}

/// One unit of a cluster pipeline, as its worker reports it.
#[derive(Debug, Clone)]
pub struct ClusterUnit {
    /// The worker running it.
    pub worker: String,
    /// The version of the pipeline that worker runs.
    pub version: u64,
    /// The unit, as the worker reports it.
    pub status: UnitStatus,
}

/// The pipelines of one cluster.
pub struct ClusterPipelines {
    control: ControlTopic,
    blobs: FunctionBlobs,
    /// Where stored functions are fetched to be checked.
    functions_dir: PathBuf,
    data_dir: PathBuf,
    limits: ServerLimits,
    natives: NativeCatalog,
    grants: Grants,
    /// Followers of the control and status topics, read to their ends
    /// before each answer.
    readers: Mutex<Option<(ControlReader, ControlReader)>>,
    /// The token workers take for state lookups.
    token: Option<String>,
    /// Each pipeline's plan, as of the version it was made for.
    plans: Mutex<BTreeMap<String, (u64, Arc<ClusterPlan>)>>,
}

impl ClusterPipelines {
    /// The pipelines of `control`'s cluster, whose functions are in
    /// `blobs`; deploys may ask for at most `limits` and touch on the
    /// workers only what `grants` allows.
    pub fn open(
        control: ControlTopic,
        blobs: FunctionBlobs,
        data_dir: PathBuf,
        limits: ServerLimits,
        natives: NativeCatalog,
        grants: Grants,
        token: Option<String>,
    ) -> Result<Self, ServeError> {
        control.ensure().map_err(ServeError::from)?;
        control.status_topic().ensure().map_err(ServeError::from)?;
        Ok(Self {
            functions_dir: data_dir.join("cluster-functions"),
            data_dir,
            control,
            blobs,
            limits,
            natives,
            grants,
            readers: Mutex::new(None),
            token,
            plans: Mutex::default(),
        })
    }

    /// What deploys and upgrades may ask for.
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    /// The control topic's state and the workers' reports, as of now.
    fn read(&self) -> Result<(ControlState, BTreeMap<String, WorkerReport>), ServeError> {
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        if readers.is_none() {
            let control = self.control.reader().map_err(ServeError::from)?;
            let status = self.control.status_topic().reader().map_err(ServeError::from)?;
            *readers = Some((control, status));
        }
        let (control, status) = readers.as_mut().expect("just opened");
        let caught_up = control.catch_up().and_then(|()| status.catch_up());
        if let Err(error) = caught_up {
            // Read from the start again next time.
            *readers = None;
            return Err(error.into());
        }
        Ok((control.state().clone(), status.reports().clone()))
    }

    /// Every pipeline.
    pub fn list(&self) -> Result<Vec<ClusterView>, ServeError> {
        let (state, reports) = self.read()?;
        Ok(state.deployments.into_values().map(|d| view(d, &reports)).collect())
    }

    /// One pipeline.
    pub fn get(&self, name: &str) -> Result<ClusterView, ServeError> {
        let (mut state, reports) = self.read()?;
        let deployment = state.deployments.remove(name).ok_or_else(|| no_pipeline(name))?;
        Ok(view(deployment, &reports))
    }

    /// The pipelines using stored function `function`.
    pub fn users_of(&self, function: &str) -> Result<Vec<String>, ServeError> {
        let (state, _) = self.read()?;
        let uses = |d: &Deployment| {
            PipelineSpec::parse(&d.spec).is_ok_and(|spec| {
                spec.functions().iter().any(|(_, f)| f.function.as_deref() == Some(function))
            })
        };
        Ok(state.deployments.values().filter(|d| uses(d)).map(|d| d.pipeline.clone()).collect())
    }

    /// Deploy `spec_text` (YAML or JSON): checked, then written to the
    /// control topic as version 1, running.
    pub fn deploy(
        &self,
        spec_text: &str,
        restore: Option<&str>,
        functions: &FunctionStore,
    ) -> Result<ClusterView, ServeError> {
        let text = secrets::restore(spec_text, None)
            .map_err(|e| ServeError::invalid_spec(e.to_string()))?
            .into_owned();
        let spec =
            PipelineSpec::parse(&text).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let pins = pin_functions(&spec, &BTreeMap::new(), &BTreeMap::new(), functions)?;
        let mut deployment = self.checked(&spec, text, pins, functions)?;
        if let Some(location) = restore {
            self.grants.check_restore("restore", &spec, location)?;
            let snapshot = CheckpointStorage::locate(location)
                .map_err(|e| ServeError::invalid_spec(format!("restore: {e}")))?;
            if snapshot.metadata.max_parallelism != spec.max_parallelism {
                return Err(ServeError::invalid_spec(format!(
                    "restore: the snapshot has max_parallelism {} and the spec {}; the number of key groups is fixed for the life of the state",
                    snapshot.metadata.max_parallelism, spec.max_parallelism
                )));
            }
            deployment.restore = Some(location.to_string());
        }
        let deployment = self.control.transact(|state| {
            if state.deployments.contains_key(&deployment.pipeline) {
                return Err(ServeError::conflict(
                    "exists",
                    format!(
                        "pipeline {} already exists: upgrade it, or delete it first",
                        deployment.pipeline
                    ),
                ));
            }
            self.limits.check_new_pipeline(state.deployments.len())?;
            deployment.deployed_at = crate::clock::now_millis();
            Ok((deployment.clone(), vec![ControlChange::Deploy(deployment.clone())]))
        })?;
        Ok(view(deployment, &BTreeMap::new()))
    }

    /// The deployment of `spec` (its text `text`, its stored functions
    /// pinned to `pins`), checked as the workers will run it: within the
    /// limits and grants, every function resolved, fetched and loaded for
    /// its role, the pipeline cut into units.
    fn checked(
        &self,
        spec: &PipelineSpec,
        text: String,
        pins: BTreeMap<String, u32>,
        functions: &FunctionStore,
    ) -> Result<Deployment, ServeError> {
        if let Some((field, _)) = spec.functions().into_iter().find(|(_, f)| f.wasm.is_some()) {
            return Err(ServeError::invalid_spec(format!("{field}.wasm: a deployed pipeline names stored functions (`function: <name>`), not files on the server; upload it with PUT /v1/functions/<name>")));
        }
        self.limits.check_spec(spec)?;
        self.grants.check_spec(spec)?;
        let mut digests = BTreeMap::new();
        for (field, function) in spec.functions() {
            let Some(name) = &function.function else { continue };
            let stored = functions
                .get(name, pins.get(&field).copied())
                .map_err(|e| ServeError::invalid_pipeline(format!("{field}.function: {e}")))?;
            digests.insert(field, stored.digest);
        }
        let deployment = Deployment {
            pipeline: spec.name.clone(),
            version: 1,
            desired: Desired::Running,
            spec: text,
            functions: digests,
            pins,
            deployed_at: 0,
            layout: 0,
            previous: None,
            restore: None,
        };
        let runnable = materialize(&deployment, &self.blobs, &self.functions_dir)
            .map_err(|e| ServeError::invalid_pipeline(e.to_string()))?;
        plan(&runnable, &broker_partitions)
            .map_err(|e| ServeError::invalid_pipeline(e.to_string()))?;
        crate::pipeline::prepare(runnable, &self.data_dir, &self.natives)
            .map_err(|e| ServeError::invalid_pipeline(e.to_string()))?;
        Ok(deployment)
    }

    /// Stop a pipeline on every worker (each unit with a final checkpoint,
    /// its state kept for a start), and wait until no worker reports its
    /// units. A savepoint is not supported on a cluster yet.
    pub fn stop(&self, name: &str, savepoint: bool) -> Result<String, ServeError> {
        if savepoint {
            return self.drained_savepoint(name, Desired::Stopped);
        }
        let version = self.control.transact(|state| -> Result<_, ServeError> {
            let deployment = state.deployments.get(name).ok_or_else(|| no_pipeline(name))?;
            if deployment.desired == Desired::Stopped {
                return Ok((deployment.version, Vec::new()));
            }
            let next = Deployment {
                version: deployment.version + 1,
                desired: Desired::Stopped,
                ..deployment.clone()
            };
            Ok((next.version, vec![ControlChange::Deploy(next)]))
        })?;
        let deadline = Instant::now() + STOP_WAIT;
        loop {
            let view = self.get(name)?;
            // A view older than the stop (its write not read back yet) is
            // waited out; a newer one is another change.
            if view.deployment.version > version {
                return Err(ServeError::conflict(
                    "changed",
                    format!(
                        "pipeline {name} was changed again while it stopped (now version {}, {:?})",
                        view.deployment.version, view.deployment.desired
                    ),
                ));
            }
            if view.deployment.version == version && view.units.is_empty() {
                return Ok(String::new());
            }
            if Instant::now() >= deadline {
                let running: Vec<String> = view
                    .units
                    .iter()
                    .map(|u| format!("{} on {}", u.status.unit, u.worker))
                    .collect();
                return Err(ServeError::snapshot_failed(format!(
                    "pipeline {name} is stopped in the control topic, but after {STOP_WAIT:?} workers still report {}: they stop it when they next read the control topic",
                    running.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Change a pipeline's functions or spec, or start a stopped one: the
    /// next version, running. The workers stop the old version's units
    /// (each with a final checkpoint) and start the new one's, which
    /// restore those checkpoints by stage `uid`.
    pub fn upgrade(
        &self,
        name: &str,
        upgrade: &Upgrade,
        functions: &FunctionStore,
    ) -> Result<ClusterView, ServeError> {
        let current = self.get(name)?.deployment;
        let old_spec = PipelineSpec::parse(&current.spec).map_err(|e| {
            ServeError::internal(format!("the deployed spec no longer parses: {e}"))
        })?;
        let text = match &upgrade.spec {
            Some(text) => {
                self.limits.check_spec_size(text)?;
                secrets::restore(text, Some(&current.spec))
                    .map_err(|e| ServeError::invalid_spec(e.to_string()))?
                    .into_owned()
            }
            None => current.spec.clone(),
        };
        let text = match upgrade.parallelism {
            Some(parallelism) => with_parallelism(&text, parallelism)?,
            None => text,
        };
        let spec =
            PipelineSpec::parse(&text).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        if spec.name != name {
            return Err(ServeError::invalid_spec(format!(
                "name: the upgraded spec names {:?}, not {name:?}",
                spec.name
            )));
        }
        let kept = kept_pins(&old_spec, &spec, &current.pins);
        let pins = pin_functions(&spec, &kept, &upgrade.functions, functions)?;
        let checked = self.checked(&spec, text, pins, functions)?;
        let deployment = self.control.transact(|state| {
            let now = state.deployments.get(name).ok_or_else(|| no_pipeline(name))?;
            if now.version != current.version {
                return Err(ServeError::conflict(
                    "busy",
                    format!("pipeline {name} changed while this upgrade was checked (version {} → {}): look at it and try again", current.version, now.version),
                ));
            }
            let next = Deployment {
                version: now.version + 1,
                deployed_at: now.deployed_at,
                // Units that have no snapshot yet still start from it.
                restore: now.restore.clone(),
                ..checked.clone()
            };
            // A new layout (a rescale) drains the current one first.
            let next = follow(Some(now), next, &self.blobs, &self.functions_dir)
                .map_err(layout_refused)?;
            Ok((next.clone(), vec![ControlChange::Deploy(next)]))
        })?;
        Ok(view(deployment, &BTreeMap::new()))
    }

    /// Where to ask for `key`'s state in pipeline `name`'s keyed stage
    /// `operator` (its node name; default: its only keyed stage): the task
    /// unit owning the key's key group, as the plan cuts the pipeline, and
    /// the worker that reports running it at the deployed version.
    pub fn route_lookup(
        &self,
        name: &str,
        operator: Option<&str>,
        key: &str,
    ) -> Result<LookupRoute, ServeError> {
        let Some(token) = self.token.clone() else {
            return Err(ServeError::not_on_cluster("state lookups on a cluster need the cluster token: give WEIR_CLUSTER_TOKEN (--cluster-token) to its workers and servers"));
        };
        let view = self.get(name)?;
        let not_running = |why: String| ServeError::conflict("not_running", why);
        if view.deployment.desired != Desired::Running {
            return Err(not_running(format!("pipeline {name:?} is not running")));
        }
        let plan = self.plan(&view.deployment)?;
        let stages: BTreeSet<&str> = plan
            .units
            .iter()
            .filter_map(|u| match &u.role {
                UnitRole::Task { stage, .. } => Some(stage.as_str()),
                UnitRole::Ingest { .. } => None,
            })
            .collect();
        let (stage, forwarded) = match (operator, stages.len()) {
            (Some(op), _) if stages.contains(op) => (op, None),
            (Some(op), 1) => (*stages.first().expect("one"), Some(op.to_string())),
            (None, 1) => (*stages.first().expect("one"), None),
            (Some(op), _) => {
                return Err(ServeError::not_found(format!(
                    "no keyed operator {op:?} in pipeline {name} (its keyed stages: {})",
                    stages.iter().copied().collect::<Vec<_>>().join(", ")
                )))
            }
            (None, _) => {
                return Err(ServeError::invalid_spec(
                    "this pipeline has several keyed operators: say which with ?operator=",
                ))
            }
        };
        let tasks: Vec<&Unit> = plan
            .units
            .iter()
            .filter(|u| matches!(&u.role, UnitRole::Task { stage: s, .. } if s == stage))
            .collect();
        let max_parallelism = plan.spec.max_parallelism;
        let parallelism = u16::try_from(tasks.len()).unwrap_or(u16::MAX);
        let group = key_group(key.as_bytes(), max_parallelism);
        let task = subtask_for_key_group(group, max_parallelism, parallelism);
        let unit = tasks
            .iter()
            .find(|u| matches!(u.role, UnitRole::Task { task: t, .. } if t == task))
            .map(|u| u.name.clone())
            .ok_or_else(|| {
                ServeError::internal(format!("the plan has no task {task} of {stage}"))
            })?;
        let owner = view.units.iter().find(|u| {
            u.status.unit == unit
                && u.status.state == "running"
                && u.version == view.deployment.version
        });
        let Some(owner) = owner else {
            return Err(not_running(format!("unit {unit} (which owns this key) runs on no worker now: the workers may be switching versions or rebalancing; try again")));
        };
        let Some(address) = view.addresses.get(&owner.worker) else {
            return Err(not_running(format!(
                "worker {} runs unit {unit} but reports no address to reach it at",
                owner.worker
            )));
        };
        Ok(LookupRoute {
            url: format!(
                "{}/v1/pipelines/{name}/units/{unit}/state",
                address.trim_end_matches('/')
            ),
            token,
            worker: owner.worker.clone(),
            unit,
            operator: forwarded,
        })
    }

    /// The Kafka sink that `output` of pipeline `name` writes (`main`: a
    /// line spec's sink; or a side output's or sink node's name): what a
    /// tail reads on a cluster, whose outputs are spread over its units.
    pub fn output_sink(&self, name: &str, output: &str) -> Result<KafkaSinkConfig, ServeError> {
        let deployment = self.get(name)?.deployment;
        if deployment.desired != Desired::Running {
            return Err(ServeError::conflict(
                "not_running",
                format!("pipeline {name:?} is not running"),
            ));
        }
        let spec = PipelineSpec::parse(&deployment.spec).map_err(|e| {
            ServeError::internal(format!("the deployed spec no longer parses: {e}"))
        })?;
        let outputs = outputs(&spec);
        match outputs.get(output) {
            Some(SinkSpec::Kafka(kafka)) => Ok(kafka.clone()),
            Some(_) => Err(ServeError::not_on_cluster(format!(
                "output {output:?} is not a Kafka topic: on a cluster only Kafka outputs can be tailed"
            ))),
            None => Err(ServeError::not_found(format!(
                "pipeline {name:?} has no output {output:?} (its outputs: {})",
                outputs.keys().copied().collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// Each unit's completed checkpoints and savepoints, newest first, with
    /// the unit's storage: a cluster pipeline's state is checkpointed per
    /// unit, each under `<checkpoint.storage>/<unit>/`.
    pub fn snapshots(&self, name: &str) -> Result<Vec<UnitSnapshots>, ServeError> {
        let deployment = self.get(name)?.deployment;
        let plan = self.plan(&deployment)?;
        let mut all = Vec::new();
        for unit in &plan.units {
            let storage = crate::pipeline::checkpoint_storage(&unit.spec, &self.data_dir)
                .map_err(|e| ServeError::storage_unavailable(e.to_string()))?;
            let listed = |kind| {
                storage
                    .completed_of(kind)
                    .map_err(|e| ServeError::storage_unavailable(e.to_string()))
            };
            let mut snapshots = listed(SnapshotKind::Checkpoint)?;
            snapshots.extend(listed(SnapshotKind::Savepoint)?);
            snapshots.sort_by_key(|m| std::cmp::Reverse(m.id));
            all.push(UnitSnapshots { unit: unit.name.clone(), storage, snapshots });
        }
        Ok(all)
    }

    /// Take a savepoint of pipeline `name`, which goes on running (in a
    /// new layout of the same shape): its location.
    pub fn savepoint(&self, name: &str) -> Result<String, ServeError> {
        self.drained_savepoint(name, Desired::Running)
    }

    /// Drain the running layout of pipeline `name` — its next version, in
    /// `desired` state, runs in a layout of its own — and put the drained
    /// units' final savepoints together as the pipeline's savepoint (see
    /// [`crate::cluster::savepoint`]); its location.
    fn drained_savepoint(&self, name: &str, desired: Desired) -> Result<String, ServeError> {
        let current = self.get(name)?.deployment;
        if current.desired != Desired::Running {
            return Err(ServeError::conflict(
                "not_running",
                format!("pipeline {name} is not running: a savepoint needs its units"),
            ));
        }
        if let Some(previous) = &current.previous {
            let plan = self.plan_uncached(previous)?;
            if !drained::all_drained(&plan)
                .map_err(|e| ServeError::storage_unavailable(e.to_string()))?
            {
                return Err(layout_refused(LayoutError::Draining {
                    pipeline: name.to_string(),
                    previous: previous.version,
                }));
            }
        }
        let next = self.control.transact(|state| {
            let now = state.deployments.get(name).ok_or_else(|| no_pipeline(name))?;
            if now.version != current.version {
                return Err(ServeError::conflict(
                    "busy",
                    format!(
                        "pipeline {name} changed meanwhile (version {} → {}): try again",
                        current.version, now.version
                    ),
                ));
            }
            let version = now.version + 1;
            let previous = Some(crate::cluster::layout::before(now));
            let next = Deployment { version, desired, layout: version, previous, ..now.clone() };
            Ok((next.clone(), vec![ControlChange::Deploy(next)]))
        })?;
        let plan = self.plan_uncached(&current)?;
        let deadline = Instant::now() + STOP_WAIT;
        let drained = loop {
            let drained = drained::drained_units(&plan)
                .map_err(|e| ServeError::storage_unavailable(e.to_string()))?;
            let left = drained::undrained(&plan, &drained);
            if left.is_empty() {
                break drained;
            }
            if Instant::now() >= deadline {
                return Err(ServeError::snapshot_failed(format!(
                    "pipeline {name}: after {STOP_WAIT:?}, units {} have not drained (their workers drain them when they next read the control topic; a unit of a dead worker once the group gives it to another): ask again for its savepoint once they have",
                    left.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let url =
            plan.spec.checkpoint.as_ref().and_then(|c| c.storage.clone()).ok_or_else(|| {
                ServeError::internal("a cluster pipeline without checkpoint storage")
            })?;
        let location = crate::cluster::savepoint::assemble(&plan, &drained, &url, next.version)
            .map_err(|e| ServeError::storage_unavailable(e.to_string()))?;
        tracing::info!(pipeline = name, %location, version = next.version, "cluster savepoint taken");
        Ok(location)
    }

    /// The plan of `deployment`, made now.
    fn plan_uncached(&self, deployment: &Deployment) -> Result<ClusterPlan, ServeError> {
        let runnable = materialize(deployment, &self.blobs, &self.functions_dir)
            .map_err(|e| ServeError::internal(e.to_string()))?;
        plan(&runnable, &broker_partitions).map_err(unavailable_plan)
    }

    /// The plan of `deployment` (made once per version).
    fn plan(&self, deployment: &Deployment) -> Result<Arc<ClusterPlan>, ServeError> {
        let mut plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((version, plan)) = plans.get(&deployment.pipeline) {
            if *version == deployment.version {
                return Ok(Arc::clone(plan));
            }
        }
        let runnable = materialize(deployment, &self.blobs, &self.functions_dir)
            .map_err(|e| ServeError::internal(e.to_string()))?;
        let plan = Arc::new(plan(&runnable, &broker_partitions).map_err(unavailable_plan)?);
        plans.insert(deployment.pipeline.clone(), (deployment.version, Arc::clone(&plan)));
        Ok(plan)
    }

    /// Delete a pipeline from the cluster: its workers stop it (each unit
    /// with a final checkpoint). Its checkpoints stay in storage.
    pub fn delete(&self, name: &str) -> Result<(), ServeError> {
        self.control.transact(|state| {
            state.deployments.get(name).ok_or_else(|| no_pipeline(name))?;
            Ok(((), vec![ControlChange::Undeploy(name.to_string())]))
        })
    }
}

/// The outputs of `spec` by name (`main`: a line spec's sink; a side
/// output's or a sink node's name), with their sinks.
pub fn outputs(spec: &PipelineSpec) -> BTreeMap<&str, &SinkSpec> {
    let mut outputs: BTreeMap<&str, &SinkSpec> = BTreeMap::new();
    outputs.extend(spec.sink.as_ref().map(|sink| ("main", sink)));
    outputs.extend(spec.side_outputs.iter().map(|(n, sink)| (n.as_str(), sink)));
    for (node, spec) in &spec.operators {
        outputs.extend(spec.sink.as_ref().map(|sink| (node.as_str(), sink)));
    }
    outputs
}

/// `deployment` with the units `reports` say run it and the workers that
/// wait to.
fn view(deployment: Deployment, reports: &BTreeMap<String, WorkerReport>) -> ClusterView {
    let now = crate::clock::now_millis();
    let mut units = Vec::new();
    let mut waiting = BTreeMap::new();
    let mut addresses = BTreeMap::new();
    for (worker, report) in reports {
        if now - report.reported_at > STALE_REPORT.as_millis() as i64 {
            continue;
        }
        let Ok(status) = serde_json::from_value::<FleetStatus>(report.status.clone()) else {
            continue;
        };
        let runs = status.pipelines.iter().any(|p| p.worker.pipeline == deployment.pipeline);
        if let Some(address) = status.address.as_ref().filter(|_| runs) {
            addresses.insert(worker.clone(), address.clone());
        }
        for pipeline in status.pipelines.iter().filter(|p| p.worker.pipeline == deployment.pipeline)
        {
            units.extend(pipeline.worker.units.iter().map(|unit| ClusterUnit {
                worker: worker.clone(),
                version: pipeline.version,
                status: unit.clone(),
            }));
        }
        if let Some(why) = status.waiting.get(&deployment.pipeline) {
            waiting.insert(worker.clone(), why.clone());
        }
    }
    units.sort_by(|a, b| a.status.unit.cmp(&b.status.unit));
    ClusterView { deployment, units, waiting, addresses }
}

/// `text` with its (default) `parallelism` set to `parallelism`.
fn with_parallelism(text: &str, parallelism: u16) -> Result<String, ServeError> {
    let invalid = |e: serde_yaml::Error| ServeError::invalid_spec(e.to_string());
    let mut value: serde_yaml::Value = serde_yaml::from_str(text).map_err(invalid)?;
    let Some(fields) = value.as_mapping_mut() else {
        return Err(ServeError::invalid_spec("a spec is a mapping of fields"));
    };
    fields.insert("parallelism".into(), u64::from(parallelism).into());
    serde_yaml::to_string(&value).map_err(invalid)
}

fn layout_refused(error: LayoutError) -> ServeError {
    match error {
        LayoutError::Draining { .. } => ServeError::conflict("busy", error.to_string()),
        LayoutError::Plan(message) => ServeError::invalid_pipeline(message),
        LayoutError::Kafka(message) => ServeError::storage_unavailable(message),
    }
}

fn unavailable_plan(error: PlanError) -> ServeError {
    ServeError::storage_unavailable(format!("cannot plan the pipeline: {error}"))
}

fn no_pipeline(name: &str) -> ServeError {
    ServeError::not_found(format!("no pipeline {name}"))
}
