//! Types of a schema's events for function authors (`weir schema types`):
//! Rust structs with serde, Python `TypedDict`s, TypeScript interfaces,
//! describing the JSON events a source of that schema hands to functions
//! (see the JSON mapping of [`super::avro`] and [`super::protobuf`]), so a
//! function reads `event.json::<Order>()`, `order: Order = event.json()`
//! or `event.json<Order>()` with the fields checked by its compiler.
//!
//! A schema is first read into a [`Shape`] tree (the JSON it describes),
//! then written in the asked [`Language`].

use std::collections::BTreeSet;
use std::fmt::Write as _;

use apache_avro::schema::{Schema as AvroSchema, UnionSchema};
use prost_reflect::{DescriptorPool, Kind, MessageDescriptor};

use super::Format;

/// The JSON shape of a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A whole number (`unsigned`: never negative).
    Int {
        /// Never negative.
        unsigned: bool,
    },
    /// A number.
    Float,
    /// A string.
    Text,
    /// Bytes, as an array of numbers.
    Bytes,
    /// An array.
    Array(Box<Shape>),
    /// An object with string keys, each value of one shape.
    Map(Box<Shape>),
    /// The value or `null`.
    Optional(Box<Shape>),
    /// One of these strings.
    Enum(Named<Vec<String>>),
    /// An object with these fields.
    Record(Named<Vec<Field>>),
    /// A record or enum declared elsewhere in the tree, by name.
    Reference(String),
    /// Any JSON (a union of several shapes, a free-form value).
    Any,
}

/// A declared type: its name and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T> {
    /// Its name, without namespace or package.
    pub name: String,
    /// What it holds.
    pub body: T,
}

/// A record's field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name in the JSON.
    pub name: String,
    /// Its value's shape.
    pub shape: Shape,
    /// Whether the JSON may lack it.
    pub optional: bool,
}

/// The language types are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Structs and enums deriving serde's traits.
    Rust,
    /// `TypedDict`s and `Literal`s (events stay the dicts `event.json()`
    /// returns).
    Python,
    /// Interfaces and string-literal unions.
    TypeScript,
}

impl Language {
    /// The language called `name` (`rust`, `python`, `typescript`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "rust" | "rs" => Some(Language::Rust),
            "python" | "py" => Some(Language::Python),
            "typescript" | "ts" => Some(Language::TypeScript),
            _ => None,
        }
    }
}

/// The types of `schema` (`format`'s text) in `language`; `record` names
/// the root message of a Protobuf schema (default: its first).
pub fn generate(
    format: Format,
    schema: &str,
    record: Option<&str>,
    language: Language,
) -> Result<String, String> {
    let root = shape_of(format, schema, record)?;
    let mut declared = Vec::new();
    collect(&root, &mut declared);
    let mut out = header(language);
    let mut seen = BTreeSet::new();
    for shape in declared {
        let name = match shape {
            Shape::Record(named) => &named.name,
            Shape::Enum(named) => &named.name,
            _ => continue,
        };
        if seen.insert(name.clone()) {
            declare(shape, language, &mut out);
        }
    }
    if seen.is_empty() {
        return Err("the schema declares no record, message or object to type".into());
    }
    Ok(out)
}

/// The shape of the events `schema` describes.
pub fn shape_of(format: Format, schema: &str, record: Option<&str>) -> Result<Shape, String> {
    match format {
        Format::Avro => {
            let parsed =
                AvroSchema::parse_str(schema).map_err(|e| format!("not an Avro schema: {e}"))?;
            Ok(avro_shape(&parsed))
        }
        Format::Protobuf => protobuf_shape(schema, record),
        Format::JsonSchema | Format::Json => {
            let parsed: serde_json::Value =
                serde_json::from_str(schema).map_err(|e| format!("not a JSON Schema: {e}"))?;
            Ok(JsonSchemaReader { root: &parsed }.shape(&parsed, "Record", &mut Vec::new()))
        }
        Format::Raw => Err("raw values have no schema".into()),
    }
}

