//! Looking into a running pipeline without stopping it:
//! `GET /v1/pipelines/{name}/state` reads one key's state (queryable
//! state, answered by the subtask owning the key between two batches),
//! and `GET /v1/pipelines/{name}/tail` streams a rate-limited sample of
//! what an output is written (server-sent events; the sink never waits
//! for a reader).
//!
//! A state a Rust function declares a type for (`declare_states!`) is
//! shown as that type, as JSON; others as their language's encoding
//! suggests, or as asked (`decode`): [`crate::observe::lookup`].
//!
//! Neither holds a thread or a lock while it waits, and what they hold
//! open is bounded: tail readers and lookups waiting for their answer are
//! counted per pipeline and per token ([`ReadGate`]) and refused beyond
//! the server's limits with 429; a slot is given back as soon as its
//! request ends, its client gone included.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::access::Bearer;
use super::pipelines::Pipelines;
use super::{ApiError, AppState};
use crate::observe::inspect::QueryError;
use crate::observe::lookup::{lookup, LookupError, LookupRequest};
pub use crate::observe::lookup::{Decode, StateView};
use crate::observe::tail::{TailEvent, TailReader, MAX_TAIL_RATE};
use crate::serve::limits::{ReadGate, ReadSlot};
use crate::serve::ClusterPipelines;
use axum::response::IntoResponse as _;

/// How long a state query waits for the owning subtask.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Events a tail sends by default, and a second.
const DEFAULT_TAIL_LIMIT: u64 = 1000;
const DEFAULT_TAIL_RATE: u32 = 20;

/// How often a tail with nothing to send sends a comment: a client that
/// went away without closing is noticed by then.
const TAIL_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Which state of which key.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StateParams {
    /// The keyed operator: its node name or uid (default: the only one).
    pub operator: Option<String>,
    /// The state's name, as the function declares it.
    pub state: String,
    /// The key, as the key function returns it (UTF-8).
    pub key: String,
    /// How to show the stored bytes: `declared` (as the type the function
    /// declares for the state; the default when it declares one), `json`
    /// (Python and TypeScript functions' encoding, their default), `i64`
    /// or `u64` (a Rust function's integer state, postcard), `string`, or
    /// `bytes` (hex, the default for a Rust function's undeclared state).
    pub decode: Option<Decode>,
}

/// A key's current state in a running pipeline, read from the subtask
/// that owns it between two batches (consistent as of the last batch it
/// finished; not necessarily checkpointed yet).
#[utoipa::path(get, path = "/v1/pipelines/{name}/state", tag = "pipelines",
    params(("name" = String, Path, description = "The pipeline"), StateParams),
    responses((status = 200, body = StateView), (status = 400, body = super::ErrorBody), (status = 404, body = super::ErrorBody),
        (status = 409, body = super::ErrorBody, description = "Not running"), (status = 429, body = super::ErrorBody, description = "Too many lookups waiting (per pipeline or per token)"),
        (status = 503, body = super::ErrorBody, description = "No answer in time")))]
pub(crate) async fn state(
    State(app): State<Arc<AppState>>,
    Extension(bearer): Extension<Bearer>,
    Path(name): Path<String>,
    Query(params): Query<StateParams>,
) -> Result<Json<StateView>, ApiError> {
    let longest = crate::state::MAX_STATE_NAME_LEN;
    if params.state.is_empty() || params.state.len() > longest {
        return Err(ApiError::invalid_request(format!("a state name has 1 to {longest} bytes")));
    }
    let request = LookupRequest {
        operator: params.operator,
        state: params.state,
        key: params.key,
        decode: params.decode,
    };
    if let Pipelines::Cluster(cluster) = &app.pipelines {
        let _slot = acquire(&app.lookups, &name, &bearer)?;
        return Ok(Json(routed_lookup(Arc::clone(cluster), name, request).await?));
    }
    let view = app.pipelines.local("reading a key's state")?.get(&name)?;
    let handle = view.run.map(|(handle, _)| handle).filter(|h| h.listening());
    let handle = handle.ok_or_else(|| not_running(&name))?;
    // Held while it waits; given back however the request ends.
    let _slot = acquire(&app.lookups, &name, &bearer)?;
    match lookup(&handle, request, QUERY_TIMEOUT).await {
        Ok(view) => Ok(Json(view)),
        Err(error) => Err(lookup_error(&name, error)),
    }
}

