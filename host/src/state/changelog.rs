//! Changelog checkpoints: most checkpoints store only what changed.
//!
//! A RocksDB checkpoint of state the cache wrote back costs in proportion
//! to the keys changed — sorted, inserted into the memtable, flushed,
//! compacted and uploaded again. So a checkpoint is instead the last full
//! one (its files, hard-linked) plus one *changelog* file per later
//! checkpoint: each changed entry's latest value, appended as it is found
//! in the cache. A full checkpoint (a *materialization*, as Flink's
//! changelog state backend calls it) starts a new chain from RocksDB's
//! checkpoint as it is, without writing the cache back, plus one
//! changelog of every entry RocksDB has not seen ([`Changelog::materialize`]).
//! Changelog files never change once written, so each is uploaded once,
//! like an SST.
//!
//! A restore replays a checkpoint's changelogs, oldest first, into its
//! database ([`replay`]) before anything opens it; what a checkpoint
//! directory holds is then a plain RocksDB database again.
//!
//! Most entries change again before the next checkpoint (a running sum
//! per key), so a chain names each key it logs once: the first changelog
//! that logs a key with a value gives it the chain's next number, and
//! later changelogs write the number instead of the key (a few bytes
//! instead of a whole state key: the file, its copy and its upload shrink
//! by about four when every key changes every second).
//!
//! File format: `WEIRCL02`, then records — `0` put (key, value), `1`
//! delete (key), `2` delete every key with a prefix (prefix), `3` put
//! naming the key (key, value: the key gets the chain's next number, from
//! 1, counted over the chain's changelogs oldest first), `4` put by number
//! (number, value), `5` delete by number (number) — then the record count
//! (`u64`) and an XXH3-64 of everything before it (`u64`), little-endian.
//! Fields are a LEB128 length then the bytes; numbers are LEB128.
//! `WEIRCL01` files (records `0`–`2`, `u32` lengths) still replay.

use std::path::{Path, PathBuf};

use super::{KeyedStateBackend, RocksDbBackend, StateError};

const MAGIC: &[u8; 8] = b"WEIRCL02";
/// The first format: `u32` lengths, no numbered keys.
const MAGIC_V1: &[u8; 8] = b"WEIRCL01";
const PUT: u8 = 0;
const DELETE: u8 = 1;
const DELETE_PREFIX: u8 = 2;
const PUT_NAMING: u8 = 3;
const PUT_NUMBERED: u8 = 4;
const DELETE_NUMBERED: u8 = 5;
const EXTENSION: &str = ".wcl";
/// Records a restore applies to the database at once.
const REPLAY_BATCH: usize = 4096;

/// Whether `name` is a changelog file's (immutable, uploaded once).
pub fn is_changelog(name: &str) -> bool {
    name.starts_with("changelog-") && name.ends_with(EXTENSION)
}

/// Changes of state in the order they were made, encoded as a changelog.
#[derive(Default)]
pub struct ChangeRecords {
    bytes: Vec<u8>,
    count: u64,
    /// Keys numbered so far in the chain (the last number given).
    named: u32,
}

impl ChangeRecords {
    /// `key` now holds `value` (`None`: nothing).
    pub fn write(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.start_record(if value.is_some() { PUT } else { DELETE }, key);
        if let Some(value) = value {
            self.push_bytes(value);
        }
    }

    /// `key`, which has number `number` in the chain (0: none yet), now
    /// holds `value` (`None`: nothing); returns the key's number after
    /// (a key logged with a value for the first time gets the next one).
    pub fn write_numbered(&mut self, number: u32, key: &[u8], value: Option<&[u8]>) -> u32 {
        match (number, value, self.named.checked_add(1)) {
            (0, Some(value), Some(next)) => {
                self.start_record(PUT_NAMING, key);
                self.push_bytes(value);
                self.named = next;
                next
            }
            _ => {
                self.write_known(number, key, value);
                number
            }
        }
    }