fn avro_shape(schema: &AvroSchema) -> Shape {
    match schema {
        AvroSchema::Null => Shape::Null,
        AvroSchema::Boolean => Shape::Bool,
        AvroSchema::Int
        | AvroSchema::Long
        | AvroSchema::Date
        | AvroSchema::TimeMillis
        | AvroSchema::TimeMicros
        | AvroSchema::TimestampMillis
        | AvroSchema::TimestampMicros
        | AvroSchema::TimestampNanos
        | AvroSchema::LocalTimestampMillis
        | AvroSchema::LocalTimestampMicros
        | AvroSchema::LocalTimestampNanos => Shape::Int { unsigned: false },
        AvroSchema::Float | AvroSchema::Double => Shape::Float,
        AvroSchema::String
        | AvroSchema::Uuid(_)
        | AvroSchema::Decimal(_)
        | AvroSchema::BigDecimal => Shape::Text,
        AvroSchema::Bytes | AvroSchema::Fixed(_) => Shape::Bytes,
        AvroSchema::Duration(_) => Shape::Record(Named {
            name: "Duration".into(),
            body: ["months", "days", "milliseconds"]
                .map(|name| Field {
                    name: name.into(),
                    shape: Shape::Int { unsigned: true },
                    optional: false,
                })
                .to_vec(),
        }),
        AvroSchema::Array(array) => Shape::Array(Box::new(avro_shape(&array.items))),
        AvroSchema::Map(map) => Shape::Map(Box::new(avro_shape(&map.types))),
        AvroSchema::Union(union) => avro_union(union),
        AvroSchema::Record(record) => Shape::Record(Named {
            name: record.name.name().to_string(),
            body: record
                .fields
                .iter()
                .map(|field| Field {
                    name: field.name.clone(),
                    shape: avro_shape(&field.schema),
                    optional: false,
                })
                .collect(),
        }),
        AvroSchema::Enum(enumeration) => Shape::Enum(Named {
            name: enumeration.name.name().to_string(),
            body: enumeration.symbols.clone(),
        }),
        AvroSchema::Ref { name } => Shape::Reference(name.name().to_string()),
    }
}

/// A union is its branch's value: `null` and one other is optional; other
/// mixes are any JSON.
fn avro_union(union: &UnionSchema) -> Shape {
    let branches: Vec<&AvroSchema> =
        union.variants().iter().filter(|s| !matches!(s, AvroSchema::Null)).collect();
    let nullable = branches.len() < union.variants().len();
    match branches.as_slice() {
        [] => Shape::Null,
        [one] if nullable => Shape::Optional(Box::new(avro_shape(one))),
        [one] => avro_shape(one),
        _ => Shape::Any,
    }
}

fn protobuf_shape(schema: &str, record: Option<&str>) -> Result<Shape, String> {
    let file = protox_parse::parse("schema.proto", schema)
        .map_err(|e| format!("not a Protobuf schema: {e}"))?;
    let mut pool = DescriptorPool::global();
    pool.add_file_descriptor_proto(file).map_err(|e| {
        format!("the schema does not build (imports other than Protobuf's well-known types are not read): {e}")
    })?;
    let file = pool.get_file_by_name("schema.proto").ok_or("the schema has no file")?;
    let message = match record {
        Some(name) => pool
            .get_message_by_name(name)
            .or_else(|| file.messages().find(|m| m.name() == name))
            .ok_or_else(|| format!("no message {name:?} in the schema"))?,
        None => file.messages().next().ok_or("the schema declares no message")?,
    };
    Ok(protobuf_message(&message, &mut Vec::new()))
}

/// A message's shape, as the canonical JSON mapping (`.proto` field
/// names, 64-bit numbers as numbers, enums by name) writes it; `open`
/// holds the messages being declared (a message inside itself is a
/// reference).
fn protobuf_message(message: &MessageDescriptor, open: &mut Vec<String>) -> Shape {
    match message.full_name() {
        "google.protobuf.Timestamp" | "google.protobuf.Duration" | "google.protobuf.FieldMask" => {
            return Shape::Text
        }
        "google.protobuf.Struct"
        | "google.protobuf.Value"
        | "google.protobuf.ListValue"
        | "google.protobuf.Any" => return Shape::Any,
        "google.protobuf.Empty" => return Shape::Map(Box::new(Shape::Any)),
        name if name.starts_with("google.protobuf.") && name.ends_with("Value") => {
            let inner = message.get_field_by_name("value").map(|f| protobuf_kind(&f.kind(), open));
            return Shape::Optional(Box::new(inner.unwrap_or(Shape::Any)));
        }
        _ => {}
    }
    if open.iter().any(|name| name == message.full_name()) {
        return Shape::Reference(message.name().to_string());
    }
    open.push(message.full_name().to_string());
    let fields = message
        .fields()
        .map(|field| {
            let shape = match field.kind() {
                Kind::Message(entry) if field.is_map() => {
                    Shape::Map(Box::new(protobuf_kind(&entry.map_entry_value_field().kind(), open)))
                }
                kind if field.is_list() => Shape::Array(Box::new(protobuf_kind(&kind, open))),
                kind if field.containing_oneof().is_some() || matches!(kind, Kind::Message(_)) => {
                    Shape::Optional(Box::new(protobuf_kind(&kind, open)))
                }
                kind => protobuf_kind(&kind, open),
            };
            Field { name: field.name().to_string(), shape, optional: false }
        })
        .collect();
    open.pop();
    Shape::Record(Named { name: message.name().to_string(), body: fields })
}

