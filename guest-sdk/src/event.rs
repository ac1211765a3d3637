//! The event type and helpers to build and read it.

pub use crate::bindings::weir::function::types::{Event, FiredTimer, TimeDomain, Window};

impl Event {
    /// An event with `value` as payload at event time `timestamp` (ms since
    /// the epoch), no source key and no headers.
    pub fn new(value: Vec<u8>, timestamp: i64) -> Self {
        Self { key: None, value, timestamp, headers: Vec::new() }
    }

    /// The same event with its source key set to `key`.
    pub fn with_key(mut self, key: Vec<u8>) -> Self {
        self.key = Some(key);
        self
    }

    /// The same event with one more header.
    pub fn with_header(mut self, name: impl Into<String>, value: Vec<u8>) -> Self {
        self.headers.push((name.into(), value));
        self
    }

    /// The value of the first header called `name`, if any.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }

    /// Parse the payload as JSON into `T` (which may borrow from the event).
    #[cfg(feature = "json")]
    pub fn json<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, crate::Error> {
        serde_json::from_slice(&self.value)
            .map_err(|e| crate::Error::msg(format!("event value is not the expected JSON: {e}")))
    }

    /// The event decoded into `T` with serde, whatever its topic's wire
    /// format: a source decodes Avro, Protobuf and JSON Schema records
    /// into JSON events as it reads them, so `T` is the record's type —
    /// `weir schema types --lang rust` writes it from the schema.
    #[cfg(feature = "json")]
    pub fn decode<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, crate::Error> {
        self.json()
    }

    /// An event whose payload is `value` serialized as JSON.
    #[cfg(feature = "json")]
    pub fn from_json<T: serde::Serialize + ?Sized>(
        value: &T,
        timestamp: i64,
    ) -> Result<Self, crate::Error> {
        Ok(Self::new(serde_json::to_vec(value)?, timestamp))
    }
}

#[cfg(all(test, feature = "json"))]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_headers() {
        let event = Event::from_json(&serde_json::json!({"a": 1}), 7)
            .unwrap()
            .with_header("h", b"v".to_vec());
        let back: serde_json::Value = event.json().unwrap();
        assert_eq!(back["a"], 1);
        #[derive(serde::Deserialize)]
        struct A {
            a: i64,
        }
        assert_eq!(event.decode::<A>().unwrap().a, 1);
        assert_eq!(event.header("h"), Some(&b"v"[..]));
        assert_eq!(event.header("x"), None);
        assert!(Event::new(b"not json".to_vec(), 0).json::<serde_json::Value>().is_err());
    }
}
