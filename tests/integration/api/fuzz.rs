//! API fuzzing from the API's own OpenAPI document: schemathesis (from
//! PyPI, pinned in `devkit/src/python_tool.rs`) generates requests for every operation
//! of `weir serve` — valid and invalid names, queries, bodies and methods —
//! with a fixed seed and a fixed budget, and checks each answer against
//! the document (status codes, content types, body schemas).
//!
//! The test asserts what a tenant must never see: a 5xx, a dead server,
//! or a refused request changing the function store or the pipeline
//! records. Names are generated, never taken from answers, so no
//! state-changing request can succeed: the report must show each one
//! refused and the records must stay byte-identical. A second run without
//! the token must be answered 401 everywhere, and a last stateful run,
//! which reuses the real names from answers (upgrades, stops, deletes),
//! must still find no 5xx.
//!
//! schemathesis comes from `$WEIR_TEST_SCHEMATHESIS` (`scripts/dev test`
//! sets it), else this test installs it once (refused under `CI=true`,
//! where it must be given).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::*;

/// Environment variable naming schemathesis's `st` command.
pub const SCHEMATHESIS_ENV: &str = "WEIR_TEST_SCHEMATHESIS";

/// Where the server serves its OpenAPI document.
const OPENAPI_PATH: &str = "/v1/openapi.json";

const TOKEN: &str = "fuzz-t0ken";

/// Generated test cases per operation in the main run (with the token).
const EXAMPLES_PER_OPERATION: u32 = 1100;

/// The least number of requests the main run must have sent.
const MIN_REQUESTS: usize = 10_000;

/// The fixed seed of every run.
const SEED: &str = "25";

/// Configuration of the runs: generated names only, never names read
/// from earlier answers (so no request can touch the real function or
/// pipeline; the stateful phase keeps its default and reuses them); no
/// steering by earlier 4xx answers ("error feedback": shared between
/// operations, it cut some operation's cases short in some runs, so the
/// budget varied).
const CONFIG: &str = "\
[phases.examples.extra-data-sources]
responses = false
[phases.coverage.extra-data-sources]
responses = false
[phases.fuzzing.extra-data-sources]
responses = false
[phases.fuzzing.error-feedback]
enabled = false
";

