//! The host side of the WIT `broadcast` interface: broadcast map state,
//! the same contents on every subtask of a stage, as Flink's broadcast
//! state.
//!
//! Broadcast maps live in the subtask's own keyed state backend (through
//! the same cache and journal as keyed state, so a failed call's writes
//! roll back and a checkpoint holds them), under the reserved key group
//! [`BROADCAST_KEY_GROUP`]: state name, [`StateKind::Map`], an empty key
//! and namespace, then the map's user key. The pipeline copies those
//! entries to every subtask when it restores a checkpoint.
//!
//! [`BroadcastCtx`] holds whether the maps may be written — only while
//! the function handles broadcast events (`broadcast-fn.process-broadcast`),
//! so every subtask applies the same writes in the same order and the
//! contents stay equal; elsewhere a write is a `state-error.backend`.
//! [`BroadcastView`] borrows it with the backend and the guest's handles
//! and implements the bindings' `HostBroadcastMap`. Every value from a
//! guest is hostile: names, sizes and handles are checked before use.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host::{self, HostCtx}};
//! # use weir_host::runtime::bindings::weir::function::broadcast::HostBroadcastMap;
//! # use weir_host::state::InMemoryBackend;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host::broadcast::add_to_linker(&mut linker, HostCtx::broadcast).unwrap();
//! // The host calls it natively the same way:
//! let mut ctx = HostCtx::new("fraud-rules", Some(Box::new(InMemoryBackend::new())), 128);
//! ctx.set_broadcast_writable(true);
//! let rules = HostBroadcastMap::open(&mut ctx.broadcast(), "rules".into()).unwrap().unwrap();
//! HostBroadcastMap::put(&mut ctx.broadcast(), rules, b"big".to_vec(), b"500".to_vec())
//!     .unwrap()
//!     .unwrap();
//! ```

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::super::bindings::weir::function::{broadcast, state};
use super::state::{backend_error, no_keyed_state, MAX_ENTRIES_PAGE, MAX_VALUE_LEN};
use super::CallScope;
use crate::state::encoding::entry_key_into;
use crate::state::{
    ttl, KeyedStateBackend, ScanEntry, StateKind, BROADCAST_KEY_GROUP, MAX_STATE_NAME_LEN,
};

/// What a write outside `process-broadcast` gets.
pub const READ_ONLY: &str = "broadcast state is read-only while processing keyed events or \
    timers: write it while handling broadcast events (`process-broadcast`), so every subtask \
    keeps the same contents";

/// A broadcast-map handle held by a guest: the map's name.
pub struct BroadcastMapHandle(Arc<str>);

/// What the `broadcast` interface keeps for one function instance.
#[derive(Default)]
pub struct BroadcastCtx {
    /// Whether the maps may be written (the function is handling
    /// broadcast events).
    writable: bool,
    /// Buffers reused by every storage key and stored value.
    key_buf: Vec<u8>,
    write_buf: Vec<u8>,
}

impl BroadcastCtx {
    /// Allow writes (while the function handles broadcast events) or not.
    pub fn set_writable(&mut self, writable: bool) {
        self.writable = writable;
    }
}

/// The `broadcast` interface's view of a store: its context, the call (for
/// its processing time), the state backend and the guest's handles.
pub struct BroadcastView<'a> {
    pub(super) ctx: &'a mut BroadcastCtx,
    pub(super) call: &'a CallScope,
    pub(super) backend: Option<&'a mut (dyn KeyedStateBackend + 'static)>,
    pub(super) table: &'a mut ResourceTable,
}

/// [`HasData`] for the `broadcast` interface: its bindings see a
/// [`BroadcastView`].
pub struct WeirBroadcast;

impl HasData for WeirBroadcast {
    type Data<'a> = BroadcastView<'a>;
}

/// Register the `broadcast` interface in `linker`, reached through `get`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> BroadcastView<'_>,
) -> wasmtime::Result<()> {
    broadcast::add_to_linker::<T, WeirBroadcast>(linker, get)
}

type StateResult<T> = wasmtime::Result<Result<T, state::StateError>>;

