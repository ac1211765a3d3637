//! What a worker serves: `GET /readyz` (200 while it is a member of its
//! group with its assignment and no unit failing repeatedly, else 503 with
//! the reason: [`Readiness`]), `GET /healthz` (200 while its loop turns,
//! 503 once it is wedged: [`Liveness`]), `GET /metrics` (Prometheus text:
//! its units and what each has done) and `GET /v1/worker` (the same as
//! JSON: [`WorkerStatus`], or [`FleetStatus`] for a worker of a whole
//! cluster, whose readiness and liveness are those of every pipeline it
//! runs). Read only: nothing here changes what the worker runs.
//!
//! With a cluster token (`WEIR_CLUSTER_TOKEN`, shared by the cluster's
//! workers and servers) it also answers `GET
//! /v1/pipelines/{pipeline}/units/{unit}/state` — a key's state in a unit
//! it runs, as `weir serve` answers it for a pipeline — to requests
//! bearing that token: what a cluster's server routes a state lookup to.
//! Without one that route is refused: state is data, and these endpoints
//! are otherwise open.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};

use super::fleet::{Fleet, FleetStatus};
use super::worker::{Liveness, Readiness, Worker, WorkerStatus};
use crate::observe::inspect::QueryError;
use crate::observe::lookup::{lookup, LookupError, LookupRequest};
use crate::observe::RunHandle;
use crate::runtime::digest;

/// What a worker process reports: one pipeline's [`Worker`], or a
/// cluster's [`Fleet`].
pub trait Reports: Send + Sync + 'static {
    /// Whether it does its share (`/readyz`).
    fn readiness(&self) -> Readiness;
    /// Whether its loop turns (`/healthz`).
    fn liveness(&self) -> Liveness;
    /// `/v1/worker`'s body.
    fn report(&self) -> serde_json::Value;
    /// The status of each pipeline it runs.
    fn pipelines(&self) -> Vec<WorkerStatus>;
    /// The live handle of unit `unit` of `pipeline`, while it runs here.
    fn unit_handle(&self, pipeline: &str, unit: &str) -> Option<Arc<RunHandle>>;
}

impl Reports for Worker {
    fn readiness(&self) -> Readiness {
        Worker::readiness(self)
    }
    fn liveness(&self) -> Liveness {
        Worker::liveness(self)
    }
    fn report(&self) -> serde_json::Value {
        serde_json::to_value(self.status()).unwrap_or_default()
    }
    fn pipelines(&self) -> Vec<WorkerStatus> {
        vec![self.status()]
    }
    fn unit_handle(&self, pipeline: &str, unit: &str) -> Option<Arc<RunHandle>> {
        Worker::unit_handle(self, pipeline, unit)
    }
}

impl Reports for Fleet {
    fn readiness(&self) -> Readiness {
        Fleet::readiness(self)
    }
    fn liveness(&self) -> Liveness {
        Fleet::liveness(self)
    }
    fn report(&self) -> serde_json::Value {
        serde_json::to_value::<FleetStatus>(self.status()).unwrap_or_default()
    }
    fn pipelines(&self) -> Vec<WorkerStatus> {
        self.status().pipelines.into_iter().map(|p| p.worker).collect()
    }
    fn unit_handle(&self, pipeline: &str, unit: &str) -> Option<Arc<RunHandle>> {
        Fleet::unit_handle(self, pipeline, unit)
    }
}

/// What the status server's routes share.
#[derive(Clone)]
struct Served {
    worker: Arc<dyn Reports>,
    /// The SHA-256 of the cluster token a state lookup must bear.
    lookup_token: Option<String>,
}

/// Serve `worker`'s status on `listener` (on a thread of its own, until
/// the process ends); state lookups to requests bearing `lookup_token`.
pub fn serve(
    worker: Arc<dyn Reports>,
    listener: std::net::TcpListener,
    lookup_token: Option<&str>,
) -> std::io::Result<SocketAddr> {
    let address = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let lookup_token = lookup_token.filter(|t| !t.is_empty()).map(|t| digest(t.as_bytes()));
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/worker", get(status))
        .route("/v1/pipelines/{pipeline}/units/{unit}/state", get(unit_state))
        .with_state(Served { worker, lookup_token });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new().name("worker status".into()).spawn(move || {
        runtime.block_on(async move {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    if let Err(error) = axum::serve(listener, app).await {
                        tracing::warn!(%error, "worker status server stopped");
                    }
                }
                Err(error) => tracing::warn!(%error, "worker status server cannot listen"),
            }
        })
    })?;
    Ok(address)
}

/// Liveness: 200 while the worker's loop turns, 503 once it is wedged
/// (restarting the process is the way out).
async fn healthz(State(served): State<Served>) -> (StatusCode, Json<Liveness>) {
    let worker = served.worker;
    let liveness = worker.liveness();
    let status = if liveness.alive { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(liveness))
}

