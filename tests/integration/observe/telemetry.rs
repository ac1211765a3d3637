//! OpenTelemetry export: with an OTLP endpoint configured, `weir run`
//! sends its spans (the run, the restore, each snapshot; with
//! `WEIR_OTLP=debug` each call into a function) to it over OTLP/HTTP;
//! without one it sends nothing, and its log lines are the same either way.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::support::*;

/// A stand-in OTLP/HTTP collector: every request body it was sent.
struct Collector {
    endpoint: String,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                kept.lock().unwrap().push(body);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Collector { endpoint, bodies }
    }

    /// Everything it received, as one byte string.
    fn received(&self) -> Vec<u8> {
        self.bodies.lock().unwrap().concat()
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// `weir run` of the revenue example with checkpoints and `env`: its
/// stderr.
fn run_revenue(dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    let spec = revenue_spec(
        dir,
        &revenue_orders(),
        &dir.join("out.jsonl"),
        "checkpoint: { interval: 1s }\n",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", spec.to_str().unwrap(), "--data-dir", dir.join("data").to_str().unwrap()])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

#[test]
fn spans_go_to_the_configured_otlp_endpoint_and_nowhere_without_one() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    run_revenue(dir.path(), &[]);
    assert!(collector.received().is_empty(), "nothing is sent without an endpoint");

    let dir = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint.as_str();
    run_revenue(dir.path(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint), ("WEIR_OTLP", "debug")]);
    // The exporter sends what is queued when the process ends.
    let received = collector.received();
    for name in ["weir", "pipeline", "restore", "snapshot", "call", "revenue-test"] {
        assert!(contains(&received, name), "no {name:?} in {} bytes of spans", received.len());
    }
}

#[test]
fn log_lines_are_filtered_by_weir_log_alone_while_spans_are_exported() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("WEIR_OTLP", "debug"),
        ("WEIR_LOG", "warn,weir_host::pipeline::restore=info"),
    ];
    let first = run_revenue(dir.path(), &env);
    // The second run over the same data directory restores the first's
    // last checkpoint, and says so at `info` in the one target logged at it.
    let second = run_revenue(dir.path(), &env);
    let restored = second.lines().filter(|l| l.contains("restored state")).count();
    assert_eq!(restored, 1, "one stage restored:\n{second}");
    for stderr in [&first, &second] {
        let info = stderr.lines().filter(|l| l.contains(" INFO "));
        for line in info {
            assert!(line.contains("weir_host::pipeline::restore"), "not asked for: {line}");
        }
        assert!(!stderr.contains("DEBUG"), "debug spans are exported, not logged:\n{stderr}");
    }
    let received = collector.received();
    for name in ["restore", "snapshot", "call"] {
        assert!(contains(&received, name), "no {name:?} in {} bytes of spans", received.len());
    }
}
