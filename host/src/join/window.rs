//! The window join: each side's events kept per (key, window), the cross
//! product emitted when the watermark passes the window (see the module
//! above). Sessions merge over the events of both sides.

use std::collections::HashMap;

use crate::runtime::bindings::weir::function::types::Window;
use crate::runtime::packing::KeyList;
use crate::state::hash::KeyHashBuilder;
use crate::state::{key_group, ttl, StateError, StateKey, StateKind};
use crate::time::{DueTimers, TimeDomain};
use crate::window::session::Sessions;
use crate::window::WindowAssigner;
use crate::Event;

use super::encoding::{joined, push_record, records};
use super::{side_name, JoinError, JoinOperator, LEFT, RIGHT, SESSIONS};

/// Append the storage key of `key`'s events of side `name` in `window`.
fn window_key_into(out: &mut Vec<u8>, group: u16, name: &str, key: &[u8], window: Window) {
    let mut namespace = [0u8; 16];
    namespace[..8].copy_from_slice(&window.start.to_be_bytes());
    namespace[8..].copy_from_slice(&window.end.to_be_bytes());
    StateKey::new(group, name, StateKind::Value, key, &namespace).encode_into(out);
}

impl JoinOperator {
    /// Add events of one side to their (tumbling or sliding) windows.
    pub(super) fn process_windows(
        &mut self,
        left: bool,
        assigner: WindowAssigner,
        keys: &KeyList,
        events: Vec<Event>,
    ) -> Result<(), JoinError> {
        // (key, window start) → its slot: the records the batch adds.
        let mut index: HashMap<(&[u8], i64), usize, KeyHashBuilder> =
            HashMap::with_capacity_and_hasher(keys.len(), KeyHashBuilder::default());
        let mut slots: Vec<(&[u8], Window, Vec<u8>)> = Vec::new();
        let mut windows = std::mem::take(&mut self.windows);
        let mut record = std::mem::take(&mut self.record);
        for (key, event) in keys.iter().zip(events) {
            windows.clear();
            assigner.assign(event.timestamp, &mut windows);
            let watermark = self.watermark;
            windows.retain(|w| w.end - 1 > watermark);
            if windows.is_empty() {
                self.set_aside_late(event);
                continue;
            }
            record.clear();
            push_record(&mut record, &event.value);
            for &window in &windows {
                let slot = *index.entry((key, window.start)).or_insert_with(|| {
                    slots.push((key, window, Vec::new()));
                    slots.len() - 1
                });
                slots[slot].2.extend_from_slice(&record);
            }
        }
        self.windows = windows;
        self.record = record;
        let mut storage = std::mem::take(&mut self.key_buf);
        for (key, window, records) in slots {
            storage.clear();
            let group = key_group(key, self.max_parallelism);
            window_key_into(&mut storage, group, side_name(left), key, window);
            self.append(&storage, &records)?;
            // Idempotent: the window's first event of either side adds it.
            self.timers.register(
                self.backend.as_mut(),
                key,
                TimeDomain::EventTime,
                window.end - 1,
            )?;
        }
        self.key_buf = storage;
        Ok(())
    }

    /// Add events of one side to their keys' sessions, merging sessions
    /// (with those of both sides) that come to overlap or touch, as the
    /// window operator does ([`Sessions`]).
    pub(super) fn process_sessions(
        &mut self,
        left: bool,
        assigner: WindowAssigner,
        keys: &KeyList,
        events: Vec<Event>,
    ) -> Result<(), JoinError> {
        if !assigner.is_merging() {
            return Err(JoinError::Config("sessions need a session window".into()));
        }
        let mut by_key: Vec<(&[u8], Vec<Event>)> = Vec::new();
        let mut index: HashMap<&[u8], usize, KeyHashBuilder> = HashMap::default();
        for (key, event) in keys.iter().zip(events) {
            let slot = *index.entry(key).or_insert_with(|| {
                by_key.push((key, Vec::new()));
                by_key.len() - 1
            });
            by_key[slot].1.push(event);
        }
        let mut own = std::mem::take(&mut self.windows);
        for (key, events) in by_key {
            let group = key_group(key, self.max_parallelism);
            // Each session's `added`: the records of this side the batch adds.
            let mut working = Sessions::<Vec<u8>>::from_stored(self.read_sessions(group, key)?);
            for event in events {
                own.clear();
                assigner.assign(event.timestamp, &mut own);
                let merged = working.merged(own[0]);
                if merged.end - 1 <= self.watermark {
                    self.set_aside_late(event);
                    continue;
                }
                push_record(working.absorb(merged), &event.value);
            }
            let mut storage = std::mem::take(&mut self.key_buf);
            for session in &mut working.list {
                let window = session.window;
                let unmoved = |w: &Window| (w.start, w.end) == (window.start, window.end);
                if session.sources.len() == 1 && session.sources.iter().all(unmoved) {
                    // Grown by events only: append them.
                    if !session.added.is_empty() {
                        storage.clear();
                        window_key_into(&mut storage, group, side_name(left), key, window);
                        self.append(&storage, &session.added)?;
                    }
                    continue;
                }
                // A new or merged session: both sides' events of the
                // sessions it absorbed, in order of their starts.
                session.sources.sort_by_key(|w| (w.start, w.end));
                let mut sides = [Vec::new(), Vec::new()];
                for (side, name) in sides.iter_mut().zip([LEFT, RIGHT]) {
                    for &source in &session.sources {
                        storage.clear();
                        window_key_into(&mut storage, group, name, key, source);
                        self.read_buf.clear();
                        if self.backend.get_into(&storage, &mut self.read_buf)? {
                            side.extend_from_slice(stored_records(&self.read_buf)?);
                            self.backend.delete(&storage)?;
                        }
                    }
                }
                for &source in &session.sources {
                    self.timers.delete(
                        self.backend.as_mut(),
                        key,
                        TimeDomain::EventTime,
                        source.end - 1,
                    )?;
                }
                sides[usize::from(!left)].extend_from_slice(&session.added);
                for (side, name) in sides.iter().zip([LEFT, RIGHT]) {
                    if !side.is_empty() {
                        storage.clear();
                        window_key_into(&mut storage, group, name, key, window);
                        self.read_buf.clear();
                        ttl::encode_into(&mut self.read_buf, side, None);
                        self.backend.insert_new(&storage, &self.read_buf)?;
                    }
                }
                self.timers.register(
                    self.backend.as_mut(),
                    key,
                    TimeDomain::EventTime,
                    window.end - 1,
                )?;
            }
            self.key_buf = storage;
            self.write_sessions(group, key, &working.windows())?;
        }
        self.windows = own;
        Ok(())
    }

