//! Changelog checkpoints: most checkpoints store only what changed.
//!
//! A full checkpoint (a RocksDB checkpoint: the cache written back, the
//! memtable flushed to an SST) costs in proportion to the keys changed —
//! sorted, inserted into the memtable, flushed, compacted and uploaded
//! again. Between full checkpoints (*materializations*, as Flink's
//! changelog state backend calls them) a checkpoint is instead the last
//! full one (its files, hard-linked) plus one *changelog* file per later
//! checkpoint: each changed entry's latest value, appended as it is found
//! in the cache. Changelog files never change once written, so each is
//! uploaded once, like an SST.
//!
//! A restore replays a checkpoint's changelogs, oldest first, into its
//! database ([`replay`]) before anything opens it; what a checkpoint
//! directory holds is then a plain RocksDB database again.
//!
//! File format: `WEIRCL01`, then records — `0` put (`u32` key length, key,
//! `u32` value length, value), `1` delete (key), `2` delete every key with
//! a prefix (prefix) — then the record count (`u64`) and an XXH3-64 of
//! everything before it (`u64`), little-endian.

use std::path::{Path, PathBuf};

use super::{KeyedStateBackend, RocksDbBackend, StateError};

const MAGIC: &[u8; 8] = b"WEIRCL01";
const PUT: u8 = 0;
const DELETE: u8 = 1;
const DELETE_PREFIX: u8 = 2;
const EXTENSION: &str = ".wcl";

/// Whether `name` is a changelog file's (immutable, uploaded once).
pub fn is_changelog(name: &str) -> bool {
    name.starts_with("changelog-") && name.ends_with(EXTENSION)
}

/// Changes of state in the order they were made, encoded as a changelog.
#[derive(Default)]
pub struct ChangeRecords {
    bytes: Vec<u8>,
    count: u64,
}

impl ChangeRecords {
    /// `key` now holds `value` (`None`: nothing).
    pub fn write(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.start_record(if value.is_some() { PUT } else { DELETE }, key);
        if let Some(value) = value {
            self.push_bytes(value);
        }
    }

    /// Every key starting with `prefix` was removed.
    pub fn delete_prefix(&mut self, prefix: &[u8]) {
        self.start_record(DELETE_PREFIX, prefix);
    }

    /// Append a record's type and key (after the magic, for the first).
    fn start_record(&mut self, tag: u8, key: &[u8]) {
        if self.bytes.is_empty() {
            self.bytes.extend_from_slice(MAGIC);
        }
        self.bytes.push(tag);
        self.push_bytes(key);
        self.count += 1;
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        // State keys and values are far below 4 GiB (the cache and the
        // Wasm boundary limit them).
        self.bytes.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(bytes);
    }

    /// Bytes recorded so far.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The records as a changelog file's contents, sealed with their
    /// count and checksum; [`Self::empty`] them after.
    fn seal(&mut self) -> &[u8] {
        if self.bytes.is_empty() {
            self.bytes.extend_from_slice(MAGIC);
        }
        self.bytes.extend_from_slice(&std::mem::take(&mut self.count).to_le_bytes());
        let checksum = xxhash_rust::xxh3::xxh3_64(&self.bytes);
        self.bytes.extend_from_slice(&checksum.to_le_bytes());
        &self.bytes
    }

    /// Forget every record, keeping the buffer (the next checkpoint's
    /// records then fill memory already in place).
    fn empty(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }

    /// Forget every record and free the buffer.
    pub fn clear(&mut self) {
        self.bytes = Vec::new();
        self.count = 0;
    }
}

/// One record of a changelog.
#[derive(Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// Store the value under the key; `None` removes the key.
    Write(&'a [u8], Option<&'a [u8]>),
    /// Remove every key with this prefix.
    DeletePrefix(&'a [u8]),
}

