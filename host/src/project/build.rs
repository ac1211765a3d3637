//! `weir build`: turn a function project into a component with its
//! language's toolchain, the same way in every language.
//!
//! * Rust: `cargo build --release --target wasm32-wasip2`, then the module
//!   is made a component if it is not one already;
//! * Python: `python3 -m weir build` of the SDK (componentize-py), with the
//!   project's `.weir/guest-sdk/python` on the path;
//! * TypeScript: `weir-build` of `@weir/sdk` (componentize-js), after an
//!   `npm install` when the project has no `node_modules` yet.
//!
//! The component goes to `build/<project name>.wasm` unless told otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{io, ProjectError, ProjectLanguage, SDK_DIR};
use crate::runtime::componentize;

/// The component `weir build` wrote.
#[derive(Debug)]
pub struct Built {
    /// Where it is.
    pub path: PathBuf,
    /// The project's language.
    pub language: ProjectLanguage,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Build the project in `dir` into `output` (default
/// `dir/build/<name>.wasm`).
pub fn build(dir: &Path, output: Option<&Path>) -> Result<Built, ProjectError> {
    let language = ProjectLanguage::of_project(dir)?;
    let name = project_name(dir, language)?;
    let path = match output {
        Some(path) => path.to_path_buf(),
        None => dir.join("build").join(format!("{name}.wasm")),
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    match language {
        ProjectLanguage::Rust => build_rust(dir, &name, &path)?,
        ProjectLanguage::Python => build_python(dir, &path)?,
        ProjectLanguage::Typescript => build_typescript(dir, &path)?,
    }
    let bytes = std::fs::metadata(&path).map_err(io(&path))?.len();
    Ok(Built { path, language, bytes })
}

/// The project's name from its manifest.
fn project_name(dir: &Path, language: ProjectLanguage) -> Result<String, ProjectError> {
    let manifest = dir.join(match language {
        ProjectLanguage::Rust => "Cargo.toml",
        ProjectLanguage::Python => "pyproject.toml",
        ProjectLanguage::Typescript => "package.json",
    });
    let text = std::fs::read_to_string(&manifest).map_err(io(&manifest))?;
    let name = match language {
        ProjectLanguage::Typescript => serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|json| Some(json.get("name")?.as_str()?.rsplit('/').next()?.to_string())),
        _ => text.lines().find_map(|line| {
            let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?.trim();
            Some(value.trim_matches('"').to_string())
        }),
    };
    name.filter(|name| !name.is_empty()).ok_or_else(|| {
        ProjectError::Toolchain(format!("{} names no project (`name`)", manifest.display()))
    })
}

/// Run `command`, naming `what` and how to get it when it cannot start.
fn run(mut command: Command, what: &str, install: &str) -> Result<(), ProjectError> {
    let status = command
        .status()
        .map_err(|e| ProjectError::Toolchain(format!("cannot run {what} ({e}): {install}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(ProjectError::Toolchain(format!("{what} failed ({status}); see its output above")))
    }
}

fn build_rust(dir: &Path, name: &str, output: &Path) -> Result<(), ProjectError> {
    let mut cargo = Command::new("cargo");
    cargo.args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"]);
    cargo.arg(dir.join("Cargo.toml"));
    run(cargo, "cargo build", "install Rust with rustup, then `rustup target add wasm32-wasip2`")?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("target"));
    let module =
        target.join("wasm32-wasip2/release").join(format!("{}.wasm", name.replace('-', "_")));
    let bytes = std::fs::read(&module).map_err(io(&module))?;
    let component = componentize(&bytes)
        .map_err(|e| ProjectError::Toolchain(format!("{}: {e}", module.display())))?;
    std::fs::write(output, &component).map_err(io(output))
}

fn build_python(dir: &Path, output: &Path) -> Result<(), ProjectError> {
    let mut python = Command::new("python3");
    python.args(["-m", "weir", "build"]).arg(dir).arg("-o").arg(output);
    let sdk = dir.join(SDK_DIR).join("guest-sdk/python");
    if sdk.is_dir() {
        let mut paths = vec![sdk];
        paths.extend(std::env::var_os("PYTHONPATH").iter().flat_map(std::env::split_paths));
        let joined = std::env::join_paths(paths)
            .map_err(|e| ProjectError::Toolchain(format!("PYTHONPATH: {e}")))?;
        python.env("PYTHONPATH", joined);
    }
    run(python, "python3 -m weir build", "install Python 3.11 or newer")
}

fn build_typescript(dir: &Path, output: &Path) -> Result<(), ProjectError> {
    if !dir.join("node_modules").is_dir() {
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund"]).current_dir(dir);
        run(npm, "npm install", "install Node.js 20 or newer with npm")?;
    }
    let installed = dir.join("node_modules/@weir/sdk/bin/weir-build.mjs");
    let script = if installed.is_file() {
        installed
    } else {
        dir.join(SDK_DIR).join("guest-sdk/js/bin/weir-build.mjs")
    };
    let mut node = Command::new("node");
    node.arg(script).arg(dir).arg("-o").arg(output);
    run(node, "weir-build (node)", "install Node.js 20 or newer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_languages_come_from_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            ProjectLanguage::of_project(dir.path()),
            Err(ProjectError::NotAProject(_))
        ));
        std::fs::write(dir.path().join("package.json"), r#"{"name": "@acme/top-orders"}"#).unwrap();
        assert_eq!(ProjectLanguage::of_project(dir.path()).unwrap(), ProjectLanguage::Typescript);
        assert_eq!(project_name(dir.path(), ProjectLanguage::Typescript).unwrap(), "top-orders");
        std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname = \"fraud\"\n").unwrap();
        assert_eq!(ProjectLanguage::of_project(dir.path()).unwrap(), ProjectLanguage::Python);
        assert_eq!(project_name(dir.path(), ProjectLanguage::Python).unwrap(), "fraud");
    }
}
