//! A write-back cache in front of a state backend, for hot keys.
//!
//! Reads and writes of single keys are served from memory; dirty entries
//! reach the backend in one batch when the cache is over its byte budget
//! at [`KeyedStateBackend::relieve`] (between calls into functions, never
//! inside one: a call's CPU budget is the function's), before any scan or
//! prefix delete (which read the backend directly), and on `flush`. So
//! every read sees the latest write, and results are identical with and
//! without it.
//!
//! With a [`Changelog`], the cache also knows which entries changed since
//! the last checkpoint, so a checkpoint can be a changelog of those
//! instead of a full RocksDB checkpoint (see [`changelog`](super::changelog)).

use hashbrown::hash_table::Entry;

use super::changelog::Changelog;
use super::inline::InlineBytes;
use super::key_filter::KeyFilter;
use super::slots::{prefetch, Bucket, CachedKey, SlotTable};
use super::write_back::WriteBackCopies;

use super::{KeyedStateBackend, Prefetched, ReadBatch, ScanEntry, SnapshotForm, StateError, Write};

/// Bytes counted per cached entry on top of its key and value.
const ENTRY_OVERHEAD: usize = 64;

/// Entries the map can take without growing, kept free at each
/// [`KeyedStateBackend::relieve`]: growing a map of a million entries
/// copies them all at once (≈100 ms), which would otherwise land inside
/// whichever call into a function wrote the entry that made it grow.
const HEADROOM: usize = 1 << 13;

/// The most keys the filter of the backend's keys takes (about 80 MiB
/// with its smaller layers): past them reads of keys the cache does not
/// hold ask the backend again, as without a filter.
const MOST_FILTERED_KEYS: usize = 1 << 26;

/// The unit of [`CachedBackend::kept_share`].
const KEPT_SHARE_UNIT: u128 = 1 << 16;

/// Keys read from the backend at a time by [`CachedBackend::track_backend_keys`].
const KEY_SCAN_PAGE: usize = 16_384;

/// A cached value, in place up to 22 bytes (counters, sums, timers).
type CachedValue = InlineBytes<22>;

struct Slot {
    /// The value, or `None` for a (cached) absence or a pending delete.
    value: Option<CachedValue>,
    /// Whether the backend has not seen this value yet.
    dirty: bool,
    /// Whether neither the backend nor a checkpoint holds anything under
    /// this key (the slot was made by `insert_new` and not written back or
    /// checkpointed since): deleting it needs no tombstone.
    fresh: bool,
    /// Whether the backend holds nothing under this key (made by
    /// `insert_new`, not written back since; a changelog may hold it):
    /// deleting it needs no tombstone in the backend, only in the changelog.
    unwritten: bool,
    /// Whether the value changed since the last checkpoint (read only
    /// with a changelog).
    unlogged: bool,
    /// The key's number in the changelog chain (0: not numbered yet; see
    /// [`ChangeRecords::write_numbered`](super::changelog::ChangeRecords::write_numbered)).
    number: u32,
}

/// A [`KeyedStateBackend`] that caches another one, bounded in bytes.
pub struct CachedBackend {
    inner: Box<dyn KeyedStateBackend>,
    slots: SlotTable<Slot>,
    bytes: usize,
    capacity: usize,
    /// Where changes go between full checkpoints, if checkpoints are taken.
    changelog: Option<Changelog>,
    /// At least the number of slots marked `unlogged` (0: none is, so a
    /// checkpoint need not walk the slots: state that stopped changing,
    /// like a dedup's seen keys, costs a checkpoint nothing).
    unlogged_slots: usize,
    /// The keys of the slots made dirty since the last write-back (some
    /// perhaps gone since), so writing back a few changes among many cached
    /// entries — a scan after each event — does not walk every slot.
    dirty_keys: Vec<CachedKey>,
    /// Whether a slot turned dirty without being listed in `dirty_keys`
    /// (once they are many, a write-back walks the table anyway).
    dirty_unlisted: bool,
    /// The write-back's copies of the dirty entries.
    copies: WriteBackCopies,
    /// Every key the backend may hold, when known
    /// ([`Self::track_backend_keys`]): a read of a key the cache does not
    /// hold and the filter rules out is answered without the backend.
    backend_keys: Option<KeyFilter>,
    /// Reads answered from the cache, and reads passed on (for metrics).
    hits: std::cell::Cell<u64>,
    misses: std::cell::Cell<u64>,
    /// `hits` and `misses` at the last eviction ([`Self::kept_share`]).
    reads_at_eviction: (u64, u64),
}

impl CachedBackend {
    /// Cache `inner` with at most about `capacity` bytes of keys and values
    /// (plus what one batch adds between two [`KeyedStateBackend::relieve`]s).
    pub fn new(inner: Box<dyn KeyedStateBackend>, capacity: usize) -> Self {
        Self {
            inner,
            slots: SlotTable::with_capacity(HEADROOM),
            bytes: 0,
            capacity,
            changelog: None,
            unlogged_slots: 0,
            dirty_keys: Vec::new(),
            dirty_unlisted: false,
            copies: WriteBackCopies::default(),
            backend_keys: None,
            hits: Default::default(),
            misses: Default::default(),
            reads_at_eviction: (0, 0),
        }
    }

