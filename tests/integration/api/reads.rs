//! Readers cannot exhaust `weir serve`: a thousand abandoned tail
//! connections and a thousand parallel state lookups get 429 naming the
//! limit past the operator's caps (per pipeline and per token), everything
//! they held is given back (the `/metrics` gauges return to zero), and a
//! deploy and a stop issued meanwhile are answered.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use weir_host::api::access::{token_line, Role};

use crate::support::*;

const ADMIN: Option<&str> = Some("r00t");
const READERS: [&str; 2] = ["reader-one-token", "reader-two-token"];

/// Long enough for any answer; only a wedged server takes longer.
const WEDGED: Duration = Duration::from_secs(120);

/// `GET path` on a connection of its own; the status, what was read of
/// the response (the head only for a tail's 200, all of it otherwise),
/// and for a tail's 200 the connection, still open.
fn open(address: &str, path: &str, token: &str) -> (u16, String, Option<TcpStream>) {
    send(address, "GET", path, token, None)
}

/// `method path` with `body` of `(content type, bytes)`, as [`open`].
fn send(
    address: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<(&str, &[u8])>,
) -> (u16, String, Option<TcpStream>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(WEDGED)).unwrap();
    let (content, bytes) = match body {
        Some((kind, bytes)) => (format!("Content-Type: {kind}\r\n"), bytes),
        None => (String::new(), &b""[..]),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n{content}Content-Length: {}\r\nConnection: close\r\n\r\n",
        bytes.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(bytes).unwrap();
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert!(n > 0, "GET {path}: closed before a status");
        response.extend_from_slice(&chunk[..n]);
    }
    let status: u16 = String::from_utf8_lossy(&response)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {:?}", String::from_utf8_lossy(&response)));
    if status == 200 && path.contains("/tail") {
        return (status, String::from_utf8_lossy(&response).into_owned(), Some(stream));
    }
    let _ = stream.read_to_end(&mut response);
    (status, String::from_utf8_lossy(&response).into_owned(), None)
}

/// The value of `family{pipeline="pipeline"}` on `/metrics`.
fn gauge(server: &Server, family: &str, pipeline: &str) -> u64 {
    let (status, text) = server.call("GET", "/metrics", ADMIN, b"");
    assert_eq!(status, 200, "{text}");
    let prefix = format!("{family}{{pipeline=\"{pipeline}\"}} ");
    let text = text.as_str().unwrap_or_default().to_string();
    let line = text.lines().find_map(|l| l.strip_prefix(&prefix));
    line.unwrap_or_else(|| panic!("no {prefix} in\n{text}")).trim().parse().unwrap()
}

