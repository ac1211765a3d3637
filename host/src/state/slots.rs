//! The state cache's table of slots by state key: a hash table whose
//! lookups of a whole batch of keys can be announced to memory before they
//! are made ([`SlotTable::prefetch`]).
//!
//! A cache of more keys than the CPU's caches hold waits for memory at
//! every lookup (the slot's line, and for a new key the table's control
//! bytes too); asking for all of a batch's lines first lets those waits
//! overlap instead of following each other.

use std::hash::BuildHasher;

use hashbrown::hash_table::{Entry, HashTable};
use smallvec::SmallVec;

use super::hash::KeyHashBuilder;

/// A cached key: stored in the table's own slot up to 48 bytes (state
/// keys of short names and keys are), so a lookup compares bytes in place
/// instead of following a pointer to somewhere else in the heap.
pub(super) type CachedKey = SmallVec<[u8; 48]>;

/// Values of type `V` by state key.
pub(super) struct SlotTable<V> {
    table: HashTable<(CachedKey, V)>,
    hasher: KeyHashBuilder,
}

impl<V> SlotTable<V> {
    /// An empty table with room for `capacity` entries.
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self { table: HashTable::with_capacity(capacity), hasher: KeyHashBuilder::default() }
    }

    /// `key`'s hash in this table (for [`Self::entry`]).
    pub(super) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Ask memory for what a lookup of `key` will read (the control bytes
    /// it probes and the slot it will compare), without waiting for it;
    /// `key`'s hash, for the lookup.
    pub(super) fn prefetch(&self, key: &[u8]) -> u64 {
        let hash = self.hash(key);
        // A probe that matches nothing visits the candidates (computing
        // their addresses reads nothing) and stops at the first empty group.
        let _ = self.table.find(hash, |entry| {
            prefetch(std::ptr::from_ref(entry).cast());
            false
        });
        hash
    }

    /// The value under `key`.
    pub(super) fn get(&self, key: &[u8]) -> Option<&V> {
        self.find(self.hash(key), key)
    }

    /// The value under `key`, whose hash is `hash` ([`Self::hash`]).
    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.table.find(hash, |(k, _)| k[..] == *key).map(|(_, v)| v)
    }

    /// The value under `key`, to change.
    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let hash = self.hash(key);
        self.table.find_mut(hash, |(k, _)| k[..] == *key).map(|(_, v)| v)
    }

    /// How the table rehashes its entries when it grows.
    fn rehasher(&self) -> impl Fn(&(CachedKey, V)) -> u64 + use<V> {
        let hasher = self.hasher;
        move |(k, _)| hasher.hash_one(&k[..])
    }

    /// The entry of `key`, whose hash is `hash` ([`Self::hash`]), to
    /// change, insert or remove in one probe.
    pub(super) fn entry(&mut self, hash: u64, key: &[u8]) -> Entry<'_, (CachedKey, V)> {
        let rehash = self.rehasher();
        self.table.entry(hash, |(k, _)| k[..] == *key, rehash)
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
        self.table.iter().map(|(k, v)| (k, v))
    }

    /// Every entry, its value to change, in no particular order.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&CachedKey, &mut V)> {
        self.table.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Every value, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.table.iter_mut().map(|(_, v)| v)
    }

    /// Keep only the entries `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&CachedKey, &mut V) -> bool) {
        self.table.retain(|(k, v)| keep(k, v));
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
                    vacant.insert((CachedKey::from_slice(&i.to_be_bytes()), i));
                }
                Entry::Occupied(_) => panic!("{i} inserted twice"),
            }
        }
        assert_eq!(table.prefetch(&7u32.to_be_bytes()), table.hash(&7u32.to_be_bytes()));
        table.prefetch(b"absent");
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
}
