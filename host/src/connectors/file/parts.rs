//! Pending part files: the exactly-once machinery of the file sink.
//!
//! The visible output is the file at `path`. Each checkpoint epoch's lines
//! go to their own part file in a hidden directory beside it,
//! `<dir>/.<file name>.pending/epoch-<E>`. A checkpoint's pre-commit syncs
//! the parts it covers; when the checkpoint completes, they are appended to
//! the visible file in epoch order, the file is synced, and only then are
//! the parts deleted.
//!
//! Pre-commit returns the state recovery needs:
//! `{"committed_len": L, "parts": [{"epoch": E, "len": bytes}, …]}` — the
//! visible file's length with everything committed before, and every part
//! pre-committed but not yet committed. After a crash at any instant,
//! recovery tells "not yet appended" (every listed part still there, at
//! least as long as recorded: truncate to `L` and append them again) from
//! "appended" (some part already deleted: truncate to `L` plus their
//! lengths), then deletes every other pending file.
//!
//! This module owns the pending directory and the visible file's length; it
//! never makes data visible before a checkpoint covering it completes (or
//! the final flush).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::connectors::{decode, encode, write_lines, ConnectorError};
use crate::runtime::packed::PackedEvents;

/// What a pre-commit returns and recovery reads.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitState {
    /// Length of the visible file with everything committed before.
    committed_len: u64,
    /// Every pre-committed, not yet committed part, in epoch order.
    parts: Vec<PartState>,
}

/// One pre-committed part.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PartState {
    /// Its epoch.
    epoch: u64,
    /// Its length in bytes.
    len: u64,
}

/// One epoch's part file.
struct Part {
    /// Open for writing until the part is pre-committed.
    out: Option<BufWriter<File>>,
    /// Bytes written to it.
    len: u64,
    /// The checkpoint whose pre-commit sealed it.
    sealed_by: Option<u64>,
}

/// The pending parts of one exactly-once file sink, and its visible file.
pub(super) struct PendingParts {
    /// The visible file's path.
    path: PathBuf,
    /// The pending directory.
    dir: PathBuf,
    /// The visible file, open for writing at commits.
    visible: File,
    /// Length of the visible file with everything committed.
    committed_len: u64,
    /// Parts not yet committed, by epoch.
    parts: BTreeMap<u64, Part>,
    /// Epochs up to this one take no more writes.
    sealed_through: Option<u64>,
}

impl PendingParts {
    /// Start afresh: the visible file empty (created with its directory if
    /// needed), the pending directory empty.
    pub(super) fn start(path: &Path) -> Result<Self, ConnectorError> {
        let mut parts = Self::open(path)?;
        parts
            .visible
            .set_len(0)
            .and_then(|()| parts.visible.sync_all())
            .map_err(io(format!("truncating {}", path.display())))?;
        parts.clear_pending()?;
        Ok(parts)
    }