/// Readiness: 200 while the worker does its share, 503 with the reason
/// otherwise (joining, lost its group, a unit failing repeatedly, …).
async fn readyz(State(served): State<Served>) -> (StatusCode, Json<Readiness>) {
    let worker = served.worker;
    let readiness = worker.readiness();
    let status = if readiness.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(readiness))
}

async fn status(State(served): State<Served>) -> Json<serde_json::Value> {
    Json(served.worker.report())
}

async fn metrics(State(served): State<Served>) -> impl IntoResponse {
    let text = prometheus(&served.worker.pipelines());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// How long a unit's state lookup waits for its subtask.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// A key's state in unit `unit` of `pipeline`, for a request bearing the
/// cluster token: the answer as JSON (a `StateView`), or an error as
/// `{"error":{"code","message"}}` with the status `weir serve` gives it.
async fn unit_state(
    State(served): State<Served>,
    Path((pipeline, unit)): Path<(String, String)>,
    headers: HeaderMap,
    Query(request): Query<LookupRequest>,
) -> (StatusCode, Json<serde_json::Value>) {
    let refuse = |status: StatusCode, code: &str, message: String| {
        (status, Json(serde_json::json!({ "error": { "code": code, "message": message } })))
    };
    let Some(expected) = &served.lookup_token else {
        let message = "state lookups on this worker need the cluster token (WEIR_CLUSTER_TOKEN) on its workers and servers";
        return refuse(StatusCode::FORBIDDEN, "no_cluster_token", message.into());
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer.map(|t| digest(t.as_bytes())).as_ref() != Some(expected) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the cluster token is needed".into(),
        );
    }
    let Some(handle) = served.worker.unit_handle(&pipeline, &unit) else {
        let message = format!("unit {unit} of pipeline {pipeline} does not run here (now)");
        return refuse(StatusCode::CONFLICT, "not_running", message);
    };
    match lookup(&handle, request, LOOKUP_TIMEOUT).await {
        Ok(view) => (StatusCode::OK, Json(serde_json::to_value(view).unwrap_or_default())),
        Err(LookupError::Invalid(message)) => {
            refuse(StatusCode::BAD_REQUEST, "invalid_request", message)
        }
        Err(LookupError::Query(error @ QueryError::NoOperator(..))) => {
            refuse(StatusCode::NOT_FOUND, "not_found", error.to_string())
        }
        Err(LookupError::Query(QueryError::NotRunning)) => {
            refuse(StatusCode::CONFLICT, "not_running", format!("unit {unit} is not running"))
        }
        Err(LookupError::Query(error @ QueryError::Timeout(..))) => {
            refuse(StatusCode::SERVICE_UNAVAILABLE, "timeout", error.to_string())
        }
        Err(LookupError::Query(QueryError::Failed(message))) => {
            refuse(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
        }
    }
}

/// The status of each pipeline a worker runs in Prometheus' text format.
pub fn prometheus(statuses: &[WorkerStatus]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# HELP weir_worker_units Units this worker runs.");
    let _ = writeln!(out, "# TYPE weir_worker_units gauge");
    for status in statuses {
        let _ = writeln!(
            out,
            "weir_worker_units{{worker=\"{}\",pipeline=\"{}\"}} {}",
            status.worker_id,
            status.pipeline,
            status.units.len()
        );
    }
    type Value = fn(&super::worker::UnitStatus) -> Option<f64>;
    let series: [(&str, &str, &str, Value); 8] = [
        (
            "weir_unit_running",
            "gauge",
            "1 while the unit runs, 0 while it starts, fails or stops.",
            |u| Some(f64::from(u8::from(u.state == "running"))),
        ),
        (
            "weir_unit_records_in_total",
            "counter",
            "Records its source read in the current run.",
            |u| Some(u.records_in as f64),
        ),
        ("weir_unit_records_out_total", "counter", "Records it wrote in the current run.", |u| {
            Some(u.records_out as f64)
        }),
        ("weir_unit_watermark_milliseconds", "gauge", "Its event time.", |u| {
            u.watermark.map(|w| w as f64)
        }),
        (
            "weir_unit_lag_records",
            "gauge",
            "Records of its input partitions not yet checkpointed.",
            |u| u.lag.map(|l| l as f64),
        ),
        ("weir_unit_state_size_bytes", "gauge", "Size of its local state.", |u| {
            u.state_bytes.map(|b| b as f64)
        }),
        (
            "weir_unit_restores_total",
            "counter",
            "Runs of it on this worker that restored a snapshot.",
            |u| Some(u.restores as f64),
        ),
        (
            "weir_unit_last_checkpoint_id",
            "gauge",
            "The newest checkpoint of its current run.",
            |u| u.last_checkpoint.map(|c| c as f64),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for status in statuses {
            for unit in &status.units {
                if let Some(value) = value(unit) {
                    let _ = writeln!(
                        out,
                        "{name}{{worker=\"{}\",pipeline=\"{}\",unit=\"{}\",role=\"{}\"}} {value}",
                        status.worker_id, status.pipeline, unit.unit, unit.role
                    );
                }
            }
        }
    }
    out
}
