//! The host API off `wasm32`: an in-memory stand-in, one per thread, that
//! behaves like the real host (state scoped to the selected key, times to
//! live measured in processing time, outputs collected) so `cargo test`
//! can exercise a function's logic.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::{Error, Event, LogLevel, TimeDomain, Ttl, TtlUpdate};

/// Longest state name the host accepts, in bytes.
const MAX_NAME_LEN: usize = 255;

/// A state slot: (state name, key).
type Slot = (String, Vec<u8>);
/// Map entries as the host returns them.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A stored value and when it expires (processing time, ms).
#[derive(Clone)]
pub(crate) struct Stored<T> {
    pub(crate) value: T,
    expires_at: Option<i64>,
}

impl<T> Stored<T> {
    fn new(value: T, ttl: Option<Ttl>, now: i64) -> Self {
        Self { value, expires_at: ttl.map(|t| now.saturating_add(t.millis() as i64)) }
    }

    pub(crate) fn is_live(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    /// Renew on read, when the TTL says reads count.
    fn touch(&mut self, ttl: Option<Ttl>, now: i64) {
        if let Some(ttl) = ttl.filter(|t| t.update == TtlUpdate::OnReadAndWrite) {
            self.expires_at = Some(now.saturating_add(ttl.millis() as i64));
        }
    }
}

/// Everything the stand-in host remembers.
#[derive(Default)]
pub(crate) struct MockHost {
    pub(crate) current_key: Option<Vec<u8>>,
    pub(crate) values: HashMap<Slot, Stored<Vec<u8>>>,
    pub(crate) maps: HashMap<Slot, BTreeMap<Vec<u8>, Stored<Vec<u8>>>>,
    pub(crate) lists: HashMap<Slot, Stored<Vec<Vec<u8>>>>,
    pub(crate) emitted: Vec<Event>,
    pub(crate) side_outputs: Vec<(String, Event)>,
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
    pub(crate) logs: Vec<(LogLevel, String)>,
    /// Registered timers: (domain as 0 = event time / 1 = processing time,
    /// timestamp, key), so iteration is in timestamp order per domain.
    pub(crate) timers: BTreeSet<(u8, i64, Vec<u8>)>,
    /// Broadcast maps by name.
    pub(crate) broadcast: HashMap<String, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Whether broadcast maps may be written (while handling broadcast
    /// events).
    pub(crate) broadcast_writable: bool,
}

/// The sort index of a time domain in [`MockHost::timers`].
pub(crate) fn domain_index(domain: TimeDomain) -> u8 {
    match domain {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

thread_local! {
    static MOCK: RefCell<MockHost> = RefCell::new(MockHost { watermark: i64::MIN, ..MockHost::default() });
}

/// Run `f` on this thread's stand-in host.
pub(crate) fn with_mock<R>(f: impl FnOnce(&mut MockHost) -> R) -> R {
    MOCK.with(|mock| f(&mut mock.borrow_mut()))
}

/// A handle's state: its name and time to live.
pub(crate) struct Handle {
    name: String,
    ttl: Option<Ttl>,
}

impl Handle {
    fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::msg(format!("invalid state name {name:?}")));
        }
        Ok(Self { name: name.to_string(), ttl })
    }

