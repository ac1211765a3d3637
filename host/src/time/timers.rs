//! Timers: an in-memory queue in timestamp order, written through to keyed
//! state so timers survive restarts.
//!
//! A timer is stored under the state key
//! `StateKey(key group, "timers", Timer, key, [domain][timestamp BE])` with
//! an empty, never-expiring value; the queue is rebuilt from those entries
//! when a subtask starts. A (key, domain, timestamp) is one timer however
//! often it is registered.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::state::hash::KeyHashBuilder;
use crate::state::{key_group, ttl, KeyedStateBackend, StateError, StateKey, StateKind};

/// The state name a function's timers are stored under (kind `Timer`, so
/// no clash with the function's own state names).
pub const FUNCTION_TIMERS: &str = "timers";

/// Which clock a timer follows (the runtime maps the WIT `time-domain` to
/// it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeDomain {
    /// Event time: the timer is due when the watermark reaches it.
    EventTime,
    /// Processing time: the timer is due when the host's clock reaches it.
    ProcessingTime,
}

/// The due timers of one key, as [`TimerService::take_due`] returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueTimers {
    /// The key the timers belong to.
    pub key: Vec<u8>,
    /// Their timestamps, in order.
    pub timestamps: Vec<i64>,
}

fn domain_byte(domain: TimeDomain) -> u8 {
    match domain {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

fn domain_of(byte: u8) -> Option<TimeDomain> {
    match byte {
        0 => Some(TimeDomain::EventTime),
        1 => Some(TimeDomain::ProcessingTime),
        _ => None,
    }
}

fn storage_key(name: &str, group: u16, key: &[u8], domain: u8, timestamp: i64) -> Vec<u8> {
    let mut out = Vec::new();
    storage_key_into(&mut out, name, group, key, domain, timestamp);
    out
}

fn storage_key_into(
    out: &mut Vec<u8>,
    name: &str,
    group: u16,
    key: &[u8],
    domain: u8,
    timestamp: i64,
) {
    let mut namespace = [0u8; 9];
    namespace[0] = domain;
    namespace[1..].copy_from_slice(&timestamp.to_be_bytes());
    StateKey::new(group, name, StateKind::Timer, key, &namespace).encode_into(out);
}

/// The keys with a timer at one (domain, timestamp).
type KeySet = HashSet<Vec<u8>, KeyHashBuilder>;

/// The timers of one subtask.
#[derive(Debug)]
pub struct TimerService {
    /// (domain, timestamp) → the keys with a timer then: iteration is in
    /// timestamp order per domain, and registering a timer that exists (a
    /// window's timer, for every event of the window) is one hash lookup
    /// with no allocation.
    queue: BTreeMap<(u8, i64), KeySet>,
    max_parallelism: u16,
    name: &'static str,
}

impl TimerService {
    /// No timers yet, for keys of `max_parallelism` key groups, stored
    /// under `name`.
    pub fn new(max_parallelism: u16, name: &'static str) -> Self {
        Self { queue: BTreeMap::new(), max_parallelism, name }
    }

    /// Rebuild the queue of the timers stored in `backend` under `name`
    /// (one service per name: a function's timers, a window operator's…).
    pub fn load(
        backend: &mut dyn KeyedStateBackend,
        max_parallelism: u16,
        name: &'static str,
    ) -> Result<Self, StateError> {
        let mut timers = Self::new(max_parallelism, name);
        for group in 0..max_parallelism {
            let prefix = StateKey::state_prefix(group, name, StateKind::Timer);
            let mut after: Option<Vec<u8>> = None;
            loop {
                let page = backend.scan(&prefix, after.as_deref(), 1024)?;
                let full = page.len() == 1024;
                for (rest, _) in &page {
                    let corrupt = || StateError::Corrupt("malformed timer entry".into());
                    let (key, namespace, _) = StateKey::split_rest(rest).ok_or_else(corrupt)?;
                    let (domain, timestamp) = namespace.split_first().ok_or_else(corrupt)?;
                    let timestamp =
                        i64::from_be_bytes(timestamp.try_into().map_err(|_| corrupt())?);
                    domain_of(*domain).ok_or_else(corrupt)?;
                    timers.insert(*domain, timestamp, key);
                }
                match page.into_iter().last() {
                    Some((rest, _)) if full => after = Some(rest),
                    _ => break,
                }
            }
        }
        Ok(timers)
    }

    /// Add to the queue; whether the timer is new.
    fn insert(&mut self, domain: u8, timestamp: i64, key: &[u8]) -> bool {
        let keys = self.queue.entry((domain, timestamp)).or_default();
        !keys.contains(key) && keys.insert(key.to_vec())
    }

    /// Remove from the queue; whether the timer was there.
    fn remove(&mut self, domain: u8, timestamp: i64, key: &[u8]) -> bool {
        let Some(keys) = self.queue.get_mut(&(domain, timestamp)) else { return false };
        let removed = keys.remove(key);
        if keys.is_empty() {
            self.queue.remove(&(domain, timestamp));
        }
        removed
    }

    /// Register a timer for `key` (idempotent); whether it was new.
    pub fn register(
        &mut self,
        backend: &mut dyn KeyedStateBackend,
        key: &[u8],
        domain: TimeDomain,
        timestamp: i64,
    ) -> Result<bool, StateError> {
        let domain = domain_byte(domain);
        let new = self.insert(domain, timestamp, key);
        if new {
            let group = key_group(key, self.max_parallelism);
            backend.insert_new(
                &storage_key(self.name, group, key, domain, timestamp),
                &ttl::encode(b"", None),
            )?;
        }
        Ok(new)
    }

    /// Cancel a timer of `key`, if registered; whether it was.
    pub fn delete(
        &mut self,
        backend: &mut dyn KeyedStateBackend,
        key: &[u8],
        domain: TimeDomain,
        timestamp: i64,
    ) -> Result<bool, StateError> {
        let domain = domain_byte(domain);
        let existed = self.remove(domain, timestamp, key);
        if existed {
            let group = key_group(key, self.max_parallelism);
            backend.delete(&storage_key(self.name, group, key, domain, timestamp))?;
        }
        Ok(existed)
    }

    /// Undo a [`register`](Self::register) (`registered`) or a
    /// [`delete`](Self::delete) in the queue only, when the backend's own
    /// journal restores the stored timer.
    pub fn undo(&mut self, registered: bool, key: Vec<u8>, domain: TimeDomain, timestamp: i64) {
        let domain = domain_byte(domain);
        if registered {
            self.remove(domain, timestamp, &key);
        } else {
            self.insert(domain, timestamp, &key);
        }
    }

    /// The earliest timer of `domain`, if any.
    pub fn next(&self, domain: TimeDomain) -> Option<i64> {
        let domain = domain_byte(domain);
        self.queue
            .range((domain, i64::MIN)..)
            .next()
            .filter(|((d, _), _)| *d == domain)
            .map(|((_, ts), _)| *ts)
    }

    /// Remove and return every timer of `domain` at or before `up_to`,
    /// grouped by key (keys in order of their earliest timer, keys of the
    /// same timestamp in byte order; each key's timers in timestamp order).
    pub fn take_due(
        &mut self,
        backend: &mut dyn KeyedStateBackend,
        domain: TimeDomain,
        up_to: i64,
    ) -> Result<Vec<DueTimers>, StateError> {
        let byte = domain_byte(domain);
        let mut batch: Vec<DueTimers> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize, KeyHashBuilder> = HashMap::default();
        let mut storage = Vec::new();
        loop {
            let first = self.queue.range((byte, i64::MIN)..).next().map(|(&at, _)| at);
            let Some((_, timestamp)) = first.filter(|&(d, ts)| d == byte && ts <= up_to) else {
                break;
            };
            let mut keys: Vec<Vec<u8>> =
                self.queue.remove(&(byte, timestamp)).unwrap_or_default().into_iter().collect();
            keys.sort_unstable();
            for key in keys {
                storage.clear();
                storage_key_into(
                    &mut storage,
                    self.name,
                    key_group(&key, self.max_parallelism),
                    &key,
                    byte,
                    timestamp,
                );
                backend.delete(&storage)?;
                match index.get(&key) {
                    Some(&i) => batch[i].timestamps.push(timestamp),
                    None => {
                        index.insert(key.clone(), batch.len());
                        batch.push(DueTimers { key, timestamps: vec![timestamp] });
                    }
                }
            }
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::InMemoryBackend;

    fn fired(batch: &[DueTimers]) -> Vec<(String, i64)> {
        batch
            .iter()
            .flat_map(|k| {
                k.timestamps.iter().map(move |&t| (String::from_utf8(k.key.clone()).unwrap(), t))
            })
            .collect()
    }

    #[test]
    fn fires_due_timers_in_order_once_and_survives_reload() {
        let mut backend = InMemoryBackend::new();
        let mut timers = TimerService::load(&mut backend, 8, FUNCTION_TIMERS).unwrap();
        timers.register(&mut backend, b"b", TimeDomain::EventTime, 20).unwrap();
        timers.register(&mut backend, b"a", TimeDomain::EventTime, 10).unwrap();
        timers.register(&mut backend, b"a", TimeDomain::EventTime, 10).unwrap();
        timers.register(&mut backend, b"a", TimeDomain::EventTime, 30).unwrap();
        timers.register(&mut backend, b"a", TimeDomain::ProcessingTime, 5).unwrap();
        timers.register(&mut backend, b"c", TimeDomain::EventTime, 25).unwrap();
        timers.delete(&mut backend, b"c", TimeDomain::EventTime, 25).unwrap();
        assert_eq!(timers.next(TimeDomain::EventTime), Some(10));
        assert_eq!(timers.next(TimeDomain::ProcessingTime), Some(5));

        let mut reloaded = TimerService::load(&mut backend, 8, FUNCTION_TIMERS).unwrap();
        let due = reloaded.take_due(&mut backend, TimeDomain::EventTime, 25).unwrap();
        assert_eq!(
            fired(&due),
            vec![("a".into(), 10), ("b".into(), 20)],
            "deduplicated, deleted one gone, in order"
        );
        assert!(
            reloaded.take_due(&mut backend, TimeDomain::EventTime, 25).unwrap().is_empty(),
            "fires once"
        );
        let rest = TimerService::load(&mut backend, 8, FUNCTION_TIMERS).unwrap();
        assert_eq!(
            rest.next(TimeDomain::EventTime),
            Some(30),
            "fired timers are gone from state too"
        );
        assert_eq!(rest.next(TimeDomain::ProcessingTime), Some(5));
    }
}
