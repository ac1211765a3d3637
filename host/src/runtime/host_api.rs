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

use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::weir::function::{context, state, types};
use crate::state::{KeyedStateBackend, StateKey, StateKind, MAX_STATE_NAME_LEN};
use crate::Event;

/// Largest state value or map key a guest may store, in bytes.
pub const MAX_VALUE_LEN: usize = 16 << 20;
/// Most map entries one `entries` call returns.
pub const MAX_ENTRIES_PAGE: u32 = 4096;

/// A value-state handle held by a guest.
pub struct ValueStateHandle {
    name: String,
}

/// A map-state handle held by a guest.
pub struct MapStateHandle {
    name: String,
}

/// A list-state handle held by a guest.
pub struct ListStateHandle {
    name: String,
}

/// Everything a function instance's `Store` holds.
pub struct HostCtx {
    table: ResourceTable,
    wasi: WasiCtx,
    function: String,
    backend: Option<Box<dyn KeyedStateBackend>>,
    max_parallelism: u16,
    /// Keys (and their key groups) of the current `process` batch.
    batch_keys: Vec<(Vec<u8>, u16)>,
    selected: Option<usize>,
    key_buf: Vec<u8>,
    /// Events the function emitted to the main output, in order.
    pub outputs: Vec<Event>,
    /// Events the function emitted to named side outputs, in order.
    pub side_outputs: Vec<(String, Event)>,
    watermark: i64,
    processing_time: i64,
}

impl HostCtx {
    /// Data for an instance of `function`; `backend` holds its keyed state
    /// (key functions have none).
    pub fn new(function: &str, backend: Option<Box<dyn KeyedStateBackend>>, max_parallelism: u16) -> Self {
        Self {
            table: ResourceTable::new(),
            wasi: super::wasi::sandboxed(),
            function: function.to_string(),
            backend,
            max_parallelism,
            batch_keys: Vec::new(),
            selected: None,
            key_buf: Vec::new(),
            outputs: Vec::new(),
            side_outputs: Vec::new(),
            watermark: i64::MIN,
            processing_time: 0,
        }
    }

    /// Record the keys of the batch about to be passed to `process`, and fix
    /// processing time for the call.
    pub fn begin_batch<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.batch_keys.clear();
        let max_parallelism = self.max_parallelism;
        self.batch_keys.extend(keys.map(|k| (k.to_vec(), crate::state::key_group(k, max_parallelism))));
        self.selected = None;
        self.processing_time = now_millis();
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

    /// The state backend, to flush it.
    pub fn backend_mut(&mut self) -> Option<&mut (dyn KeyedStateBackend + 'static)> {
        self.backend.as_deref_mut()
    }

    /// Build the storage key of state `name` of `kind` for the selected key.
    fn state_key(&mut self, name: &str, kind: StateKind) -> Result<(), state::StateError> {
        let index = self.selected.ok_or(state::StateError::NoCurrentKey)?;
        let (key, group) = &self.batch_keys[index];
        self.key_buf.clear();
        StateKey::new(*group, name, kind, key, b"").encode_into(&mut self.key_buf);
        Ok(())
    }

    fn backend(&mut self) -> Result<&mut (dyn KeyedStateBackend + 'static), state::StateError> {
        self.backend.as_deref_mut().ok_or_else(|| state::StateError::Backend("this function has no keyed state".into()))
    }

    fn read(&mut self, name: &str, kind: StateKind, suffix: &[u8]) -> Result<Option<Vec<u8>>, state::StateError> {
        self.state_key(name, kind)?;
        self.key_buf.extend_from_slice(suffix);
        let key = std::mem::take(&mut self.key_buf);
        let result = self.backend()?.get(&key).map_err(backend_error);
        self.key_buf = key;
        result
    }

    fn write(&mut self, name: &str, kind: StateKind, suffix: &[u8], value: Option<&[u8]>) -> Result<(), state::StateError> {
        check_len(suffix.len())?;
        if let Some(value) = value {
            check_len(value.len())?;
        }
        self.state_key(name, kind)?;
        self.key_buf.extend_from_slice(suffix);
        let key = std::mem::take(&mut self.key_buf);
        let backend = self.backend()?;
        let result = match value {
            Some(value) => backend.put(&key, value),
            None => backend.delete(&key),
        };
        self.key_buf = key;
        result.map_err(backend_error)
    }

    fn prefix(&mut self, name: &str, kind: StateKind) -> Result<Vec<u8>, state::StateError> {
        self.state_key(name, kind)?;
        Ok(self.key_buf.clone())
    }

    fn handle_name<T: 'static>(&self, handle: &Resource<T>, name: impl Fn(&T) -> &str) -> wasmtime::Result<String> {
        Ok(name(self.table.get(handle)?).to_string())
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
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

fn check_name(name: &str) -> Result<(), state::StateError> {
    if name.is_empty() || name.len() > MAX_STATE_NAME_LEN {
        return Err(state::StateError::InvalidName(name.chars().take(64).collect()));
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

/// Register the `state`, `context` and `types` interfaces, and the
/// sandboxed WASI (see [`super::wasi`]), in `linker`.
pub fn add_to_linker(linker: &mut Linker<HostCtx>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    state::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    context::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    types::add_to_linker::<HostCtx, HasSelf<HostCtx>>(linker, |ctx| ctx)?;
    Ok(())
}

type StateResult<T> = wasmtime::Result<Result<T, state::StateError>>;

impl types::Host for HostCtx {}

impl state::Host for HostCtx {
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
    fn open(&mut self, name: String) -> StateResult<Resource<ValueStateHandle>> {
        if let Err(e) = check_name(&name) {
            return Ok(Err(e));
        }
        Ok(Ok(self.table.push(ValueStateHandle { name })?))
    }

    fn get(&mut self, handle: Resource<ValueStateHandle>) -> StateResult<Option<Vec<u8>>> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.read(&name, StateKind::Value, b""))
    }

    fn set(&mut self, handle: Resource<ValueStateHandle>, value: Vec<u8>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.write(&name, StateKind::Value, b"", Some(&value)))
    }

