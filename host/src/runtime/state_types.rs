//! The types a function declares for its states, read from its component
//! when it is loaded, so that a state lookup can show a value as the type
//! it was written with (see `observe::postcard`) instead of its bytes.
//!
//! The Rust SDK's `declare_states!` writes a custom section named
//! [`STATE_TYPES_SECTION`] into the core module: one JSON object a line,
//! one per declared state — `{"state":"total","kind":"value","type":"i64"}`,
//! a map's with a `"key"` type too. A type ([`Shape`]) is one of the
//! strings `bool`, `u8` … `u128`, `i8` … `i128`, `f32`, `f64`, `char`,
//! `string`, `bytes`, `unit`, or an object of one member: `{"option":T}`,
//! `{"seq":T}`, `{"map":[K,V]}`, `{"tuple":[T,…]}`,
//! `{"struct":[["field",T],…]}`, `{"enum":[["Variant",T],…]}` — postcard's
//! layouts. A component without the section declares nothing; a line
//! that does not parse is skipped with a warning (the function still
//! loads: its states are shown as bytes).
//!
//! This module only reads the section: it never decodes state.

use std::collections::BTreeMap;

use serde_json::Value;

/// The custom section holding a component's state declarations.
pub const STATE_TYPES_SECTION: &str = "weir:state-types";

/// The most bytes of declarations read from one component.
const MAX_SECTION_BYTES: usize = 1 << 20;

/// How a state's values are laid out (postcard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One byte, 0 or 1.
    Bool,
    /// One byte.
    U8,
    /// A varint.
    U16,
    /// A varint.
    U32,
    /// A varint.
    U64,
    /// A varint.
    U128,
    /// One byte, two's complement.
    I8,
    /// A zigzag varint.
    I16,
    /// A zigzag varint.
    I32,
    /// A zigzag varint.
    I64,
    /// A zigzag varint.
    I128,
    /// Four bytes, little-endian.
    F32,
    /// Eight bytes, little-endian.
    F64,
    /// A one-character string.
    Char,
    /// A varint length, then UTF-8.
    String,
    /// A varint length, then bytes.
    Bytes,
    /// Nothing.
    Unit,
    /// 0 for none, 1 then the value.
    Option(Box<Shape>),
    /// A varint length, then the elements.
    Seq(Box<Shape>),
    /// A varint length, then the keys and values in turn.
    Map(Box<Shape>, Box<Shape>),
    /// The elements, no length.
    Tuple(Vec<Shape>),
    /// The fields in order, no names.
    Struct(Vec<(String, Shape)>),
    /// A varint variant index, then the variant's content.
    Enum(Vec<(String, Shape)>),
}