    /// Run `f` with the mock, this handle's slot for the current key, and
    /// the processing time.
    fn with<R>(&self, f: impl FnOnce(&mut MockHost, Slot, i64) -> R) -> Result<R, Error> {
        with_mock(|m| {
            let key = m
                .current_key
                .clone()
                .ok_or_else(|| Error::msg("state used outside of `process`"))?;
            let now = m.processing_time;
            Ok(f(m, (self.name.clone(), key), now))
        })
    }
}

/// Scope state to `key` (`index` is only meaningful inside a component).
pub(crate) fn select_key(_index: u32, key: &[u8]) -> Result<(), Error> {
    with_mock(|m| m.current_key = Some(key.to_vec()));
    Ok(())
}

/// A value-state handle.
pub(crate) struct RawValue(Handle);

impl RawValue {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        Handle::open(name, ttl).map(Self)
    }
    pub(crate) fn get(&self) -> Result<Option<Vec<u8>>, Error> {
        let ttl = self.0.ttl;
        self.0.with(|m, slot, now| match m.values.get_mut(&slot) {
            Some(stored) if stored.is_live(now) => {
                stored.touch(ttl, now);
                Some(stored.value.clone())
            }
            _ => None,
        })
    }
    pub(crate) fn get_with<R>(&self, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R, Error> {
        Ok(f(self.get()?.as_deref()))
    }
    pub(crate) fn set(&self, value: &[u8]) -> Result<(), Error> {
        let ttl = self.0.ttl;
        self.0.with(|m, slot, now| {
            m.values.insert(slot, Stored::new(value.to_vec(), ttl, now));
        })
    }
    pub(crate) fn set_with(
        &self,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut value = Vec::new();
        encode(&mut value)?;
        self.set(&value)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.0.with(|m, slot, _| {
            m.values.remove(&slot);
        })
    }
}

/// A map-state handle.
pub(crate) struct RawMap(Handle);

impl RawMap {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        Handle::open(name, ttl).map(Self)
    }
    fn with_map<R>(
        &self,
        f: impl FnOnce(&mut BTreeMap<Vec<u8>, Stored<Vec<u8>>>, i64) -> R,
    ) -> Result<R, Error> {
        self.0.with(|m, slot, now| {
            let map = m.maps.entry(slot.clone()).or_default();
            map.retain(|_, stored| stored.is_live(now));
            let result = f(map, now);
            if map.is_empty() {
                m.maps.remove(&slot);
            }
            result
        })
    }
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let ttl = self.0.ttl;
        self.with_map(|map, now| {
            map.get_mut(key).map(|stored| {
                stored.touch(ttl, now);
                stored.value.clone()
            })
        })
    }
    pub(crate) fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let ttl = self.0.ttl;
        self.with_map(|map, now| {
            map.insert(key.to_vec(), Stored::new(value.to_vec(), ttl, now));
        })
    }
    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), Error> {
        self.with_map(|map, _| {
            map.remove(key);
        })
    }
    pub(crate) fn contains(&self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.get(key)?.is_some())
    }
    pub(crate) fn entries(&self, start_after: Option<&[u8]>, limit: u32) -> Result<Entries, Error> {
        use std::ops::Bound;
        let lower = start_after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec()));
        self.with_map(|map, _| {
            map.range((lower, Bound::Unbounded))
                .take(limit as usize)
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect()
        })
    }
    pub(crate) fn is_empty(&self) -> Result<bool, Error> {
        self.with_map(|map, _| map.is_empty())
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.with_map(|map, _| map.clear())
    }
}

/// A list-state handle.
pub(crate) struct RawList(Handle);

impl RawList {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        Handle::open(name, ttl).map(Self)
    }
    /// Change the live list (empty if absent or expired) with `f`.
    fn change(&self, f: impl FnOnce(&mut Vec<Vec<u8>>)) -> Result<(), Error> {
        let ttl = self.0.ttl;
        self.0.with(|m, slot, now| {
            let mut list = m
                .lists
                .remove(&slot)
                .filter(|s| s.is_live(now))
                .map(|s| s.value)
                .unwrap_or_default();
            f(&mut list);
            if !list.is_empty() {
                m.lists.insert(slot, Stored::new(list, ttl, now));
            }
        })
    }
    pub(crate) fn add(&self, value: &[u8]) -> Result<(), Error> {
        self.change(|list| list.push(value.to_vec()))
    }
    pub(crate) fn add_all(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.change(|list| list.extend_from_slice(values))
    }
    pub(crate) fn get(&self) -> Result<Vec<Vec<u8>>, Error> {
        let ttl = self.0.ttl;
        self.0.with(|m, slot, now| match m.lists.get_mut(&slot) {
            Some(stored) if stored.is_live(now) => {
                stored.touch(ttl, now);
                stored.value.clone()
            }
            _ => Vec::new(),
        })
    }
    pub(crate) fn update(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.change(|list| *list = values.to_vec())
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.change(Vec::clear)
    }
}