    fn clear(&mut self, handle: Resource<ValueStateHandle>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.write(&name, StateKind::Value, b"", None))
    }

    fn drop(&mut self, handle: Resource<ValueStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl state::HostMapState for HostCtx {
    fn open(&mut self, name: String) -> StateResult<Resource<MapStateHandle>> {
        if let Err(e) = check_name(&name) {
            return Ok(Err(e));
        }
        Ok(Ok(self.table.push(MapStateHandle { name })?))
    }

    fn get(&mut self, handle: Resource<MapStateHandle>, user_key: Vec<u8>) -> StateResult<Option<Vec<u8>>> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.read(&name, StateKind::Map, &user_key))
    }

    fn put(&mut self, handle: Resource<MapStateHandle>, user_key: Vec<u8>, value: Vec<u8>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.write(&name, StateKind::Map, &user_key, Some(&value)))
    }

    fn remove(&mut self, handle: Resource<MapStateHandle>, user_key: Vec<u8>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.write(&name, StateKind::Map, &user_key, None))
    }

    fn contains(&mut self, handle: Resource<MapStateHandle>, user_key: Vec<u8>) -> StateResult<bool> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.read(&name, StateKind::Map, &user_key).map(|v| v.is_some()))
    }

    fn entries(&mut self, handle: Resource<MapStateHandle>, start_after: Option<Vec<u8>>, limit: u32) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        let scan = |ctx: &mut Self| -> Result<_, state::StateError> {
            let prefix = ctx.prefix(&name, StateKind::Map)?;
            let limit = limit.min(MAX_ENTRIES_PAGE) as usize;
            ctx.backend()?.scan(&prefix, start_after.as_deref(), limit).map_err(backend_error)
        };
        Ok(scan(self))
    }

    fn is_empty(&mut self, handle: Resource<MapStateHandle>) -> StateResult<bool> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        let scan = |ctx: &mut Self| -> Result<_, state::StateError> {
            let prefix = ctx.prefix(&name, StateKind::Map)?;
            Ok(ctx.backend()?.scan(&prefix, None, 1).map_err(backend_error)?.is_empty())
        };
        Ok(scan(self))
    }

    fn clear(&mut self, handle: Resource<MapStateHandle>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        let clear = |ctx: &mut Self| -> Result<_, state::StateError> {
            let prefix = ctx.prefix(&name, StateKind::Map)?;
            ctx.backend()?.delete_prefix(&prefix).map_err(backend_error)
        };
        Ok(clear(self))
    }

    fn drop(&mut self, handle: Resource<MapStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl HostCtx {
    fn list_append(&mut self, name: &str, values: &[&[u8]]) -> Result<(), state::StateError> {
        let mut stored = self.read(name, StateKind::List, b"")?.unwrap_or_default();
        encode_list(&mut stored, values.iter().copied());
        self.write(name, StateKind::List, b"", Some(&stored))
    }

    fn list_replace(&mut self, name: &str, values: &[Vec<u8>]) -> Result<(), state::StateError> {
        if values.is_empty() {
            return self.write(name, StateKind::List, b"", None);
        }
        let mut stored = Vec::new();
        encode_list(&mut stored, values.iter().map(Vec::as_slice));
        self.write(name, StateKind::List, b"", Some(&stored))
    }
}

impl state::HostListState for HostCtx {
    fn open(&mut self, name: String) -> StateResult<Resource<ListStateHandle>> {
        if let Err(e) = check_name(&name) {
            return Ok(Err(e));
        }
        Ok(Ok(self.table.push(ListStateHandle { name })?))
    }

    fn add(&mut self, handle: Resource<ListStateHandle>, value: Vec<u8>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.list_append(&name, &[&value]))
    }

    fn add_all(&mut self, handle: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        Ok(self.list_append(&name, &values))
    }

    fn get(&mut self, handle: Resource<ListStateHandle>) -> StateResult<Vec<Vec<u8>>> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.read(&name, StateKind::List, b"").and_then(|v| v.map_or(Ok(Vec::new()), |b| decode_list(&b))))
    }

    fn update(&mut self, handle: Resource<ListStateHandle>, values: Vec<Vec<u8>>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.list_replace(&name, &values))
    }

    fn clear(&mut self, handle: Resource<ListStateHandle>) -> StateResult<()> {
        let name = self.handle_name(&handle, |h| &h.name)?;
        Ok(self.list_replace(&name, &[]))
    }

    fn drop(&mut self, handle: Resource<ListStateHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl context::Host for HostCtx {
    fn emit(&mut self, output: Event) -> wasmtime::Result<()> {
        self.outputs.push(output);
        Ok(())
    }

    fn emit_to(&mut self, name: String, output: Event) -> wasmtime::Result<()> {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_encoding_round_trips() {
        let mut bytes = Vec::new();
        encode_list(&mut bytes, [&b"a"[..], b"", b"xyz"].into_iter());
        assert_eq!(decode_list(&bytes).unwrap(), vec![b"a".to_vec(), vec![], b"xyz".to_vec()]);
        assert!(decode_list(&bytes[..bytes.len() - 1]).is_err());
    }
}
