//! Protobuf records in Confluent's wire format (schema id, then the
//! message's indexes in its schema), to JSON and back.
//!
//! A schema is `.proto` text, or — as Confluent's own serializers register
//! it, and registries other than Confluent's keep it — a base64-encoded
//! `FileDescriptorProto` (its imports the schema's references, or
//! Protobuf's well-known types); both are read.
//!
//! JSON of a message is Protobuf's canonical JSON mapping with two
//! choices made for functions: fields keep their `.proto` names
//! (`customer_id`, not `customerId`), and 64-bit integers are numbers,
//! not strings. Fields at their default value are written too, so a
//! function sees every field. Output JSON is read with either field name.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{DescriptorPool, DynamicMessage, FileDescriptor, SerializeOptions};
use schema_registry_converter::blocking::proto_encoder::ProtoEncoder;
use schema_registry_converter::blocking::schema_registry::{self, SrSettings};
use schema_registry_converter::schema_registry_common::{
    RegisteredSchema, SchemaType, SubjectNameStrategy,
};

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
    client: SrSettings,
    /// By schema id: its file (or why it cannot be read).
    files: Mutex<HashMap<u32, Result<FileDescriptor, String>>>,
    options: SerializeOptions,
}

impl ProtobufToJson {
    /// A decoder asking `client`'s registry.
    pub fn new(client: SrSettings) -> Self {
        Self { client, files: Mutex::new(HashMap::new()), options: json_options() }
    }

    /// Append `payload`'s JSON to `out`.
    pub fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let (id, rest) = framed(payload)?;
        let file = self.file(id)?;
        let (indexes, body) = message_indexes(rest).map_err(|e| format!("schema id {id}: {e}"))?;
        let message = message_at(&file, &indexes).map_err(|e| format!("schema id {id}: {e}"))?;
        let decoded = DynamicMessage::decode(message, body)
            .map_err(|e| format!("schema id {id}: cannot decode as Protobuf: {e}"))?;
        write_json(&decoded, &self.options, out).map_err(|e| format!("schema id {id}: {e}"))
    }

    /// The file of schema `id`, `.proto` text or a serialized descriptor,
    /// with its references (looked up once, cached with any error but a
    /// failed call).
    fn file(&self, id: u32) -> Result<FileDescriptor, String> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = files.get(&id) {
            return known.clone();
        }
        let registered =
            schema_registry::get_schema_by_id_and_type(id, &self.client, SchemaType::Protobuf)
                .map_err(|e| {
                    format!("schema id {id}: cannot read it from the registry: {}", describe(&e))
                })?;
        let found = file_of(&self.client, &registered).map_err(|e| format!("schema id {id}: {e}"));
        files.insert(id, found.clone());
        found
    }
}

/// The file a registered schema describes, with its references (and
/// Protobuf's well-known types) as its imports.
fn file_of(client: &SrSettings, registered: &RegisteredSchema) -> Result<FileDescriptor, String> {
    let file = descriptor_proto(&registered.schema)?;
    let mut pool = DescriptorPool::global();
    add_references(client, registered, &mut pool, 0)?;
    let name = file.name().to_string();
    pool.add_file_descriptor_proto(file)
        .map_err(|e| format!("its descriptor does not build: {e}"))?;
    pool.get_file_by_name(&name).ok_or_else(|| format!("its file {name:?} is not in its pool"))
}

/// Add the files `registered` imports through its references, theirs
/// first.
fn add_references(
    client: &SrSettings,
    registered: &RegisteredSchema,
    pool: &mut DescriptorPool,
    depth: usize,
) -> Result<(), String> {
    if depth > 32 {
        return Err("its references nest deeper than 32".into());
    }
    for reference in &registered.references {
        if pool.get_file_by_name(&reference.name).is_some() {
            continue;
        }
        let child = schema_registry::get_referenced_schema(client, reference)
            .map_err(|e| format!("reference {:?}: {}", reference.name, describe(&e)))?;
        add_references(client, &child, pool, depth + 1)?;
        let mut file = descriptor_proto(&child.schema)
            .map_err(|e| format!("reference {:?}: {e}", reference.name))?;
        file.name = Some(reference.name.clone());
        pool.add_file_descriptor_proto(file)
            .map_err(|e| format!("reference {:?} does not build: {e}", reference.name))?;
    }
    Ok(())
}

