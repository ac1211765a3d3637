//! The state cache's write-back buffers: copies of the dirty entries,
//! grouped by key group as the cache's walk finds them, then put in key
//! order one group at a time for the backend's sorted write.
//!
//! Every state key begins with its key group (two bytes, big-endian), so
//! the groups in order, each sorted, are all the writes sorted. A group is
//! a few hundred kilobytes where a subtask writes back a million entries:
//! sorting it and reading its copies in key order stay within the CPU's
//! caches, where one copy of every entry (tens of megabytes) read in key
//! order waited for memory at each entry, and one sort over all of them
//! passed over it again and again.

use super::slots::prefetch;
use super::{Write, PREFETCH_DISTANCE};

/// The length [`copy_out`] records for a pending delete.
const NO_VALUE: u32 = u32::MAX;

/// Bytes [`copy_out`] writes before a key: its length, its value's and
/// its bucket.
const COPY_HEADER: usize = 16;

/// No group yet for a key group, in [`WriteBackCopies::group_of`].
const NO_GROUP: u32 = u32::MAX;

/// Append `key` and `value`, found in bucket `index` of the cache's
/// table, to `bytes` (their lengths and the bucket, then them, as
/// [`copied_at`] reads them); where they begin.
fn copy_out(bytes: &mut Vec<u8>, index: usize, key: &[u8], value: Option<&[u8]>) -> usize {
    // A key or value comes from a function's 32-bit memory: under 4 GiB.
    let length = |bytes: &[u8]| u32::try_from(bytes.len()).expect("under 4 GiB");
    let start = bytes.len();
    bytes.extend_from_slice(&length(key).to_le_bytes());
    bytes.extend_from_slice(&value.map_or(NO_VALUE, length).to_le_bytes());
    bytes.extend_from_slice(&(index as u64).to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(value.unwrap_or_default());
    start
}

/// The key and value [`copy_out`] put at `start` of `bytes`, and where
/// the next copy begins.
fn copied_at(bytes: &[u8], start: usize) -> (Write<'_>, usize) {
    let length = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let (key_length, value_length) = (length(start) as usize, length(start + 4));
    let key_start = start + COPY_HEADER;
    let value_start = key_start + key_length;
    let (value, end) = match value_length {
        NO_VALUE => (None, value_start),
        length => {
            let end = value_start + length as usize;
            (Some(&bytes[value_start..end]), end)
        }
    };
    ((&bytes[key_start..value_start], value), end)
}

/// The bucket [`copy_out`] recorded at `start` of `bytes`.
fn bucket_at(bytes: &[u8], start: usize) -> usize {
    let at = start + 8;
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")) as usize
}

/// Where each copy in `bytes` begins, in order.
fn copy_starts(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    std::iter::successors((!bytes.is_empty()).then_some(0), |&start| {
        Some(copied_at(bytes, start).1).filter(|&next| next < bytes.len())
    })
}

/// Eight bytes of `key` from `from` on as a big-endian number, zero-padded:
/// keys that agree on their first `from` bytes, ordered by it, then by
/// their bytes, are in byte order, and most pairs are told apart by one
/// comparison of numbers instead of a `memcmp` call.
fn order_prefix(key: &[u8], from: usize) -> u64 {
    let mut bytes = [0; 8];
    let rest = key.get(from..).unwrap_or_default();
    let len = rest.len().min(8);
    bytes[..len].copy_from_slice(&rest[..len]);
    u64::from_be_bytes(bytes)
}

/// How many bytes `a` and `b` begin with alike, compared eight at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut alike = 0;
    for (x, y) in a_words.by_ref().zip(b_words.by_ref()) {
        let differ = u64::from_be_bytes(x.try_into().expect("8 bytes"))
            ^ u64::from_be_bytes(y.try_into().expect("8 bytes"));
        if differ != 0 {
            return alike + differ.leading_zeros() as usize / 8;
        }
        alike += 8;
    }
    alike + a[alike..].iter().zip(&b[alike..]).take_while(|(x, y)| x == y).count()
}

/// The key group a state key begins with. A key too short to have one
/// (only in tests) goes where byte order puts it: one byte `b` with the
/// keys of group `b·256`, before them; no byte in group 0, first.
fn key_group_of(key: &[u8]) -> u16 {
    match key {
        [high, low, ..] => u16::from_be_bytes([*high, *low]),
        [high] => u16::from_be_bytes([*high, 0]),
        [] => 0,
    }
}

