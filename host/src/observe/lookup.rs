//! A key's state read from a running pipeline and shown for people: the
//! answer of the subtask owning the key ([`super::inspect`]), its bytes
//! decoded as the state's declared type ([`super::postcard`]), as its
//! language's encoding suggests, or as asked. `weir serve` answers
//! `GET /v1/pipelines/{name}/state` with it, and a cluster worker answers
//! the same for one of its units.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::inspect::{QueryError, StateAnswer, StateValue};
use super::postcard;
use super::RunHandle;
use crate::runtime::{DeclaredState, Language, Shape};

/// Which state of which key, shown how.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LookupRequest {
    /// The keyed operator: its node name or uid (default: the only one).
    pub operator: Option<String>,
    /// The state's name, as the function declares it.
    pub state: String,
    /// The key, as the key function returns it (UTF-8).
    pub key: String,
    /// How to show the stored bytes (default: as declared, else by the
    /// function's language).
    pub decode: Option<Decode>,
}

/// Why a lookup has no answer.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The subtask could not be asked or did not answer.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The request cannot be answered as asked.
    #[error("{0}")]
    Invalid(String),
}

/// Look `request` up in the run of `handle`, waiting at most `timeout`
/// for the owning subtask.
pub async fn lookup(
    handle: &RunHandle,
    request: LookupRequest,
    timeout: Duration,
) -> Result<StateView, LookupError> {
    let longest = crate::state::MAX_STATE_NAME_LEN;
    if request.state.is_empty() || request.state.len() > longest {
        return Err(LookupError::Invalid(format!("a state name has 1 to {longest} bytes")));
    }
    let operator = match request.operator {
        Some(operator) => operator,
        None => handle.state.only_stage().ok_or_else(|| {
            LookupError::Invalid(
                "this pipeline has several keyed operators: say which with ?operator=".into(),
            )
        })?,
    };
    let answer =
        handle.state.query(&operator, &request.state, request.key.as_bytes(), timeout).await?;
    let declared = handle.state.declared(&operator, &request.state);
    let decode = request.decode.unwrap_or(match (&declared, answer.language) {
        (Some(_), _) => Decode::Declared,
        (None, Some(Language::Python | Language::JavaScript)) => Decode::Json,
        (None, _) => Decode::Bytes,
    });
    if decode == Decode::Declared && declared.is_none() {
        return Err(LookupError::Invalid(format!(
            "operator {operator:?} declares no type for state {:?}: choose another decode",
            request.state
        )));
    }
    Ok(state_view(operator, request.state, request.key, answer, decode, declared.as_ref()))
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
    /// On a cluster: the unit that answered (the one owning the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// On a cluster: the worker running that unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// What the answer is consistent with.
    pub as_of: String,
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
        unit: None,
        worker: None,
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
