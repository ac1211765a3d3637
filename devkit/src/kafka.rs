//! A real Apache Kafka broker (single-node KRaft) on loopback ports: its
//! jars fetched once with Maven, a log directory formatted once, started,
//! stopped and killed.
//!
//! A broker lives in a directory of its own: `logs/` (the KRaft log),
//! `port` and `controller-port` (chosen free on the first start and kept,
//! so a restarted broker keeps its address), `pid`, `server.properties`,
//! `broker.log`. The shared broker of the tests lives in [`default_dir`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::process::{self, Lifetime};

/// The Kafka release the tests run against.
pub const KAFKA_VERSION: &str = "4.4.0";
/// The logging backend the broker's jars are fetched with.
const SLF4J_VERSION: &str = "1.7.36";
/// How long a broker may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a stopped broker may take to shut down before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The shared broker's directory: `~/.cache/weir/kafka/broker`.
pub fn default_dir() -> PathBuf {
    process::cache_dir().join("kafka/broker")
}

/// Where the broker's jars are kept: `$WEIR_KAFKA_HOME`, else
/// `~/.cache/weir/kafka/<version>`.
fn kafka_home() -> PathBuf {
    std::env::var_os("WEIR_KAFKA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| process::cache_dir().join("kafka").join(KAFKA_VERSION))
}

/// The broker's jars with their dependencies (`org.apache.kafka:kafka_2.13`
/// and `slf4j-simple` from Maven Central), fetched once; returns the
/// directory holding them.
pub fn jars() -> Result<PathBuf> {
    let home = kafka_home();
    let libs = home.join("libs");
    if libs.join(".complete").exists() {
        return Ok(libs);
    }
    for program in ["java", "mvn"] {
        if !process::on_path(program) {
            bail!(
                "the Kafka broker needs Java 17 and Maven ({program} is missing): run `scripts/dev \
                 setup`, or sudo apt-get install -y openjdk-17-jre-headless maven"
            );
        }
    }
    eprintln!("==> fetching Apache Kafka {KAFKA_VERSION}'s broker jars from Maven Central");
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    std::fs::write(home.join("pom.xml"), pom())?;
    if libs.exists() {
        std::fs::remove_dir_all(&libs)?;
    }
    let mut mvn = Command::new("mvn");
    mvn.current_dir(&home).args([
        "-B",
        "-Dstyle.color=never",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
    ]);
    mvn.arg(format!("-DoutputDirectory={}", libs.display()));
    process::run_logged(
        mvn,
        &home.join("mvn.log"),
        &format!("mvn fetching org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"),
    )?;
    std::fs::write(libs.join(".complete"), "")?;
    Ok(libs)
}

/// The Maven project whose dependencies are the broker's classpath.
fn pom() -> String {
    format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.weir</groupId><artifactId>test-kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{KAFKA_VERSION}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>{SLF4J_VERSION}</version></dependency>
  </dependencies>
</project>
"#
    )
}

/// The broker's configuration: a single node that is both broker and
/// controller on `port` and `controller`, internal topics small and
/// unreplicated, no time-based retention, then `overrides` (`name=value`,
/// later lines win in Java properties).
pub fn server_properties(dir: &Path, port: u16, controller: u16, overrides: &[String]) -> String {
    let mut lines = vec![
        "process.roles=broker,controller".to_owned(),
        "node.id=1".to_owned(),
        format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
        format!("listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"),
        format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}"),
        "controller.listener.names=CONTROLLER".to_owned(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_owned(),
        "inter.broker.listener.name=PLAINTEXT".to_owned(),
        format!("log.dirs={}", dir.join("logs").display()),
        "num.partitions=1".to_owned(),
        "offsets.topic.replication.factor=1".to_owned(),
        "offsets.topic.num.partitions=4".to_owned(),
        "transaction.state.log.replication.factor=1".to_owned(),
        "transaction.state.log.min.isr=1".to_owned(),
        "transaction.state.log.num.partitions=4".to_owned(),
        "share.coordinator.state.topic.replication.factor=1".to_owned(),
        "group.initial.rebalance.delay.ms=0".to_owned(),
        // Records carry their event time, and the tests' events are from
        // January 2026: time-based retention would delete them at once.
        "log.retention.ms=-1".to_owned(),
    ];
    lines.extend(overrides.iter().cloned());
    lines.join("\n") + "\n"
}