/// Check a changelog file's checksum and call `apply` with each record in
/// order; returns how many there were.
pub fn decode(bytes: &[u8], mut apply: impl FnMut(Change<'_>) -> Result<(), StateError>) -> Result<u64, StateError> {
    let corrupt = |what: &str| StateError::Corrupt(format!("changelog: {what}"));
    if bytes.len() < MAGIC.len() + 16 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt("not a changelog file"));
    }
    let (body, checksum) = bytes.split_at(bytes.len() - 8);
    if xxhash_rust::xxh3::xxh3_64(body).to_le_bytes() != checksum {
        return Err(corrupt("checksum mismatch (the file is damaged)"));
    }
    let (mut rest, count) = body[MAGIC.len()..].split_at(body.len() - MAGIC.len() - 8);
    let expected = u64::from_le_bytes(count.try_into().expect("8 bytes"));
    let mut seen = 0;
    while let Some((&tag, tail)) = rest.split_first() {
        rest = tail;
        let key = take_field(&mut rest)?;
        let change = match tag {
            PUT => Change::Write(key, Some(take_field(&mut rest)?)),
            DELETE => Change::Write(key, None),
            DELETE_PREFIX => Change::DeletePrefix(key),
            _ => return Err(corrupt(&format!("unknown record type {tag}"))),
        };
        apply(change)?;
        seen += 1;
    }
    if seen != expected {
        return Err(corrupt(&format!("{seen} records where {expected} were written")));
    }
    Ok(seen)
}

/// The length-prefixed field at the start of `rest`, which moves past it.
fn take_field<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], StateError> {
    let truncated = || StateError::Corrupt("changelog: truncated record".into());
    let (len, tail) = rest.split_at_checked(4).ok_or_else(truncated)?;
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    let (field, tail) = tail.split_at_checked(len).ok_or_else(truncated)?;
    *rest = tail;
    Ok(field)
}

/// The changelog files in `dir`, oldest first.
fn changelogs_in(dir: &Path) -> Result<Vec<PathBuf>, StateError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(is_changelog) {
            found.push(entry.path());
        }
    }
    // Names carry a zero-padded sequence number: name order is age order.
    found.sort();
    Ok(found)
}

/// Apply the changelogs of the checkpoint in `dir` (a restored copy) to
/// its database, oldest first, and remove them: `dir` is then a plain
/// RocksDB database holding the checkpoint's state. Returns the records
/// applied.
pub fn replay(dir: &Path) -> Result<u64, StateError> {
    let files = changelogs_in(dir)?;
    if files.is_empty() {
        return Ok(0);
    }
    // Out of the database's directory before RocksDB opens it.
    let aside = dir.with_extension("changelogs");
    if aside.exists() {
        std::fs::remove_dir_all(&aside)?;
    }
    std::fs::create_dir_all(&aside)?;
    let mut moved = Vec::new();
    for file in files {
        let target = aside.join(file.file_name().expect("a file"));
        std::fs::rename(&file, &target)?;
        moved.push(target);
    }
    let mut db = RocksDbBackend::open(dir)?;
    let mut applied = 0;
    for file in &moved {
        let bytes = std::fs::read(file)?;
        applied += decode(&bytes, |change| match change {
            Change::Write(key, Some(value)) => db.put(key, value),
            Change::Write(key, None) => db.delete(key),
            Change::DeletePrefix(prefix) => db.delete_prefix(prefix),
        })
        .map_err(|e| match e {
            StateError::Corrupt(what) => StateError::Corrupt(format!("{}: {what}", file.display())),
            other => other,
        })?;
    }
    db.flush()?;
    drop(db);
    std::fs::remove_dir_all(&aside)?;
    Ok(applied)
}

/// Hard-link every file of directory `from` into directory `to` (copy
/// where links are impossible).
fn link_files(from: &Path, to: &Path) -> Result<(), StateError> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let (source, target) = (entry.path(), to.join(entry.file_name()));
            std::fs::hard_link(&source, &target).or_else(|_| std::fs::copy(&source, &target).map(drop))?;
        }
    }
    Ok(())
}

