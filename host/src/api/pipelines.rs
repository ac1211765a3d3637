//! `/v1/pipelines` handlers: deploy, status, savepoints, stop, upgrade,
//! delete, checkpoints. The work is the [`Supervisor`]'s; handlers parse
//! requests, run it off the async workers and shape the answers. The
//! answer types are also what [`ApiClient`](super::ApiClient) reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::access::{Caller, Role};
use super::{blocking, ApiError, AppState, ErrorBody};
use crate::checkpoint::{CheckpointStorage, CompletedSnapshot, SnapshotMetadata};
use crate::cluster::worker::UnitStatus;
use crate::cluster::Desired;
use crate::observe::sampling::MetricsView;
use crate::observe::{OperatorCounts, RunSummary};
pub use crate::serve::restart::RestartStatus;
use crate::serve::supervisor::{PipelineView, Supervisor, Upgrade};
use crate::serve::{ClusterPipelines, ClusterUnit, ClusterView, ServerLimits};
use crate::store::FunctionStore;
use crate::store::PipelineState;

/// A pipeline's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PipelineStatus {
    /// The pipeline's name.
    pub name: String,
    /// `running`, `finished`, `stopped` or `failed`.
    pub state: PipelineState,
    /// Why it failed.
    pub failure: Option<String>,
    /// 1 at deploy, +1 per upgrade.
    pub generation: u32,
    /// Deploy time, ms since the epoch.
    pub deployed_at: i64,
    /// When the current (or last) run in this server started.
    pub started_at: Option<i64>,
    /// Keyed subtasks.
    pub parallelism: u16,
    /// The stored functions it runs, with their versions.
    pub functions: Vec<PinnedFunction>,
    /// Records in and out of each operator in the current (or last) run
    /// in this server; absent before it started.
    pub counts: Option<Counts>,
    /// Event time: the last watermark sent to the operators (ms).
    pub watermark: Option<i64>,
    /// The snapshot the current run started from.
    pub restored_from: Option<SnapshotRef>,
    /// Snapshots completed by the current run.
    pub snapshots_completed: usize,
    /// The newest completed checkpoint or savepoint.
    pub last_checkpoint: Option<SnapshotInfo>,
    /// The newest savepoint taken through the API.
    pub last_savepoint: Option<String>,
    /// Restarts after failed runs (see the spec's `restart:`).
    pub restart: RestartStatus,
    /// The spec as deployed, with the value of every secret connector
    /// property (`sasl.password`, `ssl.key.pem`, …) shown as `<redacted>`:
    /// send it back as it is in an upgrade and the stored value is kept.
    pub spec: String,
    /// What the current run is doing: per operator and subtask, records
    /// and rates, busy / idle / backpressured time, watermarks, state;
    /// checkpoints; the graph. Absent when it is not running.
    #[serde(default)]
    pub metrics: Option<MetricsView>,
    /// On a cluster: each unit the workers run, with its worker (absent
    /// on one machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitView>,
    /// On a cluster: the workers that cannot run it now, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub waiting: BTreeMap<String, String>,
    /// On a cluster: the outputs a tail can read (those written to Kafka).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
}

/// One unit of a pipeline on a cluster, as its worker last reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UnitView {
    /// The worker running it.
    pub worker: String,
    /// The pipeline version that worker runs.
    pub version: u64,
    /// The unit: its name, role (`ingest` or `task`), state, records,
    /// event time, lag, state size, checkpoints and last error.
    #[serde(flatten)]
    pub unit: UnitStatus,
}

impl From<&ClusterUnit> for UnitView {
    fn from(u: &ClusterUnit) -> Self {
        Self { worker: u.worker.clone(), version: u.version, unit: u.status.clone() }
    }
}

/// A stored function a pipeline runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PinnedFunction {
    /// The spec field: `key`, `process`, `aggregate` or `window_process`.
    pub field: String,
    /// The function's name.
    pub function: String,
    /// Its version.
    pub version: u32,
}

