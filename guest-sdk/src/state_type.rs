//! Declaring the types of a function's states, so that the host can show
//! them: a state lookup (`weir pipeline state`, `GET
//! /v1/pipelines/{name}/state`) decodes a declared state's stored bytes
//! as the type it was written with and returns it as JSON, instead of
//! the hex of its [`codec`](crate::codec) bytes.
//!
//! A type says how [`codec`](crate::codec) (postcard) lays it out by
//! implementing [`StateType`]: the SDK does for integers, floats, `bool`,
//! `char`, `String`, `()`, `Option`, `Vec`, sets, maps, tuples, arrays,
//! `Box` and [`Cents`](crate::Cents); `#[derive(StateType)]` does for
//! structs and enums of such types. [`declare_states!`](crate::declare_states)
//! writes each declaration into the component, in a custom section named
//! [`SECTION`] that the host reads when it loads the function.
//!
//! The section holds one JSON object per line, one per declared state:
//! `{"state":"total","kind":"value","type":"i64"}`, `{"state":"seen",
//! "kind":"map","key":"string","type":"u64"}`, `{"state":"recent",
//! "kind":"list","type":{"struct":[["id","u64"],["note","string"]]}}`.
//! A type is one of the strings `bool`, `u8` … `u128`, `i8` … `i128`,
//! `f32`, `f64`, `char`, `string`, `bytes` or `unit`, or an object with
//! one member: `{"option":T}`, `{"seq":T}` (a `Vec` or set),
//! `{"map":[K,V]}`, `{"tuple":[T,…]}` (tuples, arrays, tuple structs),
//! `{"struct":[["field",T],…]}` (fields in declaration order) or
//! `{"enum":[["Variant",T],…]}` (a unit variant's `T` is `"unit"`). Lines
//! are self-contained because the linker concatenates the sections of
//! every declaration.
//!
//! Nothing here runs: the descriptions are built by `const fn`s at
//! compile time, and a description that does not fit [`Shape`]'s
//! [`CAPACITY`] bytes is a compile error.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// The custom section a component's state declarations are in.
pub const SECTION: &str = "weir:state-types";

/// The longest description of one type or declaration, in bytes.
pub const CAPACITY: usize = 2048;

/// A type's description (JSON text), built at compile time.
#[derive(Clone, Copy)]
pub struct Shape {
    bytes: [u8; CAPACITY],
    len: usize,
}

impl Shape {
    /// The description `text` (JSON, as [the module](self) describes).
    pub const fn new(text: &str) -> Self {
        Self { bytes: [0; CAPACITY], len: 0 }.push(text)
    }

    /// `text` appended as it is.
    pub const fn push(mut self, text: &str) -> Self {
        let text = text.as_bytes();
        let mut i = 0;
        while i < text.len() {
            self = self.byte(text[i]);
            i += 1;
        }
        self
    }

    /// `other`'s description appended.
    pub const fn push_shape(mut self, other: &Shape) -> Self {
        let mut i = 0;
        while i < other.len {
            self = self.byte(other.bytes[i]);
            i += 1;
        }
        self
    }

    /// `text` appended as a JSON string (quoted, escaped).
    pub const fn push_string(mut self, text: &str) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let text = text.as_bytes();
        self = self.byte(b'"');
        let mut i = 0;
        while i < text.len() {
            let b = text[i];
            if b == b'"' || b == b'\\' {
                self = self.byte(b'\\').byte(b);
            } else if b < 0x20 {
                self = self.push("\\u00").byte(HEX[(b >> 4) as usize]).byte(HEX[(b & 15) as usize]);
            } else {
                self = self.byte(b);
            }
            i += 1;
        }
        self.byte(b'"')
    }

    const fn byte(mut self, b: u8) -> Self {
        assert!(
            self.len < CAPACITY,
            "a state type's description is longer than weir_sdk::state_type::CAPACITY"
        );
        self.bytes[self.len] = b;
        self.len += 1;
        self
    }

    /// Its length in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (no type has an empty description).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its bytes, exactly `N` of them (`N` must be [`Shape::len`]).
    pub const fn to_array<const N: usize>(&self) -> [u8; N] {
        assert!(N == self.len, "to_array takes exactly the description's length");
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = self.bytes[i];
            i += 1;
        }
        out
    }

    /// The description.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Debug for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A type whose [`codec`](crate::codec) layout the host can decode: its
