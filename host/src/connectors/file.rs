//! The file source and sink: JSON lines.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{write_lines, ConnectorError, Polled, Sink, Source};
use crate::Event;

/// What to do with a line whose timestamp is missing or unusable. Never
/// "now": event time must come from the event.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum BadTimestamps {
    /// Fail the run, naming the file and line.
    #[default]
    Fail,
    /// Drop the line and count it (the summary reports how many).
    Drop,
    /// Send the line to this side output (with timestamp `i64::MIN`).
    SideOutput(String),
}

/// Reads a file of JSON lines; each non-blank line becomes one event whose
/// value is the line's bytes.
pub struct FileSource {
    path: PathBuf,
    reader: BufReader<File>,
    line_number: u64,
    timestamp_field: Option<String>,
    line: Vec<u8>,
    bytes_read: u64,
    size: u64,
    bad_timestamps: BadTimestamps,
    rejected: Vec<(String, Event)>,
    dropped: u64,
}

impl FileSource {
    /// Open `path`. With `timestamp_field`, each line must be a JSON object
    /// whose field of that name holds the event time.
    pub fn open(path: &Path, timestamp_field: Option<String>) -> Result<Self, ConnectorError> {
        let file = File::open(path).map_err(|source| ConnectorError::Io { what: format!("opening {}", path.display()), source })?;
        let size = file.metadata().map_or(0, |m| m.len());
        Ok(Self {
            path: path.to_path_buf(),
            reader: BufReader::new(file),
            line_number: 0,
            timestamp_field,
            line: Vec::new(),
            bytes_read: 0,
            size,
            bad_timestamps: BadTimestamps::Fail,
            rejected: Vec::new(),
            dropped: 0,
        })
    }

    /// Handle lines without a usable timestamp as `policy` says.
    pub fn with_bad_timestamps(mut self, policy: BadTimestamps) -> Self {
        self.bad_timestamps = policy;
        self
    }

    fn bad(&self, message: impl Into<String>) -> ConnectorError {
        ConnectorError::BadRecord { location: format!("{}:{}", self.path.display(), self.line_number), message: message.into() }
    }

    fn timestamp(&self, line: &[u8]) -> Result<i64, ConnectorError> {
        let Some(field) = &self.timestamp_field else {
            serde_json::from_slice::<serde::de::IgnoredAny>(line).map_err(|e| self.bad(format!("not JSON: {e}")))?;
            return Ok(0);
        };
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(line).map_err(|e| self.bad(format!("not a JSON object: {e}")))?;
        match object.get(field) {
            Some(serde_json::Value::String(text)) => parse_rfc3339_millis(text).ok_or_else(|| self.bad(format!("field {field:?} is not an RFC 3339 time: {text:?}"))),
            Some(serde_json::Value::Number(n)) => n.as_i64().ok_or_else(|| self.bad(format!("field {field:?} is not integer milliseconds: {n}"))),
            Some(other) => Err(self.bad(format!("field {field:?} is not a time: {other}"))),
            None => Err(self.bad(format!("no timestamp field {field:?}"))),
        }
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC time.
pub(crate) fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339_weak(text).ok()?;
    let millis = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    i64::try_from(millis).ok()
}

impl Source for FileSource {
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        let mut added = 0;
        while added < max {
            self.line.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|source| ConnectorError::Io { what: format!("reading {}", self.path.display()), source })?;
            if read == 0 {
                return Ok(Polled::single(false));
            }
            self.bytes_read += read as u64;
            self.line_number += 1;
            let line = self.line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let event = |timestamp| Event { key: None, value: line.to_vec(), timestamp, headers: Vec::new() };
            match (self.timestamp(line), &self.bad_timestamps) {
                (Ok(timestamp), _) => {
                    out.push(event(timestamp));
                    added += 1;
                }
                (Err(error), BadTimestamps::Fail) => return Err(error),
                (Err(_), _) if self.timestamp_field.is_none() => return Err(self.bad("not JSON")),
                (Err(_), BadTimestamps::Drop) => self.dropped += 1,
                (Err(_), BadTimestamps::SideOutput(name)) => {
                    let name = name.clone();
                    self.rejected.push((name, event(i64::MIN)));
                }
            }
        }
        Ok(Polled::single(true))
    }

    fn take_rejected(&mut self) -> Vec<(String, Event)> {
        std::mem::take(&mut self.rejected)
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn progress(&self) -> Option<(u64, u64)> {
        Some((self.bytes_read, self.size.max(self.bytes_read)))
    }
}

