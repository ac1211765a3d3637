//! Typed keyed state: values are encoded with [`codec`](crate::codec) and
//! kept by the host, scoped to the key being processed; and typed
//! broadcast state ([`BroadcastState`]), the same for every key.
//!
//! A handle is cheap to create and is opened on first use; keep handles in
//! the function's struct and reuse them for every key.

use std::cell::OnceCell;
use std::marker::PhantomData;
use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use crate::host::{RawBroadcast, RawList, RawMap, RawValue, MAP_PAGE};
use crate::{codec, Error};

/// Which accesses renew a state value's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlUpdate {
    /// Creating or writing a value renews it; reads do not.
    OnCreateAndWrite,
    /// Reads renew it too.
    OnReadAndWrite,
}

/// A time to live: a value not renewed for `duration` of processing time
/// reads as absent, and the host purges it in the background. The
/// pipeline spec can override it per state name (`state_ttl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttl {
    /// How long an untouched value lives (at least a millisecond).
    pub duration: Duration,
    /// Which accesses renew it.
    pub update: TtlUpdate,
}

impl Ttl {
    /// Expire `duration` after the value was last written.
    pub fn after_write(duration: Duration) -> Self {
        Self { duration, update: TtlUpdate::OnCreateAndWrite }
    }

    /// Expire `duration` after the value was last read or written.
    pub fn after_access(duration: Duration) -> Self {
        Self { duration, update: TtlUpdate::OnReadAndWrite }
    }

    /// The duration in whole milliseconds (at least 1).
    pub(crate) fn millis(&self) -> u64 {
        u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX).max(1)
    }
}

/// What a handle needs to open its state: name and time to live.
struct Descriptor {
    name: String,
    ttl: Option<Ttl>,
}

/// Open `raw` on first use, keeping the opened handle for later calls.
#[inline]
fn opened<'a, R>(
    cell: &'a OnceCell<R>,
    d: &Descriptor,
    open: fn(&str, Option<Ttl>) -> Result<R, Error>,
) -> Result<&'a R, Error> {
    if let Some(raw) = cell.get() {
        return Ok(raw);
    }
    let raw = open(&d.name, d.ttl)?;
    Ok(cell.get_or_init(|| raw))
}

/// One value of type `T` per key.
pub struct ValueState<T> {
    descriptor: Descriptor,
    raw: OnceCell<RawValue>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ValueState<T> {
    /// A handle to the value state called `name`, kept until cleared.
    pub fn new(name: &str) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: None },
            raw: OnceCell::new(),
            _type: PhantomData,
        }
    }

    /// A handle to the value state called `name`, expiring as `ttl` says.
    pub fn with_ttl(name: &str, ttl: Ttl) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: Some(ttl) },
            raw: OnceCell::new(),
            _type: PhantomData,
        }
    }

    fn raw(&self) -> Result<&RawValue, Error> {
        opened(&self.raw, &self.descriptor, RawValue::open)
    }

    /// The current key's value, if set.
    pub fn get(&self) -> Result<Option<T>, Error> {
        self.raw()?.get_with(|bytes| bytes.map(codec::decode).transpose())?
    }

    /// Set the current key's value.
    pub fn set(&self, value: &T) -> Result<(), Error> {
        self.raw()?.set_with(|out| codec::encode_into(value, out))
    }

    /// Remove the current key's value.
    pub fn clear(&self) -> Result<(), Error> {
        self.raw()?.clear()
    }
}

