//! Events packed into the flat lists of the WIT `event-batch` (and keys
//! into `packed-keys`), and back: what crosses the Wasm boundary, so a
//! batch costs a few copies instead of an allocation per event.
//!
//! Packing reuses the buffers it is given. Unpacking checks everything a
//! guest could get wrong — ends that go backwards or past the data, counts
//! that disagree, indices out of range — and never panics on it.

use super::bindings::weir::function::types::{
    Accumulate, AccumulateBatch, EventBatch, KeyedBatch, KeyedEvents, PackedKeys, ValueCells,
    Window, WindowResults,
};
use crate::Event;

/// An empty batch.
pub fn empty_batch() -> EventBatch {
    EventBatch {
        values: Vec::new(),
        value_ends: Vec::new(),
        timestamps: Vec::new(),
        keyed: Vec::new(),
        keys: Vec::new(),
        key_ends: Vec::new(),
        headers: Vec::new(),
    }
}

/// No value cells.
pub fn empty_cells() -> ValueCells {
    ValueCells { states: Vec::new(), present: Vec::new(), values: Vec::new(), ends: Vec::new() }
}

/// An empty keyed batch, to fill with [`pack_keyed`].
pub fn empty_keyed_batch() -> KeyedBatch {
    KeyedBatch {
        keys: PackedKeys { bytes: Vec::new(), ends: Vec::new() },
        event_ends: Vec::new(),
        events: empty_batch(),
        prefetched: empty_cells(),
    }
}

/// Empty `batch`, keeping its buffers.
pub(crate) fn clear(batch: &mut EventBatch) {
    batch.values.clear();
    batch.value_ends.clear();
    batch.timestamps.clear();
    batch.keyed.clear();
    batch.keys.clear();
    batch.key_ends.clear();
    batch.headers.clear();
}

/// An offset into a packed list (lists over 4 GiB cannot cross anyway).
pub(crate) fn end(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Add an event's value and timestamp to `batch`.
fn push_value(batch: &mut EventBatch, value: &[u8], timestamp: i64) {
    batch.values.extend_from_slice(value);
    batch.value_ends.push(end(batch.values.len()));
    batch.timestamps.push(timestamp);
}

/// Add `key` to `keys`.
fn push_key(keys: &mut PackedKeys, key: &[u8]) {
    keys.bytes.extend_from_slice(key);
    keys.ends.push(end(keys.bytes.len()));
}

/// Empty `cells` (keeping their states).
pub fn clear_cells(cells: &mut ValueCells) {
    cells.present.clear();
    cells.values.clear();
    cells.ends.clear();
}

/// Add a cell holding `value` (`None`: absent) to `cells`.
pub fn push_cell(cells: &mut ValueCells, value: Option<&[u8]>) {
    cells.present.push(value.is_some());
    cells.values.extend_from_slice(value.unwrap_or_default());
    cells.ends.push(end(cells.values.len()));
}

fn push(batch: &mut EventBatch, event: &Event) {
    let index = end(batch.timestamps.len());
    push_value(batch, &event.value, event.timestamp);
    if let Some(key) = &event.key {
        batch.keyed.push(index);
        batch.keys.extend_from_slice(key);
        batch.key_ends.push(end(batch.keys.len()));
    }
    batch
        .headers
        .extend(event.headers.iter().map(|(name, value)| (index, name.clone(), value.clone())));
}

/// Pack `events` into `into` (cleared first).
pub fn pack(events: &[Event], into: &mut EventBatch) {
    clear(into);
    events.iter().for_each(|event| push(into, event));
}

/// Pack per-key groups of events into `into` (cleared first).
pub fn pack_keyed(groups: &[KeyedEvents], into: &mut KeyedBatch) {
    clear(&mut into.events);
    into.keys.bytes.clear();
    into.keys.ends.clear();
    into.event_ends.clear();
    for group in groups {
        push_key(&mut into.keys, &group.key);
        group.events.iter().for_each(|event| push(&mut into.events, event));
        into.event_ends.push(end(into.events.timestamps.len()));
    }
}

/// Events without a source key or headers, packed: values back to back,
/// with their timestamps. What most sources produce, routed this way to a
/// Wasm process function: no allocation per event between the source and
/// the guest, and one contiguous copy into its batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BareEvents {
    values: KeyList,
    timestamps: Vec<i64>,
}