/// The port recorded in `file`, or a free one recorded there now.
fn kept_port(file: &Path) -> Result<u16> {
    if let Some(port) = process::read_number(file) {
        return Ok(port);
    }
    let port = process::free_port()?;
    std::fs::write(file, port.to_string())?;
    Ok(port)
}

/// Start the broker of `dir` (created and formatted on first use) with the
/// broker settings `overrides`, wait until it accepts connections, and
/// return its bootstrap address. A broker already running on `dir` is
/// kept, whatever its lifetime.
pub fn start(dir: &Path, overrides: &[String], lifetime: Lifetime) -> Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let libs = jars()?;
    let _lock = process::lock(&dir.join(".lock"))?;
    let pid_file = dir.join("pid");
    if let Some(port) = process::read_number::<u16>(&dir.join("port")) {
        if process::running(&pid_file) && process::port_open(port) {
            return Ok(format!("127.0.0.1:{port}"));
        }
    }
    let port = kept_port(&dir.join("port"))?;
    let controller = kept_port(&dir.join("controller-port"))?;
    let properties = dir.join("server.properties");
    std::fs::write(&properties, server_properties(&dir, port, controller, overrides))?;
    let classpath = format!("{}/*", libs.display());
    if !dir.join("logs/meta.properties").exists() {
        format(&dir, &classpath, &properties)?;
    }
    let mut java = Command::new("java");
    java.args(["-Xms256m", "-Xmx768m", "-XX:+UseSerialGC"])
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .args(["-cp", &classpath, "kafka.Kafka"])
        .arg(&properties);
    let log = dir.join("broker.log");
    let pid = process::spawn(java, lifetime, &log, &pid_file)?;
    let what = format!("the broker in {}", dir.display());
    process::wait_until_accepting(&what, pid, port, START_TIMEOUT, &log)?;
    Ok(format!("127.0.0.1:{port}"))
}

/// Format `dir/logs` as a KRaft log directory with a fresh cluster id.
fn format(dir: &Path, classpath: &str, properties: &Path) -> Result<()> {
    let uuid = Command::new("java")
        .args(["-cp", classpath, "kafka.tools.StorageTool", "random-uuid"])
        .output()
        .context("running Kafka's StorageTool")?;
    if !uuid.status.success() {
        bail!(
            "kafka.tools.StorageTool random-uuid failed: {}",
            String::from_utf8_lossy(&uuid.stderr)
        );
    }
    let uuid = String::from_utf8(uuid.stdout)?.trim().to_owned();
    let mut tool = Command::new("java");
    tool.args(["-cp", classpath, "kafka.tools.StorageTool", "format", "-c"])
        .arg(properties)
        .args(["-t", &uuid]);
    process::run_logged(
        tool,
        &dir.join("format.log"),
        &format!("formatting {}/logs", dir.display()),
    )
}

/// Whether a broker is running on `dir`.
pub fn running(dir: &Path) -> bool {
    process::running(&dir.join("pid"))
}

/// Stop `dir`'s broker: SIGTERM, then SIGKILL after 20 s. Nothing to do
/// when none runs.
pub fn stop(dir: &Path) -> Result<()> {
    match process::read_pid(&dir.join("pid")).filter(|pid| process::alive(*pid)) {
        Some(pid) => process::stop(pid, STOP_GRACE),
        None => Ok(()),
    }
}

/// Kill `dir`'s broker with SIGKILL (as a crash would) and wait until it
/// is gone.
pub fn kill(dir: &Path) -> Result<()> {
    match process::read_pid(&dir.join("pid")) {
        Some(pid) => process::kill(pid),
        None => bail!("no broker pid in {}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_properties_name_the_ports_and_log_dir_and_end_with_the_overrides() {
        let text = server_properties(
            Path::new("/k"),
            9092,
            9093,
            &["transaction.max.timeout.ms=10000".to_owned()],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"));
        assert!(lines.contains(&"controller.quorum.voters=1@127.0.0.1:9093"));
        assert!(lines.contains(&"log.dirs=/k/logs"));
        assert!(lines.contains(&"log.retention.ms=-1"));
        assert_eq!(lines.last(), Some(&"transaction.max.timeout.ms=10000"));
    }

    #[test]
    fn a_port_once_chosen_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("port");
        let first = kept_port(&file).unwrap();
        assert_eq!(kept_port(&file).unwrap(), first);
    }

    #[test]
    fn the_pom_pins_the_broker_version() {
        assert!(
            pom().contains(&format!("<artifactId>kafka_2.13</artifactId><version>{KAFKA_VERSION}"))
        );
    }
}