    /// `key`, which has number `number` in the chain (0: none), now holds
    /// `value` (`None`: nothing): written by its number when it has one,
    /// else by the key, which is not given a number (a key leaving the
    /// cache, or every number taken).
    fn write_known(&mut self, number: u32, key: &[u8], value: Option<&[u8]>) {
        if number == 0 {
            self.write(key, value);
        } else {
            self.start_tag(if value.is_some() { PUT_NUMBERED } else { DELETE_NUMBERED });
            push_varint(&mut self.bytes, u64::from(number));
            if let Some(value) = value {
                self.push_bytes(value);
            }
        }
    }

    /// Every key starting with `prefix` was removed.
    pub fn delete_prefix(&mut self, prefix: &[u8]) {
        self.start_record(DELETE_PREFIX, prefix);
    }

    /// Append a record's type and key.
    fn start_record(&mut self, tag: u8, key: &[u8]) {
        self.start_tag(tag);
        self.push_bytes(key);
    }

    /// Append a record's type (after the magic, for the first).
    fn start_tag(&mut self, tag: u8) {
        if self.bytes.is_empty() {
            self.bytes.extend_from_slice(MAGIC);
        }
        self.bytes.push(tag);
        self.count += 1;
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        push_varint(&mut self.bytes, bytes.len() as u64);
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

    /// Forget every record and every key's number (a new chain), and
    /// free the buffer.
    pub fn clear(&mut self) {
        self.bytes = Vec::new();
        self.count = 0;
        self.named = 0;
    }
}

/// Append `value` as LEB128 (7 bits a byte, low first).
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The LEB128 number at the start of `rest`, which moves past it.
fn take_varint(rest: &mut &[u8]) -> Result<u64, StateError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, tail) = rest.split_first().ok_or_else(truncated)?;
        *rest = tail;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(StateError::Corrupt("changelog: a number longer than 64 bits".into()))
}

fn truncated() -> StateError {
    StateError::Corrupt("changelog: truncated record".into())
}

/// The keys a chain has numbered, in number order (number 1 first): what
/// a replay of the chain's changelogs, oldest first, carries from one to
/// the next.
#[derive(Default)]
pub struct NamedKeys {
    keys: Vec<Vec<u8>>,
}

