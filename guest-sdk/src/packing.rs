//! The guest's side of the packed batches that cross the Wasm boundary
//! (WIT `event-batch`, `packed-keys`, `keyed-batch`): unpacking what the
//! host sends into [`Event`]s and packing outputs and keys. The host
//! checks what it receives; what the host sends is checked here too, and a
//! malformed batch is an error, never a panic.

use crate::bindings::weir::function::types::{
    AccumulateBatch, EventBatch, KeyedBatch, PackedKeys, ValueCells, Window, WindowResults,
};
use crate::{Error, Event};

/// An offset into a packed list.
fn end(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Append `bytes` to `out`. Short slices are copied eight bytes at a time
/// in the function's own code: in Wasm a `memcpy` is a call out to the
/// runtime, dearer than the copy for the few bytes most values have.
#[inline(always)]
pub(crate) fn append(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() > 64 {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(bytes.len());
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word: [u8; 8] = word.try_into().unwrap_or_default();
        out.extend_from_slice(&word);
    }
    for &byte in words.remainder() {
        out.push(byte);
    }
}

/// Packs events for the host as they come, reusing its buffers from batch
/// to batch (what [`Context`](crate::Context) emits into).
#[derive(Debug)]
pub(crate) struct BatchPacker {
    batch: EventBatch,
}

impl Default for BatchPacker {
    fn default() -> Self {
        Self {
            batch: EventBatch {
                values: Vec::new(),
                value_ends: Vec::new(),
                timestamps: Vec::new(),
                keyed: Vec::new(),
                keys: Vec::new(),
                key_ends: Vec::new(),
                headers: Vec::new(),
            },
        }
    }
}

impl BatchPacker {
    /// Add an event made of its parts.
    #[inline]
    pub(crate) fn push(
        &mut self,
        value: &[u8],
        timestamp: i64,
        key: Option<&[u8]>,
        headers: &[(String, Vec<u8>)],
    ) {
        let batch = &mut self.batch;
        let index = end(batch.timestamps.len());
        append(&mut batch.values, value);
        batch.value_ends.push(end(batch.values.len()));
        batch.timestamps.push(timestamp);
        if let Some(key) = key {
            batch.keyed.push(index);
            batch.keys.extend_from_slice(key);
            batch.key_ends.push(end(batch.keys.len()));
        }
        batch
            .headers
            .extend(headers.iter().map(|(name, value)| (index, name.clone(), value.clone())));
    }

    /// Add `event`.
    pub(crate) fn push_event(&mut self, event: &Event) {
        self.push(&event.value, event.timestamp, event.key.as_deref(), &event.headers);
    }

    /// Whether nothing was added since the last [`Self::clear`].
    pub(crate) fn is_empty(&self) -> bool {
        self.batch.timestamps.is_empty()
    }

    /// The packed batch.
    pub(crate) fn batch(&self) -> &EventBatch {
        &self.batch
    }

    /// The packed batch, owned.
    pub(crate) fn into_batch(self) -> EventBatch {
        self.batch
    }

    /// Forget the events, keep the buffers.
    pub(crate) fn clear(&mut self) {
        let batch = &mut self.batch;
        batch.values.clear();
        batch.value_ends.clear();
        batch.timestamps.clear();
        batch.keyed.clear();
        batch.keys.clear();
        batch.key_ends.clear();
        batch.headers.clear();
    }
}

/// Pack `events` for the host.
#[cfg(test)]
pub(crate) fn pack(events: &[Event]) -> EventBatch {
    let mut packer = BatchPacker::default();
    events.iter().for_each(|event| packer.push_event(event));
    packer.into_batch()
}

/// Cut `bytes` at `ends`, checked.
fn cut<'a>(bytes: &'a [u8], ends: &'a [u32]) -> impl Iterator<Item = Result<&'a [u8], Error>> + 'a {
    let mut start = 0usize;
    ends.iter().map(move |&end| {
        let end = end as usize;
        let slice = bytes.get(start..end).ok_or_else(|| {
            Error::msg(format!("malformed batch: end {end} outside {start}..={}", bytes.len()))
        })?;
        start = end;
        Ok(slice)
    })
}

/// The events of packed batches as [`Event`]s whose buffers are reused
/// from batch to batch: no allocation per event once they have grown.
#[derive(Default)]
pub(crate) struct EventBuffer {
    events: Vec<Event>,
}

/// Whether `batch` has values and timestamps only (no event has a key or
/// headers): the common case, unpacked by a loop of its own.
fn is_bare(batch: &EventBatch) -> bool {
    batch.keyed.is_empty() && batch.headers.is_empty()
}