impl BareEvents {
    /// Room for `capacity` events.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { values: KeyList::with_capacity(capacity), timestamps: Vec::with_capacity(capacity) }
    }

    /// Empty, with room for as many events and bytes as `self` holds.
    pub fn with_capacity_of(&self) -> Self {
        Self { values: self.values.with_capacity_of(), timestamps: Vec::with_capacity(self.len()) }
    }

    /// Add an event with `value` at `timestamp`.
    pub fn push(&mut self, value: &[u8], timestamp: i64) {
        self.values.push(value);
        self.timestamps.push(timestamp);
    }

    /// Event `index`'s value.
    pub fn value(&self, index: usize) -> &[u8] {
        self.values.get(index)
    }

    /// Event `index`'s timestamp.
    pub fn timestamp(&self, index: usize) -> i64 {
        self.timestamps[index]
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// Event `index` as an [`Event`].
    pub fn event(&self, index: usize) -> Event {
        Event {
            key: None,
            value: self.value(index).to_vec(),
            timestamp: self.timestamps[index],
            headers: Vec::new(),
        }
    }

    /// The events as [`Event`]s.
    pub fn to_events(&self) -> Vec<Event> {
        (0..self.len()).map(|index| self.event(index)).collect()
    }
}

/// Events grouped without moving them: group `g`'s events are
/// `order[ends[g-1]..ends[g]]` (from 0 for the first), in arrival order.
#[derive(Debug, Clone, Copy)]
pub struct Grouping<'a> {
    /// Per group, where its events end in `order`.
    pub ends: &'a [u32],
    /// Event indices, group after group.
    pub order: &'a [u32],
}

impl Grouping<'_> {
    /// Each group's first event (grouped by key: the one whose key is the
    /// group's).
    pub fn first_events(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.ends.len()).map(|group| {
            let start = group.checked_sub(1).map_or(0, |previous| self.ends[previous]);
            self.order[start as usize] as usize
        })
    }
}

/// Builds [`Grouping`]s by counting sort, reusing its buffers.
#[derive(Debug, Default)]
pub struct GroupOrder {
    ends: Vec<u32>,
    order: Vec<u32>,
    cursors: Vec<u32>,
}

impl GroupOrder {
    /// Order `members` — (group, event) pairs in arrival order, groups
    /// numbered `0..groups` by first appearance — group after group.
    pub fn sort(&mut self, groups: usize, members: &[(u32, u32)]) -> Grouping<'_> {
        // Count each group's members (ends are running totals), then place
        // them from the last back, each before its group's cursor.
        self.ends.clear();
        self.ends.resize(groups, 0);
        for &(group, _) in members {
            self.ends[group as usize] += 1;
        }
        let mut total = 0;
        for end in &mut self.ends {
            total += *end;
            *end = total;
        }
        self.order.clear();
        self.order.resize(members.len(), 0);
        self.cursors.clone_from(&self.ends);
        for &(group, event) in members.iter().rev() {
            let cursor = &mut self.cursors[group as usize];
            *cursor -= 1;
            self.order[*cursor as usize] = event;
        }
        Grouping { ends: &self.ends, order: &self.order }
    }
}

/// Pack `events` in the groups of `grouping` (keys from `keys`, one per
/// event) into `into` (cleared first).
pub fn pack_grouped(
    events: &BareEvents,
    keys: &KeyList,
    grouping: Grouping<'_>,
    into: &mut KeyedBatch,
) {
    clear(&mut into.events);
    into.keys.bytes.clear();
    into.keys.ends.clear();
    into.event_ends.clear();
    let batch = &mut into.events;
    for (first, &end_of_group) in grouping.first_events().zip(grouping.ends) {
        push_key(&mut into.keys, keys.get(first));
        into.event_ends.push(end_of_group);
    }
    push_in_order(events, grouping.order, batch);
}

