//! The host side of the `state` and `context` WIT interfaces.
//!
//! [`HostCtx`] is the data of every function's `Store`. Before calling
//! `process`, the caller records the batch's keys with
//! [`HostCtx::begin_batch`]; the guest then picks one with `select-key` and
//! every state call is scoped to that key. State calls go through the
//! [`KeyedStateBackend`] trait; emitted events are collected in
//! [`HostCtx::outputs`] for the pipeline to forward.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host_api::{self, HostCtx}};
//! # use weir_host::state::InMemoryBackend;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host_api::add_to_linker(&mut linker).unwrap();
//! let ctx = HostCtx::new("revenue", Some(Box::new(InMemoryBackend::new())), 128);
//! let store = wasmtime::Store::new(&engine, ctx);
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::weir::function::types::{KeyedTimers, TimeDomain};
use super::bindings::weir::function::{context, state, timers, types};
use super::limits::FunctionLimits;
use super::packing::{clear_cells, push_cell, KeyList};
use crate::state::ttl::{self, Ttl, TtlUpdate};
use crate::state::{KeyedStateBackend, ScanEntry, StateKey, StateKind, MAX_STATE_NAME_LEN};
use crate::time::TimerService;
use crate::Event;

/// Largest state value or map key a guest may store, in bytes.
pub const MAX_VALUE_LEN: usize = 16 << 20;
/// Largest key a key function may return, in bytes.
pub const MAX_KEY_LEN: usize = 1 << 20;
/// Most bytes (values, keys and headers) one call may emit.
pub const MAX_EMITTED_BYTES_PER_CALL: usize = 256 << 20;
/// Most events one call may emit.
pub const MAX_EMITTED_EVENTS_PER_CALL: usize = 1 << 20;
/// Most value states read ahead per batch.
pub const MAX_PREFETCHED_STATES: usize = 16;
/// Most state handles a function may hold open at once.
pub const MAX_OPEN_HANDLES: usize = 10_000;
/// Most map entries one `entries` call returns.
pub const MAX_ENTRIES_PAGE: u32 = 4096;

/// What a state handle refers to: a state name and its time to live.
#[derive(Debug)]
pub struct Descriptor {
    name: String,
    ttl: Option<Ttl>,
}

/// A value-state handle held by a guest.
pub struct ValueStateHandle(Arc<Descriptor>);

/// A map-state handle held by a guest.
pub struct MapStateHandle(Arc<Descriptor>);

/// A list-state handle held by a guest.
pub struct ListStateHandle(Arc<Descriptor>);

/// Everything a function instance's `Store` holds.
pub struct HostCtx {
    table: ResourceTable,
    wasi: WasiCtx,
    function: String,
    backend: Option<Box<dyn KeyedStateBackend>>,
    max_parallelism: u16,
    /// Times to live from the pipeline spec, overriding the function's.
    ttl_overrides: HashMap<String, Ttl>,
    timers: TimerService,
    /// The current `process` batch's keys, back to back, …
    batch_key_bytes: Vec<u8>,
    /// … and where each key ends in it, with its key group.
    batch_keys: Vec<(usize, u16)>,
    selected: Option<usize>,
    key_buf: Vec<u8>,
    /// Buffers reused by every state read and write.
    read_buf: Vec<u8>,
    write_buf: Vec<u8>,
    /// Events the function emitted to the main output, in order.
    pub outputs: Vec<Event>,
    /// Events the function emitted to named side outputs, in order.
    pub side_outputs: Vec<(String, Event)>,
    watermark: i64,
    clock: fn() -> i64,
    processing_time: i64,
    /// Limits of the instance over this context (also its store's
    /// `ResourceLimiter`).
    pub(crate) limits: FunctionLimits,
    /// What the current call emitted so far: events, bytes.
    emitted: (usize, usize),
    /// The value states the function has opened, by name: what
    /// [`HostCtx::prefetch_values`] reads ahead and `write-values` writes.
    value_states: Vec<Arc<Descriptor>>,
    /// The calling thread's CPU time when the current call started.
    pub(crate) call_started: std::time::Duration,
    /// The last error the function logged in the current call (a panic
    /// message, reported with the trap that follows).
    pub(crate) logged_error: Option<String>,
    /// Since the last [`HostCtx::mark`]: output lengths then, and each
    /// timer change (registered?, key, domain, timestamp).
    marked_outputs: (usize, usize),
    timer_changes: Vec<(bool, Vec<u8>, TimeDomain, i64)>,
}

impl HostCtx {
    /// Data for an instance of `function`; `backend` holds its keyed state
    /// (key functions have none).
    pub fn new(
        function: &str,
        backend: Option<Box<dyn KeyedStateBackend>>,
        max_parallelism: u16,
    ) -> Self {
        Self {
            table: handle_table(),
            wasi: super::wasi::sandboxed(),
            function: function.to_string(),
            backend,
            max_parallelism,
            ttl_overrides: HashMap::new(),
            timers: TimerService::new(max_parallelism, crate::time::FUNCTION_TIMERS),
            batch_key_bytes: Vec::new(),
            batch_keys: Vec::new(),
            selected: None,
            key_buf: Vec::new(),
            read_buf: Vec::new(),
            write_buf: Vec::new(),
            outputs: Vec::new(),
            side_outputs: Vec::new(),
            watermark: i64::MIN,
            clock: ttl::now_millis,
            processing_time: 0,
            limits: FunctionLimits::default(),
            emitted: (0, 0),
            value_states: Vec::new(),
            call_started: std::time::Duration::ZERO,
            logged_error: None,
            marked_outputs: (0, 0),
            timer_changes: Vec::new(),
        }
    }

