//! Looking into a running pipeline without stopping it:
//! `GET /v1/pipelines/{name}/state` reads one key's state (queryable
//! state, answered by the subtask owning the key between two batches),
//! and `GET /v1/pipelines/{name}/tail` streams a rate-limited sample of
//! what an output is written (server-sent events; the sink never waits
//! for a reader).
//!
//! A state a Rust function declares a type for (`declare_states!`) is
//! shown as that type, as JSON ([`postcard`]); others as their language's
//! encoding suggests, or as asked (`decode`).
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
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::access::Bearer;
use super::{ApiError, AppState};
use crate::observe::inspect::{QueryError, StateAnswer, StateValue};
use crate::observe::postcard;
use crate::observe::tail::{TailEvent, TailReader, MAX_TAIL_RATE};
use crate::runtime::{DeclaredState, Language, Shape};
use crate::serve::limits::{ReadGate, ReadSlot};

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

/// How to show stored state bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Decode {
    /// As the type the function declares for the state (postcard, shown
    /// as JSON).
    Declared,
    /// UTF-8 JSON.
    Json,
    /// A postcard (zigzag varint) signed integer.
    I64,
    /// A postcard varint unsigned integer.
    U64,
    /// UTF-8 text.
    String,
    /// Hex.
    Bytes,
}

impl Decode {
    /// Its name in the query.
    pub fn name(self) -> &'static str {
        match self {
            Decode::Declared => "declared",
            Decode::Json => "json",
            Decode::I64 => "i64",
            Decode::U64 => "u64",
            Decode::String => "string",
            Decode::Bytes => "bytes",
        }
    }
}

/// A key's state in a running pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StateView {
    /// The keyed operator.
    pub operator: String,
    /// The state's name.
    pub state: String,
    /// The key.
    pub key: String,
    /// Whether the key holds that state.
    pub found: bool,
    /// `value`, `map` or `list`; absent when not found.
    pub kind: Option<String>,
    /// How `value` was decoded (see the `decode` parameter).
    pub encoding: Decode,
    /// The state's type as its function declares it, if it does:
    /// `{"kind": "value" | "map" | "list", "key": <a map's key type>,
    /// "type": <its values' type>}` (types as in docs/functions.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub declared: Option<serde_json::Value>,
    /// The value (a value state's, or a list's stored form), decoded.
    pub value: Option<serde_json::Value>,
    /// A map state's entries (at most 1000), keys and values decoded.
    pub entries: Option<Vec<(serde_json::Value, serde_json::Value)>>,
    /// The subtask that answered.
    pub subtask: usize,
    /// What the answer is consistent with.
    pub as_of: String,
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
    let view = app.pipelines.local("reading a key's state or tailing an output")?.get(&name)?;
    let handle = view.run.map(|(handle, _)| handle).filter(|h| h.listening());
    let handle = handle.ok_or_else(|| not_running(&name))?;
    let operator = match params.operator {
        Some(operator) => operator,
        None => handle.state.only_stage().ok_or_else(|| {
            ApiError::invalid_request(
                "this pipeline has several keyed operators: say which with ?operator=",
            )
        })?,
    };
    // Held while it waits; given back however the request ends.
    let _slot = acquire(&app.lookups, &name, &bearer)?;
    let answer = handle
        .state
        .query(&operator, &params.state, params.key.as_bytes(), QUERY_TIMEOUT)
        .await
        .map_err(|e| match e {
            QueryError::NoOperator(..) => ApiError::not_found(e.to_string()),
            QueryError::NotRunning => not_running(&name),
            QueryError::Timeout(..) => ApiError::timeout(e.to_string()),
            QueryError::Failed(message) => ApiError::internal(message),
        })?;
    let declared = handle.state.declared(&operator, &params.state);
    let decode = params.decode.unwrap_or(match (&declared, answer.language) {
        (Some(_), _) => Decode::Declared,
        (None, Some(Language::Python | Language::JavaScript)) => Decode::Json,
        (None, _) => Decode::Bytes,
    });
    if decode == Decode::Declared && declared.is_none() {
        return Err(ApiError::invalid_request(format!(
            "operator {operator:?} declares no type for state {:?}: choose another decode",
            params.state
        )));
    }
    let view = state_view(operator, params.state, params.key, answer, decode, declared.as_ref());
    Ok(Json(view))
}

