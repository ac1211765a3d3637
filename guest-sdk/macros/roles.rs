//! Reads `wit/roles.toml`, the table of function kinds, for two build
//! scripts: this crate's (the `#[weir_sdk::function]` lookup from trait to
//! world) and `host/build.rs` (the host's `Role`), which includes this file
//! with `#[path]`. Each uses part of it.
//!
//! It reads the subset of TOML the table is written in — `[[role]]`
//! headers, `key = "text"`, one-line `key = ["a", "b"]` and whole-line
//! comments — and fails, naming the line, on anything else, so a build
//! never goes on with a table it misread. It has no dependencies: every
//! function build compiles this crate's build script.

#![allow(dead_code)]

use std::path::Path;

/// One row of the table: one kind of function. The fields are described
/// in the table's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The kind's name (`key`, `broadcast-process`).
    pub name: String,
    /// What it does.
    pub doc: String,
    /// The pipeline spec field naming such a function.
    pub spec: String,
    /// The Rust SDK trait.
    pub rust_trait: String,
    /// The WIT world of a component of this kind alone.
    pub world: String,
    /// The interface it exports.
    pub export: String,
    /// A kind whose exports it needs too.
    pub extends: Option<String>,
    /// The host interfaces its world imports (besides `types`).
    pub imports: Vec<String>,
    /// What it is called with (`events`, `keyed`, …).
    pub inputs: String,
    /// The SDKs that implement it.
    pub sdks: Vec<String>,
}

impl Row {
    /// Whether the SDK `sdk` (`rust`, `python`, `typescript`) implements it.
    pub fn in_sdk(&self, sdk: &str) -> bool {
        self.sdks.iter().any(|s| s == sdk)
    }
}

/// The rows of the table at `path`; panics (a build script's way to fail)
/// with the file and line when it cannot be read.
pub fn read(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A value of the subset: text or a list of texts.
enum Value {
    Text(String),
    List(Vec<String>),
}

/// The rows of the table `text`.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut tables: Vec<(usize, Vec<(String, Value)>)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "[[role]]" {
            tables.push((number, Vec::new()));
            continue;
        }
        let at = |message: &str| format!("line {number}: {message}");
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| at("expected `[[role]]`, `key = \"text\"` or `key = [\"a\", \"b\"]`"))?;
        let key = key.trim();
        let Some((_, fields)) = tables.last_mut() else {
            return Err(at("a key before the first `[[role]]`"));
        };
        if fields.iter().any(|(k, _)| k == key) {
            return Err(at(&format!("`{key}` given twice")));
        }
        fields.push((key.to_string(), parse_value(value.trim()).map_err(|e| at(&e))?));
    }
    let rows = tables
        .into_iter()
        .map(|(number, fields)| {
            row(fields).map_err(|e| format!("the [[role]] of line {number}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    check(&rows)?;
    Ok(rows)
}

fn parse_value(text: &str) -> Result<Value, String> {
    match text.strip_prefix('[') {
        Some(list) => {
            let items = list.strip_suffix(']').ok_or("a list closes on its line, with `]`")?;
            let items = items.split(',').map(str::trim).filter(|item| !item.is_empty());
            items.map(parse_text).collect::<Result<_, _>>().map(Value::List)
        }
        None => parse_text(text).map(Value::Text),
    }
}

fn parse_text(text: &str) -> Result<String, String> {
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| !t.contains(['"', '\\']))
        .map(str::to_string)
        .ok_or_else(|| format!("expected \"text\" (no quotes or escapes inside), found {text}"))
}

fn row(fields: Vec<(String, Value)>) -> Result<Row, String> {
    let mut texts = std::collections::BTreeMap::new();
    let mut lists = std::collections::BTreeMap::new();
    for (key, value) in fields {
        match value {
            Value::Text(text) => {
                texts.insert(key, text);
            }
            Value::List(list) => {
                lists.insert(key, list);
            }
        }
    }
    let mut text = |key: &str| texts.remove(key).ok_or(format!("needs `{key} = \"…\"`"));
    let mut list = |key: &str| lists.remove(key).ok_or(format!("needs `{key} = [\"…\"]`"));
    let row = Row {
        name: text("name")?,
        doc: text("doc")?,
        spec: text("spec")?,
        rust_trait: text("trait")?,
        world: text("world")?,
        export: text("export")?,
        extends: text("extends").ok(),
        imports: list("imports")?,
        inputs: text("inputs")?,
        sdks: list("sdks")?,
    };
    if let Some(key) = texts.keys().chain(lists.keys()).next() {
        return Err(format!("unknown field `{key}` (or one of the wrong type)"));
    }
    Ok(row)
}

/// What the generated code relies on: kebab-case names, each once, and
/// `extends` naming a row before it.
fn check(rows: &[Row]) -> Result<(), String> {
    let kebab = |s: &str| {
        !s.is_empty()
            && s.split('-').all(|part| {
                part.starts_with(|c: char| c.is_ascii_lowercase())
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            })
    };
    for (index, row) in rows.iter().enumerate() {
        let name = &row.name;
        for (field, value) in [
            ("name", name),
            ("world", &row.world),
            ("export", &row.export),
            ("inputs", &row.inputs),
        ] {
            if !kebab(value) {
                return Err(format!("{name}: `{field}` is not kebab-case: {value:?}"));
            }
        }
        if rows[..index].iter().any(|other| other.name == *name) {
            return Err(format!("two rows are named {name:?}"));
        }
        if let Some(extends) = &row.extends {
            if !rows[..index].iter().any(|other| other.name == *extends) {
                return Err(format!("{name}: `extends` names no row above it: {extends:?}"));
            }
        }
    }
    Ok(())
}

/// `broadcast-process` → `BroadcastProcess`.
pub fn pascal(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `broadcast-process` → `broadcast_process`.
pub fn snake(kebab: &str) -> String {
    kebab.replace('-', "_")
}
