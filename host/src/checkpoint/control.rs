//! How `weir savepoint` and `weir stop` reach a running `weir run`: files in
//! the pipeline's control directory.
//!
//! ```text
//! <control>/owner               pid of the process running the pipeline
//! <control>/<nonce>.request     {"kind":"savepoint","stop":true}, written atomically
//! <control>/<nonce>.response    {"ok":true,"location":"…"} or {"ok":false,"error":"…"}
//! ```
//!
//! The running coordinator takes requests (deleting them) and answers each
//! with a response the client waits for. Requests made in the same
//! process (the HTTP API's) carry a channel to answer on instead of a file
//! ([`Request::in_process`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::metadata::SnapshotKind;

/// One pipeline's control directory.
#[derive(Debug, Clone)]
pub struct ControlDir {
    dir: PathBuf,
}

/// A request read from the control directory.
#[derive(Debug)]
pub struct Request {
    /// Savepoint, or checkpoint (a plain stop).
    pub kind: SnapshotKind,
    /// Stop the pipeline once it is taken.
    pub stop: bool,
    /// A drained stop (a cluster unit's, see `docs/cluster.md`): the sinks
    /// tell what they feed that this run writes nothing more.
    pub drain: bool,
    reply: Reply,
}

/// Where a request's answer goes.
#[derive(Debug)]
enum Reply {
    /// A response file the client polls for.
    File(PathBuf),
    /// A channel the in-process caller waits on.
    Channel(std::sync::mpsc::Sender<Response>),
}

#[derive(Debug, Serialize, Deserialize)]
struct RequestFile {
    kind: SnapshotKind,
    stop: bool,
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the snapshot was taken.
    pub ok: bool,
    /// Where it is.
    #[serde(default)]
    pub location: Option<String>,
    /// Why not.
    #[serde(default)]
    pub error: Option<String>,
}

impl Response {
    /// The snapshot is at `location`.
    pub fn done(location: &str) -> Self {
        Self { ok: true, location: Some(location.to_string()), error: None }
    }

    /// The snapshot failed because of `error`.
    pub fn failed(error: &str) -> Self {
        Self { ok: false, location: None, error: Some(error.to_string()) }
    }
}

impl Request {
    /// A request from this process, and where its answer will arrive.
    pub fn in_process(
        kind: SnapshotKind,
        stop: bool,
    ) -> (Self, std::sync::mpsc::Receiver<Response>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Self { kind, stop, drain: false, reply: Reply::Channel(tx) }, rx)
    }

    /// A drained stop from this process (a final savepoint — self-contained,
    /// kept, restorable at any parallelism — after which the run's sinks
    /// tell what they feed that it ended), and where its answer will arrive.
    pub fn drain() -> (Self, std::sync::mpsc::Receiver<Response>) {
        let (request, answer) = Self::in_process(SnapshotKind::Savepoint, true);
        (Self { drain: true, ..request }, answer)
    }

    /// Answer the client (best effort: it may have given up).
    pub fn respond(&self, response: &Response) {
        match &self.reply {
            Reply::Channel(tx) => {
                let _ = tx.send(response.clone());
            }
            Reply::File(path) => {
                if let Err(error) = serde_json::to_vec(response)
                    .map_err(std::io::Error::other)
                    .and_then(|bytes| write_atomically(path, &bytes))
                {
                    tracing::warn!(path = %path.display(), %error, "cannot answer a control request");
                }
            }
        }
    }
}

impl ControlDir {
    /// The control directory at `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Record this process as the pipeline's runner.
    pub fn claim(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        write_atomically(&self.dir.join("owner"), std::process::id().to_string().as_bytes())
    }

    /// Stop being the runner.
    pub fn release(&self) {
        let _ = std::fs::remove_file(self.dir.join("owner"));
    }

    /// The pid of the live process running the pipeline, if any.
    pub fn owner(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.dir.join("owner")).ok()?.trim().parse().ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    /// Take every waiting request, oldest name first.
    pub fn take_requests(&self) -> Vec<Request> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "request"))
            .collect();
        paths.sort();
        let mut requests = Vec::new();
        for path in paths {
            let parsed = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<RequestFile>(&bytes).ok());
            let _ = std::fs::remove_file(&path);
            let request = parsed.map(|r| Request {
                kind: r.kind,
                stop: r.stop,
                drain: false,
                reply: Reply::File(path.with_extension("response")),
            });
            match request {
                Some(request) => requests.push(request),
                None => {
                    tracing::warn!(path = %path.display(), "ignoring an unreadable control request")
                }
            }
        }
        requests
    }

    /// Ask the running pipeline for a snapshot and wait up to `timeout`
    /// for the answer.
    pub fn request(
        &self,
        kind: SnapshotKind,
        stop: bool,
        timeout: Duration,
    ) -> Result<Response, String> {
        if self.owner().is_none() {
            return Err("the pipeline is not running here (no live `weir run` owns it)".into());
        }
        let nonce = format!("{}-{}", crate::clock::now_millis(), std::process::id());
        let request = self.dir.join(format!("{nonce}.request"));
        let response = request.with_extension("response");
        let bytes = serde_json::to_vec(&RequestFile { kind, stop }).map_err(|e| e.to_string())?;
        write_atomically(&request, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", request.display()))?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(bytes) = std::fs::read(&response) {
                let _ = std::fs::remove_file(&response);
                return serde_json::from_slice(&bytes)
                    .map_err(|e| format!("unreadable answer: {e}"));
            }
            if self.owner().is_none() {
                let _ = std::fs::remove_file(&request);
                return Err("the pipeline stopped before answering".into());
            }
            if Instant::now() >= deadline {
                let _ = std::fs::remove_file(&request);
                return Err(format!("no answer within {}", humantime::format_duration(timeout)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