    /// Remember where state, timers and outputs stand, so a failed call's
    /// effects can be undone with [`HostCtx::roll_back`] (state needs a
    /// journaling backend).
    pub fn mark(&mut self) {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.mark();
        }
        self.marked_outputs = (self.outputs.len(), self.side_outputs.len());
        self.timer_changes.clear();
    }

    /// Stop remembering for [`HostCtx::roll_back`].
    pub fn unmark(&mut self) {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.unmark();
        }
        self.timer_changes.clear();
    }

    /// Undo everything since [`HostCtx::mark`]: state writes, timer
    /// changes, emitted events.
    pub fn roll_back(&mut self) -> Result<(), crate::state::StateError> {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.roll_back()?;
        }
        self.outputs.truncate(self.marked_outputs.0);
        self.side_outputs.truncate(self.marked_outputs.1);
        while let Some((registered, key, domain, timestamp)) = self.timer_changes.pop() {
            self.timers.undo(registered, key, domain, timestamp);
        }
        Ok(())
    }

    /// Run the instance over this context under `limits`.
    pub fn with_limits(mut self, limits: FunctionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Grant the function read-only access to `dir`, seen as `/resources`.
    pub fn with_resources(mut self, dir: Option<&std::path::Path>) -> Result<Self, String> {
        if let Some(dir) = dir {
            self.wasi = super::wasi::with_resources(dir)?;
        }
        Ok(self)
    }

    /// Drop every handle the guest held: a new instance starts without any.
    pub(crate) fn forget_guest_handles(&mut self) {
        self.table = handle_table();
    }

    /// What a call was doing, by the key it had selected:
    /// `while processing key "c1"` (long keys cut, bytes escaped).
    pub fn describe_selected_key(&self) -> String {
        let keys = self.batch_keys.len();
        let index = match self.selected {
            Some(index) if index < keys => Some(index),
            // The SDK selects keys lazily: a batch of one has only one.
            _ if keys == 1 => Some(0),
            _ => None,
        };
        match index {
            Some(index) => {
                let (key, _) = batch_key(&self.batch_keys, &self.batch_key_bytes, index);
                let shown: String = key
                    .iter()
                    .take(64)
                    .flat_map(|b| std::ascii::escape_default(*b))
                    .map(char::from)
                    .collect();
                let more = if key.len() > 64 {
                    format!("… ({} bytes)", key.len())
                } else {
                    String::new()
                };
                format!("while processing key \"{shown}\"{more}")
            }
            None => format!("while processing a batch of {keys} keys"),
        }
    }

    /// Read ahead, for every key of the current batch, the value states the
    /// function has opened (except those whose reads renew a time to live,
    /// which must see each read) into `cells`. A state whose read fails is
    /// left out, so the function's own read meets the error.
    pub fn prefetch_values(&mut self, cells: &mut types::ValueCells) {
        cells.states.clear();
        clear_cells(cells);
        let keys = self.batch_keys.len();
        for index in 0..self.value_states.len() {
            let descriptor = Arc::clone(&self.value_states[index]);
            if descriptor.ttl.is_some_and(|t| t.update == TtlUpdate::OnReadAndWrite) {
                continue;
            }
            let (present, values) = (cells.present.len(), cells.values.len());
            // Keys encoded first, then read one after the other: the
            // backend's lookups follow each other closely.
            let mut storage = KeyList::with_capacity(keys);
            for key in 0..keys {
                self.storage_key(&descriptor, StateKind::Value, key);
                storage.push(&self.key_buf);
            }
            let (now, stored) = (self.processing_time, &mut self.read_buf);
            let Some(backend) = self.backend.as_deref_mut() else { break };
            let read = storage.iter().try_for_each(|key| {
                let start = live_value(backend, key, now, stored)?;
                push_cell(cells, start.map(|start| &stored[start..]));
                Ok::<_, crate::state::StateError>(())
            });
            match read {
                Ok(()) => cells.states.push(descriptor.name.clone()),
                Err(_) => {
                    cells.present.truncate(present);
                    cells.ends.truncate(present);
                    cells.values.truncate(values);
                }
            }
        }
        self.selected = None;
    }

    /// Apply the guest's buffered value-state writes (`write-values`). The
    /// writes select their own keys; the function's selection (the key it
    /// reports before returning an error) stays.
    fn write_value_cells(
        &mut self,
        cells: &[(u32, u32)],
        writes: &types::ValueCells,
    ) -> wasmtime::Result<Result<(), state::StateError>> {
        let selected = self.selected;
        let result = self.apply_value_writes(cells, writes);
        self.selected = selected;
        result
    }

    fn apply_value_writes(
        &mut self,
        cells: &[(u32, u32)],
        writes: &types::ValueCells,
    ) -> wasmtime::Result<Result<(), state::StateError>> {
        let malformed = |function: &str, what: &str| {
            wasmtime::Error::msg(format!("function {function} sent malformed value writes: {what}"))
        };
        if writes.present.len() != cells.len() || writes.ends.len() != cells.len() {
            return Err(malformed(&self.function, "the lists disagree in length"));
        }
        let descriptors = writes
            .states
            .iter()
            .map(|name| {
                let open = self.value_states.iter().find(|d| d.name == *name).cloned();
                open.ok_or_else(|| {
                    malformed(
                        &self.function,
                        &format!(
                            "state {:?} is not open",
                            name.chars().take(64).collect::<String>()
                        ),
                    )
                })
            })
            .collect::<wasmtime::Result<Vec<_>>>()?;
        // Encoded first, then written in one batch: the backend's lookups
        // follow each other closely. A write in error ends the batch, the
        // writes before it made (as without read-ahead).
        let (mut storage, mut stored, mut failed) =
            (KeyList::with_capacity(cells.len()), KeyList::with_capacity(cells.len()), Ok(()));
        let values = super::packing::slices(&writes.values, &writes.ends, "value writes");
        for ((&(state, key), value), &present) in cells.iter().zip(values).zip(&writes.present) {
            let value = value.map_err(|e| malformed(&self.function, &e))?;
            let descriptor = descriptors
                .get(state as usize)
                .ok_or_else(|| malformed(&self.function, "a state index is past the states"))?;
            if key as usize >= self.batch_keys.len() {
                failed = Err(state::StateError::UnknownKey(key));
                break;
            }
            if let Err(error) = self.encode_write(
                descriptor,
                key as usize,
                present.then_some(value),
                &mut storage,
                &mut stored,
            ) {
                failed = Err(error);
                break;
            }
        }
        let present = writes.present.iter().take(storage.len());
        let mut batch = storage
            .iter()
            .zip(stored.iter())
            .zip(present)
            .map(|((key, value), &present)| (key, present.then_some(value)));
        let written = match self.backend.as_deref_mut() {
            Some(backend) => backend.write_batch(&mut batch).map_err(backend_error),
            None => Err(state::StateError::Backend("this function has no keyed state".into())),
        };
        Ok(written.and(failed))
    }

    /// Append the storage key of value state `descriptor` of batch key
    /// `index` to `storage`, and what to store (`value` with its expiry;
    /// nothing for a delete) to `stored`.
    fn encode_write(
        &mut self,
        descriptor: &Descriptor,
        index: usize,
        value: Option<&[u8]>,
        storage: &mut KeyList,
        stored: &mut KeyList,
    ) -> Result<(), state::StateError> {
        self.storage_key(descriptor, StateKind::Value, index);
        self.encode_stored(descriptor, value)?;
        storage.push(&self.key_buf);
        stored.push(&self.write_buf);
        Ok(())
    }

    /// What to store for `value` of `descriptor` (with its expiry), into
    /// `self.write_buf` (left empty for a delete).
    fn encode_stored(
        &mut self,
        descriptor: &Descriptor,
        value: Option<&[u8]>,
    ) -> Result<(), state::StateError> {
        self.write_buf.clear();
        if let Some(value) = value {
            check_len(value.len())?;
            ttl::encode_into(
                &mut self.write_buf,
                value,
                descriptor.ttl.map(|t| t.expiry(self.processing_time)),
            );
        }
        Ok(())
    }

    /// A call is about to start: its emit budget starts afresh.
    pub(crate) fn start_call(&mut self) {
        self.emitted = (0, 0);
        self.logged_error = None;
    }

    /// Count `events` emitted events of `bytes` bytes against the per-call
    /// bounds; past them, the call traps.
    fn count_emitted(&mut self, events: usize, bytes: usize) -> wasmtime::Result<()> {
        self.emitted.0 += events;
        self.emitted.1 += bytes;
        if self.emitted.0 > MAX_EMITTED_EVENTS_PER_CALL
            || self.emitted.1 > MAX_EMITTED_BYTES_PER_CALL
        {
            return Err(wasmtime::Error::msg(format!(
                "function {} emitted more than {MAX_EMITTED_EVENTS_PER_CALL} events or {} in one call",
                self.function,
                crate::units::format_bytes(MAX_EMITTED_BYTES_PER_CALL as u64)
            )));
        }
        Ok(())
    }

    /// Use these times to live instead of the function's, per state name.
    pub fn with_ttl_overrides(mut self, overrides: HashMap<String, Ttl>) -> Self {
        self.ttl_overrides = overrides;
        self
    }

    /// Read processing time from `clock` (ms since the epoch) instead of
    /// the system clock.
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    /// Record the keys of the batch about to be passed to `process`, and fix
    /// processing time for the call.
    pub fn begin_batch<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.batch_keys.clear();
        self.batch_key_bytes.clear();
        for key in keys {
            self.batch_key_bytes.extend_from_slice(key);
            self.batch_keys.push((
                self.batch_key_bytes.len(),
                crate::state::key_group(key, self.max_parallelism),
            ));
        }
        self.selected = None;
        self.start_call();
        self.processing_time = (self.clock)();
    }

    /// Forget the batch once the call returned.
    pub fn end_batch(&mut self) {
        self.batch_keys.clear();
        self.selected = None;
    }

    /// Set the watermark the function sees.
    pub fn set_watermark(&mut self, watermark: i64) {
        self.watermark = watermark;
    }

    /// The watermark the function sees.
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// Load the timers stored in this context's state (at subtask start).
    pub fn load_timers(&mut self) -> Result<(), crate::state::StateError> {
        if let Some(backend) = self.backend.as_deref_mut() {
            self.timers =
                TimerService::load(backend, self.max_parallelism, crate::time::FUNCTION_TIMERS)?;
        }
        Ok(())
    }

    /// Remove and return the timers of `domain` due at `up_to`, by key.
    pub fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        up_to: i64,
    ) -> Result<Vec<KeyedTimers>, crate::state::StateError> {
        match self.backend.as_deref_mut() {
            Some(backend) => self.timers.take_due(backend, domain, up_to),
            None => Ok(Vec::new()),
        }
    }

    /// The earliest processing-time timer, if any.
    pub fn next_processing_timer(&self) -> Option<i64> {
        self.timers.next(TimeDomain::ProcessingTime)
    }

    /// The current processing time by this context's clock.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// Register or delete a timer for the selected key.
    fn change_timer(
        &mut self,
        domain: TimeDomain,
        timestamp: i64,
        register: bool,
    ) -> Result<(), state::StateError> {
        let index = self.selected.ok_or(state::StateError::NoCurrentKey)?;
        let (key, _) = batch_key(&self.batch_keys, &self.batch_key_bytes, index);
        let backend = self
            .backend
            .as_deref_mut()
            .ok_or_else(|| state::StateError::Backend("this function has no keyed state".into()))?;
        let result = if register {
            self.timers.register(backend, key, domain, timestamp)
        } else {
            self.timers.delete(backend, key, domain, timestamp)
        };
        if result.as_ref().is_ok_and(|changed| *changed) {
            self.timer_changes.push((register, key.to_vec(), domain, timestamp));
        }
        result.map(drop).map_err(backend_error)
    }

    /// The state backend, to flush it.
    pub fn backend_mut(&mut self) -> Option<&mut (dyn KeyedStateBackend + 'static)> {
        self.backend.as_deref_mut()
    }

    /// A descriptor for state `name`, with the spec's TTL if it sets one.
    fn open_descriptor(
        &self,
        name: String,
        ttl: Option<state::Ttl>,
    ) -> Result<Arc<Descriptor>, state::StateError> {
        if name.is_empty() || name.len() > MAX_STATE_NAME_LEN {
            return Err(state::StateError::InvalidName(name.chars().take(64).collect()));
        }
        let declared = match ttl {
            Some(state::Ttl { millis: 0, .. }) => return Err(state::StateError::InvalidTtl),
            Some(state::Ttl { millis, update }) => Some(Ttl {
                millis,
                update: match update {
                    state::TtlUpdate::OnCreateAndWrite => TtlUpdate::OnCreateAndWrite,
                    state::TtlUpdate::OnReadAndWrite => TtlUpdate::OnReadAndWrite,
                },
            }),
            None => None,
        };
        let ttl = self.ttl_overrides.get(&name).copied().or(declared);
        Ok(Arc::new(Descriptor { name, ttl }))
    }

    /// Run `f` with the backend and the storage key of `descriptor`'s state
    /// of `kind` for the selected key, followed by `suffix`.
    fn with_key<R>(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        suffix: &[u8],
        f: impl FnOnce(&mut dyn KeyedStateBackend, &[u8]) -> Result<R, crate::state::StateError>,
    ) -> Result<R, state::StateError> {
        let index = self.selected.ok_or(state::StateError::NoCurrentKey)?;
        self.storage_key(descriptor, kind, index);
        self.key_buf.extend_from_slice(suffix);
        let backend = self
            .backend
            .as_deref_mut()
            .ok_or_else(|| state::StateError::Backend("this function has no keyed state".into()))?;
        f(backend, &self.key_buf).map_err(backend_error)
    }

    /// The storage key of `descriptor`'s state of `kind` for batch key
    /// `index`, into `self.key_buf`.
    fn storage_key(&mut self, descriptor: &Descriptor, kind: StateKind, index: usize) {
        let (key, group) = batch_key(&self.batch_keys, &self.batch_key_bytes, index);
        self.key_buf.clear();
        StateKey::new(group, &descriptor.name, kind, key, b"").encode_into(&mut self.key_buf);
    }

    /// The live value under `suffix`, renewing it if its TTL says reads do.
    fn read(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        suffix: &[u8],
    ) -> Result<Option<Vec<u8>>, state::StateError> {
        self.read_with(descriptor, kind, suffix, |value| value.map(<[u8]>::to_vec))
    }

    /// Run `f` on the live value under `suffix` (renewing it if its TTL
    /// says reads do), read into a buffer reused from read to read.
    fn read_with<R>(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        suffix: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, state::StateError> {
        let now = self.processing_time;
        let renew = descriptor.ttl.filter(|t| t.update == TtlUpdate::OnReadAndWrite);
        let mut stored = std::mem::take(&mut self.read_buf);
        stored.clear();
        let found = self.with_key(descriptor, kind, suffix, |backend, key| {
            let start = live_value(backend, key, now, &mut stored)?;
            if let (Some(start), Some(ttl)) = (start, renew) {
                backend.put(key, &ttl::encode(&stored[start..], Some(ttl.expiry(now))))?;
            }
            Ok(start)
        });
        let result = found.map(|start| f(start.map(|start| &stored[start..])));
        self.read_buf = stored;
        result
    }

    /// Store `value` under `suffix` (or delete it), stamped with its expiry.
    fn write(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        suffix: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), state::StateError> {
        check_len(suffix.len())?;
        self.encode_stored(descriptor, value)?;
        let stored = std::mem::take(&mut self.write_buf);
        let result = self.with_key(descriptor, kind, suffix, |backend, key| match value {
            Some(_) => backend.put(key, &stored),
            None => backend.delete(key),
        });
        self.write_buf = stored;
        result
    }

    /// Up to `limit` live map entries after `start_after`.
    fn live_entries(
        &mut self,
        descriptor: &Descriptor,
        start_after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, state::StateError> {
        let now = self.processing_time;
        self.with_key(descriptor, StateKind::Map, b"", |backend, prefix| {
            let mut live = Vec::new();
            let mut cursor = start_after;
            loop {
                let page = backend.scan(prefix, cursor.as_deref(), limit)?;
                let exhausted = page.len() < limit;
                for (user_key, stored) in page {
                    if let Some(value) = ttl::decode(&stored, now)? {
                        let value = value.to_vec();
                        cursor = Some(user_key.clone());
                        live.push((user_key, value));
                    } else {
                        cursor = Some(user_key);
                    }
                    if live.len() == limit {
                        return Ok(live);
                    }
                }
                if exhausted {
                    return Ok(live);
                }
            }
        })
    }

    fn descriptor<T: 'static>(
        &self,
        handle: &Resource<T>,
        get: fn(&T) -> &Arc<Descriptor>,
    ) -> wasmtime::Result<Arc<Descriptor>> {
        Ok(Arc::clone(get(self.table.get(handle)?)))
    }
}