/// Records into and out of the operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Counts {
    /// Read from the source (= into the key function).
    pub source_records: u64,
    /// The key function.
    pub key: OperatorCountsView,
    /// Each keyed subtask, every stage's in turn.
    pub process: Vec<OperatorCountsView>,
    /// Each keyed stage (its node name, or `process` / `window` for a
    /// line spec) with its subtasks' counts.
    #[serde(default)]
    pub operators: Vec<StageCountsView>,
    /// Written to the main sink.
    pub sink_records: u64,
    /// Written to declared side outputs.
    pub side_outputs_written: u64,
    /// Sent to undeclared side outputs (dropped).
    pub side_outputs_dropped: u64,
    /// Source records dropped without a usable timestamp.
    pub dropped_bad_timestamps: u64,
}

/// One keyed stage's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StageCountsView {
    /// The stage's name.
    pub name: String,
    /// Each subtask's counts.
    pub subtasks: Vec<OperatorCountsView>,
}

/// One operator's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OperatorCountsView {
    /// Records received.
    pub records_in: u64,
    /// Records emitted.
    pub records_out: u64,
    /// Late records dropped.
    pub late_dropped: u64,
}

impl From<OperatorCounts> for OperatorCountsView {
    fn from(c: OperatorCounts) -> Self {
        Self { records_in: c.records_in, records_out: c.records_out, late_dropped: c.late_dropped }
    }
}

/// A snapshot named by kind and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotRef {
    /// `checkpoint` or `savepoint`.
    pub kind: String,
    /// Its id.
    pub id: u64,
}

/// A completed checkpoint or savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotInfo {
    /// Its id.
    pub id: u64,
    /// `checkpoint` or `savepoint`.
    pub kind: String,
    /// Completion time, ms since the epoch.
    pub completed_at: i64,
    /// Bytes of all files it references.
    pub size_bytes: u64,
    /// Bytes it uploaded.
    pub incremental_bytes: u64,
    /// Trigger to completion, ms.
    pub duration_ms: u64,
    /// The longest any subtask waited from its first barrier to its last,
    /// ms.
    pub alignment_ms: u64,
    /// Where it is (path or URL): what `restore` takes.
    pub location: String,
    /// On a cluster: the unit whose snapshot it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

impl SnapshotInfo {
    fn from_metadata(storage: &CheckpointStorage, m: &SnapshotMetadata) -> Self {
        let location = storage.describe(&storage.snapshot_dir(m.kind, m.id));
        Self {
            id: m.id,
            kind: m.kind.name().to_string(),
            completed_at: m.completed_at,
            size_bytes: m.size_bytes,
            incremental_bytes: m.incremental_bytes,
            duration_ms: m.duration_ms,
            alignment_ms: m.alignment_ms,
            location,
            unit: None,
        }
    }

    fn from_completed(s: &CompletedSnapshot) -> Self {
        Self {
            id: s.id,
            kind: s.kind.name().to_string(),
            completed_at: s.completed_at,
            size_bytes: s.size_bytes,
            incremental_bytes: s.incremental_bytes,
            duration_ms: crate::units::millis(s.duration),
            alignment_ms: crate::units::millis(s.alignment),
            location: s.location.clone(),
            unit: None,
        }
    }
}

/// The status of `view`; `last_stored` finds the newest stored snapshot
/// when the run has completed none.
fn status(
    view: PipelineView,
    last_stored: impl FnOnce() -> Option<SnapshotInfo>,
) -> PipelineStatus {
    let record = view.record;
    let spec = crate::specification::PipelineSpec::parse(&record.spec).ok();
    let functions = pinned_functions(spec.as_ref(), &record.pins);
    let parallelism = record.parallelism.or(spec.as_ref().map(|s| s.parallelism)).unwrap_or(1);
    let (
        mut counts,
        mut watermark,
        mut restored_from,
        mut snapshots_completed,
        mut last_checkpoint,
        mut started_at,
    ) = (None, None, None, 0, None, None);
    let mut live = None;
    if let Some((handle, started)) = &view.run {
        let metrics = &handle.metrics;
        let summary = RunSummary::from(metrics);
        counts = Some(Counts {
            source_records: summary.records_in,
            key: summary.key.into(),
            process: summary.subtasks.iter().copied().map(Into::into).collect(),
            operators: summary
                .stages
                .iter()
                .map(|(name, subtasks)| StageCountsView {
                    name: name.clone(),
                    subtasks: subtasks.iter().copied().map(Into::into).collect(),
                })
                .collect(),
            sink_records: summary.records_out,
            side_outputs_written: summary.side_outputs_written,
            side_outputs_dropped: summary.side_outputs_dropped,
            dropped_bad_timestamps: summary.dropped_bad_timestamps,
        });
        watermark = metrics.watermark();
        restored_from = metrics
            .restored_from()
            .map(|(kind, id)| SnapshotRef { kind: kind.name().to_string(), id });
        let (last, completed) = metrics.last_snapshot();
        snapshots_completed = completed;
        last_checkpoint = last.as_ref().map(SnapshotInfo::from_completed);
        started_at = Some(*started);
        if handle.listening() {
            live = Some(metrics.view());
        }
    }
    if last_checkpoint.is_none() {
        last_checkpoint = last_stored();
    }
    PipelineStatus {
        name: record.name,
        state: record.state,
        failure: record.failure,
        generation: record.generation,
        deployed_at: record.deployed_at,
        started_at,
        parallelism,
        functions,
        counts,
        watermark,
        restored_from,
        snapshots_completed,
        last_checkpoint,
        last_savepoint: record.last_savepoint,
        restart: view.restart,
        spec: crate::specification::secrets::redact(&record.spec).into_owned(),
        metrics: live,
        units: Vec::new(),
        waiting: BTreeMap::new(),
        outputs: Vec::new(),
    }
}

