//! A Confluent-compatible schema registry (Apicurio Registry, in-memory
//! storage) on a free loopback port, for the tests of the registry formats
//! (Avro, Protobuf, JSON Schema): built once with Maven from Maven Central
//! (`devkit/schema-registry/`), started, stopped. Clients are given its
//! Confluent-compatible API, `http://127.0.0.1:<port>/apis/ccompat/v7`.
//!
//! Its state lives in `~/.cache/weir/schema-registry` (`build/`, the Maven
//! project and its jars; `mvn.log`, `port`, `pid`, `server.log`); its
//! subjects and schemas only in its memory. Its default compatibility is
//! `NONE` (Confluent's is `BACKWARD`): the tests set theirs per subject.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};

use crate::process::{self, Lifetime};

/// The Apicurio Registry release the tests run against.
pub const APICURIO_VERSION: &str = "2.4.2.Final";
/// Where the Confluent-compatible API is served.
const API_PATH: &str = "/apis/ccompat/v7";
/// The Maven project (`devkit/schema-registry/`), file by file, relative
/// to its directory: written to the build directory and built there.
const PROJECT: &[(&str, &str)] = &[
    ("pom.xml", include_str!("../schema-registry/pom.xml")),
    ("settings.xml", include_str!("../schema-registry/settings.xml")),
    (
        "src/main/resources/application.properties",
        include_str!("../schema-registry/src/main/resources/application.properties"),
    ),
    (
        "src/main/java/dev/weir/schemaregistry/ConfigPropertyListProducer.java",
        include_str!(
            "../schema-registry/src/main/java/dev/weir/schemaregistry/ConfigPropertyListProducer.java"
        ),
    ),
];
/// The jar Maven builds, relative to the build directory (its
/// dependencies are in `target/lib`).
const RUNNER_JAR: &str = "target/weir-schema-registry-1-runner.jar";
/// How long the registry may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long it may take from accepting connections to serving its API.
const SERVE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped registry may take to shut down before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

fn dir() -> PathBuf {
    process::cache_dir().join("schema-registry")
}

/// The base URL clients are given for the registry on `port`.
pub fn api_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}{API_PATH}")
}

/// Whether the registry runs.
pub fn running() -> bool {
    process::running(&dir().join("pid"))
}

/// Start the registry (building it once) unless it runs, wait until it
/// serves its API, and return the API's base URL
/// (`http://127.0.0.1:<port>/apis/ccompat/v7`).
pub fn start(lifetime: Lifetime) -> Result<String> {
    let dir = dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = process::lock(&dir.join(".lock"))?;
    let jar = runner_jar(&dir.join("build"))?;
    let (pid_file, port_file) = (dir.join("pid"), dir.join("port"));
    if let Some(port) = process::read_number::<u16>(&port_file) {
        if process::running(&pid_file) && process::port_open(port) {
            return Ok(api_url(port));
        }
    }
    let port = process::free_port()?;
    std::fs::write(&port_file, port.to_string())?;
    let mut java = Command::new("java");
    java.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .arg(format!("-Dquarkus.http.port={port}"))
        .arg("-jar")
        .arg(&jar);
    let log = dir.join("server.log");
    let pid = process::spawn(java, lifetime, &log, &pid_file)?;
    process::wait_until_accepting("the schema registry", pid, port, START_TIMEOUT, &log)?;
    wait_until_serving(pid, port, SERVE_TIMEOUT, &log)?;
    Ok(api_url(port))
}

/// The registry's runner jar, built with Maven in `build` from [`PROJECT`]
/// unless a finished build of exactly that project is there.
fn runner_jar(build: &Path) -> Result<PathBuf> {
    let jar = build.join(RUNNER_JAR);
    if built(build) {
        return Ok(jar);
    }
    for program in ["java", "javac", "mvn"] {
        if !process::on_path(program) {
            bail!(
                "the schema registry needs a Java 17 JDK and Maven ({program} is missing): \
                 sudo apt-get install -y openjdk-17-jdk-headless maven"
            );
        }
    }
    eprintln!(
        "==> building Apicurio Registry {APICURIO_VERSION} with Maven (from Maven Central, once)"
    );
    if build.exists() {
        std::fs::remove_dir_all(build).with_context(|| format!("removing {}", build.display()))?;
    }
    write_project(build)?;
    let mut mvn = Command::new("mvn");
    mvn.current_dir(build).args([
        "-B",
        "--no-transfer-progress",
        "-Dstyle.color=never",
        "-s",
        "settings.xml",
        "package",
        "-DskipTests",
    ]);
    let log = build.parent().unwrap_or(build).join("mvn.log");
    process::run_logged(mvn, &log, &format!("mvn building Apicurio Registry {APICURIO_VERSION}"))?;
    if !jar.is_file() {
        bail!("mvn built no {}: see {}", jar.display(), log.display());
    }
    std::fs::write(build.join(".complete"), "")?;
    Ok(jar)
}