/// A table for a guest's handles, holding at most [`MAX_OPEN_HANDLES`].
fn handle_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_OPEN_HANDLES);
    table
}

/// Key `index` of a batch (keys back to back in `bytes`, `ends` saying
/// where each ends) and its key group.
fn batch_key<'a>(ends: &[(usize, u16)], bytes: &'a [u8], index: usize) -> (&'a [u8], u16) {
    let (end, group) = ends[index];
    let start = index.checked_sub(1).map_or(0, |previous| ends[previous].0);
    (&bytes[start..end], group)
}

/// Read the value stored under `key` into `stored` (cleared first) and
/// return where the live value starts in it; `None` if there is none or
/// it expired by `now` (then it is deleted).
fn live_value(
    backend: &mut dyn KeyedStateBackend,
    key: &[u8],
    now: i64,
    stored: &mut Vec<u8>,
) -> Result<Option<usize>, crate::state::StateError> {
    stored.clear();
    if !backend.get_into(key, stored)? {
        return Ok(None);
    }
    match ttl::decode(stored, now)? {
        None => {
            backend.delete(key)?;
            Ok(None)
        }
        Some(value) => Ok(Some(stored.len() - value.len())),
    }
}

/// Bytes an event occupies: value, key and headers.
fn event_bytes(event: &Event) -> usize {
    event.value.len()
        + event.key.as_ref().map_or(0, Vec::len)
        + event.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
}