fn protobuf_kind(kind: &Kind, open: &mut Vec<String>) -> Shape {
    match kind {
        Kind::Double | Kind::Float => Shape::Float,
        Kind::Int32
        | Kind::Int64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Sfixed32
        | Kind::Sfixed64 => Shape::Int { unsigned: false },
        Kind::Uint32 | Kind::Uint64 | Kind::Fixed32 | Kind::Fixed64 => {
            Shape::Int { unsigned: true }
        }
        Kind::Bool => Shape::Bool,
        // Protobuf's JSON mapping writes bytes as base64 text.
        Kind::String | Kind::Bytes => Shape::Text,
        Kind::Message(message) => protobuf_message(message, open),
        Kind::Enum(enumeration) => Shape::Enum(Named {
            name: enumeration.name().to_string(),
            body: enumeration.values().map(|v| v.name().to_string()).collect(),
        }),
    }
}

/// Reads a JSON Schema, following `$ref`s into its `definitions`/`$defs`.
struct JsonSchemaReader<'a> {
    root: &'a serde_json::Value,
}

impl JsonSchemaReader<'_> {
    /// The shape of `schema`, named `name` if it is a record or enum;
    /// `open` holds the `$ref`s being expanded (one met again inside
    /// itself is a reference by name).
    fn shape(&self, schema: &serde_json::Value, name: &str, open: &mut Vec<String>) -> Shape {
        if let Some(reference) = schema.get("$ref").and_then(|r| r.as_str()) {
            let referenced = type_name(reference.rsplit('/').next().unwrap_or(name));
            if open.iter().any(|r| r == reference) {
                return Shape::Reference(referenced);
            }
            let Some(target) = reference.strip_prefix('#').and_then(|p| self.root.pointer(p))
            else {
                return Shape::Any;
            };
            open.push(reference.to_string());
            let shape = self.shape(target, &referenced, open);
            open.pop();
            return shape;
        }
        if let Some(symbols) = schema.get("enum").and_then(|e| e.as_array()) {
            if symbols.iter().all(|s| s.is_string()) {
                return Shape::Enum(Named {
                    name: type_name(name),
                    body: symbols.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
                });
            }
            return Shape::Any;
        }
        for combined in ["anyOf", "oneOf"] {
            if let Some(options) = schema.get(combined).and_then(|o| o.as_array()) {
                let others: Vec<&serde_json::Value> = options
                    .iter()
                    .filter(|o| o.get("type").and_then(|t| t.as_str()) != Some("null"))
                    .collect();
                return match others.as_slice() {
                    [one] if others.len() < options.len() => {
                        Shape::Optional(Box::new(self.shape(one, name, open)))
                    }
                    [one] => self.shape(one, name, open),
                    _ => Shape::Any,
                };
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(serde_json::Value::String(one)) => vec![one.as_str()],
            Some(serde_json::Value::Array(many)) => {
                many.iter().filter_map(|t| t.as_str()).collect()
            }
            _ if schema.get("properties").is_some() => vec!["object"],
            _ => Vec::new(),
        };
        let nullable = types.contains(&"null");
        let others: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
        let shape = match others.as_slice() {
            ["string"] => Shape::Text,
            ["integer"] => Shape::Int {
                unsigned: schema.get("minimum").and_then(|m| m.as_f64()).is_some_and(|m| m >= 0.0),
            },
            ["number"] => Shape::Float,
            ["boolean"] => Shape::Bool,
            ["array"] => Shape::Array(Box::new(
                schema
                    .get("items")
                    .map_or(Shape::Any, |items| self.shape(items, &format!("{name}Item"), open)),
            )),
            ["object"] => self.object(schema, name, open),
            [] if nullable => Shape::Null,
            _ => Shape::Any,
        };
        if nullable && shape != Shape::Null {
            Shape::Optional(Box::new(shape))
        } else {
            shape
        }
    }

    fn object(&self, schema: &serde_json::Value, name: &str, open: &mut Vec<String>) -> Shape {
        let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
            return match schema.get("additionalProperties") {
                Some(values) if values.is_object() => {
                    Shape::Map(Box::new(self.shape(values, &format!("{name}Value"), open)))
                }
                _ => Shape::Map(Box::new(Shape::Any)),
            };
        };
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        let title = schema.get("title").and_then(|t| t.as_str()).unwrap_or(name);
        Shape::Record(Named {
            name: type_name(title),
            body: properties
                .iter()
                .map(|(field, property)| Field {
                    name: field.clone(),
                    shape: self.shape(property, &type_name(field), open),
                    optional: !required.contains(field.as_str()),
                })
                .collect(),
        })
    }
}

