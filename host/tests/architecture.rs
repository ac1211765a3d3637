//! The host's architecture, checked: imports run one way.
//!
//! The layer drawing in `src/lib.rs` (its `text` block) is the source of
//! truth. This test reads it and every source file's imports (`use` trees
//! and inline `crate::`/`super::` paths, outside comments, string literals
//! and `#[cfg(test)]` modules), then fails when
//!
//! * a module declared in `lib.rs` is missing from the drawing, or the
//!   drawing names a module `lib.rs` does not declare;
//! * a top-level module imports one on its own row or a row above it (an
//!   upward import, and so any circle between top-level modules);
//! * files of one folder import each other in a circle (a folder's
//!   `mod.rs` is its front page and may re-export its children; generated
//!   bindings, `runtime/bindings.rs`, are left out).
//!
//! As ArchUnit does for Java: the rule lives beside the code and a change
//! that breaks it fails `cargo test` with the import at fault named.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files whose imports are generated (`bindgen!` wires resources to the
/// host's handle types, so they point back up by design).
const GENERATED: &[&str] = &["runtime/bindings.rs"];

/// One source file: its module path and the module paths it names.
struct Source {
    file: String,
    module: Vec<String>,
    imports: Vec<Vec<String>>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` → `[a, b]`, `a/mod.rs` → `[a]`, `lib.rs` → `[]`.
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> =
        relative.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of `text` without comments, string and char literals (their
/// contents blanked) and `#[cfg(test)]` items.
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|&c| c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let open = 2 + hashes;
            i +=
                open + rest[open..].find(&close).map_or(rest.len() - open, |end| end + close.len());
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            i += j + 1;
            out.push_str("\"\"");
        } else if rest.starts_with('\'') && is_char_literal(rest) {
            let end = rest[1..].find('\'').map_or(1, |e| e + 2);
            i += end;
            out.push_str("' '");
        } else if rest.starts_with("#[cfg(test)]") {
            i += skip_item(rest);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Whether `rest` (starting with `'`) opens a char literal, not a lifetime.
fn is_char_literal(rest: &str) -> bool {
    let mut chars = rest.chars().skip(1);
    matches!((chars.next(), chars.next()), (Some('\\'), _) | (Some(_), Some('\'')))
}

/// The length of the attribute and the item it marks: up to the end of its
/// first `{ … }` block or its `;`, whichever comes first.
fn skip_item(rest: &str) -> usize {
    let mut depth = 0;
    for (i, c) in rest.char_indices().skip("#[cfg(test)]".len()) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    rest.len()
}

/// Expand a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let prefix = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&body[start..i], &prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&body[start..], &prefix, out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        out.push(join(prefix, path));
    }
}

fn join(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}::{path}"),
    }
}

/// Every path `code` names: `use` trees, and inline `crate::…` and
/// `super::…` paths.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let end = after.find(';').unwrap_or(after.len());
        expand_use(&after[..end], "", &mut paths);
        rest = &after[end..];
    }
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            let before = code[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                let path: String = code[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(path.trim_end_matches(':').to_string());
            }
            from = at + start.len();
        }
    }
    paths
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let at = from + at;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && after.is_some_and(char::is_whitespace)
        {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `path` as an absolute module path seen from `module` (a file's
/// module), or `None` when it names something outside the crate.
fn resolve(path: &str, module: &[String]) -> Option<Vec<String>> {
    let mut parts = path.split("::").filter(|p| !p.is_empty());
    let first = parts.next()?;
    let mut base: Vec<String> = match first {
        "crate" => Vec::new(),
        "super" | "self" => {
            // `self` of a file is its own module; `super` its parent.
            let mut base = module.to_vec();
            if first == "super" {
                base.pop();
            }
            base
        }
        _ => return None,
    };
    for part in parts {
        match part {
            "super" => {
                base.pop();
            }
            "self" | "*" => {}
            _ => base.push(part.to_string()),
        }
    }
    Some(base)
}

fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(path).unwrap();
            let module = module_of(&relative);
            let imports =
                named_paths(&code_only(&text)).iter().filter_map(|p| resolve(p, &module)).collect();
            Source { file: relative, module, imports }
        })
        .collect()
}

/// The rows of the drawing in `lib.rs`, top first: each the module names
/// on it.
fn drawing() -> Vec<Vec<String>> {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let block: Vec<&str> = lib
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("//! ```text"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with("//! ```"))
        .collect();
    block
        .iter()
        .filter_map(|line| {
            let line = line.trim_start_matches("//!");
            // `layer   module module …`: the first word names the layer.
            let mut words = line.split_whitespace();
            words.next()?;
            let modules: Vec<String> = words
                .map(|w| w.trim_end_matches('/').to_string())
                .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                .collect();
            (!modules.is_empty()).then_some(modules)
        })
        .collect()
}

