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

use super::{decode, encode, write_lines, ConnectorError};
use crate::Event;

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
        parts.visible.set_len(0).and_then(|()| parts.visible.sync_all()).map_err(io(format!("truncating {}", path.display())))?;
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
            return Err(misfit(format!("malformed state: part epochs {} and {} are out of order", pair[0].epoch, pair[1].epoch)));
        }
        let total = state.parts.iter().try_fold(state.committed_len, |total, part| total.checked_add(part.len));
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
        let visible_len = parts.visible.metadata().map_err(io(format!("looking at {}", path.display())))?.len();
        let needed = if all_there { state.committed_len } else { total };
        if visible_len < needed {
            return Err(misfit(format!("the file has {visible_len} bytes but the checkpoint needs at least {needed}; was it changed outside Weir?")));
        }
        parts.committed_len = state.committed_len;
        if all_there {
            // The commit had not finished: do it again.
            parts.append(&state.parts)?;
        } else {
            // The commit had appended every part before deleting any.
            parts.visible.set_len(total).and_then(|()| parts.visible.sync_all()).map_err(io(format!("truncating {}", path.display())))?;
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
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                let error = std::io::Error::new(ErrorKind::InvalidInput, "not a regular file (exactly-once output needs one; use the plain file sink)");
                return Err(io(format!("opening {}", path.display()))(error));
            }
            _ => {}
        }
        let visible = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
        let visible = visible.map_err(io(format!("opening {}", path.display())))?;
        sync_dir(parent)?;
        Ok(Self { path: path.to_path_buf(), dir, visible, committed_len: 0, parts: BTreeMap::new(), sealed_through: None })
    }

    /// Append `events` to epoch `epoch`'s part, opening it on first use.
    pub(super) fn write(&mut self, epoch: u64, events: &[Event]) -> Result<(), ConnectorError> {
        if let Some(sealed) = self.sealed_through.filter(|&sealed| epoch <= sealed) {
            let message = format!("a write to epoch {epoch} after checkpoint {sealed} was pre-committed");
            return Err(ConnectorError::OutOfOrder { what: format!("exactly-once file sink {}", self.path.display()), message });
        }
        if events.is_empty() {
            return Ok(());
        }
        let part_path = self.part_path(epoch);
        let error = io(format!("writing {}", part_path.display()));
        let part = match self.parts.entry(epoch) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => {
                let file = OpenOptions::new().write(true).create_new(true).open(&part_path).map_err(io(format!("creating {}", part_path.display())))?;
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
    pub(super) fn pre_commit(&mut self, checkpoint: u64) -> Result<serde_json::Value, ConnectorError> {
        for (&epoch, part) in self.parts.range_mut(..=checkpoint) {
            if let Some(mut out) = part.out.take() {
                let error = io(format!("syncing {}", part_path(&self.dir, epoch).display()));
                out.flush().and_then(|()| out.get_ref().sync_data()).map_err(error)?;
            }
            part.sealed_by.get_or_insert(checkpoint);
        }
        sync_dir(&self.dir)?;
        self.sealed_through = self.sealed_through.max(Some(checkpoint));
        let parts = self.parts.iter().filter(|(_, part)| part.sealed_by.is_some()).map(|(&epoch, part)| PartState { epoch, len: part.len }).collect();
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
        self.append(&done)?;
        for part in &done {
            let part_path = self.part_path(part.epoch);
            std::fs::remove_file(&part_path).map_err(io(format!("deleting {}", part_path.display())))?;
            self.parts.remove(&part.epoch);
        }
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
        self.visible.set_len(self.committed_len).and_then(|()| self.visible.seek(SeekFrom::Start(self.committed_len))).map_err(&error)?;
        let mut len = self.committed_len;
        for part in parts {
            let part_path = self.part_path(part.epoch);
            let file = File::open(&part_path).map_err(io(format!("reading {}", part_path.display())))?;
            let copied = std::io::copy(&mut file.take(part.len), &mut self.visible).map_err(io(format!("copying {}", part_path.display())))?;
            if copied != part.len {
                let message = format!("pending part {} has {copied} bytes, {} were written", part_path.display(), part.len);
                return Err(ConnectorError::Restore { what: format!("exactly-once file sink {}", self.path.display()), message });
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
            let removed = if kind.is_dir() { std::fs::remove_dir_all(entry.path()) } else { std::fs::remove_file(entry.path()) };
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
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(format!("syncing directory {}", dir.display())))
}

/// Wrap an I/O error, saying what was being done.
fn io(what: String) -> impl Fn(std::io::Error) -> ConnectorError {
    move |source| ConnectorError::Io { what: what.clone(), source }
}