impl Shape {
    /// The shape `value` describes, or why it describes none.
    pub fn from_json(value: &Value) -> Result<Self, String> {
        let bad = || format!("{value} is not a state type");
        if let Some(name) = value.as_str() {
            return Ok(match name {
                "bool" => Self::Bool,
                "u8" => Self::U8,
                "u16" => Self::U16,
                "u32" => Self::U32,
                "u64" => Self::U64,
                "u128" => Self::U128,
                "i8" => Self::I8,
                "i16" => Self::I16,
                "i32" => Self::I32,
                "i64" => Self::I64,
                "i128" => Self::I128,
                "f32" => Self::F32,
                "f64" => Self::F64,
                "char" => Self::Char,
                "string" => Self::String,
                "bytes" => Self::Bytes,
                "unit" => Self::Unit,
                _ => return Err(bad()),
            });
        }
        let object = value.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
        let (tag, inner) = object.iter().next().ok_or_else(bad)?;
        let list = || inner.as_array().ok_or_else(bad);
        let named = || -> Result<Vec<(String, Shape)>, String> {
            list()?
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(name), shape]) => {
                        Ok((name.clone(), Self::from_json(shape)?))
                    }
                    _ => Err(bad()),
                })
                .collect()
        };
        Ok(match tag.as_str() {
            "option" => Self::Option(Box::new(Self::from_json(inner)?)),
            "seq" => Self::Seq(Box::new(Self::from_json(inner)?)),
            "map" => match list()?.as_slice() {
                [key, value] => {
                    Self::Map(Box::new(Self::from_json(key)?), Box::new(Self::from_json(value)?))
                }
                _ => return Err(bad()),
            },
            "tuple" => Self::Tuple(list()?.iter().map(Self::from_json).collect::<Result<_, _>>()?),
            "struct" => Self::Struct(named()?),
            "enum" => Self::Enum(named()?),
            _ => return Err(bad()),
        })
    }

    /// Its JSON description (what [`Shape::from_json`] reads).
    pub fn to_json(&self) -> Value {
        let named = |fields: &[(String, Shape)]| -> Value {
            fields.iter().map(|(name, shape)| serde_json::json!([name, shape.to_json()])).collect()
        };
        let name = match self {
            Self::Bool => "bool",
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::U128 => "u128",
            Self::I8 => "i8",
            Self::I16 => "i16",
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::I128 => "i128",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::Char => "char",
            Self::String => "string",
            Self::Bytes => "bytes",
            Self::Unit => "unit",
            Self::Option(inner) => return serde_json::json!({ "option": inner.to_json() }),
            Self::Seq(inner) => return serde_json::json!({ "seq": inner.to_json() }),
            Self::Map(k, v) => return serde_json::json!({ "map": [k.to_json(), v.to_json()] }),
            Self::Tuple(all) => {
                return serde_json::json!({ "tuple": all.iter().map(Self::to_json).collect::<Vec<_>>() })
            }
            Self::Struct(fields) => return serde_json::json!({ "struct": named(fields) }),
            Self::Enum(variants) => return serde_json::json!({ "enum": named(variants) }),
        };
        name.into()
    }
}

/// Which kind of state a declaration is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredKind {
    /// A value state.
    Value,
    /// A map state.
    Map,
    /// A list state.
    List,
}

impl DeclaredKind {
    /// Its name in a declaration.
    pub fn name(self) -> &'static str {
        match self {
            Self::Value => "value",
            Self::Map => "map",
            Self::List => "list",
        }
    }
}

/// One state's declared type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredState {
    /// Its kind.
    pub kind: DeclaredKind,
    /// A map's key type.
    pub key: Option<Shape>,
    /// Its values' (a list's elements') type.
    pub value: Shape,
}

impl DeclaredState {
    /// As in the declaration (less the name): `{"kind", "key"?, "type"}`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), self.kind.name().into());
        if let Some(key) = &self.key {
            out.insert("key".into(), key.to_json());
        }
        out.insert("type".into(), self.value.to_json());
        Value::Object(out)
    }
}

/// The state types a component declares, by state name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateTypes {
    states: BTreeMap<String, DeclaredState>,
}

