//! The file connector: JSON lines in ([`FileSource`]) and out
//! ([`FileSink`], exactly-once through the pending part files of `parts`),
//! and their settings (`type: file`).

mod parts;
mod sink;
mod source;

pub use sink::FileSink;
pub use source::FileSource;

use std::path::PathBuf;

use serde::Deserialize;

use super::config::{resolve, Access, ConfigError, SinkConfig, SinkMode, SourceConfig};
use super::timestamp::BadTimestamps;
use super::{ConnectorError, Sink, Source, SplitSource};

/// `source: { type: file, … }`: a file of JSON lines; each line is one
/// event's value.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSourceConfig {
    /// The file to read.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Several files instead of `path`, each a split with its own
    /// watermark, read round-robin.
    #[serde(default)]
    pub paths: Vec<PathBuf>,
    /// Field of each JSON object that holds the event time, as RFC 3339
    /// text (`2026-01-15T10:00:05Z`) or integer milliseconds since the
    /// epoch. Without it, events carry timestamp 0.
    #[serde(default)]
    pub timestamp_field: Option<String>,
    /// A line without a usable timestamp: `fail` (default), `drop`
    /// (counted) or `{ side-output: name }`.
    #[serde(default)]
    pub on_bad_timestamp: BadTimestamps,
}

impl SourceConfig for FileSourceConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.path.is_some() != self.paths.is_empty() {
            return Err(ConfigError::new("path", "give either `path` or a non-empty `paths`"));
        }
        Ok(())
    }

    fn side_outputs(&self) -> Vec<(&'static str, &str)> {
        match &self.on_bad_timestamp {
            BadTimestamps::SideOutput(name) => vec![("on_bad_timestamp", name.as_str())],
            _ => Vec::new(),
        }
    }

    fn resolve_paths(&mut self, base: &std::path::Path) {
        self.path.iter_mut().chain(self.paths.iter_mut()).for_each(|path| resolve(path, base));
    }

    fn host_access(&self) -> Vec<Access> {
        let one = self.path.iter().map(|path| ("path".to_string(), path));
        let many = self.paths.iter().enumerate().map(|(i, path)| (format!("paths[{i}]"), path));
        one.chain(many).map(|(field, path)| Access::Read { field, path: path.clone() }).collect()
    }

    fn open(&self, _pipeline: &str) -> Result<Box<dyn Source>, ConnectorError> {
        let open = |path: &PathBuf| -> Result<Box<dyn Source>, ConnectorError> {
            Ok(Box::new(
                FileSource::open(path, self.timestamp_field.clone())?
                    .with_bad_timestamps(self.on_bad_timestamp.clone()),
            ))
        };
        Ok(match &self.path {
            Some(path) => open(path)?,
            None => {
                Box::new(SplitSource::new(self.paths.iter().map(open).collect::<Result<_, _>>()?))
            }
        })
    }
}

/// `sink: { type: file, path: … }`: a file of JSON lines (one event value
/// per line), replaced each run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkConfig {
    /// The file to write.
    pub path: PathBuf,
}

impl SinkConfig for FileSinkConfig {
    fn resolve_paths(&mut self, base: &std::path::Path) {
        resolve(&mut self.path, base);
    }

    fn host_access(&self) -> Vec<Access> {
        vec![Access::Write { field: "path".into(), path: self.path.clone() }]
    }

    fn open(&self, mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError> {
        Ok(match mode {
            SinkMode::Direct => Box::new(FileSink::create(&self.path)?),
            SinkMode::ExactlyOnce(state) => {
                Box::new(FileSink::exactly_once(&self.path, state.as_ref())?)
            }
        })
    }
}