/// A schema's file descriptor: `.proto` text parsed, or a serialized
/// one (base64 of a `FileDescriptorProto`) read.
fn descriptor_proto(schema: &str) -> Result<FileDescriptorProto, String> {
    let text = schema.trim();
    if let Ok(mut file) = protox_parse::parse("schema.proto", text) {
        if file.name().is_empty() {
            file.name = Some("schema.proto".into());
        }
        return Ok(file);
    }
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) else {
        return Err("neither .proto text nor a base64 FileDescriptorProto".into());
    };
    FileDescriptorProto::decode(bytes.as_slice())
        .map_err(|e| format!("not a serialized FileDescriptorProto: {e}"))
}

/// The message indexes a Confluent Protobuf record starts with (a count,
/// then the path to the message: zig-zag varints; a lone 0 is the first
/// message), and the encoded message after them.
fn message_indexes(mut bytes: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let next = |bytes: &mut &[u8]| -> Result<i32, String> {
        let raw = prost::encoding::decode_varint(bytes)
            .map_err(|e| format!("its message indexes: {e}"))?;
        let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
        i32::try_from(value).map_err(|_| format!("its message indexes: {value} is out of range"))
    };
    let count = next(&mut bytes)?;
    if count == 0 {
        return Ok((vec![0], bytes));
    }
    if !(1..=64).contains(&count) {
        return Err(format!("its message indexes: a path of {count} messages"));
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        indexes.push(next(&mut bytes)?);
    }
    Ok((indexes, bytes))
}

/// The message `indexes` name in `file` (top-level index, then nested).
fn message_at(
    file: &FileDescriptor,
    indexes: &[i32],
) -> Result<prost_reflect::MessageDescriptor, String> {
    let missing = || format!("no message at index path {indexes:?}");
    let (first, nested) = indexes.split_first().ok_or_else(missing)?;
    let mut message =
        file.messages().nth(usize::try_from(*first).map_err(|_| missing())?).ok_or_else(missing)?;
    for index in nested {
        let index = usize::try_from(*index).map_err(|_| missing())?;
        let child = message.child_messages().nth(index).ok_or_else(missing)?;
        message = child;
    }
    Ok(message)
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
    fn message_indexes_are_read_as_confluent_writes_them() {
        assert_eq!(message_indexes(&[0, 9]).unwrap(), (vec![0], &[9u8][..]));
        // Two indexes, 1 then 0 (zig-zag: 2 is 1, 0 is 0), then the message.
        assert_eq!(message_indexes(&[4, 2, 0, 7]).unwrap(), (vec![1, 0], &[7u8][..]));
        assert!(message_indexes(&[]).is_err());
        assert!(message_indexes(&[1]).unwrap_err().contains("message indexes"));
    }

    #[test]
    fn a_serialized_descriptor_and_proto_text_are_both_read() {
        let schema = "syntax = \"proto3\";\npackage shop;\nmessage Order { string customer = 1; message Line { int64 cents = 1; } }\n";
        assert_eq!(descriptor_proto(schema).unwrap().message_type[0].name(), "Order");
        let mut file = protox_parse::parse("shop.proto", schema).unwrap();
        file.name = Some("shop.proto".into());
        let encoded = base64::engine::general_purpose::STANDARD.encode(file.encode_to_vec());
        let decoded = descriptor_proto(&encoded).unwrap();
        let mut pool = DescriptorPool::global();
        pool.add_file_descriptor_proto(decoded).unwrap();
        let file = pool.get_file_by_name("shop.proto").unwrap();
        assert_eq!(message_at(&file, &[0]).unwrap().full_name(), "shop.Order");
        assert_eq!(message_at(&file, &[0, 0]).unwrap().full_name(), "shop.Order.Line");
        assert!(message_at(&file, &[1]).is_err());
        assert!(descriptor_proto("not a schema at all!").is_err());
    }

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
