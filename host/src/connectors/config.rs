//! What every connector's configuration implements: [`SourceConfig`] or
//! [`SinkConfig`] (check, resolve paths, say what it touches on the host,
//! open), with the [`Access`] it needs, the [`SinkMode`] it opens in and
//! [`ConfigError`], a setting at fault. Below every connector and the
//! registry, so a connector never imports the table that lists it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::transactional::TransactionalSink;
use super::{ConnectorError, Sink, Source};

/// A source's settings, as the spec gives them.
pub trait SourceConfig {
    /// Check what the types cannot; the error names the field at fault.
    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    /// The side outputs the source sends events to, each with the field
    /// naming it (the spec checks they are declared).
    fn side_outputs(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    /// Make relative file paths relative to `base` (the spec's directory).
    fn resolve_paths(&mut self, base: &Path) {
        let _ = base;
    }

    /// What the source touches on the host (files, brokers, client
    /// properties), for `weir serve` to check against what it grants.
    fn host_access(&self) -> Vec<Access> {
        Vec::new()
    }

    /// Open the source of pipeline `pipeline`.
    fn open(&self, pipeline: &str) -> Result<Box<dyn Source>, ConnectorError>;

    /// Open the source as the readers that split its input, each run by a
    /// source task of its own (a Kafka source's `parallelism`), at most
    /// [`SourceConfig::max_readers`]. Default: one reader.
    fn open_readers(&self, pipeline: &str) -> Result<Vec<Box<dyn Source>>, ConnectorError> {
        Ok(vec![self.open(pipeline)?])
    }

    /// The most readers `open_readers` opens (the run sizes its function
    /// instances by it). Default: 1.
    fn max_readers(&self) -> usize {
        1
    }
}

/// A sink's settings, as the spec gives them.
pub trait SinkConfig {
    /// Check what the types cannot for a sink playing `role`; the error
    /// names the field at fault.
    fn validate(&self, role: SinkRole) -> Result<(), ConfigError> {
        let _ = role;
        Ok(())
    }

    /// Make relative file paths relative to `base` (the spec's directory).
    fn resolve_paths(&mut self, base: &Path) {
        let _ = base;
    }

    /// What the sink touches on the host (files, brokers, client
    /// properties), for `weir serve` to check against what it grants.
    fn host_access(&self) -> Vec<Access> {
        Vec::new()
    }

    /// Whether the sink sends each record by its key for the stage it
    /// feeds (a cluster exchange): its node then takes that stage's `key`.
    fn takes_keys(&self) -> bool {
        false
    }

    /// Open the sink, making output visible as `mode` says.
    fn open(&self, mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError>;

    /// The exactly-once contract of this sink, when it is configured to
    /// commit its output in transactions tied to checkpoints.
    fn transactional(&self) -> Option<&dyn TransactionalSink> {
        None
    }
}

/// Something a connector touches on the host. `field` names the setting
/// relative to the connector's section (`path`, `paths[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Reads the file (or directory) at `path`.
    Read {
        /// The setting.
        field: String,
        /// The path, resolved.
        path: PathBuf,
    },
    /// Creates, truncates or writes the file at `path` (and files beside it).
    Write {
        /// The setting.
        field: String,
        /// The path, resolved.
        path: PathBuf,
    },
    /// Connects to the Kafka brokers `servers` (`host:port,…`).
    KafkaBrokers {
        /// The setting.
        field: String,
        /// As the spec gives them.
        servers: String,
    },
    /// Passes librdkafka `properties` to its clients.
    KafkaProperties {
        /// The setting (`properties`).
        field: String,
        /// The properties, by name.
        properties: BTreeMap<String, String>,
    },
    /// Calls the schema registry at `url`.
    SchemaRegistry {
        /// The setting (`schema_registry.url`).
        field: String,
        /// The registry's base URL, as the spec gives it.
        url: String,
    },
}

/// What a sink is for in its pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkRole {
    /// The pipeline's `sink`.
    Main,
    /// One of its `side_outputs`.
    SideOutput,
}

/// How a sink makes output visible.
#[derive(Debug, Clone)]
pub enum SinkMode {
    /// As it is written (no checkpointing).
    Direct,
    /// When the checkpoint covering it completes; recovering the pending
    /// output recorded in the snapshot's state, if restoring.
    ExactlyOnce(Option<serde_json::Value>),
}

/// A connector setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The field, relative to the connector's section (`path`, `topics`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    /// `field` is wrong because `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// Make `path` relative to `base` if it is relative.
pub(crate) fn resolve(path: &mut PathBuf, base: &Path) {
    if path.is_relative() {
        *path = base.join(&*path);
    }
}

/// A deserialization error inside a connector's section starts with this,
/// then the field's path within the section and `: `, so the spec can name
/// the whole path (`sink.transaction_timeout`).
pub(crate) const NESTED_FIELD: char = '.';