/// A slot of `gate` for a read of `pipeline` by `bearer`, or 429.
fn acquire(gate: &ReadGate, pipeline: &str, bearer: &Bearer) -> Result<ReadSlot, ApiError> {
    Ok(gate.try_acquire(pipeline, bearer.0.as_deref())?)
}

fn not_running(name: &str) -> ApiError {
    ApiError::conflict("not_running", format!("pipeline {name:?} is not running"))
}

/// The view of `answer`, its bytes shown as `decode` says (`declared`:
/// by the `declared` type).
fn state_view(
    operator: String,
    state: String,
    key: String,
    answer: StateAnswer,
    decode: Decode,
    declared: Option<&DeclaredState>,
) -> StateView {
    let typed = declared.filter(|_| decode == Decode::Declared);
    let undecodable = |bytes: &[u8]| serde_json::json!({ "undecodable": hex::encode(bytes) });
    // Declared: by the type (a map's keys without one as hex).
    let show = |bytes: &[u8], shape: Option<&Shape>| match (typed, shape) {
        (Some(_), Some(shape)) => {
            postcard::to_json(bytes, shape).unwrap_or_else(|_| undecodable(bytes))
        }
        (Some(_), None) => decoded(bytes, Decode::Bytes),
        (None, _) => decoded(bytes, decode),
    };
    let value_shape = typed.map(|d| &d.value);
    let (kind, value, entries) = match &answer.value {
        StateValue::Absent => (None, None, None),
        StateValue::Value(bytes) => (Some("value"), Some(show(bytes, value_shape)), None),
        StateValue::List(bytes) => {
            // Declared: the elements, each by the type; else the stored form.
            let elements = typed.and_then(|_| crate::state::encoding::decode_list(bytes).ok());
            let value = match (elements, typed) {
                (Some(elements), _) => {
                    elements.iter().map(|e| show(e, value_shape)).collect::<Vec<_>>().into()
                }
                (None, Some(_)) => undecodable(bytes),
                (None, None) => show(bytes, None),
            };
            (Some("list"), Some(value), None)
        }
        StateValue::Map(entries) => {
            let key_shape = typed.and_then(|d| d.key.as_ref());
            let entries =
                entries.iter().map(|(k, v)| (show(k, key_shape), show(v, value_shape))).collect();
            (Some("map"), None, Some(entries))
        }
    };
    StateView {
        operator,
        state,
        key,
        found: kind.is_some(),
        kind: kind.map(str::to_string),
        encoding: decode,
        declared: declared.map(DeclaredState::to_json),
        value,
        entries,
        subtask: answer.subtask,
        as_of: "the last batch the owning subtask finished (not necessarily checkpointed)".into(),
    }
}

/// `bytes` shown as `decode` says; what does not decode is shown as
/// `{"undecodable": "<hex>"}`.
fn decoded(bytes: &[u8], decode: Decode) -> serde_json::Value {
    let undecodable = || serde_json::json!({ "undecodable": hex::encode(bytes) });
    match decode {
        Decode::Json => serde_json::from_slice(bytes).unwrap_or_else(|_| undecodable()),
        Decode::I64 => varint(bytes)
            .map(|n| ((n >> 1) as i64) ^ -((n & 1) as i64))
            .map_or_else(undecodable, serde_json::Value::from),
        Decode::U64 => varint(bytes).map_or_else(undecodable, serde_json::Value::from),
        Decode::String => std::str::from_utf8(bytes).map_or_else(|_| undecodable(), Into::into),
        Decode::Bytes | Decode::Declared => hex::encode(bytes).into(),
    }
}

