//! A state value as JSON, decoded from the postcard bytes a Rust function
//! stored by the type it declared for the state ([`Shape`], read from its
//! component by `runtime::state_types`): what a state lookup shows for a
//! declared state.
//!
//! Integers are JSON numbers (128-bit ones beyond 64 bits are strings),
//! floats numbers (`null` for NaN and infinities), `char` and strings
//! strings, bytes hex, unit and `None` `null`, sequences and tuples
//! arrays, structs objects by field name, maps objects when their keys are
//! strings and `[key, value]` pairs otherwise, a unit variant its name and
//! any other variant `{"Variant": content}` (serde's JSON forms).
//!
//! The bytes are the guest's and the shape the component's: neither is
//! trusted. Lengths are checked against the bytes left, the values made
//! are bounded, and bytes the shape does not use up, like any other
//! mismatch, are an error — never a panic.

use serde_json::Value;

use crate::runtime::Shape;

/// The most JSON values one decoding makes.
const MAX_VALUES: usize = 100_000;

/// `bytes` decoded as `shape` describes, or why they do not fit it.
pub fn to_json(bytes: &[u8], shape: &Shape) -> Result<Value, String> {
    let mut reader = Reader { bytes, budget: MAX_VALUES };
    let value = reader.value(shape)?;
    if !reader.bytes.is_empty() {
        return Err(format!("{} bytes left over", reader.bytes.len()));
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    /// Values it may still make.
    budget: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err(format!("needs {n} bytes, {} left", self.bytes.len()));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    /// A varint of at most `bits` bits.
    fn varint(&mut self, bits: u32) -> Result<u128, String> {
        let mut value = 0u128;
        for i in 0..bits.div_ceil(7) {
            let byte = self.byte()?;
            let part = u128::from(byte & 0x7f);
            let shift = 7 * i;
            // Within its last byte, only the bits that fit.
            if bits - shift < 7 && part >> (bits - shift) != 0 {
                return Err(format!("a varint over {bits} bits"));
            }
            value |= part << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("a varint over {bits} bits"))
    }

    /// A zigzag varint of at most `bits` bits.
    fn signed(&mut self, bits: u32) -> Result<i128, String> {
        let n = self.varint(bits)?;
        Ok((n >> 1) as i128 ^ -((n & 1) as i128))
    }

    /// The length of a string or bytes (what is left is checked by `take`).
    fn byte_len(&mut self) -> Result<usize, String> {
        let len = self.varint(64)?;
        usize::try_from(len).map_err(|_| format!("a length of {len}"))
    }

    /// The length of a collection: at most the values it may still make.
    fn len(&mut self) -> Result<usize, String> {
        let len = self.varint(64)?;
        usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.budget)
            .ok_or_else(|| format!("a length of {len} is more than this state holds"))
    }

    fn text(&mut self) -> Result<&'a str, String> {
        let len = self.byte_len()?;
        std::str::from_utf8(self.take(len)?).map_err(|_| "a string that is not UTF-8".to_string())
    }

    fn value(&mut self, shape: &Shape) -> Result<Value, String> {
        self.budget = self.budget.checked_sub(1).ok_or("more values than a lookup shows")?;
        let unsigned =
            |n: u128| u64::try_from(n).map_or_else(|_| n.to_string().into(), Value::from);
        let signed = |n: i128| i64::try_from(n).map_or_else(|_| n.to_string().into(), Value::from);
        Ok(match shape {
            Shape::Bool => match self.byte()? {
                0 => false.into(),
                1 => true.into(),
                other => return Err(format!("{other} is not a bool")),
            },
            Shape::U8 => self.byte()?.into(),
            Shape::I8 => (self.byte()? as i8).into(),
            Shape::U16 => unsigned(self.varint(16)?),
            Shape::U32 => unsigned(self.varint(32)?),
            Shape::U64 => unsigned(self.varint(64)?),
            Shape::U128 => unsigned(self.varint(128)?),
            Shape::I16 => signed(self.signed(16)?),
            Shape::I32 => signed(self.signed(32)?),
            Shape::I64 => signed(self.signed(64)?),
            Shape::I128 => signed(self.signed(128)?),
            Shape::F32 => {
                let bytes = self.take(4)?.try_into().map_err(|_| "a short f32")?;
                float(f64::from(f32::from_le_bytes(bytes)))
            }
            Shape::F64 => {
                let bytes = self.take(8)?.try_into().map_err(|_| "a short f64")?;
                float(f64::from_le_bytes(bytes))
            }
            Shape::Char => {
                let text = self.text()?;
                if text.chars().count() != 1 {
                    return Err(format!("{text:?} is not one char"));
                }
                text.into()
            }
            Shape::String => self.text()?.into(),
            Shape::Bytes => {
                let len = self.byte_len()?;
                hex::encode(self.take(len)?).into()
            }
            Shape::Unit => Value::Null,
            Shape::Option(inner) => match self.byte()? {
                0 => Value::Null,
                1 => self.value(inner)?,
                other => return Err(format!("{other} is not an option's tag")),
            },
            Shape::Seq(inner) => {
                let len = self.len()?;
                (0..len).map(|_| self.value(inner)).collect::<Result<Vec<_>, _>>()?.into()
            }
            Shape::Map(key, value) => {
                let len = self.len()?;
                let named = matches!(**key, Shape::String | Shape::Char);
                let mut pairs = Vec::with_capacity(len.min(1024));
                let mut object = serde_json::Map::new();
                for _ in 0..len {
                    let k = self.value(key)?;
                    let v = self.value(value)?;
                    match (named, k) {
                        (true, Value::String(k)) => {
                            object.insert(k, v);
                        }
                        (_, k) => pairs.push(serde_json::json!([k, v])),
                    }
                }
                if named {
                    Value::Object(object)
                } else {
                    Value::Array(pairs)
                }
            }
            Shape::Tuple(all) => {
                all.iter().map(|s| self.value(s)).collect::<Result<Vec<_>, _>>()?.into()
            }
            Shape::Struct(fields) => {
                let mut object = serde_json::Map::new();
                for (name, shape) in fields {
                    let value = self.value(shape)?;
                    object.insert(name.clone(), value);
                }
                Value::Object(object)
            }
            Shape::Enum(variants) => {
                let index = self.varint(32)?;
                let (name, content) = usize::try_from(index)
                    .ok()
                    .and_then(|i| variants.get(i))
                    .ok_or_else(|| format!("variant {index} is not declared"))?;
                match content {
                    Shape::Unit => name.clone().into(),
                    content => {
                        let mut object = serde_json::Map::new();
                        object.insert(name.clone(), self.value(content)?);
                        Value::Object(object)
                    }
                }
            }
        })
    }
}