    /// Take checkpoints through `changelog`: full ones only as often as it
    /// says, changelogs of the changed entries between.
    pub fn with_changelog(mut self, changelog: Changelog) -> Self {
        self.changelog = Some(changelog);
        self
    }

    /// Take a full checkpoint of the backend as it is now, before any
    /// write (what a run starts from: empty or restored), as the chain's
    /// base, through the new directory `scratch` (removed after): the
    /// run's first checkpoint can then be a changelog too.
    pub fn start_chain(&mut self, scratch: &std::path::Path) -> Result<(), StateError> {
        debug_assert!(self.slots.is_empty(), "the base must hold every write");
        if let Some(changelog) = &mut self.changelog {
            self.inner.checkpoint(scratch, SnapshotForm::Database)?;
            changelog.rebase(scratch)?;
            std::fs::remove_dir_all(scratch)?;
        }
        Ok(())
    }

    /// Keep a filter of the keys the backend holds, so a read of a key it
    /// has never held (a key's first event) is answered without asking it:
    /// from the keys it holds now, when at most `limit` (reading them costs
    /// about a second per few million); when it holds more, reads go on
    /// asking it. Every write-back adds its keys. Whether the filter is kept.
    pub fn track_backend_keys(&mut self, limit: usize) -> Result<bool, StateError> {
        let mut filter = KeyFilter::new();
        let mut after: Option<Vec<u8>> = None;
        self.backend_keys = None;
        loop {
            let mut page = self.inner.scan(b"", after.as_deref(), KEY_SCAN_PAGE)?;
            let hashes: Vec<u64> = page.iter().map(|(key, _)| self.slots.hash(key)).collect();
            filter.insert_all(&hashes);
            if filter.len() > limit.min(MOST_FILTERED_KEYS) {
                return Ok(false);
            }
            if page.len() < KEY_SCAN_PAGE {
                break;
            }
            after = page.pop().map(|(key, _)| key);
        }
        self.backend_keys = Some(filter);
        Ok(true)
    }

    /// Whether the backend is known not to hold the key of `hash`.
    fn backend_lacks(&self, hash: u64) -> bool {
        self.backend_keys.as_ref().is_some_and(|keys| !keys.may_contain(hash))
    }

    /// Read `key`, whose hash is `hash`, without the backend: its cached
    /// value appended to `out` and `Some(true)`; `Some(false)` when it is
    /// cached as absent or the backend is known to lack it; `None` when
    /// only the backend can say.
    fn read_here(&self, key: &[u8], hash: u64, out: &mut Vec<u8>) -> Option<bool> {
        let slot = self.slots.find(hash, key);
        self.count_read(slot.is_some());
        match slot {
            Some(Slot { value: Some(value), .. }) => {
                out.extend_from_slice(value);
                Some(true)
            }
            Some(Slot { value: None, .. }) => Some(false),
            None => self.backend_lacks(hash).then_some(false),
        }
    }

    /// Count a read as answered here (`hit`) or passed on.
    fn count_read(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.set(counter.get() + 1);
    }

    /// The share of the budget an eviction keeps, as a fraction of
    /// [`KEPT_SHARE_UNIT`]: the share of reads since the last eviction that
    /// the cache answered, between an eighth and a half, and the counts
    /// taken afresh. Entries kept are worth only the reads that find them:
    /// over keys many times the budget (a read finds its key cached one
    /// time in ten or less) keeping half would only make evictions come
    /// twice as often (each walks the table, writes a file to the backend
    /// and stalls the subtask: a running sum over 10 M keys was 15–20 %
    /// slower keeping half than an eighth); with fewer keys than the
    /// budget by far, reads hit and half is kept as before. A key read
    /// often is evicted about as often either way: it survives each
    /// eviction as often as the share kept, and evictions come the more
    /// often the more is kept.
    fn kept_share(&mut self) -> u128 {
        let (hits, misses) = (self.hits.get(), self.misses.get());
        let (hits_before, misses_before) =
            std::mem::replace(&mut self.reads_at_eviction, (hits, misses));
        let (hit, read) = (hits - hits_before, hits - hits_before + misses - misses_before);
        let share = (u128::from(hit) * KEPT_SHARE_UNIT).checked_div(u128::from(read));
        share.unwrap_or(KEPT_SHARE_UNIT / 2).clamp(KEPT_SHARE_UNIT / 8, KEPT_SHARE_UNIT / 2)
    }

    fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
        key.len() + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
    }

    /// Entries to make room for when the table is nearly full: as many as
    /// it holds (doubling it); but once it holds an eighth of what the
    /// byte budget fits (at the entries' mean cost so far), room for all
    /// of those at once: it would grow that far anyway, and each doubling
    /// on the way copies every entry into fresh memory the kernel must
    /// zero first (5 % of the CPU of a running sum over 10 M keys).
    fn growth(&self) -> usize {
        let len = self.slots.len();
        let doubling = HEADROOM.max(len);
        let fitting = self.capacity / (self.bytes / len.max(1)).max(1);
        if len >= fitting / 8 {
            doubling.max(fitting.saturating_sub(len) + HEADROOM)
        } else {
            doubling
        }
    }

    /// Write every dirty entry to the backend (entries stay cached, clean).
    ///
    /// The dirty slots are those listed in `dirty_keys` (a slot turns
    /// dirty only in [`Self::write`], which lists it), unless one was left
    /// unlisted or they are a quarter of the table or more: then a walk
    /// over the table finds them.
    fn write_back(&mut self) -> Result<(), StateError> {
        if self.dirty_keys.is_empty() && !self.dirty_unlisted {
            return Ok(());
        }
        let walked = self.dirty_unlisted || self.dirty_keys.len() >= self.slots.len() / 4;
        let (copies, slots) = (&mut self.copies, &self.slots);
        let track = self.backend_keys.is_some();
        if walked {
            copies.clear(slots.len());
            for (index, key, slot) in slots.iter_indexed() {
                copies.visit();
                if slot.dirty {
                    let hash = track.then(|| slots.hash(key));
                    copies.add(index, key, slot.value.as_deref(), hash);
                }
            }
        } else {
            copies.clear(self.dirty_keys.len());
            for key in &self.dirty_keys {
                copies.visit();
                let hash = slots.hash(key);
                let found = slots.find_index(hash, key).map(|index| (index, slots.at(index).1));
                if let Some((index, slot)) = found.filter(|(_, slot)| slot.dirty) {
                    copies.add(index, key, slot.value.as_deref(), Some(hash));
                }
            }
        }
        self.write_copies()?;
        if walked {
            self.slots.values_mut().for_each(mark_written);
        } else {
            for index in self.copies.indices() {
                mark_written(self.slots.value_at_mut(index));
            }
        }
        Ok(())
    }

    /// Write what was copied to `copies` to the backend, in key order (a
    /// key listed twice written once), and add its keys to the filter of
    /// the backend's keys.
    fn write_copies(&mut self) -> Result<(), StateError> {
        note_backend_keys(&mut self.backend_keys, self.copies.hashes());
        self.copies.sort();
        self.dirty_keys.clear();
        self.dirty_unlisted = false;
        self.inner.write_sorted(&mut self.copies.writes())
    }

    /// Store `value` (`None`: a delete) under `key`, dirty, in one probe:
    /// in place when the key is cached (no allocation for values that fit
    /// the slot), else in a new slot (`fresh` when the backend is known to
    /// hold nothing under it). Deleting a slot the backend has never seen
    /// forgets it: the backend has nothing to delete, so no tombstone; only
    /// a changelog that logged it is told (at once, so the cache does not
    /// fill with tombstones of short-lived keys, like fired windows).
    /// `hash` is `key`'s in the slot table ([`SlotTable::hash`]).
    fn write(&mut self, hash: u64, key: &[u8], value: Option<&[u8]>, fresh: bool) {
        let cached = self.slots.len();
        match self.slots.entry(hash, key) {
            Entry::Occupied(entry) if value.is_none() && entry.get().1.unwritten => {
                let (Bucket(_, slot), _) = entry.remove();
                self.bytes -= Self::cost(key, slot.value.as_deref());
                if let Some(changelog) = self.changelog.as_mut().filter(|_| !slot.fresh) {
                    changelog.record(slot.number, key, None);
                }
            }
            Entry::Occupied(mut entry) => {
                let slot = &mut entry.get_mut().1;
                self.bytes =
                    self.bytes + Self::cost(key, value) - Self::cost(key, slot.value.as_deref());
                match (slot.value.as_mut(), value) {
                    (Some(cached), Some(value)) => cached.set(value),
                    (_, value) => slot.value = value.map(CachedValue::from_slice),
                }
                if !slot.dirty {
                    list_dirty(&mut self.dirty_keys, &mut self.dirty_unlisted, key, cached);
                }
                slot.dirty = true;
                if !slot.unlogged {
                    slot.unlogged = true;
                    self.unlogged_slots += 1;
                }
            }
            Entry::Vacant(entry) => {
                self.bytes += Self::cost(key, value);
                list_dirty(&mut self.dirty_keys, &mut self.dirty_unlisted, key, cached);
                self.unlogged_slots += 1;
                entry.insert(Bucket(
                    CachedKey::from_slice(key),
                    Slot {
                        value: value.map(CachedValue::from_slice),
                        dirty: true,
                        fresh,
                        unwritten: fresh,
                        unlogged: true,
                        number: 0,
                    },
                ));
            }
        }
        // Keys of slots removed since they were listed stay listed until
        // the next write-back; keep the list within reach of the cache.
        if self.dirty_keys.len() > 2 * self.slots.len() + HEADROOM {
            let slots = &self.slots;
            self.dirty_keys.retain(|key| slots.get(&key[..]).is_some_and(|s| s.dirty));
            self.dirty_keys.sort_unstable();
            self.dirty_keys.dedup();
        }
    }
}

/// Mark `slot` as the backend holding its value (after a write-back).
fn mark_written(slot: &mut Slot) {
    slot.dirty = false;
    slot.fresh = false;
    slot.unwritten = false;
}

/// List `key`, turned dirty, in `listed` — unless a quarter of the
/// `cached` slots are listed already: a write-back of that many walks the
/// table instead (so listing each new key of a stream of them would only
/// copy it), which `unlisted` then says.
fn list_dirty(listed: &mut Vec<CachedKey>, unlisted: &mut bool, key: &[u8], cached: usize) {
    if *unlisted || listed.len() > cached / 4 {
        *unlisted = true;
    } else {
        listed.push(CachedKey::from_slice(key));
    }
}