/// Writes event values to a file, one per line, replacing the file.
pub struct FileSink {
    path: PathBuf,
    out: BufWriter<File>,
    /// Whether `flush` syncs to disk (regular files only, not `/dev/null`).
    sync: bool,
}

impl FileSink {
    /// Create (or truncate) `path`, creating its directory if needed.
    pub fn create(path: &Path) -> Result<Self, ConnectorError> {
        let io = |source| ConnectorError::Io { what: format!("creating {}", path.display()), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = File::create(path).map_err(io)?;
        let sync = file.metadata().map_err(io)?.is_file();
        Ok(Self { path: path.to_path_buf(), out: BufWriter::new(file), sync })
    }

    fn error(&self, source: std::io::Error) -> ConnectorError {
        ConnectorError::Io { what: format!("writing {}", self.path.display()), source }
    }
}

impl Sink for FileSink {
    fn write(&mut self, events: &[Event]) -> Result<(), ConnectorError> {
        write_lines(&mut self.out, events).map_err(|e| self.error(e))
    }

    fn flush(&mut self) -> Result<(), ConnectorError> {
        self.out.flush().map_err(|e| self.error(e))?;
        if self.sync {
            self.out.get_ref().sync_data().map_err(|e| self.error(e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str, field: Option<&str>) -> Result<Vec<Event>, ConnectorError> {
        Ok(read_with(text, field, BadTimestamps::Fail)?.0)
    }

    /// Events read, events set aside, and the count dropped.
    type ReadAll = (Vec<Event>, Vec<(String, Event)>, u64);

    fn read_with(text: &str, field: Option<&str>, policy: BadTimestamps) -> Result<ReadAll, ConnectorError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut source = FileSource::open(&path, field.map(String::from))?.with_bad_timestamps(policy);
        let mut out = Vec::new();
        let mut rejected = Vec::new();
        loop {
            let polled = source.next_batch(2, &mut out)?;
            rejected.extend(source.take_rejected());
            if !polled.more {
                return Ok((out, rejected, source.dropped()));
            }
        }
    }

    #[test]
    fn bad_timestamps_are_dropped_or_set_aside_never_given_now() {
        let text = "{\"t\":5}\n{\"x\":1}\n{\"t\":\"soon\"}\nnot json\n{\"t\":6}\n";
        let (events, rejected, dropped) = read_with(text, Some("t"), BadTimestamps::Drop).unwrap();
        assert_eq!((events.len(), rejected.len(), dropped), (2, 0, 3));
        let (events, rejected, dropped) = read_with(text, Some("t"), BadTimestamps::SideOutput("bad".into())).unwrap();
        assert_eq!((events.len(), rejected.len(), dropped), (2, 3, 0));
        assert!(rejected.iter().all(|(name, e)| name == "bad" && e.timestamp == i64::MIN));
        assert_eq!(rejected[0].1.value, b"{\"x\":1}");
    }

    #[test]
    fn reads_lines_in_batches_with_timestamps() {
        let events = read_all("{\"t\":\"2026-01-15T10:00:05Z\"}\n\n{\"t\":1000}\n{\"t\":\"2026-01-15T10:00:05.5Z\"}", Some("t")).unwrap();
        let times: Vec<i64> = events.iter().map(|e| e.timestamp).collect();
        assert_eq!(times, vec![1_768_471_205_000, 1000, 1_768_471_205_500]);
        assert_eq!(events[1].value, b"{\"t\":1000}");
    }

    #[test]
    fn bad_lines_are_reported_with_their_line_number() {
        let err = read_all("{}\nnot json\n", None).unwrap_err().to_string();
        assert!(err.contains("in.jsonl:2") && err.contains("not JSON"), "{err}");
        let err = read_all("{\"x\":1}\n", Some("t")).unwrap_err().to_string();
        assert!(err.contains(":1") && err.contains("no timestamp field"), "{err}");
    }

    #[test]
    fn sink_writes_one_value_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.jsonl");
        let mut sink = FileSink::create(&path).unwrap();
        sink.write(&[Event { key: None, value: b"{\"a\":1}".to_vec(), timestamp: 0, headers: vec![] }]).unwrap();
        sink.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
    }
}