impl NamedKeys {
    fn get(&self, number: u64) -> Result<&[u8], StateError> {
        let index = usize::try_from(number).ok().and_then(|n| n.checked_sub(1));
        index.and_then(|i| self.keys.get(i)).map(Vec::as_slice).ok_or_else(|| StateError::Corrupt(format!("changelog: key number {number} was never named (a changelog of the chain is missing)")))
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
/// order, and the key's number in the chain when the record names or uses
/// one; returns how many records there were. `named` holds the keys the
/// chain's earlier changelogs numbered, and gets the ones this file numbers.
pub fn decode(
    bytes: &[u8],
    named: &mut NamedKeys,
    mut apply: impl FnMut(Change<'_>, Option<u64>) -> Result<(), StateError>,
) -> Result<u64, StateError> {
    let corrupt = |what: &str| StateError::Corrupt(format!("changelog: {what}"));
    let version1 = bytes.get(..MAGIC.len()) == Some(MAGIC_V1);
    if bytes.len() < MAGIC.len() + 16 || (&bytes[..MAGIC.len()] != MAGIC && !version1) {
        return Err(corrupt("not a changelog file"));
    }
    let (body, checksum) = bytes.split_at(bytes.len() - 8);
    if xxhash_rust::xxh3::xxh3_64(body).to_le_bytes() != checksum {
        return Err(corrupt("checksum mismatch (the file is damaged)"));
    }
    let (mut rest, count) = body[MAGIC.len()..].split_at(body.len() - MAGIC.len() - 8);
    let expected = u64::from_le_bytes(count.try_into().expect("8 bytes"));
    let take_field = if version1 { take_u32_field } else { take_varint_field };
    let mut seen = 0;
    while let Some((&tag, tail)) = rest.split_first() {
        rest = tail;
        match tag {
            PUT => {
                let key = take_field(&mut rest)?;
                apply(Change::Write(key, Some(take_field(&mut rest)?)), None)?;
            }
            DELETE => apply(Change::Write(take_field(&mut rest)?, None), None)?,
            DELETE_PREFIX => apply(Change::DeletePrefix(take_field(&mut rest)?), None)?,
            PUT_NAMING if !version1 => {
                let key = take_field(&mut rest)?;
                named.keys.push(key.to_vec());
                apply(
                    Change::Write(key, Some(take_field(&mut rest)?)),
                    Some(named.keys.len() as u64),
                )?;
            }
            PUT_NUMBERED | DELETE_NUMBERED if !version1 => {
                let number = take_varint(&mut rest)?;
                let key = named.get(number)?;
                apply(
                    Change::Write(
                        key,
                        if tag == PUT_NUMBERED { Some(take_field(&mut rest)?) } else { None },
                    ),
                    Some(number),
                )?;
            }
            _ => return Err(corrupt(&format!("unknown record type {tag}"))),
        }
        seen += 1;
    }
    if seen != expected {
        return Err(corrupt(&format!("{seen} records where {expected} were written")));
    }
    Ok(seen)
}

/// The length-prefixed field (LEB128 length) at the start of `rest`,
/// which moves past it.
fn take_varint_field<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], StateError> {
    let len = usize::try_from(take_varint(rest)?).map_err(|_| truncated())?;
    take_bytes(rest, len)
}

/// The field with a `u32` length at the start of `rest` (a `WEIRCL01`
/// file), which moves past it.
fn take_u32_field<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], StateError> {
    let (len, tail) = rest.split_at_checked(4).ok_or_else(truncated)?;
    *rest = tail;
    take_bytes(rest, u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize)
}

fn take_bytes<'a>(rest: &mut &'a [u8], len: usize) -> Result<&'a [u8], StateError> {
    let (field, tail) = rest.split_at_checked(len).ok_or_else(truncated)?;
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
/// RocksDB database holding the checkpoint's state. A numbered key's
/// write that a later record of the chain overwrites is skipped (the last
/// write decides a key's value, whatever came between), so a restore
/// writes each key about once however long the chain. Returns the records
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
    // First pass: where in the chain each numbered key is written last.
    let mut last_write: Vec<u64> = Vec::new();
    let mut position = 0u64;
    decode_chain(&moved, |_, number| {
        if let Some(number) = number {
            let index = number as usize - 1;
            if last_write.len() <= index {
                last_write.resize(index + 1, 0);
            }
            last_write[index] = position;
        }
        position += 1;
        Ok(())
    })?;
    let mut db = RocksDbBackend::open(dir)?;
    let (mut applied, mut position) = (0, 0u64);
    // Writes go to the database in batches (one call per record costs
    // several times more), in order: a prefix delete first applies the
    // batch before it.
    let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::with_capacity(REPLAY_BATCH);
    let apply_batch = |db: &mut RocksDbBackend, batch: &mut Vec<(Vec<u8>, Option<Vec<u8>>)>| {
        let result =
            db.write_batch(&mut batch.iter().map(|(key, value)| (&key[..], value.as_deref())));
        batch.clear();
        result
    };
    decode_chain(&moved, |change, number| {
        let superseded = number.is_some_and(|n| last_write[n as usize - 1] != position);
        position += 1;
        if superseded {
            return Ok(());
        }
        applied += 1;
        match change {
            Change::Write(key, value) => {
                batch.push((key.to_vec(), value.map(<[u8]>::to_vec)));
                if batch.len() == REPLAY_BATCH {
                    apply_batch(&mut db, &mut batch)?;
                }
                Ok(())
            }
            Change::DeletePrefix(prefix) => {
                apply_batch(&mut db, &mut batch)?;
                db.delete_prefix(prefix)
            }
        }
    })?;
    apply_batch(&mut db, &mut batch)?;
    db.flush()?;
    drop(db);
    std::fs::remove_dir_all(&aside)?;
    Ok(applied)
}