/// Check that `batch` has a value per timestamp, and, when it is bare
/// ([`is_bare`]), that its value ends are in order and within its values
/// (once up front, so the bare loops cut values unchecked).
fn check_values(batch: &EventBatch) -> Result<(), Error> {
    let count = batch.timestamps.len();
    if batch.value_ends.len() != count {
        return Err(Error::msg(format!(
            "malformed batch: {} values for {count} timestamps",
            batch.value_ends.len()
        )));
    }
    if is_bare(batch) {
        let mut start = 0;
        for &end in &batch.value_ends {
            if end < start || end as usize > batch.values.len() {
                return Err(Error::msg(format!(
                    "malformed batch: end {end} outside {start}..={}",
                    batch.values.len()
                )));
            }
            start = end;
        }
    }
    Ok(())
}

/// An event with nothing in it (a buffer to fill).
fn empty_event() -> Event {
    Event { key: None, value: Vec::new(), timestamp: 0, headers: Vec::new() }
}

/// Each value of a bare batch checked by [`check_values`], with its
/// timestamp: cut unchecked.
fn bare_events(batch: &EventBatch) -> impl Iterator<Item = (&[u8], i64)> {
    let mut start = 0;
    batch.value_ends.iter().zip(&batch.timestamps).map(move |(&end, &timestamp)| {
        let value = &batch.values[start as usize..end as usize];
        start = end;
        (value, timestamp)
    })
}

/// Make `event` (a reused buffer) the event of `value` at `timestamp`,
/// without a source key or headers.
#[inline(always)]
fn set_bare(event: &mut Event, value: &[u8], timestamp: i64) {
    event.value.clear();
    append(&mut event.value, value);
    event.timestamp = timestamp;
    if event.key.is_some() {
        event.key = None;
    }
    event.headers.clear();
}

impl EventBuffer {
    /// Call `f` on each event of `batch` (checked), in order. A bare batch
    /// ([`is_bare`]) is unpacked into one event, reused for each: only its
    /// buffer is written, not one per event of the batch (what a key
    /// function needs, one event at a time).
    pub(crate) fn for_each(
        &mut self,
        batch: &EventBatch,
        mut f: impl FnMut(&Event) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if !is_bare(batch) {
            return self.fill(batch)?.iter().try_for_each(f);
        }
        check_values(batch)?;
        if self.events.is_empty() {
            self.events.push(empty_event());
        }
        let event = &mut self.events[0];
        for (value, timestamp) in bare_events(batch) {
            set_bare(event, value, timestamp);
            f(event)?;
        }
        Ok(())
    }

    /// Unpack `batch` (checked) and return its events.
    pub(crate) fn fill(&mut self, batch: &EventBatch) -> Result<&[Event], Error> {
        check_values(batch)?;
        let count = batch.timestamps.len();
        if self.events.len() < count {
            self.events.resize_with(count, empty_event);
        }
        if is_bare(batch) {
            for (event, (value, timestamp)) in self.events.iter_mut().zip(bare_events(batch)) {
                set_bare(event, value, timestamp);
            }
            return Ok(&self.events[..count]);
        }
        let (mut keyed, mut headers) = (
            batch.keyed.iter().zip(cut(&batch.keys, &batch.key_ends)).peekable(),
            batch.headers.iter().peekable(),
        );
        for (index, (event, (value, timestamp))) in self
            .events
            .iter_mut()
            .zip(cut(&batch.values, &batch.value_ends).zip(&batch.timestamps))
            .enumerate()
        {
            let index = end(index);
            event.value.clear();
            event.value.extend_from_slice(value?);
            event.timestamp = *timestamp;
            match (keyed.next_if(|(i, _)| **i == index), &mut event.key) {
                (Some((_, key)), Some(buffer)) => {
                    buffer.clear();
                    buffer.extend_from_slice(key?);
                }
                (Some((_, key)), slot) => *slot = Some(key?.to_vec()),
                (None, slot) => *slot = None,
            }
            event.headers.clear();
            while let Some((_, name, value)) = headers.next_if(|(i, _, _)| *i == index) {
                event.headers.push((name.clone(), value.clone()));
            }
        }
        if keyed.next().is_some() || headers.next().is_some() {
            return Err(Error::msg("malformed batch: keys or headers of events it does not have"));
        }
        Ok(&self.events[..count])
    }
}

/// The events of `batch`, owned (the native test host's `emit-batch`).
#[cfg(any(test, not(target_arch = "wasm32")))]
pub(crate) fn unpack(batch: &EventBatch) -> Result<Vec<Event>, Error> {
    EventBuffer::default().fill(batch).map(<[Event]>::to_vec)
}

