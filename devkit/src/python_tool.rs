//! Python tools from PyPI, each pinned and installed once into a virtual
//! environment of its own under `~/.cache/weir`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::process;

/// A pinned PyPI requirement and the command it provides.
pub struct PythonTool {
    /// The requirement, e.g. `moto[server]==5.2.5`.
    pub requirement: &'static str,
    /// The virtual environment's directory name under `~/.cache/weir`.
    pub home: &'static str,
    /// The command, in the environment's `bin/`.
    pub command: &'static str,
}

impl PythonTool {
    /// The tool's command, installed first when it is not yet.
    pub fn install(&self) -> Result<PathBuf> {
        let home = process::cache_dir().join(self.home);
        let command = home.join("bin").join(self.command);
        let marker = home.join(".complete");
        if marker.exists() && command.exists() {
            return Ok(command);
        }
        if !process::on_path("python3") {
            bail!(
                "{} needs Python 3: sudo apt-get install -y python3 python3-venv",
                self.requirement
            );
        }
        eprintln!("==> installing {} from PyPI into {}", self.requirement, home.display());
        let venv = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&home)
            .status()
            .context("running python3 -m venv")?;
        if !venv.success() {
            bail!("python3 -m venv failed (Debian: sudo apt-get install -y python3-venv)");
        }
        let pip = Command::new(home.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", self.requirement])
            .status()
            .context("running pip")?;
        if !pip.success() {
            bail!("pip could not install {}", self.requirement);
        }
        std::fs::write(marker, "")?;
        Ok(command)
    }
}

/// schemathesis, which the API fuzz test drives.
pub const SCHEMATHESIS: PythonTool =
    PythonTool { requirement: "schemathesis==4.32.5", home: "schemathesis-4.32.5", command: "st" };

/// moto's S3-compatible server.
pub const MOTO: PythonTool =
    PythonTool { requirement: "moto[server]==5.2.5", home: "moto-5.2.5", command: "moto_server" };

/// Confluent's Python client with its schema-registry serializers (Avro,
/// Protobuf), the standard client the format tests produce and read with.
pub const CONFLUENT_KAFKA: PythonTool = PythonTool {
    requirement: "confluent-kafka[avro,protobuf,schemaregistry]==2.16.2",
    home: "confluent-kafka-2.16.2",
    command: "python",
};
