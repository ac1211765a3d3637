//! The state cache's table of slots by state key: a hash table whose
//! lookups of a whole batch of keys can be announced to memory before they
//! are made ([`SlotTable::prefetch`]).
//!
//! A cache of more keys than the CPU's caches hold waits for memory at
//! every lookup (the slot's line, and for a new key the table's control
//! bytes too); asking for all of a batch's lines first lets those waits
//! overlap instead of following each other.

use std::cell::Cell;
use std::hash::BuildHasher;

use hashbrown::hash_table::{Entry, HashTable};

use super::hash::KeyHashBuilder;
use super::huge::TableAllocator;
use super::inline::InlineBytes;

/// A cached key: stored in the table's own bucket up to 62 bytes (state
/// keys of short names and keys are: 12 bytes of layout, the name, the
/// key, a window's 16), so a lookup compares bytes in place instead of
/// following a pointer to somewhere else in the heap.
pub(super) type CachedKey = InlineBytes<62>;

/// A table entry: a key and what the table keeps under it, aligned to 32
/// bytes, so an entry of 96 (a key, 64 bytes, and the cache's slot, 32) is
/// always two cache lines to wait for, never three.
#[repr(C, align(32))]
pub(super) struct Bucket<V>(pub(super) CachedKey, pub(super) V);

/// Values of type `V` by state key.
pub(super) struct SlotTable<V> {
    table: HashTable<Bucket<V>, TableAllocator>,
    hasher: KeyHashBuilder,
    /// Where the table's memory is, as last learnt ([`Self::layout`]).
    layout: Cell<Option<BucketLayout>>,
}

/// Where a table of `buckets` buckets keeps them: hashbrown allocates the
/// buckets, the last first, right below its control bytes, which begin at
/// `data_end`; a probe for a hash starts at bucket `hash % buckets`.
#[derive(Clone, Copy)]
struct BucketLayout {
    buckets: usize,
    data_end: usize,
}

