//! The window operator of one keyed subtask.
//!
//! Per (key, window) it stores the aggregate's accumulator under
//! `StateKey(group, "window-acc", Value, key, [start BE][end BE])` and an
//! event-time timer at the window's last millisecond. When the watermark
//! reaches the timer, the window fires once. With `allowed_lateness`, the
//! accumulator is kept until `end − 1 + lateness`: an event arriving in
//! that time updates it and fires the window again at once. An event all
//! of whose windows are past that point is late: it goes to the late side
//! output if the spec names one, else it is dropped and counted.
//!
//! Sessions merge as Flink's (`TimeWindow.intersects`): an event's window
//! joins every session of its key that it overlaps or touches, and only
//! then is lateness decided, so an event whose own window is past that
//! point but touches a session still kept merges into it and fires it
//! again. A merged session is a new window: its accumulator (the merged
//! ones combined) and its firing and cleanup timers are its own.

use std::collections::HashMap;

use crate::runtime::bindings::weir::function::types::{Accumulate, ValueCells, Window};
use crate::runtime::packing::{self, BareEvents, FiredWindows, GroupOrder, KeyList};
use crate::runtime::CallError;
use crate::state::hash::KeyHashBuilder;
use crate::state::{key_group, ttl, KeyedStateBackend, StateError, StateKey, StateKind};
use crate::time::{DueTimers, TimeDomain, TimerService};
use crate::Event;

use super::session::Sessions;
use super::{WindowAssigner, WindowFunction};

const ACCUMULATORS: &str = "window-acc";
const FIRE_TIMERS: &str = "window-fire";
const CLEANUP_TIMERS: &str = "window-cleanup";
/// Most windows fired in one call of the function.
const FIRE_CHUNK: usize = 1024;
const SESSIONS: &str = "window-sessions";

/// Why the window operator failed.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The aggregate function failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The state backend failed.
    #[error("window state: {0}")]
    State(#[from] StateError),
    /// The function cannot take what it was given.
    #[error("{0}")]
    Unsupported(String),
}

/// How a window operator behaves (from the pipeline spec).
#[derive(Debug, Clone)]
pub struct WindowConfig {
    /// How events are assigned to windows.
    pub assigner: WindowAssigner,
    /// How long after a window's end late events still update it (ms).
    pub allowed_lateness: i64,
    /// Where events too late for every window go, if anywhere.
    pub late_output: Option<String>,
    /// Number of key groups.
    pub max_parallelism: u16,
}

/// Windows and their accumulators for one subtask.
pub struct WindowOperator {
    config: WindowConfig,
    function: WindowFunction,
    backend: Box<dyn KeyedStateBackend>,
    fire: TimerService,
    cleanup: TimerService,
    watermark: i64,
    windows: Vec<Window>,
    /// Results of fired windows, in order.
    pub outputs: Vec<Event>,
    /// Late events bound for the late side output.
    pub side_outputs: Vec<(String, Event)>,
    /// Late events dropped (no late side output declared).
    pub dropped_late: u64,
    /// Reused for the storage key and the stored value of an accumulator.
    key_buf: Vec<u8>,
    read_buf: Vec<u8>,
    /// Groups packed batches by window.
    order: GroupOrder,
    /// Reused for the accumulators of a packed batch's windows.
    cells: ValueCells,
}

fn window_key_into(out: &mut Vec<u8>, group: u16, key: &[u8], window: Window) {
    let mut namespace = [0u8; 16];
    namespace[..8].copy_from_slice(&window.start.to_be_bytes());
    namespace[8..].copy_from_slice(&window.end.to_be_bytes());
    StateKey::new(group, ACCUMULATORS, StateKind::Value, key, &namespace).encode_into(out);
}

impl WindowOperator {
    /// An operator over `backend` calling `function`, restoring its timers.
    pub fn new(
        config: WindowConfig,
        function: WindowFunction,
        mut backend: Box<dyn KeyedStateBackend>,
    ) -> Result<Self, WindowError> {
        let fire = TimerService::load(backend.as_mut(), config.max_parallelism, FIRE_TIMERS)?;
        let cleanup = TimerService::load(backend.as_mut(), config.max_parallelism, CLEANUP_TIMERS)?;
        Ok(Self {
            config,
            function,
            backend,
            fire,
            cleanup,
            watermark: i64::MIN,
            windows: Vec::new(),
            outputs: Vec::new(),
            side_outputs: Vec::new(),
            dropped_late: 0,
            key_buf: Vec::new(),
            read_buf: Vec::new(),
            order: GroupOrder::default(),
            cells: packing::empty_cells(),
        })
    }

