//! `scripts/dev test`'s run once the functions are built: start the
//! services the tests need (the Kafka broker, the S3 server and the schema
//! registry unless given, schemathesis), run every suite — the Python and
//! TypeScript SDKs' tests, the console's build check and tests, `cargo test
//! --workspace`, and the integration tests again on functions built with
//! the other guest toolchain when there is one — count what passed and
//! failed across all of them, and stop the services it started.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::process::Lifetime;
use crate::summary::{Counts, Reporter};
use crate::{kafka, python_tool, s3, schema_registry};

/// Names the shared broker for the tests.
pub const KAFKA_ENV: &str = "WEIR_TEST_KAFKA_BOOTSTRAP";
/// Names the S3 server for the tests.
pub const S3_ENV: &str = "WEIR_TEST_S3_ENDPOINT";
/// Names the schema registry for the tests: the base URL of any
/// Confluent-compatible registry's API.
pub const SCHEMA_REGISTRY_ENV: &str = "WEIR_TEST_SCHEMA_REGISTRY";
/// Names schemathesis's `st` command for the API fuzz test.
pub const SCHEMATHESIS_ENV: &str = "WEIR_TEST_SCHEMATHESIS";

/// What a test run needs from the build.
pub struct TestRun {
    /// The repository's root.
    pub root: PathBuf,
    /// The built functions (`WEIR_FUNCTIONS_DIR` of the tests).
    pub functions: PathBuf,
    /// The debug `weir` binary (for the console's browser tests).
    pub weir: PathBuf,
    /// The functions built with the other guest toolchain, if any: the
    /// integration tests run again on them.
    pub again_with: Option<PathBuf>,
}

/// One test suite: a command and how its output counts.
struct Suite {
    name: String,
    command: Command,
    reporter: Reporter,
}

impl Suite {
    fn new(name: &str, program: &str, cwd: &Path, reporter: Reporter) -> Suite {
        let mut command = Command::new(program);
        command.current_dir(cwd);
        Suite { name: name.to_owned(), command, reporter }
    }

    fn args(mut self, args: &[&str]) -> Suite {
        self.command.args(args);
        self
    }

    fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Suite {
        self.command.env(name, value);
        self
    }
}

/// A service this run started, stopped when the run ends (and killed by
/// the kernel should the run die first: [`Lifetime::Owned`]).
enum Started {
    Kafka,
    S3,
    SchemaRegistry,
}

impl Drop for Started {
    fn drop(&mut self) {
        let stopped = match self {
            Started::Kafka => kafka::stop(&kafka::default_dir()),
            Started::S3 => s3::stop(),
            Started::SchemaRegistry => schema_registry::stop(),
        };
        if let Err(error) = stopped {
            eprintln!("warning: {error:#}");
        }
    }
}

impl TestRun {
    /// Run every suite; the counts over all of them, and whether every
    /// suite passed.
    pub fn run(&self) -> Result<(Counts, bool)> {
        let services = services()?;
        let env = &services.env;
        let mut total = Counts::default();
        let mut failed = Vec::new();
        for mut suite in self.suites() {
            for (name, value) in env {
                suite.command.env(name, value);
            }
            eprintln!("==> {}", suite.name);
            let (counts, passed) = run_suite(suite.command, suite.reporter, &mut std::io::stdout())
                .with_context(|| format!("running {}", suite.name))?;
            total += counts;
            if !passed {
                failed.push(suite.name);
            }
        }
        if let (Some(dir), true) = (&self.again_with, failed.is_empty()) {
            eprintln!(
                "==> the integration tests on functions built with the other guest toolchain"
            );
            let mut cargo = Command::new("cargo");
            cargo.current_dir(&self.root).args(["test", "-p", "weir-cli", "--test", "integration"]);
            cargo.env("WEIR_FUNCTIONS_DIR", dir).envs(env.iter().map(|(k, v)| (k, v)));
            let (counts, passed) = run_suite(cargo, Reporter::Cargo, &mut std::io::stdout())?;
            total += counts;
            if !passed {
                failed.push("the integration tests on the other toolchain's functions".to_owned());
            }
        }
        for name in &failed {
            eprintln!("failed: {name}");
        }
        Ok((total, failed.is_empty()))
    }