/// The stored functions `spec` names, with their versions in `pins`.
fn pinned_functions(
    spec: Option<&crate::specification::PipelineSpec>,
    pins: &BTreeMap<String, u32>,
) -> Vec<PinnedFunction> {
    let Some(spec) = spec else { return Vec::new() };
    let pinned =
        spec.functions().into_iter().filter_map(|(field, f)| Some((field, f.function.clone()?)));
    pinned
        .map(|(field, function)| PinnedFunction {
            version: pins.get(&field).copied().unwrap_or_default(),
            field,
            function,
        })
        .collect()
}

/// The status of a pipeline on a cluster: its deployment, with the counts
/// and event time of the units its workers report.
fn cluster_status(view: ClusterView) -> PipelineStatus {
    let ClusterView { deployment, units, waiting, .. } = view;
    let spec = crate::specification::PipelineSpec::parse(&deployment.spec).ok();
    let units: Vec<UnitView> = units.iter().map(UnitView::from).collect();
    let total = |role: &str, count: fn(&UnitView) -> u64| -> u64 {
        units.iter().filter(|u| u.unit.role == role).map(count).sum()
    };
    let zero = OperatorCountsView { records_in: 0, records_out: 0, late_dropped: 0 };
    let counts = (!units.is_empty()).then(|| Counts {
        source_records: total("ingest", |u| u.unit.records_in),
        key: zero.clone(),
        process: Vec::new(),
        operators: Vec::new(),
        sink_records: total("task", |u| u.unit.records_out),
        side_outputs_written: 0,
        side_outputs_dropped: 0,
        dropped_bad_timestamps: 0,
    });
    let tasks: Vec<&UnitStatus> =
        units.iter().map(|u| &u.unit).filter(|u| u.role == "task").collect();
    let watermark = match tasks.iter().all(|u| u.watermark.is_some()) {
        true => tasks.iter().filter_map(|u| u.watermark).min(),
        false => None,
    };
    let failure = units
        .iter()
        .find_map(|u| {
            Some(format!("unit {} on {}: {}", u.unit.unit, u.worker, u.unit.error.as_ref()?))
        })
        .or_else(|| {
            let (worker, why) = waiting.iter().next().filter(|_| units.is_empty())?;
            Some(format!("worker {worker} cannot run it: {why}"))
        });
    PipelineStatus {
        name: deployment.pipeline.clone(),
        state: match deployment.desired {
            Desired::Running => PipelineState::Running,
            Desired::Stopped => PipelineState::Stopped,
        },
        failure,
        generation: u32::try_from(deployment.version).unwrap_or(u32::MAX),
        deployed_at: deployment.deployed_at,
        started_at: None,
        parallelism: spec.as_ref().map_or(1, |s| s.parallelism),
        functions: pinned_functions(spec.as_ref(), &deployment.pins),
        counts,
        watermark,
        restored_from: None,
        snapshots_completed: 0,
        last_checkpoint: None,
        last_savepoint: None,
        restart: RestartStatus::default(),
        spec: crate::specification::secrets::redact(&deployment.spec).into_owned(),
        metrics: None,
        units,
        waiting,
        outputs: spec.as_ref().map_or_else(Vec::new, |spec| {
            let outputs = crate::serve::cluster::outputs(spec).into_iter();
            let kafka =
                outputs.filter(|(_, sink)| matches!(sink, crate::connectors::SinkSpec::Kafka(_)));
            kafka.map(|(name, _)| name.to_string()).collect()
        }),
    }
}

