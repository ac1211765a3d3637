//! The host side of the WIT `state` interface: keyed value, map and list
//! state, scoped to the key the guest selected in the current batch.
//!
//! [`StateCtx`] holds what the interface keeps between calls (the open
//! value states, times to live from the spec, reused buffers);
//! [`StateView`] borrows it together with the call's batch, the state
//! backend and the guest's handle table, and implements the bindings'
//! `Host*` traits. State goes through the [`KeyedStateBackend`] trait;
//! the byte layout of map and list state is [`crate::state::encoding`]'s.
//! Every value from a guest is hostile: names, sizes, handles and key
//! indices are checked before use.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host::{self, HostCtx}};
//! # use weir_host::runtime::bindings::weir::function::state::{Host as _, HostValueState};
//! # use weir_host::state::InMemoryBackend;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host::state::add_to_linker(&mut linker, HostCtx::state).unwrap();
//! // The host calls it natively the same way:
//! let mut ctx = HostCtx::new("revenue", Some(Box::new(InMemoryBackend::new())), 128);
//! ctx.begin_batch([&b"c1"[..]].into_iter());
//! ctx.state().select_key(0).unwrap().unwrap();
//! let total = HostValueState::open(&mut ctx.state(), "total".into(), None).unwrap().unwrap();
//! HostValueState::set(&mut ctx.state(), total, b"42".to_vec()).unwrap().unwrap();
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::super::bindings::weir::function::{state, types};
use super::super::packing::{clear_cells, push_cell, KeyList};
use super::CallScope;
use crate::state::encoding::{decode_list, encode_list, entry_key_into};
use crate::state::ttl::{self, Ttl, TtlUpdate};
use crate::state::{
    KeyedStateBackend, Prefetched, ReadBatch, ScanEntry, StateKind, MAX_STATE_NAME_LEN,
};

/// Largest state value or map key a guest may store, in bytes.
pub const MAX_VALUE_LEN: usize = 16 << 20;
/// Most value states read ahead per batch.
pub const MAX_PREFETCHED_STATES: usize = 16;
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

/// What the `state` interface keeps for one function instance.
#[derive(Default)]
pub struct StateCtx {
    /// Times to live from the pipeline spec, overriding the function's.
    ttl_overrides: HashMap<String, Ttl>,
    /// The value states the function has opened, by name: what
    /// [`StateView::prefetch_values`] reads ahead and `write-values` writes.
    value_states: Vec<Arc<Descriptor>>,
    /// Buffers reused by every state key, read and write.
    key_buf: Vec<u8>,
    read_buf: Vec<u8>,
    write_buf: Vec<u8>,
    /// What [`StateView::prefetch_values`] read ahead for call
    /// `read_ahead_call` ([`CallScope::number`]), for `write-values` of
    /// the same call: its keys need not be encoded and hashed again.
    read_ahead: Vec<ReadAhead>,
    read_ahead_call: u64,
    /// Where each value read ahead is in `read_buf`, reused.
    found: Vec<Option<std::ops::Range<usize>>>,
}

/// One value state read ahead for a call: its storage key for each key of
/// the call's batch, in order, and what the backend's prefetch answered
/// for each.
#[derive(Default)]
struct ReadAhead {
    state: Option<Arc<Descriptor>>,
    keys: KeyList,
    prefetched: Vec<Prefetched>,
}

impl ReadAhead {
    /// The storage key of `state` for batch key `index`, and its prefetch's
    /// answer, if read ahead.
    fn find<'r>(
        read_ahead: &'r [ReadAhead],
        state: &Arc<Descriptor>,
        index: usize,
    ) -> Option<(&'r [u8], Prefetched)> {
        let ahead =
            read_ahead.iter().find(|r| r.state.as_ref().is_some_and(|s| Arc::ptr_eq(s, state)))?;
        let prefetched = *ahead.prefetched.get(index)?;
        (index < ahead.keys.len()).then(|| (ahead.keys.get(index), prefetched))
    }
}

impl StateCtx {
    /// Use these times to live instead of the function's, per state name.
    pub fn set_ttl_overrides(&mut self, overrides: HashMap<String, Ttl>) {
        self.ttl_overrides = overrides;
    }
}

/// The `state` interface's view of a store: its context, the call's batch,
/// the state backend (none for functions without keyed state) and the
/// guest's handles.
pub struct StateView<'a> {
    pub(super) ctx: &'a mut StateCtx,
    pub(super) call: &'a mut CallScope,
    pub(super) backend: Option<&'a mut (dyn KeyedStateBackend + 'static)>,
    pub(super) table: &'a mut ResourceTable,
}