/// Write [`PROJECT`]'s files into `build`.
fn write_project(build: &Path) -> Result<()> {
    for (path, text) in PROJECT {
        let file = build.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

/// Whether `build` holds a finished build of [`PROJECT`] as it is now (a
/// changed project is built again).
fn built(build: &Path) -> bool {
    build.join(".complete").exists()
        && PROJECT.iter().all(|(path, text)| {
            std::fs::read_to_string(build.join(path)).is_ok_and(|written| written == *text)
        })
}

/// Wait until `pid` answers `GET /apis/ccompat/v7/subjects` on `port`
/// with 200 (Quarkus accepts connections a moment before it serves); fail
/// when it exits first or `timeout` passes, pointing at its `log`.
fn wait_until_serving(pid: u32, port: u16, timeout: Duration, log: &Path) -> Result<()> {
    let path = format!("{API_PATH}/subjects");
    let deadline = Instant::now() + timeout;
    loop {
        let status = get_status(port, &path);
        if status == Some(200) {
            return Ok(());
        }
        if !process::alive(pid) {
            bail!("the schema registry exited: see {}", log.display());
        }
        if Instant::now() > deadline {
            let answer = status.map_or("no answer".to_owned(), |code| format!("status {code}"));
            bail!(
                "the schema registry did not serve GET {path} within {timeout:?} ({answer}): see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The status code of `GET path` on `127.0.0.1:port`, or `None` when
/// nothing answers.
fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    status_code(&String::from_utf8_lossy(&answer))
}

/// The status code of an HTTP/1.1 `answer` (`HTTP/1.1 200 OK` …).
fn status_code(answer: &str) -> Option<u16> {
    let mut status_line = answer.lines().next()?.split_whitespace();
    status_line.next().filter(|version| version.starts_with("HTTP/"))?;
    status_line.next()?.parse().ok()
}

/// Stop the registry if it runs.
pub fn stop() -> Result<()> {
    let pid_file = dir().join("pid");
    if let Some(pid) = process::read_pid(&pid_file).filter(|pid| process::alive(*pid)) {
        process::stop(pid, STOP_GRACE)?;
    }
    let _ = std::fs::remove_file(pid_file);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_given_the_confluent_compatible_api() {
        assert_eq!(api_url(8081), "http://127.0.0.1:8081/apis/ccompat/v7");
    }

    #[test]
    fn the_status_is_read_from_the_status_line() {
        assert_eq!(status_code("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]"), Some(200));
        assert_eq!(status_code("HTTP/1.1 404 Not Found\r\n\r\n"), Some(404));
        assert_eq!(status_code(""), None);
        assert_eq!(status_code("SSH-2.0-OpenSSH_9.2\r\n"), None);
    }

    #[test]
    fn a_build_counts_only_when_finished_and_of_the_project_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let build = dir.path();
        write_project(build).unwrap();
        assert!(!built(build), "an unfinished build counted");
        std::fs::write(build.join(".complete"), "").unwrap();
        assert!(built(build));
        std::fs::write(build.join("pom.xml"), "<project/>").unwrap();
        assert!(!built(build), "a build of another pom.xml counted");
    }

    #[test]
    fn every_file_of_the_maven_project_is_built() {
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema-registry");
        let mut files = Vec::new();
        let mut dirs = vec![project.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() && path != project.join("target") {
                    dirs.push(path);
                } else if path.is_file() {
                    let relative = path.strip_prefix(&project).unwrap();
                    files.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        files.sort();
        let mut embedded: Vec<String> = PROJECT.iter().map(|(path, _)| path.to_string()).collect();
        embedded.sort();
        assert_eq!(files, embedded);
    }

    #[test]
    fn the_pom_pins_the_registry_version() {
        let pom = PROJECT.iter().find(|(path, _)| *path == "pom.xml").unwrap().1;
        assert!(pom.contains(&format!(
            "<apicurio-registry.version>{APICURIO_VERSION}</apicurio-registry.version>"
        )));
    }
}
