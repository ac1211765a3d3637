//! The byte layout of state keys and the key-group hash.
//!
//! Every stored key is
//! `[key group: u16 BE][name len: u8][state name][kind: u8][key len: u32 BE][key][namespace len: u16 BE][namespace]`,
//! followed, for map state, by the map's user key. Leading with the key
//! group lets a subtask's state be a contiguous range (for rescaling and
//! snapshots); the length prefixes make every component unambiguous so a
//! prefix never matches another key's entries.

/// Default number of key groups (Flink's default max parallelism).
pub const DEFAULT_MAX_PARALLELISM: u16 = 128;

/// The key group broadcast state is stored under (see the runtime's
/// `broadcast` host interface): it is not keyed, so it belongs to no real
/// key group. Real key groups are below the largest max parallelism
/// (32768), so this one never collides with them; checkpoints and restores
/// copy its entries to every subtask.
pub const BROADCAST_KEY_GROUP: u16 = u16::MAX;

/// Longest state name, in bytes.
pub const MAX_STATE_NAME_LEN: usize = 255;

/// Which kind of state an entry belongs to; the same name may be used for
/// different kinds without clashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StateKind {
    /// A single value per key.
    Value = 1,
    /// A map per key; entries follow the prefix.
    Map = 2,
    /// A list per key, stored as one encoded value.
    List = 3,
    /// A timer of a key; the namespace holds its domain and timestamp.
    Timer = 4,
}

/// The parts of a stored state key.
#[derive(Clone, Debug)]
pub struct StateKey<'a> {
    key_group: u16,
    name: &'a str,
    kind: StateKind,
    key: &'a [u8],
    namespace: &'a [u8],
}

impl<'a> StateKey<'a> {
    /// A state key. `name` must be at most [`MAX_STATE_NAME_LEN`] bytes.
    pub fn new(
        key_group: u16,
        name: &'a str,
        kind: StateKind,
        key: &'a [u8],
        namespace: &'a [u8],
    ) -> Self {
        debug_assert!(name.len() <= MAX_STATE_NAME_LEN);
        Self { key_group, name, kind, key, namespace }
    }

    /// Append the encoded key to `out` (reusing its allocation).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(2 + 1 + self.name.len() + 1 + 4 + self.key.len() + 2 + self.namespace.len());
        out.extend_from_slice(&self.key_group.to_be_bytes());
        out.push(self.name.len() as u8);
        out.extend_from_slice(self.name.as_bytes());
        out.push(self.kind as u8);
        out.extend_from_slice(&(self.key.len() as u32).to_be_bytes());
        out.extend_from_slice(self.key);
        out.extend_from_slice(&(self.namespace.len() as u16).to_be_bytes());
        out.extend_from_slice(self.namespace);
    }

    /// The prefix shared by every key of state `name` of `kind` in
    /// `key_group`, whatever the key and namespace.
    pub fn state_prefix(key_group: u16, name: &str, kind: StateKind) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + name.len());
        out.extend_from_slice(&key_group.to_be_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(kind as u8);
        out
    }

    /// Split what follows [`StateKey::state_prefix`] into key and namespace
    /// (and any map user key after them); `None` if malformed.
    pub fn split_rest(rest: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
        let (len, rest) = rest.split_first_chunk::<4>()?;
        let (key, rest) = rest.split_at_checked(u32::from_be_bytes(*len) as usize)?;
        let (len, rest) = rest.split_first_chunk::<2>()?;
        let (namespace, rest) = rest.split_at_checked(u16::from_be_bytes(*len) as usize)?;
        Some((key, namespace, rest))
    }

    /// The encoded key.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}