/// A copied entry in its group's key order.
struct Sorted {
    /// [`order_prefix`] of its key past the bytes all its group's keys
    /// begin with.
    prefix: u64,
    /// Where it is in its group's bytes.
    start: usize,
}

/// The copies of one key group's dirty entries.
#[derive(Default)]
struct GroupCopies {
    key_group: u16,
    /// The entries' buckets, keys and values ([`copy_out`]), in the order
    /// the walk found them: one stream of writes per group as it walks.
    bytes: Vec<u8>,
    /// How many entries.
    copied: usize,
    /// Where its entries end in [`WriteBackCopies::sorted`].
    sorted_end: usize,
}

/// Copies of a write-back's dirty entries, kept from one write-back to the
/// next (a million writes would otherwise fault in tens of fresh megabytes
/// each time).
#[derive(Default)]
pub(super) struct WriteBackCopies {
    /// Every group ever used; the first `used` hold this write-back's.
    groups: Vec<GroupCopies>,
    used: usize,
    /// The index in `groups` of each key group's copies ([`NO_GROUP`]:
    /// none), by key group; allocated at the first copy.
    group_of: Vec<u32>,
    /// The copies in key order, group after group ([`Self::sort`]).
    sorted: Vec<Sorted>,
    /// The hashes of the copied keys given to [`Self::add`], for the
    /// filter of the backend's keys.
    hashes: Vec<u64>,
    /// Items the walk that finds the entries has visited
    /// ([`Self::visit`]), and at which one to [`Self::make_room`].
    visited: usize,
    room_at: usize,
}

/// The share of a write-back's walk ([`SAMPLE_SHARE`]th) after which
/// each group is given room for its share of the rest
/// ([`WriteBackCopies::make_room`]).
const SAMPLE_SHARE: usize = 16;

/// Room given beyond a group's expected share, in sixteenths (a group's
/// share of the first entries is a sample of its share of all).
const ROOM_SIXTEENTHS: usize = 17;

impl WriteBackCopies {
    /// Forget the last write-back's copies (keeping their memory), for a
    /// write-back whose walk visits `walk` items ([`Self::visit`]).
    pub(super) fn clear(&mut self, walk: usize) {
        self.hashes.clear();
        (self.visited, self.room_at) = (0, walk / SAMPLE_SHARE);
        for group in &mut self.groups[..self.used] {
            self.group_of[usize::from(group.key_group)] = NO_GROUP;
            group.copied = 0;
            group.bytes.clear();
        }
        self.used = 0;
        self.sorted.clear();
    }

    /// Count one item of the walk that finds the entries, before any
    /// [`Self::add`] of it; its number in the walk (from 0).
    pub(super) fn visit(&mut self) -> usize {
        if self.visited == self.room_at {
            self.make_room();
        }
        self.visited += 1;
        self.visited - 1
    }

    /// Copy `key` and `value` (`None`: a delete), found in bucket `index`
    /// of the cache's table (any number no other copy of the write-back
    /// has, for a bucket drained), to be written back; with its key's
    /// `hash` for the filter of the backend's keys when one is kept (hashed
    /// while the key is at hand, not once sorted: a wait for memory each).
    pub(super) fn add(
        &mut self,
        index: usize,
        key: &[u8],
        value: Option<&[u8]>,
        hash: Option<u64>,
    ) {
        self.hashes.extend(hash);
        if self.group_of.is_empty() {
            self.group_of = vec![NO_GROUP; usize::from(u16::MAX) + 1];
        }
        let key_group = key_group_of(key);
        let slot = &mut self.group_of[usize::from(key_group)];
        if *slot == NO_GROUP {
            if self.used == self.groups.len() {
                self.groups.push(GroupCopies::default());
            }
            self.groups[self.used].key_group = key_group;
            *slot = u32::try_from(self.used).expect("at most 65,536 key groups");
            self.used += 1;
        }
        let group = &mut self.groups[*slot as usize];
        copy_out(&mut group.bytes, index, key, value);
        group.copied += 1;
    }

