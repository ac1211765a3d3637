//! Event time taken from a field of a JSON record, and what a source does
//! with a record that has none ([`BadTimestamps`]).

/// What to do with a record whose timestamp is missing or unusable (and,
/// for the Kafka source, a tombstone). Never "now": event time must come
/// from the event.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum BadTimestamps {
    /// Fail the run, naming where the record is.
    #[default]
    Fail,
    /// Drop the record and count it (the summary reports how many).
    Drop,
    /// Send the record to this side output (with timestamp `i64::MIN`).
    SideOutput(String),
}

/// The event time in `record`'s field `field`: RFC 3339 text or integer
/// milliseconds since the epoch. The error says what is wrong.
pub(crate) fn json_timestamp(record: &[u8], field: &str) -> Result<i64, String> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(record).map_err(|e| format!("not a JSON object: {e}"))?;
    match object.get(field) {
        Some(serde_json::Value::String(text)) => parse_rfc3339_millis(text)
            .ok_or_else(|| format!("field {field:?} is not an RFC 3339 time: {text:?}")),
        Some(serde_json::Value::Number(n)) => {
            n.as_i64().ok_or_else(|| format!("field {field:?} is not integer milliseconds: {n}"))
        }
        Some(other) => Err(format!("field {field:?} is not a time: {other}")),
        None => Err(format!("no timestamp field {field:?}")),
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC time.
pub(crate) fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339_weak(text).ok()?;
    let millis = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    i64::try_from(millis).ok()
}