fn backend_error(error: crate::state::StateError) -> state::StateError {
    state::StateError::Backend(error.to_string())
}

fn check_len(len: usize) -> Result<(), state::StateError> {
    if len > MAX_VALUE_LEN {
        return Err(state::StateError::TooLarge(MAX_VALUE_LEN as u64));
    }
    Ok(())
}

/// List state is stored as one value: each element as `[u32 LE length][bytes]`.
fn encode_list<'a>(out: &mut Vec<u8>, values: impl Iterator<Item = &'a [u8]>) {
    for value in values {
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value);
    }
}

fn decode_list(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>, state::StateError> {
    let corrupt = || state::StateError::Backend("corrupt list state".into());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        let value = rest.get(..len).ok_or_else(corrupt)?;
        out.push(value.to_vec());
        bytes = &rest[len..];
    }
    Ok(out)
}

impl WasiView for HostCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl timers::Host for HostCtx {
    fn register(&mut self, domain: TimeDomain, timestamp: i64) -> StateResult<()> {
        Ok(self.change_timer(domain, timestamp, true))
    }

    fn delete(&mut self, domain: TimeDomain, timestamp: i64) -> StateResult<()> {
        Ok(self.change_timer(domain, timestamp, false))
    }
}

/// Register the `state`, `timers`, `context` and `types` interfaces, and the
/// sandboxed WASI (see [`super::wasi`]), in `linker`.
pub fn add_to_linker(linker: &mut Linker<HostCtx>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    state::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    timers::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    context::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    types::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    Ok(())
}

