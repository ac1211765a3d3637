//! The file sink: one event value per line, written directly or (exactly
//! once) through the pending part files of [`super::parts`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::parts::PendingParts;
use crate::connectors::{write_lines, ConnectorError, Sink};
use crate::runtime::packed::PackedEvents;

/// Writes event values to a file, one per line, replacing the file.
///
/// Made with [`FileSink::create`] it writes the file directly and ignores
/// epochs (at-least-once: after a restore, replayed events are written
/// again). Made with [`FileSink::exactly_once`] it keeps each epoch in a
/// pending part file and appends it to the file only when a checkpoint
/// covering it completes (or at the final `flush`).
pub struct FileSink {
    path: PathBuf,
    mode: Mode,
}

/// How a [`FileSink`] writes.
enum Mode {
    /// Straight into the file; `sync` says whether `flush` syncs to disk
    /// (regular files only, not `/dev/null`).
    Direct { out: BufWriter<File>, sync: bool },
    /// Through pending part files, committed at checkpoints.
    ExactlyOnce(PendingParts),
}

impl FileSink {
    /// Create (or truncate) `path`, creating its directory if needed; write
    /// it directly, ignoring epochs.
    pub fn create(path: &Path) -> Result<Self, ConnectorError> {
        let io =
            |source| ConnectorError::Io { what: format!("creating {}", path.display()), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = File::create(path).map_err(io)?;
        let sync = file.metadata().map_err(io)?.is_file();
        Ok(Self {
            path: path.to_path_buf(),
            mode: Mode::Direct { out: BufWriter::new(file), sync },
        })
    }

    /// An exactly-once sink on the regular file `path`. With `recovered`
    /// (the state a `pre_commit` returned, for the checkpoint being restored)
    /// the file is brought back to exactly the output up to that checkpoint;
    /// without it the file starts empty. Either way, pending data of any
    /// other epoch is discarded.
    pub fn exactly_once(
        path: &Path,
        recovered: Option<&serde_json::Value>,
    ) -> Result<Self, ConnectorError> {
        let parts = match recovered {
            None => PendingParts::start(path)?,
            Some(state) => PendingParts::recover(path, state)?,
        };
        Ok(Self { path: path.to_path_buf(), mode: Mode::ExactlyOnce(parts) })
    }

    fn error(&self, source: std::io::Error) -> ConnectorError {
        ConnectorError::Io { what: format!("writing {}", self.path.display()), source }
    }
}

impl Sink for FileSink {
    fn write(&mut self, epoch: u64, events: &PackedEvents) -> Result<(), ConnectorError> {
        match &mut self.mode {
            Mode::Direct { out, .. } => write_lines(out, events).map_err(|e| self.error(e)),
            Mode::ExactlyOnce(parts) => parts.write(epoch, events),
        }
    }

    /// Direct mode: flush and sync the file. Exactly-once mode: commit every
    /// epoch written so far, which seals them (end of a run).
    fn flush(&mut self) -> Result<(), ConnectorError> {
        match &mut self.mode {
            Mode::Direct { out, sync } => {
                let sync = *sync;
                let result =
                    out.flush()
                        .and_then(|()| if sync { out.get_ref().sync_data() } else { Ok(()) });
                result.map_err(|e| self.error(e))
            }
            Mode::ExactlyOnce(parts) => parts.commit_all(),
        }
    }

    /// Direct mode: hand the buffered lines to the file (no sync).
    /// Exactly-once mode: nothing; output becomes visible at commits.
    fn release(&mut self) -> Result<(), ConnectorError> {
        match &mut self.mode {
            Mode::Direct { out, .. } => out.flush().map_err(|e| self.error(e)),
            Mode::ExactlyOnce(_) => Ok(()),
        }
    }

    fn pre_commit(&mut self, checkpoint: u64) -> Result<serde_json::Value, ConnectorError> {
        match &mut self.mode {
            Mode::Direct { .. } => self.flush().map(|()| serde_json::Value::Null),
            Mode::ExactlyOnce(parts) => parts.pre_commit(checkpoint),
        }
    }

    fn commit(&mut self, checkpoint: u64) -> Result<(), ConnectorError> {
        match &mut self.mode {
            Mode::Direct { .. } => Ok(()),
            Mode::ExactlyOnce(parts) => parts.commit(checkpoint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    #[test]
    fn sink_writes_one_value_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.jsonl");
        let mut sink = FileSink::create(&path).unwrap();
        sink.write(
            0,
            &PackedEvents::of(&[Event {
                key: None,
                value: b"{\"a\":1}".to_vec(),
                timestamp: 0,
                headers: vec![],
            }]),
        )
        .unwrap();
        sink.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        // Plain mode ignores epochs and checkpoints: it writes straight through.
        sink.write(
            7,
            &PackedEvents::of(&[Event {
                key: None,
                value: b"2".to_vec(),
                timestamp: 0,
                headers: vec![],
            }]),
        )
        .unwrap();
        assert_eq!(sink.pre_commit(3).unwrap(), serde_json::Value::Null);
        sink.commit(3).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n2\n");
    }

    #[test]
    fn plain_sink_still_writes_to_dev_null() {
        let mut sink = FileSink::create(Path::new("/dev/null")).unwrap();
        sink.write(
            0,
            &PackedEvents::of(&[Event {
                key: None,
                value: b"x".to_vec(),
                timestamp: 0,
                headers: vec![],
            }]),
        )
        .unwrap();
        sink.pre_commit(1).unwrap();
        sink.flush().unwrap();
    }
}