/// Poll `family` of `pipeline` until it is 0; how long that took.
fn until_zero(server: &Server, family: &str, pipeline: &str) -> Duration {
    let started = Instant::now();
    loop {
        let held = gauge(server, family, pipeline);
        if held == 0 {
            return started.elapsed();
        }
        assert!(started.elapsed() < WEDGED, "{family} of {pipeline} stays at {held}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The server's resident memory, in KiB.
fn rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
    line.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// `POST path` (an admin's) in a thread of its own; its status and body
/// once they come, and how long that took.
fn post_in_background(
    server: &Server,
    path: &'static str,
    body: (&'static str, Vec<u8>),
) -> mpsc::Receiver<(u16, String, Duration)> {
    let (sent, answer) = mpsc::channel();
    let address = server.address.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        let token = ADMIN.unwrap();
        let (status, text, _) = send(&address, "POST", path, token, Some((body.0, &body.1)));
        let _ = sent.send((status, text, started.elapsed()));
    });
    answer
}

#[test]
fn abandoned_tails_and_floods_of_lookups_are_bounded_and_never_wedge_deploys_or_stops() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let lines: Vec<String> = READERS.iter().map(|t| token_line(Role::Read, t, None)).collect();
    std::fs::write(&tokens, lines.join("\n") + "\n").unwrap();
    let limits = [
        "--max-tails-per-pipeline",
        "40",
        "--max-tails-per-token",
        "25",
        "--max-lookups-per-pipeline",
        "12",
        "--max-lookups-per-token",
        "8",
    ];
    let args = [&["--token", "r00t", "--tokens", tokens.to_str().unwrap()][..], &limits].concat();
    // A slow sink keeps the busy pipeline's subtasks backpressured, so
    // lookups wait for their answers.
    let server =
        Server::start_with_env(&dir.path().join("data"), &args, &[("WEIR_SINK_DELAY_MS", "200")]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", ADMIN, &wasm).0, 201);
    let quiet = "{ type: generator, count: 100000000, keys: 10, rate: 1 }";
    let busy = "{ type: generator, count: 100000000, keys: 10, rate: 5000 }";
    for (name, source) in [("quiet", quiet), ("busy", busy)] {
        let spec = stored_revenue_spec(name, source, "{ type: discard }", "batch_size: 100\n");
        let (status, body) = server.call("POST", "/v1/pipelines", ADMIN, spec.as_bytes());
        assert_eq!(status, 201, "{body}");
        let path = format!("/v1/pipelines/{name}");
        server.wait_for(&path, ADMIN, Duration::from_secs(60), |s| s["metrics"].is_object());
    }
    let rss_before = rss_kib(&server);

    // 1,000 tail connections on the quiet pipeline, 500 per token, kept
    // open: 25 for the first token (its limit), 15 more for the second
    // (the pipeline's limit of 40); every other one is refused naming the
    // limit it met.
    let tail = "/v1/pipelines/quiet/tail?limit=1000&rate=10";
    let mut open_tails = Vec::new();
    for (token, (ok, flag)) in
        READERS.iter().zip([(25, "--max-tails-per-token"), (15, "--max-tails-per-pipeline")])
    {
        let mut accepted = 0;
        for _ in 0..500 {
            match open(&server.address, tail, token) {
                (200, _, Some(stream)) => {
                    accepted += 1;
                    open_tails.push(stream);
                }
                (429, body, _) => {
                    assert!(body.contains("too_many_requests") && body.contains(flag), "{body}")
                }
                (status, body, _) => panic!("tail: {status} {body}"),
            }
        }
        assert_eq!(accepted, ok, "{token}");
    }
    assert_eq!(gauge(&server, "weir_tail_readers", "quiet"), 40);
    // Abandoned: the clients go away without reading a byte.
    drop(open_tails);
    let pruned = until_zero(&server, "weir_tail_readers", "quiet");
    eprintln!("40 abandoned tail readers let go {pruned:?} after their clients left");
    let (status, body, again) = open(&server.address, tail, READERS[0]);
    assert!(status == 200 && again.is_some(), "a slot is free again: {status} {body}");
    drop(again);

    // 1,000 parallel state lookups of the busy pipeline, half per token,
    // and meanwhile a deploy and a stop.
    let started = Instant::now();
    let lookups: Vec<mpsc::Receiver<(u16, String, Duration)>> = (0..1000)
        .map(|i| {
            let (sent, answer) = mpsc::channel();
            let address = server.address.clone();
            let token = READERS[i % 2];
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let path = "/v1/pipelines/busy/state?state=total&key=1&decode=i64";
                    let started = Instant::now();
                    let (status, body, _) = open(&address, path, token);
                    let _ = sent.send((status, body, started.elapsed()));
                })
                .unwrap();
            answer
        })
        .collect();
    let spec = generator_spec("third", "").into_bytes();
    let deploy = post_in_background(&server, "/v1/pipelines", ("application/yaml", spec));
    let stop = post_in_background(
        &server,
        "/v1/pipelines/quiet/stop",
        ("application/json", b"{}".to_vec()),
    );
    let (status, body, deployed_in) =
        deploy.recv_timeout(WEDGED).expect("the deploy is answered (the server is not wedged)");
    assert!(status == 201 && body.contains("third"), "{status} {body}");
    let (status, body, stopped_in) =
        stop.recv_timeout(WEDGED).expect("the stop is answered (the server is not wedged)");
    assert_eq!(status, 200, "{body}");
    eprintln!(
        "during 1,000 parallel lookups: deploy answered in {deployed_in:?}, stop in {stopped_in:?}"
    );

    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut slowest = std::collections::BTreeMap::<u16, Duration>::new();
    for answer in lookups {
        let (status, body, took) = answer.recv_timeout(WEDGED).expect("every lookup is answered");
        let longest = slowest.entry(status).or_default();
        *longest = took.max(*longest);
        match status {
            200 => assert!(body.contains("\"found\""), "{body}"),
            429 => assert!(
                body.contains("too_many_requests")
                    && (body.contains("--max-lookups-per-pipeline")
                        || body.contains("--max-lookups-per-token")),
                "{body}"
            ),
            503 => assert!(body.contains("timeout"), "{body}"),
            _ => panic!("lookup: {status} {body}"),
        }
        *statuses.entry(status).or_default() += 1;
    }
    eprintln!(
        "1,000 parallel lookups answered in {:?}: {statuses:?}, the slowest of each status {slowest:?}",
        started.elapsed()
    );
    assert!(statuses.get(&429) > Some(&0), "the limits refused some: {statuses:?}");
    assert!(statuses.get(&200) > Some(&0), "lookups within the limits are answered: {statuses:?}");
    assert_eq!(gauge(&server, "weir_state_lookups_waiting", "busy"), 0);
    assert_eq!(gauge(&server, "weir_tail_readers", "quiet"), 0);
    let rss_after = rss_kib(&server);
    eprintln!("server memory: {rss_before} KiB before, {rss_after} KiB after");
}
