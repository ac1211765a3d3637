//! The connector registry: one line per connector ties its `type:` name in
//! a spec to its config type. A config type derives `Deserialize` and
//! implements [`SourceConfig`] or [`SinkConfig`] (in `config`: check,
//! resolve paths, say what it touches on the host, open); the spec embeds it as
//! [`SourceSpec`] / [`SinkSpec`]. Adding a connector is its module plus one
//! line below.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use super::config::NESTED_FIELD;
use super::config::{SinkConfig, SinkMode, SourceConfig};
use super::{ConnectorError, Sink, Source};

/// The spec enum of one kind of connector: a variant per `type:` name,
/// deserialized from a section tagged with `type:`, and its config as a
/// trait object.
macro_rules! connectors {
    ($(#[$doc:meta])* $Spec:ident: $Trait:ident {
        $($name:literal => $Variant:ident($Config:ty),)*
    }) => {
        $(#[$doc])*
        // A spec is parsed once and kept: the Kafka configs' size (every
        // setting inline) costs nothing per event.
        #[allow(clippy::large_enum_variant)]
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
