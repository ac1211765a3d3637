//! Keyed state: where the values a function keeps per key live.
//!
//! Owns the state backend trait, the byte layout of state keys, and the
//! backends (RocksDB in production, in memory for tests). It knows nothing
//! about Wasm: the runtime's `state` host interface calls into it.

mod cache;
pub mod changelog;
pub mod encoding;
pub mod hash;
mod huge;
mod inline;
mod journal;
mod key;
mod key_filter;
pub mod layout;
mod memory;
mod rocks;
mod slots;
pub mod ttl;
mod write_back;

pub use cache::CachedBackend;
pub use huge::allow_advised_huge_pages;
pub use journal::JournaledBackend;
pub use key::{
    key_group, key_group_range, subtask_for_key_group, StateKey, StateKind, BROADCAST_KEY_GROUP,
    DEFAULT_MAX_PARALLELISM, MAX_STATE_NAME_LEN,
};
pub use memory::InMemoryBackend;
pub use rocks::RocksDbBackend;

/// A failure of the state backend.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// RocksDB reported an error.
    #[error("RocksDB: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A state file (a changelog) could not be read or written.
    #[error("state files: {0}")]
    Io(#[from] std::io::Error),
    /// Stored bytes could not be decoded (corruption or a foreign database).
    #[error("corrupt state: {0}")]
    Corrupt(String),
    /// The backend cannot do what was asked.
    #[error("{0}")]
    Unsupported(String),
}

/// One entry returned by [`KeyedStateBackend::scan`]: the part of the
/// stored key after the scanned prefix, and the value.
pub type ScanEntry = (Vec<u8>, Vec<u8>);

/// One write of a batch: store the value, or delete the key when `None`.
pub type Write<'a> = (&'a [u8], Option<&'a [u8]>);

/// What a checkpoint directory must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotForm {
    /// A RocksDB database (what a savepoint encodes).
    Database,
    /// A database, or one plus changelogs that a restore replays
    /// ([`changelog`]): what periodic checkpoints may be.
    Chained,
}

/// What a backend can say about itself, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateStats {
    /// Estimated bytes of live state on disk and in memory tables, if known.
    pub bytes: Option<u64>,
    /// Reads a cache answered without asking the backend below it.
    pub cache_hits: u64,
    /// Reads a cache passed on to the backend below it.
    pub cache_misses: u64,
}

/// How many items ahead of its visit [`visit_ahead`] announces an item:
/// enough for a dozen waits for memory to overlap, few enough that what
/// arrives is still in the nearest cache when its visit comes.
const PREFETCH_DISTANCE: usize = 16;

/// Visit `items` in order, each announced [`PREFETCH_DISTANCE`] items
/// before its visit (`announce` asks memory for what the visit will touch,
/// say through [`KeyedStateBackend::prefetch`]), so that the waits for
/// memory of nearby visits overlap instead of following each other. What
/// `announce` returns is handed to the item's visit; both see `context`.
/// The first error ends the walk.
pub fn visit_ahead<C: ?Sized, T, A, E>(
    context: &mut C,
    items: impl IntoIterator<Item = T>,
    mut announce: impl FnMut(&mut C, &T) -> A,
    mut visit: impl FnMut(&mut C, T, A) -> Result<(), E>,
) -> Result<(), E> {
    let mut ahead = std::collections::VecDeque::with_capacity(PREFETCH_DISTANCE);
    for item in items {
        let announced = announce(context, &item);
        if ahead.len() == PREFETCH_DISTANCE {
            let (item, announced) = ahead.pop_front().expect("full");
            visit(context, item, announced)?;
        }
        ahead.push_back((item, announced));
    }
    ahead.into_iter().try_for_each(|(item, announced)| visit(context, item, announced))
}

/// The keys of a [`KeyedStateBackend::get_many_into`] and where its
/// answers go.
pub struct ReadBatch<'a, 'k> {
    /// The `i`th key.
    pub key: &'a dyn Fn(usize) -> &'k [u8],
    /// How many keys.
    pub count: usize,
    /// Each key's [`KeyedStateBackend::prefetch`] answer is pushed here
    /// (for writes of the same keys).
    pub prefetched: &'a mut Vec<Prefetched>,
    /// Each value found is appended here.
    pub out: &'a mut Vec<u8>,
    /// Each key's value's range in `out` is pushed here, `None` when there
    /// is none.
    pub found: &'a mut Vec<Option<std::ops::Range<usize>>>,
}

/// Answer `batch` key by key, each prefetched through `backend` a few keys
/// ahead of its `read` (given the key's index and prefetch answer; it
/// appends a value found to `out` and says whether there was one).
fn read_each_ahead<B: KeyedStateBackend + ?Sized>(
    backend: &B,
    batch: ReadBatch<'_, '_>,
    mut read: impl FnMut(usize, Prefetched, &mut Vec<u8>) -> Result<bool, StateError>,
) -> Result<(), StateError> {
    let ReadBatch { key, count, prefetched, out, found } = batch;
    visit_ahead(
        &mut (),
        0..count,
        |(), &index| backend.prefetch(key(index)),
        |(), index, answer| {
            prefetched.push(answer);
            let start = out.len();
            let present = read(index, answer, out)?;
            found.push(present.then_some(start..out.len()));
            Ok(())
        },
    )
}

