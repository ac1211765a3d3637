//! JSON records with a JSON Schema in the registry, in Confluent's wire
//! format: the JSON text after the schema id.
//!
//! As Confluent's deserializer does by default, a source checks that the
//! record's schema id is in the registry and passes the JSON on without
//! validating it again (its producer validated it); a sink validates every
//! event against its subject's schema before writing it.

use schema_registry_converter::blocking::json::{JsonDecoder, JsonEncoder};
use schema_registry_converter::blocking::schema_registry::SrSettings;
use schema_registry_converter::schema_registry_common::SubjectNameStrategy;

use super::{describe, framed};

/// Takes the JSON text of JSON Schema records whose schema ids the
/// registry knows (each looked up once and cached).
pub struct JsonSchemaToJson {
    decoder: JsonDecoder,
}

impl JsonSchemaToJson {
    /// A decoder asking `client`'s registry.
    pub fn new(client: SrSettings) -> Self {
        Self { decoder: JsonDecoder::new(client) }
    }

    /// Append `payload`'s JSON text to `out`.
    pub fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let (id, json) = framed(payload)?;
        self.decoder.get_schema(id).map_err(|e| {
            format!("schema id {id}: not a JSON Schema the registry has: {}", describe(&e))
        })?;
        out.extend_from_slice(json);
        Ok(())
    }
}

/// Validates JSON events against a registered JSON Schema and frames them.
pub struct JsonToJsonSchema {
    encoder: JsonEncoder,
    strategy: SubjectNameStrategy,
    id: u32,
}

impl JsonToJsonSchema {
    /// An encoder for the schema `strategy` finds, registered as `id`.
    pub fn new(client: SrSettings, strategy: SubjectNameStrategy, id: u32) -> Result<Self, String> {
        Ok(Self { encoder: JsonEncoder::new(client), strategy, id })
    }

    /// The registered schema's id.
    pub fn schema_id(&self) -> u32 {
        self.id
    }

    /// Write `event` (JSON text), validated, as a framed record to `out`.
    pub fn encode(&self, event: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let json: serde_json::Value =
            serde_json::from_slice(event).map_err(|e| format!("not JSON: {e}"))?;
        let bytes = self
            .encoder
            .encode(&json, &self.strategy)
            .map_err(|e| format!("schema id {}: {}", self.id, describe(&e)))?;
        out.extend_from_slice(&bytes);
        Ok(())
    }
}