impl BroadcastView<'_> {
    /// The name of the map behind `handle` (a trap if the handle is bad).
    fn name(&self, handle: &Resource<BroadcastMapHandle>) -> wasmtime::Result<Arc<str>> {
        Ok(Arc::clone(&self.table.get(handle)?.0))
    }

    /// Run `f` with the backend and the storage key of map `name`'s entry
    /// `user_key` (the whole map's prefix when empty).
    fn with_key<R>(
        &mut self,
        name: &str,
        user_key: &[u8],
        f: impl FnOnce(&mut dyn KeyedStateBackend, &[u8]) -> Result<R, crate::state::StateError>,
    ) -> Result<R, state::StateError> {
        self.ctx.key_buf.clear();
        entry_key_into(
            &mut self.ctx.key_buf,
            BROADCAST_KEY_GROUP,
            name,
            StateKind::Map,
            b"",
            user_key,
        );
        let backend = self.backend.as_deref_mut().ok_or_else(no_keyed_state)?;
        f(backend, &self.ctx.key_buf).map_err(backend_error)
    }

    /// Whether the maps may be written now.
    fn check_writable(&self) -> Result<(), state::StateError> {
        if self.ctx.writable {
            Ok(())
        } else {
            Err(state::StateError::Backend(READ_ONLY.into()))
        }
    }

    fn get(&mut self, name: &str, user_key: &[u8]) -> Result<Option<Vec<u8>>, state::StateError> {
        check_len(user_key.len())?;
        let now = self.call.processing_time;
        self.with_key(name, user_key, |backend, key| {
            let Some(stored) = backend.get(key)? else { return Ok(None) };
            Ok(ttl::decode(&stored, now)?.map(<[u8]>::to_vec))
        })
    }

    fn write(
        &mut self,
        name: &str,
        user_key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), state::StateError> {
        self.check_writable()?;
        check_len(user_key.len())?;
        let mut stored = std::mem::take(&mut self.ctx.write_buf);
        stored.clear();
        if let Some(value) = value {
            check_len(value.len())?;
            ttl::encode_into(&mut stored, value, None);
        }
        let result = self.with_key(name, user_key, |backend, key| match value {
            Some(_) => backend.put(key, &stored),
            None => backend.delete(key),
        });
        self.ctx.write_buf = stored;
        result
    }

    fn entries(
        &mut self,
        name: &str,
        start_after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, state::StateError> {
        if let Some(start) = &start_after {
            check_len(start.len())?;
        }
        let now = self.call.processing_time;
        self.with_key(name, b"", |backend, prefix| {
            let page = backend.scan(prefix, start_after.as_deref(), limit)?;
            let mut live = Vec::with_capacity(page.len());
            for (user_key, stored) in page {
                if let Some(value) = ttl::decode(&stored, now)? {
                    live.push((user_key, value.to_vec()));
                }
            }
            Ok(live)
        })
    }
}

fn check_len(len: usize) -> Result<(), state::StateError> {
    if len > MAX_VALUE_LEN {
        return Err(state::StateError::TooLarge(MAX_VALUE_LEN as u64));
    }
    Ok(())
}

impl broadcast::Host for BroadcastView<'_> {}

