//! The file connector: JSON lines (or length-delimited records of a
//! registry format) in ([`FileSource`]), JSON lines out ([`FileSink`],
//! exactly-once through the pending part files of `parts`), and their
//! settings (`type: file`).

mod parts;
mod sink;
mod source;

pub use sink::FileSink;
pub use source::FileSource;

use std::path::PathBuf;

use serde::Deserialize;

use super::config::{resolve, Access, ConfigError, SinkConfig, SinkMode, SourceConfig};
use super::record_format::{check_format, check_reader_schema, registry_access};
use super::timestamp::BadTimestamps;
use super::{ConnectorError, Sink, Source, SplitSource};
use crate::formats::{Format, RecordDecoder, SchemaRegistryConfig};

/// `source: { type: file, … }`: a file of JSON lines, each line one
/// event's value; or of length-delimited records in a registry `format`,
/// each decoded into one JSON event.
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
    /// What the file holds: `json` lines (default), or `avro`, `protobuf`
    /// or `json-schema` records, each an unsigned varint length then the
    /// record in the schema registry's wire format (as Protobuf's
    /// `writeDelimitedTo` frames messages), decoded into JSON events with
    /// their schemas read from `schema_registry` by id.
    #[serde(default)]
    pub format: Format,
    /// The schema registry of a registry `format`.
    #[serde(default)]
    pub schema_registry: Option<SchemaRegistryConfig>,
    /// Avro: the reader schema every record is resolved to.
    #[serde(default)]
    pub reader_schema: Option<String>,
    /// A record that cannot be decoded in `format`: `fail` (default; the
    /// error names the file, the record's number and the schema id),
    /// `drop` (counted) or `{ side-output: name }` (the record's bytes).
    #[serde(default)]
    pub on_undecodable: BadTimestamps,
}

impl SourceConfig for FileSourceConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.path.is_some() != self.paths.is_empty() {
            return Err(ConfigError::new("path", "give either `path` or a non-empty `paths`"));
        }
        if self.format == Format::Raw {
            return Err(ConfigError::new(
                "format",
                "a file source reads json lines or avro, protobuf or json-schema records; raw bytes have no record boundaries in a file",
            ));
        }
        if !self.format.uses_registry() && self.on_undecodable != BadTimestamps::Fail {
            return Err(ConfigError::new(
                "on_undecodable",
                "only a registry format (avro, protobuf, json-schema) decodes records; JSON lines follow on_bad_timestamp",
            ));
        }
        check_format(self.format, self.schema_registry.as_ref())?;
        check_reader_schema(self.format, self.reader_schema.as_deref())
    }

    fn side_outputs(&self) -> Vec<(&'static str, &str)> {
        [("on_bad_timestamp", &self.on_bad_timestamp), ("on_undecodable", &self.on_undecodable)]
            .into_iter()
            .filter_map(|(option, policy)| match policy {
                BadTimestamps::SideOutput(name) => Some((option, name.as_str())),
                _ => None,
            })
            .collect()
    }

    fn resolve_paths(&mut self, base: &std::path::Path) {
        self.path.iter_mut().chain(self.paths.iter_mut()).for_each(|path| resolve(path, base));
    }

    fn host_access(&self) -> Vec<Access> {
        let one = self.path.iter().map(|path| ("path".to_string(), path));
        let many = self.paths.iter().enumerate().map(|(i, path)| (format!("paths[{i}]"), path));
        let files = one.chain(many).map(|(field, path)| Access::Read { field, path: path.clone() });
        files.chain(registry_access(self.schema_registry.as_ref())).collect()
    }

    fn open(&self, _pipeline: &str) -> Result<Box<dyn Source>, ConnectorError> {
        let open = |path: &PathBuf| -> Result<Box<dyn Source>, ConnectorError> {
            let source = FileSource::open(path, self.timestamp_field.clone())?
                .with_bad_timestamps(self.on_bad_timestamp.clone());
            let decoder = RecordDecoder::new(
                self.format,
                self.schema_registry.as_ref(),
                self.reader_schema.as_deref(),
            )
            .map_err(|message| ConnectorError::Config { what: "format".into(), message })?;
            Ok(Box::new(match decoder {
                Some(decoder) => source.decoding(decoder, self.on_undecodable.clone()),
                None => source,
            }))
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