/// A lookup in a cluster pipeline: asked of the worker running the unit
/// that owns the key (found from the plan and the workers' reports), as
/// Kafka Streams routes an interactive query to the instance owning a key.
async fn routed_lookup(
    cluster: Arc<ClusterPipelines>,
    name: String,
    request: LookupRequest,
) -> Result<StateView, ApiError> {
    let (pipeline, asked) = (name.clone(), request.clone());
    let route = super::blocking(move || {
        Ok(cluster.route_lookup(&pipeline, asked.operator.as_deref(), &asked.key)?)
    })
    .await?;
    let request = LookupRequest { operator: route.operator.clone(), ..request };
    let client = reqwest::Client::builder()
        .timeout(QUERY_TIMEOUT + Duration::from_secs(5))
        .build()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let unreachable = |e: reqwest::Error| {
        ApiError::timeout(format!(
            "worker {} (unit {}) did not answer: {e}",
            route.worker, route.unit
        ))
    };
    let mut query = vec![("state", request.state.as_str()), ("key", request.key.as_str())];
    query.extend(request.operator.as_deref().map(|o| ("operator", o)));
    query.extend(request.decode.map(|d| ("decode", d.name())));
    let url = reqwest::Url::parse_with_params(&route.url, &query)
        .map_err(|e| ApiError::internal(format!("worker {} address: {e}", route.worker)))?;
    let response = client.get(url).bearer_auth(&route.token).send().await.map_err(unreachable)?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.map_err(unreachable)?;
    if status.is_success() {
        let mut view: StateView = serde_json::from_value(body)
            .map_err(|e| ApiError::internal(format!("worker {}: {e}", route.worker)))?;
        view.unit = Some(route.unit);
        view.worker = Some(route.worker);
        return Ok(view);
    }
    let message = body["error"]["message"].as_str().unwrap_or("no reason given");
    let message = format!("worker {} (unit {}): {message}", route.worker, route.unit);
    Err(match status.as_u16() {
        400 => ApiError::invalid_request(message),
        404 => ApiError::not_found(message),
        409 => ApiError::conflict("not_running", message),
        503 => ApiError::timeout(message),
        401 | 403 => ApiError::internal(format!(
            "{message} — give the workers and servers the same WEIR_CLUSTER_TOKEN"
        )),
        _ => ApiError::internal(message),
    })
}

/// The API's answer to a lookup that failed.
pub(crate) fn lookup_error(pipeline: &str, error: LookupError) -> ApiError {
    match error {
        LookupError::Query(QueryError::NoOperator(..)) => ApiError::not_found(error.to_string()),
        LookupError::Query(QueryError::NotRunning) => not_running(pipeline),
        LookupError::Query(QueryError::Timeout(..)) => ApiError::timeout(error.to_string()),
        LookupError::Query(QueryError::Failed(message)) => ApiError::internal(message),
        LookupError::Invalid(message) => ApiError::invalid_request(message),
    }
}

/// A slot of `gate` for a read of `pipeline` by `bearer`, or 429.
fn acquire(gate: &ReadGate, pipeline: &str, bearer: &Bearer) -> Result<ReadSlot, ApiError> {
    Ok(gate.try_acquire(pipeline, bearer.0.as_deref())?)
}

fn not_running(name: &str) -> ApiError {
    ApiError::conflict("not_running", format!("pipeline {name:?} is not running"))
}

/// Which output to tail, how fast and how much.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TailParams {
    /// `main` (a line spec's main sink), or a sink node's or side output's
    /// name (default `main`).
    pub output: Option<String>,
    /// Events a second at most (default 20, at most 1000).
    pub rate: Option<u32>,
    /// Events in all before the stream ends (default 1000, at least 1).
    pub limit: Option<u64>,
}

/// A rate-limited sample of what an output of a running pipeline is
/// written now, as server-sent events: each `data:` line is a JSON object
/// `{"timestamp", "key", "value"}`. With exactly-once sinks these are
/// written but perhaps not yet committed. The stream ends at `limit` or
/// when the run ends; a reader that falls behind misses events (tailing
/// never slows the pipeline). Readers open at once are limited per
/// pipeline and per token (429 beyond).
#[utoipa::path(get, path = "/v1/pipelines/{name}/tail", tag = "pipelines",
    params(("name" = String, Path, description = "The pipeline"), TailParams),
    responses((status = 200, content_type = "text/event-stream", body = String, description = "Server-sent events"),
        (status = 400, body = super::ErrorBody), (status = 404, body = super::ErrorBody), (status = 409, body = super::ErrorBody, description = "Not running"),
        (status = 429, body = super::ErrorBody, description = "Too many tail readers open (per pipeline or per token)")))]