/// [`HasData`] for the `state` interface: its bindings see a [`StateView`].
pub struct WeirState;

impl HasData for WeirState {
    type Data<'a> = StateView<'a>;
}

/// Register the `state` interface in `linker`, reached through `get`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> StateView<'_>,
) -> wasmtime::Result<()> {
    state::add_to_linker::<T, WeirState>(linker, get)
}

type StateResult<T> = wasmtime::Result<Result<T, state::StateError>>;

impl StateView<'_> {
    /// Read ahead, for every key of the current batch, the value states the
    /// function has opened (except those whose reads renew a time to live,
    /// which must see each read) into `cells`. A state whose read fails is
    /// left out, so the function's own read meets the error.
    pub fn prefetch_values(&mut self, cells: &mut types::ValueCells) {
        cells.states.clear();
        clear_cells(cells);
        let keys = self.call.len();
        let mut read_ahead = std::mem::take(&mut self.ctx.read_ahead);
        read_ahead.iter_mut().for_each(|r| r.state = None);
        let mut used = 0;
        for index in 0..self.ctx.value_states.len() {
            let descriptor = Arc::clone(&self.ctx.value_states[index]);
            if descriptor.ttl.is_some_and(|t| t.update == TtlUpdate::OnReadAndWrite) {
                continue;
            }
            if used == read_ahead.len() {
                read_ahead.push(ReadAhead::default());
            }
            let ReadAhead { state, keys: storage, prefetched } = &mut read_ahead[used];
            let (present, values) = (cells.present.len(), cells.values.len());
            // Keys encoded first, then read one after the other: the
            // backend's lookups follow each other closely.
            storage.clear();
            prefetched.clear();
            for key in 0..keys {
                self.storage_key(&descriptor, StateKind::Value, key, b"");
                storage.push(&self.ctx.key_buf);
            }
            let (now, stored) = (self.call.processing_time, &mut self.ctx.read_buf);
            let found = &mut self.ctx.found;
            let Some(backend) = self.backend.as_deref_mut() else { break };
            stored.clear();
            found.clear();
            let batch = ReadBatch {
                key: &|key| storage.get(key),
                count: keys,
                prefetched,
                out: stored,
                found,
            };
            let read = backend.get_many_into(batch).and_then(|()| {
                for (key, value) in found.iter().enumerate() {
                    let value = value.clone().map(|range| &stored[range]);
                    push_cell(cells, live(backend, storage.get(key), value, now)?);
                }
                Ok(())
            });
            match read {
                Ok(()) => {
                    cells.states.push(descriptor.name.clone());
                    *state = Some(descriptor);
                    used += 1;
                }
                Err(_) => {
                    cells.present.truncate(present);
                    cells.ends.truncate(present);
                    cells.values.truncate(values);
                }
            }
        }
        self.ctx.read_ahead = read_ahead;
        self.ctx.read_ahead_call = self.call.number();
        self.call.selected = None;
    }

    /// Apply the guest's buffered value-state writes (`write-values`). The
    /// writes select their own keys; the function's selection (the key it
    /// reports before returning an error) stays.
    fn write_value_cells(
        &mut self,
        cells: &[(u32, u32)],
        writes: &types::ValueCells,
    ) -> StateResult<()> {
        let selected = self.call.selected;
        let result = self.apply_value_writes(cells, writes);
        self.call.selected = selected;
        result
    }

    fn apply_value_writes(
        &mut self,
        cells: &[(u32, u32)],
        writes: &types::ValueCells,
    ) -> StateResult<()> {
        let malformed = |function: &str, what: &str| {
            wasmtime::Error::msg(format!("function {function} sent malformed value writes: {what}"))
        };
        let function = self.call.function.as_str();
        if writes.present.len() != cells.len() || writes.ends.len() != cells.len() {
            return Err(malformed(function, "the lists disagree in length"));
        }
        let descriptors = writes
            .states
            .iter()
            .map(|name| {
                let open = self.ctx.value_states.iter().find(|d| d.name == *name).cloned();
                open.ok_or_else(|| {
                    malformed(
                        function,
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
        let mut prefetched = Vec::with_capacity(cells.len());
        // What this call read ahead (another call's keys are not these),
        // out of the context while the writes are encoded, back after.
        let read_ahead = std::mem::take(&mut self.ctx.read_ahead);
        let ahead =
            if self.ctx.read_ahead_call == self.call.number() { &read_ahead[..] } else { &[] };
        let values = super::super::packing::slices(&writes.values, &writes.ends, "value writes");
        let encode = || -> wasmtime::Result<()> {
            for ((&(state, key), value), &present) in cells.iter().zip(values).zip(&writes.present)
            {
                let value = value.map_err(|e| malformed(&self.call.function, &e))?;
                let descriptor = descriptors.get(state as usize).ok_or_else(|| {
                    malformed(&self.call.function, "a state index is past the states")
                })?;
                if key as usize >= self.call.len() {
                    failed = Err(state::StateError::UnknownKey(key));
                    break;
                }
                if let Err(error) = self.encode_stored(descriptor, present.then_some(value)) {
                    failed = Err(error);
                    break;
                }
                match ReadAhead::find(ahead, descriptor, key as usize) {
                    Some((storage_key, answer)) => {
                        storage.push(storage_key);
                        prefetched.push(Some(answer));
                    }
                    None => {
                        self.storage_key(descriptor, StateKind::Value, key as usize, b"");
                        storage.push(&self.ctx.key_buf);
                        prefetched.push(None);
                    }
                }
                stored.push(&self.ctx.write_buf);
            }
            Ok(())
        };
        let encoded = encode();
        self.ctx.read_ahead = read_ahead;
        encoded?;
        let present = writes.present.iter().take(storage.len());
        let mut batch =
            storage.iter().zip(stored.iter()).zip(present).zip(prefetched).map(
                |(((key, value), &present), answer)| ((key, present.then_some(value)), answer),
            );
        let written = match self.backend.as_deref_mut() {
            Some(backend) => backend.write_batch_prefetched(&mut batch).map_err(backend_error),
            None => Err(no_keyed_state()),
        };
        Ok(written.and(failed))
    }

    /// What to store for `value` of `descriptor` (with its expiry), into
    /// the write buffer (left empty for a delete).
    fn encode_stored(
        &mut self,
        descriptor: &Descriptor,
        value: Option<&[u8]>,
    ) -> Result<(), state::StateError> {
        self.ctx.write_buf.clear();
        if let Some(value) = value {
            check_len(value.len())?;
            ttl::encode_into(
                &mut self.ctx.write_buf,
                value,
                descriptor.ttl.map(|t| t.expiry(self.call.processing_time)),
            );
        }
        Ok(())
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
        let ttl = self.ctx.ttl_overrides.get(&name).copied().or(declared);
        Ok(Arc::new(Descriptor { name, ttl }))
    }

    /// Run `f` with the backend and the storage key of `descriptor`'s state
    /// of `kind` for the selected key, followed by `user_key`.
    fn with_key<R>(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        user_key: &[u8],
        f: impl FnOnce(&mut dyn KeyedStateBackend, &[u8]) -> Result<R, crate::state::StateError>,
    ) -> Result<R, state::StateError> {
        let index = self.call.selected.ok_or(state::StateError::NoCurrentKey)?;
        self.storage_key(descriptor, kind, index, user_key);
        let backend = self.backend.as_deref_mut().ok_or_else(no_keyed_state)?;
        f(backend, &self.ctx.key_buf).map_err(backend_error)
    }

    /// The storage key of `descriptor`'s state of `kind` for batch key
    /// `index`, followed by `user_key`, into the key buffer.
    fn storage_key(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        index: usize,
        user_key: &[u8],
    ) {
        let (key, group) = self.call.key(index);
        self.ctx.key_buf.clear();
        entry_key_into(&mut self.ctx.key_buf, group, &descriptor.name, kind, key, user_key);
    }

    /// The live value under `user_key`, renewing it if its TTL says reads do.
    fn read(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        user_key: &[u8],
    ) -> Result<Option<Vec<u8>>, state::StateError> {
        self.read_with(descriptor, kind, user_key, |value| value.map(<[u8]>::to_vec))
    }

    /// Run `f` on the live value under `user_key` (renewing it if its TTL
    /// says reads do), read into a buffer reused from read to read.
    fn read_with<R>(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        user_key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, state::StateError> {
        let now = self.call.processing_time;
        let renew = descriptor.ttl.filter(|t| t.update == TtlUpdate::OnReadAndWrite);
        let mut stored = std::mem::take(&mut self.ctx.read_buf);
        stored.clear();
        let found = self.with_key(descriptor, kind, user_key, |backend, key| {
            let start = live_value(backend, key, None, now, &mut stored)?;
            if let (Some(start), Some(ttl)) = (start, renew) {
                backend.put(key, &ttl::encode(&stored[start..], Some(ttl.expiry(now))))?;
            }
            Ok(start)
        });
        let result = found.map(|start| f(start.map(|start| &stored[start..])));
        self.ctx.read_buf = stored;
        result
    }

    /// Store `value` under `user_key` (or delete it), stamped with its expiry.
    fn write(
        &mut self,
        descriptor: &Descriptor,
        kind: StateKind,
        user_key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), state::StateError> {
        check_len(user_key.len())?;
        self.encode_stored(descriptor, value)?;
        let stored = std::mem::take(&mut self.ctx.write_buf);
        let result = self.with_key(descriptor, kind, user_key, |backend, key| match value {
            Some(_) => backend.put(key, &stored),
            None => backend.delete(key),
        });
        self.ctx.write_buf = stored;
        result
    }

    /// Up to `limit` live map entries after `start_after`.
    fn live_entries(
        &mut self,
        descriptor: &Descriptor,
        start_after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, state::StateError> {
        let now = self.call.processing_time;
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

    fn list_read(&mut self, d: &Descriptor) -> Result<Vec<Vec<u8>>, state::StateError> {
        match self.read(d, StateKind::List, b"")? {
            Some(bytes) => decode_list(&bytes).map_err(backend_error),
            None => Ok(Vec::new()),
        }
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

    fn descriptor<T: 'static>(
        &self,
        handle: &Resource<T>,
        get: fn(&T) -> &Arc<Descriptor>,
    ) -> wasmtime::Result<Arc<Descriptor>> {
        Ok(Arc::clone(get(self.table.get(handle)?)))
    }
}

/// Read the value stored under `key` (which `backend.prefetch` answered
/// `prefetched` for, if it was asked) into `stored` (cleared first) and
/// return where the live value starts in it; `None` if there is none or
/// it expired by `now` (then it is deleted).
fn live_value(
    backend: &mut dyn KeyedStateBackend,
    key: &[u8],
    prefetched: Option<Prefetched>,
    now: i64,
    stored: &mut Vec<u8>,
) -> Result<Option<usize>, crate::state::StateError> {
    stored.clear();
    let found = match prefetched {
        Some(prefetched) => backend.get_prefetched_into(key, prefetched, stored)?,
        None => backend.get_into(key, stored)?,
    };
    let value = found.then_some(&stored[..]);
    Ok(live(backend, key, value, now)?.map(|value| stored.len() - value.len()))
}

/// The value of `stored` (what is stored under `key`, if anything) unless
/// its time to live has passed by `now`: then it is deleted.
fn live<'v>(
    backend: &mut dyn KeyedStateBackend,
    key: &[u8],
    stored: Option<&'v [u8]>,
    now: i64,
) -> Result<Option<&'v [u8]>, crate::state::StateError> {
    let Some(stored) = stored else { return Ok(None) };
    let value = ttl::decode(stored, now)?;
    if value.is_none() {
        backend.delete(key)?;
    }
    Ok(value)
}

/// A backend failure as the guest sees it.
pub(super) fn backend_error(error: crate::state::StateError) -> state::StateError {
    state::StateError::Backend(error.to_string())
}

/// What a state or timer call of a function without keyed state gets.
pub(super) fn no_keyed_state() -> state::StateError {
    state::StateError::Backend("this function has no keyed state".into())
}

fn check_len(len: usize) -> Result<(), state::StateError> {
    if len > MAX_VALUE_LEN {
        return Err(state::StateError::TooLarge(MAX_VALUE_LEN as u64));
    }
    Ok(())
}

impl state::Host for StateView<'_> {
    fn write_values(
        &mut self,
        cells: Vec<(u32, u32)>,
        writes: types::ValueCells,
    ) -> StateResult<()> {
        self.write_value_cells(&cells, &writes)
    }

    fn select_key(&mut self, index: u32) -> StateResult<()> {
        if (index as usize) < self.call.len() {
            self.call.selected = Some(index as usize);
            Ok(Ok(()))
        } else {
            Ok(Err(state::StateError::UnknownKey(index)))
        }
    }
}

impl state::HostValueState for StateView<'_> {
    fn open(
        &mut self,
        name: String,
        ttl: Option<state::Ttl>,
    ) -> StateResult<Resource<ValueStateHandle>> {
        match self.open_descriptor(name, ttl) {
            Ok(descriptor) => {
                let opened = &mut self.ctx.value_states;
                if !opened.iter().any(|d| d.name == descriptor.name)
                    && opened.len() < MAX_PREFETCHED_STATES
                {
                    opened.push(Arc::clone(&descriptor));
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

impl state::HostMapState for StateView<'_> {
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

impl state::HostListState for StateView<'_> {
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

#[cfg(test)]
mod tests {
    use super::super::HostCtx;
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
        state::Host::select_key(&mut ctx.state(), 0).unwrap().unwrap();
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
            &mut ctx.state(),
            "w".into(),
            ttl(100, state::TtlUpdate::OnCreateAndWrite),
        )
        .unwrap()
        .unwrap();
        let read = HostValueState::open(
            &mut ctx.state(),
            "r".into(),
            ttl(100, state::TtlUpdate::OnReadAndWrite),
        )
        .unwrap()
        .unwrap();
        let get = |ctx: &mut HostCtx, h: &Resource<ValueStateHandle>| {
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(h.rep())).unwrap().unwrap()
        };
        HostValueState::set(&mut ctx.state(), Resource::new_borrow(written.rep()), b"a".to_vec())
            .unwrap()
            .unwrap();
        HostValueState::set(&mut ctx.state(), Resource::new_borrow(read.rep()), b"b".to_vec())
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
            HostValueState::open(
                &mut ctx.state(),
                "z".into(),
                ttl(0, state::TtlUpdate::OnCreateAndWrite)
            )
            .unwrap(),
            Err(state::StateError::InvalidTtl)
        ));
        let v = HostValueState::open(&mut ctx.state(), "v".into(), None).unwrap().unwrap();
        HostValueState::set(&mut ctx.state(), Resource::new_borrow(v.rep()), b"x".to_vec())
            .unwrap()
            .unwrap();
        ctx_at(&mut ctx, b"k", 11);
        assert_eq!(
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(v.rep())).unwrap().unwrap(),
            None
        );
    }

    #[test]
    fn expired_map_entries_and_lists_are_invisible() {
        let mut ctx = new_ctx(HashMap::new());
        ctx_at(&mut ctx, b"k", 0);
        let map = HostMapState::open(
            &mut ctx.state(),
            "m".into(),
            ttl(100, state::TtlUpdate::OnCreateAndWrite),
        )
        .unwrap()
        .unwrap();
        let list = HostListState::open(
            &mut ctx.state(),
            "l".into(),
            ttl(100, state::TtlUpdate::OnCreateAndWrite),
        )
        .unwrap()
        .unwrap();
        let m = || Resource::<MapStateHandle>::new_borrow(map.rep());
        HostMapState::put(&mut ctx.state(), m(), b"old".to_vec(), b"1".to_vec()).unwrap().unwrap();
        HostListState::add(&mut ctx.state(), Resource::new_borrow(list.rep()), b"x".to_vec())
            .unwrap()
            .unwrap();
        ctx_at(&mut ctx, b"k", 60);
        HostMapState::put(&mut ctx.state(), m(), b"new".to_vec(), b"2".to_vec()).unwrap().unwrap();
        ctx_at(&mut ctx, b"k", 120);
        let entries = HostMapState::entries(&mut ctx.state(), m(), None, 10).unwrap().unwrap();
        assert_eq!(entries, vec![(b"new".to_vec(), b"2".to_vec())]);
        assert!(!HostMapState::contains(&mut ctx.state(), m(), b"old".to_vec()).unwrap().unwrap());
        assert!(HostListState::get(&mut ctx.state(), Resource::new_borrow(list.rep()))
            .unwrap()
            .unwrap()
            .is_empty());
        ctx_at(&mut ctx, b"k", 200);
        assert!(HostMapState::is_empty(&mut ctx.state(), m()).unwrap().unwrap());
    }

    #[test]
    fn value_states_are_read_ahead_and_written_back_per_batch() {
        let mut ctx = new_ctx(HashMap::new());
        ctx_at(&mut ctx, b"a", 0);
        let v = HostValueState::open(&mut ctx.state(), "v".into(), None).unwrap().unwrap();
        HostValueState::open(
            &mut ctx.state(),
            "renewed".into(),
            ttl(100, state::TtlUpdate::OnReadAndWrite),
        )
        .unwrap()
        .unwrap();
        HostValueState::set(&mut ctx.state(), Resource::new_borrow(v.rep()), b"1".to_vec())
            .unwrap()
            .unwrap();
        ctx.begin_batch([&b"a"[..], b"b"].into_iter());
        let mut cells = super::super::super::packing::empty_cells();
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
            &mut ctx.state(),
            vec![(0, 1), (0, 0)],
            writes(&["v"], vec![true, false], b"22", vec![2, 2]),
        )
        .unwrap()
        .unwrap();
        state::Host::select_key(&mut ctx.state(), 1).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"22".to_vec())
        );
        state::Host::select_key(&mut ctx.state(), 0).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(v.rep())).unwrap().unwrap(),
            None,
            "cleared"
        );

        assert!(matches!(
            state::Host::write_values(
                &mut ctx.state(),
                vec![(0, 0), (0, 5), (0, 1)],
                writes(&["v"], vec![true; 3], b"xyz", vec![1, 2, 3])
            )
            .unwrap(),
            Err(state::StateError::UnknownKey(5))
        ));
        state::Host::select_key(&mut ctx.state(), 0).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"x".to_vec()),
            "the write before the failing one is made"
        );
        state::Host::select_key(&mut ctx.state(), 1).unwrap().unwrap();
        assert_eq!(
            HostValueState::get(&mut ctx.state(), Resource::new_borrow(v.rep())).unwrap().unwrap(),
            Some(b"22".to_vec()),
            "the one after it is not"
        );
        assert!(
            state::Host::write_values(
                &mut ctx.state(),
                vec![(0, 0)],
                writes(&["never-opened"], vec![true], b"x", vec![1])
            )
            .is_err(),
            "a trap"
        );
        assert!(
            state::Host::write_values(
                &mut ctx.state(),
                vec![(0, 0)],
                writes(&["v"], vec![true], b"x", vec![9])
            )
            .is_err(),
            "an end past the values"
        );
        assert!(
            state::Host::write_values(
                &mut ctx.state(),
                vec![(3, 0)],
                writes(&["v"], vec![true], b"x", vec![1])
            )
            .is_err(),
            "a state index past the states"
        );
    }

    #[test]
    fn writes_use_their_own_calls_read_ahead_only() {
        let cache = crate::state::CachedBackend::new(Box::new(InMemoryBackend::new()), 1 << 20);
        let mut ctx = HostCtx::new("test", Some(Box::new(cache)), 128).with_clock(clock);
        ctx_at(&mut ctx, b"a", 0);
        HostValueState::open(&mut ctx.state(), "v".into(), None).unwrap().unwrap();
        let renewed = ttl(100_000, state::TtlUpdate::OnReadAndWrite);
        HostValueState::open(&mut ctx.state(), "renewed".into(), renewed).unwrap().unwrap();
        let write = |ctx: &mut HostCtx, cells: Vec<(u32, u32)>, values: &[u8]| {
            let n = cells.len() as u32;
            let writes = types::ValueCells {
                states: vec!["v".into(), "renewed".into()],
                present: vec![true; cells.len()],
                values: values.to_vec(),
                ends: (1..=n).collect(),
            };
            state::Host::write_values(&mut ctx.state(), cells, writes).unwrap().unwrap();
        };
        let read = |ctx: &mut HostCtx, key: &[u8], state: &str| {
            ctx.begin_batch(std::iter::once(key));
            state::Host::select_key(&mut ctx.state(), 0).unwrap().unwrap();
            let handle =
                HostValueState::open(&mut ctx.state(), state.into(), None).unwrap().unwrap();
            HostValueState::get(&mut ctx.state(), handle).unwrap().unwrap()
        };
        // Read ahead, then written: the read-ahead's keys (state `v`) and
        // keys encoded afresh (`renewed`, not read ahead) alike.
        ctx.begin_batch([&b"a"[..], b"b"].into_iter());
        ctx.prefetch_values(&mut super::super::super::packing::empty_cells());
        write(&mut ctx, vec![(0, 0), (0, 1), (1, 1)], b"12r");
        // A later call with the keys the other way round and nothing read
        // ahead: its writes must not go where the last call's keys were.
        ctx.begin_batch([&b"b"[..], b"a"].into_iter());
        write(&mut ctx, vec![(0, 0)], b"3");
        assert_eq!(read(&mut ctx, b"a", "v"), Some(b"1".to_vec()));
        assert_eq!(read(&mut ctx, b"b", "v"), Some(b"3".to_vec()));
        assert_eq!(read(&mut ctx, b"b", "renewed"), Some(b"r".to_vec()));
        assert_eq!(read(&mut ctx, b"a", "renewed"), None);
    }
}