/// A map from `K` to `V` per key. Entries iterate in the byte order of the
/// encoded keys (for unsigned integers and strings of equal length that
/// is not always their natural order).
pub struct MapState<K, V> {
    descriptor: Descriptor,
    raw: OnceCell<RawMap>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> MapState<K, V> {
    /// A handle to the map state called `name`, kept until cleared.
    pub fn new(name: &str) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: None },
            raw: OnceCell::new(),
            _types: PhantomData,
        }
    }

    /// A handle to the map state called `name`; each entry expires as
    /// `ttl` says.
    pub fn with_ttl(name: &str, ttl: Ttl) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: Some(ttl) },
            raw: OnceCell::new(),
            _types: PhantomData,
        }
    }

    fn raw(&self) -> Result<&RawMap, Error> {
        opened(&self.raw, &self.descriptor, RawMap::open)
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &K) -> Result<Option<V>, Error> {
        self.raw()?.get(&codec::encode(key)?)?.map(|bytes| codec::decode(&bytes)).transpose()
    }

    /// Store `value` under `key`.
    pub fn put(&self, key: &K, value: &V) -> Result<(), Error> {
        self.raw()?.put(&codec::encode(key)?, &codec::encode(value)?)
    }

    /// Remove `key`.
    pub fn remove(&self, key: &K) -> Result<(), Error> {
        self.raw()?.remove(&codec::encode(key)?)
    }

    /// Whether `key` has a value.
    pub fn contains(&self, key: &K) -> Result<bool, Error> {
        self.raw()?.contains(&codec::encode(key)?)
    }

    /// Every entry, fetched from the host a page at a time.
    pub fn entries(&self) -> Result<Vec<(K, V)>, Error> {
        let raw = self.raw()?;
        decode_pages(|after| raw.entries(after, MAP_PAGE))
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> Result<bool, Error> {
        self.raw()?.is_empty()
    }

    /// Remove every entry.
    pub fn clear(&self) -> Result<(), Error> {
        self.raw()?.clear()
    }
}

/// A list of `T` per key.
pub struct ListState<T> {
    descriptor: Descriptor,
    raw: OnceCell<RawList>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ListState<T> {
    /// A handle to the list state called `name`, kept until cleared.
    pub fn new(name: &str) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: None },
            raw: OnceCell::new(),
            _type: PhantomData,
        }
    }

    /// A handle to the list state called `name`; the whole list expires as
    /// `ttl` says.
    pub fn with_ttl(name: &str, ttl: Ttl) -> Self {
        Self {
            descriptor: Descriptor { name: name.to_string(), ttl: Some(ttl) },
            raw: OnceCell::new(),
            _type: PhantomData,
        }
    }

    fn raw(&self) -> Result<&RawList, Error> {
        opened(&self.raw, &self.descriptor, RawList::open)
    }

    /// Append `value`.
    pub fn add(&self, value: &T) -> Result<(), Error> {
        self.raw()?.add(&codec::encode(value)?)
    }

    /// Append every item of `values`, in order.
    pub fn add_all<'a>(&self, values: impl IntoIterator<Item = &'a T>) -> Result<(), Error>
    where
        T: 'a,
    {
        let encoded = values.into_iter().map(codec::encode).collect::<Result<Vec<_>, _>>()?;
        self.raw()?.add_all(&encoded)
    }

    /// Every value, oldest first.
    pub fn get(&self) -> Result<Vec<T>, Error> {
        self.raw()?.get()?.iter().map(|bytes| codec::decode(bytes)).collect()
    }

    /// Replace the whole list.
    pub fn update<'a>(&self, values: impl IntoIterator<Item = &'a T>) -> Result<(), Error>
    where
        T: 'a,
    {
        let encoded = values.into_iter().map(codec::encode).collect::<Result<Vec<_>, _>>()?;
        self.raw()?.update(&encoded)
    }

    /// Remove every value.
    pub fn clear(&self) -> Result<(), Error> {
        self.raw()?.clear()
    }
}

