//! Record formats of the Kafka connectors: what a record's value is on
//! the wire, and the schema registry that holds the schemas of the
//! registry formats.
//!
//! Inside a pipeline every event is JSON text, whatever its topic holds:
//! a source decodes a registry-format record into JSON once, as it reads
//! it ([`RecordDecoder`]), so functions in every language, `timestamp_field`,
//! the console's tail and the state lookups read the same thing; a sink
//! encodes each output event's JSON against its subject's schema
//! ([`RecordEncoder`]). The registry formats use Confluent's wire format:
//! a zero byte, the schema's id (4 bytes, big-endian), for Protobuf the
//! message's indexes, then the encoded value. The registry protocol and the
//! formats are maintained crates' (`schema_registry_converter`,
//! `apache-avro`, `prost-reflect` with `protox`, `jsonschema`); this module
//! only ties them to the connectors and turns their values into JSON.
//!
//! * [`Format`] — `format:` of a connector;
//! * [`SchemaRegistryConfig`] — `schema_registry:`, the registry's URL and
//!   credentials (in `properties:`, so a shown spec hides them);
//! * [`avro`], [`protobuf`], [`json_schema`] — each format's decoding to
//!   JSON and encoding from it;
//! * [`types`] — the types of a schema's JSON events in Rust, Python and
//!   TypeScript (`weir schema types`).

pub mod avro;
pub mod json_schema;
pub mod protobuf;
pub mod types;

use std::collections::BTreeMap;
use std::time::Duration;

use schema_registry_converter::blocking::schema_registry::{self, SrSettings};
use schema_registry_converter::error::SRCError;
use schema_registry_converter::schema_registry_common::{
    RegisteredSchema, SchemaType, SubjectNameStrategy, SuppliedSchema,
};
use serde::Deserialize;

/// How a record's value is written on the wire (`format:` of a Kafka
/// source or sink).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// JSON text, passed on as it is (the default).
    #[default]
    Json,
    /// Bytes passed on as they are.
    Raw,
    /// Avro in Confluent's wire format, its schema in the registry.
    Avro,
    /// Protobuf in Confluent's wire format, its schema in the registry.
    Protobuf,
    /// JSON validated by a JSON Schema in the registry, in Confluent's wire
    /// format.
    JsonSchema,
}

impl Format {
    /// Whether records carry a schema id and need `schema_registry`.
    pub fn uses_registry(self) -> bool {
        matches!(self, Format::Avro | Format::Protobuf | Format::JsonSchema)
    }

    /// The name a spec gives it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Raw => "raw",
            Format::Avro => "avro",
            Format::Protobuf => "protobuf",
            Format::JsonSchema => "json-schema",
        }
    }

    fn schema_type(self) -> SchemaType {
        match self {
            Format::Protobuf => SchemaType::Protobuf,
            Format::JsonSchema => SchemaType::Json,
            _ => SchemaType::Avro,
        }
    }
}

/// `schema_registry:` of a connector: a Confluent-compatible schema
/// registry (Confluent's, Apicurio's `/apis/ccompat/v7`, Redpanda's, …).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    /// The registry's base URL (`http://host:8081`, or Apicurio's
    /// `http://host:8080/apis/ccompat/v7`).
    pub url: String,
    /// The client's settings, named as Confluent's clients name them:
    /// `basic.auth.user.info` (`user:password`), `bearer.auth.token`,
    /// `request.timeout.ms` (default 10000). Shown specs hide the
    /// credentials, as every `properties:` map's.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// The registry client settings this module understands.
const REGISTRY_PROPERTIES: &[&str] = &[
    "basic.auth.user.info",
    "bearer.auth.token",
    "request.timeout.ms",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
];

/// The registry client settings that name files the client reads.
const FILE_PROPERTIES: &[&str] =
    &["ssl.ca.location", "ssl.certificate.location", "ssl.key.location"];