/// Each key of a keyed batch with its events (slices of `events`, the
/// batch's events unpacked).
pub(crate) fn groups<'a>(
    batch: &'a KeyedBatch,
    events: &'a [Event],
) -> impl Iterator<Item = Result<(&'a [u8], &'a [Event]), Error>> + 'a {
    let mut taken = 0usize;
    cut(&batch.keys.bytes, &batch.keys.ends).zip(&batch.event_ends).map(move |(key, &event_end)| {
        let group = events.get(taken..event_end as usize).ok_or_else(|| {
            Error::msg("malformed batch: event ends out of order or past the events")
        })?;
        taken = event_end as usize;
        Ok((key?, group))
    })
}

/// One window of an accumulate batch: its accumulator so far (`None` for a
/// new window) and its events, each checked.
pub(crate) type AccumulateGroup<'a> = (Result<Option<&'a [u8]>, Error>, Result<&'a [Event], Error>);

/// Each window of an accumulate batch: its accumulator so far (checked;
/// `None` for a new window) and its events (slices of `events`, the
/// batch's events unpacked).
pub(crate) fn accumulate_groups<'a>(
    batch: &'a AccumulateBatch,
    events: &'a [Event],
) -> impl Iterator<Item = AccumulateGroup<'a>> + 'a {
    let cells = &batch.accumulators;
    let mut taken = 0usize;
    let accumulators = cut(&cells.values, &cells.ends)
        .zip(cells.present.iter().chain(std::iter::repeat(&false)))
        .map(|(value, present)| value.map(|v| present.then_some(v)));
    accumulators.zip(&batch.event_ends).map(move |(accumulator, &event_end)| {
        let group = events.get(taken..event_end as usize).ok_or_else(|| {
            Error::msg("malformed batch: event ends out of order or past the events")
        });
        taken = event_end as usize;
        (accumulator, group)
    })
}

/// Each window of a results batch: its key, window and accumulator
/// (checked).
pub(crate) fn window_results(
    batch: &WindowResults,
) -> impl Iterator<Item = Result<(&[u8], Window, &[u8]), Error>> + '_ {
    let count = batch.windows.len();
    let shaped = if batch.keys.ends.len() == count && batch.accumulator_ends.len() == count {
        Ok(())
    } else {
        Err(Error::msg(format!(
            "malformed batch: {} keys and {} accumulators for {count} windows",
            batch.keys.ends.len(),
            batch.accumulator_ends.len()
        )))
    };
    let windows = cut(&batch.keys.bytes, &batch.keys.ends)
        .zip(&batch.windows)
        .zip(cut(&batch.accumulators, &batch.accumulator_ends));
    shaped
        .err()
        .map(Err)
        .into_iter()
        .chain(windows.map(|((key, &window), accumulator)| Ok((key?, window, accumulator?))))
}

/// No value cells.
pub(crate) fn no_cells() -> ValueCells {
    ValueCells { states: Vec::new(), present: Vec::new(), values: Vec::new(), ends: Vec::new() }
}

/// Keys packed for the host.
#[derive(Default)]
pub(crate) struct KeyPacker {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl KeyPacker {
    /// Room for `keys` keys of about eight bytes.
    pub(crate) fn with_capacity(keys: usize) -> Self {
        Self { bytes: Vec::with_capacity(keys * 8), ends: Vec::with_capacity(keys) }
    }

    /// Add the key `write` appends to the packed bytes.
    pub(crate) fn push_with(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let start = self.bytes.len();
        write(&mut self.bytes)?;
        if self.bytes.len() < start {
            return Err(Error::msg("a key function removed bytes it did not append"));
        }
        self.ends.push(end(self.bytes.len()));
        Ok(())
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
        event.headers =
            headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect();
        event
    }

    type Shape = (Option<Vec<u8>>, Vec<u8>, i64, Vec<(String, Vec<u8>)>);

    fn shape(events: &[Event]) -> Vec<Shape> {
        events
            .iter()
            .map(|e| (e.key.clone(), e.value.clone(), e.timestamp, e.headers.clone()))
            .collect()
    }