/// A broadcast-map handle: its name.
pub(crate) struct RawBroadcast(String);

impl RawBroadcast {
    pub(crate) fn open(name: &str) -> Result<Self, Error> {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::msg(format!("invalid state name {name:?}")));
        }
        Ok(Self(name.to_string()))
    }
    fn write(&self, f: impl FnOnce(&mut BTreeMap<Vec<u8>, Vec<u8>>)) -> Result<(), Error> {
        with_mock(|m| {
            if !m.broadcast_writable {
                return Err(Error::msg(format!("state backend: {BROADCAST_READ_ONLY}")));
            }
            f(m.broadcast.entry(self.0.clone()).or_default());
            Ok(())
        })
    }
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(with_mock(|m| m.broadcast.get(&self.0).and_then(|map| map.get(key).cloned())))
    }
    pub(crate) fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.write(|map| {
            map.insert(key.to_vec(), value.to_vec());
        })
    }
    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), Error> {
        self.write(|map| {
            map.remove(key);
        })
    }
    pub(crate) fn entries(&self, start_after: Option<&[u8]>, limit: u32) -> Result<Entries, Error> {
        use std::ops::Bound;
        let lower = start_after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec()));
        Ok(with_mock(|m| {
            m.broadcast.get(&self.0).map_or_else(Vec::new, |map| {
                map.range((lower, Bound::Unbounded))
                    .take(limit as usize)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
        }))
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.write(BTreeMap::clear)
    }
}

/// What a broadcast write outside `process_broadcast` gets (as the host
/// says it).
const BROADCAST_READ_ONLY: &str = "broadcast state is read-only while processing keyed events \
    or timers: write it while handling broadcast events (`process-broadcast`), so every subtask \
    keeps the same contents";

pub(crate) fn register_timer(domain: TimeDomain, timestamp: i64) -> Result<(), Error> {
    with_mock(|m| {
        let key =
            m.current_key.clone().ok_or_else(|| Error::msg("timers used outside of `process`"))?;
        m.timers.insert((domain_index(domain), timestamp, key));
        Ok(())
    })
}

pub(crate) fn delete_timer(domain: TimeDomain, timestamp: i64) -> Result<(), Error> {
    with_mock(|m| {
        let key =
            m.current_key.clone().ok_or_else(|| Error::msg("timers used outside of `process`"))?;
        m.timers.remove(&(domain_index(domain), timestamp, key));
        Ok(())
    })
}

/// A `process` batch begins (the native stand-in reads nothing ahead).
pub(crate) fn begin_batch(
    _prefetched: crate::bindings::weir::function::types::ValueCells,
    _keys: usize,
) {
}

/// Tell the host which key the function is on (natively it always knows).
pub(crate) fn report_current_key() {}

/// The batch ends (nothing buffered natively).
pub(crate) fn end_batch() -> Result<(), Error> {
    Ok(())
}

pub(crate) fn emit_batch(batch: &crate::bindings::weir::function::types::EventBatch) {
    let events = crate::packing::unpack(batch)
        .unwrap_or_else(|e| panic!("the SDK packed a malformed batch: {e}"));
    with_mock(|m| m.emitted.extend(events));
}

pub(crate) fn emit_to(name: &str, event: &Event) {
    with_mock(|m| m.side_outputs.push((name.to_string(), event.clone())));
}

pub(crate) fn current_watermark() -> i64 {
    with_mock(|m| m.watermark)
}

pub(crate) fn processing_time() -> i64 {
    with_mock(|m| m.processing_time)
}

pub(crate) fn log(level: LogLevel, message: &str) {
    with_mock(|m| m.logs.push((level, message.to_string())));
}