/// schemathesis hooks: an `application/wasm` body is raw bytes.
const HOOKS: &str = "\
import schemathesis
schemathesis.serializer.alias(\"application/wasm\", \"application/octet-stream\")
";

/// The checks of every run: all but those that cannot hold for this API
/// (`positive_data_acceptance`: a schema-valid string is rarely a valid
/// spec or name; `object_level_authorization` needs several users).
const EXCLUDED_CHECKS: &str = "positive_data_acceptance,object_level_authorization";

#[test]
fn fuzzing_the_api_from_its_openapi_document_finds_no_server_error() {
    let st = schemathesis();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, &["--token", TOKEN]);
    let token = Some(TOKEN);

    // Real names exist: a function and a (finished) pipeline using it.
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", token, &wasm).0, 201);
    let spec = "name: orders\nsource: { type: generator, count: 100 }\n\
                key: { function: revenue }\nprocess: { function: revenue }\nsink: { type: discard }\n";
    let (status, deployed) = server.call("POST", "/v1/pipelines", token, spec.as_bytes());
    assert_eq!(status, 201, "{deployed}");
    server.wait_for("/v1/pipelines/orders", token, Duration::from_secs(60), |s| {
        s["state"] == "finished"
    });
    let before = records(&data);
    assert!(before.len() >= 3, "the function and the pipeline are stored: {:?}", before.keys());

    let (status, document) = server.call("GET", OPENAPI_PATH, token, b"");
    assert_eq!(status, 200, "{document}");
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        operations.extend(
            item.as_object().unwrap().keys().map(|m| format!("{} {path}", m.to_uppercase())),
        );
    }

    let started = Instant::now();
    let served = format!("{}{OPENAPI_PATH}", server.url());
    let run = fuzz(
        &st,
        &served,
        dir.path(),
        "token",
        &[
            "--max-examples",
            &EXAMPLES_PER_OPERATION.to_string(),
            "--phases",
            "examples,coverage,fuzzing",
            "--header",
            &format!("Authorization: Bearer {TOKEN}"),
        ],
    );
    let took = started.elapsed();
    eprintln!(
        "api fuzz: {} requests with the token in {:.0?} ({} 2xx, {} 4xx)",
        run.exchanges.len(),
        took,
        run.count(|e| (200..300).contains(&e.status)),
        run.count(|e| (400..500).contains(&e.status)),
    );
    run.assert_clean(&mut server);
    // schemathesis reads the document itself and never tests its route.
    let tested = |o: &&String| run.operations.contains(*o) || o.ends_with(OPENAPI_PATH);
    let untested: Vec<_> = operations.iter().filter(|o| !tested(o)).collect();
    assert!(untested.is_empty(), "operations without requests: {untested:?}\n{}", run.output);
    assert!(
        run.exchanges.len() >= MIN_REQUESTS,
        "the budget is at least {MIN_REQUESTS} requests, schemathesis sent {}",
        run.exchanges.len()
    );
    let changed: Vec<_> =
        run.exchanges.iter().filter(|e| e.changes_state() && e.status < 300).collect();
    assert!(changed.is_empty(), "state-changing requests were accepted: {changed:#?}");
    assert_eq!(records(&data), before, "refused requests changed the stored records");

    // Without the token (the document too needs it: read from a copy),
    // nothing but the health check answers; the guard's refusals (a body
    // that is not JSON, YAML or Wasm) come before the token is looked at.
    let copy = dir.path().join("openapi.json");
    std::fs::write(&copy, document.to_string()).unwrap();
    let run = fuzz(
        &st,
        copy.to_str().unwrap(),
        dir.path(),
        "no-token",
        &["--url", &server.url(), "--max-examples", "5", "--phases", "examples,coverage,fuzzing"],
    );
    eprintln!("api fuzz: {} requests without the token", run.exchanges.len());
    run.assert_clean(&mut server);
    let answered: Vec<_> = run
        .exchanges
        .iter()
        .filter(|e| {
            ![401, 405, 415].contains(&e.status)
                && !e.uri.ends_with("/healthz")
                && !e.uri.ends_with("/readyz")
        })
        .collect();
    assert!(answered.is_empty(), "answered without the token: {answered:#?}");
    assert_eq!(records(&data), before, "requests without the token changed the stored records");

    // Stateful: names read from answers, so upgrades, stops and deletes of
    // the real pipeline and function succeed; still no 5xx.
    let run = fuzz(
        &st,
        &served,
        dir.path(),
        "stateful",
        &[
            "--max-examples",
            "100",
            "--phases",
            "stateful",
            "--header",
            &format!("Authorization: Bearer {TOKEN}"),
        ],
    );
    eprintln!(
        "api fuzz: {} stateful requests ({} changes accepted); {:.0?} in all",
        run.exchanges.len(),
        run.count(|e| e.changes_state() && e.status < 300),
        started.elapsed()
    );
    run.assert_clean(&mut server);
}

/// Found by the fuzz run: what axum refuses itself (a query or path it
/// cannot read, a method a route lacks, a body over the limit) came as
/// plain text or empty, not the documented JSON error.
#[test]
fn refusals_before_a_handler_are_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        Server::start(&dir.path().join("data"), &["--token", TOKEN, "--max-upload-bytes", "1000"]);
    let token = Some(TOKEN);
    let big = vec![0u8; 2000];
    let refusals = [
        (
            "POST",
            "/v1/pipelines?override_kafka_marker=maybe",
            b"name: x".as_slice(),
            400,
            "invalid_request",
        ),
        ("GET", "/v1/functions/%FF%FE", b"", 400, "invalid_request"),
        ("PATCH", "/v1/functions", b"", 405, "method_not_allowed"),
        ("PUT", "/v1/functions/big", &big, 413, "too_large"),
    ];
    for (method, path, body, status, code) in refusals {
        let (got, answer) = server.raw(method, path.as_bytes(), token, body);
        let shown = String::from_utf8_lossy(&answer);
        let answer: serde_json::Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {shown:?}"));
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{shown}");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty(), "{shown}");
    }
}