/// How long one registry call may take unless `request.timeout.ms` says.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl SchemaRegistryConfig {
    /// Check the URL and the properties without calling the registry.
    pub fn validate(&self) -> Result<(), String> {
        let url = url::Url::parse(&self.url)
            .map_err(|e| format!("url {:?} is not a URL: {e}", self.url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("url {:?}: give an http:// or https:// URL", self.url));
        }
        for name in self.properties.keys() {
            if !REGISTRY_PROPERTIES.contains(&name.as_str()) {
                return Err(format!(
                    "properties: {name:?} is not a registry client setting ({})",
                    REGISTRY_PROPERTIES.join(", ")
                ));
            }
        }
        if self.properties.contains_key("basic.auth.user.info")
            && self.properties.contains_key("bearer.auth.token")
        {
            return Err(
                "properties: give basic.auth.user.info or bearer.auth.token, not both".into()
            );
        }
        if self.properties.contains_key("ssl.certificate.location")
            != self.properties.contains_key("ssl.key.location")
        {
            return Err("properties: a client certificate needs both ssl.certificate.location and ssl.key.location".into());
        }
        self.timeout().map(|_| ())
    }

    /// The files the client reads: `(property, path)`.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        FILE_PROPERTIES
            .iter()
            .filter_map(|name| self.properties.get(*name).map(|path| (*name, path.as_str())))
    }

    /// The HTTP client: no redirects (a registry answers where it is
    /// asked, and a redirect must not lead a served pipeline to a host it
    /// was not granted), the certificates the properties name.
    fn http_client(&self) -> Result<reqwest::blocking::ClientBuilder, String> {
        let read = |name: &str| -> Result<Option<Vec<u8>>, String> {
            self.properties
                .get(name)
                .map(|path| {
                    std::fs::read(path).map_err(|e| format!("properties: {name} {path:?}: {e}"))
                })
                .transpose()
        };
        let mut builder =
            reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = read("ssl.ca.location")? {
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("properties: ssl.ca.location: not PEM certificates: {e}"))?;
            if certificates.is_empty() {
                return Err("properties: ssl.ca.location: not PEM certificates (none found)".into());
            }
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        if let (Some(certificate), Some(key)) =
            (read("ssl.certificate.location")?, read("ssl.key.location")?)
        {
            let identity = reqwest::Identity::from_pkcs8_pem(&certificate, &key).map_err(|e| {
                format!("properties: ssl.certificate.location / ssl.key.location: not a PEM certificate and PKCS#8 key: {e}")
            })?;
            builder = builder.identity(identity);
        }
        Ok(builder)
    }

    fn timeout(&self) -> Result<Duration, String> {
        match self.properties.get("request.timeout.ms") {
            None => Ok(REQUEST_TIMEOUT),
            Some(text) => match text.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                _ => Err(format!("properties: request.timeout.ms {text:?} is not a positive number of milliseconds")),
            },
        }
    }

    /// The registry client's settings.
    pub fn client(&self) -> Result<SrSettings, String> {
        self.validate()?;
        let mut builder = SrSettings::new_builder(self.url.trim_end_matches('/').to_string());
        builder.set_timeout(self.timeout()?);
        if let Some(info) = self.properties.get("basic.auth.user.info") {
            let (user, password) = match info.split_once(':') {
                Some((user, password)) => (user.to_string(), Some(password.to_string())),
                None => (info.clone(), None),
            };
            builder.set_basic_authorization(&user, password.as_deref());
        }
        if let Some(token) = self.properties.get("bearer.auth.token") {
            builder.set_token_authorization(token);
        }
        builder
            .build_with(self.http_client()?)
            .map_err(|e| format!("schema registry {}: {}", self.url, describe(&e)))
    }
}