/// Append events `order` of `events` to `batch`.
fn push_in_order(events: &BareEvents, order: &[u32], batch: &mut EventBatch) {
    for &index in order {
        push_value(batch, events.value(index as usize), events.timestamp(index as usize));
    }
}

/// Pack windows' accumulators (a cell each, absent for a new window) and
/// their events, the groups of `grouping`, into `into` (cleared first).
pub fn pack_accumulate_grouped(
    accumulators: &ValueCells,
    events: &BareEvents,
    grouping: Grouping<'_>,
    into: &mut AccumulateBatch,
) {
    clear(&mut into.events);
    into.accumulators.clone_from(accumulators);
    into.event_ends.clear();
    into.event_ends.extend_from_slice(grouping.ends);
    push_in_order(events, grouping.order, &mut into.events);
}

/// An empty accumulate batch, to fill with [`pack_accumulate`].
pub fn empty_accumulate_batch() -> AccumulateBatch {
    AccumulateBatch { accumulators: empty_cells(), event_ends: Vec::new(), events: empty_batch() }
}

/// Pack windows' accumulators and events into `into` (cleared first).
pub fn pack_accumulate(batch: &[Accumulate], into: &mut AccumulateBatch) {
    clear(&mut into.events);
    clear_cells(&mut into.accumulators);
    into.event_ends.clear();
    for entry in batch {
        push_cell(&mut into.accumulators, entry.accumulator.as_deref());
        entry.events.iter().for_each(|event| push(&mut into.events, event));
        into.event_ends.push(end(into.events.timestamps.len()));
    }
}

/// The values of `cells`, which must all be present, checked.
pub fn unpack_values(cells: &ValueCells) -> Result<Vec<Vec<u8>>, String> {
    if cells.present.len() != cells.ends.len() || cells.present.contains(&false) {
        return Err("values: every cell must be present, one end each".into());
    }
    slices(&cells.values, &cells.ends, "values").map(|value| value.map(<[u8]>::to_vec)).collect()
}

/// The slices `ends` cuts `bytes` into, checked.
pub(crate) fn slices<'a>(
    bytes: &'a [u8],
    ends: &'a [u32],
    what: &'static str,
) -> impl Iterator<Item = Result<&'a [u8], String>> + 'a {
    let mut start = 0usize;
    ends.iter().map(move |&end| {
        let end = end as usize;
        if end < start || end > bytes.len() {
            return Err(format!("{what}: end {end} is outside {start}..={}", bytes.len()));
        }
        let slice = &bytes[start..end];
        start = end;
        Ok(slice)
    })
}

/// `ends` cutting `len` bytes, checked (as [`slices`] checks them) and
/// widened: one pass, where checking and then converting would be two.
pub(crate) fn checked_ends(len: usize, ends: &[u32], what: &str) -> Result<Vec<usize>, String> {
    // Sized up front: collecting `Result`s would grow the list step by step.
    let mut widened = Vec::with_capacity(ends.len());
    let mut start = 0;
    for &end in ends {
        let end = end as usize;
        if end < start || end > len {
            return Err(format!("{what}: end {end} is outside {start}..={len}"));
        }
        widened.push(end);
        start = end;
    }
    Ok(widened)
}

/// Byte strings (keys) packed in one buffer: no allocation per key. Its
/// ends are valid by construction.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeyList {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyList {
    /// An empty list with room for `keys` keys of about sixteen bytes.
    pub fn with_capacity(keys: usize) -> Self {
        Self { bytes: Vec::with_capacity(keys * 16), ends: Vec::with_capacity(keys) }
    }

    /// An empty list with room for as many keys and bytes as `self` holds.
    pub fn with_capacity_of(&self) -> Self {
        Self {
            bytes: Vec::with_capacity(self.bytes.len()),
            ends: Vec::with_capacity(self.ends.len()),
        }
    }

    /// The keys of `packed`, checked.
    pub fn from_packed(packed: PackedKeys) -> Result<Self, String> {
        Ok(Self {
            ends: checked_ends(packed.bytes.len(), &packed.ends, "keys")?,
            bytes: packed.bytes,
        })
    }

    /// Forget every key, keeping the room.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Add `key`.
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    /// Key `index`.
    pub fn get(&self, index: usize) -> &[u8] {
        let start = index.checked_sub(1).map_or(0, |previous| self.ends[previous]);
        &self.bytes[start..self.ends[index]]
    }

    /// Every key, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.ends.len()).map(|index| self.get(index))
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Windows whose results are wanted, packed as they cross to a Wasm
/// aggregate function (WIT `window-results`): no allocation per window.
/// Built only by [`Self::push`], so always well formed.
#[derive(Debug)]
pub struct FiredWindows {
    packed: WindowResults,
}