/// A subtask's checkpoint chain since its last full checkpoint: that
/// checkpoint's files and the changelogs written since, kept (as hard
/// links) in a directory of its own, so that each new checkpoint can link
/// them all whatever became of the earlier checkpoints' directories.
pub struct Changelog {
    dir: PathBuf,
    /// Changes not in the chain yet (entries that left the cache, prefix
    /// deletes), oldest first.
    pending: ChangeRecords,
    /// Whether the chain holds a full checkpoint to build on.
    has_base: bool,
    /// Changelogs in the chain.
    changelogs: usize,
    /// Changelogs after which the next checkpoint is full.
    materialize_every: usize,
    /// Pending bytes beyond which recording stops and the next checkpoint
    /// is full instead (memory stays bounded however much leaves the cache).
    pending_limit: usize,
    /// Pending went over its limit: the records are incomplete.
    overflowed: bool,
    /// The next changelog's number: starts at the creation time in
    /// microseconds, so names never repeat, even across runs.
    next_number: u64,
}

impl Changelog {
    /// A new, empty chain in directory `dir` (whatever was there is
    /// removed): the first checkpoint will be full. After it, one in
    /// `materialize_every` is full; between, changelogs, unless more than
    /// `pending_limit` bytes of changes pile up between two checkpoints.
    pub fn create(dir: PathBuf, materialize_every: usize, pending_limit: usize) -> Result<Self, StateError> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let next_number = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
        Ok(Self { dir, pending: ChangeRecords::default(), has_base: false, changelogs: 0, materialize_every: materialize_every.max(1), pending_limit, overflowed: false, next_number })
    }

    /// Record that `key` now holds `value` (for a change about to leave
    /// the cache before the next checkpoint).
    pub fn record(&mut self, key: &[u8], value: Option<&[u8]>) {
        if !self.overflowed {
            self.pending.write(key, value);
            self.check_limit();
        }
    }

    /// Record that every key starting with `prefix` was removed.
    pub fn record_delete_prefix(&mut self, prefix: &[u8]) {
        if !self.overflowed {
            self.pending.delete_prefix(prefix);
            self.check_limit();
        }
    }

    fn check_limit(&mut self) {
        if self.pending.size() > self.pending_limit {
            self.overflowed = true;
            self.pending.clear();
        }
    }

    /// Whether the next checkpoint must be a full one.
    pub fn full_checkpoint_due(&self) -> bool {
        !self.has_base || self.overflowed || self.changelogs + 1 >= self.materialize_every
    }

    /// A full checkpoint was written to `checkpoint`: it becomes the base
    /// of the chain, and everything recorded so far is in it.
    pub fn rebase(&mut self, checkpoint: &Path) -> Result<(), StateError> {
        std::fs::remove_dir_all(&self.dir)?;
        std::fs::create_dir_all(&self.dir)?;
        link_files(checkpoint, &self.dir)?;
        self.pending.clear();
        (self.has_base, self.changelogs, self.overflowed) = (true, 0, false);
        Ok(())
    }

    /// Write a checkpoint into the new directory `checkpoint`: the chain
    /// plus a changelog of what was recorded since the last checkpoint and
    /// then `latest` (the changed entries still cached, written by the
    /// caller into the records it is given).
    pub fn checkpoint(&mut self, checkpoint: &Path, latest: impl FnOnce(&mut ChangeRecords)) -> Result<(), StateError> {
        debug_assert!(self.has_base && !self.overflowed, "a changelog needs a base and complete records");
        latest(&mut self.pending);
        let name = format!("changelog-{:020}{EXTENSION}", self.next_number);
        let written = std::fs::write(self.dir.join(&name), self.pending.seal());
        self.pending.empty();
        if written.is_err() {
            // The records are gone: only a full checkpoint is complete now.
            self.overflowed = true;
        }
        written?;
        self.next_number += 1;
        self.changelogs += 1;
        std::fs::create_dir_all(checkpoint)?;
        link_files(&self.dir, checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_detected() {
        let mut records = ChangeRecords::default();
        records.write(b"k1", Some(b"v1"));
        records.delete_prefix(b"p");
        records.write(b"k2", None);
        records.write(b"", Some(b""));
        let bytes = records.seal().to_vec();
        let mut seen = Vec::new();
        assert_eq!(decode(&bytes, |c| {
            seen.push(format!("{c:?}"));
            Ok(())
        }).unwrap(), 4);
        assert_eq!(seen.len(), 4);
        assert!(seen[1].contains("DeletePrefix"));
        for at in [0, 9, bytes.len() - 12, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(decode(&damaged, |_| Ok(())).is_err(), "flipped byte {at}");
        }
        assert!(decode(&bytes[..bytes.len() - 3], |_| Ok(())).is_err(), "truncated");
        assert_eq!(decode(ChangeRecords::default().seal(), |_| Ok(())).unwrap(), 0, "an empty changelog");
    }

    #[test]
    fn a_chain_restores_to_the_latest_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("db")).unwrap();
        let mut chain = Changelog::create(dir.path().join("chain"), 10, 1 << 20).unwrap();
        assert!(chain.full_checkpoint_due(), "no base yet");
        db.put(b"a/1", b"old").unwrap();
        db.put(b"a/2", b"gone with the prefix").unwrap();
        db.put(b"b", b"deleted").unwrap();
        db.checkpoint(&dir.path().join("chk-1"), super::super::SnapshotForm::Database).unwrap();
        chain.rebase(&dir.path().join("chk-1")).unwrap();
        assert!(!chain.full_checkpoint_due());
        chain.record_delete_prefix(b"a/");
        chain.checkpoint(&dir.path().join("chk-2"), |latest| {
            latest.write(b"a/1", Some(b"new"));
            latest.write(b"b", None);
        })
        .unwrap();
        chain.checkpoint(&dir.path().join("chk-3"), |latest| latest.write(b"c", Some(b"3"))).unwrap();
        // chk-1 goes away (as the coordinator removes older local copies).
        std::fs::remove_dir_all(dir.path().join("chk-1")).unwrap();
        assert_eq!(replay(&dir.path().join("chk-3")).unwrap(), 4);
        let restored = RocksDbBackend::open(&dir.path().join("chk-3")).unwrap();
        let mut all = Vec::new();
        restored.for_each(|k, v| {
            all.push((k.to_vec(), v.to_vec()));
            Ok(())
        }).unwrap();
        assert_eq!(all, vec![(b"a/1".to_vec(), b"new".to_vec()), (b"c".to_vec(), b"3".to_vec())]);
        assert!(changelogs_in(&dir.path().join("chk-3")).unwrap().is_empty(), "replayed changelogs are removed");
        assert_eq!(changelogs_in(&dir.path().join("chk-2")).unwrap().len(), 1, "each checkpoint holds the chain so far");
    }

    #[test]
    fn full_checkpoints_come_every_so_often_and_on_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base");
        std::fs::create_dir_all(&base).unwrap();
        let mut chain = Changelog::create(dir.path().join("chain"), 3, 64).unwrap();
        chain.rebase(&base).unwrap();
        chain.checkpoint(&dir.path().join("c1"), |_| {}).unwrap();
        assert!(!chain.full_checkpoint_due());
        chain.checkpoint(&dir.path().join("c2"), |_| {}).unwrap();
        assert!(chain.full_checkpoint_due(), "every third checkpoint is full");
        chain.rebase(&base).unwrap();
        chain.record(b"key", Some(&[0; 100]));
        assert!(chain.full_checkpoint_due(), "more pending than the limit");
    }
}
