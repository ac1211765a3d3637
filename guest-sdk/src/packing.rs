//! The guest's side of the packed batches that cross the Wasm boundary
//! (WIT `event-batch`, `packed-keys`, `keyed-batch`): unpacking what the
//! host sends into [`Event`]s and packing outputs and keys. The host
//! checks what it receives; what the host sends is checked here too, and a
//! malformed batch is an error, never a panic.

use crate::bindings::weir::function::types::{EventBatch, KeyedBatch, KeyedEvents, PackedKeys};
use crate::{Error, Event};

/// An offset into a packed list.
fn end(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Pack `events` for the host.
pub(crate) fn pack(events: &[Event]) -> EventBatch {
    let mut batch = EventBatch { values: Vec::new(), value_ends: Vec::with_capacity(events.len()), timestamps: Vec::with_capacity(events.len()), keyed: Vec::new(), keys: Vec::new(), key_ends: Vec::new(), headers: Vec::new() };
    batch.values.reserve(events.iter().map(|e| e.value.len()).sum());
    for (index, event) in events.iter().enumerate() {
        batch.values.extend_from_slice(&event.value);
        batch.value_ends.push(end(batch.values.len()));
        batch.timestamps.push(event.timestamp);
        if let Some(key) = &event.key {
            batch.keyed.push(end(index));
            batch.keys.extend_from_slice(key);
            batch.key_ends.push(end(batch.keys.len()));
        }
        batch.headers.extend(event.headers.iter().map(|(name, value)| (end(index), name.clone(), value.clone())));
    }
    batch
}

/// Cut `bytes` at `ends`, checked.
fn cut<'a>(bytes: &'a [u8], ends: &'a [u32]) -> impl Iterator<Item = Result<&'a [u8], Error>> + 'a {
    let mut start = 0usize;
    ends.iter().map(move |&end| {
        let end = end as usize;
        let slice = bytes.get(start..end).ok_or_else(|| Error::msg(format!("malformed batch: end {end} outside {start}..={}", bytes.len())))?;
        start = end;
        Ok(slice)
    })
}

/// Call `each` with every event of `batch` in order, reusing one `Event`
/// (no allocation per event once its buffers have grown).
pub(crate) fn for_each_event(batch: &EventBatch, mut each: impl FnMut(&Event) -> Result<(), Error>) -> Result<(), Error> {
    let mut event = Event { key: None, value: Vec::new(), timestamp: 0, headers: Vec::new() };
    let (mut keyed, mut headers) = (batch.keyed.iter().zip(cut(&batch.keys, &batch.key_ends)).peekable(), batch.headers.iter().peekable());
    for (index, (value, timestamp)) in cut(&batch.values, &batch.value_ends).zip(&batch.timestamps).enumerate() {
        let index = end(index);
        event.value.clear();
        event.value.extend_from_slice(value?);
        event.timestamp = *timestamp;
        event.key = match keyed.next_if(|(i, _)| **i == index) {
            Some((_, key)) => Some(key?.to_vec()),
            None => None,
        };
        event.headers.clear();
        while let Some((_, name, value)) = headers.next_if(|(i, _, _)| *i == index) {
            event.headers.push((name.clone(), value.clone()));
        }
        each(&event)?;
    }
    Ok(())
}

/// The events of `batch`, owned.
pub(crate) fn unpack(batch: &EventBatch) -> Result<Vec<Event>, Error> {
    let mut events = Vec::with_capacity(batch.timestamps.len());
    for_each_event(batch, |event| {
        events.push(event.clone());
        Ok(())
    })?;
    Ok(events)
}

/// A keyed batch as per-key groups.
pub(crate) fn unpack_keyed(batch: &KeyedBatch) -> Result<Vec<KeyedEvents>, Error> {
    let mut events = unpack(&batch.events)?.into_iter();
    let mut taken = 0usize;
    let mut groups = Vec::with_capacity(batch.event_ends.len());
    for (key, &event_end) in cut(&batch.keys.bytes, &batch.keys.ends).zip(&batch.event_ends) {
        let count = (event_end as usize).checked_sub(taken).ok_or_else(|| Error::msg("malformed batch: event ends go backwards"))?;
        taken = event_end as usize;
        groups.push(KeyedEvents { key: key?.to_vec(), events: events.by_ref().take(count).collect() });
    }
    Ok(groups)
}

/// Keys packed for the host.
#[derive(Default)]
pub(crate) struct KeyPacker {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl KeyPacker {
    /// Add a key.
    pub(crate) fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(end(self.bytes.len()));
    }

    /// The packed keys.
    pub(crate) fn finish(self) -> PackedKeys {
        PackedKeys { bytes: self.bytes, ends: self.ends }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(value: &str, key: Option<&str>, headers: &[(&str, &str)]) -> Event {
        let mut event = Event::new(value.as_bytes().to_vec(), value.len() as i64);
        event.key = key.map(|k| k.as_bytes().to_vec());
        event.headers = headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect();
        event
    }

    type Shape = (Option<Vec<u8>>, Vec<u8>, i64, Vec<(String, Vec<u8>)>);

    fn shape(events: &[Event]) -> Vec<Shape> {
        events.iter().map(|e| (e.key.clone(), e.value.clone(), e.timestamp, e.headers.clone())).collect()
    }

    #[test]
    fn batches_round_trip_and_group_by_key() {
        let events = vec![event("a", None, &[]), event("", Some(""), &[("h", "1"), ("i", "2")]), event("ccc", Some("k"), &[]), event("d", None, &[("x", "")])];
        let batch = pack(&events);
        assert_eq!(shape(&unpack(&batch).unwrap()), shape(&events));
        let keyed = KeyedBatch { keys: PackedKeys { bytes: b"k1k2".to_vec(), ends: vec![2, 4] }, event_ends: vec![3, 4], events: batch };
        let groups = unpack_keyed(&keyed).unwrap();
        assert_eq!((groups[0].key.as_slice(), groups[0].events.len(), groups[1].key.as_slice(), groups[1].events.len()), (&b"k1"[..], 3, &b"k2"[..], 1));
        assert_eq!(shape(&groups[1].events), shape(&events[3..]));
    }

    #[test]
    fn malformed_batches_are_errors() {
        let mut batch = pack(&[event("ab", None, &[])]);
        batch.value_ends[0] = 7;
        assert!(unpack(&batch).is_err());
    }
}