/// Decode the changelog `files` of one chain, oldest first, into `apply`
/// (as [`decode`] does one file's).
fn decode_chain(
    files: &[PathBuf],
    mut apply: impl FnMut(Change<'_>, Option<u64>) -> Result<(), StateError>,
) -> Result<(), StateError> {
    let mut named = NamedKeys::default();
    for file in files {
        let bytes = std::fs::read(file)?;
        decode(&bytes, &mut named, &mut apply).map_err(|e| match e {
            StateError::Corrupt(what) => StateError::Corrupt(format!("{}: {what}", file.display())),
            other => other,
        })?;
    }
    Ok(())
}

/// Hard-link every file of directory `from` into directory `to` (copy
/// where links are impossible).
fn link_files(from: &Path, to: &Path) -> Result<(), StateError> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let (source, target) = (entry.path(), to.join(entry.file_name()));
            std::fs::hard_link(&source, &target)
                .or_else(|_| std::fs::copy(&source, &target).map(drop))?;
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
    /// is full instead: memory stays bounded however much leaves the
    /// cache, and what left it through the backend is not logged again.
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
    pub fn create(
        dir: PathBuf,
        materialize_every: usize,
        pending_limit: usize,
    ) -> Result<Self, StateError> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let next_number = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Ok(Self {
            dir,
            pending: ChangeRecords::default(),
            has_base: false,
            changelogs: 0,
            materialize_every: materialize_every.max(1),
            pending_limit,
            overflowed: false,
            next_number,
        })
    }

    /// Record that `key`, numbered `number` in the chain (0: not yet),
    /// now holds `value`, for a change about to leave the cache before the
    /// next checkpoint (see [`ChangeRecords::write_known`]).
    pub fn record(&mut self, number: u32, key: &[u8], value: Option<&[u8]>) {
        if !self.overflowed {
            self.pending.write_known(number, key, value);
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
        self.pending.clear();
        self.adopt_base(checkpoint)
    }

    /// Write a full checkpoint into `checkpoint`, which holds the backend's
    /// own checkpoint already: `unseen` writes every entry the backend
    /// lacks (numbering keys afresh) into records that become a changelog
    /// beside it, and the whole becomes the base of a new chain. Cheaper
    /// than writing those entries into the backend first: no sort, no
    /// memtable, no flush, no compaction (the restore replays them).
    pub fn materialize(
        &mut self,
        checkpoint: &Path,
        unseen: impl FnOnce(&mut ChangeRecords),
    ) -> Result<(), StateError> {
        // What was recorded left the cache through the backend, which
        // holds it now: a new chain.
        self.pending.clear();
        unseen(&mut self.pending);
        let written = Self::write_records(&mut self.pending, checkpoint, &mut self.next_number);
        if written.is_err() {
            // The caller's keys are numbered in a chain that was not written.
            self.overflowed = true;
        }
        written?;
        self.adopt_base(checkpoint)
    }

    /// The full checkpoint at `checkpoint` becomes the base of the chain
    /// (the chain's directory links its files).
    fn adopt_base(&mut self, checkpoint: &Path) -> Result<(), StateError> {
        std::fs::remove_dir_all(&self.dir)?;
        std::fs::create_dir_all(&self.dir)?;
        link_files(checkpoint, &self.dir)?;
        (self.has_base, self.changelogs, self.overflowed) = (true, 0, false);
        Ok(())
    }

    /// Seal `records` into changelog file `number` in `dir` (then the next
    /// number), and empty them (also when the write fails: they are gone).
    fn write_records(
        records: &mut ChangeRecords,
        dir: &Path,
        number: &mut u64,
    ) -> Result<(), StateError> {
        let name = format!("changelog-{number:020}{EXTENSION}");
        let written = crate::files::write(&dir.join(&name), records.seal());
        records.empty();
        written?;
        *number += 1;
        Ok(())
    }

    /// Write a checkpoint into the new directory `checkpoint`: the chain
    /// plus a changelog of what was recorded since the last checkpoint and
    /// then `latest` (the changed entries still cached, written by the
    /// caller into the records it is given).
    pub fn checkpoint(
        &mut self,
        checkpoint: &Path,
        latest: impl FnOnce(&mut ChangeRecords),
    ) -> Result<(), StateError> {
        debug_assert!(
            self.has_base && !self.overflowed,
            "a changelog needs a base and complete records"
        );
        latest(&mut self.pending);
        let written = Self::write_records(&mut self.pending, &self.dir, &mut self.next_number);
        if written.is_err() {
            // The records are gone: only a full checkpoint is complete now.
            self.overflowed = true;
        }
        written?;
        self.changelogs += 1;
        std::fs::create_dir_all(checkpoint)?;
        link_files(&self.dir, checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `bytes` as text, decoded after the chain's `named` keys.
    fn decoded(bytes: &[u8], named: &mut NamedKeys) -> Result<Vec<String>, StateError> {
        let mut seen = Vec::new();
        let count = decode(bytes, named, |change, _| {
            seen.push(match change {
                Change::Write(key, value) => format!(
                    "{}={}",
                    String::from_utf8_lossy(key),
                    value.map_or("-".into(), |v| String::from_utf8_lossy(v).into_owned())
                ),
                Change::DeletePrefix(prefix) => format!("{}*-", String::from_utf8_lossy(prefix)),
            });
            Ok(())
        })?;
        assert_eq!(count, seen.len() as u64);
        Ok(seen)
    }

    #[test]
    fn records_round_trip_and_damage_is_detected() {
        let mut records = ChangeRecords::default();
        records.write(b"k1", Some(b"v1"));
        records.delete_prefix(b"p");
        records.write(b"k2", None);
        records.write(b"", Some(b""));
        let bytes = records.seal().to_vec();
        assert_eq!(
            decoded(&bytes, &mut NamedKeys::default()).unwrap(),
            ["k1=v1", "p*-", "k2=-", "="]
        );
        for at in [0, 9, bytes.len() - 12, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(
                decode(&damaged, &mut NamedKeys::default(), |_, _| Ok(())).is_err(),
                "flipped byte {at}"
            );
        }
        assert!(
            decode(&bytes[..bytes.len() - 3], &mut NamedKeys::default(), |_, _| Ok(())).is_err(),
            "truncated"
        );
        assert_eq!(
            decode(ChangeRecords::default().seal(), &mut NamedKeys::default(), |_, _| Ok(()))
                .unwrap(),
            0,
            "an empty changelog"
        );
    }

    /// A key is named once per chain and written by number after, in the
    /// same file and in later ones; a key deleted before it was named
    /// stays unnumbered; a number no earlier file named is an error.
    #[test]
    fn keys_are_named_once_and_written_by_number() {
        let mut records = ChangeRecords::default();
        let long_key = vec![b'k'; 300];
        let a = records.write_numbered(0, b"a", Some(b"1"));
        let b = records.write_numbered(0, &long_key, Some(b"2"));
        assert_eq!((a, b), (1, 2));
        assert_eq!(records.write_numbered(0, b"gone", None), 0, "a delete names nothing");
        assert_eq!(records.write_numbered(a, b"a", Some(b"3")), a);
        let first = records.seal().to_vec();
        records.empty();
        assert_eq!(records.write_numbered(b, &long_key, None), b);
        assert_eq!(
            records.write_numbered(0, b"c", Some(b"4")),
            3,
            "numbers go on across a chain's files"
        );
        let second = records.seal().to_vec();
        let mut named = NamedKeys::default();
        let long = String::from_utf8(long_key.clone()).unwrap();
        assert_eq!(
            decoded(&first, &mut named).unwrap(),
            ["a=1".to_string(), format!("{long}=2"), "gone=-".into(), "a=3".into()]
        );
        assert_eq!(decoded(&second, &mut named).unwrap(), [format!("{long}=-"), "c=4".into()]);
        let missing = decoded(&second, &mut NamedKeys::default()).unwrap_err().to_string();
        assert!(missing.contains("never named"), "{missing}");
        records.empty();
        records.clear();
        assert_eq!(records.write_numbered(0, b"a", Some(b"1")), 1, "a new chain numbers from 1");
    }

    /// Files of the first format (`u32` lengths) still replay.
    #[test]
    fn first_format_files_still_decode() {
        let mut bytes = MAGIC_V1.to_vec();
        for (tag, fields) in
            [(PUT, &[&b"k1"[..], b"v1"][..]), (DELETE, &[b"k2"]), (DELETE_PREFIX, &[b"p"])]
        {
            bytes.push(tag);
            for field in fields {
                bytes.extend_from_slice(&(field.len() as u32).to_le_bytes());
                bytes.extend_from_slice(field);
            }
        }
        bytes.extend_from_slice(&3u64.to_le_bytes());
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        assert_eq!(decoded(&bytes, &mut NamedKeys::default()).unwrap(), ["k1=v1", "k2=-", "p*-"]);
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
        chain
            .checkpoint(&dir.path().join("chk-2"), |latest| {
                latest.write(b"a/1", Some(b"new"));
                latest.write(b"b", None);
            })
            .unwrap();
        chain
            .checkpoint(&dir.path().join("chk-3"), |latest| latest.write(b"c", Some(b"3")))
            .unwrap();
        // chk-1 goes away (as the coordinator removes older local copies).
        std::fs::remove_dir_all(dir.path().join("chk-1")).unwrap();
        assert_eq!(replay(&dir.path().join("chk-3")).unwrap(), 4);
        let restored = RocksDbBackend::open(&dir.path().join("chk-3")).unwrap();
        let mut all = Vec::new();
        restored
            .for_each(|k, v| {
                all.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .unwrap();
        assert_eq!(all, vec![(b"a/1".to_vec(), b"new".to_vec()), (b"c".to_vec(), b"3".to_vec())]);
        assert!(
            changelogs_in(&dir.path().join("chk-3")).unwrap().is_empty(),
            "replayed changelogs are removed"
        );
        assert_eq!(
            changelogs_in(&dir.path().join("chk-2")).unwrap().len(),
            1,
            "each checkpoint holds the chain so far"
        );
    }

    /// A restore skips a numbered key's writes that a later record of the
    /// chain overwrites, and the state is the same as applying them all.
    #[test]
    fn a_restore_writes_each_numbered_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("db")).unwrap();
        db.put(b"b0", b"in the base").unwrap();
        db.checkpoint(&dir.path().join("chk-1"), super::super::SnapshotForm::Database).unwrap();
        let mut chain = Changelog::create(dir.path().join("chain"), 10, 1 << 20).unwrap();
        chain.rebase(&dir.path().join("chk-1")).unwrap();
        let (mut a, mut b) = (0, 0);
        chain
            .checkpoint(&dir.path().join("chk-2"), |latest| {
                a = latest.write_numbered(a, b"a", Some(b"1"));
                b = latest.write_numbered(b, b"b1", Some(b"1"));
            })
            .unwrap();
        chain.record_delete_prefix(b"b");
        chain
            .checkpoint(&dir.path().join("chk-3"), |latest| {
                a = latest.write_numbered(a, b"a", Some(b"2"))
            })
            .unwrap();
        chain
            .checkpoint(&dir.path().join("chk-4"), |latest| {
                a = latest.write_numbered(a, b"a", None);
                assert_eq!(latest.write_numbered(0, b"b2", Some(b"3")), 3);
            })
            .unwrap();
        // a=1 and a=2 are overwritten later: 6 records, 4 applied.
        assert_eq!(replay(&dir.path().join("chk-4")).unwrap(), 4);
        assert_eq!(replay(&dir.path().join("chk-3")).unwrap(), 3, "4 records, a=1 skipped");
        for (checkpoint, expected) in [
            ("chk-3", vec![(b"a".to_vec(), b"2".to_vec())]),
            ("chk-4", vec![(b"b2".to_vec(), b"3".to_vec())]),
        ] {
            let mut all = Vec::new();
            RocksDbBackend::open(&dir.path().join(checkpoint))
                .unwrap()
                .for_each(|k, v| {
                    all.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })
                .unwrap();
            assert_eq!(all, expected, "{checkpoint}");
        }
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
        chain.record(0, b"key", Some(&[0; 100]));
        assert!(chain.full_checkpoint_due(), "more pending than the limit");
    }
}