pub(crate) async fn tail(
    State(app): State<Arc<AppState>>,
    Extension(bearer): Extension<Bearer>,
    Path(name): Path<String>,
    Query(params): Query<TailParams>,
) -> Result<axum::response::Response, ApiError> {
    let rate = params.rate.unwrap_or(DEFAULT_TAIL_RATE).min(MAX_TAIL_RATE);
    let limit = params.limit.unwrap_or(DEFAULT_TAIL_LIMIT).max(1);
    let output = params.output.unwrap_or_else(|| "main".into());
    if let Pipelines::Cluster(cluster) = &app.pipelines {
        let cluster = Arc::clone(cluster);
        let (pipeline, wanted) = (name.clone(), output.clone());
        let sink = super::blocking(move || Ok(cluster.output_sink(&pipeline, &wanted)?)).await?;
        let slot = acquire(&app.tails, &name, &bearer)?;
        let events = follow_topic(sink, rate, limit);
        let stream = futures::stream::unfold((events, slot), |(mut events, slot)| async move {
            let event = events.recv().await?;
            let data = serde_json::to_string(&event).unwrap_or_default();
            Some((Ok::<_, Infallible>(SseEvent::default().data(data)), (events, slot)))
        });
        return Ok(Sse::new(stream)
            .keep_alive(KeepAlive::new().interval(TAIL_KEEP_ALIVE))
            .into_response());
    }
    let view = app.pipelines.local("tailing an output")?.get(&name)?;
    let handle = view.run.map(|(handle, _)| handle).filter(|h| h.listening());
    let handle = handle.ok_or_else(|| not_running(&name))?;
    if !handle.metrics.has_output(&output) {
        return Err(ApiError::not_found(format!(
            "pipeline {name:?} has no output {output:?} (its outputs: {})",
            handle.metrics.outputs().join(", ")
        )));
    }
    let slot = acquire(&app.tails, &name, &bearer)?;
    let reader = handle.tail.subscribe(&output, rate, limit);
    // The reader and its slot live in the stream: when the client goes,
    // the server drops the stream and both are given back at once.
    let stream =
        futures::stream::unfold(Following::new(reader, slot), |mut following| async move {
            let event = following.next().await?;
            let data = serde_json::to_string(&event).unwrap_or_default();
            Some((Ok::<_, Infallible>(SseEvent::default().data(data)), following))
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(TAIL_KEEP_ALIVE)).into_response())
}

/// The committed records written to `sink`'s topic from now on, at most
/// `rate` a second (the rest skipped) and `limit` in all, read on a thread
/// of their own until the receiver is dropped: a cluster pipeline's output,
/// which its units write from many workers.
fn follow_topic(
    sink: crate::connectors::kafka::KafkaSinkConfig,
    rate: u32,
    limit: u64,
) -> tokio::sync::mpsc::Receiver<TailEvent> {
    use crate::connectors::kafka::console::{read_records, ReadOptions};
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    let follow = move || {
        let options = ReadOptions { read_committed: true, max: None, follow: true, from_end: true };
        let (mut sent, mut second, mut in_second) = (0u64, std::time::Instant::now(), 0u32);
        let read = read_records(
            &sink.bootstrap_servers,
            &sink.properties,
            &sink.topic,
            options,
            |record| {
                let Some(record) = record else { return !sender.is_closed() };
                if second.elapsed() >= Duration::from_secs(1) {
                    (second, in_second) = (std::time::Instant::now(), 0);
                }
                if in_second >= rate {
                    return true; // skipped: a tail never slows anything
                }
                in_second += 1;
                let event = TailEvent {
                    timestamp: record.timestamp.unwrap_or_default(),
                    key: record.key.as_deref().map(|k| String::from_utf8_lossy(k).into_owned()),
                    value: String::from_utf8_lossy(record.value.as_deref().unwrap_or_default())
                        .into_owned(),
                };
                sent += 1;
                sender.blocking_send(event).is_ok() && sent < limit
            },
        );
        if let Err(error) = read {
            tracing::warn!(%error, topic = %sink.topic, "tailing a cluster output ended");
        }
    };
    if let Err(error) = std::thread::Builder::new().name("cluster tail".into()).spawn(follow) {
        tracing::warn!(%error, "cannot start a tail reader");
    }
    receiver
}

/// A tail reader with its slot and the events it took but has not sent.
struct Following {
    reader: TailReader,
    due: std::collections::VecDeque<TailEvent>,
    _slot: ReadSlot,
}

impl Following {
    fn new(reader: TailReader, slot: ReadSlot) -> Self {
        Self { reader, due: Default::default(), _slot: slot }
    }

    /// The next event to send; `None` when the reader has ended.
    async fn next(&mut self) -> Option<TailEvent> {
        loop {
            if let Some(event) = self.due.pop_front() {
                return Some(event);
            }
            self.due.extend(self.reader.next_events().await?);
        }
    }
}