impl Default for FiredWindows {
    fn default() -> Self {
        let keys = PackedKeys { bytes: Vec::new(), ends: Vec::new() };
        Self {
            packed: WindowResults {
                keys,
                windows: Vec::new(),
                accumulators: Vec::new(),
                accumulator_ends: Vec::new(),
            },
        }
    }
}

impl FiredWindows {
    /// Add `window` of `key` with its accumulator.
    pub fn push(&mut self, key: &[u8], window: Window, accumulator: &[u8]) {
        let packed = &mut self.packed;
        push_key(&mut packed.keys, key);
        packed.windows.push(window);
        packed.accumulators.extend_from_slice(accumulator);
        packed.accumulator_ends.push(end(packed.accumulators.len()));
    }

    /// Each window: its key, the window and its accumulator.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Window, &[u8])> {
        let packed = &self.packed;
        let (keys, accumulators) = (
            pieces(&packed.keys.bytes, &packed.keys.ends),
            pieces(&packed.accumulators, &packed.accumulator_ends),
        );
        keys.zip(&packed.windows)
            .zip(accumulators)
            .map(|((key, &window), accumulator)| (key, window, accumulator))
    }

    /// How many windows.
    pub fn len(&self) -> usize {
        self.packed.windows.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.packed.windows.is_empty()
    }

    /// The packed form, to cross the boundary.
    pub fn packed(&self) -> &WindowResults {
        &self.packed
    }
}