    /// Bring the visible file back to exactly the output up to the
    /// checkpoint whose pre-commit returned `state`, and drop every other
    /// pending part.
    pub(super) fn recover(path: &Path, state: &serde_json::Value) -> Result<Self, ConnectorError> {
        let what = || format!("exactly-once file sink {}", path.display());
        let misfit = |message: String| ConnectorError::Restore { what: what(), message };
        let state: CommitState = decode(what, state)?;
        if let Some(pair) = state.parts.windows(2).find(|pair| pair[0].epoch >= pair[1].epoch) {
            return Err(misfit(format!(
                "malformed state: part epochs {} and {} are out of order",
                pair[0].epoch, pair[1].epoch
            )));
        }
        let total = state
            .parts
            .iter()
            .try_fold(state.committed_len, |total, part| total.checked_add(part.len));
        let total = total.ok_or_else(|| misfit("malformed state: lengths overflow".into()))?;

        let mut parts = Self::open(path)?;
        let mut all_there = true;
        for part in &state.parts {
            let part_path = parts.part_path(part.epoch);
            match std::fs::metadata(&part_path) {
                Ok(meta) => all_there &= meta.is_file() && meta.len() >= part.len,
                Err(e) if e.kind() == ErrorKind::NotFound => all_there = false,
                Err(e) => return Err(io(format!("looking at {}", part_path.display()))(e)),
            }
        }
        let visible_len =
            parts.visible.metadata().map_err(io(format!("looking at {}", path.display())))?.len();
        let needed = if all_there { state.committed_len } else { total };
        if visible_len < needed {
            return Err(misfit(format!(
                "the file has {visible_len} bytes but the checkpoint needs at least {needed}: \
                 it was changed outside Weir, or the snapshot is of a run that wrote its output \
                 elsewhere (copy that file here first); --fresh starts over"
            )));
        }
        parts.committed_len = state.committed_len;
        if all_there {
            // The commit had not finished: do it again.
            parts.append(&state.parts)?;
        } else {
            // The commit had appended every part before deleting any.
            parts
                .visible
                .set_len(total)
                .and_then(|()| parts.visible.sync_all())
                .map_err(io(format!("truncating {}", path.display())))?;
            parts.committed_len = total;
        }
        parts.clear_pending()?;
        parts.sealed_through = state.parts.last().map(|part| part.epoch);
        tracing::info!(path = %path.display(), committed_len = parts.committed_len, redone = all_there, parts = state.parts.len(), "exactly-once file sink recovered");
        Ok(parts)
    }