/// What [`KeyedStateBackend::prefetch`] learnt about a key, for the read
/// of the same key that follows: the state cache's hash of it (nothing for
/// other backends).
#[derive(Debug, Clone, Copy, Default)]
pub struct Prefetched(pub(crate) u64);

/// Storage for keyed state: an ordered byte map.
///
/// Keys are built with [`StateKey`] so that every entry of one state of one
/// key shares a prefix; `scan` and `delete_prefix` work on those prefixes.
pub trait KeyedStateBackend: Send {
    /// The value stored under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    /// Append the value stored under `key` to `out`; whether there is one.
    /// (Backends that can avoid a copy override it.)
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StateError> {
        match self.get(key)? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// Ask memory now for what a read or write of `key` soon will touch
    /// (a cache's slot), so the lookups of a batch's keys overlap their
    /// waits. A hint: it changes nothing. What it learnt about `key` (a
    /// cache's hash of it) is for [`Self::get_prefetched_into`] of the same
    /// key. Default: nothing to ask.
    fn prefetch(&self, key: &[u8]) -> Prefetched {
        let _ = key;
        Prefetched::default()
    }
    /// [`Self::get_into`] of a key [`Self::prefetch`] of this backend
    /// answered `prefetched` for (a cache then does not hash it again).
    /// Default: [`Self::get_into`].
    fn get_prefetched_into(
        &self,
        key: &[u8],
        prefetched: Prefetched,
        out: &mut Vec<u8>,
    ) -> Result<bool, StateError> {
        let _ = prefetched;
        self.get_into(key, out)
    }
    /// Read the values under `batch`'s keys, each as [`Self::get_into`],
    /// answering as [`ReadBatch`] says. Backends that can read a batch
    /// faster than key by key override it (RocksDB's batched reads, a
    /// cache's reads of the keys it lacks). Default: each key prefetched
    /// ahead of its read.
    fn get_many_into(&self, batch: ReadBatch<'_, '_>) -> Result<(), StateError> {
        let key = batch.key;
        read_each_ahead(self, batch, |index, answer, out| {
            self.get_prefetched_into(key(index), answer, out)
        })
    }
    /// Store `value` under `key`.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError>;
    /// Store `value` under `key`, which the caller knows holds nothing (a
    /// new timer, a new window's accumulator): a cache can then forget a
    /// value deleted before it reached the backend instead of writing a
    /// tombstone. Default: [`Self::put`].
    fn insert_new(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.put(key, value)
    }
    /// Remove `key`.
    fn delete(&mut self, key: &[u8]) -> Result<(), StateError>;
    /// Up to `limit` entries whose key starts with `prefix`, in key order,
    /// beginning after `prefix ++ start_after` when given. Returned keys
    /// have `prefix` removed.
    fn scan(
        &mut self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, StateError>;
    /// Remove every entry whose key starts with `prefix`.
    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StateError>;
    /// Apply `writes` in order, as one atomic batch where the backend can.
    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError>;
    /// [`Self::write_batch`] of writes each with what [`Self::prefetch`]
    /// of this backend answered for its key, where it was asked (a cache
    /// then does not hash that key again). Default: [`Self::write_batch`].
    fn write_batch_prefetched(
        &mut self,
        writes: &mut dyn Iterator<Item = (Write<'_>, Option<Prefetched>)>,
    ) -> Result<(), StateError> {
        self.write_batch(&mut writes.map(|(write, _)| write))
    }
    /// Apply `writes`, whose keys are distinct and in ascending byte order
    /// (a cache's write-back), as [`Self::write_batch`] does: a backend may
    /// store a long sorted run faster than a batch (RocksDB: as a table
    /// file of its own). Default: [`Self::write_batch`].
    fn write_sorted(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        self.write_batch(writes)
    }
    /// Make everything written so far durable.
    fn flush(&mut self) -> Result<(), StateError>;
    /// Write a consistent snapshot of everything written so far into the
    /// new directory `dir`, in `form` (a RocksDB checkpoint: immutable
    /// files are hard links; with a changelog, [`SnapshotForm::Chained`]
    /// may write only what changed). Backends that cannot say so.
    fn checkpoint(&mut self, dir: &std::path::Path, form: SnapshotForm) -> Result<(), StateError> {
        let _ = form;
        Err(StateError::Unsupported(format!(
            "this state backend cannot write a checkpoint to {}",
            dir.display()
        )))
    }
    /// Do work kept off the hot path (a cache over its budget writes back
    /// and forgets entries). Called between calls into functions.
    fn relieve(&mut self) -> Result<(), StateError> {
        Ok(())
    }
    /// Start remembering what writes replace, for [`Self::roll_back`]
    /// (forgetting what was remembered before). Only a journaling backend
    /// ([`JournaledBackend`]) does anything.
    fn mark(&mut self) {}
    /// Stop remembering (and forget what was remembered).
    fn unmark(&mut self) {}
    /// Undo every write since the last [`Self::mark`]. Backends that keep
    /// no journal cannot.
    fn roll_back(&mut self) -> Result<(), StateError> {
        Err(StateError::Unsupported("this state backend keeps no journal to roll back".into()))
    }
    /// Its size and cache counters so far (a wrapper adds its own to what
    /// the backend it wraps says). Cheap enough to ask once a second.
    fn stats(&self) -> StateStats {
        StateStats::default()
    }
}

/// The smallest key strictly greater than every key starting with `prefix`,
/// or `None` when no such key exists (the prefix is all `0xff`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    //! Behaviour every backend must have, run against each of them.
    use super::*;

    #[test]
    fn visit_ahead_announces_every_item_once_before_its_visit() {
        for len in [0, 1, 5, PREFETCH_DISTANCE, PREFETCH_DISTANCE + 1, 100] {
            let (mut announced, mut visited) = (Vec::new(), Vec::new());
            let walked = visit_ahead(
                &mut announced,
                0..len,
                |announced, &item| announced.push(item),
                |announced, item, ()| {
                    assert!(announced.contains(&item), "item {item} of {len} announced before");
                    visited.push(item);
                    Ok::<_, ()>(())
                },
            );
            assert_eq!(walked, Ok(()));
            assert_eq!(announced, (0..len).collect::<Vec<_>>(), "{len} items announced");
            assert_eq!(visited, (0..len).collect::<Vec<_>>(), "{len} items visited in order");
        }
        let mut visited = Vec::new();
        let walked = visit_ahead(
            &mut (),
            0..100,
            |_, _| (),
            |_, item, ()| {
                visited.push(item);
                if item == 20 {
                    Err(item)
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!((walked, visited.len()), (Err(20), 21), "the first error ends the walk");
    }

    pub(crate) fn exercise(backend: &mut dyn KeyedStateBackend) {
        let a = StateKey::new(3, "total", StateKind::Value, b"c1", b"").encode();
        let b = StateKey::new(3, "total", StateKind::Value, b"c2", b"").encode();
        assert_eq!(backend.get(&a).unwrap(), None);
        backend.put(&a, b"1").unwrap();
        backend.put(&b, b"2").unwrap();
        assert_eq!(backend.get(&a).unwrap().as_deref(), Some(&b"1"[..]));
        backend.delete(&a).unwrap();
        assert_eq!(backend.get(&a).unwrap(), None);
        assert_eq!(backend.get(&b).unwrap().as_deref(), Some(&b"2"[..]));
        let mut out = b"x".to_vec();
        assert!(backend.get_into(&b, &mut out).unwrap() && out == b"x2", "get_into appends");
        assert!(!backend.get_into(&a, &mut out).unwrap() && out == b"x2");
        let (mut prefetched, mut found) = (Vec::new(), Vec::new());
        let keys = [&b[..], &a[..], &b[..]];
        let batch = ReadBatch {
            key: &|i| keys[i],
            count: 3,
            prefetched: &mut prefetched,
            out: &mut out,
            found: &mut found,
        };
        backend.get_many_into(batch).unwrap();
        assert_eq!(
            (prefetched.len(), &out[..], found),
            (3, &b"x222"[..], vec![Some(2..3), None, Some(3..4)]),
            "get_many_into appends each value found, in order"
        );
        backend.put(&b, b"22").unwrap();
        backend.put(&b, b"3").unwrap();
        assert_eq!(
            backend.get(&b).unwrap().as_deref(),
            Some(&b"3"[..]),
            "an overwrite in place replaces the whole value"
        );
        backend.put(&b, b"2").unwrap();

        let map = StateKey::new(3, "seen", StateKind::Map, b"c1", b"").encode();
        let other = StateKey::new(3, "seen", StateKind::Map, b"c10", b"").encode();
        for k in [b"x", b"a", b"m"] {
            backend.put(&[map.as_slice(), k].concat(), k).unwrap();
        }
        backend.put(&[other.as_slice(), b"z"].concat(), b"z").unwrap();
        let all = backend.scan(&map, None, 10).unwrap();
        let keys: Vec<_> = all.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            vec![b"a".to_vec(), b"m".to_vec(), b"x".to_vec()],
            "scan is ordered and stays inside the prefix"
        );
        let page = backend.scan(&map, Some(b"a"), 1).unwrap();
        assert_eq!(page, vec![(b"m".to_vec(), b"m".to_vec())]);
        backend.delete_prefix(&map).unwrap();
        assert!(backend.scan(&map, None, 10).unwrap().is_empty());
        assert_eq!(
            backend.scan(&other, None, 10).unwrap().len(),
            1,
            "delete_prefix leaves other keys alone"
        );
        let writes: [Write; 3] = [(b"w1", Some(b"1")), (b"w2", Some(b"2")), (b"w1", None)];
        backend.write_batch(&mut writes.into_iter()).unwrap();
        assert_eq!(backend.get(b"w1").unwrap(), None, "later writes of a batch win");
        assert_eq!(backend.get(b"w2").unwrap().as_deref(), Some(&b"2"[..]));
        backend.flush().unwrap();
    }

    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }
}