impl SchemaRegistryConfig {
    /// The schema of `subject` at `version` (`latest` or a number) and
    /// its format, as the registry holds it.
    pub fn subject_schema(&self, subject: &str, version: &str) -> Result<(Format, String), String> {
        self.validate()?;
        let url = format!(
            "{}/subjects/{}/versions/{}",
            self.url.trim_end_matches('/'),
            url::form_urlencoded::byte_serialize(subject.as_bytes()).collect::<String>(),
            url::form_urlencoded::byte_serialize(version.as_bytes()).collect::<String>()
        );
        let client = self
            .http_client()?
            .timeout(self.timeout()?)
            .build()
            .map_err(|e| format!("schema registry {}: {e}", self.url))?;
        let mut request = client.get(&url);
        if let Some(info) = self.properties.get("basic.auth.user.info") {
            let (user, password) = info.split_once(':').unwrap_or((info, ""));
            request = request.basic_auth(user, Some(password));
        }
        if let Some(token) = self.properties.get("bearer.auth.token") {
            request = request.bearer_auth(token);
        }
        let answer = request.send().map_err(|e| format!("GET {url}: {e}"))?;
        let status = answer.status();
        let body = answer.text().map_err(|e| format!("GET {url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("GET {url}: {status}: {}", body.trim()));
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Version {
            schema: String,
            #[serde(default)]
            schema_type: Option<String>,
        }
        let version: Version = serde_json::from_str(&body)
            .map_err(|e| format!("GET {url}: not a subject version: {e}"))?;
        let format = match version.schema_type.as_deref() {
            None | Some("AVRO") => Format::Avro,
            Some("PROTOBUF") => Format::Protobuf,
            Some("JSON") => Format::JsonSchema,
            Some(other) => {
                return Err(format!("GET {url}: schema type {other:?} is not one Weir reads"))
            }
        };
        Ok((format, version.schema))
    }
}

/// A registry error in one line: what failed and the registry's reason.
pub fn describe(error: &SRCError) -> String {
    match &error.cause {
        Some(cause) => format!("{}: {cause}", error.error),
        None => error.error.clone(),
    }
}

/// The schema id of a record in Confluent's wire format, and the rest of
/// it; an error says why the record is not in that format.
pub fn framed(payload: &[u8]) -> Result<(u32, &[u8]), String> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [] => Err("an empty value (not in the schema registry's wire format)".into()),
        [magic, ..] if *magic != 0 => Err(format!(
            "not in the schema registry's wire format (first byte {magic:#04x}, not 0x00: written without a registry serializer?)"
        )),
        _ => Err(format!("too short for the schema registry's wire format ({} bytes)", payload.len())),
    }
}

/// Which subject a sink's schema is registered under (Confluent's
/// `value.subject.name.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectStrategy {
    /// `<topic>-value` (the default).
    #[default]
    TopicName,
    /// The record's full name.
    RecordName,
    /// `<topic>-<record full name>`.
    TopicRecordName,
}

/// What a sink writes: the format, the registry, and the schema to
/// register (or, without one, the subject's latest).
#[derive(Debug, Clone)]
pub struct SinkSchema<'a> {
    /// The format (a registry one).
    pub format: Format,
    /// The registry.
    pub registry: &'a SchemaRegistryConfig,
    /// The topic written.
    pub topic: &'a str,
    /// The schema's text to register under the subject; none: use the
    /// subject's latest version.
    pub schema: Option<&'a str>,
    /// The subject strategy.
    pub strategy: SubjectStrategy,
    /// The record's full name (Avro record, Protobuf message, JSON
    /// Schema title) where the strategy or the format needs one the
    /// schema does not give.
    pub record: Option<&'a str>,
}

impl SinkSchema<'_> {
    /// The subject strategy with its names filled in, the record's name
    /// (found in the schema when not given).
    fn strategy(&self) -> Result<(SubjectNameStrategy, Option<String>), String> {
        let record = match (self.record, self.schema) {
            (Some(record), _) => Some(record.to_string()),
            (None, Some(schema)) => record_name(self.format, schema)?,
            (None, None) => None,
        };
        let named = || {
            record.clone().ok_or_else(|| {
                "the record-name subject strategies need `record_name` (or a `schema` naming its record)".to_string()
            })
        };
        let topic = self.topic.to_string();
        let strategy = match (self.strategy, self.schema) {
            (SubjectStrategy::TopicName, None) => {
                SubjectNameStrategy::TopicNameStrategy(topic, false)
            }
            (SubjectStrategy::RecordName, None) => {
                SubjectNameStrategy::RecordNameStrategy(named()?)
            }
            (SubjectStrategy::TopicRecordName, None) => {
                SubjectNameStrategy::TopicRecordNameStrategy(topic, named()?)
            }
            (strategy, Some(text)) => {
                let supplied = SuppliedSchema::new(
                    record.clone(),
                    self.format.schema_type(),
                    text.to_string(),
                );
                match strategy {
                    SubjectStrategy::TopicName => {
                        SubjectNameStrategy::TopicNameStrategyWithSchema(topic, false, supplied)
                    }
                    SubjectStrategy::RecordName => {
                        named()?;
                        SubjectNameStrategy::RecordNameStrategyWithSchema(supplied)
                    }
                    SubjectStrategy::TopicRecordName => {
                        named()?;
                        SubjectNameStrategy::TopicRecordNameStrategyWithSchema(topic, supplied)
                    }
                }
            }
        };
        Ok((strategy, record))
    }

    /// Register the schema under its subject (or find the subject's
    /// latest): the registered schema, or why not — an incompatible schema
    /// is refused by the registry, and its reason is in the error.
    pub fn resolve(
        &self,
        client: &SrSettings,
    ) -> Result<(RegisteredSchema, SubjectNameStrategy, Option<String>), String> {
        let (strategy, record) = self.strategy()?;
        let subject = strategy.get_subject().map_err(|e| describe(&e))?;
        let registered = schema_registry::get_schema_by_subject(client, &strategy).map_err(|e| {
            let action = if self.schema.is_some() {
                "registering the sink's schema under subject"
            } else {
                "reading the latest schema of subject"
            };
            let hint = if e.cause.as_deref().is_some_and(|c| c.contains("409") || c.contains("ncompatib")) || e.error.contains("409") {
                " (the registry holds the subject to its compatibility rule: make the new schema compatible — add fields with defaults, remove only fields that had defaults — or change the subject's compatibility)"
            } else {
                ""
            };
            format!("{action} {subject:?} at {}: {}{hint}", self.registry.url, describe(&e))
        })?;
        Ok((registered, strategy, record))
    }
}

