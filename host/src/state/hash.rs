//! A fast hash for the host's maps keyed by state keys and pipeline keys
//! (the state cache, the per-batch key grouping): XXH3 over the bytes
//! with a per-process random seed. The standard SipHash took ~9 % of the
//! native benchmark's CPU; a fixed unseeded hash would let crafted keys
//! collide on purpose, so the seed stays secret and random.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`KeyHasher`]s sharing this process's seed. For maps keyed by
/// byte strings (with fixed-size integers beside them, not `usize`s:
/// those are taken for length prefixes and left out).
#[derive(Clone, Copy, Debug)]
pub struct KeyHashBuilder {
    seed: u64,
}

impl Default for KeyHashBuilder {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        // RandomState is seeded from the OS; hash nothing to draw from it.
        let seed =
            *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
        Self { seed }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { state: self.seed }
    }
}

/// Hashes each write as it comes, chained through the seed: a key (one
/// slice) is one XXH3 call, with nothing copied. Length prefixes are left
/// out (a map key is one slice, or a slice and fixed-size numbers): two
/// keys they alone would tell apart merely collide.
pub struct KeyHasher {
    state: u64,
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.state = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.state);
    }

    fn write_u64(&mut self, value: u64) {
        // One multiply-fold round (as wyhash/foldhash mix).
        let mixed = u128::from(self.state ^ value) * u128::from(0x9e37_79b9_7f4a_7c15u64);
        self.state = (mixed as u64) ^ ((mixed >> 64) as u64);
    }

    fn write_i64(&mut self, value: i64) {
        self.write_u64(value as u64);
    }

    fn write_usize(&mut self, _length_prefix: usize) {}

    fn finish(&self) -> u64 {
        self.state
    }
}

/// A `HashMap` using [`KeyHashBuilder`] (hashbrown's, for `entry_ref`:
/// one probe to look up a borrowed key and insert, change or remove it).
pub type KeyMap<K, V> = hashbrown::HashMap<K, V, KeyHashBuilder>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_long_keys_work() {
        let mut map: KeyMap<Vec<u8>, usize> = KeyMap::default();
        let long = vec![7u8; 300];
        for (i, key) in
            [b"a".to_vec(), b"ab".to_vec(), Vec::new(), long.clone()].into_iter().enumerate()
        {
            map.insert(key, i);
        }
        assert_eq!(
            (map[&b"a".to_vec()], map[&b"ab".to_vec()], map[&Vec::new()], map[&long]),
            (0, 1, 2, 3)
        );
        let builder = KeyHashBuilder::default();
        assert_eq!(builder.hash_one(b"key".to_vec()), builder.hash_one(b"key".to_vec()));
        assert_ne!(builder.hash_one(b"key".to_vec()), builder.hash_one(b"kez".to_vec()));
        assert_eq!(
            builder.hash_one(&b"key"[..]),
            builder.hash_one(b"key".to_vec()),
            "slices hash as their owned forms"
        );
        assert_ne!(
            builder.hash_one((&b"k"[..], 1i64)),
            builder.hash_one((&b"k"[..], 2i64)),
            "numbers beside the bytes count"
        );
    }
}
