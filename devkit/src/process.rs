//! Background service processes: started [`Lifetime::Detached`] (kept
//! running for later runs, its pid in a file) or [`Lifetime::Owned`]
//! (killed by the kernel when the thread that started it ends, even by
//! `kill -9`, as Testcontainers' reaper removes a dead session's
//! containers), waited for until they accept connections, and stopped.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// How long a started service lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Until it is stopped: it outlives the process that started it, so
    /// later runs reuse it.
    Detached,
    /// Until the thread that started it ends (`PR_SET_PDEATHSIG`): a test
    /// or a test run that dies, however it dies, leaves nothing behind.
    Owned,
}

/// A free TCP port on the loopback interface (free when asked: bound and
/// released at once).
pub fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Whether something accepts TCP connections on `127.0.0.1:port`.
pub fn port_open(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_ok()
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and
        // may itself hold spaces or parentheses.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The number recorded in `file` (a pid, a port), if there is one.
pub fn read_number<T: std::str::FromStr>(file: &Path) -> Option<T> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The pid recorded in `file`, if there is one.
pub fn read_pid(file: &Path) -> Option<u32> {
    read_number(file)
}

/// Whether the process whose pid `file` records is alive.
pub fn running(file: &Path) -> bool {
    read_pid(file).is_some_and(alive)
}

/// An exclusive lock on `path` (created when missing), held until the
/// returned file is dropped: two processes starting the same service wait
/// for each other instead of starting it twice.
pub fn lock(path: &Path) -> Result<File> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    file.lock().with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// Start `command` in a session of its own with stdin closed and stdout and
/// stderr appended to `log`, write its pid to `pid_file`, and return the
/// pid. A thread reaps it when it exits, so a stopped service never lingers
/// as a zombie of a long-running parent.
pub fn spawn(mut command: Command, lifetime: Lifetime, log: &Path, pid_file: &Path) -> Result<u32> {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    let parent = std::process::id();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and calls
    // only async-signal-safe functions (setsid, prctl, getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            libc::setsid();
            if lifetime == Lifetime::Owned {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent may have died between fork and prctl.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
            }
            Ok(())
        });
    }
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command.spawn().with_context(|| format!("starting {program}"))?;
    let pid = child.id();
    std::fs::write(pid_file, pid.to_string())
        .with_context(|| format!("writing {}", pid_file.display()))?;
    std::thread::spawn(move || child.wait());
    Ok(pid)
}

/// Wait until `pid` accepts connections on `port`; fail when it exits
/// first or `timeout` passes, pointing at its `log`.
pub fn wait_until_accepting(
    what: &str,
    pid: u32,
    port: u16,
    timeout: Duration,
    log: &Path,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !port_open(port) {
        if !alive(pid) {
            bail!("{what} exited: see {}", log.display());
        }
        if Instant::now() > deadline {
            bail!("{what} did not accept connections within {timeout:?}: see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Send `signal` to `pid` (no error when it is already gone).
pub fn signal(pid: u32, signal: i32) {
    #[allow(unsafe_code)]
    // SAFETY: kill(2) with a pid read from our own pid file; no memory is
    // shared.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Wait until `pid` is gone; whether it went within `timeout`.
pub fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Stop `pid`: SIGTERM, then SIGKILL after `grace`; returns once it is
/// gone.
pub fn stop(pid: u32, grace: Duration) -> Result<()> {
    signal(pid, libc::SIGTERM);
    if wait_gone(pid, grace) {
        return Ok(());
    }
    kill(pid)
}

/// Kill `pid` with SIGKILL and wait until it is gone.
pub fn kill(pid: u32) -> Result<()> {
    signal(pid, libc::SIGKILL);
    if !wait_gone(pid, Duration::from_secs(30)) {
        bail!("process {pid} did not die after SIGKILL");
    }
    Ok(())
}

/// Run `command` to completion with its output going to `log`; fail with
/// the log's path when it fails.
pub fn run_logged(mut command: Command, log: &Path, what: &str) -> Result<()> {
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let status =
        command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out).status().with_context(
            || format!("{what}: starting {}", command.get_program().to_string_lossy()),
        )?;
    if !status.success() {
        bail!("{what} failed ({status}): see {}", log.display());
    }
    Ok(())
}

/// Whether `program` is on `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// `~/.cache/weir`, where the services keep their downloads and state.
pub fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache/weir")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sleep 600` started with `lifetime` from a thread that then ends;
    /// its pid and pid file.
    fn sleep_from_a_thread(dir: &Path, lifetime: Lifetime) -> (u32, PathBuf) {
        let (log, pid_file) = (dir.join("log"), dir.join("pid"));
        let written = pid_file.clone();
        let mut sleep = Command::new("sleep");
        sleep.arg("600");
        let pid = std::thread::spawn(move || spawn(sleep, lifetime, &log, &written))
            .join()
            .unwrap()
            .unwrap();
        (pid, pid_file)
    }

    #[test]
    fn an_owned_service_dies_with_the_thread_that_started_it() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, pid_file) = sleep_from_a_thread(dir.path(), Lifetime::Owned);
        assert_eq!(read_pid(&pid_file), Some(pid));
        assert!(wait_gone(pid, Duration::from_secs(30)), "the owned sleep outlived its thread");
    }

    #[test]
    fn a_detached_service_outlives_its_thread_until_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, pid_file) = sleep_from_a_thread(dir.path(), Lifetime::Detached);
        std::thread::sleep(Duration::from_millis(300));
        assert!(running(&pid_file), "the detached sleep died with its thread");
        stop(pid, Duration::from_secs(5)).unwrap();
        assert!(!running(&pid_file));
    }

    #[test]
    fn waiting_for_a_port_fails_when_the_service_exits_naming_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let (log, pid_file) = (dir.path().join("log"), dir.path().join("pid"));
        let pid = spawn(Command::new("true"), Lifetime::Owned, &log, &pid_file).unwrap();
        let port = free_port().unwrap();
        let error =
            wait_until_accepting("the test service", pid, port, Duration::from_secs(30), &log)
                .unwrap_err()
                .to_string();
        assert!(error.contains("the test service exited") && error.contains("log"), "{error}");
    }

    #[test]
    fn a_listening_port_is_open() {
        // (Whether a released port is closed cannot be asserted: a connect
        // to a free ephemeral port may pick it as its own source port and
        // connect to itself.)
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(port_open(listener.local_addr().unwrap().port()));
    }
}