    #[test]
    fn batches_round_trip_and_group_by_key() {
        let events = vec![
            event("a", None, &[]),
            event("", Some(""), &[("h", "1"), ("i", "2")]),
            event("ccc", Some("k"), &[]),
            event("d", None, &[("x", "")]),
        ];
        let batch = pack(&events);
        assert_eq!(shape(&unpack(&batch).unwrap()), shape(&events));
        let keyed = KeyedBatch {
            keys: PackedKeys { bytes: b"k1k2".to_vec(), ends: vec![2, 4] },
            event_ends: vec![3, 4],
            events: batch,
            prefetched: no_cells(),
        };
        let mut buffer = EventBuffer::default();
        let unpacked = buffer.fill(&keyed.events).unwrap().to_vec();
        let groups: Vec<(&[u8], &[Event])> =
            groups(&keyed, &unpacked).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            (groups[0].0, groups[0].1.len(), groups[1].0, groups[1].1.len()),
            (&b"k1"[..], 3, &b"k2"[..], 1)
        );
        assert_eq!(shape(groups[1].1), shape(&events[3..]));
        // Reused buffers give the same events, keys and headers cleared.
        let again = pack(&[event("x", None, &[]), event("yy", Some("k"), &[("h", "1")])]);
        assert_eq!(shape(buffer.fill(&again).unwrap()), shape(&unpack(&again).unwrap()));
        assert_eq!(buffer.fill(&again).unwrap()[0].key, None);
    }

    #[test]
    fn short_and_long_slices_append_whole() {
        let bytes: Vec<u8> = (0..100).collect();
        for len in 0..=bytes.len() {
            let mut out = vec![7];
            append(&mut out, &bytes[..len]);
            assert_eq!(out, [&[7][..], &bytes[..len]].concat(), "{len} bytes");
        }
    }

    #[test]
    fn each_event_is_visited_as_unpacking_gives_it() {
        let bare = [event("a", None, &[]), event("", None, &[]), event("ccc", None, &[])];
        let mixed = [event("a", None, &[]), event("bb", Some("k"), &[("h", "1")])];
        let mut buffer = EventBuffer::default();
        for events in [&bare[..], &mixed, &bare] {
            let batch = pack(events);
            let mut seen = Vec::new();
            let visit = |event: &Event| {
                seen.push(event.clone());
                Ok(())
            };
            buffer.for_each(&batch, visit).unwrap();
            assert_eq!(shape(&seen), shape(events));
        }
        // The visit stops at the first error, which it returns.
        let mut visits = 0;
        let stopped = buffer.for_each(&pack(&bare), |_| {
            visits += 1;
            Err(Error::msg("stop"))
        });
        assert_eq!((stopped.map_err(|e| e.message().to_string()), visits), (Err("stop".into()), 1));
        // A malformed batch is an error before any visit.
        let mut batch = pack(&bare);
        batch.value_ends[1] = 9;
        assert!(buffer.for_each(&batch, |_| panic!("visited")).is_err());
        batch.value_ends.pop();
        assert!(buffer.for_each(&batch, |_| panic!("visited")).is_err());
    }

    #[test]
    fn malformed_batches_are_errors() {
        let mut batch = pack(&[event("ab", None, &[])]);
        batch.value_ends[0] = 7;
        assert!(unpack(&batch).is_err());
        let mut batch = pack(&[event("ab", Some("k"), &[])]);
        batch.keyed[0] = 3;
        assert!(unpack(&batch).is_err(), "a key of an event the batch does not have");
        let mut batch = pack(&[event("ab", None, &[])]);
        batch.timestamps.push(1);
        assert!(unpack(&batch).is_err(), "more timestamps than values");
        let keyed = KeyedBatch {
            keys: PackedKeys { bytes: b"k".to_vec(), ends: vec![1] },
            event_ends: vec![5],
            events: pack(&[event("a", None, &[])]),
            prefetched: no_cells(),
        };
        let events = unpack(&keyed.events).unwrap();
        assert!(groups(&keyed, &events).any(|g| g.is_err()));
    }

    #[test]
    fn window_results_unpack_checked() {
        let window = |start| Window { start, end: start + 10 };
        let mut batch = WindowResults {
            keys: PackedKeys { bytes: b"ab".to_vec(), ends: vec![1, 2] },
            windows: vec![window(0), window(10)],
            accumulators: b"xyz".to_vec(),
            accumulator_ends: vec![1, 3],
        };
        let read: Vec<_> = window_results(&batch)
            .map(|w| w.map(|(key, window, acc)| (key, window.start, window.end, acc)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read, [(&b"a"[..], 0, 10, &b"x"[..]), (&b"b"[..], 10, 20, &b"yz"[..])]);
        batch.accumulator_ends[1] = 4;
        assert!(window_results(&batch).any(|w| w.is_err()), "an accumulator past the bytes");
        batch.accumulator_ends.pop();
        assert!(
            window_results(&batch).next().is_some_and(|w| w.is_err()),
            "fewer accumulators than windows"
        );
    }
}