/// The key group of `key` among `max_parallelism` groups.
///
/// The hash is XXH3-64 (seed 0) of the key bytes, reduced modulo
/// `max_parallelism`. XXH3 is specified and stable, so the mapping never
/// changes between releases; it must not, because state is laid out by it.
pub fn key_group(key: &[u8], max_parallelism: u16) -> u16 {
    debug_assert!(max_parallelism > 0);
    let (hash, groups) = (xxhash_rust::xxh3::xxh3_64(key), u64::from(max_parallelism));
    // The same remainder; a mask for a power of two (128 by default)
    // instead of a 64-bit division, which took most of the time routing
    // a batch by key spent here.
    let group = if groups.is_power_of_two() { hash & (groups - 1) } else { hash % groups };
    group as u16
}

/// The subtask (of `parallelism`) that owns `key_group`: Flink's rule,
/// `key_group * parallelism / max_parallelism`, which gives each subtask a
/// contiguous range of key groups (see [`key_group_range`]).
pub fn subtask_for_key_group(key_group: u16, max_parallelism: u16, parallelism: u16) -> u16 {
    (u32::from(key_group) * u32::from(parallelism) / u32::from(max_parallelism)) as u16
}

/// The key groups `start..=end` that subtask `index` of `parallelism` owns.
pub fn key_group_range(
    index: u16,
    max_parallelism: u16,
    parallelism: u16,
) -> std::ops::RangeInclusive<u16> {
    let (index, max, p) = (u32::from(index), u32::from(max_parallelism), u32::from(parallelism));
    let start = (index * max).div_ceil(p);
    let end = ((index + 1) * max).div_ceil(p) - 1;
    start as u16..=end as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_group_ranges_partition_and_agree_with_routing() {
        for (max, p) in [(128u16, 1u16), (128, 3), (128, 4), (7, 7), (32768, 5), (10, 4)] {
            let mut next = 0u32;
            for index in 0..p {
                let range = key_group_range(index, max, p);
                assert_eq!(u32::from(*range.start()), next, "ranges are contiguous ({max}, {p})");
                for group in range.clone() {
                    assert_eq!(
                        subtask_for_key_group(group, max, p),
                        index,
                        "group {group} of ({max}, {p})"
                    );
                }
                next = u32::from(*range.end()) + 1;
            }
            assert_eq!(next, u32::from(max), "ranges cover every key group");
        }
    }

    #[test]
    fn the_broadcast_key_group_is_past_every_real_one() {
        assert!(key_group_range(0, 32768, 1).end() < &BROADCAST_KEY_GROUP);
        let key = StateKey::new(BROADCAST_KEY_GROUP, "rules", StateKind::Map, b"", b"").encode();
        assert!(key.starts_with(&[0xff, 0xff]), "broadcast entries sort after all keyed state");
    }

    #[test]
    fn layout_is_as_documented() {
        let key = StateKey::new(0x0102, "ab", StateKind::Map, b"k", b"ns").encode();
        assert_eq!(key, vec![1, 2, 2, b'a', b'b', 2, 0, 0, 0, 1, b'k', 0, 2, b'n', b's']);
    }

    #[test]
    fn prefixes_and_splitting_invert_encoding() {
        let full = StateKey::new(9, "t", StateKind::Timer, b"key", b"ns").encode();
        let prefix = StateKey::state_prefix(9, "t", StateKind::Timer);
        assert!(full.starts_with(&prefix));
        assert_eq!(
            StateKey::split_rest(&full[prefix.len()..]),
            Some((&b"key"[..], &b"ns"[..], &b""[..]))
        );
        assert_eq!(StateKey::split_rest(&[0, 0, 0, 9, 1]), None);
    }

    #[test]
    fn key_groups_are_stable_and_in_range() {
        // Pinned values: if these change, existing state becomes unreadable.
        assert_eq!(key_group(b"1", 128), (xxhash_rust::xxh3::xxh3_64(b"1") % 128) as u16);
        assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2d06800538d394c2);
        for i in 0..1000u32 {
            let key = i.to_be_bytes();
            assert!(key_group(&key, 7) < 7);
            for groups in [1u16, 7, 128, 1000, 32768] {
                let remainder = xxhash_rust::xxh3::xxh3_64(&key) % u64::from(groups);
                assert_eq!(u64::from(key_group(&key, groups)), remainder, "{groups} groups");
            }
        }
    }
}