    /// Open the visible file (without truncating it) and the pending
    /// directory, creating them if needed.
    fn open(path: &Path) -> Result<Self, ConnectorError> {
        let name = path.file_name().ok_or_else(|| ConnectorError::Restore {
            what: format!("exactly-once file sink {}", path.display()),
            message: "the path does not name a file".into(),
        })?;
        let parent = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut pending = OsString::from(".");
        pending.push(name);
        pending.push(".pending");
        let dir = parent.join(pending);
        // Check before creating anything beside it.
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                let error = std::io::Error::new(
                    ErrorKind::InvalidInput,
                    "not a regular file (exactly-once output needs one; use the plain file sink)",
                );
                return Err(io(format!("opening {}", path.display()))(error));
            }
            _ => {}
        }
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let visible =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
        let visible = visible.map_err(io(format!("opening {}", path.display())))?;
        sync_dir(parent)?;
        Ok(Self {
            path: path.to_path_buf(),
            dir,
            visible,
            committed_len: 0,
            parts: BTreeMap::new(),
            sealed_through: None,
        })
    }

    /// Append `events` to epoch `epoch`'s part, opening it on first use.
    pub(super) fn write(
        &mut self,
        epoch: u64,
        events: &PackedEvents,
    ) -> Result<(), ConnectorError> {
        if let Some(sealed) = self.sealed_through.filter(|&sealed| epoch <= sealed) {
            let message =
                format!("a write to epoch {epoch} after checkpoint {sealed} was pre-committed");
            return Err(ConnectorError::OutOfOrder {
                what: format!("exactly-once file sink {}", self.path.display()),
                message,
            });
        }
        if events.is_empty() {
            return Ok(());
        }
        let part_path = self.part_path(epoch);
        let error = io(format!("writing {}", part_path.display()));
        let part = match self.parts.entry(epoch) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => {
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&part_path)
                    .map_err(io(format!("creating {}", part_path.display())))?;
                entry.insert(Part { out: Some(BufWriter::new(file)), len: 0, sealed_by: None })
            }
        };
        // Only sealed parts lack a writer, and sealed epochs were refused above.
        let Some(out) = part.out.as_mut() else {
            return Err(error(std::io::Error::other("the part was already pre-committed")));
        };
        write_lines(out, events).map_err(error)?;
        part.len += events.iter().map(|event| event.value.len() as u64 + 1).sum::<u64>();
        Ok(())
    }

    /// Seal every part of epoch ≤ `checkpoint` not sealed yet (flushed and
    /// synced, with the pending directory), and return the recovery state.
    pub(super) fn pre_commit(
        &mut self,
        checkpoint: u64,
    ) -> Result<serde_json::Value, ConnectorError> {
        for (&epoch, part) in self.parts.range_mut(..=checkpoint) {
            if let Some(mut out) = part.out.take() {
                let error = io(format!("syncing {}", part_path(&self.dir, epoch).display()));
                out.flush().and_then(|()| out.get_ref().sync_data()).map_err(error)?;
            }
            part.sealed_by.get_or_insert(checkpoint);
        }
        sync_dir(&self.dir)?;
        crate::fault::point("file-after-pre-commit");
        self.sealed_through = self.sealed_through.max(Some(checkpoint));
        let parts = self
            .parts
            .iter()
            .filter(|(_, part)| part.sealed_by.is_some())
            .map(|(&epoch, part)| PartState { epoch, len: part.len })
            .collect();
        Ok(encode(&CommitState { committed_len: self.committed_len, parts }))
    }

    /// Make the parts sealed by checkpoints ≤ `checkpoint` visible: append
    /// them, sync the visible file, then delete them.
    pub(super) fn commit(&mut self, checkpoint: u64) -> Result<(), ConnectorError> {
        let done: Vec<PartState> = self
            .parts
            .iter()
            .filter(|(_, part)| part.sealed_by.is_some_and(|sealed_by| sealed_by <= checkpoint))
            .map(|(&epoch, part)| PartState { epoch, len: part.len })
            .collect();
        if done.is_empty() {
            return Ok(());
        }
        // The checkpoint's `_metadata` is durable; nothing is appended yet.
        crate::fault::point("file-before-commit");
        self.append(&done)?;
        // Every part appended and the file synced; every part still there.
        crate::fault::point("file-after-append");
        for part in &done {
            let part_path = self.part_path(part.epoch);
            std::fs::remove_file(&part_path)
                .map_err(io(format!("deleting {}", part_path.display())))?;
            self.parts.remove(&part.epoch);
            crate::fault::point("file-after-delete");
        }
        crate::fault::point("file-after-commit");
        Ok(())
    }

    /// Make every epoch written so far visible, sealing them (end of a run).
    pub(super) fn commit_all(&mut self) -> Result<(), ConnectorError> {
        let last_epoch = self.parts.keys().next_back().copied();
        let last_seal = self.parts.values().filter_map(|part| part.sealed_by).max();
        let Some(through) = last_epoch.max(last_seal) else {
            return Ok(());
        };
        self.pre_commit(through)?;
        self.commit(through)
    }

    /// Append the first `len` bytes of each part to the visible file at
    /// `committed_len` (dropping anything beyond it), sync, and count them
    /// as committed.
    fn append(&mut self, parts: &[PartState]) -> Result<(), ConnectorError> {
        let error = io(format!("appending to {}", self.path.display()));
        self.visible
            .set_len(self.committed_len)
            .and_then(|()| self.visible.seek(SeekFrom::Start(self.committed_len)))
            .map_err(&error)?;
        let mut len = self.committed_len;
        for part in parts {
            let part_path = self.part_path(part.epoch);
            let file =
                File::open(&part_path).map_err(io(format!("reading {}", part_path.display())))?;
            let copied = append_lines(&mut file.take(part.len), &mut self.visible, len)
                .map_err(io(format!("copying {}", part_path.display())))?;
            if copied != part.len {
                let message = format!(
                    "pending part {} has {copied} bytes, {} were written",
                    part_path.display(),
                    part.len
                );
                return Err(ConnectorError::Restore {
                    what: format!("exactly-once file sink {}", self.path.display()),
                    message,
                });
            }
            len += part.len;
        }
        self.visible.sync_data().map_err(error)?;
        self.committed_len = len;
        Ok(())
    }

    /// Delete everything in the pending directory.
    fn clear_pending(&mut self) -> Result<(), ConnectorError> {
        let error = io(format!("emptying {}", self.dir.display()));
        for entry in std::fs::read_dir(&self.dir).map_err(&error)? {
            let entry = entry.map_err(&error)?;
            let kind = entry.file_type().map_err(&error)?;
            let removed = if kind.is_dir() {
                std::fs::remove_dir_all(entry.path())
            } else {
                std::fs::remove_file(entry.path())
            };
            removed.map_err(io(format!("deleting {}", entry.path().display())))?;
        }
        self.parts.clear();
        sync_dir(&self.dir)
    }

    fn part_path(&self, epoch: u64) -> PathBuf {
        part_path(&self.dir, epoch)
    }
}