/// The status of a pipeline, reading its newest stored snapshot if needed.
fn full_status(supervisor: &Supervisor, view: PipelineView) -> PipelineStatus {
    let name = view.record.name.clone();
    status(view, || {
        let (storage, snapshots) = supervisor.snapshots(&name).ok()?;
        snapshots.first().map(|m| SnapshotInfo::from_metadata(&storage, m))
    })
}

/// Where a server's pipelines run: in this process, or on the workers of
/// a cluster (`weir serve --cluster`). Every route is the same for both.
pub(crate) enum Pipelines {
    /// Run here by the supervisor.
    Local(Arc<Supervisor>),
    /// Run by a cluster's workers, deployed through its control topic.
    Cluster(Arc<ClusterPipelines>),
}

impl Pipelines {
    /// What deploys and upgrades may ask for.
    pub(crate) fn limits(&self) -> &ServerLimits {
        match self {
            Self::Local(s) => s.limits(),
            Self::Cluster(c) => c.limits(),
        }
    }

    /// The pipelines run in this process, or why a cluster's server cannot
    /// do `what` (yet).
    pub(crate) fn local(&self, what: &str) -> Result<&Arc<Supervisor>, ApiError> {
        match self {
            Self::Local(s) => Ok(s),
            Self::Cluster(_) => Err(crate::serve::ServeError::not_on_cluster(format!(
                "{what} is not supported on a cluster's server yet"
            ))
            .into()),
        }
    }

    /// The pipelines using stored function `function`.
    pub(crate) fn users_of(&self, function: &str) -> Result<Vec<String>, ApiError> {
        match self {
            Self::Local(s) => Ok(s.users_of(function)),
            Self::Cluster(c) => Ok(c.users_of(function)?),
        }
    }

    fn deploy(
        &self,
        text: &str,
        query: &DeployQuery,
        functions: &FunctionStore,
    ) -> Result<PipelineStatus, ApiError> {
        let restore = query.restore.as_deref();
        match self {
            Self::Local(s) => {
                let view = s.deploy(text, restore, query.override_kafka_marker, functions)?;
                Ok(full_status(s, view))
            }
            Self::Cluster(c) => Ok(cluster_status(c.deploy(text, restore, functions)?)),
        }
    }

    fn list(&self) -> Result<Vec<PipelineStatus>, ApiError> {
        match self {
            Self::Local(s) => Ok(s.list().into_iter().map(|view| full_status(s, view)).collect()),
            Self::Cluster(c) => Ok(c.list()?.into_iter().map(cluster_status).collect()),
        }
    }

    fn status(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        match self {
            Self::Local(s) => Ok(full_status(s, s.get(name)?)),
            Self::Cluster(c) => Ok(cluster_status(c.get(name)?)),
        }
    }

    fn savepoint(&self, name: &str) -> Result<String, ApiError> {
        match self {
            Self::Local(s) => Ok(s.savepoint(name)?),
            Self::Cluster(c) => Ok(c.savepoint(name)?),
        }
    }

    fn stop(&self, name: &str, savepoint: bool) -> Result<String, ApiError> {
        match self {
            Self::Local(s) => Ok(s.stop(name, savepoint)?),
            Self::Cluster(c) => Ok(c.stop(name, savepoint)?),
        }
    }

    fn upgrade(
        &self,
        name: &str,
        upgrade: &Upgrade,
        functions: &FunctionStore,
    ) -> Result<PipelineStatus, ApiError> {
        match self {
            Self::Local(s) => Ok(full_status(s, s.upgrade(name, upgrade, functions)?)),
            Self::Cluster(c) => Ok(cluster_status(c.upgrade(name, upgrade, functions)?)),
        }
    }

    fn delete(&self, name: &str) -> Result<(), ApiError> {
        match self {
            Self::Local(s) => Ok(s.delete(name)?),
            Self::Cluster(c) => Ok(c.delete(name)?),
        }
    }
}