/// Add the keys of `hashes` ([`SlotTable::hash`]), about to be written to
/// the backend, to `filter` (of the keys the backend may hold) when one is
/// kept; forget the filter once it holds [`MOST_FILTERED_KEYS`].
fn note_backend_keys(filter: &mut Option<KeyFilter>, hashes: &[u64]) {
    if let Some(keys) = filter {
        keys.insert_all(hashes);
        if keys.len() > MOST_FILTERED_KEYS {
            *filter = None;
        }
    }
}

/// Visit every cached slot, asking memory for each one a few slots before
/// its visit: the map's buckets come in an order the hardware does not
/// predict, so a walk over a table larger than the CPU's caches otherwise
/// waits for memory at every slot (most of what a checkpoint's walk over
/// 500,000 keys cost).
fn walk_slots<'a>(
    slots: &'a mut SlotTable<Slot>,
    mut visit: impl FnMut(&'a CachedKey, &'a mut Slot),
) {
    let walked = super::visit_ahead(
        &mut (),
        slots.iter_mut(),
        |(), (key, slot)| {
            prefetch(std::ptr::from_ref(*key).cast());
            prefetch(std::ptr::from_ref(&**slot).cast());
        },
        |(), (key, slot), ()| {
            visit(key, slot);
            Ok::<_, std::convert::Infallible>(())
        },
    );
    let Ok(()) = walked;
}