    /// Fire the windows whose last millisecond the watermark has reached.
    pub(super) fn fire_windows(&mut self, assigner: WindowAssigner) -> Result<(), JoinError> {
        let due =
            self.timers.take_due(self.backend.as_mut(), TimeDomain::EventTime, self.watermark)?;
        let mut storage = std::mem::take(&mut self.key_buf);
        let (mut lefts, mut rights) =
            (std::mem::take(&mut self.read_buf), std::mem::take(&mut self.record));
        for DueTimers { key, timestamps } in due {
            let group = key_group(&key, self.max_parallelism);
            let mut sessions = match assigner.size() {
                Some(_) => Vec::new(),
                None => self.read_sessions(group, &key)?,
            };
            for last in timestamps {
                let end = last.saturating_add(1);
                let window = match assigner.size() {
                    Some(size) => Window { start: end - size, end },
                    None => match sessions.iter().position(|w| w.end == end) {
                        Some(at) => sessions.remove(at),
                        None => continue,
                    },
                };
                for (name, out) in [(LEFT, &mut lefts), (RIGHT, &mut rights)] {
                    storage.clear();
                    window_key_into(&mut storage, group, name, &key, window);
                    out.clear();
                    if self.backend.get_into(&storage, out)? {
                        self.backend.delete(&storage)?;
                    }
                }
                if lefts.is_empty() || rights.is_empty() {
                    continue;
                }
                let rights = stored_records(&rights)?;
                for left in records(stored_records(&lefts)?) {
                    let left = left?;
                    for right in records(rights) {
                        self.outputs.push(joined(left, right?, last));
                    }
                }
            }
            if assigner.is_merging() {
                self.write_sessions(group, &key, &sessions)?;
            }
        }
        self.key_buf = storage;
        (self.read_buf, self.record) = (lefts, rights);
        Ok(())
    }

    fn sessions_key(&self, group: u16, key: &[u8]) -> Vec<u8> {
        StateKey::new(group, SESSIONS, StateKind::Value, key, b"").encode()
    }

    /// The key's open sessions.
    fn read_sessions(&mut self, group: u16, key: &[u8]) -> Result<Vec<Window>, StateError> {
        let Some(stored) = self.backend.get(&self.sessions_key(group, key))? else {
            return Ok(Vec::new());
        };
        let corrupt = || StateError::Corrupt("malformed join session list".into());
        let bytes = stored_records(&stored)?;
        if bytes.len() % 16 != 0 {
            return Err(corrupt());
        }
        Ok(bytes
            .chunks_exact(16)
            .map(|pair| Window {
                start: i64::from_be_bytes(pair[..8].try_into().unwrap_or_default()),
                end: i64::from_be_bytes(pair[8..].try_into().unwrap_or_default()),
            })
            .collect())
    }

    fn write_sessions(
        &mut self,
        group: u16,
        key: &[u8],
        sessions: &[Window],
    ) -> Result<(), StateError> {
        let storage = self.sessions_key(group, key);
        if sessions.is_empty() {
            return self.backend.delete(&storage);
        }
        let mut bytes = Vec::with_capacity(1 + 16 * sessions.len());
        ttl::encode_into(&mut bytes, b"", None);
        for w in sessions {
            bytes.extend_from_slice(&w.start.to_be_bytes());
            bytes.extend_from_slice(&w.end.to_be_bytes());
        }
        self.backend.put(&storage, &bytes)
    }
}

/// The records inside a stored value (after its TTL header).
fn stored_records(stored: &[u8]) -> Result<&[u8], StateError> {
    Ok(ttl::decode(stored, i64::MIN)?.unwrap_or_default())
}
