//! Protobuf records in Confluent's wire format (schema id, then the
//! message's indexes in its schema), to JSON and back.
//!
//! JSON of a message is Protobuf's canonical JSON mapping with two
//! choices made for functions: fields keep their `.proto` names
//! (`customer_id`, not `customerId`), and 64-bit integers are numbers,
//! not strings. Fields at their default value are written too, so a
//! function sees every field. Output JSON is read with either field name.

use prost_reflect::{DynamicMessage, SerializeOptions};
use schema_registry_converter::blocking::proto_decoder::ProtoDecoder;
use schema_registry_converter::blocking::proto_encoder::ProtoEncoder;
use schema_registry_converter::blocking::schema_registry::SrSettings;
use schema_registry_converter::schema_registry_common::{RegisteredSchema, SubjectNameStrategy};

use super::{describe, framed};

/// How messages are written as JSON.
fn json_options() -> SerializeOptions {
    SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false)
}

/// Decodes Protobuf records into JSON text, their schemas read from the
/// registry by id once and cached.
pub struct ProtobufToJson {
    decoder: ProtoDecoder,
    options: SerializeOptions,
}

impl ProtobufToJson {
    /// A decoder asking `client`'s registry.
    pub fn new(client: SrSettings) -> Self {
        Self { decoder: ProtoDecoder::new(client), options: json_options() }
    }

    /// Append `payload`'s JSON to `out`.
    pub fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let (id, _) = framed(payload)?;
        let decoded = self
            .decoder
            .decode_with_context(Some(payload))
            .map_err(|e| format!("schema id {id}: cannot decode as Protobuf: {}", describe(&e)))?
            .ok_or_else(|| format!("schema id {id}: an empty value"))?;
        write_json(&decoded.value, &self.options, out).map_err(|e| format!("schema id {id}: {e}"))
    }
}

fn write_json(
    message: &DynamicMessage,
    options: &SerializeOptions,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let mut serializer = serde_json::Serializer::new(out);
    message.serialize_with_options(&mut serializer, options).map_err(|e| e.to_string())
}

/// Encodes JSON events as one message type of a registered Protobuf
/// schema.
pub struct JsonToProtobuf {
    encoder: ProtoEncoder,
    strategy: SubjectNameStrategy,
    message: String,
    id: u32,
}

impl JsonToProtobuf {
    /// An encoder of messages `message` (the schema's first message when
    /// none is named) of `registered`, found through `strategy`.
    pub fn new(
        client: SrSettings,
        strategy: SubjectNameStrategy,
        message: Option<String>,
        registered: &RegisteredSchema,
    ) -> Result<Self, String> {
        let message = match message {
            Some(message) => message,
            None => first_message(&registered.schema)?,
        };
        let encoder = ProtoEncoder::new(client);
        encoder.get_message_descriptor(&message, &strategy).map_err(|e| {
            format!("schema id {}: message {message:?}: {}", registered.id, describe(&e))
        })?;
        Ok(Self { encoder, strategy, message, id: registered.id })
    }

    /// The registered schema's id.
    pub fn schema_id(&self) -> u32 {
        self.id
    }

    /// Write `event` (JSON text) as a framed Protobuf record to `out`.
    pub fn encode(&self, event: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let json: serde_json::Value =
            serde_json::from_slice(event).map_err(|e| format!("not JSON: {e}"))?;
        let bytes =
            self.encoder.encode_json(&json, &self.message, &self.strategy).map_err(|e| {
                format!("message {} of schema id {}: {}", self.message, self.id, describe(&e))
            })?;
        out.extend_from_slice(&bytes);
        Ok(())
    }
}

/// The full name (`package.Message`) of the first message a `.proto`
/// schema's text declares.
pub(super) fn first_message(text: &str) -> Result<String, String> {
    let file = protox_parse::parse("schema.proto", text)
        .map_err(|e| format!("schema: not a Protobuf schema: {e}"))?;
    let name = file
        .message_type
        .first()
        .and_then(|m| m.name.clone())
        .ok_or_else(|| "schema: declares no message".to_string())?;
    Ok(match file.package.as_deref() {
        Some(package) if !package.is_empty() => format!("{package}.{name}"),
        _ => name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_is_named_with_its_package() {
        let schema = "syntax = \"proto3\";\npackage shop;\nmessage Order { string customer = 1; }\nmessage Other {}\n";
        assert_eq!(first_message(schema).unwrap(), "shop.Order");
        assert!(first_message("syntax = \"proto3\";").unwrap_err().contains("no message"));
        assert!(first_message("message {").unwrap_err().contains("not a Protobuf schema"));
    }

    #[test]
    fn messages_are_json_with_proto_names_and_numbers() {
        let schema = "syntax = \"proto3\";\npackage shop;\nmessage Order { string customer_id = 1; int64 amount_cents = 2; bool paid = 3; }\n";
        let file = protox_parse::parse("o.proto", schema).unwrap();
        let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(
            prost_reflect::prost_types::FileDescriptorSet { file: vec![file] },
        )
        .unwrap();
        let descriptor = pool.get_message_by_name("shop.Order").unwrap();
        let message = DynamicMessage::deserialize(
            descriptor,
            &serde_json::json!({"customerId": "c-1", "amount_cents": 1250}),
        )
        .unwrap();
        let mut out = Vec::new();
        write_json(&message, &json_options(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"customer_id":"c-1","amount_cents":1250,"paid":false}"#
        );
    }
}