/// Where epoch `epoch`'s part lives in the pending directory `dir`.
fn part_path(dir: &Path, epoch: u64) -> PathBuf {
    dir.join(format!("epoch-{epoch}"))
}

/// Make a directory's entries (files created or deleted) durable.
fn sync_dir(dir: &Path) -> Result<(), ConnectorError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("syncing directory {}", dir.display())))
}

/// Wrap an I/O error, saying what was being done.
fn io(what: String) -> impl Fn(std::io::Error) -> ConnectorError {
    move |source| ConnectorError::Io { what: what.clone(), source }
}

/// The page size writes are aligned to (see [`append_lines`]).
const PAGE: u64 = 4096;

/// Copy `from` to `to` (whose position is file offset `at`) in writes of
/// whole lines that stay within one page of the file where they can: the
/// kernel applies a write page by page and a SIGKILL can stop it between
/// two pages, so this way a kill mid-commit leaves only whole lines
/// visible (but for a line that itself crosses a page boundary, which is
/// written alone). Recovery trims or completes the rest either way; this
/// keeps readers from seeing half a record meanwhile. Returns the bytes
/// copied.
fn append_lines(from: &mut impl Read, to: &mut File, mut at: u64) -> std::io::Result<u64> {
    let mut buffer = vec![0u8; 1 << 20];
    let (mut filled, mut copied) = (0usize, 0u64);
    loop {
        let read = from.read(&mut buffer[filled..])?;
        filled += read;
        let end_of_input = read == 0;
        let mut start = 0usize;
        while start < filled {
            let room = (PAGE - at % PAGE) as usize;
            let window = &buffer[start..filled.min(start + room)];
            let take = match window.iter().rposition(|&b| b == b'\n') {
                Some(last) => last + 1,
                // No whole line fits before the page ends: the next line alone.
                None => match buffer[start..filled].iter().position(|&b| b == b'\n') {
                    Some(first) => first + 1,
                    None if end_of_input => filled - start,
                    None => break, // an incomplete line: read more first
                },
            };
            to.write_all(&buffer[start..start + take])?;
            (start, at, copied) = (start + take, at + take as u64, copied + take as u64);
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
        if end_of_input {
            return Ok(copied);
        }
        if filled == buffer.len() {
            buffer.resize(buffer.len() * 2, 0); // a line longer than the buffer
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Write as _;

    use super::append_lines;

    use serde_json::json;

    use crate::connectors::file::FileSink;
    use crate::connectors::{ConnectorError, Sink};
    use crate::runtime::packed::PackedEvents;
    use crate::Event;

    fn events(values: &[&str]) -> PackedEvents {
        let events: Vec<Event> = values
            .iter()
            .map(|v| Event {
                key: None,
                value: v.as_bytes().to_vec(),
                timestamp: 0,
                headers: Vec::new(),
            })
            .collect();
        PackedEvents::of(&events)
    }

    /// A test directory with the visible file `out.jsonl` in it.
    struct Files {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        pending: std::path::PathBuf,
    }

    impl Files {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("out/out.jsonl");
            let pending = dir.path().join("out/.out.jsonl.pending");
            Self { _dir: dir, path, pending }
        }

        fn visible(&self) -> String {
            std::fs::read_to_string(&self.path).unwrap()
        }

        /// The names in the pending directory, sorted.
        fn pending(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.pending)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }

        fn part(&self, epoch: u64) -> std::path::PathBuf {
            self.pending.join(format!("epoch-{epoch}"))
        }

        fn append_to_visible(&self, bytes: &[u8]) {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&self.path)
                .unwrap()
                .write_all(bytes)
                .unwrap();
        }
    }

    /// Stop a sink the way `kill -9` would: nothing buffered is flushed.
    fn crash(sink: FileSink) {
        std::mem::forget(sink);
    }

    #[test]
    fn appended_lines_arrive_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = String::new();
        for i in 0..5000 {
            lines.push_str(&format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i % 300)));
        }
        lines.push_str(&"y".repeat(3 << 20)); // longer than the buffer, no newline
        for at in [0u64, 1, 4095, 5000] {
            let path = dir.path().join(format!("out-{at}"));
            let mut file = File::create(&path).unwrap();
            file.write_all(&vec![b'.'; at as usize]).unwrap();
            let copied = append_lines(&mut lines.as_bytes(), &mut file, at).unwrap();
            assert_eq!(copied, lines.len() as u64);
            let written = std::fs::read(&path).unwrap();
            assert_eq!(&written[at as usize..], lines.as_bytes(), "offset {at}");
        }
        let mut empty = File::create(dir.path().join("empty")).unwrap();
        assert_eq!(append_lines(&mut &b""[..], &mut empty, 0).unwrap(), 0);
    }

    #[test]
    fn epochs_become_visible_only_when_their_checkpoint_commits() {
        let files = Files::new();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(1, &events(&["a"])).unwrap();
        // Epoch 2's data arrives before epoch 1's pre-commit.
        sink.write(2, &events(&["c"])).unwrap();
        sink.write(1, &events(&["b"])).unwrap();
        assert_eq!(files.visible(), "");
        let state = sink.pre_commit(1).unwrap();
        assert_eq!(state, json!({"committed_len": 0, "parts": [{"epoch": 1, "len": 4}]}));
        assert_eq!(files.visible(), "");
        sink.write(2, &events(&["d"])).unwrap();
        sink.commit(1).unwrap();
        assert_eq!(files.visible(), "a\nb\n");
        assert_eq!(files.pending(), vec!["epoch-2"]);
        // Committing the same checkpoint again changes nothing.
        sink.commit(1).unwrap();
        assert_eq!(files.visible(), "a\nb\n");

        let state = sink.pre_commit(2).unwrap();
        assert_eq!(state, json!({"committed_len": 4, "parts": [{"epoch": 2, "len": 4}]}));
        assert_eq!(files.visible(), "a\nb\n");
        sink.commit(2).unwrap();
        assert_eq!(files.visible(), "a\nb\nc\nd\n");
        assert!(files.pending().is_empty());
        sink.commit(3).unwrap();
        assert_eq!(files.visible(), "a\nb\nc\nd\n");
    }

    #[test]
    fn a_checkpoint_that_never_completes_is_covered_by_the_next() {
        let files = Files::new();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(1, &events(&["a"])).unwrap();
        sink.pre_commit(1).unwrap();
        sink.write(2, &events(&["bb"])).unwrap();
        let state = sink.pre_commit(2).unwrap();
        assert_eq!(
            state,
            json!({"committed_len": 0, "parts": [{"epoch": 1, "len": 2}, {"epoch": 2, "len": 3}]})
        );
        sink.commit(2).unwrap();
        assert_eq!(files.visible(), "a\nbb\n");
        assert!(files.pending().is_empty());
    }

    #[test]
    fn a_write_to_a_pre_committed_epoch_is_an_error() {
        let files = Files::new();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(2, &events(&["a"])).unwrap();
        sink.pre_commit(3).unwrap();
        for epoch in [1, 2, 3] {
            let err = sink.write(epoch, &events(&["late"])).unwrap_err();
            assert!(matches!(err, ConnectorError::OutOfOrder { .. }), "{err}");
        }
        sink.write(4, &events(&["b"])).unwrap();
        sink.commit(3).unwrap();
        assert_eq!(files.visible(), "a\n");
    }

    #[test]
    fn flush_at_the_end_of_a_run_commits_every_epoch() {
        let files = Files::new();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(0, &events(&["a", "b"])).unwrap();
        assert_eq!(files.visible(), "");
        sink.flush().unwrap();
        assert_eq!(files.visible(), "a\nb\n");

        let files = Files::new();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(1, &events(&["a"])).unwrap();
        sink.pre_commit(5).unwrap();
        sink.write(6, &events(&["b"])).unwrap();
        sink.flush().unwrap();
        assert_eq!(files.visible(), "a\nb\n");
        assert!(files.pending().is_empty());
    }

    #[test]
    fn a_fresh_start_empties_the_file_and_the_pending_directory() {
        let files = Files::new();
        std::fs::create_dir_all(&files.pending).unwrap();
        std::fs::write(&files.path, "old output\n").unwrap();
        std::fs::write(files.part(3), "stale\n").unwrap();
        std::fs::write(files.pending.join("junk"), "?").unwrap();
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        assert_eq!(files.visible(), "");
        assert!(files.pending().is_empty());
        sink.write(3, &events(&["new"])).unwrap();
        sink.pre_commit(3).unwrap();
        sink.commit(3).unwrap();
        assert_eq!(files.visible(), "new\n");
    }

    /// The output of checkpoint 3 of [`run_to_checkpoint_3`].
    const AT_3: &str = "one\ntwo\nthree\nfour\n";

    /// Commit checkpoint 1, pre-commit 2 (which never completes) and 3, and
    /// write some of epoch 4 (partly flushed): the state of checkpoint 3,
    /// and the sink, which has not committed 3.
    fn run_to_checkpoint_3(files: &Files) -> (serde_json::Value, FileSink) {
        let mut sink = FileSink::exactly_once(&files.path, None).unwrap();
        sink.write(1, &events(&["one"])).unwrap();
        sink.pre_commit(1).unwrap();
        sink.commit(1).unwrap();
        sink.write(2, &events(&["two"])).unwrap();
        sink.write(3, &events(&["three"])).unwrap();
        sink.pre_commit(2).unwrap();
        sink.write(3, &events(&["four"])).unwrap();
        sink.write(4, &events(&["five"])).unwrap();
        let state = sink.pre_commit(3).unwrap();
        assert_eq!(
            state,
            json!({"committed_len": 4, "parts": [{"epoch": 2, "len": 4}, {"epoch": 3, "len": 11}]})
        );
        sink.write(4, &events(&["x".repeat(10_000).as_str()])).unwrap();
        (state, sink)
    }

    /// Recover from `state`, check the file holds exactly checkpoint 3's
    /// output with nothing pending, then check a new epoch commits after it.
    fn recover_and_continue(files: &Files, state: &serde_json::Value) {
        let mut sink = FileSink::exactly_once(&files.path, Some(state)).unwrap();
        assert_eq!(files.visible(), AT_3);
        assert!(files.pending().is_empty(), "{:?}", files.pending());
        sink.write(4, &events(&["again"])).unwrap();
        sink.write(5, &events(&["later"])).unwrap();
        let state = sink.pre_commit(4).unwrap();
        assert_eq!(state, json!({"committed_len": AT_3.len(), "parts": [{"epoch": 4, "len": 6}]}));
        assert_eq!(files.visible(), AT_3);
        sink.commit(4).unwrap();
        assert_eq!(files.visible(), format!("{AT_3}again\n"));
        // Recovering again from the same state (a crash during recovery, or
        // a second restore) gives the same file.
        crash(sink);
        FileSink::exactly_once(&files.path, Some(&state)).unwrap();
        assert!(files.pending().is_empty());
        assert_eq!(files.visible(), format!("{AT_3}again\n"));
    }

    #[test]
    fn recovery_after_pre_commit_before_commit_redoes_the_commit() {
        let files = Files::new();
        let (state, sink) = run_to_checkpoint_3(&files);
        crash(sink);
        assert_eq!(files.visible(), "one\n");
        recover_and_continue(&files, &state);
    }

    #[test]
    fn recovery_in_the_middle_of_the_append_redoes_it() {
        let files = Files::new();
        let (state, sink) = run_to_checkpoint_3(&files);
        crash(sink);
        files.append_to_visible(b"two\nthr");
        recover_and_continue(&files, &state);
    }

    #[test]
    fn recovery_after_the_append_before_deleting_parts_redoes_it() {
        let files = Files::new();
        let (state, sink) = run_to_checkpoint_3(&files);
        crash(sink);
        // The commit appended both parts and synced, then the process died.
        files.append_to_visible(b"two\nthree\nfour\n");
        assert_eq!(files.visible(), AT_3);
        recover_and_continue(&files, &state);
    }

    #[test]
    fn recovery_after_deleting_some_parts_keeps_the_append() {
        let files = Files::new();
        let (state, sink) = run_to_checkpoint_3(&files);
        crash(sink);
        files.append_to_visible(b"two\nthree\nfour\n");
        std::fs::remove_file(files.part(2)).unwrap();
        recover_and_continue(&files, &state);
    }

    #[test]
    fn recovery_after_the_commit_drops_later_epochs_and_bytes() {
        let files = Files::new();
        let (state, mut sink) = run_to_checkpoint_3(&files);
        sink.commit(3).unwrap();
        assert_eq!(files.visible(), AT_3);
        // The crashed run went on: epoch 4 pre-committed, its commit half
        // done, epoch 5 written, and a stray file beside the parts.
        sink.write(5, &events(&["six"])).unwrap();
        sink.pre_commit(4).unwrap();
        crash(sink);
        files.append_to_visible(b"five\nxxxx");
        std::fs::write(files.part(5), "six\n").unwrap();
        std::fs::write(files.pending.join("junk"), "?").unwrap();
        assert!(files.visible().len() > AT_3.len());
        recover_and_continue(&files, &state);
    }

    #[test]
    fn a_file_shorter_than_the_checkpoint_is_an_error() {
        let files = Files::new();
        let (state, mut sink) = run_to_checkpoint_3(&files);
        sink.commit(3).unwrap();
        crash(sink);
        std::fs::write(&files.path, "one\ntwo\n").unwrap();
        let err = FileSink::exactly_once(&files.path, Some(&state)).err().unwrap().to_string();
        assert!(err.contains("out.jsonl: cannot restore: the file has 8 bytes but the checkpoint needs at least 19"), "{err}");
        // Before the commit the file only needs its committed length.
        std::fs::write(&files.path, "on").unwrap();
        std::fs::write(files.part(2), "two\n").unwrap();
        std::fs::write(files.part(3), "three\nfour\n").unwrap();
        let err = FileSink::exactly_once(&files.path, Some(&state)).err().unwrap().to_string();
        assert!(err.contains("the file has 2 bytes but the checkpoint needs at least 4"), "{err}");
    }

    #[test]
    fn malformed_states_are_errors() {
        let files = Files::new();
        let cases = [
            (json!(null), "malformed"),
            (json!({"committed_len": "0", "parts": []}), "malformed"),
            (json!({"committed_len": 0}), "malformed"),
            (json!({"committed_len": 0, "parts": [{"epoch": 1}]}), "malformed"),
            (
                json!({"committed_len": 0, "parts": [{"epoch": 2, "len": 1}, {"epoch": 1, "len": 1}]}),
                "out of order",
            ),
            (json!({"committed_len": u64::MAX, "parts": [{"epoch": 1, "len": 1}]}), "overflow"),
        ];
        for (state, expected) in cases {
            let err = FileSink::exactly_once(&files.path, Some(&state)).err().unwrap().to_string();
            assert!(
                err.contains("exactly-once file sink")
                    && err.contains("cannot restore")
                    && err.contains(expected),
                "{err}"
            );
        }
    }

    #[test]
    fn exactly_once_needs_a_regular_file() {
        let err = FileSink::exactly_once(std::path::Path::new("/dev/null"), None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("/dev/null") && err.contains("not a regular file"), "{err}");
        assert!(
            !std::path::Path::new("/dev/.null.pending").exists(),
            "nothing is created beside a rejected path"
        );
        let files = Files::new();
        std::fs::create_dir_all(&files.path).unwrap();
        let err = FileSink::exactly_once(&files.path, None).err().unwrap().to_string();
        assert!(err.contains("out.jsonl") && err.contains("not a regular file"), "{err}");
        assert!(!files.pending.exists());
    }
}