/// The record's full name a schema declares: an Avro record's, the first
/// Protobuf message's (package-qualified), a JSON Schema's `title`.
fn record_name(format: Format, schema: &str) -> Result<Option<String>, String> {
    match format {
        Format::Avro => avro::record_name(schema),
        Format::Protobuf => protobuf::first_message(schema).map(Some),
        Format::JsonSchema => Ok(serde_json::from_str::<serde_json::Value>(schema)
            .map_err(|e| format!("schema: not JSON: {e}"))?
            .get("title")
            .and_then(|t| t.as_str())
            .map(str::to_string)),
        Format::Json | Format::Raw => Ok(None),
    }
}

/// Turns the records a source reads into JSON text.
pub enum RecordDecoder {
    /// Avro.
    Avro(Box<avro::AvroToJson>),
    /// Protobuf.
    Protobuf(protobuf::ProtobufToJson),
    /// JSON Schema.
    JsonSchema(json_schema::JsonSchemaToJson),
}

impl RecordDecoder {
    /// The decoder of `format` (none for JSON and raw values, passed on as
    /// they are); `reader_schema` is an Avro reader schema records are
    /// resolved to.
    pub fn new(
        format: Format,
        registry: Option<&SchemaRegistryConfig>,
        reader_schema: Option<&str>,
    ) -> Result<Option<Self>, String> {
        if !format.uses_registry() {
            return Ok(None);
        }
        let registry = registry.ok_or_else(|| {
            format!("format {} needs `schema_registry: {{ url: … }}`", format.name())
        })?;
        let client = registry.client()?;
        Ok(Some(match format {
            Format::Avro => {
                RecordDecoder::Avro(Box::new(avro::AvroToJson::new(client, reader_schema)?))
            }
            Format::Protobuf => RecordDecoder::Protobuf(protobuf::ProtobufToJson::new(client)),
            _ => RecordDecoder::JsonSchema(json_schema::JsonSchemaToJson::new(client)),
        }))
    }

    /// Decode `payload` into JSON text appended to `out`; why not (the
    /// schema id named) if it cannot be.
    pub fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self {
            RecordDecoder::Avro(decoder) => decoder.decode(payload, out),
            RecordDecoder::Protobuf(decoder) => decoder.decode(payload, out),
            RecordDecoder::JsonSchema(decoder) => decoder.decode(payload, out),
        }
    }
}

/// Turns a sink's events (JSON text) into records of its subject's schema.
pub enum RecordEncoder {
    /// Avro.
    Avro(avro::JsonToAvro),
    /// Protobuf.
    Protobuf(protobuf::JsonToProtobuf),
    /// JSON Schema.
    JsonSchema(json_schema::JsonToJsonSchema),
}

impl RecordEncoder {
    /// The encoder of `sink.format`: registers the sink's schema (or finds
    /// the subject's latest) now, so a sink whose schema the registry
    /// refuses does not start.
    pub fn open(sink: &SinkSchema<'_>) -> Result<Self, String> {
        let client = sink.registry.client()?;
        let (registered, strategy, record) = sink.resolve(&client)?;
        Ok(match sink.format {
            Format::Avro => RecordEncoder::Avro(avro::JsonToAvro::new(&registered)?),
            Format::Protobuf => RecordEncoder::Protobuf(protobuf::JsonToProtobuf::new(
                client,
                strategy,
                record,
                &registered,
            )?),
            _ => RecordEncoder::JsonSchema(json_schema::JsonToJsonSchema::new(
                client,
                strategy,
                registered.id,
            )?),
        })
    }

