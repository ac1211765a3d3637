//! A filter of the keys a state backend may hold, in memory: what lets the
//! state cache answer a read of a key the backend has never seen (a key's
//! first event, a new window's accumulator) without asking the backend.
//!
//! At ten million keys most events are a key's first, and each such read
//! cost a RocksDB lookup that finds nothing (its memtables' and every
//! file's Bloom filters, about a fifth of the CPU). One probe here touches
//! one 32-byte block per layer, and [`KeyFilter::prefetch`] asks for those
//! ahead, like the cache's own slots.
//!
//! Each layer is a split block Bloom filter (the Parquet format's: eight
//! bits in one block of eight 32-bit words), sized for a number of keys;
//! when the newest layer is full, a layer twice its size starts, so the
//! filter grows with the state without ever rebuilding (that would need
//! every key again). It never forgets a key: a deleted key merely stays a
//! false positive, which costs a backend lookup, never a wrong answer.

use super::slots::prefetch;

/// Bits per key a layer is sized for: about 1 % false positives per full
/// layer.
const BITS_PER_KEY: usize = 10;

/// Keys the first layer is sized for (1.25 MiB; its pages are only
/// touched as keys arrive).
const FIRST_LAYER_KEYS: usize = 1 << 20;

/// The salts of the Parquet split block Bloom filter: one per word of a
/// block, each picking that word's bit from the key's hash.
const SALTS: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// One block: eight words, one bit set in each per key.
type Block = [u32; 8];

/// One split block Bloom filter, sized for `capacity` keys.
struct Layer {
    blocks: Vec<Block>,
    /// Keys added (none of them already reported present).
    keys: usize,
    capacity: usize,
}

impl Layer {
    fn new(capacity: usize) -> Self {
        let blocks = (capacity * BITS_PER_KEY).div_ceil(256).max(1);
        // Zeroed by the allocator: pages are touched only when written.
        Self { blocks: vec![[0; 8]; blocks], keys: 0, capacity }
    }

    /// The block of `hash` (its upper half scaled to the block count).
    fn block_index(&self, hash: u64) -> usize {
        (((hash >> 32) * self.blocks.len() as u64) >> 32) as usize
    }

    /// The bit of each word that `hash` sets (from its lower half).
    fn mask(hash: u64) -> Block {
        SALTS.map(|salt| 1 << ((hash as u32).wrapping_mul(salt) >> 27))
    }

    fn may_contain(&self, hash: u64) -> bool {
        let block = &self.blocks[self.block_index(hash)];
        block.iter().zip(Self::mask(hash)).all(|(word, bit)| word & bit != 0)
    }

    fn insert(&mut self, hash: u64) {
        let index = self.block_index(hash);
        for (word, bit) in self.blocks[index].iter_mut().zip(Self::mask(hash)) {
            *word |= bit;
        }
        self.keys += 1;
    }
}

/// Every key added, as hashes (each key's hash in the state cache's
/// table, [`SlotTable::hash`](super::slots::SlotTable::hash)): asked about
/// a key never added, it says so for all but about one in a hundred.
pub(super) struct KeyFilter {
    /// Oldest (smallest) first; keys go to the last.
    layers: Vec<Layer>,
    /// Keys added to all layers (asked per read: kept, not summed).
    keys: usize,
}

impl KeyFilter {
    /// An empty filter.
    pub(super) fn new() -> Self {
        Self { layers: vec![Layer::new(FIRST_LAYER_KEYS)], keys: 0 }
    }

    /// Keys added (once each, as far as the filter could tell).
    pub(super) fn len(&self) -> usize {
        self.keys
    }

    /// Whether no key was added.
    pub(super) fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Whether the key of `hash` may have been added: `false` means it was
    /// not.
    pub(super) fn may_contain(&self, hash: u64) -> bool {
        self.layers.iter().any(|layer| layer.may_contain(hash))
    }

    /// Add the keys of `hashes`, each one's blocks asked of memory a few
    /// keys ahead (a filter of millions of keys is larger than the CPU's
    /// nearer caches, and a write-back adds hundreds of thousands).
    pub(super) fn insert_all(&mut self, hashes: &[u64]) {
        let inserted = super::visit_ahead(
            self,
            hashes,
            |filter, &&hash| filter.prefetch(hash),
            |filter, &hash, ()| {
                filter.insert(hash);
                Ok::<_, std::convert::Infallible>(())
            },
        );
        let Ok(()) = inserted;
    }

    /// Add the key of `hash`.
    pub(super) fn insert(&mut self, hash: u64) {
        if self.may_contain(hash) {
            // Added before (or a false positive, which is as good): adding
            // again would only fill the layer.
            return;
        }
        let newest = self.layers.last().expect("a filter has a layer");
        if newest.keys >= newest.capacity {
            let capacity = newest.capacity * 2;
            self.layers.push(Layer::new(capacity));
        }
        self.layers.last_mut().expect("a filter has a layer").insert(hash);
        self.keys += 1;
    }

    /// Ask memory for the blocks a probe of `hash` will read.
    pub(super) fn prefetch(&self, hash: u64) {
        for layer in &self.layers {
            prefetch(std::ptr::from_ref(&layer.blocks[layer.block_index(hash)]).cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::slots::SlotTable;

    #[test]
    fn finds_every_key_added_and_few_others_as_it_grows() {
        let table = SlotTable::<()>::with_capacity(1);
        let hash = |i: u64| table.hash(&i.to_be_bytes());
        let mut filter = KeyFilter::new();
        let added = FIRST_LAYER_KEYS as u64 + 200_000;
        let hashes: Vec<u64> = (0..added).map(hash).collect();
        let (some, others) = hashes.split_at(1000);
        some.iter().for_each(|&h| filter.insert(h));
        filter.insert_all(others);
        // Re-adding keys does not fill the filter.
        for i in 0..1000 {
            filter.insert(hash(i));
        }
        assert!(filter.len() <= added as usize);
        assert!((0..added).all(|i| filter.may_contain(hash(i))), "no false negative");
        let others = 100_000;
        let false_positives =
            (added..added + others).filter(|&i| filter.may_contain(hash(i))).count();
        assert!(
            false_positives < others as usize * 3 / 100,
            "{false_positives} false positives in {others}"
        );
        let blocks = |keys: usize| keys * BITS_PER_KEY / 256;
        let sizes: Vec<usize> = filter.layers.iter().map(|layer| layer.blocks.len()).collect();
        assert_eq!(sizes, [blocks(FIRST_LAYER_KEYS), blocks(2 * FIRST_LAYER_KEYS)]);
    }
}
