//! The connector registry: one line per connector ties its `type:` name in
//! a spec to its config type. A config type derives `Deserialize` and
//! implements [`SourceConfig`] or [`SinkConfig`] (check, resolve paths,
//! say what it touches on the host, open); the spec embeds it as
//! [`SourceSpec`] / [`SinkSpec`]. Adding a connector is its module plus one
//! line below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use super::{ConnectorError, Sink, Source};

/// The spec enum of one kind of connector: a variant per `type:` name,
/// deserialized from a section tagged with `type:`, and its config as a
/// trait object.
macro_rules! connectors {
    ($(#[$doc:meta])* $Spec:ident: $Trait:ident {
        $($name:literal => $Variant:ident($Config:ty),)*
    }) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub enum $Spec {
            $(
                #[doc = concat!("`type: ", $name, "`.")]
                $Variant($Config),
            )*
        }

        impl $Spec {
            /// The `type:` names.
            pub const TYPES: &'static [&'static str] = &[$($name),*];

            /// Its settings.
            pub fn config(&self) -> &dyn $Trait {
                match self {
                    $(Self::$Variant(config) => config,)*
                }
            }

            /// Its settings, to change (resolve paths).
            pub fn config_mut(&mut self) -> &mut dyn $Trait {
                match self {
                    $(Self::$Variant(config) => config,)*
                }
            }
        }

        impl<'de> Deserialize<'de> for $Spec {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let (name, rest) = tagged(deserializer)?;
                match name.as_str() {
                    $($name => untagged(rest).map(Self::$Variant),)*
                    other => Err(<D::Error as serde::de::Error>::unknown_variant(other, Self::TYPES)),
                }
            }
        }
    };
}

connectors! {
    /// Where events come from: a spec's `source:`.
    SourceSpec: SourceConfig {
        "file" => File(super::file::FileSourceConfig),
        "kafka" => Kafka(super::kafka::KafkaSourceConfig),
        "generator" => Generator(super::generator::GeneratorConfig),
    }
}

connectors! {
    /// Where output goes: a spec's `sink:` and each of its `side_outputs`.
    SinkSpec: SinkConfig {
        "file" => File(super::file::FileSinkConfig),
        "stdout" => Stdout(super::stdout::StdoutConfig),
        "discard" => Discard(super::discard::DiscardConfig),
        "kafka" => Kafka(super::kafka::KafkaSinkConfig),
    }
}

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

/// Open the source `spec` describes, for pipeline `pipeline`: the readers
/// that split its input (one, unless the source is read in parallel).
pub fn open_source(
    spec: &SourceSpec,
    pipeline: &str,
) -> Result<Vec<Box<dyn Source>>, ConnectorError> {
    spec.config().open_readers(pipeline)
}

/// Open the sink `spec` describes, making output visible as `mode` says.
pub fn open_sink(spec: &SinkSpec, mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError> {
    spec.config().open(mode)
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

/// Read a connector section: its `type:` name and the rest (kept as JSON
/// values, which read enums written as `{ variant: value }` like the spec).
fn tagged<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(String, serde_json::Value), D::Error> {
    use serde::de::Error;
    let mut section = serde_json::Map::deserialize(deserializer)?;
    match section.remove("type") {
        Some(serde_json::Value::String(name)) => Ok((name, serde_json::Value::Object(section))),
        Some(_) => Err(D::Error::custom("`type` must be a connector name")),
        None => Err(D::Error::missing_field("type")),
    }
}

/// A connector's config from the rest of its section, errors naming the
/// field within it.
fn untagged<T: DeserializeOwned, E: serde::de::Error>(rest: serde_json::Value) -> Result<T, E> {
    serde_path_to_error::deserialize(rest).map_err(|e| {
        let path = e.path().to_string();
        match path.as_str() {
            "." => E::custom(e.into_inner()),
            _ => E::custom(format_args!("{NESTED_FIELD}{path}: {}", e.into_inner())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(text: &str) -> Result<SinkSpec, String> {
        serde_yaml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn sections_are_read_by_their_type() {
        assert!(matches!(sink("{ type: discard }").unwrap(), SinkSpec::Discard(_)));
        assert!(matches!(sink("{ type: stdout }").unwrap(), SinkSpec::Stdout(_)));
        let err = sink("{ type: pigeon }").unwrap_err();
        assert!(err.contains("pigeon") && err.contains("kafka"), "{err}");
        assert!(sink("{ path: out.jsonl }").unwrap_err().contains("type"));
        let err =
            sink("{ type: kafka, bootstrap_servers: b, topic: t, transaction_timeout: soon }")
                .unwrap_err();
        assert!(err.starts_with(".transaction_timeout: "), "{err}");
        let SinkSpec::Kafka(kafka) =
            sink("{ type: kafka, bootstrap_servers: b, topic: t }").unwrap()
        else {
            panic!("not kafka")
        };
        assert_eq!(kafka.transaction_timeout, std::time::Duration::from_secs(900));
    }
}