    /// The state backend, to flush it.
    pub fn backend_mut(&mut self) -> &mut (dyn KeyedStateBackend + 'static) {
        self.backend.as_mut()
    }

    /// Whether `window` no longer accepts events at the current watermark.
    fn is_late(&self, window: Window) -> bool {
        (window.end - 1).saturating_add(self.config.allowed_lateness) <= self.watermark
    }

    /// The windows an event at `timestamp` still updates, into
    /// `self.windows` (none: it is late for all of them).
    fn assign_on_time(&mut self, timestamp: i64) {
        self.windows.clear();
        self.config.assigner.assign(timestamp, &mut self.windows);
        let (watermark, lateness) = (self.watermark, self.config.allowed_lateness);
        self.windows.retain(|w| (w.end - 1).saturating_add(lateness) > watermark);
    }

    /// An event too late for every window it belongs to: to the late
    /// output if there is one, else counted as dropped.
    fn set_aside_late(&mut self, event: Event) {
        match &self.config.late_output {
            Some(name) => self.side_outputs.push((name.clone(), event)),
            None => self.dropped_late += 1,
        }
    }

    fn accumulator_key(&self, key: &[u8], window: Window) -> Vec<u8> {
        let mut out = Vec::new();
        self.accumulator_key_into(key, window, &mut out);
        out
    }

    fn accumulator_key_into(&self, key: &[u8], window: Window, out: &mut Vec<u8>) {
        window_key_into(out, key_group(key, self.config.max_parallelism), key, window);
    }

    fn read_accumulator(
        &mut self,
        key: &[u8],
        window: Window,
    ) -> Result<Option<Vec<u8>>, StateError> {
        let mut storage = std::mem::take(&mut self.key_buf);
        storage.clear();
        self.accumulator_key_into(key, window, &mut storage);
        let read = self.read_stored(&storage);
        self.key_buf = storage;
        read
    }

    /// Read `key`'s accumulator of `window` and append its storage key to
    /// `storage` (so storing or deleting it later needs no second encoding).
    fn read_accumulator_keeping(
        &mut self,
        key: &[u8],
        window: Window,
        storage: &mut KeyList,
    ) -> Result<Option<Vec<u8>>, StateError> {
        self.push_accumulator_key(key, window, storage);
        self.read_stored(storage.get(storage.len() - 1))
    }

    /// Append the storage key of `key`'s accumulator of `window` to `storage`.
    fn push_accumulator_key(&mut self, key: &[u8], window: Window, storage: &mut KeyList) {
        let mut encoded = std::mem::take(&mut self.key_buf);
        encoded.clear();
        self.accumulator_key_into(key, window, &mut encoded);
        storage.push(&encoded);
        self.key_buf = encoded;
    }