impl KeyedStateBackend for CachedBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let hash = self.slots.hash(key);
        let slot = self.slots.find(hash, key);
        self.count_read(slot.is_some());
        match slot {
            Some(slot) => Ok(slot.value.as_deref().map(<[u8]>::to_vec)),
            None if self.backend_lacks(hash) => Ok(None),
            None => self.inner.get(key),
        }
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StateError> {
        self.get_prefetched_into(key, Prefetched(self.slots.hash(key)), out)
    }

    fn get_prefetched_into(
        &self,
        key: &[u8],
        Prefetched(hash): Prefetched,
        out: &mut Vec<u8>,
    ) -> Result<bool, StateError> {
        match self.read_here(key, hash, out) {
            Some(present) => Ok(present),
            None => self.inner.get_into(key, out),
        }
    }

    /// Each key looked up here, a few ahead of its lookup; the keys not
    /// cached and not ruled out by the filter of the backend's keys are
    /// then read from the backend in one batch.
    fn get_many_into(&self, batch: ReadBatch<'_, '_>) -> Result<(), StateError> {
        let ReadBatch { key, count, prefetched, out, found } = batch;
        let first = found.len();
        let mut passed_on = Vec::new();
        let here = ReadBatch { key, count, prefetched, out, found };
        super::read_each_ahead(self, here, |index, Prefetched(hash), out| {
            Ok(self.read_here(key(index), hash, out).unwrap_or_else(|| {
                passed_on.push(index);
                false
            }))
        })?;
        if passed_on.is_empty() {
            return Ok(());
        }
        let mut read = Vec::with_capacity(passed_on.len());
        self.inner.get_many_into(ReadBatch {
            key: &|at| key(passed_on[at]),
            count: passed_on.len(),
            prefetched: &mut Vec::new(),
            out,
            found: &mut read,
        })?;
        for (index, value) in passed_on.iter().zip(read) {
            found[first + index] = value;
        }
        Ok(())
    }

    fn prefetch(&self, key: &[u8]) -> Prefetched {
        let hash = self.slots.prefetch(key);
        // An empty filter (all state still cached) needs no memory to answer.
        if let Some(keys) = self.backend_keys.as_ref().filter(|keys| !keys.is_empty()) {
            keys.prefetch(hash);
        }
        Prefetched(hash)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.write(self.slots.hash(key), key, Some(value), false);
        Ok(())
    }

    fn insert_new(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.write(self.slots.hash(key), key, Some(value), true);
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), StateError> {
        self.write(self.slots.hash(key), key, None, false);
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, StateError> {
        self.write_back()?;
        self.inner.scan(prefix, start_after, limit)
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StateError> {
        self.write_back()?;
        // The prefix's cached entries go with it: their changes need no record.
        if let Some(changelog) = &mut self.changelog {
            changelog.record_delete_prefix(prefix);
        }
        self.slots.retain(|k, _| !k.starts_with(prefix));
        self.bytes = self.slots.iter().map(|(k, s)| Self::cost(k, s.value.as_deref())).sum();
        self.inner.delete_prefix(prefix)
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        self.write_batch_prefetched(&mut writes.map(|write| (write, None)))
    }

    fn write_batch_prefetched(
        &mut self,
        writes: &mut dyn Iterator<Item = (Write<'_>, Option<Prefetched>)>,
    ) -> Result<(), StateError> {
        super::visit_ahead(
            self,
            writes,
            |cache, ((key, _), prefetched)| match prefetched {
                Some(Prefetched(hash)) => {
                    cache.slots.prefetch_hash(*hash);
                    *hash
                }
                None => cache.slots.prefetch(key),
            },
            |cache, ((key, value), _), hash| {
                cache.write(hash, key, value, false);
                Ok(())
            },
        )
    }

    fn flush(&mut self) -> Result<(), StateError> {
        self.write_back()?;
        self.inner.flush()
    }

    /// A changelog of the entries changed since the last checkpoint when
    /// the changelog allows, else a full checkpoint of the backend.
    fn checkpoint(&mut self, dir: &std::path::Path, form: SnapshotForm) -> Result<(), StateError> {
        match &mut self.changelog {
            Some(changelog)
                if form == SnapshotForm::Chained && !changelog.full_checkpoint_due() =>
            {
                changelog.checkpoint(dir, |latest| {
                    if std::mem::take(&mut self.unlogged_slots) == 0 {
                        return;
                    }
                    walk_slots(&mut self.slots, |key, slot| {
                        if slot.unlogged {
                            slot.number =
                                latest.write_numbered(slot.number, key, slot.value.as_deref());
                            slot.unlogged = false;
                            slot.fresh = false;
                        }
                    });
                })
            }
            Some(changelog) if form == SnapshotForm::Chained => {
                // A new chain whose base is the backend as it is plus every
                // entry it has not seen: those keys get the chain's numbers.
                self.inner.checkpoint(dir, SnapshotForm::Database)?;
                self.unlogged_slots = 0;
                changelog.materialize(dir, |unseen| {
                    walk_slots(&mut self.slots, |key, slot| {
                        slot.number = if slot.dirty {
                            unseen.write_numbered(0, key, slot.value.as_deref())
                        } else {
                            0
                        };
                        slot.unlogged = false;
                        slot.fresh = false;
                    });
                })
            }
            _ => {
                self.write_back()?;
                self.inner.checkpoint(dir, SnapshotForm::Database)?;
                if let Some(changelog) = &mut self.changelog {
                    changelog.rebase(dir)?;
                    // A new chain: keys are numbered afresh.
                    self.slots
                        .values_mut()
                        .for_each(|slot| (slot.unlogged, slot.number) = (false, 0));
                    self.unlogged_slots = 0;
                }
                Ok(())
            }
        }
    }

    fn stats(&self) -> super::StateStats {
        let below = self.inner.stats();
        super::StateStats {
            bytes: below.bytes,
            cache_hits: below.cache_hits + self.hits.get(),
            cache_misses: below.cache_misses + self.misses.get(),
        }
    }

    /// Make room for the next batch's entries; over budget, write every
    /// dirty entry back, then forget entries until half the budget is left
    /// (what stays is arbitrary, spread evenly over the table; it is all
    /// clean, so forgetting loses nothing).
    fn relieve(&mut self) -> Result<(), StateError> {
        if self.slots.capacity() - self.slots.len() < HEADROOM {
            self.slots.reserve(self.growth());
        }
        if self.bytes <= self.capacity {
            return Ok(());
        }
        // One walk over the table (each reads a hundred megabytes at a
        // million slots) copies the dirty entries out, marks every slot
        // written and keeps what stays; the copies are written after it.
        // Should the write fail, the entries it held are gone from the
        // cache, but so is the run: the error stops it, and its state is
        // restored from the last checkpoint.
        // The kept share of the budget kept evenly over the table (each
        // stretch of its buckets keeps the same share of its bytes), not
        // its first buckets whole: a stretch left full overflows as new
        // keys come, and a new key's lookup then probes long runs of full
        // buckets.
        let share = self.capacity as u128 * self.kept_share() / KEPT_SHARE_UNIT;
        let total = self.bytes.max(1) as u128;
        let (mut earned, mut kept_bytes) = (0u128, 0);
        let copies = &mut self.copies;
        copies.clear(self.slots.len());
        let hash = self.backend_keys.is_some().then(|| self.slots.key_hasher());
        let changelog = &mut self.changelog;
        self.slots.retain_compacted(|key, slot| {
            // A drained entry has no bucket: its number in the walk is one.
            let number = copies.visit();
            if slot.dirty {
                let key_hash = hash.as_ref().map(|hash| hash(key));
                copies.add(number, key, slot.value.as_deref(), key_hash);
            }
            mark_written(slot);
            let cost = Self::cost(key, slot.value.as_deref());
            earned += cost as u128 * share;
            let kept = earned >= cost as u128 * total;
            if kept {
                earned -= cost as u128 * total;
                kept_bytes += cost;
            }
            if let Some(changelog) = changelog.as_mut().filter(|_| !kept && slot.unlogged) {
                // The next checkpoint would not find this change cached.
                changelog.record(slot.number, key, slot.value.as_deref());
            }
            kept
        });
        self.bytes = kept_bytes;
        self.write_copies()?;
        self.inner.relieve()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::InMemoryBackend;

    /// The next value of a xorshift generator (reproducible random operations).
    fn next_random(rng: &mut u64) -> u64 {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    }

    /// Write the same value to both backends (`insert_new` in the cached
    /// one where `rng` says so and the key really holds nothing).
    fn put_both(cached: &mut CachedBackend, plain: &mut InMemoryBackend, key: &[u8], rng: u64) {
        let value = (rng >> 20).to_le_bytes();
        if rng & 2 == 0 && plain.get(key).unwrap().is_none() {
            cached.insert_new(key, &value).unwrap();
        } else {
            cached.put(key, &value).unwrap();
        }
        plain.put(key, &value).unwrap();
    }

    #[test]
    fn behaves_like_a_backend_at_any_size() {
        for capacity in [0, 100, 1 << 20] {
            crate::state::tests::exercise(&mut CachedBackend::new(
                Box::new(InMemoryBackend::new()),
                capacity,
            ));
        }
    }

    /// Without a filter of the backend's keys, with one, and with one
    /// refused (more keys than its limit), over a backend that holds keys
    /// from the start (as a restored one does).
    #[test]
    fn matches_an_uncached_backend_on_random_operations() {
        for (limit, filtered) in [(None, false), (Some(usize::MAX), true), (Some(10), false)] {
            let mut restored = InMemoryBackend::new();
            for i in 0..30u8 {
                restored.put(&[b'p', i % 3, i], &[i]).unwrap();
            }
            let mut cached = CachedBackend::new(Box::new(restored), 2_000);
            if let Some(limit) = limit {
                assert_eq!(cached.track_backend_keys(limit).unwrap(), filtered);
            }
            assert_eq!(cached.backend_keys.is_some(), filtered);
            let mut plain = InMemoryBackend::new();
            for i in 0..30u8 {
                plain.put(&[b'p', i % 3, i], &[i]).unwrap();
            }
            random_operations_match(&mut cached, &mut plain);
        }
    }

    /// Run random reads, writes, scans and deletes on both; each read
    /// answers the same.
    fn random_operations_match(cached: &mut CachedBackend, plain: &mut InMemoryBackend) {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for step in 0..20_000 {
            if step % 7 == 0 {
                cached.relieve().unwrap();
            }
            let rng = next_random(&mut rng);
            let key = [b'p', (rng % 3) as u8, (rng >> 8) as u8 % 40];
            match rng >> 40 & 7 {
                0..=2 => assert_eq!(
                    cached.get(&key).unwrap(),
                    plain.get(&key).unwrap(),
                    "get at step {step}"
                ),
                3..=4 => put_both(cached, plain, &key, rng),
                5 => {
                    cached.delete(&key).unwrap();
                    plain.delete(&key).unwrap();
                }
                6 => {
                    let after = [(rng >> 30) as u8 % 40];
                    let start = Some(&after[..]).filter(|_| rng & 1 == 0);
                    assert_eq!(
                        cached.scan(&key[..2], start, 7).unwrap(),
                        plain.scan(&key[..2], start, 7).unwrap(),
                        "scan at step {step}"
                    );
                }
                _ => {
                    cached.delete_prefix(&key[..2]).unwrap();
                    plain.delete_prefix(&key[..2]).unwrap();
                }
            }
        }
        cached.flush().unwrap();
        assert_eq!(
            cached.inner.scan(b"p", None, usize::MAX).unwrap(),
            plain.scan(b"p", None, usize::MAX).unwrap(),
            "flushed state matches"
        );
    }

    /// Every checkpoint, full or a changelog, restores (copied and
    /// replayed, as a restore does) to exactly the state at its barrier —
    /// with evictions, prefix deletes, and too many changes for the
    /// changelog between.
    #[test]
    fn every_checkpoint_restores_the_state_at_its_barrier() {
        use crate::state::{changelog, RocksDbBackend};
        for (capacity, pending_limit, materialize_every) in
            [(2_000, 1 << 20, 4), (300, 200, 3), (1 << 20, 1 << 20, 1)]
        {
            let dir = tempfile::tempdir().unwrap();
            let live = Box::new(RocksDbBackend::open(&dir.path().join("live")).unwrap());
            let chain = changelog::Changelog::create(
                dir.path().join("chain"),
                materialize_every,
                pending_limit,
            )
            .unwrap();
            let mut cached = CachedBackend::new(live, capacity).with_changelog(chain);
            if materialize_every > 1 {
                // The first checkpoint a changelog on the empty database.
                cached.start_chain(&dir.path().join("base")).unwrap();
            }
            let mut plain = InMemoryBackend::new();
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            for step in 0..1_500 {
                let rng = next_random(&mut rng);
                if step % 7 == 0 {
                    cached.relieve().unwrap();
                }
                let key = [b'p', (rng % 3) as u8, (rng >> 8) as u8 % 40];
                match rng >> 40 & 7 {
                    0..=3 => put_both(&mut cached, &mut plain, &key, rng),
                    4..=5 => {
                        cached.delete(&key).unwrap();
                        plain.delete(&key).unwrap();
                    }
                    6 if rng & 0x30 == 0 => {
                        cached.delete_prefix(&key[..2]).unwrap();
                        plain.delete_prefix(&key[..2]).unwrap();
                    }
                    _ => {}
                }
                if step % 13 == 12 {
                    let checkpoint = dir.path().join(format!("chk-{step}"));
                    cached.checkpoint(&checkpoint, SnapshotForm::Chained).unwrap();
                    let restored = dir.path().join(format!("restored-{step}"));
                    std::fs::create_dir_all(&restored).unwrap();
                    for entry in std::fs::read_dir(&checkpoint).unwrap() {
                        let entry = entry.unwrap();
                        std::fs::copy(entry.path(), restored.join(entry.file_name())).unwrap();
                    }
                    changelog::replay(&restored).unwrap();
                    let mut copy = RocksDbBackend::open(&restored).unwrap();
                    assert_eq!(
                        copy.scan(b"p", None, usize::MAX).unwrap(),
                        plain.scan(b"p", None, usize::MAX).unwrap(),
                        "checkpoint at step {step} ({capacity} bytes cached)"
                    );
                }
            }
        }
    }

    /// An eviction keeps entries in every stretch of the table alike: a
    /// stretch kept whole would overflow as new keys come, and lookups of
    /// new keys would probe long runs of full buckets there.
    #[test]
    fn eviction_thins_the_table_evenly() {
        let mut cached = CachedBackend::new(Box::new(InMemoryBackend::new()), 4 << 20);
        let mut key = 0u64;
        while cached.bytes <= cached.capacity {
            cached.put(&key.to_be_bytes(), b"value").unwrap();
            key += 1;
            if key.is_multiple_of(1024) {
                cached.relieve().unwrap();
            }
        }
        let before = cached.slots.len();
        cached.relieve().unwrap();
        assert!(cached.bytes <= cached.capacity / 2, "{} bytes left", cached.bytes);
        let kept = cached.slots.len();
        assert!(kept > before * 2 / 5, "{kept} of {before} kept");
        let mut quarters = [0usize; 4];
        for index in cached.slots.bucket_indices() {
            quarters[index * 4 / cached.slots.buckets()] += 1;
        }
        for count in quarters {
            assert!(count.abs_diff(kept / 4) < kept / 20, "{quarters:?}: {kept} kept, unevenly");
        }
        for i in 0..key {
            assert_eq!(cached.get(&i.to_be_bytes()).unwrap().as_deref(), Some(&b"value"[..]));
        }
    }

    /// A batch read answers as reads key by key do, whether a key is
    /// cached, evicted to the backend, never written or deleted.
    #[test]
    fn a_batch_read_answers_as_single_reads() {
        let mut cached = CachedBackend::new(Box::new(InMemoryBackend::new()), 64 << 10);
        for key in 0u64..20_000 {
            cached.put(&key.to_be_bytes(), &(key * 3).to_le_bytes()).unwrap();
            if key % 7 == 0 {
                cached.delete(&key.to_be_bytes()).unwrap();
            }
            if key % 1024 == 0 {
                cached.relieve().unwrap();
            }
        }
        assert!(cached.track_backend_keys(1 << 20).unwrap());
        let keys: Vec<[u8; 8]> = (0u64..25_000).rev().map(u64::to_be_bytes).collect();
        let (mut prefetched, mut out, mut found) = (Vec::new(), Vec::new(), Vec::new());
        let batch = ReadBatch {
            key: &|i| &keys[i],
            count: keys.len(),
            prefetched: &mut prefetched,
            out: &mut out,
            found: &mut found,
        };
        cached.get_many_into(batch).unwrap();
        assert_eq!((prefetched.len(), found.len()), (keys.len(), keys.len()));
        for (key, range) in keys.iter().zip(found) {
            assert_eq!(range.map(|range| out[range].to_vec()), cached.get(key).unwrap());
        }
    }

    #[test]
    fn a_bucket_is_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Bucket<Slot>>(), 96);
    }

    /// An eviction keeps half the budget when reads found their keys
    /// cached, an eighth when they did not (keys many times the budget).
    #[test]
    fn an_eviction_keeps_as_much_as_reads_found() {
        for (reads_hit, kept_share) in [(true, 2), (false, 8)] {
            let mut cached = CachedBackend::new(Box::new(InMemoryBackend::new()), 1 << 20);
            let mut key = 0u64;
            while cached.bytes <= cached.capacity {
                let read = if reads_hit { key / 2 } else { key + (1 << 40) };
                cached.get(&read.to_be_bytes()).unwrap();
                cached.put(&key.to_be_bytes(), b"value").unwrap();
                key += 1;
            }
            cached.relieve().unwrap();
            let kept = cached.bytes as f64 / (cached.capacity / kept_share) as f64;
            assert!((0.9..=1.0).contains(&kept), "hits {reads_hit}: {kept} of 1/{kept_share}");
            for i in 0..key {
                assert_eq!(cached.get(&i.to_be_bytes()).unwrap().as_deref(), Some(&b"value"[..]));
            }
        }
    }

    #[test]
    fn a_new_value_deleted_before_write_back_leaves_no_tombstone() {
        let mut cached = CachedBackend::new(Box::new(InMemoryBackend::new()), 1 << 20);
        cached.insert_new(b"timer", b"").unwrap();
        cached.delete(b"timer").unwrap();
        cached.put(b"kept", b"1").unwrap();
        assert_eq!((cached.slots.len(), cached.get(b"timer").unwrap()), (1, None));
        cached.insert_new(b"later", b"x").unwrap();
        cached.flush().unwrap();
        cached.delete(b"later").unwrap();
        assert!(
            cached.slots.get(&b"later"[..]).is_some_and(|s| s.value.is_none() && s.dirty),
            "written back once: a delete is a tombstone"
        );
        cached.flush().unwrap();
        assert_eq!(cached.inner.get(b"later").unwrap(), None);
    }

    /// A cache over RocksDB in `dir` with a changelog chain started on the
    /// empty database (one full checkpoint in `materialize_every`).
    fn chained_cache(dir: &std::path::Path, materialize_every: usize) -> CachedBackend {
        let live = Box::new(crate::state::RocksDbBackend::open(&dir.join("live")).unwrap());
        let mut cached = CachedBackend::new(live, 1 << 20).with_changelog(
            crate::state::changelog::Changelog::create(
                dir.join("chain"),
                materialize_every,
                1 << 20,
            )
            .unwrap(),
        );
        cached.start_chain(&dir.join("base")).unwrap();
        cached
    }

    /// The value under `key` in the checkpoint in `checkpoint`, restored
    /// (its changelogs replayed) in place.
    fn restored_value(checkpoint: &std::path::Path, key: &[u8]) -> Option<Vec<u8>> {
        crate::state::changelog::replay(checkpoint).unwrap();
        crate::state::RocksDbBackend::open(checkpoint).unwrap().get(key).unwrap()
    }

    /// A value made by `insert_new`, logged by a changelog checkpoint and
    /// deleted before any write-back leaves no slot and no backend
    /// tombstone, and the next checkpoint has it deleted.
    #[test]
    fn a_logged_value_the_backend_never_saw_is_deleted_without_a_tombstone() {
        let dir = tempfile::tempdir().unwrap();
        let mut cached = chained_cache(dir.path(), 10);
        cached.insert_new(b"window", b"acc").unwrap();
        cached.checkpoint(&dir.path().join("chk-1"), SnapshotForm::Chained).unwrap();
        cached.delete(b"window").unwrap();
        assert!(cached.slots.is_empty(), "no tombstone slot");
        cached.checkpoint(&dir.path().join("chk-2"), SnapshotForm::Chained).unwrap();
        for (checkpoint, expected) in [("chk-1", Some(b"acc".to_vec())), ("chk-2", None)] {
            assert_eq!(
                restored_value(&dir.path().join(checkpoint), b"window"),
                expected,
                "{checkpoint}"
            );
        }
        cached.flush().unwrap();
        assert_eq!(cached.get(b"window").unwrap(), None);
    }

    /// A checkpoint after nothing changed logs nothing (without walking
    /// the slots); one after only overwrites of logged keys logs them.
    #[test]
    fn checkpoints_log_overwrites_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut cached = chained_cache(dir.path(), 10);
        cached.put(b"a", b"1").unwrap();
        cached.checkpoint(&dir.path().join("chk-1"), SnapshotForm::Chained).unwrap();
        assert_eq!(cached.unlogged_slots, 0);
        cached.checkpoint(&dir.path().join("chk-2"), SnapshotForm::Chained).unwrap();
        cached.put(b"a", b"2").unwrap();
        cached.checkpoint(&dir.path().join("chk-3"), SnapshotForm::Chained).unwrap();
        for (checkpoint, expected) in [("chk-2", b"1"), ("chk-3", b"2")] {
            assert_eq!(
                restored_value(&dir.path().join(checkpoint), b"a"),
                Some(expected.to_vec()),
                "{checkpoint}"
            );
        }
    }

    /// A full checkpoint leaves the backend as it is: the entries it has
    /// not seen (and deletes of ones it holds) go to a changelog beside its
    /// files, which starts a new chain of numbers.
    #[test]
    fn a_full_checkpoint_logs_what_the_backend_has_not_seen() {
        let dir = tempfile::tempdir().unwrap();
        let mut cached = chained_cache(dir.path(), 2);
        cached.put(b"kept", b"1").unwrap();
        cached.put(b"gone", b"1").unwrap();
        cached.flush().unwrap();
        cached.put(b"new", b"1").unwrap();
        cached.delete(b"gone").unwrap();
        cached.checkpoint(&dir.path().join("chk-1"), SnapshotForm::Chained).unwrap();
        cached.put(b"new", b"2").unwrap();
        cached.checkpoint(&dir.path().join("chk-2"), SnapshotForm::Chained).unwrap();
        assert_eq!(
            (cached.inner.get(b"new").unwrap(), cached.inner.get(b"gone").unwrap()),
            (None, Some(b"1".to_vec())),
            "nothing written back"
        );
        let changelogs = |checkpoint: &str| {
            std::fs::read_dir(dir.path().join(checkpoint))
                .unwrap()
                .filter(|f| {
                    f.as_ref()
                        .unwrap()
                        .file_name()
                        .to_str()
                        .is_some_and(crate::state::changelog::is_changelog)
                })
                .count()
        };
        assert_eq!(
            changelogs("chk-2"),
            1,
            "the full checkpoint's own changelog, none of the chain before"
        );
        cached.put(b"new", b"3").unwrap();
        cached.checkpoint(&dir.path().join("chk-3"), SnapshotForm::Chained).unwrap();
        assert_eq!(changelogs("chk-3"), 2);
        for (checkpoint, new) in [("chk-1", b"1"), ("chk-2", b"2"), ("chk-3", b"3")] {
            let checkpoint = dir.path().join(checkpoint);
            assert_eq!(
                [
                    restored_value(&checkpoint, b"new"),
                    restored_value(&checkpoint, b"kept"),
                    restored_value(&checkpoint, b"gone")
                ],
                [Some(new.to_vec()), Some(b"1".to_vec()), None],
                "{}",
                checkpoint.display()
            );
        }
    }

    #[test]
    fn stays_within_its_budget() {
        let mut cached = CachedBackend::new(Box::new(InMemoryBackend::new()), 10_000);
        for i in 0..10_000u32 {
            cached.put(&i.to_be_bytes(), &[0; 32]).unwrap();
            cached.relieve().unwrap();
            assert!(cached.bytes <= 10_000);
        }
        assert_eq!(
            cached.get(&5u32.to_be_bytes()).unwrap(),
            Some(vec![0; 32]),
            "evicted writes reached the backend"
        );
    }
}