/// `bytes` cut at `ends`, which the host made (unchecked).
fn pieces<'a>(bytes: &'a [u8], ends: &'a [u32]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let starts = std::iter::once(0).chain(ends.iter().map(|&end| end as usize));
    starts.zip(ends).map(|(start, &end)| &bytes[start..end as usize])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::packed::unpack;

    /// An event of `value` (its length as timestamp), `key` and `headers`.
    pub(crate) fn event(value: &str, key: Option<&str>, headers: &[(&str, &str)]) -> Event {
        Event {
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.as_bytes().to_vec(),
            timestamp: value.len() as i64,
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
        }
    }

    /// An event's fields, comparable.
    pub(crate) type Shape = (Option<Vec<u8>>, Vec<u8>, i64, Vec<(String, Vec<u8>)>);

    /// The fields of each of `events`, comparable.
    pub(crate) fn shape(events: &[Event]) -> Vec<Shape> {
        events
            .iter()
            .map(|e| (e.key.clone(), e.value.clone(), e.timestamp, e.headers.clone()))
            .collect()
    }

    #[test]
    fn fired_windows_pack_back_to_back_and_read_back() {
        let mut fired = FiredWindows::default();
        fired.push(b"k1", Window { start: 0, end: 10 }, b"acc");
        fired.push(b"", Window { start: 10, end: 20 }, b"");
        fired.push(b"k3", Window { start: 20, end: 30 }, b"xy");
        let read: Vec<_> = fired
            .iter()
            .map(|(key, window, acc)| (key.to_vec(), window.start, window.end, acc.to_vec()))
            .collect();
        assert_eq!(
            read,
            [
                (b"k1".to_vec(), 0, 10, b"acc".to_vec()),
                (vec![], 10, 20, vec![]),
                (b"k3".to_vec(), 20, 30, b"xy".to_vec())
            ]
        );
        let packed = fired.packed();
        assert_eq!(
            (packed.keys.bytes.as_slice(), packed.keys.ends.as_slice()),
            (&b"k1k3"[..], &[2, 2, 4][..])
        );
        assert_eq!(
            (packed.accumulators.as_slice(), packed.accumulator_ends.as_slice()),
            (&b"accxy"[..], &[3, 3, 5][..])
        );
        assert_eq!(fired.len(), 3);
    }

    #[test]
    fn accumulate_batches_pack_and_values_unpack_checked() {
        let batch = vec![
            Accumulate {
                accumulator: None,
                events: vec![event("a", None, &[]), event("b", None, &[])],
            },
            Accumulate {
                accumulator: Some(b"acc".to_vec()),
                events: vec![event("c", Some("k"), &[])],
            },
        ];
        let mut packed = empty_accumulate_batch();
        pack_accumulate(&batch, &mut packed);
        assert_eq!(
            (
                packed.accumulators.present.clone(),
                packed.accumulators.values.clone(),
                packed.event_ends.clone()
            ),
            (vec![false, true], b"acc".to_vec(), vec![2, 3])
        );
        assert_eq!(
            shape(&unpack(packed.events.clone()).unwrap()),
            shape(&[batch[0].events.clone(), batch[1].events.clone()].concat())
        );
        let values = ValueCells {
            states: vec![],
            present: vec![true, true],
            values: b"xyz".to_vec(),
            ends: vec![1, 3],
        };
        assert_eq!(unpack_values(&values).unwrap(), vec![b"x".to_vec(), b"yz".to_vec()]);
        assert!(
            unpack_values(&ValueCells { present: vec![true, false], ..values.clone() }).is_err(),
            "an absent accumulator"
        );
        assert!(
            unpack_values(&ValueCells { ends: vec![1, 9], ..values.clone() }).is_err(),
            "an end past the values"
        );
        assert!(unpack_values(&ValueCells { ends: vec![1], ..values }).is_err(), "counts disagree");
    }

    #[test]
    fn events_round_trip() {
        let events = vec![
            event("a", None, &[]),
            event("", Some(""), &[("h", "1")]),
            event("ccc", Some("k"), &[("x", ""), ("y", "2")]),
            event("d", None, &[]),
        ];
        let mut batch = empty_batch();
        pack(&events, &mut batch);
        assert_eq!(shape(&unpack(batch.clone()).unwrap()), shape(&events));
        pack(&events[..1], &mut batch);
        assert_eq!(
            shape(&unpack(batch).unwrap()),
            shape(&events[..1]),
            "packing clears what was there"
        );
    }

    #[test]
    fn bad_batches_are_errors_not_panics() {
        let mut batch = empty_batch();
        pack(&[event("ab", Some("k"), &[("h", "v")])], &mut batch);
        let broken: [fn(&mut EventBatch); 6] = [
            |b| b.value_ends[0] = 9,
            |b| b.value_ends.push(2),
            |b| b.keyed[0] = 5,
            |b| b.key_ends.clear(),
            |b| b.headers[0].0 = 3,
            |b| {
                b.keyed.push(0);
                b.key_ends.push(1);
            },
        ];
        for (i, breaking) in broken.iter().enumerate() {
            let mut bad = batch.clone();
            breaking(&mut bad);
            assert!(unpack(bad).is_err(), "case {i}");
        }
        assert!(KeyList::from_packed(PackedKeys { bytes: vec![1, 2], ends: vec![2, 1] }).is_err());
        assert!(KeyList::from_packed(PackedKeys { bytes: vec![1, 2], ends: vec![3] }).is_err());
        let keys =
            KeyList::from_packed(PackedKeys { bytes: vec![1, 2, 3], ends: vec![1, 1, 3] }).unwrap();
        assert_eq!(keys.iter().collect::<Vec<_>>(), vec![&[1][..], &[], &[2, 3]]);
        let mut pushed = KeyList::default();
        keys.iter().for_each(|key| pushed.push(key));
        assert_eq!((pushed.len(), pushed), (3, keys));
    }
}