fn declared_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

#[test]
fn the_drawing_names_every_module_once() {
    let rows = drawing();
    let drawn: Vec<&String> = rows.iter().flatten().collect();
    let unique: BTreeSet<String> = drawn.iter().map(|m| m.to_string()).collect();
    assert_eq!(drawn.len(), unique.len(), "a module is drawn twice: {rows:?}");
    let declared = declared_modules();
    let missing: Vec<_> = declared.difference(&unique).collect();
    let extra: Vec<_> = unique.difference(&declared).collect();
    assert!(missing.is_empty(), "lib.rs's drawing lacks {missing:?}");
    assert!(extra.is_empty(), "lib.rs's drawing names {extra:?}, which lib.rs does not declare");
}

#[test]
fn top_level_modules_import_only_rows_below() {
    let rows = drawing();
    let row_of: BTreeMap<&str, usize> = rows
        .iter()
        .enumerate()
        .flat_map(|(row, modules)| modules.iter().map(move |m| (m.as_str(), row)))
        .collect();
    let mut upward = Vec::new();
    for source in sources() {
        if GENERATED.contains(&source.file.as_str()) {
            continue;
        }
        let Some(from) = source.module.first() else { continue };
        let Some(&from_row) = row_of.get(from.as_str()) else { continue };
        for import in &source.imports {
            let Some(to) = import.first() else { continue };
            let Some(&to_row) = row_of.get(to.as_str()) else { continue };
            if to != from && to_row <= from_row {
                upward.push(format!("{} imports {}", source.file, import.join("::")));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports that do not run down lib.rs's drawing (a module may import only rows below \
         its own):\n  {}",
        upward.join("\n  ")
    );
}

#[test]
fn no_folder_has_an_import_circle() {
    let sources = sources();
    // Folder → (child → children it imports, with the file that does).
    let mut folders: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    let known: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    for source in &sources {
        if GENERATED.contains(&source.file.as_str()) || source.file.ends_with("mod.rs") {
            continue;
        }
        for depth in 0..source.module.len() {
            let folder = source.module[..depth].to_vec();
            let child = &source.module[depth];
            for import in &source.imports {
                if import.len() <= depth || import[..depth] != folder[..] {
                    continue;
                }
                let target = &import[depth];
                let target_module = import[..=depth].to_vec();
                let front = folder.is_empty() && target == "lib";
                if target != child && known.contains(&target_module) && !front {
                    let target_file: Vec<_> = sources
                        .iter()
                        .filter(|s| s.module == target_module)
                        .map(|s| s.file.clone())
                        .collect();
                    if target_file.iter().all(|f| GENERATED.contains(&f.as_str())) {
                        continue;
                    }
                    folders
                        .entry(folder.clone())
                        .or_default()
                        .entry(child.clone())
                        .or_default()
                        .entry(target.clone())
                        .or_insert_with(|| format!("{} → {}", source.file, import.join("::")));
                }
            }
        }
    }
    let mut circles = Vec::new();
    for (folder, edges) in &folders {
        for start in edges.keys() {
            if let Some(path) = circle_through(edges, start) {
                let shown: Vec<_> =
                    path.windows(2).map(|pair| edges[&pair[0]][&pair[1]].clone()).collect();
                let mut members = path[..path.len() - 1].to_vec();
                members.sort();
                circles.push((members, format!("in {}/: {}", folder.join("/"), shown.join("; "))));
            }
        }
    }
    circles.sort();
    circles.dedup_by(|a, b| a.0 == b.0);
    let shown: Vec<_> = circles.into_iter().map(|(_, shown)| shown).collect();
    assert!(shown.is_empty(), "import circles:\n  {}", shown.join("\n  "));
}

/// A path `start → … → start` in `edges`, if there is one.
fn circle_through(
    edges: &BTreeMap<String, BTreeMap<String, String>>,
    start: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in edges.get(last).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut circle = path.clone();
                circle.push(next.clone());
                return Some(circle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

#[test]
fn the_reader_sees_use_trees_and_skips_comments_strings_and_tests() {
    let code = code_only(
        "use crate::a::{b, c::{d as e, self}};\n// crate::comment\nlet s = \"crate::string\";\n\
         let t = crate::f::g(1);\n#[cfg(test)]\nmod tests { use crate::hidden; }\n",
    );
    let mut paths = named_paths(&code);
    paths.sort();
    paths.dedup();
    assert_eq!(
        paths,
        ["crate::a", "crate::a::b", "crate::a::c::d", "crate::a::c::self", "crate::f::g"]
    );
    let module = vec!["x".to_string(), "y".to_string()];
    assert_eq!(resolve("super::z::w", &module), Some(vec!["x".into(), "z".into(), "w".into()]));
    assert_eq!(resolve("std::mem", &module), None);
}
