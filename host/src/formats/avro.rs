//! Avro records in Confluent's wire format, to JSON and back.
//!
//! JSON of an Avro value: records and maps are objects (a record's fields
//! in schema order), a union is its branch's value (no `{"type": …}`
//! wrapper, as Avro's own JSON encoding has), enums and UUIDs are strings,
//! decimals are decimal strings (`"12.34"`, exact), bytes and fixed are
//! arrays of numbers, durations `{"months", "days", "milliseconds"}`,
//! dates, times and timestamps their numbers (days, milliseconds or
//! microseconds, as the logical type counts). Records are decoded straight
//! into JSON text by `serde_avro_fast` (no value tree in between); a
//! writer schema with references is read by `schema_registry_converter`
//! and `apache-avro` (its decimals then arrays of the unscaled bytes).
//! Output JSON is resolved to the sink's schema: numbers to
//! `int`/`long`/`float`/`double`, strings to enums, objects to records
//! (missing fields take their defaults), `null` or a value to the matching
//! union branch.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::Schema;
use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;
use schema_registry_converter::blocking::avro::AvroDecoder;
use schema_registry_converter::blocking::schema_registry::{self, SrSettings};
use schema_registry_converter::schema_registry_common::{RegisteredSchema, SchemaType};

use super::{describe, framed, write_prefix};

/// Decodes Avro records into JSON text, their writer schemas read from the
/// registry by id once and cached.
pub struct AvroToJson {
    client: SrSettings,
    /// Writer schemas by id (with why one cannot be read).
    writers: Mutex<HashMap<u32, Result<Arc<Writer>, String>>>,
    /// Records of writer schemas with references.
    referencing: AvroDecoder,
    /// Records are resolved to this schema when given (Avro's schema
    /// resolution: fields the writer lacks take the reader's defaults,
    /// fields the reader lacks are dropped).
    reader: Option<Reader>,
}

/// A writer schema without references, as both crates read it.
struct Writer {
    /// What records are decoded into JSON with.
    decoding: serde_avro_fast::Schema,
    /// What records are resolved to the reader schema with (parsed only
    /// when there is one).
    resolving: Option<Schema>,
}

/// The reader schema, as both crates read it.
struct Reader {
    resolving: Schema,
    decoding: serde_avro_fast::Schema,
}

impl AvroToJson {
    /// A decoder asking `client`'s registry; `reader_schema` the reader
    /// schema's text, if any.
    pub fn new(client: SrSettings, reader_schema: Option<&str>) -> Result<Self, String> {
        let reader = reader_schema
            .map(|text| -> Result<Reader, String> {
                let bad =
                    |e: &dyn std::fmt::Display| format!("reader_schema is not an Avro schema: {e}");
                Ok(Reader {
                    resolving: Schema::parse_str(text).map_err(|e| bad(&e))?,
                    decoding: text.parse().map_err(|e| bad(&e))?,
                })
            })
            .transpose()?;
        Ok(Self {
            referencing: AvroDecoder::new(client.clone()),
            client,
            writers: Mutex::new(HashMap::new()),
            reader,
        })
    }

    /// Append `payload`'s JSON to `out`.
    pub fn decode(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let (id, body) = framed(payload)?;
        let Some(writer) = self.writer(id)? else {
            return self.decode_referencing(id, payload, out);
        };
        let undecodable =
            |e: &dyn std::fmt::Display| format!("schema id {id}: cannot decode as Avro: {e}");
        match (&self.reader, &writer.resolving) {
            (Some(reader), Some(resolving)) => {
                let unresolved = |e: apache_avro::Error| {
                    format!("schema id {id}: does not resolve to the reader schema: {e}")
                };
                let value = GenericDatumReader::builder(resolving)
                    .reader_schema(&reader.resolving)
                    .build()
                    .and_then(|datum| datum.read_value(&mut &body[..]))
                    .map_err(unresolved)?;
                let resolved = GenericDatumWriter::builder(&reader.resolving)
                    .build()
                    .and_then(|datum| datum.write_value_to_vec(value))
                    .map_err(unresolved)?;
                write_json_of(&resolved, &reader.decoding, out).map_err(|e| undecodable(&e))
            }
            _ => write_json_of(body, &writer.decoding, out).map_err(|e| undecodable(&e)),
        }
    }

