//! Embeds what `weir init` writes into a new function project: the guest
//! SDKs (Rust, Python, TypeScript) with the WIT they bind to, laid out as in
//! this repository, and the project templates of `host/templates/init/`.
//! So a project made by `weir init` builds anywhere, with the SDK of the
//! `weir` that made it, without this checkout.
//!
//! It also generates the host's `Role` (`roles.rs`, included by
//! `src/runtime/role.rs`) from `wit/roles.toml`, the table of function
//! kinds, read with the reader the SDK macro's build script uses.
//!
//! The Rust SDK's manifests name workspace dependencies; they are written
//! out with the workspace's versions filled in, so the vendored crates
//! build on their own. Paths come from the environment cargo sets when it
//! runs this script (see guest-sdk/macros/build.rs for why).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "../guest-sdk/macros/roles.rs"]
mod roles;

/// Directories (relative to the repository root) embedded as the SDKs.
const SDK_DIRS: [&str; 5] =
    ["wit", "guest-sdk/src", "guest-sdk/macros", "guest-sdk/python", "guest-sdk/js"];

/// Single SDK files (relative to the repository root).
const SDK_FILES: [&str; 1] = ["guest-sdk/Cargo.toml"];

/// Template files that are example functions' files, so the sample a
/// project starts with is the tested example itself:
/// `(template path, repository path)`.
const TEMPLATES_FROM_EXAMPLES: [(&str, &str); 8] = [
    ("rust/src/lib.rs", "functions/revenue/src/lib.rs"),
    ("rust/orders.jsonl", "functions/revenue/orders.jsonl"),
    ("python/revenue.py", "functions/revenue-py/revenue.py"),
    ("python/test_revenue.py", "functions/revenue-py/test_revenue.py"),
    ("python/orders.jsonl", "functions/revenue/orders.jsonl"),
    ("typescript/src/revenue.ts", "functions/revenue-js/src/revenue.ts"),
    ("typescript/test/revenue.test.ts", "functions/revenue-js/test/revenue.test.ts"),
    ("typescript/orders.jsonl", "functions/revenue/orders.jsonl"),
];