type StateResult<T> = wasmtime::Result<Result<T, state::StateError>>;

impl types::Host for HostCtx {}

impl state::Host for HostCtx {
    fn write_values(
        &mut self,
        cells: Vec<(u32, u32)>,
        writes: types::ValueCells,
    ) -> StateResult<()> {
        self.write_value_cells(&cells, &writes)
    }

    fn select_key(&mut self, index: u32) -> StateResult<()> {
        if (index as usize) < self.batch_keys.len() {
            self.selected = Some(index as usize);
            Ok(Ok(()))
        } else {
            Ok(Err(state::StateError::UnknownKey(index)))
        }
    }
}

impl state::HostValueState for HostCtx {
    fn open(
        &mut self,
        name: String,
        ttl: Option<state::Ttl>,
    ) -> StateResult<Resource<ValueStateHandle>> {
        match self.open_descriptor(name, ttl) {
            Ok(descriptor) => {
                if !self.value_states.iter().any(|d| d.name == descriptor.name)
                    && self.value_states.len() < MAX_PREFETCHED_STATES
                {
                    self.value_states.push(Arc::clone(&descriptor));
                }
                Ok(Ok(self.table.push(ValueStateHandle(descriptor))?))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    fn get(&mut self, handle: Resource<ValueStateHandle>) -> StateResult<Option<Vec<u8>>> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.read(&d, StateKind::Value, b""))
    }

    fn set(&mut self, handle: Resource<ValueStateHandle>, value: Vec<u8>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.write(&d, StateKind::Value, b"", Some(&value)))
    }

