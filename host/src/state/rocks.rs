//! The production state backend: one RocksDB database per subtask.

use std::path::{Path, PathBuf};

use rocksdb::{
    Direction, IngestExternalFileOptions, IteratorMode, Options, ReadOptions, SstFileWriter,
    WriteOptions, DB,
};

use super::{prefix_end, KeyedStateBackend, ScanEntry, SnapshotForm, StateError, Write};

/// The fewest writes [`KeyedStateBackend::write_sorted`] stores as a table
/// file of their own: below them a file's fixed costs (creating, syncing
/// and registering it, flushing the memtable it overlaps) outweigh what
/// skipping the memtable saves.
const FEWEST_INGESTED_WRITES: usize = 1 << 16;

/// The table file a sorted run is written to before RocksDB takes it
/// (a name RocksDB's own files never have), in the database's directory.
const INGESTED_FILE: &str = "weir-ingest.sst";

/// Keyed state in a RocksDB database on local disk.
pub struct RocksDbBackend {
    db: DB,
    write: WriteOptions,
    /// What the database was opened with (a table file written for it
    /// must be built alike).
    options: Options,
    /// The database's directory.
    path: PathBuf,
}

impl RocksDbBackend {
    /// Open (creating if needed) the database in directory `path`.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_compression_type(rocksdb::DBCompressionType::Lz4);
        options.increase_parallelism(2);
        // Bound memory per subtask: two 16 MiB memtables at most.
        options.set_write_buffer_size(16 << 20);
        options.set_max_write_buffer_number(2);
        // Table files written in pieces, as Weir's own (`crate::files`).
        options.set_writable_file_max_buffer_size(crate::files::WRITE_PIECE_BYTES as u64);
        // Compact once eight files (the cache's write-backs) have come to
        // level 0, not four: each compaction rewrites the whole bottom
        // level, so state many times the cache was rewritten every four
        // write-backs. Reads probe two more filters per key on average.
        // A running sum over 10 M keys: 8 % faster over 10 M events, 3 %
        // over 30 M; over 100 M keys and 20 M events 24 % (−21 % CPU).
        options.set_level_zero_file_num_compaction_trigger(8);
        // Bloom filters in every SST file and over the memtable: most reads
        // that reach RocksDB are of keys it does not hold (a key's first
        // event, a new window's accumulator), and without them each one
        // searches the index of every file (one per checkpoint until
        // compaction) — ≈ 15 % of the CPU of windows over 10⁶ keys.
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_whole_key_filtering(true);
        // 1 KiB blocks, not 4: a read of an evicted key wants one entry of
        // a few dozen bytes, and each read copies its block out of the page
        // cache, checks and decompresses it whole (a running sum over 10 M
        // keys: 11-15 % faster over 10 M events, 10 % over 2 M keys; the
        // indexes held in memory are four times the size, ≈ 30 MB there).
        table.set_block_size(1024);
        // Index blocks with a restart point every 16 keys, not every key:
        // a read's binary search over a file's index takes four fewer
        // steps, each a wait for memory, then walks at most 16 entries that
        // lie together. A running sum over 10 M keys read through memory
        // maps: 5 % faster.
        table.set_index_block_restart_interval(16);
        // No block cache: state larger than the cache is read back at
        // random, one key per block, so a small block cache hardly ever
        // hits, and keeping it (a lookup, an insert, an eviction and a lock
        // per read, ≈ 7 % of the CPU over 10 M keys) costs more than it
        // saves: 6-13 % faster over 10 M keys.
        table.disable_cache();
        options.set_block_based_table_factory(&table);
        // Blocks are read from the kernel's page cache through memory
        // maps of the files, not copied out with `pread`: a system call,
        // a page-cache lookup and a copy per read of an evicted key were
        // 17 % of a running sum's CPU over 10 M keys (12-25 % faster
        // without them). The pages reads touch count in the process's
        // resident set (the page cache holds them either way, and the
        // kernel can drop them as it can any file page).
        options.set_allow_mmap_reads(true);
        options.set_memtable_whole_key_filtering(true);
        options.set_memtable_prefix_bloom_ratio(0.1);
        options.set_compaction_filter("weir-ttl", |_level, _key, value| {
            if super::ttl::is_expired(value, crate::clock::now_millis()) {
                rocksdb::CompactionDecision::Remove
            } else {
                rocksdb::CompactionDecision::Keep
            }
        });
        // Named, so that `get_many_into` has a handle on it.
        let db = DB::open_cf_descriptors(&options, path, [default_column(&options)])?;
        let mut write = WriteOptions::default();
        write.set_sync(false);
        Ok(Self { db, write, options, path: path.to_path_buf() })
    }
}