/// A float as JSON: `null` when it has no JSON form.
fn float(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        Shape::from_json(&serde_json::from_str(text).unwrap()).unwrap()
    }

    fn decoded(bytes: &[u8], text: &str) -> Result<Value, String> {
        to_json(bytes, &shape(text))
    }

    #[test]
    fn integers_floats_bools_and_text_decode_as_postcard_wrote_them() {
        use serde_json::json;
        let cases: &[(&[u8], &str, Value)] = &[
            // 5000 as a zigzag varint (10000 = 0x2710), -1, and i64::MIN.
            (&[0x90, 0x4e], r#""i64""#, json!(5000)),
            (&[0x01], r#""i64""#, json!(-1)),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                r#""i64""#,
                json!(i64::MIN),
            ),
            (&[0x88, 0x27], r#""u64""#, json!(5000)),
            (&[0xff, 0xff, 0x03], r#""u16""#, json!(65535)),
            (&[0x03], r#""i32""#, json!(-2)),
            (&[0xfe], r#""u8""#, json!(254)),
            (&[0xfe], r#""i8""#, json!(-2)),
            (&[0x01], r#""bool""#, json!(true)),
            (&1.5f32.to_le_bytes(), r#""f32""#, json!(1.5)),
            (&(-0.25f64).to_le_bytes(), r#""f64""#, json!(-0.25)),
            (&f64::NAN.to_le_bytes(), r#""f64""#, Value::Null),
            (&[0x02, b'o', b'k'], r#""string""#, json!("ok")),
            (&[0x02, 0xc3, 0xa9], r#""char""#, json!("é")),
            (&[0x02, 0xab, 0xcd], r#""bytes""#, json!("abcd")),
            (&[], r#""unit""#, Value::Null),
        ];
        for (bytes, text, expected) in cases {
            assert_eq!(decoded(bytes, text).as_ref(), Ok(expected), "{text} {bytes:?}");
        }
        // u128 beyond u64: a string. 2^64 is 0x80 × 9 then 0x02.
        let big = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02];
        assert_eq!(decoded(&big, r#""u128""#), Ok(json!("18446744073709551616")));
        // A string longer than the values a lookup makes is one value.
        let long = [&[0xc0, 0x9a, 0x0c][..], &[b'a'; 200_000]].concat();
        assert_eq!(
            decoded(&long, r#""string""#).map(|v| v.as_str().map(str::len)),
            Ok(Some(200_000))
        );
    }

    #[test]
    fn options_sequences_maps_tuples_structs_and_enums_nest() {
        use serde_json::json;
        assert_eq!(decoded(&[0x00], r#"{"option":"u8"}"#), Ok(Value::Null));
        assert_eq!(decoded(&[0x01, 0x07], r#"{"option":"u8"}"#), Ok(json!(7)));
        assert_eq!(decoded(&[0x03, 1, 2, 3], r#"{"seq":"u8"}"#), Ok(json!([1, 2, 3])));
        assert_eq!(
            decoded(&[0x02, 0x01, b'a', 0x02, 0x01, b'b', 0x04], r#"{"map":["string","i32"]}"#),
            Ok(json!({"a": 1, "b": 2}))
        );
        assert_eq!(
            decoded(&[0x01, 0x05, 0x01], r#"{"map":["u8","bool"]}"#),
            Ok(json!([[5, true]])),
            "keys that are not strings: pairs"
        );
        assert_eq!(
            decoded(
                &[0x01, 0x02, b'h', b'i', 0x00],
                r#"{"tuple":["bool","string","unit",{"option":"u8"}]}"#
            ),
            Ok(json!([true, "hi", null, null]))
        );
        let order = r#"{"struct":[["id","u64"],["lines",{"seq":{"struct":[["sku","string"],["cents","i64"]]}}]]}"#;
        assert_eq!(
            decoded(&[0x2a, 0x01, 0x01, b'x', 0x90, 0x4e], order),
            Ok(json!({"id": 42, "lines": [{"sku": "x", "cents": 5000}]}))
        );
        let status =
            r#"{"enum":[["Open","unit"],["Paid","i64"],["Moved",{"struct":[["to","u8"]]}]]}"#;
        assert_eq!(decoded(&[0x00], status), Ok(json!("Open")));
        assert_eq!(decoded(&[0x01, 0x90, 0x4e], status), Ok(json!({"Paid": 5000})));
        assert_eq!(decoded(&[0x02, 0x09], status), Ok(json!({"Moved": {"to": 9}})));
    }

    #[test]
    fn bytes_that_do_not_fit_their_type_are_errors_never_panics() {
        for (bytes, text) in [
            (&[0x90, 0x4e, 0x00][..], r#""i64""#),
            (&[0x90][..], r#""i64""#),
            (&[0xff, 0xff, 0x07][..], r#""u16""#),
            (&[0x80; 11][..], r#""u64""#),
            (&[0x02][..], r#""bool""#),
            (&[0x05, b'a'][..], r#""string""#),
            (&[0x02, 0xff, 0xfe][..], r#""string""#),
            (&[0x02, b'a', b'b'][..], r#""char""#),
            (&[0x02][..], r#"{"option":"u8"}"#),
            (&[0x03][..], r#"{"enum":[["A","unit"]]}"#),
            (&[0x01, 0x02][..], r#""f32""#),
            // A billion units would make a billion values from no bytes.
            (&[0x80, 0x94, 0xeb, 0xdc, 0x03][..], r#"{"seq":"unit"}"#),
            (&[0xff, 0xff, 0xff, 0xff, 0x0f][..], r#"{"seq":"u8"}"#),
        ] {
            assert!(decoded(bytes, text).is_err(), "{text} {bytes:?}: {:?}", decoded(bytes, text));
        }
    }
}
