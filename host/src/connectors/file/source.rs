//! The file source: JSON lines, one event per non-blank line; or, in a
//! registry format, length-delimited records each decoded into a JSON
//! event.
//!
//! Its position is `{"offset": <byte offset of the next unread record>,
//! "line": <lines (records) consumed so far>, "dropped": <records dropped
//! so far>}`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::connectors::timestamp::{json_timestamp, BadTimestamps};
use crate::connectors::{decode, encode, ConnectorError, Polled, Source};
use crate::formats::RecordDecoder;
use crate::Event;

/// The longest record a length-delimited file may hold; a longer length
/// prefix means the file is not one of length-delimited records.
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Reads a file of JSON lines; each non-blank line becomes one event whose
/// value is the line's bytes. [`FileSource::decoding`] reads a file of
/// length-delimited records in a registry format instead.
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
    decoding: Option<Decoding>,
}

/// How a file of length-delimited records is decoded.
struct Decoding {
    decoder: RecordDecoder,
    on_undecodable: BadTimestamps,
    /// The decoded record's JSON.
    json: Vec<u8>,
}

impl FileSource {
    /// Open `path`. With `timestamp_field`, each line must be a JSON object
    /// whose field of that name holds the event time.
    pub fn open(path: &Path, timestamp_field: Option<String>) -> Result<Self, ConnectorError> {
        let file = File::open(path).map_err(|source| ConnectorError::Io {
            what: format!("opening {}", path.display()),
            source,
        })?;
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
            decoding: None,
        })
    }

    /// Read the file as length-delimited records (each an unsigned varint
    /// length, then the record, as Protobuf's `writeDelimitedTo` frames
    /// messages) in `decoder`'s format, each decoded into a JSON event; a
    /// record that cannot be decoded is handled as `on_undecodable` says.
    pub fn decoding(mut self, decoder: RecordDecoder, on_undecodable: BadTimestamps) -> Self {
        self.decoding = Some(Decoding { decoder, on_undecodable, json: Vec::new() });
        self
    }

    /// Handle lines without a usable timestamp as `policy` says.
    pub fn with_bad_timestamps(mut self, policy: BadTimestamps) -> Self {
        self.bad_timestamps = policy;
        self
    }

    fn bad(&self, message: impl Into<String>) -> ConnectorError {
        bad_record(&self.path, self.line_number, message)
    }

    fn timestamp(&self, line: &[u8]) -> Result<i64, ConnectorError> {
        let Some(field) = &self.timestamp_field else {
            serde_json::from_slice::<serde::de::IgnoredAny>(line)
                .map_err(|e| self.bad(format!("not JSON: {e}")))?;
            return Ok(0);
        };
        json_timestamp(line, field).map_err(|message| self.bad(message))
    }
}

impl FileSource {
    /// Read the next line into `self.line`: its length in the file, 0 at
    /// the end.
    fn read_line(&mut self) -> Result<usize, ConnectorError> {
        self.line.clear();
        self.reader.read_until(b'\n', &mut self.line).map_err(|source| self.io_error(source))
    }