    /// The accumulator stored under `storage`, if any.
    fn read_stored(&mut self, storage: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.peek_stored(storage)?.map(<[u8]>::to_vec))
    }

    /// [`Self::read_stored`], borrowed from a reused buffer.
    fn peek_stored(&mut self, storage: &[u8]) -> Result<Option<&[u8]>, StateError> {
        self.read_buf.clear();
        if !self.backend.get_into(storage, &mut self.read_buf)? {
            return Ok(None);
        }
        ttl::decode(&self.read_buf, i64::MIN)
    }

    fn sessions_key(&self, key: &[u8]) -> Vec<u8> {
        StateKey::new(
            key_group(key, self.config.max_parallelism),
            SESSIONS,
            StateKind::Value,
            key,
            b"",
        )
        .encode()
    }

    /// The key's open session windows.
    fn read_sessions(&mut self, key: &[u8]) -> Result<Vec<Window>, StateError> {
        let Some(stored) = self.backend.get(&self.sessions_key(key))? else {
            return Ok(Vec::new());
        };
        let bytes = ttl::decode(&stored, i64::MIN)?.unwrap_or_default();
        let corrupt = || StateError::Corrupt("malformed session list".into());
        bytes
            .chunks(16)
            .map(|pair| {
                let (start, end) = pair.split_first_chunk::<8>().ok_or_else(corrupt)?;
                let end: [u8; 8] = end.try_into().map_err(|_| corrupt())?;
                Ok(Window { start: i64::from_be_bytes(*start), end: i64::from_be_bytes(end) })
            })
            .collect()
    }

    fn write_sessions(&mut self, key: &[u8], sessions: &[Window]) -> Result<(), StateError> {
        let storage = self.sessions_key(key);
        if sessions.is_empty() {
            return self.backend.delete(&storage);
        }
        let bytes: Vec<u8> = sessions
            .iter()
            .flat_map(|w| w.start.to_be_bytes().into_iter().chain(w.end.to_be_bytes()))
            .collect();
        self.backend.put(&storage, &ttl::encode(&bytes, None))
    }

    /// Add a batch of events to their windows (`keys[i]` is event `i`'s).
    pub fn process(&mut self, keys: &KeyList, events: Vec<Event>) -> Result<(), WindowError> {
        if self.config.assigner.is_merging() {
            return self.process_sessions(keys, events);
        }
        // (key, window start) → its entry: windows of one size are told
        // apart by their start. Keys are borrowed from the batch.
        let mut index: HashMap<(&[u8], i64), usize, KeyHashBuilder> =
            HashMap::with_capacity_and_hasher(keys.len(), KeyHashBuilder::default());
        let mut windows: Vec<(&[u8], Window)> = Vec::new();
        let mut adds: Vec<Accumulate> = Vec::new();
        for (key, event) in keys.iter().zip(events) {
            self.assign_on_time(event.timestamp);
            let mut remaining = self.windows.len();
            if remaining == 0 {
                self.set_aside_late(event);
                continue;
            }
            // Clone the event for all but its last window (tumbling: none).
            let mut event = Some(event);
            for &window in &self.windows {
                let slot = *index.entry((key, window.start)).or_insert_with(|| {
                    windows.push((key, window));
                    adds.push(Accumulate { accumulator: None, events: Vec::new() });
                    adds.len() - 1
                });
                remaining -= 1;
                let copy = if remaining == 0 { event.take() } else { event.clone() };
                adds[slot].events.extend(copy);
            }
        }
        if adds.is_empty() {
            return Ok(());
        }
        let mut storage = KeyList::default();
        for (&(key, window), add) in windows.iter().zip(&mut adds) {
            add.accumulator = self.read_accumulator_keeping(key, window, &mut storage)?;
        }
        self.store_and_schedule(&windows, &storage, adds)
    }

    /// [`Self::process`] for packed events (see [`BareEvents`]): grouped
    /// by window in place and passed to a Wasm aggregate function packed.
    /// Sessions, and functions that take events, get them as events.
    pub fn process_bare(&mut self, keys: &KeyList, events: &BareEvents) -> Result<(), WindowError> {
        if self.config.assigner.is_merging() || !self.function.takes_packed() {
            return self.process(keys, events.to_events());
        }
        // (key, window start) → its window's index, as in `process`.
        let mut index: HashMap<(&[u8], i64), usize, KeyHashBuilder> =
            HashMap::with_capacity_and_hasher(keys.len(), KeyHashBuilder::default());
        let mut windows: Vec<(&[u8], Window)> = Vec::new();
        let mut members: Vec<(u32, u32)> = Vec::with_capacity(events.len());
        for (event, key) in keys.iter().enumerate() {
            self.assign_on_time(events.timestamp(event));
            if self.windows.is_empty() {
                self.set_aside_late(events.event(event));
                continue;
            }
            for &window in &self.windows {
                let slot = *index.entry((key, window.start)).or_insert_with(|| {
                    windows.push((key, window));
                    windows.len() - 1
                });
                members.push((slot as u32, event as u32));
            }
        }
        if windows.is_empty() {
            return Ok(());
        }
        // Each window's accumulator read straight into the cells that cross
        // the boundary (no owned copy per window).
        let (mut storage, mut accumulators) =
            (KeyList::default(), std::mem::replace(&mut self.cells, packing::empty_cells()));
        packing::clear_cells(&mut accumulators);
        for (index, &(key, window)) in windows.iter().enumerate() {
            self.push_accumulator_key(key, window, &mut storage);
            packing::push_cell(&mut accumulators, self.peek_stored(storage.get(index))?);
        }
        let grouping = self.order.sort(windows.len(), &members);
        let added = self.function.add_grouped(&accumulators, events, grouping);
        let stored = added.and_then(|added| {
            self.store(
                &windows,
                &storage,
                accumulators.present.iter().map(|present| !present),
                added,
            )
        });
        self.cells = accumulators;
        stored
    }

    /// Fold `batch[i]` into window `windows[i]` (stored under
    /// `storage[i]`), store the accumulators and schedule (or, for windows
    /// already past the watermark, do) the firing.
    fn store_and_schedule(
        &mut self,
        windows: &[(&[u8], Window)],
        storage: &KeyList,
        batch: Vec<Accumulate>,
    ) -> Result<(), WindowError> {
        let accumulators = self.function.add(&batch)?;
        let new = batch.iter().map(|entry| entry.accumulator.is_none());
        self.store(windows, storage, new, accumulators)
    }

    /// Store `accumulators[i]` of window `windows[i]` under `storage[i]`
    /// (`new` says, per window, that nothing is stored yet) and schedule
    /// (or, for windows already past the watermark, do) the firing.
    fn store(
        &mut self,
        windows: &[(&[u8], Window)],
        storage: &KeyList,
        new: impl Iterator<Item = bool>,
        accumulators: Vec<Vec<u8>>,
    ) -> Result<(), WindowError> {
        let merging = self.config.assigner.is_merging();
        let mut refire = Vec::new();
        let mut stored = std::mem::take(&mut self.read_buf);
        for (((&(key, window), accumulator), new), storage) in
            windows.iter().zip(accumulators).zip(new).zip(storage.iter())
        {
            stored.clear();
            ttl::encode_into(&mut stored, &accumulator, None);
            if new {
                // A window's first accumulator: nothing is stored under it.
                self.backend.insert_new(storage, &stored)?;
            } else {
                self.backend.put(storage, &stored)?;
            }
            if window.end - 1 <= self.watermark {
                refire.push((key.to_vec(), window));
            } else if new || merging {
                // A window's timer is registered with its first accumulator
                // and lives as long as it does until the window fires (a
                // merged session is a new window).
                self.fire.register(
                    self.backend.as_mut(),
                    key,
                    TimeDomain::EventTime,
                    window.end - 1,
                )?;
            }
        }
        self.read_buf = stored;
        self.fire_windows(refire)
    }

    /// Sessions: merge each event's window with the key's sessions that
    /// it overlaps or touches (merging their accumulators), then fold in
    /// the events.
    fn process_sessions(&mut self, keys: &KeyList, events: Vec<Event>) -> Result<(), WindowError> {
        let mut by_key: Vec<(Vec<u8>, Vec<Event>)> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        for (key, event) in keys.iter().zip(events) {
            let slot = *index.entry(key.to_vec()).or_insert_with(|| {
                by_key.push((key.to_vec(), Vec::new()));
                by_key.len() - 1
            });
            by_key[slot].1.push(event);
        }
        let mut windows = Vec::new();
        let mut adds = Vec::new();
        for (key, events) in by_key {
            let mut working = Sessions::<Vec<Event>>::from_stored(self.read_sessions(&key)?);
            for event in events {
                self.windows.clear();
                self.config.assigner.assign(event.timestamp, &mut self.windows);
                let merged = working.merged(self.windows[0]);
                if self.is_late(merged) {
                    self.set_aside_late(event);
                    continue;
                }
                working.absorb(merged).push(event);
            }
            for session in &mut working.list {
                if session.added.is_empty() && session.sources.len() <= 1 {
                    continue; // unchanged
                }
                let mut accumulator: Option<Vec<u8>> = None;
                for source in std::mem::take(&mut session.sources) {
                    let Some(old) = self.read_accumulator(&key, source)? else { continue };
                    let storage = self.accumulator_key(&key, source);
                    self.backend.delete(&storage)?;
                    self.fire.delete(
                        self.backend.as_mut(),
                        &key,
                        TimeDomain::EventTime,
                        source.end - 1,
                    )?;
                    let until = (source.end - 1).saturating_add(self.config.allowed_lateness);
                    self.cleanup.delete(
                        self.backend.as_mut(),
                        &key,
                        TimeDomain::EventTime,
                        until,
                    )?;
                    accumulator = Some(match accumulator {
                        Some(acc) => self.function.merge(&acc, &old)?,
                        None => old,
                    });
                }
                windows.push((key.clone(), session.window));
                adds.push(Accumulate { accumulator, events: std::mem::take(&mut session.added) });
            }
            self.write_sessions(&key, &working.windows())?;
        }
        if adds.is_empty() {
            return Ok(());
        }
        let windows: Vec<(&[u8], Window)> =
            windows.iter().map(|(key, window)| (key.as_slice(), *window)).collect();
        let mut storage = KeyList::default();
        for &(key, window) in &windows {
            storage.push(&self.accumulator_key(key, window));
        }
        self.store_and_schedule(&windows, &storage, adds)
    }

    /// The window of `key` whose timer (at its last millisecond plus
    /// `shift`) is `timestamp`.
    fn window_for_timer(
        &mut self,
        key: &[u8],
        timestamp: i64,
        shift: i64,
    ) -> Result<Option<Window>, StateError> {
        let end = timestamp - shift + 1;
        match self.config.assigner.size() {
            Some(size) => Ok(Some(Window { start: end - size, end })),
            None => Ok(self.read_sessions(key)?.into_iter().find(|w| w.end == end)),
        }
    }

    /// Forget `key`'s `window` entirely.
    fn retire(&mut self, key: &[u8], window: Window) -> Result<(), StateError> {
        let mut storage = std::mem::take(&mut self.key_buf);
        storage.clear();
        self.accumulator_key_into(key, window, &mut storage);
        let retired = self.retire_stored(key, window, &storage);
        self.key_buf = storage;
        retired
    }

    /// [`Self::retire`], the accumulator's storage key given.
    fn retire_stored(
        &mut self,
        key: &[u8],
        window: Window,
        storage: &[u8],
    ) -> Result<(), StateError> {
        self.backend.delete(storage)?;
        if self.config.assigner.is_merging() {
            let mut sessions = self.read_sessions(key)?;
            sessions.retain(|w| (w.start, w.end) != (window.start, window.end));
            self.write_sessions(key, &sessions)?;
        }
        Ok(())
    }

    /// Event time has reached `watermark`: fire and clean up due windows.
    pub fn on_watermark(&mut self, watermark: i64) -> Result<(), WindowError> {
        self.watermark = watermark;
        loop {
            let due =
                self.fire.take_due(self.backend.as_mut(), TimeDomain::EventTime, watermark)?;
            if due.is_empty() {
                break;
            }
            let mut windows = Vec::new();
            for DueTimers { key, timestamps } in due {
                // The key moves into the last of its windows.
                let mut key = Some(key);
                for (i, &timestamp) in timestamps.iter().enumerate() {
                    let Some(owned) = key.as_deref() else { break };
                    if let Some(window) = self.window_for_timer(owned, timestamp, 0)? {
                        let key = if i + 1 == timestamps.len() {
                            key.take().unwrap_or_default()
                        } else {
                            owned.to_vec()
                        };
                        windows.push((key, window));
                    }
                }
            }
            // In chunks, so no single call grows with the number of keys
            // (each call has a deadline).
            let mut windows = windows.into_iter().peekable();
            while windows.peek().is_some() {
                self.fire_windows(windows.by_ref().take(FIRE_CHUNK).collect())?;
            }
        }
        let lateness = self.config.allowed_lateness;
        for keyed in
            self.cleanup.take_due(self.backend.as_mut(), TimeDomain::EventTime, watermark)?
        {
            for timestamp in keyed.timestamps {
                if let Some(window) = self.window_for_timer(&keyed.key, timestamp, lateness)? {
                    self.retire(&keyed.key, window)?;
                }
            }
        }
        Ok(())
    }

    /// Emit the results of `windows`, then drop or keep their state.
    fn fire_windows(&mut self, windows: Vec<(Vec<u8>, Window)>) -> Result<(), WindowError> {
        let mut requests = FiredWindows::default();
        // Storage key `i` is window `i`'s; the windows with an accumulator.
        let (mut storage, mut fired) = (KeyList::default(), Vec::with_capacity(windows.len()));
        for (index, (key, window)) in windows.iter().enumerate() {
            self.push_accumulator_key(key, *window, &mut storage);
            if let Some(accumulator) = self.peek_stored(storage.get(index))? {
                requests.push(key, *window, accumulator);
                fired.push(index);
            }
        }
        if requests.is_empty() {
            return Ok(());
        }
        self.outputs.extend(self.function.results(&requests)?);
        for index in fired {
            let (key, window) = &windows[index];
            if self.config.allowed_lateness == 0 {
                self.retire_stored(key, *window, storage.get(index))?;
            } else {
                let until = (window.end - 1).saturating_add(self.config.allowed_lateness);
                self.cleanup.register(self.backend.as_mut(), key, TimeDomain::EventTime, until)?;
            }
        }
        Ok(())
    }
}