/// `order_line` → `OrderLine`: a name fit for a type.
fn type_name(name: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if upper {
                out.extend(c.to_uppercase());
            } else {
                out.push(c);
            }
            upper = false;
        } else {
            upper = true;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// Every record and enum in `shape`, those inside before those they are in.
fn collect<'a>(shape: &'a Shape, out: &mut Vec<&'a Shape>) {
    match shape {
        Shape::Array(inner) | Shape::Map(inner) | Shape::Optional(inner) => collect(inner, out),
        Shape::Record(record) => {
            for field in &record.body {
                collect(&field.shape, out);
            }
            out.push(shape);
        }
        Shape::Enum(_) => out.push(shape),
        _ => {}
    }
}

fn header(language: Language) -> String {
    let note = "Generated by `weir schema types`: the JSON events of the schema.";
    match language {
        Language::Rust => format!("// {note}\n\nuse serde::{{Deserialize, Serialize}};\n"),
        Language::Python => format!(
            "# {note}\nfrom typing import Any, Dict, List, Literal, Optional, TypedDict\n\ntry:\n    from typing import NotRequired\nexcept ImportError:  # Python < 3.11\n    from typing_extensions import NotRequired\n"
        ),
        Language::TypeScript => format!("// {note}\n"),
    }
}

/// Write the declaration of a record or enum.
fn declare(shape: &Shape, language: Language, out: &mut String) {
    match (shape, language) {
        (Shape::Enum(named), Language::Rust) => {
            let _ = writeln!(out, "\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]\npub enum {} {{", named.name);
            for symbol in &named.body {
                let variant = if symbol.chars().any(|c| c.is_ascii_lowercase()) {
                    type_name(symbol)
                } else {
                    type_name(&symbol.to_ascii_lowercase())
                };
                let _ = writeln!(out, "    #[serde(rename = {symbol:?})]\n    {variant},");
            }
            out.push_str("}\n");
        }
        (Shape::Record(named), Language::Rust) => {
            let _ = writeln!(
                out,
                "\n#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]\npub struct {} {{",
                named.name
            );
            for field in &named.body {
                let (ident, renamed) = rust_field(&field.name);
                if renamed {
                    let _ = writeln!(out, "    #[serde(rename = {:?})]", field.name);
                }
                let mut ty = rust_type(&field.shape);
                if field.optional && !matches!(field.shape, Shape::Optional(_)) {
                    out.push_str(
                        "    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n",
                    );
                    ty = format!("Option<{ty}>");
                }
                let _ = writeln!(out, "    pub {ident}: {ty},");
            }
            out.push_str("}\n");
        }
        (Shape::Enum(named), Language::Python) => {
            let symbols: Vec<String> = named.body.iter().map(|s| format!("{s:?}")).collect();
            let _ = writeln!(out, "\n{} = Literal[{}]", named.name, symbols.join(", "));
        }
        (Shape::Record(named), Language::Python) => {
            let field = |field: &Field| {
                let ty = python_type(&field.shape);
                if field.optional {
                    format!("NotRequired[{ty}]")
                } else {
                    ty
                }
            };
            if named.body.iter().all(|f| is_python_identifier(&f.name)) {
                let _ = writeln!(out, "\n\nclass {}(TypedDict):", named.name);
                if named.body.is_empty() {
                    out.push_str("    pass\n");
                }
                for f in &named.body {
                    let _ = writeln!(out, "    {}: {}", f.name, field(f));
                }
            } else {
                // Names that cannot be attributes: the functional form.
                let fields: Vec<String> =
                    named.body.iter().map(|f| format!("{:?}: {}", f.name, field(f))).collect();
                let _ = writeln!(
                    out,
                    "\n\n{0} = TypedDict({0:?}, {{{1}}})",
                    named.name,
                    fields.join(", ")
                );
            }
        }
        (Shape::Enum(named), Language::TypeScript) => {
            let symbols: Vec<String> = named.body.iter().map(|s| format!("{s:?}")).collect();
            let _ = writeln!(out, "\nexport type {} = {};", named.name, symbols.join(" | "));
        }
        (Shape::Record(named), Language::TypeScript) => {
            let _ = writeln!(out, "\nexport interface {} {{", named.name);
            for field in &named.body {
                let name = if is_identifier(&field.name) {
                    field.name.clone()
                } else {
                    format!("{:?}", field.name)
                };
                let mark = if field.optional { "?" } else { "" };
                let _ = writeln!(out, "  {name}{mark}: {};", typescript_type(&field.shape));
            }
            out.push_str("}\n");
        }
        _ => {}
    }
}

