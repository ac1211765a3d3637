//! An S3-compatible server (moto) on a free loopback port, for the
//! `s3://` checkpoint tests and the cluster quick start, and its buckets
//! ([`create_bucket`]). Its state lives in `~/.cache/weir/s3` (`port`,
//! `pid`, `server.log`); its buckets only in its memory.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use crate::process::{self, Lifetime};
use crate::python_tool::MOTO;

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn dir() -> PathBuf {
    process::cache_dir().join("s3")
}

/// Whether the server runs.
pub fn running() -> bool {
    process::running(&dir().join("pid"))
}

/// Start the server (installing moto once) unless it runs, and return its
/// endpoint, `http://127.0.0.1:<port>`.
pub fn start(lifetime: Lifetime) -> Result<String> {
    let server = MOTO.install()?;
    let dir = dir();
    std::fs::create_dir_all(&dir)?;
    let _lock = process::lock(&dir.join(".lock"))?;
    let (pid_file, port_file) = (dir.join("pid"), dir.join("port"));
    if let Some(port) = process::read_number::<u16>(&port_file) {
        if process::running(&pid_file) && process::port_open(port) {
            return Ok(format!("http://127.0.0.1:{port}"));
        }
    }
    let port = process::free_port()?;
    std::fs::write(&port_file, port.to_string())?;
    let mut command = Command::new(server);
    command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    let log = dir.join("server.log");
    let pid = process::spawn(command, lifetime, &log, &pid_file)?;
    process::wait_until_accepting("the S3 server", pid, port, START_TIMEOUT, &log)?;
    Ok(format!("http://127.0.0.1:{port}"))
}

/// Create bucket `name` on the server at `endpoint` (`http://127.0.0.1:<port>`,
/// as [`start`] returns it); one that exists is kept as it is.
pub fn create_bucket(endpoint: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        bail!("{name:?} is not a bucket name (lower-case letters, digits, '-' and '.')");
    }
    let address = endpoint.strip_prefix("http://").unwrap_or(endpoint).trim_end_matches('/');
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "PUT /{name} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).with_context(|| format!("creating bucket {name}"))?;
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    match status {
        "200" => Ok(()),
        "409" if answer.contains("BucketAlreadyOwnedByYou") => Ok(()),
        _ => bail!("creating bucket {name}: {}", answer.lines().next().unwrap_or("no answer")),
    }
}

/// Stop the server if it runs.
pub fn stop() -> Result<()> {
    let pid_file = dir().join("pid");
    if let Some(pid) = process::read_pid(&pid_file).filter(|pid| process::alive(*pid)) {
        process::stop(pid, Duration::from_secs(10))?;
    }
    let _ = std::fs::remove_file(pid_file);
    Ok(())
}
