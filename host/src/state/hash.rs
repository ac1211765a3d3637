//! A fast hash for the host's maps keyed by state keys and pipeline keys
//! (the state cache, the per-batch key grouping): XXH3 over the bytes
//! with a per-process random seed. The standard SipHash took ~9 % of the
//! native benchmark's CPU; a fixed unseeded hash would let crafted keys
//! collide on purpose, so the seed stays secret and random.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`KeyHasher`]s sharing this process's seed.
#[derive(Clone, Copy, Debug)]
pub struct KeyHashBuilder {
    seed: u64,
}

impl Default for KeyHashBuilder {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        // RandomState is seeded from the OS; hash nothing to draw from it.
        let seed = *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
        Self { seed }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { seed: self.seed, buffer: [0; 64], len: 0, spill: Vec::new() }
    }
}

/// Collects the bytes written (keys are short: inline up to 64 bytes) and
/// hashes them once at `finish`.
pub struct KeyHasher {
    seed: u64,
    buffer: [u8; 64],
    len: usize,
    spill: Vec<u8>,
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        if self.spill.is_empty() && self.len + bytes.len() <= self.buffer.len() {
            self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.buffer[..self.len]);
            }
            self.spill.extend_from_slice(bytes);
        }
    }

    fn finish(&self) -> u64 {
        let bytes = if self.spill.is_empty() { &self.buffer[..self.len] } else { &self.spill[..] };
        xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed)
    }
}

/// A `HashMap` using [`KeyHashBuilder`].
pub type KeyMap<K, V> = std::collections::HashMap<K, V, KeyHashBuilder>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_long_keys_work() {
        let mut map: KeyMap<Vec<u8>, usize> = KeyMap::default();
        let long = vec![7u8; 300];
        for (i, key) in [b"a".to_vec(), b"ab".to_vec(), Vec::new(), long.clone()].into_iter().enumerate() {
            map.insert(key, i);
        }
        assert_eq!((map[&b"a".to_vec()], map[&b"ab".to_vec()], map[&Vec::new()], map[&long]), (0, 1, 2, 3));
        let builder = KeyHashBuilder::default();
        assert_eq!(builder.hash_one(b"key".to_vec()), builder.hash_one(b"key".to_vec()));
        assert_ne!(builder.hash_one(b"key".to_vec()), builder.hash_one(b"kez".to_vec()));
    }
}