impl<V> SlotTable<V> {
    /// An empty table with room for `capacity` entries.
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self {
            table: HashTable::with_capacity_in(capacity, TableAllocator),
            hasher: KeyHashBuilder::default(),
            layout: Cell::new(None),
        }
    }

    /// Where the table's buckets are now, learnt from where an entry is
    /// (after each reallocation, which changes the number of buckets);
    /// `None` while it is empty and has not been learnt.
    fn layout(&self) -> Option<BucketLayout> {
        let buckets = self.table.num_buckets();
        if let Some(known) = self.layout.get().filter(|known| known.buckets == buckets) {
            return Some(known);
        }
        let index = self.table.iter_buckets().next()?;
        let entry = self.table.get_bucket(index)?;
        let size = std::mem::size_of::<Bucket<V>>();
        let data_end = std::ptr::from_ref(entry) as usize + (index + 1) * size;
        let layout = BucketLayout { buckets, data_end };
        self.layout.set(Some(layout));
        Some(layout)
    }

    /// `key`'s hash in this table (for [`Self::entry`]).
    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Ask memory for what a lookup of `key` will read (the control bytes
    /// it probes first and the bucket where its entry most likely is, or
    /// goes), without waiting for it; `key`'s hash, for the lookup.
    ///
    /// The addresses are computed from the table's [`BucketLayout`], not
    /// found by probing: a probe would itself wait for the control bytes,
    /// one key after another. Were hashbrown to lay its table out
    /// otherwise, the prefetches would miss (a test says so) but nothing
    /// would go wrong: a prefetch reads nothing and faults on no address.
    pub(super) fn prefetch(&self, key: &[u8]) -> u64 {
        let hash = self.hash(key);
        self.prefetch_hash(hash);
        hash
    }

    /// [`Self::prefetch`] of the key whose hash is `hash`.
    pub(super) fn prefetch_hash(&self, hash: u64) {
        if let Some(layout) = self.layout() {
            let home = hash as usize & (layout.buckets - 1);
            prefetch((layout.data_end + home) as *const i8);
            prefetch_bucket::<Bucket<V>>(layout, home);
        }
    }

    /// Every entry with the index of its bucket (for [`Self::at`]), in no
    /// particular order.
    pub(super) fn iter_indexed(&self) -> impl Iterator<Item = (usize, &CachedKey, &V)> {
        self.table.iter_buckets().map(|index| {
            let Bucket(key, value) = self.table.get_bucket(index).expect("a full bucket");
            (index, key, value)
        })
    }

    /// The entry in bucket `index`, as [`Self::iter_indexed`] or
    /// [`Self::find_index`] found it (the table unchanged since).
    pub(super) fn at(&self, index: usize) -> (&CachedKey, &V) {
        let Bucket(key, value) = self.table.get_bucket(index).expect("a full bucket");
        (key, value)
    }

    /// [`Self::at`], the value to change.
    pub(super) fn value_at_mut(&mut self, index: usize) -> &mut V {
        &mut self.table.get_bucket_mut(index).expect("a full bucket").1
    }

    /// The bucket of `key`, whose hash is `hash` ([`Self::hash`]), if the
    /// table holds it.
    pub(super) fn find_index(&self, hash: u64, key: &[u8]) -> Option<usize> {
        self.table.find_bucket_index(hash, |Bucket(k, _)| k[..] == *key)
    }

    /// The value under `key`.
    pub(super) fn get(&self, key: &[u8]) -> Option<&V> {
        self.find(self.hash(key), key)
    }

    /// The value under `key`, whose hash is `hash` ([`Self::hash`]).
    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.table.find(hash, |Bucket(k, _)| k[..] == *key).map(|Bucket(_, v)| v)
    }

    /// The value under `key`, to change.
    #[cfg(test)]
    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let hash = self.hash(key);
        self.table.find_mut(hash, |Bucket(k, _)| k[..] == *key).map(|Bucket(_, v)| v)
    }

    /// [`Self::hash`] of a key, apart from the table (for a walk that
    /// changes it).
    pub(super) fn key_hasher(&self) -> impl Fn(&[u8]) -> u64 + use<V> {
        let hasher = self.hasher;
        move |key| hasher.hash_one(key)
    }

    /// How the table rehashes its entries when it grows.
    fn rehasher(&self) -> impl Fn(&Bucket<V>) -> u64 + use<V> {
        let hash = self.key_hasher();
        move |Bucket(k, _)| hash(k)
    }

    /// The entry of `key`, whose hash is `hash` ([`Self::hash`]), to
    /// change, insert or remove in one probe.
    pub(super) fn entry(&mut self, hash: u64, key: &[u8]) -> Entry<'_, Bucket<V>, TableAllocator> {
        let rehash = self.rehasher();
        self.table.entry(hash, |Bucket(k, _)| k[..] == *key, rehash)
    }

    /// Make room for `additional` more entries without growing.
    pub(super) fn reserve(&mut self, additional: usize) {
        let rehash = self.rehasher();
        self.table.reserve(additional, rehash);
    }

    /// Entries the table holds.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table holds no entry.
    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Entries the table can hold without growing.
    pub(super) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Every entry, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&CachedKey, &V)> {
        self.table.iter().map(|Bucket(k, v)| (k, v))
    }

    /// Every entry, its value to change, in no particular order.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&CachedKey, &mut V)> {
        self.table.iter_mut().map(|Bucket(k, v)| (&*k, v))
    }

    /// Every value, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.table.iter_mut().map(|Bucket(_, v)| v)
    }

    /// Where each entry is: its bucket's index, of [`Self::buckets`].
    #[cfg(test)]
    pub(super) fn bucket_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.table.iter_buckets()
    }

    /// Buckets the table has.
    #[cfg(test)]
    pub(super) fn buckets(&self) -> usize {
        self.table.num_buckets()
    }

    /// Keep only the entries `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&CachedKey, &mut V) -> bool) {
        self.table.retain(|Bucket(k, v)| keep(k, v));
    }

    /// [`Self::retain`], then lay out what is kept afresh in the same
    /// memory, for when much goes (a cache's eviction of half of it).
    /// Removing an entry from a crowded group leaves a tombstone, which
    /// counts against the room left, so a table thinned again and again
    /// would be grown (doubled) to make room, not for its entries but for
    /// their tombstones; laid out afresh, it has none.
    pub(super) fn retain_compacted(&mut self, mut keep: impl FnMut(&CachedKey, &mut V) -> bool) {
        let mut kept = Vec::with_capacity(self.len());
        // Draining keeps the table's memory, every bucket of it emptied.
        kept.extend(
            self.table
                .drain()
                .filter_map(|Bucket(k, mut v)| keep(&k, &mut v).then_some(Bucket(k, v))),
        );
        let rehash = self.rehasher();
        let inserted = super::visit_ahead(
            self,
            kept,
            |table, Bucket(key, _)| table.prefetch(key),
            |table, entry, hash| {
                table.table.insert_unique(hash, entry, &rehash);
                Ok::<_, std::convert::Infallible>(())
            },
        );
        let Ok(()) = inserted;
    }
}

/// Ask for every cache line of bucket `index` of a table laid out as
/// `layout` whose entries are `T`s.
fn prefetch_bucket<T>(layout: BucketLayout, index: usize) {
    let size = std::mem::size_of::<T>();
    let low = layout.data_end.wrapping_sub((index + 1) * size);
    let first_line = low & !63;
    for line in (first_line..low + size).step_by(64) {
        prefetch(line as *const i8);
    }
}