    /// The suites, in order: the interpreted SDKs, the console, the Rust
    /// workspace.
    fn suites(&self) -> Vec<Suite> {
        let root = &self.root;
        let mut suites = Vec::new();
        if root.join("guest-sdk/python").is_dir() {
            let mut pytest = Suite::new(
                "the Python SDK's and functions' tests (pytest)",
                "python3",
                root,
                Reporter::Pytest,
            )
            .args(&["-m", "pytest", "-q", "-p", "no:cacheprovider", "guest-sdk/python"])
            .env("PYTHONPATH", root.join("guest-sdk/python"));
            pytest.command.args(python_functions(root));
            suites.push(pytest);
        }
        let sdk = root.join("guest-sdk/js");
        if sdk.join("package.json").is_file() {
            suites.push(
                Suite::new(
                    "the TypeScript SDK's and functions' tests (node --test)",
                    "npm",
                    &sdk,
                    Reporter::Node,
                )
                .args(&["test", "--silent"]),
            );
        }
        let console = root.join("console");
        if console.join("package.json").is_file() {
            suites.push(
                Suite::new(
                    "checking that console/dist is what console/src builds",
                    "node",
                    &console,
                    Reporter::Nothing,
                )
                .args(&["build.mjs", "--check"]),
            );
            suites.push(
                Suite::new(
                    "the console's tests (node --test; Chromium, headless)",
                    "npm",
                    &console,
                    Reporter::Node,
                )
                .args(&["test", "--silent"])
                .env("WEIR_BIN", &self.weir)
                .env("WEIR_FUNCTIONS_DIR", &self.functions),
            );
        }
        suites.push(
            Suite::new("the Rust tests (cargo test --workspace)", "cargo", root, Reporter::Cargo)
                .args(&["test", "--workspace"])
                .env("WEIR_FUNCTIONS_DIR", &self.functions),
        );
        suites
    }
}

/// `functions/*-py`, relative to the root, sorted.
fn python_functions(root: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root.join("functions"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with("-py"))
        .map(|name| format!("functions/{name}"))
        .collect();
    dirs.sort();
    dirs
}

/// The services of a run: their environment for the suites, and those the
/// run started (stopped when this is dropped).
struct Services {
    env: Vec<(String, String)>,
    _started: Vec<Started>,
}

/// The services' environment for the suites, and the services this run
/// started: those named in the environment are used as they are, a
/// broker, server or registry already running is reused and left running,
/// and any other is started for this run.
fn services() -> Result<Services> {
    let mut env = Vec::new();
    let mut started = Vec::new();
    let given = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    let kafka = match given(KAFKA_ENV) {
        Some(bootstrap) => bootstrap,
        None => {
            eprintln!("==> starting a Kafka broker");
            let dir = kafka::default_dir();
            if !kafka::running(&dir) {
                started.push(Started::Kafka);
            }
            kafka::start(&dir, &[], Lifetime::Owned)?
        }
    };
    env.push((KAFKA_ENV.to_owned(), kafka));
    let s3 = match given(S3_ENV) {
        Some(endpoint) => endpoint,
        None => {
            eprintln!("==> starting an S3 server");
            if !s3::running() {
                started.push(Started::S3);
            }
            s3::start(Lifetime::Owned)?
        }
    };
    env.push((S3_ENV.to_owned(), s3));
    let schema_registry = match given(SCHEMA_REGISTRY_ENV) {
        Some(url) => url,
        None => {
            eprintln!("==> starting a schema registry");
            if !schema_registry::running() {
                started.push(Started::SchemaRegistry);
            }
            schema_registry::start(Lifetime::Owned)?
        }
    };
    env.push((SCHEMA_REGISTRY_ENV.to_owned(), schema_registry));
    let schemathesis = match given(SCHEMATHESIS_ENV) {
        Some(path) => path,
        None => python_tool::SCHEMATHESIS.install()?.display().to_string(),
    };
    env.push((SCHEMATHESIS_ENV.to_owned(), schemathesis));
    Ok(Services { env, _started: started })
}

/// Run `command` with its stdout and stderr, merged, echoed to `out` and
/// counted by `reporter`; the counts and whether it exited successfully.
pub fn run_suite(
    mut command: Command,
    reporter: Reporter,
    out: &mut dyn Write,
) -> Result<(Counts, bool)> {
    let (reader, writer) = std::io::pipe()?;
    command.stdout(writer.try_clone()?).stderr(writer);
    let mut child = command.spawn()?;
    // The command holds the pipe's write ends: drop them, or the read
    // below never sees the end of the output.
    drop(command);
    let mut counts = Counts::default();
    for line in BufReader::new(reader).split(b'\n') {
        let line = line?;
        out.write_all(&line)?;
        out.write_all(b"\n")?;
        counts += reporter.scan(&String::from_utf8_lossy(&line));
    }
    out.flush()?;
    Ok((counts, child.wait()?.success()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_is_counted_from_both_its_streams_and_its_status_is_kept() {
        let mut sh = Command::new("sh");
        sh.args([
            "-c",
            "echo 'test result: ok. 2 passed; 0 failed;'; \
                        echo 'test result: FAILED. 1 passed; 1 failed;' >&2; exit 3",
        ]);
        let mut echoed = Vec::new();
        let (counts, passed) = run_suite(sh, Reporter::Cargo, &mut echoed).unwrap();
        assert_eq!(counts, Counts { passed: 3, failed: 1 });
        assert_eq!(echoed.iter().filter(|&&b| b == b'\n').count(), 2);
        assert!(!passed);
    }

    #[test]
    fn the_python_functions_are_the_py_folders() {
        let root = tempfile::tempdir().unwrap();
        for dir in ["functions/b-py", "functions/a-py", "functions/revenue", "functions/x-js"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        assert_eq!(python_functions(root.path()), ["functions/a-py", "functions/b-py"]);
    }
}