    fn clear(&mut self, handle: Resource<ValueStateHandle>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.write(&d, StateKind::Value, b"", None))
    }

    fn drop(&mut self, handle: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl state::HostMapState for HostCtx {
    fn open(
        &mut self,
        name: String,
        ttl: Option<state::Ttl>,
    ) -> StateResult<Resource<MapStateHandle>> {
        match self.open_descriptor(name, ttl) {
            Ok(descriptor) => Ok(Ok(self.table.push(MapStateHandle(descriptor))?)),
            Err(e) => Ok(Err(e)),
        }
    }

    fn get(
        &mut self,
        handle: Resource<MapStateHandle>,
        user_key: Vec<u8>,
    ) -> StateResult<Option<Vec<u8>>> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.read(&d, StateKind::Map, &user_key))
    }

    fn put(
        &mut self,
        handle: Resource<MapStateHandle>,
        user_key: Vec<u8>,
        value: Vec<u8>,
    ) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.write(&d, StateKind::Map, &user_key, Some(&value)))
    }

    fn remove(&mut self, handle: Resource<MapStateHandle>, user_key: Vec<u8>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.write(&d, StateKind::Map, &user_key, None))
    }

    fn contains(
        &mut self,
        handle: Resource<MapStateHandle>,
        user_key: Vec<u8>,
    ) -> StateResult<bool> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.read(&d, StateKind::Map, &user_key).map(|v| v.is_some()))
    }

    fn entries(
        &mut self,
        handle: Resource<MapStateHandle>,
        start_after: Option<Vec<u8>>,
        limit: u32,
    ) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        let limit = limit.clamp(1, MAX_ENTRIES_PAGE) as usize;
        Ok(self.live_entries(&d, start_after, limit))
    }

    fn is_empty(&mut self, handle: Resource<MapStateHandle>) -> StateResult<bool> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.live_entries(&d, None, 1).map(|live| live.is_empty()))
    }

    fn clear(&mut self, handle: Resource<MapStateHandle>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.with_key(&d, StateKind::Map, b"", |backend, prefix| backend.delete_prefix(prefix)))
    }

    fn drop(&mut self, handle: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl HostCtx {
    fn list_read(&mut self, d: &Descriptor) -> Result<Vec<Vec<u8>>, state::StateError> {
        self.read(d, StateKind::List, b"")?.map_or(Ok(Vec::new()), |bytes| decode_list(&bytes))
    }

    fn list_append(&mut self, d: &Descriptor, values: &[Vec<u8>]) -> Result<(), state::StateError> {
        let mut stored = Vec::new();
        let existing = self.list_read(d)?;
        encode_list(&mut stored, existing.iter().chain(values).map(Vec::as_slice));
        self.write(d, StateKind::List, b"", Some(&stored))
    }

    fn list_replace(
        &mut self,
        d: &Descriptor,
        values: &[Vec<u8>],
    ) -> Result<(), state::StateError> {
        if values.is_empty() {
            return self.write(d, StateKind::List, b"", None);
        }
        let mut stored = Vec::new();
        encode_list(&mut stored, values.iter().map(Vec::as_slice));
        self.write(d, StateKind::List, b"", Some(&stored))
    }
}

impl state::HostListState for HostCtx {
    fn open(
        &mut self,
        name: String,
        ttl: Option<state::Ttl>,
    ) -> StateResult<Resource<ListStateHandle>> {
        match self.open_descriptor(name, ttl) {
            Ok(descriptor) => Ok(Ok(self.table.push(ListStateHandle(descriptor))?)),
            Err(e) => Ok(Err(e)),
        }
    }

    fn add(&mut self, handle: Resource<ListStateHandle>, value: Vec<u8>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.list_append(&d, std::slice::from_ref(&value)))
    }

    fn add_all(
        &mut self,
        handle: Resource<ListStateHandle>,
        values: Vec<Vec<u8>>,
    ) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.list_append(&d, &values))
    }

    fn get(&mut self, handle: Resource<ListStateHandle>) -> StateResult<Vec<Vec<u8>>> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.list_read(&d))
    }

    fn update(
        &mut self,
        handle: Resource<ListStateHandle>,
        values: Vec<Vec<u8>>,
    ) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.list_replace(&d, &values))
    }

    fn clear(&mut self, handle: Resource<ListStateHandle>) -> StateResult<()> {
        let d = self.descriptor(&handle, |h| &h.0)?;
        Ok(self.list_replace(&d, &[]))
    }

    fn drop(&mut self, handle: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl context::Host for HostCtx {
    fn emit(&mut self, output: Event) -> wasmtime::Result<()> {
        self.count_emitted(1, event_bytes(&output))?;
        self.outputs.push(output);
        Ok(())
    }

    fn emit_batch(&mut self, outputs: types::EventBatch) -> wasmtime::Result<()> {
        self.count_emitted(
            outputs.timestamps.len(),
            outputs.values.len()
                + outputs.keys.len()
                + outputs.headers.iter().map(|(_, k, v)| k.len() + v.len()).sum::<usize>(),
        )?;
        let outputs = super::packing::unpack(outputs).map_err(|e| {
            wasmtime::Error::msg(format!(
                "function {} emitted a malformed batch: {e}",
                self.function
            ))
        })?;
        self.outputs.extend(outputs);
        Ok(())
    }

    fn emit_to(&mut self, name: String, output: Event) -> wasmtime::Result<()> {
        if !crate::names::is_valid_name(&name) {
            let shown: String = name.chars().take(64).collect();
            return Err(wasmtime::Error::msg(format!(
                "function {} emitted to {shown:?}, which is not a side output name ({})",
                self.function,
                crate::names::NAME_RULE
            )));
        }
        self.count_emitted(1, event_bytes(&output))?;
        self.side_outputs.push((name, output));
        Ok(())
    }

    fn current_watermark(&mut self) -> wasmtime::Result<i64> {
        Ok(self.watermark)
    }

    fn processing_time(&mut self) -> wasmtime::Result<i64> {
        Ok(self.processing_time)
    }

    fn log(&mut self, level: types::LogLevel, message: String) -> wasmtime::Result<()> {
        let function = self.function.as_str();
        match level {
            types::LogLevel::Trace => tracing::trace!(function, "{message}"),
            types::LogLevel::Debug => tracing::debug!(function, "{message}"),
            types::LogLevel::Info => tracing::info!(function, "{message}"),
            types::LogLevel::Warn => tracing::warn!(function, "{message}"),
            types::LogLevel::Error => tracing::error!(function, "{message}"),
        }
        if level == types::LogLevel::Error {
            self.logged_error = Some(message.chars().take(1024).collect());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::InMemoryBackend;
    use state::{HostListState, HostMapState, HostValueState};
    use std::cell::Cell;

    thread_local! {
        /// Each test runs on its own thread, so each has its own clock.
        static NOW: Cell<i64> = const { Cell::new(0) };
    }

    fn clock() -> i64 {
        NOW.with(Cell::get)
    }

    /// A context over in-memory state, processing `key` at time `now`.
    fn ctx_at(ctx: &mut HostCtx, key: &[u8], now: i64) {
        NOW.with(|n| n.set(now));
        ctx.begin_batch(std::iter::once(key));
        state::Host::select_key(ctx, 0).unwrap().unwrap();
    }

    fn new_ctx(overrides: HashMap<String, Ttl>) -> HostCtx {
        HostCtx::new("test", Some(Box::new(InMemoryBackend::new())), 128)
            .with_clock(clock)
            .with_ttl_overrides(overrides)
    }

    fn ttl(millis: u64, update: state::TtlUpdate) -> Option<state::Ttl> {
        Some(state::Ttl { millis, update })
    }

    #[test]
    fn values_expire_after_their_ttl_unless_renewed() {
        let mut ctx = new_ctx(HashMap::new());
        ctx_at(&mut ctx, b"k", 0);
        let written = HostValueState::open(
            &mut ctx,
            "w".into(),
            ttl(100, state::TtlUpdate::OnCreateAndWrite),
        )
        .unwrap()
        .unwrap();
        let read =
            HostValueState::open(&mut ctx, "r".into(), ttl(100, state::TtlUpdate::OnReadAndWrite))
                .unwrap()
                .unwrap();
        let get = |ctx: &mut HostCtx, h: &Resource<ValueStateHandle>| {
            HostValueState::get(ctx, Resource::new_borrow(h.rep())).unwrap().unwrap()
        };
        HostValueState::set(&mut ctx, Resource::new_borrow(written.rep()), b"a".to_vec())
            .unwrap()
            .unwrap();
        HostValueState::set(&mut ctx, Resource::new_borrow(read.rep()), b"b".to_vec())
            .unwrap()
            .unwrap();
        ctx_at(&mut ctx, b"k", 90);
        assert_eq!(get(&mut ctx, &written), Some(b"a".to_vec()));
        assert_eq!(get(&mut ctx, &read), Some(b"b".to_vec()), "the read renews `r` until 190");
        ctx_at(&mut ctx, b"k", 150);
        assert_eq!(get(&mut ctx, &written), None, "not written for longer than its TTL: absent");
        assert_eq!(get(&mut ctx, &read), Some(b"b".to_vec()));
        ctx_at(&mut ctx, b"other", 150);
        assert_eq!(get(&mut ctx, &read), None, "another key never had a value");
    }

    #[test]
    fn the_spec_overrides_the_function_ttl_and_zero_is_rejected() {
        let overrides = HashMap::from([(
            "v".to_string(),
            Ttl { millis: 10, update: TtlUpdate::OnCreateAndWrite },
        )]);
        let mut ctx = new_ctx(overrides);
        ctx_at(&mut ctx, b"k", 0);
        assert!(matches!(
            HostValueState::open(&mut ctx, "z".into(), ttl(0, state::TtlUpdate::OnCreateAndWrite))
                .unwrap(),
            Err(state::StateError::InvalidTtl)
        ));
        let v = HostValueState::open(&mut ctx, "v".into(), None).unwrap().unwrap();
        HostValueState::set(&mut ctx, Resource::new_borrow(v.rep()), b"x".to_vec())
            .unwrap()
            .unwrap();
        ctx_at(&mut ctx, b"k", 11);
        assert_eq!(
            HostValueState::get(&mut ctx, Resource::new_borrow(v.rep())).unwrap().unwrap(),
            None
        );
    }

    #[test]
    fn expired_map_entries_and_lists_are_invisible() {
        let mut ctx = new_ctx(HashMap::new());
        ctx_at(&mut ctx, b"k", 0);
        let map =
            HostMapState::open(&mut ctx, "m".into(), ttl(100, state::TtlUpdate::OnCreateAndWrite))
                .unwrap()
                .unwrap();
        let list =
            HostListState::open(&mut ctx, "l".into(), ttl(100, state::TtlUpdate::OnCreateAndWrite))
                .unwrap()
                .unwrap();
        let m = || Resource::<MapStateHandle>::new_borrow(map.rep());
        HostMapState::put(&mut ctx, m(), b"old".to_vec(), b"1".to_vec()).unwrap().unwrap();
        HostListState::add(&mut ctx, Resource::new_borrow(list.rep()), b"x".to_vec())
            .unwrap()
            .unwrap();
        ctx_at(&mut ctx, b"k", 60);
        HostMapState::put(&mut ctx, m(), b"new".to_vec(), b"2".to_vec()).unwrap().unwrap();
        ctx_at(&mut ctx, b"k", 120);
        let entries = HostMapState::entries(&mut ctx, m(), None, 10).unwrap().unwrap();
        assert_eq!(entries, vec![(b"new".to_vec(), b"2".to_vec())]);
        assert!(!HostMapState::contains(&mut ctx, m(), b"old".to_vec()).unwrap().unwrap());
        assert!(HostListState::get(&mut ctx, Resource::new_borrow(list.rep()))
            .unwrap()
            .unwrap()
            .is_empty());
        ctx_at(&mut ctx, b"k", 200);
        assert!(HostMapState::is_empty(&mut ctx, m()).unwrap().unwrap());
    }

    #[test]
    fn value_states_are_read_ahead_and_written_back_per_batch() {
        let mut ctx = new_ctx(HashMap::new());
        ctx_at(&mut ctx, b"a", 0);
        let v = HostValueState::open(&mut ctx, "v".into(), None).unwrap().unwrap();
        HostValueState::open(
            &mut ctx,
            "renewed".into(),
            ttl(100, state::TtlUpdate::OnReadAndWrite),
        )
        .unwrap()
        .unwrap();
        HostValueState::set(&mut ctx, Resource::new_borrow(v.rep()), b"1".to_vec())
            .unwrap()
            .unwrap();
        ctx.begin_batch([&b"a"[..], b"b"].into_iter());
        let mut cells = super::super::packing::empty_cells();
        ctx.prefetch_values(&mut cells);
        assert_eq!(
            cells.states,
            vec!["v".to_string()],
            "states whose reads renew a TTL are not read ahead"
        );
        assert_eq!(
            (cells.present, cells.values, cells.ends),
            (vec![true, false], b"1".to_vec(), vec![1, 1])
        );

        let writes = |states: &[&str], present: Vec<bool>, values: &[u8], ends: Vec<u32>| {
            types::ValueCells {
                states: states.iter().map(|s| s.to_string()).collect(),
                present,
                values: values.to_vec(),
                ends,
            }
        };
        state::Host::write_values(
            &mut ctx,
            vec![(0, 1), (0, 0)],
            writes(&["v"], vec![true, false], b"22", vec![2, 2]),
        )
        .unwrap()
        .unwrap();
        state::Host::select_key(&mut ctx, 1).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx, Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"22".to_vec())
        );
        state::Host::select_key(&mut ctx, 0).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx, Resource::new_borrow(v.rep())).unwrap().unwrap(),
            None,
            "cleared"
        );

        assert!(matches!(
            state::Host::write_values(
                &mut ctx,
                vec![(0, 0), (0, 5), (0, 1)],
                writes(&["v"], vec![true; 3], b"xyz", vec![1, 2, 3])
            )
            .unwrap(),
            Err(state::StateError::UnknownKey(5))
        ));
        state::Host::select_key(&mut ctx, 0).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx, Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"x".to_vec()),
            "the write before the failing one is made"
        );
        state::Host::select_key(&mut ctx, 1).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx, Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"22".to_vec()),
            "the one after it is not"
        );
        assert!(
            state::Host::write_values(
                &mut ctx,
                vec![(0, 0)],
                writes(&["never-opened"], vec![true], b"x", vec![1])
            )
            .is_err(),
            "a trap"
        );
        assert!(
            state::Host::write_values(
                &mut ctx,
                vec![(0, 0)],
                writes(&["v"], vec![true], b"x", vec![9])
            )
            .is_err(),
            "an end past the values"
        );
        assert!(
            state::Host::write_values(
                &mut ctx,
                vec![(3, 0)],
                writes(&["v"], vec![true], b"x", vec![1])
            )
            .is_err(),
            "a state index past the states"
        );
    }

    #[test]
    fn list_encoding_round_trips() {
        let mut bytes = Vec::new();
        encode_list(&mut bytes, [&b"a"[..], b"", b"xyz"].into_iter());
        assert_eq!(decode_list(&bytes).unwrap(), vec![b"a".to_vec(), vec![], b"xyz".to_vec()]);
        assert!(decode_list(&bytes[..bytes.len() - 1]).is_err());
    }
}
