//! Function projects outside this repository: `weir init` writes a ready
//! project (a sample function with a test, its build settings, a
//! `pipeline.yaml` and the SDK it needs) and `weir build` turns a project
//! into a component, in Rust, Python or TypeScript.
//!
//! The SDKs and the WIT are embedded in the binary (see `host/build.rs`)
//! and written into the project's `.weir/` directory, laid out as in the
//! Weir repository (`.weir/wit`, `.weir/guest-sdk`, `.weir/guest-sdk/python`,
//! `.weir/guest-sdk/js`), so a project resolves its SDK wherever it is,
//! with the version of the `weir` that made it. This module never runs a
//! project's code: building is the language's own toolchain's job
//! ([`build`]).

pub mod build;
pub mod init;

use std::fmt;
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Where a project keeps the SDK `weir init` wrote.
pub const SDK_DIR: &str = ".weir";

/// The languages a project may be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProjectLanguage {
    /// Rust, with the `weir-sdk` crate; built with cargo for `wasm32-wasip2`.
    Rust,
    /// Python, with the `weir` package; built with componentize-py.
    Python,
    /// TypeScript, with `@weir/sdk`; built with componentize-js.
    Typescript,
}

impl ProjectLanguage {
    /// The directory of its templates, and its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Typescript => "typescript",
        }
    }

    /// The SDK files a project in this language needs, as
    /// `(path in the repository layout, contents)`.
    fn sdk_files(self) -> impl Iterator<Item = (&'static str, &'static [u8])> {
        let wanted = move |path: &str| match self {
            Self::Rust => {
                path.starts_with("wit/")
                    || path == "guest-sdk/Cargo.toml"
                    || path.starts_with("guest-sdk/src/")
                    || path.starts_with("guest-sdk/macros/")
            }
            Self::Python => path.starts_with("guest-sdk/python/"),
            Self::Typescript => path.starts_with("guest-sdk/js/"),
        };
        embedded::SDK_FILES.iter().copied().filter(move |(path, _)| wanted(path))
    }

    /// Its templates, as `(path in the project, contents)`.
    fn templates(self) -> impl Iterator<Item = (&'static str, &'static [u8])> {
        let prefix = format!("{}/", self.name());
        embedded::TEMPLATE_FILES
            .iter()
            .filter_map(move |(path, bytes)| Some((path.strip_prefix(prefix.as_str())?, *bytes)))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The language of the project in `dir`, from its manifest.
    pub fn of_project(dir: &Path) -> Result<Self, ProjectError> {
        if dir.join("Cargo.toml").is_file() {
            Ok(Self::Rust)
        } else if dir.join("pyproject.toml").is_file() {
            Ok(Self::Python)
        } else if dir.join("package.json").is_file() {
            Ok(Self::Typescript)
        } else {
            Err(ProjectError::NotAProject(dir.to_path_buf()))
        }
    }
}

impl fmt::Display for ProjectLanguage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a project could not be made or built.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The project name is unusable.
    #[error("{0:?} is not a usable project name: use lowercase letters, digits and '-', starting with a letter (like my-function)")]
    BadName(String),
    /// The target directory exists and is not empty.
    #[error("{0} already exists and is not empty: choose another name or directory")]
    Exists(PathBuf),
    /// A directory with no project manifest.
    #[error("{0} has no Cargo.toml, pyproject.toml or package.json: run `weir build` in a project made by `weir init` (or pass its directory)")]
    NotAProject(PathBuf),
    /// The language's toolchain is missing or failed.
    #[error("{0}")]
    Toolchain(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// An I/O error on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProjectError + '_ {
    move |source| ProjectError::Io { path: path.to_path_buf(), source }
}