    /// Read the next length-delimited record into `self.line`: its length
    /// in the file with its prefix, 0 at the end.
    fn read_record(&mut self) -> Result<usize, ConnectorError> {
        let mut length = 0u64;
        let mut prefix = 0;
        loop {
            let mut byte = [0u8];
            match self.reader.read(&mut byte).map_err(|source| self.io_error(source))? {
                0 if prefix == 0 => return Ok(0),
                0 => return Err(self.truncated("its length")),
                _ => {}
            }
            length |= u64::from(byte[0] & 0x7f) << (7 * prefix);
            prefix += 1;
            if byte[0] & 0x80 == 0 {
                break;
            }
            if prefix == 10 {
                return Err(self.bad("a record length longer than a varint (is this a file of length-delimited records?)"));
            }
        }
        if length > MAX_RECORD_BYTES {
            return Err(self.bad(format!(
                "a record of {length} bytes, more than the {MAX_RECORD_BYTES} a record may have (is this a file of length-delimited records?)"
            )));
        }
        self.line.resize(length as usize, 0);
        let mut line = std::mem::take(&mut self.line);
        let read = self.reader.read_exact(&mut line);
        self.line = line;
        match read {
            Ok(()) => Ok(prefix + length as usize),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(self.truncated(&format!("its {length} bytes")))
            }
            Err(source) => Err(self.io_error(source)),
        }
    }

    fn io_error(&self, source: std::io::Error) -> ConnectorError {
        ConnectorError::Io { what: format!("reading {}", self.path.display()), source }
    }

    fn truncated(&self, what: &str) -> ConnectorError {
        let at = self.bytes_read;
        ConnectorError::BadRecord {
            location: format!("{}:{}", self.path.display(), self.line_number + 1),
            message: format!("the file ends inside the record at byte {at}, before {what}: a file cut short or still being written, or not one of length-delimited records"),
        }
    }
}

impl Source for FileSource {
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        let mut added = 0;
        while added < max {
            let read =
                if self.decoding.is_some() { self.read_record()? } else { self.read_line()? };
            if read == 0 {
                return Ok(Polled::single(false));
            }
            self.bytes_read += read as u64;
            self.line_number += 1;
            let line =
                if self.decoding.is_some() { &self.line[..] } else { self.line.trim_ascii() };
            if line.is_empty() && self.decoding.is_none() {
                continue;
            }
            let event = |value: &[u8], timestamp| Event {
                key: None,
                value: value.to_vec(),
                timestamp,
                headers: Vec::new(),
            };
            let (value, stamped) = match &mut self.decoding {
                Some(decoding) => {
                    decoding.json.clear();
                    if let Err(reason) = decoding.decoder.decode(line, &mut decoding.json) {
                        match &decoding.on_undecodable {
                            BadTimestamps::Fail => {
                                return Err(bad_record(&self.path, self.line_number, reason))
                            }
                            BadTimestamps::Drop => self.dropped += 1,
                            BadTimestamps::SideOutput(name) => {
                                self.rejected.push((name.clone(), event(line, i64::MIN)));
                            }
                        }
                        continue;
                    }
                    let json = &decoding.json[..];
                    let stamped = match &self.timestamp_field {
                        Some(field) => json_timestamp(json, field)
                            .map_err(|m| bad_record(&self.path, self.line_number, m)),
                        None => Ok(0),
                    };
                    (json, stamped)
                }
                None => (line, self.timestamp(line)),
            };
            match (stamped, &self.bad_timestamps) {
                (Ok(timestamp), _) => {
                    out.push(event(value, timestamp));
                    added += 1;
                }
                (Err(error), BadTimestamps::Fail) => return Err(error),
                (Err(_), _) if self.timestamp_field.is_none() => return Err(self.bad("not JSON")),
                (Err(_), BadTimestamps::Drop) => self.dropped += 1,
                (Err(_), BadTimestamps::SideOutput(name)) => {
                    let name = name.clone();
                    self.rejected.push((name, event(value, i64::MIN)));
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

    fn position(&self) -> serde_json::Value {
        encode(&FilePosition {
            offset: self.bytes_read,
            line: self.line_number,
            dropped: self.dropped,
        })
    }

    fn seek(&mut self, position: &serde_json::Value) -> Result<(), ConnectorError> {
        let name = format!("file source {}", self.path.display());
        let FilePosition { offset, line, dropped } = decode(|| name.clone(), position)?;
        let misfit = |message: String| ConnectorError::Restore { what: name.clone(), message };
        let io = |source| ConnectorError::Io {
            what: format!("seeking in {}", self.path.display()),
            source,
        };
        let size = self.reader.get_ref().metadata().map_err(io)?.len();
        if offset > size {
            return Err(misfit(format!(
                "offset {offset} is beyond the end of the file ({size} bytes)"
            )));
        }
        // Each line (record) read takes at least one byte, and all but the
        // last line of the file end with a newline.
        if line > offset {
            return Err(misfit(format!("{line} lines cannot end at byte {offset}")));
        }
        if offset > 0 && offset < size && self.decoding.is_none() {
            let mut before = [0u8];
            self.reader
                .seek(SeekFrom::Start(offset - 1))
                .and_then(|_| self.reader.read_exact(&mut before))
                .map_err(io)?;
            if before[0] != b'\n' {
                return Err(misfit(format!("offset {offset} is not at the start of a line")));
            }
        }
        self.reader.seek(SeekFrom::Start(offset)).map_err(io)?;
        self.bytes_read = offset;
        self.line_number = line;
        self.dropped = dropped;
        self.size = size;
        self.rejected.clear();
        Ok(())
    }
}

/// Record `number` of the file at `path` is malformed.
fn bad_record(path: &Path, number: u64, message: impl Into<String>) -> ConnectorError {
    ConnectorError::BadRecord {
        location: format!("{}:{number}", path.display()),
        message: message.into(),
    }
}

/// Where a [`FileSource`] stands.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePosition {
    /// Byte offset of the next unread line.
    offset: u64,
    /// Lines consumed so far (blank and rejected ones too), so errors keep
    /// naming the right line.
    line: u64,
    /// Records dropped so far for a bad timestamp.
    dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str, field: Option<&str>) -> Result<Vec<Event>, ConnectorError> {
        Ok(read_with(text, field, BadTimestamps::Fail)?.0)
    }

    /// Events read, events set aside, and the count dropped.
    type ReadAll = (Vec<Event>, Vec<(String, Event)>, u64);

    fn read_with(
        text: &str,
        field: Option<&str>,
        policy: BadTimestamps,
    ) -> Result<ReadAll, ConnectorError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut source =
            FileSource::open(&path, field.map(String::from))?.with_bad_timestamps(policy);
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
        let (events, rejected, dropped) =
            read_with(text, Some("t"), BadTimestamps::SideOutput("bad".into())).unwrap();
        assert_eq!((events.len(), rejected.len(), dropped), (2, 3, 0));
        assert!(rejected.iter().all(|(name, e)| name == "bad" && e.timestamp == i64::MIN));
        assert_eq!(rejected[0].1.value, b"{\"x\":1}");
    }

