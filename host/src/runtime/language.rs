//! Which language a component was written in, as far as its limits are
//! concerned: compiled code (Rust, C, Go…) or an interpreter compiled to
//! Wasm (CPython from componentize-py, SpiderMonkey from componentize-js).
//!
//! An interpreter starts with its whole runtime in linear memory and runs
//! a batch tens of times slower than compiled code, so it gets its own
//! defaults for the CPU time of a call and for memory
//! ([`FunctionLimits::defaults_for`](super::FunctionLimits::defaults_for)).
//! The SDKs' build commands (`python3 -m weir build`, `weir-build`) say
//! which language a component is in with a top-level custom section named
//! [`LANGUAGE_SECTION`]; a component without it counts as compiled. This
//! module only reads that section: it never guesses from the code.

use std::fmt;

/// The custom section the Weir SDKs add to a component, holding its
/// language's name (`python`, `javascript`).
pub const LANGUAGE_SECTION: &str = "weir:language";

/// The language a function's component is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Language {
    /// Compiled to Wasm ahead of time (Rust, C, Go…): the default.
    #[default]
    Compiled,
    /// Python on CPython, built with componentize-py.
    Python,
    /// JavaScript or TypeScript on SpiderMonkey, built with
    /// componentize-js.
    JavaScript,
}

impl Language {
    /// The language `component` says it is in (its [`LANGUAGE_SECTION`]),
    /// or [`Language::Compiled`].
    pub fn of(component: &[u8]) -> Self {
        // Only the component's own sections: nested modules are skipped
        // whole, so this reads a few headers, not the code.
        let mut parser = wasmparser::Parser::new(0);
        let mut rest = component;
        loop {
            let Ok(wasmparser::Chunk::Parsed { consumed, payload }) = parser.parse(rest, true)
            else {
                return Self::Compiled;
            };
            rest = &rest[consumed..];
            match payload {
                wasmparser::Payload::CustomSection(section)
                    if section.name() == LANGUAGE_SECTION =>
                {
                    return Self::named(section.data());
                }
                wasmparser::Payload::ModuleSection { unchecked_range, .. }
                | wasmparser::Payload::ComponentSection { unchecked_range, .. } => {
                    let skip = usize::try_from(unchecked_range.end - unchecked_range.start);
                    let Some(after) = skip.ok().and_then(|skip| rest.get(skip..)) else {
                        return Self::Compiled;
                    };
                    // The parser has moved past the section already.
                    rest = after;
                }
                wasmparser::Payload::End(_) => return Self::Compiled,
                _ => {}
            }
        }
    }

    /// The language a [`LANGUAGE_SECTION`] names.
    fn named(name: &[u8]) -> Self {
        match name {
            b"python" => Self::Python,
            b"javascript" => Self::JavaScript,
            _ => Self::Compiled,
        }
    }

    /// Whether it runs on an interpreter inside the component.
    pub fn is_interpreted(self) -> bool {
        self != Self::Compiled
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Compiled => "compiled",
            Self::Python => "python",
            Self::JavaScript => "javascript",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `component` with a top-level custom section `name` holding `data`.
    fn with_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
        let mut section = Vec::new();
        leb128(&mut section, name.len() as u64);
        section.extend_from_slice(name.as_bytes());
        section.extend_from_slice(data);
        let mut out = component.to_vec();
        out.push(0);
        leb128(&mut out, section.len() as u64);
        out.extend_from_slice(&section);
        out
    }

    fn leb128(out: &mut Vec<u8>, mut value: u64) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn reads_the_section_the_sdks_add() {
        let component = wat::parse_str(
            r#"(component (core module $m (@custom "weir:language" "python")) (core instance (instantiate $m)))"#,
        )
        .unwrap();
        // A section inside a nested module is not the component's.
        assert_eq!(Language::of(&component), Language::Compiled);
        let tagged = with_section(&component, LANGUAGE_SECTION, b"python");
        assert_eq!(Language::of(&tagged), Language::Python);
        let tagged = with_section(&component, LANGUAGE_SECTION, b"javascript");
        assert_eq!(Language::of(&tagged), Language::JavaScript);
        let tagged = with_section(&component, LANGUAGE_SECTION, b"cobol");
        assert_eq!(Language::of(&tagged), Language::Compiled);
        assert_eq!(Language::of(b"not wasm"), Language::Compiled);
        assert_eq!(Language::of(&tagged[..tagged.len() / 2]), Language::Compiled);
    }
}