/// Ask for the cache line holding `address` (without waiting for it).
#[inline(always)]
pub(super) fn prefetch(address: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and faults on no address; SSE,
    // which it needs, is part of every x86_64 CPU.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_changes_and_removes_by_key() {
        let mut table = SlotTable::with_capacity(4);
        for i in 0u32..1000 {
            match table.entry(table.hash(&i.to_be_bytes()), &i.to_be_bytes()) {
                Entry::Vacant(vacant) => {
                    vacant.insert(Bucket(CachedKey::from_slice(&i.to_be_bytes()), i));
                }
                Entry::Occupied(_) => panic!("{i} inserted twice"),
            }
        }
        assert_eq!(table.prefetch(&7u32.to_be_bytes()), table.hash(&7u32.to_be_bytes()));
        table.prefetch(b"absent");
        assert!(SlotTable::<u32>::with_capacity(4).layout().is_none(), "empty");
        assert_eq!((table.len(), table.get(&7u32.to_be_bytes())), (1000, Some(&7)));
        *table.get_mut(&8u32.to_be_bytes()).unwrap() = 80;
        table.retain(|_, v| *v % 2 == 0);
        assert_eq!(table.len(), 500);
        assert_eq!(table.get(&8u32.to_be_bytes()), Some(&80));
        assert_eq!(table.get(&9u32.to_be_bytes()), None);
        let Entry::Occupied(entry) =
            table.entry(table.hash(&8u32.to_be_bytes()), &8u32.to_be_bytes())
        else {
            panic!("8 is there")
        };
        entry.remove();
        assert!(table.get(&8u32.to_be_bytes()).is_none());
        assert_eq!(table.iter().count(), 499);
    }

    /// Thinned by `retain`, a crowded table is left with tombstones,
    /// which take up room as entries do; thinned by `retain_compacted`,
    /// with none, and every entry kept still found.
    #[test]
    fn a_compacted_thinning_leaves_no_tombstones() {
        let fill = |table: &mut SlotTable<u64>, keys: std::ops::Range<u64>| {
            for key in keys {
                let bytes = key.to_be_bytes();
                if let Entry::Vacant(vacant) = table.entry(table.hash(&bytes), &bytes) {
                    vacant.insert(Bucket(CachedKey::from_slice(&bytes), key));
                }
            }
        };
        let (mut plain, mut compacted) =
            (SlotTable::with_capacity(50_000), SlotTable::with_capacity(50_000));
        let buckets = plain.table.num_buckets();
        let room = buckets / 8 * 7;
        let crowded = (room * 9 / 10) as u64;
        fill(&mut plain, 0..crowded);
        fill(&mut compacted, 0..crowded);
        plain.retain(|_, key| *key % 2 == 0);
        compacted.retain_compacted(|_, key| *key % 2 == 0);
        let even = crowded.div_ceil(2) as usize;
        assert_eq!((plain.len(), compacted.len()), (even, even));
        assert!(plain.capacity() < room * 95 / 100, "tombstones: {} of {room}", plain.capacity());
        assert_eq!((compacted.capacity(), compacted.table.num_buckets()), (room, buckets));
        for key in 0..crowded {
            assert_eq!(compacted.get(&key.to_be_bytes()), (key % 2 == 0).then_some(&key));
        }
    }

    #[test]
    fn prefetches_where_the_table_keeps_each_entry() {
        let mut table = SlotTable::with_capacity(1);
        let keys: Vec<[u8; 8]> = (0u64..100_000).map(u64::to_be_bytes).collect();
        for (i, key) in keys.iter().enumerate() {
            table.reserve(1);
            if let Entry::Vacant(vacant) = table.entry(table.hash(key), key) {
                vacant.insert(Bucket(CachedKey::from_slice(key), i));
            }
            if i % 10_000 == 0 {
                // Learnt again after each reallocation.
                table.prefetch(key);
            }
        }
        let layout = table.layout().expect("not empty");
        assert_eq!(layout.buckets, table.table.num_buckets());
        let size = std::mem::size_of::<Bucket<usize>>();
        let mut at_home = 0;
        for key in &keys {
            let hash = table.hash(key);
            let index =
                table.table.find_bucket_index(hash, |Bucket(k, _)| k[..] == key[..]).unwrap();
            let entry = table.table.get_bucket(index).unwrap();
            assert_eq!(std::ptr::from_ref(entry) as usize, layout.data_end - (index + 1) * size);
            let home = hash as usize & (layout.buckets - 1);
            at_home += usize::from(index == home);
        }
        assert!(at_home > keys.len() / 2, "{at_home} of {} where prefetched", keys.len());
    }
}