/// description. Derive it for your structs and enums with
/// `#[derive(StateType)]` (their fields' types must implement it too).
///
/// ```
/// use weir_sdk::StateType;
///
/// #[derive(serde::Serialize, serde::Deserialize, StateType)]
/// struct Visit { page: String, seconds: Option<u32> }
///
/// assert_eq!(
///     Visit::SHAPE.as_str(),
///     r#"{"struct":[["page","string"],["seconds",{"option":"u32"}]]}"#
/// );
/// assert_eq!(<Vec<(u8, i64)>>::SHAPE.as_str(), r#"{"seq":{"tuple":["u8","i64"]}}"#);
/// ```
pub trait StateType {
    /// How the type is encoded (see [the module](self)).
    const SHAPE: Shape;
}

macro_rules! named {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(impl StateType for $t {
            const SHAPE: Shape = Shape::new(concat!("\"", $name, "\""));
        })*
    };
}

named! {
    bool => "bool", u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64", u128 => "u128",
    usize => "u64", i8 => "i8", i16 => "i16", i32 => "i32", i64 => "i64", i128 => "i128",
    isize => "i64", f32 => "f32", f64 => "f64", char => "char", String => "string",
    () => "unit", crate::Cents => "i64",
}

impl<T: StateType> StateType for Option<T> {
    const SHAPE: Shape = Shape::new("{\"option\":").push_shape(&T::SHAPE).push("}");
}

impl<T: StateType + ?Sized> StateType for Box<T> {
    const SHAPE: Shape = T::SHAPE;
}

macro_rules! sequences {
    ($($t:ident $(: $bound:path)?),*) => {
        $(impl<T: StateType $(+ $bound)?> StateType for $t<T> {
            const SHAPE: Shape = Shape::new("{\"seq\":").push_shape(&T::SHAPE).push("}");
        })*
    };
}

sequences!(Vec, VecDeque, BTreeSet, HashSet);

impl<T: StateType> StateType for [T] {
    const SHAPE: Shape = Shape::new("{\"seq\":").push_shape(&T::SHAPE).push("}");
}

impl<K: StateType, V: StateType> StateType for BTreeMap<K, V> {
    const SHAPE: Shape = map_shape(&K::SHAPE, &V::SHAPE);
}

impl<K: StateType, V: StateType, S> StateType for HashMap<K, V, S> {
    const SHAPE: Shape = map_shape(&K::SHAPE, &V::SHAPE);
}

const fn map_shape(key: &Shape, value: &Shape) -> Shape {
    Shape::new("{\"map\":[").push_shape(key).push(",").push_shape(value).push("]}")
}

/// An array is a tuple of `N` elements (postcard writes no length).
impl<T: StateType, const N: usize> StateType for [T; N] {
    const SHAPE: Shape = {
        let mut shape = Shape::new("{\"tuple\":[");
        let mut i = 0;
        while i < N {
            if i > 0 {
                shape = shape.push(",");
            }
            shape = shape.push_shape(&T::SHAPE);
            i += 1;
        }
        shape.push("]}")
    };
}

macro_rules! tuples {
    ($(($first:ident $(, $rest:ident)*)),*) => {
        $(impl<$first: StateType $(, $rest: StateType)*> StateType for ($first, $($rest,)*) {
            const SHAPE: Shape = Shape::new("{\"tuple\":[")
                .push_shape(&$first::SHAPE)
                $(.push(",").push_shape(&$rest::SHAPE))*
                .push("]}");
        })*
    };
}

tuples!((A), (A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E), (A, B, C, D, E, F));

/// What [`declare_states!`](crate::declare_states) writes for one state: a
/// line of [`SECTION`].
#[doc(hidden)]
pub const fn declaration(name: &str, kind: &str, key: Option<&Shape>, value: &Shape) -> Shape {
    let mut line = Shape::new("{\"state\":").push_string(name).push(",\"kind\":");
    line = line.push_string(kind);
    if let Some(key) = key {
        line = line.push(",\"key\":").push_shape(key);
    }
    line.push(",\"type\":").push_shape(value).push("}\n")
}