/// Found by the fuzz run (a 500 `snapshot_failed`): a savepoint, stop or
/// upgrade reaching a run that is still starting, or whose source has just
/// finished, is not a failed snapshot. A starting run is waited for; one
/// that ended is a 409.
#[test]
fn snapshots_of_a_starting_or_ending_pipeline_are_never_server_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--token", TOKEN]);
    let token = Some(TOKEN);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", token, &wasm).0, 201);
    let mut answers = Vec::new();
    for round in 0..3 {
        let spec = format!(
            "name: p{round}\nsource: {{ type: generator, count: 50000 }}\n\
             key: {{ function: revenue }}\nprocess: {{ function: revenue }}\nsink: {{ type: discard }}\n"
        );
        let (status, body) = server.call("POST", "/v1/pipelines", token, spec.as_bytes());
        assert_eq!(status, 201, "{body}");
        // At once: the run is still loading its functions.
        let path = format!("/v1/pipelines/p{round}");
        let (status, body) = server.call("POST", &format!("{path}/savepoints"), token, b"");
        assert_eq!(status, 201, "a savepoint of a starting pipeline waits for it: {body}");
        // Until it finishes, and after: every answer is a savepoint or a 409.
        loop {
            let (status, body) = server.call("POST", &format!("{path}/savepoints"), token, b"");
            answers.push((status, body));
            let (_, state) = server.call("GET", &path, token, b"");
            if state["state"] != "running" {
                break;
            }
        }
        // Started again from its savepoint, and stopped or upgraded at once.
        let (status, body) = server.call("POST", &format!("{path}/upgrade"), token, b"");
        assert_eq!(status, 200, "{body}");
        let action = if round % 2 == 0 { "stop" } else { "upgrade" };
        answers.push(server.call("POST", &format!("{path}/{action}"), token, b""));
    }
    let failed: Vec<_> =
        answers.iter().filter(|(status, _)| ![200, 201, 409].contains(status)).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// One request schemathesis sent and the status it got.
#[derive(Debug)]
struct Exchange {
    method: String,
    uri: String,
    status: u16,
}

impl Exchange {
    fn changes_state(&self) -> bool {
        matches!(self.method.as_str(), "PUT" | "POST" | "DELETE" | "PATCH")
    }
}

/// One schemathesis run: its exit, output and requests.
struct Run {
    name: String,
    success: bool,
    output: String,
    exchanges: Vec<Exchange>,
    /// Requests that got no answer at all.
    unanswered: Vec<String>,
    /// Errors schemathesis met (an operation it could not test, …).
    errors: Vec<String>,
    /// The operations requests were sent to (`POST /v1/pipelines`, …).
    operations: BTreeSet<String>,
}

impl Run {
    fn count(&self, pick: impl Fn(&Exchange) -> bool) -> usize {
        self.exchanges.iter().filter(|e| pick(e)).count()
    }

    /// No 5xx, every request answered, every check passed, the server alive.
    fn assert_clean(&self, server: &mut Server) {
        let failed: Vec<_> = self.exchanges.iter().filter(|e| e.status >= 500).collect();
        assert!(failed.is_empty(), "{}: server errors: {failed:#?}\n{}", self.name, self.output);
        assert!(server.is_alive(), "{}: the server died\n{}", self.name, self.output);
        assert!(
            self.unanswered.is_empty(),
            "{}: requests without an answer: {:#?}\n{}",
            self.name,
            self.unanswered,
            self.output
        );
        assert!(self.errors.is_empty(), "{}: {:#?}\n{}", self.name, self.errors, self.output);
        assert!(self.success, "{}: schemathesis found failures\n{}", self.name, self.output);
        assert!(!self.exchanges.is_empty(), "{}: no requests\n{}", self.name, self.output);
    }
}

/// A fault of CPython 3.11's parser under threads that schemathesis (with
/// `--workers 2`) sometimes meets while building its own test cases: an
/// error of the tool, not of the server.
const TOOL_FAULT: &str = "AST constructor recursion depth mismatch";