    /// The writer schema `id` (read once, cached with any error but a
    /// failed call); none when it has references.
    fn writer(&self, id: u32) -> Result<Option<Arc<Writer>>, String> {
        let mut writers = self.writers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = writers.get(&id) {
            return known.clone().map(Some);
        }
        let registered =
            schema_registry::get_schema_by_id_and_type(id, &self.client, SchemaType::Avro)
                .map_err(|e| {
                    format!("schema id {id}: cannot read it from the registry: {}", describe(&e))
                })?;
        if !registered.references.is_empty() {
            return Ok(None);
        }
        let bad = |e: &dyn std::fmt::Display| format!("schema id {id}: not an Avro schema: {e}");
        let parsed = registered
            .schema
            .parse::<serde_avro_fast::Schema>()
            .map_err(|e| bad(&e))
            .and_then(|decoding| {
                let resolving = match &self.reader {
                    Some(_) => Some(Schema::parse_str(&registered.schema).map_err(|e| bad(&e))?),
                    None => None,
                };
                Ok(Arc::new(Writer { decoding, resolving }))
            });
        writers.insert(id, parsed.clone());
        parsed.map(Some)
    }

    /// Decode a record whose writer schema has references.
    fn decode_referencing(&self, id: u32, payload: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let decoded = self
            .referencing
            .decode(Some(payload))
            .map_err(|e| format!("schema id {id}: cannot decode as Avro: {}", describe(&e)))?;
        let value = match &self.reader {
            Some(reader) => decoded.value.resolve(&reader.resolving).map_err(|e| {
                format!("schema id {id}: does not resolve to the reader schema: {e}")
            })?,
            None => decoded.value,
        };
        write_json(&value, out).map_err(|e| format!("schema id {id}: {e}"))
    }
}

/// Append the JSON of the Avro datum `body` of `schema` to `out`, straight
/// from its bytes; on an error `out` is as it was.
fn write_json_of(
    body: &[u8],
    schema: &serde_avro_fast::Schema,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let start = out.len();
    let mut state = serde_avro_fast::de::DeserializerState::from_slice(body, schema);
    let mut json = serde_json::Serializer::new(&mut *out);
    let written =
        serde_transcode::transcode(state.deserializer(), &mut json).map_err(|e| e.to_string());
    if written.is_err() {
        out.truncate(start);
    }
    written
}

/// Encodes JSON events as Avro records of one registered schema.
pub struct JsonToAvro {
    id: u32,
    schema: Schema,
}

impl JsonToAvro {
    /// An encoder for `registered` (an Avro schema without references).
    pub fn new(registered: &RegisteredSchema) -> Result<Self, String> {
        if !registered.references.is_empty() {
            return Err(format!(
                "schema id {}: an Avro sink schema with references is not supported yet; inline the referenced types",
                registered.id
            ));
        }
        Self::with_schema(registered.id, &registered.schema)
    }

    /// An encoder for the schema `text` registered as `id`.
    fn with_schema(id: u32, text: &str) -> Result<Self, String> {
        let schema = Schema::parse_str(text)
            .map_err(|e| format!("schema id {id}: not an Avro schema: {e}"))?;
        Ok(Self { id, schema })
    }

    /// The registered schema's id.
    pub fn schema_id(&self) -> u32 {
        self.id
    }

    /// Write `event` (JSON text) as a framed Avro record to `out`.
    pub fn encode(&self, event: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let json: serde_json::Value =
            serde_json::from_slice(event).map_err(|e| format!("not JSON: {e}"))?;
        let value = Value::try_from(json)
            .and_then(|value| value.resolve(&self.schema))
            .map_err(|e| format!("schema id {}: {e}", self.id))?;
        write_prefix(self.id, out);
        let writer = GenericDatumWriter::builder(&self.schema)
            .build()
            .map_err(|e| format!("schema id {}: {e}", self.id))?;
        writer.write_value_ref(out, &value).map_err(|e| format!("schema id {}: {e}", self.id))?;
        Ok(())
    }
}

/// The full name of the record an Avro schema's text declares (none for
/// a schema of another type).
pub(super) fn record_name(text: &str) -> Result<Option<String>, String> {
    let schema = Schema::parse_str(text).map_err(|e| format!("schema: not an Avro schema: {e}"))?;
    Ok(schema.name().map(|name| name.fullname(None)))
}