/// Names never embedded: build output, caches, installed packages.
const SKIPPED: [&str; 8] = [
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    "target",
    "build",
    "dist",
    ".egg-info",
    ".ready",
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir.parent().expect("host/ is inside the repository").to_path_buf();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let workspace = read(&root.join("Cargo.toml"));
    let mut code = String::from("/// The guest SDKs and the WIT, by path as in the repository.\n");
    code.push_str("pub static SDK_FILES: &[(&str, &[u8])] = &[\n");
    let mut files = Vec::new();
    for dir in SDK_DIRS {
        collect(&root.join(dir), &mut files);
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    for file in SDK_FILES {
        files.push(root.join(file));
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("Cargo.toml").display());
    for file in &files {
        let relative = relative(&root, file);
        if relative.ends_with("Cargo.toml") {
            // Resolved against the workspace, written next to this script's
            // output and embedded from there.
            let resolved = out.join(relative.replace('/', "__"));
            std::fs::write(&resolved, resolve_manifest(&read(file), &workspace))
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", resolved.display()));
            entry(&mut code, &relative, &resolved);
        } else {
            entry(&mut code, &relative, file);
        }
    }
    code.push_str("];\n\n/// The `weir init` templates, by `<language>/<path>`.\n");
    code.push_str("pub static TEMPLATE_FILES: &[(&str, &[u8])] = &[\n");
    let templates = manifest_dir.join("templates/init");
    println!("cargo:rerun-if-changed={}", templates.display());
    let mut files = Vec::new();
    collect(&templates, &mut files);
    for file in &files {
        entry(&mut code, &relative(&templates, file), file);
    }
    for (template, source) in TEMPLATES_FROM_EXAMPLES {
        println!("cargo:rerun-if-changed={}", root.join(source).display());
        entry(&mut code, template, &root.join(source));
    }
    code.push_str("];\n");
    std::fs::write(out.join("embedded.rs"), code).expect("cannot write embedded.rs");
    let table = root.join("wit/roles.toml");
    println!("cargo:rerun-if-changed={}", table.display());
    std::fs::write(out.join("roles.rs"), role_code(&roles::read(&table)))
        .expect("cannot write roles.rs");
}

/// The `Role` enum, `Role::ALL` and the rows behind `Role`'s methods, one
/// per row of the table, in its order (see `src/runtime/role.rs`).
fn role_code(rows: &[roles::Row]) -> String {
    let variant = |name: &str| format!("Role::{}", roles::pascal(name));
    let mut code = String::from(
        "// Generated by host/build.rs from wit/roles.toml.\n\n\
         /// What a function is used for in a pipeline: one variant per row of\n\
         /// `wit/roles.toml`, the table of function kinds. Each role needs the\n\
         /// exports of its [`Role::interfaces`].\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n\
         pub enum Role {\n",
    );
    for row in rows {
        let mut interfaces = vec![&row.export];
        let mut base = row.extends.as_ref();
        while let Some(name) = base {
            let extended = rows.iter().find(|r| r.name == *name).expect("checked by the reader");
            interfaces.insert(0, &extended.export);
            base = extended.extends.as_ref();
        }
        let exports: Vec<String> =
            interfaces.iter().map(|i| format!("`weir:function/{i}`")).collect();
        let _ = writeln!(code, "    /// {}: exports {}.", row.doc, exports.join(" and "));
        let _ = writeln!(code, "    {},", roles::pascal(&row.name));
    }
    let all: Vec<String> = rows.iter().map(|row| variant(&row.name)).collect();
    let _ = write!(
        code,
        "}}\n\n\
         impl Role {{\n\
         \x20   /// Every role, in the table's order (the order\n\
         \x20   /// [`LoadedFunction::worlds`](super::LoadedFunction::worlds) reports them).\n\
         \x20   pub const ALL: [Role; {count}] = [{all}];\n\
         }}\n\n\
         /// The table's rows, by `Role as usize`.\n\
         static ROWS: [Row; {count}] = [\n",
        count = rows.len(),
        all = all.join(", "),
    );
    for row in rows {
        let strings = |list: &[String]| list.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>();
        let _ = writeln!(
            code,
            "    Row {{ name: {:?}, spec: {:?}, rust_trait: {:?}, world: {:?}, export: {:?}, \
             extends: {}, imports: &[{}], inputs: Inputs::{} }},",
            row.name,
            row.spec,
            row.rust_trait,
            format!("weir:function/{}", row.world),
            row.export,
            row.extends.as_deref().map_or("None".to_string(), |e| format!("Some({})", variant(e))),
            strings(&row.imports).join(", "),
            roles::pascal(&row.inputs),
        );
    }
    code.push_str("];\n");
    code
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/")
}

fn entry(code: &mut String, name: &str, file: &Path) {
    let _ = writeln!(code, "    ({name:?}, include_bytes!({:?})),", file.display().to_string());
}

/// Every file under `dir` (following symlinks, such as an SDK's link to
/// the WIT), sorted, without [`SKIPPED`] names.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    if !dir.exists() {
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy().to_string();
        if SKIPPED.iter().any(|skipped| name == *skipped || name.ends_with(skipped)) {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else if path.is_file() {
            files.push(path);
        }
    }
}

/// `manifest` with `x.workspace = true` and `{ workspace = true, … }`
/// replaced by the workspace's values, and `[lints] workspace = true`
/// dropped.
fn resolve_manifest(manifest: &str, workspace: &str) -> String {
    let package = section(workspace, "[workspace.package]");
    let dependencies = section(workspace, "[workspace.dependencies]");
    let mut out = String::new();
    let mut in_lints = false;
    for line in manifest.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_lints = trimmed == "[lints]";
        }
        if in_lints {
            continue;
        }
        if let Some(key) = trimmed.strip_suffix(".workspace = true") {
            if let Some(value) = package.get(key) {
                let _ = writeln!(out, "{key} = {value}");
            }
            continue;
        }
        if let Some((name, rest)) = trimmed.split_once(" = {") {
            if rest.contains("workspace = true") {
                let own = rest.trim_end_matches('}').replace("workspace = true", "");
                let own = own.trim().trim_start_matches(',').trim();
                let inherited = match dependencies.get(name) {
                    Some(value) if value.starts_with('{') => {
                        value.trim_matches(|c| c == '{' || c == '}').trim().to_string()
                    }
                    Some(value) => format!("version = {value}"),
                    None => panic!("{name} is not a workspace dependency"),
                };
                // Path dependencies inside the SDK are relative to it.
                let inherited = inherited.replace("\"guest-sdk/macros\"", "\"macros\"");
                let joined = [inherited.as_str(), own]
                    .iter()
                    .filter(|part| !part.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ");
                let _ = writeln!(out, "{name} = {{ {joined} }}");
                continue;
            }
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The `key = value` lines of a `[section]` of a TOML file.
fn section(toml: &str, header: &str) -> BTreeMap<String, String> {
    toml.lines()
        .skip_while(|line| line.trim() != header)
        .skip(1)
        .take_while(|line| !line.trim().starts_with('['))
        .filter_map(|line| {
            let (key, value) = line.split_once(" = ")?;
            Some((key.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}
