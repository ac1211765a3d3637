//! The interval join: both sides buffered per key and timestamp, each
//! accepted event matched against the other side's buffer in its bounds,
//! and buffers shrunk as the watermark passes (see the module above).

use std::collections::BTreeSet;

use crate::runtime::packing::KeyList;
use crate::state::{key_group, ttl, StateKey, StateKind};
use crate::time::{DueTimers, TimeDomain};
use crate::Event;

use super::encoding::{joined, push_record, records, sortable, unsortable};
use super::{side_name, JoinError, JoinOperator, LEFT, RIGHT};

/// Buffered timestamps read per scan.
const PAGE: usize = 32;

/// (key, side)s whose buffered timestamps are kept in memory before those
/// with none are forgotten.
const INDEXED_PREFIXES: usize = 1 << 20;

impl JoinOperator {
    /// Join `events` of one side (`left` or right) with the other side's
    /// buffer and buffer those that can still match.
    pub(super) fn process_interval(
        &mut self,
        left: bool,
        lower: i64,
        upper: i64,
        keys: &KeyList,
        events: Vec<Event>,
    ) -> Result<(), JoinError> {
        let span = upper.saturating_sub(lower);
        let mut record = std::mem::take(&mut self.record);
        let mut storage = std::mem::take(&mut self.key_buf);
        for (key, event) in keys.iter().zip(events) {
            let t = event.timestamp;
            // The partners' times: [from, to] on the other side.
            let (from, to) = if left {
                (t.saturating_add(lower), t.saturating_add(upper))
            } else {
                (t.saturating_sub(upper), t.saturating_sub(lower))
            };
            if to <= self.watermark {
                self.set_aside_late(event);
                continue;
            }
            let group = key_group(key, self.max_parallelism);
            record.clear();
            push_record(&mut record, &event.value);
            storage.clear();
            StateKey::new(group, side_name(!left), StateKind::Map, key, b"")
                .encode_into(&mut storage);
            self.match_buffered(&storage, left, &record[4..], t, from, to)?;
            // Kept while an event accepted later can still be a partner.
            let until = t.saturating_add(span);
            if until > self.watermark {
                storage.clear();
                StateKey::new(group, side_name(left), StateKind::Map, key, b"")
                    .encode_into(&mut storage);
                let prefix = storage.len();
                storage.extend_from_slice(&sortable(t));
                self.append(&storage, &record)?;
                self.buffered_times(&storage[..prefix])?.insert(t);
                self.timers.register(self.backend.as_mut(), key, TimeDomain::EventTime, until)?;
            }
        }
        self.record = record;
        self.key_buf = storage;
        Ok(())
    }

    /// Emit the pairs of `embedded` (of the `left` side, at `t`) with the
    /// other side's events buffered under `prefix` at `[from, to]`.
    fn match_buffered(
        &mut self,
        prefix: &[u8],
        left: bool,
        embedded: &[u8],
        t: i64,
        from: i64,
        to: i64,
    ) -> Result<(), JoinError> {
        let times: Vec<i64> = self.buffered_times(prefix)?.range(from..=to).copied().collect();
        let mut storage = prefix.to_vec();
        let mut stored = std::mem::take(&mut self.read_buf);
        for at in times {
            storage.truncate(prefix.len());
            storage.extend_from_slice(&sortable(at));
            stored.clear();
            if !self.backend.get_into(&storage, &mut stored)? {
                continue;
            }
            let Some(values) = ttl::decode(&stored, i64::MIN)? else { continue };
            let timestamp = t.max(at);
            for other in records(values) {
                let other = other?;
                self.outputs.push(if left {
                    joined(embedded, other, timestamp)
                } else {
                    joined(other, embedded, timestamp)
                });
            }
        }
        self.read_buf = stored;
        Ok(())
    }

    /// The timestamps buffered under `prefix` (one side of one key), read
    /// from the backend the first time.
    fn buffered_times(&mut self, prefix: &[u8]) -> Result<&mut BTreeSet<i64>, JoinError> {
        if !self.buffered.contains_key(prefix) {
            let mut times = BTreeSet::new();
            let mut after: Option<Vec<u8>> = None;
            loop {
                let page = self.backend.scan(prefix, after.as_deref(), PAGE)?;
                let full = page.len() == PAGE;
                for (rest, _) in &page {
                    times.insert(unsortable(rest)?);
                }
                match page.into_iter().last() {
                    Some((rest, _)) if full => after = Some(rest),
                    _ => break,
                }
            }
            if self.buffered.len() >= INDEXED_PREFIXES {
                // Forget the keys with nothing buffered: they read again.
                self.buffered.retain(|_, times| !times.is_empty());
            }
            self.buffered.insert(prefix.to_vec(), times);
        }
        Ok(self.buffered.get_mut(prefix).expect("inserted above"))
    }

    /// Append `records` to the value stored under `storage` (creating it).
    pub(super) fn append(&mut self, storage: &[u8], records: &[u8]) -> Result<(), JoinError> {
        let stored = &mut self.read_buf;
        stored.clear();
        if self.backend.get_into(storage, stored)? {
            stored.extend_from_slice(records);
            self.backend.put(storage, stored)?;
        } else {
            ttl::encode_into(stored, records, None);
            self.backend.insert_new(storage, stored)?;
        }
        Ok(())
    }

    /// Forget the buffered events of keys with due cleanup timers that no
    /// event accepted from now on can match (time + `span` ≤ watermark).
    pub(super) fn clean_interval(&mut self, span: i64) -> Result<(), JoinError> {
        let watermark = self.watermark;
        let due = self.timers.take_due(self.backend.as_mut(), TimeDomain::EventTime, watermark)?;
        let (mut prefix, mut storage) = (Vec::new(), std::mem::take(&mut self.key_buf));
        for DueTimers { key, .. } in due {
            let group = key_group(&key, self.max_parallelism);
            for name in [LEFT, RIGHT] {
                prefix.clear();
                StateKey::new(group, name, StateKind::Map, &key, b"").encode_into(&mut prefix);
                let times = self.buffered_times(&prefix)?;
                // Times `at` with `at + span ≤ watermark`, oldest first.
                let gone: Vec<i64> = times
                    .iter()
                    .copied()
                    .take_while(|at| at.saturating_add(span) <= watermark)
                    .collect();
                gone.iter().for_each(|at| {
                    times.remove(at);
                });
                for at in gone {
                    storage.clear();
                    storage.extend_from_slice(&prefix);
                    storage.extend_from_slice(&sortable(at));
                    self.backend.delete(&storage)?;
                }
            }
        }
        self.key_buf = storage;
        Ok(())
    }
}