    #[test]
    fn reads_lines_in_batches_with_timestamps() {
        let events = read_all(
            "{\"t\":\"2026-01-15T10:00:05Z\"}\n\n{\"t\":1000}\n{\"t\":\"2026-01-15T10:00:05.5Z\"}",
            Some("t"),
        )
        .unwrap();
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

    /// What a reader sees: each event's value, timestamp and side output.
    type Seen = Vec<(Vec<u8>, i64, Option<String>)>;

    /// Read `source` to the end in batches of `max`, with the side outputs
    /// taken after every batch as the runner does.
    fn drain(source: &mut FileSource, max: usize) -> Result<Seen, ConnectorError> {
        let mut seen = Vec::new();
        loop {
            let mut out = Vec::new();
            let polled = source.next_batch(max, &mut out)?;
            seen.extend(out.into_iter().map(|e| (e.value, e.timestamp, None)));
            seen.extend(
                source
                    .take_rejected()
                    .into_iter()
                    .map(|(name, e)| (e.value, e.timestamp, Some(name))),
            );
            if !polled.more {
                return Ok(seen);
            }
        }
    }

    #[test]
    fn seeking_to_a_position_resumes_right_after_the_last_batch() {
        let text = "{\"t\":1}\n\n{\"t\":2}\n{\"x\":0}\n   \n{\"t\":3}\n{\"t\":\"later\"}\n{\"t\":4}\n\n{\"t\":5}";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, text).unwrap();
        for policy in [BadTimestamps::Drop, BadTimestamps::SideOutput("bad".into())] {
            let open = || {
                FileSource::open(&path, Some("t".into()))
                    .unwrap()
                    .with_bad_timestamps(policy.clone())
            };
            let whole = drain(&mut open(), 1).unwrap();
            // Stop after every possible number of batches, of 1 and of 2.
            for max in [1, 2] {
                for stop in 0..6 {
                    let mut source = open();
                    let mut head = Vec::new();
                    for _ in 0..stop {
                        let mut out = Vec::new();
                        source.next_batch(max, &mut out).unwrap();
                        head.extend(out.into_iter().map(|e| (e.value, e.timestamp, None)));
                        head.extend(
                            source
                                .take_rejected()
                                .into_iter()
                                .map(|(n, e)| (e.value, e.timestamp, Some(n))),
                        );
                    }
                    let position = source.position();
                    let dropped_at = source.dropped();
                    let rest = drain(&mut source, max).unwrap();
                    let dropped = source.dropped();

                    let mut resumed = open();
                    resumed.seek(&position).unwrap();
                    assert_eq!(resumed.dropped(), dropped_at);
                    assert_eq!(
                        drain(&mut resumed, max).unwrap(),
                        rest,
                        "{policy:?} max {max} stop {stop} at {position}"
                    );
                    assert_eq!(resumed.dropped(), dropped);
                    assert_eq!(resumed.progress(), Some((text.len() as u64, text.len() as u64)));
                    let mut both = head;
                    both.extend(rest);
                    let mut expected = whole.clone();
                    // Batches of 2 may put a rejected line before an event of its batch.
                    both.sort();
                    expected.sort();
                    assert_eq!(both, expected);
                }
            }
        }
        // Mid-file, after a blank line and a dropped one: the position says
        // where the next line starts and how many lines and drops came before.
        let mut source = FileSource::open(&path, Some("t".into()))
            .unwrap()
            .with_bad_timestamps(BadTimestamps::Drop);
        source.next_batch(2, &mut Vec::new()).unwrap();
        assert_eq!(source.position(), serde_json::json!({"offset": 17, "line": 3, "dropped": 0}));
        source.next_batch(1, &mut Vec::new()).unwrap();
        assert_eq!(source.position(), serde_json::json!({"offset": 37, "line": 6, "dropped": 1}));
    }