impl StateTypes {
    /// What `component` (a component or a core module) declares: the
    /// [`STATE_TYPES_SECTION`]s of it and of every module in it.
    pub fn of(component: &[u8]) -> Self {
        let mut text = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            let Ok(payload) = payload else { break };
            if let wasmparser::Payload::CustomSection(section) = payload {
                if section.name() == STATE_TYPES_SECTION {
                    if text.len() + section.data().len() > MAX_SECTION_BYTES {
                        tracing::warn!("state type declarations over 1 MiB: the rest are ignored");
                        break;
                    }
                    text.extend_from_slice(section.data());
                    text.push(b'\n');
                }
            }
        }
        Self::parse(&text)
    }

    /// The declarations of `text`, one a line; lines that are not one are
    /// skipped with a warning, and a later declaration of a name wins.
    pub fn parse(text: &[u8]) -> Self {
        let mut states = BTreeMap::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
            match Self::line(line) {
                Ok((name, declared)) => {
                    states.insert(name, declared);
                }
                Err(error) => {
                    tracing::warn!(%error, "ignoring a state type declaration");
                }
            }
        }
        Self { states }
    }

    fn line(line: &[u8]) -> Result<(String, DeclaredState), String> {
        let value: Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        let name = value["state"].as_str().filter(|n| !n.is_empty()).ok_or("no state name")?;
        let kind = match value["kind"].as_str() {
            Some("value") => DeclaredKind::Value,
            Some("map") => DeclaredKind::Map,
            Some("list") => DeclaredKind::List,
            other => {
                return Err(format!("state {name:?}: kind {other:?} is not value, map or list"))
            }
        };
        let key = match (kind, value.get("key")) {
            (DeclaredKind::Map, Some(key)) => Some(Shape::from_json(key)?),
            (DeclaredKind::Map, None) => return Err(format!("map state {name:?} has no key type")),
            _ => None,
        };
        let shape = Shape::from_json(value.get("type").ok_or("no type")?)?;
        Ok((name.to_string(), DeclaredState { kind, key, value: shape }))
    }

    /// The declared type of state `name`.
    pub fn get(&self, name: &str) -> Option<&DeclaredState> {
        self.states.get(name)
    }

    /// Whether it declares nothing.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_read_from_the_modules_inside_a_component() {
        let lines = concat!(
            r#"{"state":"total","kind":"value","type":"i64"}\n"#,
            r#"{"state":"seen","kind":"map","key":"string","type":{"seq":{"tuple":["u8","bool"]}}}\n"#,
        );
        let escaped = lines.replace('"', "\\\"").replace("\\n", "\\0a");
        let component = wat::parse_str(format!(
            r#"(component
                 (core module $m (@custom "weir:state-types" "{escaped}"))
                 (core module $n (@custom "weir:state-types" "{{\"state\":\"recent\",\"kind\":\"list\",\"type\":{{\"struct\":[[\"id\",\"u64\"]]}}}}\0anot json\0a"))
                 (core instance (instantiate $m)))"#
        ))
        .unwrap();
        let types = StateTypes::of(&component);
        let total = types.get("total").unwrap();
        assert_eq!(
            (total.kind, &total.key, &total.value),
            (DeclaredKind::Value, &None, &Shape::I64)
        );
        let seen = types.get("seen").unwrap();
        assert_eq!(seen.key, Some(Shape::String));
        assert_eq!(seen.value, Shape::Seq(Box::new(Shape::Tuple(vec![Shape::U8, Shape::Bool]))));
        assert_eq!(
            types.get("recent").map(|r| r.to_json()),
            Some(serde_json::json!({"kind": "list", "type": {"struct": [["id", "u64"]]}}))
        );
        assert!(types.get("other").is_none());
        assert!(StateTypes::of(b"not wasm").is_empty());
    }

    #[test]
    fn every_shape_reads_back_as_it_is_written_and_nonsense_is_refused() {
        let text = r#"{"tuple":["bool","u8","u16","u32","u64","u128","i8","i16","i32","i64","i128","f32","f64","char","string","bytes","unit",{"option":"u8"},{"map":["string",{"seq":"i64"}]},{"struct":[["a","u8"]]},{"enum":[["A","unit"],["B",{"tuple":["u8","u8"]}]]}]}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let shape = Shape::from_json(&value).unwrap();
        assert_eq!(shape.to_json(), value);
        for bad in [
            serde_json::json!("u256"),
            serde_json::json!({"seq": "u8", "option": "u8"}),
            serde_json::json!({"map": ["u8"]}),
            serde_json::json!({"struct": [["a"]]}),
            serde_json::json!(7),
        ] {
            assert!(Shape::from_json(&bad).is_err(), "{bad}");
        }
        let types = StateTypes::parse(
            br#"{"state":"m","kind":"map","type":"u8"}
{"state":"","kind":"value","type":"u8"}
{"state":"v","kind":"queue","type":"u8"}"#,
        );
        assert!(types.is_empty(), "a map without a key type, no name, an unknown kind");
    }
}
