//! The host API off `wasm32`: an in-memory stand-in, one per thread, that
//! behaves like the real host (state scoped to the selected key, outputs
//! collected) so `cargo test` can exercise a function's logic.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use crate::{Error, Event, LogLevel};

/// Longest state name the host accepts, in bytes.
const MAX_NAME_LEN: usize = 255;

/// A state slot: (state name, key).
type Slot = (String, Vec<u8>);
/// Map entries as the host returns them.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Everything the stand-in host remembers.
#[derive(Default)]
pub(crate) struct MockHost {
    pub(crate) current_key: Option<Vec<u8>>,
    pub(crate) values: HashMap<Slot, Vec<u8>>,
    pub(crate) maps: HashMap<Slot, BTreeMap<Vec<u8>, Vec<u8>>>,
    pub(crate) lists: HashMap<Slot, Vec<Vec<u8>>>,
    pub(crate) emitted: Vec<Event>,
    pub(crate) side_outputs: Vec<(String, Event)>,
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
    pub(crate) logs: Vec<(LogLevel, String)>,
}

thread_local! {
    static MOCK: RefCell<MockHost> = RefCell::new(MockHost { watermark: i64::MIN, ..MockHost::default() });
}

/// Run `f` on this thread's stand-in host.
pub(crate) fn with_mock<R>(f: impl FnOnce(&mut MockHost) -> R) -> R {
    MOCK.with(|mock| f(&mut mock.borrow_mut()))
}

fn check_name(name: &str) -> Result<String, Error> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(Error::msg(format!("invalid state name {name:?}")));
    }
    Ok(name.to_string())
}

/// The (state name, current key) slot a handle refers to.
fn slot(name: &str) -> Result<Slot, Error> {
    with_mock(|m| m.current_key.clone())
        .map(|key| (name.to_string(), key))
        .ok_or_else(|| Error::msg("state used outside of `process`"))
}

/// Scope state to `key` (`index` is only meaningful inside a component).
pub(crate) fn select_key(_index: u32, key: &[u8]) -> Result<(), Error> {
    with_mock(|m| m.current_key = Some(key.to_vec()));
    Ok(())
}

/// A value-state handle.
pub(crate) struct RawValue(String);

impl RawValue {
    pub(crate) fn open(name: &str) -> Result<Self, Error> {
        check_name(name).map(Self)
    }
    pub(crate) fn get(&self) -> Result<Option<Vec<u8>>, Error> {
        let slot = slot(&self.0)?;
        Ok(with_mock(|m| m.values.get(&slot).cloned()))
    }
    pub(crate) fn set(&self, value: &[u8]) -> Result<(), Error> {
        let slot = slot(&self.0)?;
        with_mock(|m| m.values.insert(slot, value.to_vec()));
        Ok(())
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        let slot = slot(&self.0)?;
        with_mock(|m| m.values.remove(&slot));
        Ok(())
    }
}

/// A map-state handle.
pub(crate) struct RawMap(String);

impl RawMap {
    pub(crate) fn open(name: &str) -> Result<Self, Error> {
        check_name(name).map(Self)
    }
    fn with_map<R>(&self, f: impl FnOnce(&mut BTreeMap<Vec<u8>, Vec<u8>>) -> R) -> Result<R, Error> {
        let slot = slot(&self.0)?;
        Ok(with_mock(|m| {
            let map = m.maps.entry(slot.clone()).or_default();
            let result = f(map);
            if map.is_empty() {
                m.maps.remove(&slot);
            }
            result
        }))
    }
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.with_map(|map| map.get(key).cloned())
    }
    pub(crate) fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.with_map(|map| {
            map.insert(key.to_vec(), value.to_vec());
        })
    }
    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), Error> {
        self.with_map(|map| {
            map.remove(key);
        })
    }
    pub(crate) fn contains(&self, key: &[u8]) -> Result<bool, Error> {
        self.with_map(|map| map.contains_key(key))
    }
    pub(crate) fn entries(&self, start_after: Option<&[u8]>, limit: u32) -> Result<Entries, Error> {
        use std::ops::Bound;
        let lower = start_after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec()));
        self.with_map(|map| {
            map.range((lower, Bound::Unbounded)).take(limit as usize).map(|(k, v)| (k.clone(), v.clone())).collect()
        })
    }
    pub(crate) fn is_empty(&self) -> Result<bool, Error> {
        self.with_map(|map| map.is_empty())
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.with_map(|map| map.clear())
    }
}

/// A list-state handle.
pub(crate) struct RawList(String);

impl RawList {
    pub(crate) fn open(name: &str) -> Result<Self, Error> {
        check_name(name).map(Self)
    }
    fn with_list<R>(&self, f: impl FnOnce(&mut Vec<Vec<u8>>) -> R) -> Result<R, Error> {
        let slot = slot(&self.0)?;
        Ok(with_mock(|m| {
            let list = m.lists.entry(slot.clone()).or_default();
            let result = f(list);
            if list.is_empty() {
                m.lists.remove(&slot);
            }
            result
        }))
    }
    pub(crate) fn add(&self, value: &[u8]) -> Result<(), Error> {
        self.with_list(|list| list.push(value.to_vec()))
    }
    pub(crate) fn add_all(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.with_list(|list| list.extend_from_slice(values))
    }
    pub(crate) fn get(&self) -> Result<Vec<Vec<u8>>, Error> {
        self.with_list(|list| list.clone())
    }
    pub(crate) fn update(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.with_list(|list| *list = values.to_vec())
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.with_list(|list| list.clear())
    }
}

pub(crate) fn emit(event: Event) {
    with_mock(|m| m.emitted.push(event));
}

pub(crate) fn emit_to(name: &str, event: Event) {
    with_mock(|m| m.side_outputs.push((name.to_string(), event)));
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