impl KeyedStateBackend for RocksDbBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.db.get(key)?)
    }

    fn stats(&self) -> super::StateStats {
        let property = |name: &str| self.db.property_int_value(name).ok().flatten();
        let bytes = property("rocksdb.estimate-live-data-size")
            .zip(property("rocksdb.cur-size-all-mem-tables"))
            .map(|(files, memtables)| files + memtables);
        super::StateStats { bytes, ..Default::default() }
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StateError> {
        // Pinned: the value is copied once, into `out`, not first into a
        // vector of its own.
        match self.db.get_pinned(key)? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// One batched read (RocksDB's `MultiGet`): each file's filter is
    /// probed for all the keys at once, their waits for memory overlapping,
    /// and each file is looked up once per batch, not once per key.
    fn get_many_into(&self, batch: super::ReadBatch<'_, '_>) -> Result<(), StateError> {
        let super::ReadBatch { key, count, prefetched, out, found } = batch;
        prefetched.resize(prefetched.len() + count, super::Prefetched::default());
        let column = self.db.cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME).ok_or_else(|| {
            StateError::Unsupported("RocksDB opened without its default column family".into())
        })?;
        let keys: Vec<&[u8]> = (0..count).map(key).collect();
        for value in self.db.batched_multi_get_cf(column, &keys, false) {
            let start = out.len();
            found.push(value?.map(|value| {
                out.extend_from_slice(&value);
                start..out.len()
            }));
        }
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), StateError> {
        Ok(self.db.delete_opt(key, &self.write)?)
    }

    fn scan(
        &mut self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<ScanEntry>, StateError> {
        let mut read = ReadOptions::default();
        if let Some(end) = prefix_end(prefix) {
            read.set_iterate_upper_bound(end);
        }
        let start = match start_after {
            // The smallest key after `prefix ++ after` is `prefix ++ after ++ [0]`.
            Some(after) => [prefix, after, &[0]].concat(),
            None => prefix.to_vec(),
        };
        let mut out = Vec::new();
        for item in
            self.db.iterator_opt(IteratorMode::From(&start, Direction::Forward), read).take(limit)
        {
            let (key, value) = item?;
            let rest = key
                .strip_prefix(prefix)
                .ok_or_else(|| StateError::Corrupt("scan left its prefix".into()))?;
            out.push((rest.to_vec(), value.to_vec()));
        }
        Ok(out)
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StateError> {
        match prefix_end(prefix) {
            Some(end) => {
                let mut batch = rocksdb::WriteBatch::default();
                batch.delete_range(prefix, &end);
                Ok(self.db.write_opt(batch, &self.write)?)
            }
            None => {
                let keys: Vec<Box<[u8]>> = self
                    .db
                    .prefix_iterator(prefix)
                    .map(|item| item.map(|(k, _)| k))
                    .take_while(|k| k.as_ref().map_or(true, |k| k.starts_with(prefix)))
                    .collect::<Result<_, _>>()?;
                for key in keys {
                    self.db.delete_opt(&key, &self.write)?;
                }
                Ok(())
            }
        }
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        // Sized up front for the writes the iterator promises, at about
        // 32 bytes each: a batch's buffer grown by doubling copies itself
        // (5 % of the CPU when millions of keys are written back).
        let promised = writes.size_hint().0;
        let mut batch = rocksdb::WriteBatch::with_capacity_bytes(promised.saturating_mul(32));
        for (key, value) in writes {
            match value {
                Some(value) => batch.put(key, value),
                None => batch.delete(key),
            }
        }
        Ok(self.db.write_opt(batch, &self.write)?)
    }

    /// A long run is written as a table file and handed to RocksDB whole
    /// (a level-0 file, or deeper where it overlaps nothing): no memtable
    /// inserts, write-ahead log or flush (≈ 10 % of the CPU of a running
    /// sum over 10 M keys, whose cache writes back hundreds of thousands
    /// of new keys at a time). A short one is a batch.
    fn write_sorted(
        &mut self,
        writes: &mut dyn Iterator<Item = Write<'_>>,
    ) -> Result<(), StateError> {
        if writes.size_hint().0 < FEWEST_INGESTED_WRITES {
            return self.write_batch(writes);
        }
        let file = self.path.join(INGESTED_FILE);
        let mut writer = SstFileWriter::create(&self.options);
        writer.open(&file)?;
        for (key, value) in writes {
            match value {
                Some(value) => writer.put(key, value)?,
                None => writer.delete(key)?,
            }
        }
        writer.finish()?;
        ask_for_pages(&file);
        let mut ingest = IngestExternalFileOptions::default();
        // Linked into place, not copied (the same directory).
        ingest.set_move_files(true);
        let ingested = self.db.ingest_external_file_opts(&ingest, vec![&file]);
        let removed = std::fs::remove_file(&file);
        ingested?;
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<(), StateError> {
        Ok(self.db.flush()?)
    }

    fn checkpoint(&mut self, dir: &Path, _form: SnapshotForm) -> Result<(), StateError> {
        // Always a database. Flushes the memtables, hard-links the SST
        // files and copies the small mutable ones (MANIFEST, OPTIONS, CURRENT).
        Ok(rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(dir)?)
    }
}

/// RocksDB's default column family, opened with `options` (every key is
/// in it).
fn default_column(options: &Options) -> rocksdb::ColumnFamilyDescriptor {
    rocksdb::ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, options.clone())
}

/// Ask the kernel to read all of `file` into its page cache, without
/// waiting for it. RocksDB's table file writer drops the pages of what it
/// wrote as it finishes (and it offers no way not to), so the first reads
/// of a file just written — RocksDB's own as it takes the file in, then
/// those of the keys evicted into it — would each wait for the disk, one
/// block at a time (a twentieth of a subtask's time in a running sum over
/// ten million keys). A hint: if it fails, reads are only slower.
fn ask_for_pages(file: &Path) {
    if let Ok(written) = std::fs::File::open(file) {
        let _ = rustix::fs::fadvise(&written, 0, None, rustix::fs::Advice::WillNeed);
    }
}

impl RocksDbBackend {
    /// Open the database at `path` to read it only (a checkpoint directory).
    pub fn open_read_only(path: &Path) -> Result<Self, StateError> {
        let options = Options::default();
        let column = [default_column(&options)];
        let db = DB::open_cf_descriptors_read_only(&options, path, column, false)?;
        Ok(Self { db, write: WriteOptions::default(), options, path: path.to_path_buf() })
    }

    /// Compact the whole database now (purging expired values).
    pub fn compact(&self) {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
    }

    /// Call `f` on every stored entry, in key order.
    pub fn for_each(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        for item in self.db.iterator(IteratorMode::Start) {
            let (key, value) = item?;
            f(&key, &value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_backend() {
        let dir = tempfile::tempdir().unwrap();
        super::super::tests::exercise(&mut RocksDbBackend::open(dir.path()).unwrap());
    }

    #[test]
    fn compaction_purges_expired_values() {
        use crate::state::ttl;
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(dir.path()).unwrap();
        db.put(b"old", &ttl::encode(b"x", Some(crate::clock::now_millis() - 1))).unwrap();
        db.put(b"young", &ttl::encode(b"y", Some(crate::clock::now_millis() + 3_600_000))).unwrap();
        db.put(b"forever", &ttl::encode(b"z", None)).unwrap();
        db.flush().unwrap();
        db.compact();
        assert_eq!(db.get(b"old").unwrap(), None);
        assert!(db.get(b"young").unwrap().is_some() && db.get(b"forever").unwrap().is_some());
    }

    #[test]
    fn a_checkpoint_is_a_consistent_copy() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("live")).unwrap();
        db.put(b"k", b"1").unwrap();
        db.checkpoint(&dir.path().join("chk"), SnapshotForm::Database).unwrap();
        db.put(b"k", b"2").unwrap();
        let copy = RocksDbBackend::open(&dir.path().join("chk")).unwrap();
        assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn a_long_sorted_run_is_ingested_over_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = RocksDbBackend::open(&dir.path().join("live")).unwrap();
        let key = |i: usize| format!("k{i:08}").into_bytes();
        // Older values of some keys, in a table file and in the memtable.
        db.put(&key(7), b"old").unwrap();
        db.flush().unwrap();
        db.put(&key(8), b"old").unwrap();
        db.put(&key(9), b"old").unwrap();
        let keys: Vec<Vec<u8>> = (0..FEWEST_INGESTED_WRITES + 10).map(key).collect();
        let mut writes = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (&k[..], if i == 9 { None } else { Some(&k[1..]) }));
        db.write_sorted(&mut writes).unwrap();
        assert_eq!(db.get(&key(7)).unwrap().as_deref(), Some(&key(7)[1..]));
        assert_eq!(db.get(&key(8)).unwrap().as_deref(), Some(&key(8)[1..]));
        assert_eq!(db.get(&key(9)).unwrap(), None, "deleted");
        let last = key(FEWEST_INGESTED_WRITES + 9);
        assert_eq!(db.get(&last).unwrap().as_deref(), Some(&last[1..]));
        assert!(!dir.path().join("live").join(INGESTED_FILE).exists(), "taken in");
        // Later writes win over the ingested ones, and all of it is checkpointed.
        db.put(&key(7), b"new").unwrap();
        db.checkpoint(&dir.path().join("chk"), SnapshotForm::Database).unwrap();
        let mut copy = RocksDbBackend::open(&dir.path().join("chk")).unwrap();
        assert_eq!(copy.get(&key(7)).unwrap().as_deref(), Some(&b"new"[..]));
        assert_eq!(copy.get(&last).unwrap().as_deref(), Some(&last[1..]));
        assert_eq!(copy.scan(b"k", None, usize::MAX).unwrap().len(), keys.len() - 1);
    }

    #[test]
    fn state_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut db = RocksDbBackend::open(dir.path()).unwrap();
            db.put(b"k", b"v").unwrap();
            db.flush().unwrap();
        }
        let db = RocksDbBackend::open(dir.path()).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
