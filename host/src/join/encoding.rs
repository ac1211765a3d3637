//! What the joins store and emit: the JSON embedding of a value, the
//! self-delimiting records that hold buffered values, order-preserving
//! timestamps, and the joined output event.
//!
//! A buffered event is stored as its value already embedded as JSON, so a
//! value is checked once on arrival, never once per pair. Record:
//! `[len u32 BE][embedded value]`; records delimit themselves, so appending
//! records (a new event, a merged session) is concatenating encodings.

use crate::state::StateError;
use crate::Event;

/// Append `value` to `out` as a JSON value: verbatim (without surrounding
/// whitespace) when it is a UTF-8 JSON document, else as a JSON string of
/// its text (invalid UTF-8 replaced by U+FFFD).
pub fn embed_json(out: &mut Vec<u8>, value: &[u8]) {
    if let Ok(text) = std::str::from_utf8(value) {
        let text = text.trim_matches([' ', '\t', '\n', '\r']);
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
            out.extend_from_slice(text.as_bytes());
            return;
        }
    }
    let text = String::from_utf8_lossy(value);
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &*text);
}

/// Append a record holding `value`, embedded as JSON, to `out`.
pub(super) fn push_record(out: &mut Vec<u8>, value: &[u8]) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    embed_json(out, value);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// The embedded values of the records in `bytes`, in order.
pub(super) fn records(bytes: &[u8]) -> Records<'_> {
    Records(bytes)
}

/// Iterator over encoded records (see [`records`]).
pub(super) struct Records<'a>(&'a [u8]);

impl<'a> Iterator for Records<'a> {
    type Item = Result<&'a [u8], StateError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let record = self
            .0
            .split_first_chunk::<4>()
            .and_then(|(len, rest)| rest.split_at_checked(u32::from_be_bytes(*len) as usize));
        Some(match record {
            Some((value, rest)) => {
                self.0 = rest;
                Ok(value)
            }
            None => {
                self.0 = &[];
                Err(StateError::Corrupt("truncated join record".into()))
            }
        })
    }
}

/// `timestamp` as 8 bytes whose byte order is the numeric order.
pub(super) fn sortable(timestamp: i64) -> [u8; 8] {
    ((timestamp as u64) ^ (1 << 63)).to_be_bytes()
}

/// The timestamp at the start of `bytes` (as [`sortable`] wrote it).
pub(super) fn unsortable(bytes: &[u8]) -> Result<i64, StateError> {
    let (head, _) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| StateError::Corrupt("join entry without a timestamp".into()))?;
    Ok((u64::from_be_bytes(*head) ^ (1 << 63)) as i64)
}

/// The output of a matching pair of embedded values.
pub(super) fn joined(left: &[u8], right: &[u8], timestamp: i64) -> Event {
    const LEFT: &[u8] = b"{\"left\":";
    const RIGHT: &[u8] = b",\"right\":";
    let mut value = Vec::with_capacity(LEFT.len() + left.len() + RIGHT.len() + right.len() + 1);
    value.extend_from_slice(LEFT);
    value.extend_from_slice(left);
    value.extend_from_slice(RIGHT);
    value.extend_from_slice(right);
    value.push(b'}');
    Event { key: None, value, timestamp, headers: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded(value: &[u8]) -> String {
        let mut out = Vec::new();
        embed_json(&mut out, value);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_is_embedded_verbatim_and_anything_else_as_a_string() {
        assert_eq!(embedded(br#"{"id": 1, "x": [1.50, "a"]}"#), r#"{"id": 1, "x": [1.50, "a"]}"#);
        assert_eq!(embedded(b" 42\n"), "42", "surrounding whitespace is dropped");
        assert_eq!(embedded(b"\"s\""), "\"s\"");
        assert_eq!(embedded(b"null"), "null");
        assert_eq!(embedded(b"plain text"), "\"plain text\"");
        assert_eq!(embedded(b"{\"a\":1} trailing"), "\"{\\\"a\\\":1} trailing\"");
        assert_eq!(embedded(b"1 2"), "\"1 2\"");
        assert_eq!(embedded(b""), "\"\"");
        assert_eq!(embedded(b"tab\there"), "\"tab\\there\"");
        assert_eq!(embedded(b"\xff\"x"), "\"\u{fffd}\\\"x\"", "invalid UTF-8 is replaced");
        assert_eq!(embedded(b"\"\xff\""), "\"\\\"\u{fffd}\\\"\"", "a JSON string must be UTF-8");
        for value in [&b"plain"[..], b"\xff", b"{\"a\":[1,2]}", b"\"q\\\"uote\""] {
            let wrapped = joined(embedded(value).as_bytes(), b"0", 0).value;
            let parsed: serde_json::Value = serde_json::from_slice(&wrapped).unwrap();
            assert!(parsed["left"] != serde_json::Value::Null, "{parsed}");
        }
        let out = joined(b"{\"a\":1}", b"\"b\"", 7);
        assert_eq!(out.value, br#"{"left":{"a":1},"right":"b"}"#);
        assert_eq!((out.timestamp, out.key, out.headers.len()), (7, None, 0));
    }

    #[test]
    fn records_concatenate_and_timestamps_sort() {
        let mut bytes = Vec::new();
        push_record(&mut bytes, b"{\"a\":1}");
        push_record(&mut bytes, b"x");
        let values: Vec<_> = records(&bytes).map(Result::unwrap).collect();
        assert_eq!(values, vec![&b"{\"a\":1}"[..], b"\"x\""]);
        assert!(records(&bytes[..bytes.len() - 1]).any(|r| r.is_err()));
        let times = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in times.windows(2) {
            assert!(sortable(pair[0]) < sortable(pair[1]));
        }
        for t in times {
            assert_eq!(unsortable(&sortable(t)).unwrap(), t);
        }
    }
}