/// Run schemathesis on the OpenAPI document at `location` (a URL or a
/// file) with `extra` arguments; its report goes to `dir/<name>.ndjson`.
/// A run whose only errors are [`TOOL_FAULT`] is run again (twice at most).
fn fuzz(st: &Path, location: &str, dir: &Path, name: &str, extra: &[&str]) -> Run {
    let mut attempt = 1;
    loop {
        let run = fuzz_once(st, location, dir, name, extra);
        let tool_fault =
            !run.errors.is_empty() && run.errors.iter().all(|e| e.contains(TOOL_FAULT));
        if !tool_fault || attempt == 3 {
            return run;
        }
        eprintln!("{name}: schemathesis met {TOOL_FAULT:?} (attempt {attempt}); running it again");
        attempt += 1;
    }
}

/// One schemathesis run of [`fuzz`].
fn fuzz_once(st: &Path, location: &str, dir: &Path, name: &str, extra: &[&str]) -> Run {
    let config = dir.join("schemathesis.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let hooks = dir.join("weir_hooks.py");
    std::fs::write(&hooks, HOOKS).unwrap();
    let report = dir.join(format!("{name}.ndjson"));
    let output = Command::new(st)
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(location)
        .args(["--seed", SEED, "--generation-deterministic"])
        .args(["--checks", "all", "--exclude-checks", EXCLUDED_CHECKS, "--continue-on-failure"])
        .args(["--workers", "2", "--request-timeout", "60", "--suppress-health-check", "all"])
        .args(["--no-color", "--report", "ndjson", "--report-ndjson-path"])
        .arg(&report)
        .args(extra)
        .env("SCHEMATHESIS_HOOKS", &hooks)
        .current_dir(dir)
        .output()
        .expect("schemathesis runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut run = Run {
        name: name.to_string(),
        success: output.status.success(),
        output: text,
        exchanges: Vec::new(),
        unanswered: Vec::new(),
        errors: Vec::new(),
        operations: BTreeSet::new(),
    };
    let events = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", report.display(), run.output));
    for line in events.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(error) = event.get("NonFatalError") {
            run.errors.push(error.to_string());
        }
        let Some(scenario) = event.get("ScenarioFinished") else { continue };
        let interactions = scenario["recorder"]["interactions"].as_object();
        if interactions.is_some_and(|i| !i.is_empty()) {
            run.operations.insert(scenario["recorder"]["label"].as_str().unwrap().to_string());
        }
        for interaction in interactions.into_iter().flat_map(|i| i.values()) {
            let request = &interaction["request"];
            let (method, uri) = (request["method"].as_str(), request["uri"].as_str());
            let (method, uri) = (method.unwrap().to_string(), uri.unwrap().to_string());
            match interaction["response"]["status_code"].as_u64() {
                Some(status) => run.exchanges.push(Exchange { method, uri, status: status as u16 }),
                None => run.unanswered.push(format!("{method} {uri}")),
            }
        }
    }
    run
}

/// Every file of the function store and the pipeline records, by path.
fn records(data: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, into);
            } else {
                into.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(&weir_host::config::function_store_dir(data), &mut files);
    walk(&weir_host::config::pipeline_store_dir(data), &mut files);
    files
}

/// schemathesis's `st` command: `$WEIR_TEST_SCHEMATHESIS`, else installed
/// once by [`weir_devkit::python_tool::SCHEMATHESIS`] (not under CI, where
/// it must be given).
fn schemathesis() -> PathBuf {
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    SHARED
        .get_or_init(|| match std::env::var(SCHEMATHESIS_ENV) {
            Ok(path) if !path.trim().is_empty() => PathBuf::from(path.trim()),
            _ => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{SCHEMATHESIS_ENV} is not set: CI runs the tests with `scripts/dev test`, which \
                     installs schemathesis and sets it (or run `scripts/dev schemathesis` and set \
                     {SCHEMATHESIS_ENV} to the path it prints)"
                );
                weir_devkit::python_tool::SCHEMATHESIS
                    .install()
                    .unwrap_or_else(|e| panic!("installing schemathesis: {e:#}"))
            }
        })
        .clone()
}