    /// Give each group room for what it is expected to get of the whole
    /// write-back, from what it got so far, once the walk that finds the
    /// entries is [`SAMPLE_SHARE`]th done ([`Self::visit`]). The walk finds them in an order
    /// unrelated to their key groups, so what a group got of the first
    /// ones is its share of all of them. Grown by doubling instead, the
    /// groups' buffers would end up to twice their size, and the smaller
    /// ones they outgrew would stay the process's memory.
    fn make_room(&mut self) {
        for group in &mut self.groups[..self.used] {
            let len = group.bytes.len();
            group.bytes.reserve((len * SAMPLE_SHARE * ROOM_SIXTEENTHS / 16).saturating_sub(len));
        }
    }

    /// Put the copies in key order, group by group (each sorted while it is
    /// in the CPU's caches), a key copied twice kept once; how many writes
    /// they are.
    pub(super) fn sort(&mut self) -> usize {
        let groups = &mut self.groups[..self.used];
        groups.sort_unstable_by_key(|group| group.key_group);
        self.sorted.reserve(groups.iter().map(|group| group.copied).sum());
        for (at, group) in groups.iter_mut().enumerate() {
            self.group_of[usize::from(group.key_group)] = at as u32;
            let bytes = &group.bytes;
            let key_at = |start| copied_at(bytes, start).0 .0;
            let first = key_at(0);
            let shared = copy_starts(bytes).map(|start| common_prefix(first, key_at(start))).min();
            let shared = shared.unwrap_or_default();
            let begin = self.sorted.len();
            self.sorted.extend(
                copy_starts(bytes)
                    .map(|start| Sorted { prefix: order_prefix(key_at(start), shared), start }),
            );
            let run = &mut self.sorted[begin..];
            run.sort_unstable_by(|a, b| {
                a.prefix.cmp(&b.prefix).then_with(|| key_at(a.start).cmp(key_at(b.start)))
            });
            // A key listed twice was copied twice, from the same bucket.
            let mut kept = begin;
            for next in begin..self.sorted.len() {
                let bucket = |entry: &Sorted| bucket_at(bytes, entry.start);
                if kept == begin || bucket(&self.sorted[kept - 1]) != bucket(&self.sorted[next]) {
                    self.sorted.swap(kept, next);
                    kept += 1;
                }
            }
            self.sorted.truncate(kept);
            group.sorted_end = kept;
        }
        self.sorted.len()
    }

    /// The writes of the copies, in the order [`Self::sort`] left them,
    /// each asked of memory a few writes before it is read.
    pub(super) fn writes(&self) -> SortedWrites<'_> {
        SortedWrites { copies: self, group: 0, next: 0 }
    }

    /// The hashes given with the copies ([`Self::add`]).
    pub(super) fn hashes(&self) -> &[u64] {
        &self.hashes
    }

    /// The buckets of the copied entries, in key order.
    pub(super) fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        let mut begin = 0;
        self.groups[..self.used].iter().flat_map(move |group| {
            let run =
                &self.sorted[std::mem::replace(&mut begin, group.sorted_end)..group.sorted_end];
            run.iter().map(|entry| bucket_at(&group.bytes, entry.start))
        })
    }
}

/// The writes of [`WriteBackCopies::writes`]: their number known ahead
/// (a backend picks how to write by it).
pub(super) struct SortedWrites<'a> {
    copies: &'a WriteBackCopies,
    /// The group of the next write, and where it is in `sorted`.
    group: usize,
    next: usize,
}

impl<'a> Iterator for SortedWrites<'a> {
    type Item = Write<'a>;

    fn next(&mut self) -> Option<Write<'a>> {
        let copies = self.copies;
        let groups = &copies.groups[..copies.used];
        while groups.get(self.group)?.sorted_end == self.next {
            self.group += 1;
        }
        let group = &groups[self.group];
        if self.next + PREFETCH_DISTANCE < group.sorted_end {
            let ahead = copies.sorted[self.next + PREFETCH_DISTANCE].start;
            prefetch(group.bytes[ahead..].as_ptr().cast());
        }
        let start = copies.sorted[self.next].start;
        self.next += 1;
        Some(copied_at(&group.bytes, start).0)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.copies.sorted.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for SortedWrites<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_out_writes_read_back_as_they_were() {
        let writes: [Write<'_>; 4] = [
            (b"key", Some(b"value")),
            (b"", Some(b"")),
            (b"gone", None),
            (&[0; 300], Some(&[7; 70])),
        ];
        let mut bytes = Vec::new();
        let starts: Vec<usize> = (writes.iter().enumerate())
            .map(|(bucket, &(key, value))| copy_out(&mut bytes, bucket * 1000, key, value))
            .collect();
        assert_eq!(copy_starts(&bytes).collect::<Vec<_>>(), starts);
        for (bucket, (write, start)) in writes.iter().zip(starts).enumerate() {
            assert_eq!(copied_at(&bytes, start).0, *write);
            assert_eq!(bucket_at(&bytes, start), bucket * 1000);
        }
    }