/// A map from `K` to `V` shared by every key: broadcast state, the same on
/// every subtask, written by
/// [`BroadcastProcessFunction::process_broadcast`](crate::BroadcastProcessFunction::process_broadcast)
/// and readable everywhere (writes elsewhere are errors). Entries iterate
/// in the byte order of the encoded keys.
pub struct BroadcastState<K, V> {
    name: String,
    raw: OnceCell<RawBroadcast>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> BroadcastState<K, V> {
    /// A handle to the broadcast map called `name`.
    pub fn new(name: &str) -> Self {
        Self { name: name.to_string(), raw: OnceCell::new(), _types: PhantomData }
    }

    fn raw(&self) -> Result<&RawBroadcast, Error> {
        if let Some(raw) = self.raw.get() {
            return Ok(raw);
        }
        let raw = RawBroadcast::open(&self.name)?;
        Ok(self.raw.get_or_init(|| raw))
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &K) -> Result<Option<V>, Error> {
        self.raw()?.get(&codec::encode(key)?)?.map(|bytes| codec::decode(&bytes)).transpose()
    }

    /// Whether `key` has a value.
    pub fn contains(&self, key: &K) -> Result<bool, Error> {
        Ok(self.raw()?.get(&codec::encode(key)?)?.is_some())
    }

    /// Store `value` under `key` (only in `process_broadcast`).
    pub fn put(&self, key: &K, value: &V) -> Result<(), Error> {
        self.raw()?.put(&codec::encode(key)?, &codec::encode(value)?)
    }

    /// Remove `key` (only in `process_broadcast`).
    pub fn remove(&self, key: &K) -> Result<(), Error> {
        self.raw()?.remove(&codec::encode(key)?)
    }

    /// Every entry, fetched from the host a page at a time.
    pub fn entries(&self) -> Result<Vec<(K, V)>, Error> {
        let raw = self.raw()?;
        decode_pages(|after| raw.entries(after, MAP_PAGE))
    }

    /// Remove every entry (only in `process_broadcast`).
    pub fn clear(&self) -> Result<(), Error> {
        self.raw()?.clear()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::host::select_key;
    use crate::testing::Harness;

    /// A function type for harness set-up; the tests drive state directly.
    #[derive(Default)]
    struct Nothing;

    #[test]
    fn value_state_is_scoped_to_the_selected_key() {
        let _harness = Harness::<Nothing>::new();
        let total = ValueState::<i64>::new("total");
        select_key(0, b"a").unwrap();
        assert_eq!(total.get().unwrap(), None);
        total.set(&5).unwrap();
        select_key(1, b"b").unwrap();
        assert_eq!(total.get().unwrap(), None);
        total.set(&7).unwrap();
        select_key(0, b"a").unwrap();
        assert_eq!(total.get().unwrap(), Some(5));
        total.clear().unwrap();
        assert_eq!(total.get().unwrap(), None);
    }

    #[test]
    fn map_state_pages_through_many_entries() {
        let _harness = Harness::<Nothing>::new();
        let map = MapState::<u32, String>::new("m");
        select_key(0, b"k").unwrap();
        assert!(map.is_empty().unwrap());
        for i in 0..1000 {
            map.put(&i, &i.to_string()).unwrap();
        }
        assert!(map.contains(&999).unwrap());
        assert_eq!(map.get(&42).unwrap().as_deref(), Some("42"));
        map.remove(&42).unwrap();
        let entries = map.entries().unwrap();
        assert_eq!(entries.len(), 999, "more than one page ({MAP_PAGE}) of entries comes back");
        assert!(entries.iter().all(|(k, v)| *v == k.to_string()));
        map.clear().unwrap();
        assert!(map.is_empty().unwrap());
    }

    #[test]
    fn list_state_appends_and_replaces() {
        let _harness = Harness::<Nothing>::new();
        let list = ListState::<(u8, String)>::new("l");
        select_key(0, b"k").unwrap();
        assert!(list.get().unwrap().is_empty());
        list.add(&(1, "a".into())).unwrap();
        list.add_all(&[(2, "b".into()), (3, "c".into())]).unwrap();
        assert_eq!(list.get().unwrap().len(), 3);
        list.update(&[(9, "z".into())]).unwrap();
        assert_eq!(list.get().unwrap(), vec![(9, "z".to_string())]);
        list.clear().unwrap();
        assert!(list.get().unwrap().is_empty());
    }

    #[test]
    fn ttl_expires_values_by_processing_time() {
        let mut harness = Harness::<Nothing>::new();
        let written = ValueState::<u8>::with_ttl("w", Ttl::after_write(Duration::from_millis(100)));
        let read = ValueState::<u8>::with_ttl("r", Ttl::after_access(Duration::from_millis(100)));
        let map = MapState::<u8, u8>::with_ttl("m", Ttl::after_write(Duration::from_millis(100)));
        select_key(0, b"k").unwrap();
        written.set(&1).unwrap();
        read.set(&2).unwrap();
        map.put(&1, &1).unwrap();
        harness.set_processing_time(90);
        assert_eq!(read.get().unwrap(), Some(2), "renews `r` until 190");
        map.put(&2, &2).unwrap();
        harness.set_processing_time(150);
        assert_eq!(written.get().unwrap(), None);
        assert_eq!(read.get().unwrap(), Some(2));
        assert_eq!(map.entries().unwrap(), vec![(2, 2)]);
        assert!(!map.contains(&1).unwrap());
    }

    /// Keeps broadcast events in broadcast state; its keyed side tries to
    /// write it (and fails), and counts per key with a timer.
    #[derive(Default)]
    struct Rules;

    impl crate::ProcessFunction for Rules {
        fn process(
            &mut self,
            _key: &[u8],
            events: &[crate::Event],
            ctx: &mut crate::Context,
        ) -> Result<(), Error> {
            let rules = BroadcastState::<String, u32>::new("rules");
            for event in events {
                let name = String::from_utf8_lossy(&event.value).into_owned();
                if let Some(limit) = rules.get(&name)? {
                    ctx.emit_value(limit.to_string().as_bytes(), event.timestamp);
                }
            }
            rules.put(&"from-process".into(), &0)
        }
    }

    impl crate::BroadcastProcessFunction for Rules {
        fn process_broadcast(
            &mut self,
            event: &crate::Event,
            ctx: &mut crate::Context,
        ) -> Result<(), Error> {
            let rules = BroadcastState::<String, u32>::new("rules");
            let name = String::from_utf8_lossy(&event.value).into_owned();
            rules.put(&name, &(event.timestamp as u32))?;
            assert!(ValueState::<u8>::new("v").get().is_err(), "no key in process_broadcast");
            assert!(ctx.register_event_time_timer(1).is_err());
            Ok(())
        }
    }

    #[test]
    fn broadcast_state_is_written_by_broadcast_events_and_read_for_every_key() {
        let mut harness = Harness::<Rules>::new();
        let event = |v: &str, t: i64| crate::Event::new(v.as_bytes().to_vec(), t);
        harness.process_broadcast(vec![event("big", 500), event("small", 1)]).unwrap();
        assert_eq!(harness.broadcast_value::<String, u32>("rules", &"big".into()), Some(500));
        let error = harness.process(b"a", vec![event("big", 7)]).unwrap_err().to_string();
        assert!(error.contains("read-only while processing keyed events"), "{error}");
        let rules = BroadcastState::<String, u32>::new("rules");
        assert_eq!(rules.entries().unwrap(), vec![("big".into(), 500), ("small".into(), 1)]);
        assert!(rules.clear().is_err(), "read-only outside process_broadcast");
        harness.process_broadcast(vec![]).unwrap();
        assert_eq!(harness.broadcast_value::<String, u32>("rules", &"x".into()), None);
    }

    #[test]
    fn state_outside_a_key_and_bad_names_are_errors() {
        let _harness = Harness::<Nothing>::new();
        assert!(ValueState::<u8>::new("v").get().is_err(), "no key selected");
        select_key(0, b"k").unwrap();
        assert!(ValueState::<u8>::new("").get().is_err());
        assert!(ValueState::<u8>::new(&"x".repeat(256)).set(&1).is_err());
    }
}

/// Every entry of a map the host serves a page at a time (`fetch(after)`:
/// up to `MAP_PAGE` entries after key `after`), decoded.
fn decode_pages<K: DeserializeOwned, V: DeserializeOwned>(
    fetch: impl Fn(Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error>,
) -> Result<Vec<(K, V)>, Error> {
    let mut out = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    loop {
        let page = fetch(last.as_deref())?;
        let full = page.len() == MAP_PAGE as usize;
        for (k, v) in &page {
            out.push((codec::decode(k)?, codec::decode(v)?));
        }
        match page.into_iter().last() {
            Some((k, _)) if full => last = Some(k),
            _ => return Ok(out),
        }
    }
}