/// Declares the types of a function's states, so that a state lookup shows
/// their values as JSON (see [the module](crate::state_type)). One entry
/// per state: `value "name": T`, `map "name": K => V` or `list "name": T`,
/// with the name the function opens the state by, and the type its
/// [`ValueState`](crate::ValueState), [`MapState`](crate::MapState) or
/// [`ListState`](crate::ListState) has (each must implement
/// [`StateType`]). States not declared are shown as bytes, as before. It
/// writes a custom section of the component and generates no code: what
/// the function computes is the same with or without it.
///
/// ```
/// use weir_sdk::{declare_states, StateType};
///
/// #[derive(serde::Serialize, serde::Deserialize, StateType)]
/// struct Visit { page: String, seconds: u32 }
///
/// declare_states! {
///     value "total": i64,
///     map "seen": String => u64,
///     list "visits": Visit,
/// }
/// ```
#[macro_export]
macro_rules! declare_states {
    ($($kind:ident $name:literal : $first:ty $(=> $second:ty)?),* $(,)?) => {
        $($crate::declare_states!(@one $kind $name $first $(, $second)?);)*
    };
    (@one value $name:literal $t:ty) => {
        $crate::declare_states!(@write $crate::state_type::declaration(
            $name, "value", ::core::option::Option::None, &<$t as $crate::StateType>::SHAPE));
    };
    (@one list $name:literal $t:ty) => {
        $crate::declare_states!(@write $crate::state_type::declaration(
            $name, "list", ::core::option::Option::None, &<$t as $crate::StateType>::SHAPE));
    };
    (@one map $name:literal $k:ty, $v:ty) => {
        $crate::declare_states!(@write $crate::state_type::declaration(
            $name, "map", ::core::option::Option::Some(&<$k as $crate::StateType>::SHAPE),
            &<$v as $crate::StateType>::SHAPE));
    };
    (@one $kind:ident $name:literal $($rest:tt)*) => {
        ::core::compile_error!(concat!(
            "a state is declared as `value \"name\": T`, `map \"name\": K => V` or `list \"name\": T`, not `",
            stringify!($kind), " ", $name, "…`"
        ));
    };
    (@write $line:expr) => {
        const _: () = {
            #[allow(dead_code)]
            const LINE: $crate::state_type::Shape = $line;
            // Kept by the linker as a custom section of the core module;
            // nothing reads it at run time.
            #[cfg(target_arch = "wasm32")]
            #[used]
            #[link_section = "weir:state-types"]
            static DECLARED: [u8; LINE.len()] = LINE.to_array();
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateType;

    #[derive(StateType)]
    #[allow(dead_code)]
    struct Visit {
        page: String,
        seconds: Option<u32>,
    }

    #[derive(StateType)]
    #[allow(dead_code)]
    enum Status {
        Open,
        Paid(crate::Cents),
        Moved { to: (u8, u8) },
    }

    #[derive(StateType)]
    #[allow(dead_code)]
    struct Meters(f64);

    #[derive(StateType)]
    #[allow(dead_code)]
    struct Point(i32, i32);

    #[test]
    fn every_supported_type_has_its_description() {
        let cases: [(Shape, &str); 12] = [
            (i64::SHAPE, r#""i64""#),
            (<Option<String>>::SHAPE, r#"{"option":"string"}"#),
            (<Vec<u8>>::SHAPE, r#"{"seq":"u8"}"#),
            (<BTreeMap<String, f32>>::SHAPE, r#"{"map":["string","f32"]}"#),
            (<(bool, char, ())>::SHAPE, r#"{"tuple":["bool","char","unit"]}"#),
            (<[u16; 3]>::SHAPE, r#"{"tuple":["u16","u16","u16"]}"#),
            (<Box<usize>>::SHAPE, r#""u64""#),
            (Visit::SHAPE, r#"{"struct":[["page","string"],["seconds",{"option":"u32"}]]}"#),
            (
                Status::SHAPE,
                r#"{"enum":[["Open","unit"],["Paid","i64"],["Moved",{"struct":[["to",{"tuple":["u8","u8"]}]]}]]}"#,
            ),
            (Meters::SHAPE, r#""f64""#),
            (Point::SHAPE, r#"{"tuple":["i32","i32"]}"#),
            (<HashSet<i128>>::SHAPE, r#"{"seq":"i128"}"#),
        ];
        for (shape, expected) in cases {
            assert_eq!(shape.as_str(), expected);
        }
    }

    #[test]
    fn a_declaration_is_one_line_with_its_name_escaped() {
        let line = declaration("a \"b\"\n", "map", Some(&String::SHAPE), &u64::SHAPE);
        assert_eq!(
            line.as_str(),
            "{\"state\":\"a \\\"b\\\"\\u000a\",\"kind\":\"map\",\"key\":\"string\",\"type\":\"u64\"}\n"
        );
        const LINE: Shape = declaration("total", "value", None, &i64::SHAPE);
        const BYTES: [u8; LINE.len()] = LINE.to_array();
        assert_eq!(&BYTES[..], b"{\"state\":\"total\",\"kind\":\"value\",\"type\":\"i64\"}\n");
    }

    // The macro compiles for each kind (its section exists on wasm32 only).
    declare_states! {
        value "total": i64,
        map "seen": String => Vec<u8>,
        list "visits": Visit,
    }
}