    #[test]
    fn common_prefixes_are_counted_in_bytes() {
        let key = b"0123456789abcdefXYZ";
        for len in 0..=key.len() {
            for differ in 0..len {
                let mut other = key[..len].to_vec();
                other[differ] ^= 1;
                assert_eq!(common_prefix(&key[..len], &other), differ);
            }
            assert_eq!(common_prefix(key, &key[..len]), len);
            assert_eq!(common_prefix(&key[..len], key), len);
        }
    }

    #[test]
    fn prefix_then_bytes_is_byte_order() {
        let ends: [&[u8]; 9] = [
            b"",
            b"\0",
            b"\0\0\x01",
            b"a",
            b"ab",
            b"ab\0",
            b"ab\0\x01",
            b"abcdefghijklmnopq",
            b"abcdefghijklmnopr",
        ];
        for shared in 0..3 {
            let keys: Vec<Vec<u8>> =
                ends.iter().map(|end| [&b"xy"[..shared], end].concat()).collect();
            for a in &keys {
                for b in &keys {
                    let prefix = |key| order_prefix(key, shared);
                    assert_eq!(
                        prefix(a).cmp(&prefix(b)).then_with(|| a.cmp(b)),
                        a.cmp(b),
                        "{a:?} vs {b:?}"
                    );
                }
            }
        }
    }

    /// Keys of many key groups (and of none), added in no order, some
    /// twice, come out once each in byte order, with their values and
    /// buckets; cleared, the copies take another write-back alike.
    #[test]
    fn writes_come_in_key_order_once_each() {
        let mut copies = WriteBackCopies::default();
        for round in 0..2u8 {
            copies.clear(5_000);
            let mut expected = std::collections::BTreeMap::new();
            let mut rng = 0x9e37_79b9_7f4a_7c15_u64 + u64::from(round);
            for index in 0..5_000usize {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let key: Vec<u8> = match rng % 50 {
                    0 => vec![],
                    1 => vec![(rng >> 8) as u8],
                    // State keys alike up to the user's key, a few groups.
                    2..=25 => {
                        [&[0, (rng >> 61) as u8, 5][..], b"total", &rng.to_le_bytes()].concat()
                    }
                    _ => rng.to_be_bytes()[..2 + (rng >> 60) as usize % 6].to_vec(),
                };
                let value =
                    (!rng.is_multiple_of(7)).then(|| vec![round; (rng >> 20) as usize % 30]);
                if let std::collections::btree_map::Entry::Vacant(new) = expected.entry(key) {
                    copies.add(index, new.key(), value.as_deref(), Some(index as u64));
                    new.insert((index, value));
                }
                assert_eq!(copies.visit(), index);
                if index.is_multiple_of(97) {
                    // Listed again, in the same bucket (a key listed twice).
                    let (again, (bucket, value)) = expected.iter().next().expect("one");
                    copies.add(*bucket, again, value.as_deref(), None);
                }
            }
            assert_eq!(copies.sort(), expected.len());
            let writes = copies.writes();
            assert_eq!(writes.len(), expected.len());
            let got: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                writes.map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec))).collect();
            let want: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                expected.iter().map(|(key, (_, value))| (key.clone(), value.clone())).collect();
            assert_eq!(got, want);
            let buckets: Vec<usize> = copies.indices().collect();
            assert_eq!(buckets, expected.values().map(|(bucket, _)| *bucket).collect::<Vec<_>>());
            assert_eq!(copies.hashes().len(), expected.len(), "one hash per first copy");
            copies.clear(0);
            assert_eq!((copies.sort(), copies.writes().count()), (0, 0));
            assert!(copies.hashes().is_empty());
        }
    }
}