impl broadcast::HostBroadcastMap for BroadcastView<'_> {
    fn open(&mut self, name: String) -> StateResult<Resource<BroadcastMapHandle>> {
        if name.is_empty() || name.len() > MAX_STATE_NAME_LEN {
            return Ok(Err(state::StateError::InvalidName(name.chars().take(64).collect())));
        }
        Ok(Ok(self.table.push(BroadcastMapHandle(name.into()))?))
    }

    fn get(
        &mut self,
        handle: Resource<BroadcastMapHandle>,
        user_key: Vec<u8>,
    ) -> StateResult<Option<Vec<u8>>> {
        let name = self.name(&handle)?;
        Ok(BroadcastView::get(self, &name, &user_key))
    }

    fn put(
        &mut self,
        handle: Resource<BroadcastMapHandle>,
        user_key: Vec<u8>,
        value: Vec<u8>,
    ) -> StateResult<()> {
        let name = self.name(&handle)?;
        Ok(self.write(&name, &user_key, Some(&value)))
    }

    fn remove(
        &mut self,
        handle: Resource<BroadcastMapHandle>,
        user_key: Vec<u8>,
    ) -> StateResult<()> {
        let name = self.name(&handle)?;
        Ok(self.write(&name, &user_key, None))
    }

    fn entries(
        &mut self,
        handle: Resource<BroadcastMapHandle>,
        start_after: Option<Vec<u8>>,
        limit: u32,
    ) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let name = self.name(&handle)?;
        let limit = limit.clamp(1, MAX_ENTRIES_PAGE) as usize;
        Ok(BroadcastView::entries(self, &name, start_after, limit))
    }

    fn clear(&mut self, handle: Resource<BroadcastMapHandle>) -> StateResult<()> {
        let name = self.name(&handle)?;
        if let Err(error) = self.check_writable() {
            return Ok(Err(error));
        }
        Ok(self.with_key(&name, b"", |backend, prefix| backend.delete_prefix(prefix)))
    }

    fn drop(&mut self, handle: Resource<BroadcastMapHandle>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::HostCtx;
    use super::*;
    use crate::state::{InMemoryBackend, StateKey};
    use broadcast::HostBroadcastMap;

    fn open(ctx: &mut HostCtx, name: &str) -> Resource<BroadcastMapHandle> {
        HostBroadcastMap::open(&mut ctx.broadcast(), name.into()).unwrap().unwrap()
    }

    fn borrow(h: &Resource<BroadcastMapHandle>) -> Resource<BroadcastMapHandle> {
        Resource::new_borrow(h.rep())
    }

    #[test]
    fn maps_are_written_only_while_handling_broadcast_events() {
        let mut ctx = HostCtx::new("test", Some(Box::new(InMemoryBackend::new())), 128);
        let rules = open(&mut ctx, "rules");
        let put = |ctx: &mut HostCtx, k: &[u8], v: &[u8]| {
            HostBroadcastMap::put(&mut ctx.broadcast(), borrow(&rules), k.to_vec(), v.to_vec())
                .unwrap()
        };
        let read_only = put(&mut ctx, b"big", b"500");
        assert!(
            matches!(&read_only, Err(state::StateError::Backend(m)) if m.contains("read-only")),
            "{read_only:?}"
        );
        ctx.set_broadcast_writable(true);
        put(&mut ctx, b"big", b"500").unwrap();
        put(&mut ctx, b"small", b"1").unwrap();
        put(&mut ctx, b"tiny", b"0").unwrap();
        HostBroadcastMap::remove(&mut ctx.broadcast(), borrow(&rules), b"tiny".to_vec())
            .unwrap()
            .unwrap();
        ctx.set_broadcast_writable(false);
        // Reads work anywhere, also while a key is selected.
        ctx.begin_batch([&b"a1"[..]].into_iter());
        let get = |ctx: &mut HostCtx, k: &[u8]| {
            HostBroadcastMap::get(&mut ctx.broadcast(), borrow(&rules), k.to_vec())
                .unwrap()
                .unwrap()
        };
        assert_eq!(get(&mut ctx, b"big"), Some(b"500".to_vec()));
        assert_eq!(get(&mut ctx, b"tiny"), None);
        let all = HostBroadcastMap::entries(&mut ctx.broadcast(), borrow(&rules), None, 10)
            .unwrap()
            .unwrap();
        assert_eq!(
            all,
            vec![(b"big".to_vec(), b"500".to_vec()), (b"small".to_vec(), b"1".to_vec())]
        );
        let after = HostBroadcastMap::entries(
            &mut ctx.broadcast(),
            borrow(&rules),
            Some(b"big".to_vec()),
            0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(after, vec![(b"small".to_vec(), b"1".to_vec())], "a limit of 0 is one");
        assert!(HostBroadcastMap::clear(&mut ctx.broadcast(), borrow(&rules)).unwrap().is_err());
        assert!(HostBroadcastMap::remove(&mut ctx.broadcast(), borrow(&rules), b"big".to_vec())
            .unwrap()
            .is_err());
        ctx.end_batch();
        ctx.set_broadcast_writable(true);
        HostBroadcastMap::clear(&mut ctx.broadcast(), borrow(&rules)).unwrap().unwrap();
        assert_eq!(get(&mut ctx, b"big"), None);
    }

    #[test]
    fn entries_live_under_the_broadcast_key_group_and_maps_are_apart() {
        let mut ctx = HostCtx::new("test", Some(Box::new(InMemoryBackend::new())), 128);
        ctx.set_broadcast_writable(true);
        let (a, b) = (open(&mut ctx, "a"), open(&mut ctx, "b"));
        HostBroadcastMap::put(&mut ctx.broadcast(), borrow(&a), b"k".to_vec(), b"1".to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(
            HostBroadcastMap::get(&mut ctx.broadcast(), borrow(&b), b"k".to_vec())
                .unwrap()
                .unwrap(),
            None
        );
        let mut key = StateKey::new(BROADCAST_KEY_GROUP, "a", StateKind::Map, b"", b"").encode();
        key.extend_from_slice(b"k");
        let stored = ctx.backend_mut().unwrap().get(&key).unwrap().unwrap();
        assert_eq!(ttl::decode(&stored, 0).unwrap(), Some(&b"1"[..]));
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic() {
        let mut ctx = HostCtx::new("test", Some(Box::new(InMemoryBackend::new())), 128);
        ctx.set_broadcast_writable(true);
        assert!(matches!(
            HostBroadcastMap::open(&mut ctx.broadcast(), String::new()).unwrap(),
            Err(state::StateError::InvalidName(_))
        ));
        assert!(HostBroadcastMap::open(&mut ctx.broadcast(), "x".repeat(256)).unwrap().is_err());
        let m = open(&mut ctx, "m");
        let huge = vec![0; MAX_VALUE_LEN + 1];
        assert!(matches!(
            HostBroadcastMap::put(&mut ctx.broadcast(), borrow(&m), huge.clone(), b"v".to_vec())
                .unwrap(),
            Err(state::StateError::TooLarge(_))
        ));
        assert!(matches!(
            HostBroadcastMap::put(&mut ctx.broadcast(), borrow(&m), b"k".to_vec(), huge).unwrap(),
            Err(state::StateError::TooLarge(_))
        ));
        let mut keyless = HostCtx::new("test", None, 1);
        keyless.set_broadcast_writable(true);
        let m = open(&mut keyless, "m");
        assert!(HostBroadcastMap::get(&mut keyless.broadcast(), m, b"k".to_vec())
            .unwrap()
            .is_err());
        let stale = Resource::<BroadcastMapHandle>::new_borrow(9999);
        assert!(
            HostBroadcastMap::get(&mut ctx.broadcast(), stale, b"k".to_vec()).is_err(),
            "a trap"
        );
    }
}