/// The postcard varint that is all of `bytes`.
fn varint(bytes: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate() {
        if i >= 10 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (i + 1 == bytes.len()).then_some(value);
        }
    }
    None
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
) -> Result<Sse<impl futures::Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let view = app.pipelines.local("reading a key's state or tailing an output")?.get(&name)?;
    let handle = view.run.map(|(handle, _)| handle).filter(|h| h.listening());
    let handle = handle.ok_or_else(|| not_running(&name))?;
    let output = params.output.unwrap_or_else(|| "main".into());
    if !handle.metrics.has_output(&output) {
        return Err(ApiError::not_found(format!(
            "pipeline {name:?} has no output {output:?} (its outputs: {})",
            handle.metrics.outputs().join(", ")
        )));
    }
    let rate = params.rate.unwrap_or(DEFAULT_TAIL_RATE).min(MAX_TAIL_RATE);
    let limit = params.limit.unwrap_or(DEFAULT_TAIL_LIMIT).max(1);
    let slot = acquire(&app.tails, &name, &bearer)?;
    let reader = handle.tail.subscribe(&output, rate, limit);
    // The reader and its slot live in the stream: when the client goes,
    // the server drops the stream and both are given back at once.
    let stream =
        futures::stream::unfold(Following::new(reader, slot), |mut following| async move {
            let event = following.next().await?;
            let data = serde_json::to_string(&event).unwrap_or_default();
            Some((Ok(SseEvent::default().data(data)), following))
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(TAIL_KEEP_ALIVE)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_bytes_are_shown_as_asked_and_what_does_not_decode_says_so() {
        // postcard: 5000 as zigzag varint (10000 = 0x2710) and as u64.
        assert_eq!(decoded(&[0x90, 0x4e], Decode::I64), serde_json::json!(5000));
        assert_eq!(decoded(&[0x01], Decode::I64), serde_json::json!(-1));
        assert_eq!(decoded(&[0x88, 0x27], Decode::U64), serde_json::json!(5000));
        assert_eq!(decoded(b"{\"a\":[1]}", Decode::Json), serde_json::json!({"a": [1]}));
        assert_eq!(decoded(b"ok", Decode::String), serde_json::json!("ok"));
        assert_eq!(decoded(&[0xff], Decode::Bytes), serde_json::json!("ff"));
        assert_eq!(
            decoded(&[0x90, 0x4e, 0x00], Decode::I64),
            serde_json::json!({"undecodable": "904e00"}),
            "a varint must be all of the value"
        );
        assert_eq!(decoded(b"{", Decode::Json), serde_json::json!({"undecodable": "7b"}));
    }

    #[test]
    fn a_declared_state_is_shown_as_its_type_values_lists_and_maps_alike() {
        use crate::runtime::StateTypes;
        use serde_json::json;
        let types = StateTypes::parse(
            br#"{"state":"total","kind":"value","type":"i64"}
{"state":"recent","kind":"list","type":{"tuple":["u8","string"]}}
{"state":"seen","kind":"map","key":"string","type":{"option":"u64"}}"#,
        );
        let view = |name: &str, value: StateValue, decode: Decode| {
            let answer = StateAnswer { value, language: None, subtask: 1 };
            let declared = types.get(name);
            state_view("p".into(), name.into(), "42".into(), answer, decode, declared)
        };
        let total = view("total", StateValue::Value(vec![0x90, 0x4e]), Decode::Declared);
        assert_eq!((total.value, total.encoding), (Some(json!(5000)), Decode::Declared));
        assert_eq!(total.declared, Some(json!({"kind": "value", "type": "i64"})));
        // Asked for another decoding, it is given (the type still said).
        let hex = view("total", StateValue::Value(vec![0x90, 0x4e]), Decode::Bytes);
        assert_eq!((hex.value, hex.declared.is_some()), (Some(json!("904e")), true));
        let mut stored = Vec::new();
        crate::state::encoding::encode_list(
            &mut stored,
            [&[7, 1, b'a'][..], &[9, 0][..]].into_iter(),
        );
        let recent = view("recent", StateValue::List(stored), Decode::Declared);
        assert_eq!(recent.value, Some(json!([[7, "a"], [9, ""]])));
        let seen = view(
            "seen",
            StateValue::Map(vec![(vec![1, b'x'], vec![1, 3]), (vec![1, b'y'], vec![0xff])]),
            Decode::Declared,
        );
        assert_eq!(
            seen.entries,
            Some(vec![(json!("x"), json!(3)), (json!("y"), json!({"undecodable": "ff"}))])
        );
    }
}