/// Append `value` as JSON text.
pub(super) fn write_json(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    let number = |out: &mut Vec<u8>, n: serde_json::Number| {
        serde_json::to_writer(&mut *out, &n).map_err(|e| e.to_string())
    };
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Int(n) | Value::Date(n) | Value::TimeMillis(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Long(n)
        | Value::TimeMicros(n)
        | Value::TimestampMillis(n)
        | Value::TimestampMicros(n)
        | Value::TimestampNanos(n)
        | Value::LocalTimestampMillis(n)
        | Value::LocalTimestampMicros(n)
        | Value::LocalTimestampNanos(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(f) => number(
            out,
            serde_json::Number::from_f64(f64::from(*f))
                .ok_or_else(|| format!("{f} has no JSON form"))?,
        )?,
        Value::Double(d) => number(
            out,
            serde_json::Number::from_f64(*d).ok_or_else(|| format!("{d} has no JSON form"))?,
        )?,
        Value::String(s) | Value::Enum(_, s) => string(s, out)?,
        Value::Uuid(uuid) => string(&uuid.as_hyphenated().to_string(), out)?,
        Value::Bytes(bytes) | Value::Fixed(_, bytes) => byte_array(bytes, out),
        // As apache-avro writes them: arrays of bytes.
        Value::Decimal(_) | Value::BigDecimal(_) | Value::Duration(_) => {
            let json = serde_json::Value::try_from(value.clone()).map_err(|e| e.to_string())?;
            serde_json::to_writer(&mut *out, &json).map_err(|e| e.to_string())?;
        }
        Value::Union(_, inner) => write_json(inner, out)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, out)?;
            }
            out.push(b']');
        }
        Value::Map(entries) => write_object(entries.iter(), out)?,
        Value::Record(fields) => write_object(fields.iter().map(|(name, item)| (name, item)), out)?,
    }
    Ok(())
}

/// Append a JSON object of `members` (a map's entries, a record's fields).
fn write_object<'a>(
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.push(b'{');
    for (i, (name, item)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(name, out)?;
        out.push(b':');
        write_json(item, out)?;
    }
    out.push(b'}');
    Ok(())
}

fn string(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    serde_json::to_writer(&mut *out, text).map_err(|e| e.to_string())
}

fn byte_array(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{b}");
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
        {"name":"customer","type":"string"},
        {"name":"amount","type":"double"},
        {"name":"count","type":"int"},
        {"name":"note","type":["null","string"],"default":null},
        {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["WEB","STORE"]}},
        {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}
    ]}"#;

    #[test]
    fn json_goes_to_avro_and_back_in_field_order() {
        let encoder = JsonToAvro::with_schema(7, ORDER).unwrap();
        let mut framed_record = Vec::new();
        let event =
            br#"{"at":1700000000000,"amount":12.5,"customer":"c-1","count":3,"kind":"STORE"}"#;
        encoder.encode(event, &mut framed_record).unwrap();
        assert_eq!(&framed_record[..5], &[0, 0, 0, 0, 7]);
        let expected = r#"{"customer":"c-1","amount":12.5,"count":3,"note":null,"kind":"STORE","at":1700000000000}"#;
        let mut json = b"[".to_vec();
        write_json_of(&framed_record[5..], &ORDER.parse().unwrap(), &mut json).unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), format!("[{expected}"));
        // The value-tree path (writer schemas with references) writes the same.
        let schema = Schema::parse_str(ORDER).unwrap();
        let value = GenericDatumReader::builder(&schema)
            .build()
            .unwrap()
            .read_value(&mut &framed_record[5..])
            .unwrap();
        let mut json = Vec::new();
        write_json(&value, &mut json).unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), expected);
    }

    #[test]
    fn decimals_are_exact_decimal_strings_and_bad_bytes_leave_nothing() {
        let text = r#"{"type":"record","name":"Price","fields":[
            {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"tags","type":{"type":"map","values":"long"}}]}"#;
        let schema = Schema::parse_str(text).unwrap();
        let value = Value::Record(vec![
            ("amount".into(), Value::Decimal(apache_avro::Decimal::from(1234i64.to_be_bytes()))),
            ("tags".into(), Value::Map([("a".to_string(), Value::Long(1))].into())),
        ]);
        let body = GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(value)
            .unwrap();
        let mut json = Vec::new();
        write_json_of(&body, &text.parse().unwrap(), &mut json).unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), r#"{"amount":"12.34","tags":{"a":1}}"#);
        let mut json = b"kept".to_vec();
        assert!(write_json_of(&body[..3], &text.parse().unwrap(), &mut json).is_err());
        assert_eq!(json, b"kept");
    }

    #[test]
    fn an_event_that_does_not_fit_says_so() {
        let encoder = JsonToAvro::with_schema(7, ORDER).unwrap();
        let mut out = Vec::new();
        let error = encoder.encode(br#"{"customer":"c-1"}"#, &mut out).unwrap_err();
        assert!(error.contains("schema id 7"), "{error}");
        assert!(encoder.encode(b"not json", &mut out).unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_record_name_is_the_full_name() {
        assert_eq!(record_name(ORDER).unwrap().as_deref(), Some("shop.Order"));
        assert_eq!(record_name(r#""string""#).unwrap(), None);
    }
}