    /// Encode `event` (JSON text) into `out` (cleared first); why not (the
    /// schema id named).
    pub fn encode(&self, event: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        match self {
            RecordEncoder::Avro(encoder) => encoder.encode(event, out),
            RecordEncoder::Protobuf(encoder) => encoder.encode(event, out),
            RecordEncoder::JsonSchema(encoder) => encoder.encode(event, out),
        }
    }

    /// The schema id its records carry (for errors and status).
    pub fn schema_id(&self) -> u32 {
        match self {
            RecordEncoder::Avro(encoder) => encoder.schema_id(),
            RecordEncoder::Protobuf(encoder) => encoder.schema_id(),
            RecordEncoder::JsonSchema(encoder) => encoder.schema_id(),
        }
    }
}

/// Confluent's wire-format prefix: a zero byte and the schema id.
fn write_prefix(id: u32, out: &mut Vec<u8>) {
    out.push(0);
    out.extend_from_slice(&id.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_record_gives_its_schema_id_and_a_bad_one_says_why() {
        assert_eq!(framed(&[0, 0, 0, 1, 2, 7, 8]), Ok((258, &[7u8, 8][..])));
        assert!(framed(b"{\"a\":1}").unwrap_err().contains("first byte 0x7b"));
        assert!(framed(&[0, 1]).unwrap_err().contains("too short"));
        assert!(framed(&[]).unwrap_err().contains("empty"));
    }

    #[test]
    fn registry_settings_are_checked() {
        let registry = |url: &str, properties: &[(&str, &str)]| SchemaRegistryConfig {
            url: url.into(),
            properties: properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        assert!(registry("http://127.0.0.1:8081", &[]).validate().is_ok());
        assert!(registry("ftp://x", &[]).validate().unwrap_err().contains("http://"));
        assert!(registry("http://x", &[("sasl.password", "p")])
            .validate()
            .unwrap_err()
            .contains("not a registry client setting"));
        assert!(registry("http://x", &[("request.timeout.ms", "0")]).validate().is_err());
        assert!(registry(
            "http://x",
            &[("basic.auth.user.info", "u:p"), ("bearer.auth.token", "t")]
        )
        .validate()
        .is_err());
        assert!(registry("http://x", &[("basic.auth.user.info", "u:p")]).client().is_ok());
        assert!(registry("https://x", &[("ssl.certificate.location", "c.pem")])
            .validate()
            .unwrap_err()
            .contains("both"));
        let missing = registry("https://x", &[("ssl.ca.location", "/nonexistent/ca.pem")]);
        assert!(missing.client().unwrap_err().contains("ssl.ca.location \"/nonexistent/ca.pem\""));
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "not a certificate").unwrap();
        let path = not_pem.display().to_string();
        let files =
            registry("https://x", &[("ssl.ca.location", &path), ("request.timeout.ms", "5")]);
        assert_eq!(files.files().collect::<Vec<_>>(), [("ssl.ca.location", path.as_str())]);
        assert!(files.client().unwrap_err().contains("not PEM certificates"));
    }

    #[test]
    fn subjects_follow_the_strategy() {
        let registry = SchemaRegistryConfig { url: "http://x".into(), properties: BTreeMap::new() };
        let schema = r#"{"type":"record","name":"Order","namespace":"shop","fields":[]}"#;
        let sink = |strategy, schema| SinkSchema {
            format: Format::Avro,
            registry: &registry,
            topic: "orders",
            schema,
            strategy,
            record: None,
        };
        let subject = |sink: SinkSchema<'_>| {
            sink.strategy().and_then(|(s, _)| s.get_subject().map_err(|e| describe(&e)))
        };
        assert_eq!(subject(sink(SubjectStrategy::TopicName, None)).unwrap(), "orders-value");
        assert_eq!(
            subject(sink(SubjectStrategy::TopicName, Some(schema))).unwrap(),
            "orders-value"
        );
        assert_eq!(subject(sink(SubjectStrategy::RecordName, Some(schema))).unwrap(), "shop.Order");
        assert_eq!(
            subject(sink(SubjectStrategy::TopicRecordName, Some(schema))).unwrap(),
            "orders-shop.Order"
        );
        assert!(subject(sink(SubjectStrategy::RecordName, None))
            .unwrap_err()
            .contains("record_name"));
    }
}