    #[test]
    fn errors_after_a_seek_name_the_right_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, "{\"t\":1}\n\n{\"t\":2}\n{\"t\":3}\nbroken\n").unwrap();
        let mut source = FileSource::open(&path, Some("t".into())).unwrap();
        source.next_batch(2, &mut Vec::new()).unwrap();
        let position = source.position();
        let mut resumed = FileSource::open(&path, Some("t".into())).unwrap();
        resumed.seek(&position).unwrap();
        let err = drain(&mut resumed, 10).unwrap_err().to_string();
        assert!(err.contains("in.jsonl:5:"), "{err}");
    }

    #[test]
    fn positions_that_do_not_fit_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, "{}\n{}\n").unwrap();
        let mut source = FileSource::open(&path, None).unwrap();
        let cases = [
            (
                serde_json::json!({"offset": 7, "line": 2, "dropped": 0}),
                "beyond the end of the file (6 bytes)",
            ),
            (
                serde_json::json!({"offset": 1, "line": 1, "dropped": 0}),
                "not at the start of a line",
            ),
            (
                serde_json::json!({"offset": 3, "line": 4, "dropped": 0}),
                "4 lines cannot end at byte 3",
            ),
            (serde_json::json!({"offset": 3}), "malformed"),
            (serde_json::json!({"produced": 3}), "malformed"),
            (serde_json::json!("3"), "malformed"),
        ];
        for (position, expected) in cases {
            let err = source.seek(&position).unwrap_err().to_string();
            assert!(
                err.contains("file source")
                    && err.contains("in.jsonl: cannot restore")
                    && err.contains(expected),
                "{err}"
            );
        }
        // The end of the file is a fine position: nothing more to read.
        source.seek(&serde_json::json!({"offset": 6, "line": 2, "dropped": 0})).unwrap();
        assert!(drain(&mut source, 5).unwrap().is_empty());
    }
}
