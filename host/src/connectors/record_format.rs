//! The record-format settings the Kafka and file connectors share:
//! `format` with its `schema_registry` (checked together), an Avro
//! `reader_schema`, and what a registry touches on the host. The formats
//! themselves are [`crate::formats`]'.

use crate::formats::{Format, SchemaRegistryConfig};

use super::config::{Access, ConfigError};

/// A registry `format` has a valid `schema_registry`; another has none.
pub(crate) fn check_format(
    format: Format,
    registry: Option<&SchemaRegistryConfig>,
) -> Result<(), ConfigError> {
    match (format.uses_registry(), registry) {
        (true, None) => Err(ConfigError::new(
            "schema_registry",
            format!("format {} needs `schema_registry: {{ url: … }}`", format.name()),
        )),
        (true, Some(registry)) => {
            registry.validate().map_err(|message| ConfigError::new("schema_registry", message))
        }
        (false, Some(_)) => Err(ConfigError::new(
            "schema_registry",
            format!("format {} reads no schemas: give format avro, protobuf or json-schema, or remove schema_registry", format.name()),
        )),
        (false, None) => Ok(()),
    }
}

/// A `reader_schema` is given only to an Avro source, and is Avro.
pub(crate) fn check_reader_schema(
    format: Format,
    reader_schema: Option<&str>,
) -> Result<(), ConfigError> {
    let Some(schema) = reader_schema else {
        return Ok(());
    };
    if format != Format::Avro {
        return Err(ConfigError::new("reader_schema", "only an `avro` source has a reader schema"));
    }
    apache_avro::Schema::parse_str(schema)
        .map(|_| ())
        .map_err(|e| ConfigError::new("reader_schema", format!("not an Avro schema: {e}")))
}

/// What a connector's schema registry touches on the host: its URL and
/// the certificate files its client reads.
pub(crate) fn registry_access(registry: Option<&SchemaRegistryConfig>) -> Vec<Access> {
    let Some(registry) = registry else {
        return Vec::new();
    };
    let mut accesses = vec![Access::SchemaRegistry {
        field: "schema_registry.url".into(),
        url: registry.url.clone(),
    }];
    accesses.extend(registry.files().map(|(name, path)| Access::Read {
        field: format!("schema_registry.properties.{name}"),
        path: path.into(),
    }));
    accesses
}