/// Where a deploy starts.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeployQuery {
    /// Start from this checkpoint or savepoint (its location, as a
    /// savepoint answer gives it): one of this pipeline's own, or under
    /// storage the server grants (`weir serve --allow-storage`).
    pub restore: Option<String>,
    /// Start even though an exactly-once Kafka sink's commit marker
    /// disagrees with the snapshots (see `weir run --override-kafka-marker`).
    #[serde(default)]
    pub override_kafka_marker: bool,
}

/// Deploy a pipeline from its spec (YAML or JSON). Functions are named by
/// `function: <name>` (uploaded with `PUT /v1/functions/{name}`); the newest
/// version of each is pinned unless the spec says `version`.
#[utoipa::path(post, path = "/v1/pipelines", tag = "pipelines", params(DeployQuery),
    request_body(description = "The pipeline spec, YAML or JSON", content((String = "application/yaml"), (String = "application/x-yaml"), (String = "text/yaml"), (Object = "application/json"))),
    responses((status = 201, body = PipelineStatus, description = "Deployed and started"),
              (status = 400, body = ErrorBody, description = "The spec is malformed: unknown field, bad duration, impossible parallelism …"),
              (status = 409, body = ErrorBody, description = "A pipeline of that name exists"),
              (status = 422, body = ErrorBody, description = "A function is missing or of the wrong kind, the settings cannot work, or the spec asks for files, storage, a restore location, brokers or Kafka properties the server does not grant (`not_granted`)")))]
pub(crate) async fn deploy(
    State(state): State<Arc<AppState>>,
    Query(query): Query<DeployQuery>,
    body: Body,
) -> Result<(StatusCode, Json<PipelineStatus>), ApiError> {
    let body = read_spec(body, state.pipelines.limits().max_spec_bytes).await?;
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::invalid_spec("the spec is not UTF-8 text"))?;
    blocking(move || {
        let status = state.pipelines.deploy(&text, &query, &state.functions)?;
        Ok((StatusCode::CREATED, Json(status)))
    })
    .await
}

/// Every pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PipelineList {
    /// By name.
    pub pipelines: Vec<PipelineStatus>,
}

/// Every pipeline with its status.
#[utoipa::path(get, path = "/v1/pipelines", tag = "pipelines", responses((status = 200, body = PipelineList)))]
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<PipelineList>, ApiError> {
    blocking(move || Ok(Json(PipelineList { pipelines: state.pipelines.list()? }))).await
}

/// One pipeline's status: state, failure reason, counts per operator,
/// watermark, last checkpoint.
#[utoipa::path(get, path = "/v1/pipelines/{name}", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    responses((status = 200, body = PipelineStatus), (status = 404, body = ErrorBody)))]
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Json<PipelineStatus>, ApiError> {
    blocking(move || Ok(Json(state.pipelines.status(&name)?))).await
}

/// Where a snapshot was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotTaken {
    /// The pipeline's state afterwards.
    pub state: PipelineState,
    /// The snapshot's location (give it to `restore`).
    pub location: String,
}

/// Take a savepoint; the pipeline keeps running.
#[utoipa::path(post, path = "/v1/pipelines/{name}/savepoints", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    responses((status = 201, body = SnapshotTaken), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Not running, or busy")))]
pub(crate) async fn savepoint(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<SnapshotTaken>), ApiError> {
    blocking(move || {
        let location = state.pipelines.savepoint(&name)?;
        Ok((StatusCode::CREATED, Json(SnapshotTaken { state: PipelineState::Running, location })))
    })
    .await
}

/// How to stop.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Take a savepoint (else a checkpoint) before stopping.
    #[serde(default)]
    pub savepoint: bool,
}

