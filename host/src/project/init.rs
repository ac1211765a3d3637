//! `weir init`: write a new function project from the embedded templates
//! and SDK.
//!
//! Templates may say `{{name}}` (the project name, `my-function`), which
//! is filled in, in file contents and in paths.

use std::path::{Path, PathBuf};

use super::{io, ProjectError, ProjectLanguage, SDK_DIR};

/// What was written.
#[derive(Debug)]
pub struct Created {
    /// The project directory.
    pub dir: PathBuf,
    /// The files written, relative to it (the SDK's only as `.weir/`).
    pub files: Vec<String>,
}

/// Write a project called `name` in `language` into `dir` (which must not
/// exist or be empty).
pub fn init(name: &str, language: ProjectLanguage, dir: &Path) -> Result<Created, ProjectError> {
    if !is_project_name(name) {
        return Err(ProjectError::BadName(name.to_string()));
    }
    if dir.exists() && std::fs::read_dir(dir).map_err(io(dir))?.next().is_some() {
        return Err(ProjectError::Exists(dir.to_path_buf()));
    }
    let fill = |text: &str| text.replace("{{name}}", name);
    let mut files = Vec::new();
    for (path, bytes) in language.templates() {
        let path = fill(path);
        let contents = match std::str::from_utf8(bytes) {
            Ok(text) => fill(text).into_bytes(),
            Err(_) => bytes.to_vec(),
        };
        write(&dir.join(&path), &contents)?;
        files.push(path);
    }
    for (path, bytes) in language.sdk_files() {
        write(&dir.join(SDK_DIR).join(path), bytes)?;
    }
    files.push(format!("{SDK_DIR}/"));
    files.sort();
    Ok(Created { dir: dir.to_path_buf(), files })
}

/// Lowercase letters, digits and `-`, starting with a letter: a name that
/// is a valid crate, Python distribution and npm package name alike.
fn is_project_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ProjectError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(path, bytes).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_rust_project_with_its_sdk() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("my-fn");
        let created = init("my-fn", ProjectLanguage::Rust, &project).unwrap();
        assert!(created.files.contains(&"src/lib.rs".to_string()), "{:?}", created.files);
        let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"my-fn\""), "{manifest}");
        let spec = std::fs::read_to_string(project.join("pipeline.yaml")).unwrap();
        assert!(spec.contains("build/my-fn.wasm"), "{spec}");
        // The SDK's manifest stands alone: no workspace inheritance left.
        let sdk = std::fs::read_to_string(project.join(".weir/guest-sdk/Cargo.toml")).unwrap();
        assert!(!sdk.contains("workspace"), "{sdk}");
        assert!(sdk.contains("weir-sdk-macros = { path = \"macros\" }"), "{sdk}");
        assert!(project.join(".weir/wit/weir.wit").is_file());
        assert!(project.join(".weir/guest-sdk/macros/src/lib.rs").is_file());
        assert!(!project.join(".weir/guest-sdk/python").exists());
    }

    #[test]
    fn refuses_bad_names_and_non_empty_directories() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["My-Fn", "1fn", "fn_x", "", "fn-", "a/b"] {
            assert!(matches!(
                init(bad, ProjectLanguage::Rust, &dir.path().join("x")),
                Err(ProjectError::BadName(_))
            ));
        }
        std::fs::write(dir.path().join("taken"), "").unwrap();
        let error = init("fine", ProjectLanguage::Python, dir.path()).unwrap_err();
        assert!(error.to_string().contains("not empty"), "{error}");
    }
}