/// A field's Rust name, and whether it differs from the JSON's.
fn rust_field(name: &str) -> (String, bool) {
    const KEYWORDS: &[&str] = &[
        "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn",
        "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
        "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
        "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
        "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
    ];
    let snake: String = name
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let mut piece = String::new();
            if c.is_ascii_uppercase() && i > 0 {
                piece.push('_');
            }
            piece.push(if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' });
            piece.chars().collect::<Vec<_>>()
        })
        .collect();
    let snake =
        if snake.starts_with(|c: char| c.is_ascii_digit()) { format!("_{snake}") } else { snake };
    if KEYWORDS.contains(&snake.as_str()) {
        (format!("r#{snake}"), snake != name)
    } else {
        let renamed = snake != name;
        (snake, renamed)
    }
}

fn is_python_identifier(name: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ];
    is_identifier(name) && !name.contains('$') && !KEYWORDS.contains(&name)
}

fn is_identifier(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn rust_type(shape: &Shape) -> String {
    match shape {
        Shape::Null => "()".into(),
        Shape::Bool => "bool".into(),
        Shape::Int { unsigned: false } => "i64".into(),
        Shape::Int { unsigned: true } => "u64".into(),
        Shape::Float => "f64".into(),
        Shape::Text => "String".into(),
        Shape::Bytes => "Vec<u8>".into(),
        Shape::Array(inner) => format!("Vec<{}>", rust_type(inner)),
        Shape::Map(inner) => format!("std::collections::BTreeMap<String, {}>", rust_type(inner)),
        Shape::Optional(inner) => format!("Option<{}>", rust_type(inner)),
        Shape::Enum(named) => named.name.clone(),
        Shape::Record(named) => named.name.clone(),
        Shape::Reference(name) => format!("Box<{name}>"),
        Shape::Any => "serde_json::Value".into(),
    }
}

fn python_type(shape: &Shape) -> String {
    match shape {
        Shape::Null => "None".into(),
        Shape::Bool => "bool".into(),
        Shape::Int { .. } => "int".into(),
        Shape::Float => "float".into(),
        Shape::Text => "str".into(),
        Shape::Bytes => "List[int]".into(),
        Shape::Array(inner) => format!("List[{}]", python_type(inner)),
        Shape::Map(inner) => format!("Dict[str, {}]", python_type(inner)),
        Shape::Optional(inner) => format!("Optional[{}]", python_type(inner)),
        Shape::Enum(named) => named.name.clone(),
        Shape::Record(named) => named.name.clone(),
        Shape::Reference(name) => format!("\"{name}\""),
        Shape::Any => "Any".into(),
    }
}

fn typescript_type(shape: &Shape) -> String {
    match shape {
        Shape::Null => "null".into(),
        Shape::Bool => "boolean".into(),
        Shape::Int { .. } | Shape::Float => "number".into(),
        Shape::Text => "string".into(),
        Shape::Bytes => "number[]".into(),
        Shape::Array(inner) => {
            let inner = typescript_type(inner);
            if inner.contains(' ') {
                format!("Array<{inner}>")
            } else {
                format!("{inner}[]")
            }
        }
        Shape::Map(inner) => format!("Record<string, {}>", typescript_type(inner)),
        Shape::Optional(inner) => format!("{} | null", typescript_type(inner)),
        Shape::Enum(named) => named.name.clone(),
        Shape::Record(named) => named.name.clone(),
        Shape::Reference(name) => name.clone(),
        Shape::Any => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AVRO: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
        {"name":"order_id","type":"long"},
        {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
        {"name":"note","type":["null","string"],"default":null},
        {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["WEB","STORE"]}},
        {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
            {"name":"sku","type":"string"},{"name":"tags","type":{"type":"map","values":"int"}}]}}},
        {"name":"type","type":"boolean"}]}"#;

    #[test]
    fn avro_records_become_types_in_each_language() {
        let rust = generate(Format::Avro, AVRO, None, Language::Rust).unwrap();
        assert!(rust.contains("pub struct Line {\n    pub sku: String,\n    pub tags: std::collections::BTreeMap<String, i64>,\n}"), "{rust}");
        assert!(rust.contains("pub struct Order {\n    pub order_id: i64,\n    pub amount: String,\n    pub note: Option<String>,\n    pub kind: Kind,\n    pub lines: Vec<Line>,\n    pub r#type: bool,\n}"), "{rust}");
        assert!(rust.contains("    #[serde(rename = \"WEB\")]\n    Web,"), "{rust}");
        let python = generate(Format::Avro, AVRO, None, Language::Python).unwrap();
        assert!(python.contains("Kind = Literal[\"WEB\", \"STORE\"]"), "{python}");
        assert!(python.contains("class Order(TypedDict):\n    order_id: int\n    amount: str\n    note: Optional[str]\n    kind: Kind\n    lines: List[Line]\n    type: bool\n"), "{python}");
        let typescript = generate(Format::Avro, AVRO, None, Language::TypeScript).unwrap();
        assert!(typescript.contains("export interface Order {\n  order_id: number;\n  amount: string;\n  note: string | null;\n  kind: Kind;\n  lines: Line[];\n  type: boolean;\n}"), "{typescript}");
        assert!(
            typescript.contains(
                "export interface Line {\n  sku: string;\n  tags: Record<string, number>;\n}"
            ),
            "{typescript}"
        );
    }

    #[test]
    fn protobuf_messages_follow_the_json_mapping() {
        let proto = "syntax = \"proto3\";\npackage shop;\nimport \"google/protobuf/timestamp.proto\";\nenum Kind { WEB = 0; STORE = 1; }\nmessage Order {\n  uint64 order_id = 1;\n  repeated string tags = 2;\n  map<string, int64> counts = 3;\n  Kind kind = 4;\n  google.protobuf.Timestamp at = 5;\n  Order parent = 6;\n  oneof pay { string card = 7; string iban = 8; }\n}\n";
        let typescript = generate(Format::Protobuf, proto, None, Language::TypeScript).unwrap();
        assert!(typescript.contains("export type Kind = \"WEB\" | \"STORE\";"), "{typescript}");
        assert!(typescript.contains("export interface Order {\n  order_id: number;\n  tags: string[];\n  counts: Record<string, number>;\n  kind: Kind;\n  at: string | null;\n  parent: Order | null;\n  card: string | null;\n  iban: string | null;\n}"), "{typescript}");
        let rust = generate(Format::Protobuf, proto, Some("shop.Order"), Language::Rust).unwrap();
        assert!(
            rust.contains("pub order_id: u64,") && rust.contains("pub parent: Option<Box<Order>>,"),
            "{rust}"
        );
        assert!(generate(Format::Protobuf, proto, Some("Nope"), Language::Rust)
            .unwrap_err()
            .contains("Nope"));
    }

    #[test]
    fn json_schemas_give_required_and_optional_fields() {
        let schema = r##"{"title":"order","type":"object","required":["id","customer"],
            "properties":{"id":{"type":"integer","minimum":0},"customer":{"$ref":"#/definitions/customer"},
            "note":{"type":["string","null"]},"status":{"enum":["new","paid"]}},
            "definitions":{"customer":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}}"##;
        let typescript = generate(Format::JsonSchema, schema, None, Language::TypeScript).unwrap();
        assert!(typescript.contains("export interface Order {\n  customer: Customer;\n  id: number;\n  note?: string | null;\n  status?: Status;\n}"), "{typescript}");
        assert!(
            typescript.contains("export interface Customer {\n  name: string;\n}"),
            "{typescript}"
        );
        let python = generate(Format::JsonSchema, schema, None, Language::Python).unwrap();
        assert!(python.contains("    note: NotRequired[Optional[str]]\n"), "{python}");
        let rust = generate(Format::JsonSchema, schema, None, Language::Rust).unwrap();
        assert!(rust.contains("    pub id: u64,") && rust.contains("    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n    pub status: Option<Status>,"), "{rust}");
    }
}