/// Stop gracefully: records in flight are processed, a final snapshot is
/// taken and committed, then the pipeline stops. The body is optional.
#[utoipa::path(post, path = "/v1/pipelines/{name}/stop", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    request_body(content = Option<StopRequest>, content_type = "application/json"),
    responses((status = 200, body = SnapshotTaken), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Not running, or busy")))]
pub(crate) async fn stop(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<SnapshotTaken>, ApiError> {
    let request: StopRequest = optional_json(&body)?;
    blocking(move || {
        let location = state.pipelines.stop(&name, request.savepoint)?;
        Ok(Json(SnapshotTaken { state: PipelineState::Stopped, location }))
    })
    .await
}

/// Upgrade: savepoint and stop the running pipeline, then start it again
/// from that savepoint with new function versions, a new parallelism or a
/// new spec; state is kept. Checked before the pipeline is touched.
#[utoipa::path(post, path = "/v1/pipelines/{name}/upgrade", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    request_body(content = Upgrade, content_type = "application/json"),
    responses((status = 200, body = PipelineStatus), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody, description = "`override_kafka_marker` without an admin token"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Extension(Caller(role)): Extension<Caller>,
    body: Body,
) -> Result<Json<PipelineStatus>, ApiError> {
    // The spec inside is held to --max-spec-bytes; JSON escaping may
    // double it, and the rest of the request is small.
    let limit = state.pipelines.limits().max_spec_bytes.saturating_mul(2) + (64 << 10);
    let body = read_spec(body, limit).await?;
    let upgrade: Upgrade = optional_json(&body)?;
    if upgrade.override_kafka_marker && role < Role::Admin {
        return Err(ApiError::forbidden(format!(
            "override_kafka_marker needs a token of role admin; yours is {role}"
        )));
    }
    blocking(move || Ok(Json(state.pipelines.upgrade(&name, &upgrade, &state.functions)?))).await
}

/// Stop the pipeline if it runs and delete it with its local state and
/// checkpoints (savepoints are kept).
#[utoipa::path(delete, path = "/v1/pipelines/{name}", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    blocking(move || state.pipelines.delete(&name).map(|()| StatusCode::NO_CONTENT)).await
}

/// A pipeline's snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotList {
    /// Completed checkpoints and savepoints, newest first (on a cluster:
    /// each unit's, unit by unit).
    pub checkpoints: Vec<SnapshotInfo>,
}

/// Completed checkpoints and savepoints, newest first.
#[utoipa::path(get, path = "/v1/pipelines/{name}/checkpoints", tag = "pipelines", params(("name" = String, Path, description = "The pipeline")),
    responses((status = 200, body = SnapshotList), (status = 404, body = ErrorBody)))]
pub(crate) async fn checkpoints(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Json<SnapshotList>, ApiError> {
    blocking(move || {
        let checkpoints = match &state.pipelines {
            Pipelines::Local(supervisor) => {
                let (storage, snapshots) = supervisor.snapshots(&name)?;
                snapshots.iter().map(|m| SnapshotInfo::from_metadata(&storage, m)).collect()
            }
            Pipelines::Cluster(cluster) => cluster
                .snapshots(&name)?
                .iter()
                .flat_map(|unit| {
                    unit.snapshots.iter().map(|m| SnapshotInfo {
                        unit: Some(unit.unit.clone()),
                        ..SnapshotInfo::from_metadata(&unit.storage, m)
                    })
                })
                .collect(),
        };
        Ok(Json(SnapshotList { checkpoints }))
    })
    .await
}

/// A request body that carries a spec, read up to `limit` bytes (apart
/// from the larger upload limit, so a spec request never buffers more).
async fn read_spec(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_long = std::error::Error::source(&error)
            .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
        if too_long {
            ApiError::too_large(format!(
                "the request is over {}, more than a spec may be (weir serve --max-spec-bytes)",
                crate::units::format_bytes(limit as u64)
            ))
        } else {
            ApiError::invalid_spec(format!("cannot read the request body: {error}"))
        }
    })
}

/// A JSON body, or the default when the body is empty or `null`.
fn optional_json<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice::<Option<T>>(body)
        .map(Option::unwrap_or_default)
        .map_err(|e| ApiError::invalid_spec(format!("request body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_body_may_be_empty_or_null() {
        // The document allows `null` for a stop; it was refused (400).
        for body in [&b""[..], b" \n", b"null"] {
            let request: StopRequest = optional_json(body).unwrap();
            assert!(!request.savepoint);
            assert!(optional_json::<Upgrade>(body).unwrap().spec.is_none());
        }
        let request: StopRequest = optional_json(br#"{"savepoint":true}"#).unwrap();
        assert!(request.savepoint);
        let refused = optional_json::<StopRequest>(br#"{"savepoint":1}"#).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    }
}
