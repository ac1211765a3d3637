//! Helpers shared by the integration tests, and the one place that knows
//! where the external services are.
//!
//! This module: the `weir` binary ([`weir`], [`run_ok`], [`start_weir`],
//! a `weir serve` driven over HTTP: [`Server`]), the built functions
//! ([`function`], [`example_file`]; `$WEIR_FUNCTIONS_DIR`), specs and
//! output readers shared across areas ([`per_key`], [`assert_same`], ...),
//! and crash runs ([`run_with_kills`], [`crash_seed`]).
//!
//! The external services, each located in exactly one function (no test
//! reads their environment variables itself):
//! * [`kafka`]: the broker, [`kafka::shared_bootstrap`]
//!   (`$WEIR_TEST_KAFKA_BOOTSTRAP`, else started with `weir_devkit::kafka`), behind
//!   [`kafka::TestKafka`], with the Kafka helpers several areas use;
//! * [`s3`]: the S3-compatible server, [`s3::shared_endpoint`]
//!   (`$WEIR_TEST_S3_ENDPOINT`, else started with `weir_devkit::s3`), behind
//!   [`s3::TestS3`];
//! * [`schema_registry`]: the schema registry,
//!   [`schema_registry::shared_url`] (`$WEIR_TEST_SCHEMA_REGISTRY`, else
//!   started with `weir_devkit::schema_registry`).
//!
//! It holds no tests, and nothing here belongs to one area only.

pub mod kafka;
pub mod s3;
pub mod schema_registry;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Path of a built function component, e.g. `function("revenue")`.
pub fn function(name: &str) -> PathBuf {
    let dir = std::env::var_os("WEIR_FUNCTIONS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/functions"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `scripts/dev build-functions` first",
        path.display()
    );
    path
}

/// The seven orders of the revenue example.
pub fn revenue_orders() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions/revenue/orders.jsonl")
}

/// Run `weir` with `args`.
pub fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_DATA_DIR")
        .output()
        .expect("weir runs")
}

/// Run `weir run` on `spec` with `data_dir`, expecting success.
pub fn run_ok(spec: &Path, data_dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", spec.to_str().unwrap(), "--data-dir", data_dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = weir(&args);
    assert!(
        output.status.success(),
        "weir run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A revenue pipeline spec reading `input` and writing `output`.
pub fn revenue_spec(dir: &Path, input: &Path, output: &Path, extra: &str) -> PathBuf {
    let wasm = function("revenue");
    let spec = format!(
        "name: revenue-test\n{extra}source: {{ type: file, path: {input:?}, timestamp_field: event_time }}\n\
         key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {output:?} }}\n"
    );
    let path = dir.join("pipeline.yaml");
    std::fs::write(&path, spec).unwrap();
    path
}

/// Parse a decimal amount into integer cents (the test's own parser).
pub fn cents(text: &str) -> i64 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let negative = whole.starts_with('-');
    let value = whole.trim_start_matches('-').parse::<i64>().unwrap() * 100
        + format!("{fraction:0<2}").parse::<i64>().unwrap();
    if negative {
        -value
    } else {
        value
    }
}

/// Output records as JSON values.
pub fn records(output: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The last total reported for each customer, as decimal text.
pub fn final_totals(output: &Path) -> BTreeMap<u64, String> {
    let text = std::fs::read_to_string(output).unwrap();
    let mut totals = BTreeMap::new();
    for line in text.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        // The total's text as written, to see its exact decimals.
        let total = line.split("\"total\":").nth(1).unwrap().trim_end_matches('}').to_string();
        totals.insert(record["customer_id"].as_u64().unwrap(), total);
    }
    totals
}

/// A file shipped with the example function `function`.
pub fn example_file(function: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions").join(function).join(file)
}

/// The lines of a file, sorted (to compare outputs whose order across keys
/// is not fixed).
pub fn sorted_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> =
        std::fs::read_to_string(path).unwrap().lines().map(String::from).collect();
    lines.sort();
    lines
}

/// Start `weir run` on `spec` in the background, with `extra` arguments and
/// `env` variables; its stderr is piped.
pub fn start_weir(spec: &Path, data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", spec.to_str().unwrap(), "--data-dir", data_dir.to_str().unwrap()])
        .args(extra)
        .envs(env.iter().copied())
        .env_remove("WEIR_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts")
}

/// A small deterministic generator of kill instants (xorshift64*).
pub struct Dice(pub u64);

impl Dice {
    /// A number in `low..high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        low + self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % (high - low)
    }
}

/// The seed of a crash test's kill instants: `$WEIR_CRASH_SEED`, else the
/// clock (the tests print it, so a failure can be repeated).
pub fn crash_seed() -> u64 {
    std::env::var("WEIR_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64
            | 1
    })
}

/// Each customer's output records, in output order.
pub fn per_key(output: &Path) -> BTreeMap<u64, Vec<String>> {
    let mut keys: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let record: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a torn line {line:?}: {e}"));
        keys.entry(record["customer_id"].as_u64().unwrap()).or_default().push(line.to_string());
    }
    keys
}

/// How many results there are, over all customers.
pub fn total(records: &BTreeMap<u64, Vec<String>>) -> usize {
    records.values().map(Vec::len).sum()
}

/// The same records per customer, reporting the first difference briefly.
pub fn assert_same(
    actual: &BTreeMap<u64, Vec<String>>,
    expected: &BTreeMap<u64, Vec<String>>,
    when: &str,
) {
    assert_eq!(total(actual), total(expected), "{when}: number of results");
    for (customer, want) in expected {
        let got = actual.get(customer).map(Vec::as_slice).unwrap_or_default();
        if let Some(i) = (0..want.len().max(got.len())).find(|&i| got.get(i) != want.get(i)) {
            panic!(
                "{when}: customer {customer}'s result {i} is {:?}, expected {:?}",
                got.get(i),
                want.get(i)
            );
        }
    }
}

/// Every customer's visible records are a prefix of the expected ones:
/// nothing duplicated, nothing skipped, nothing uncommitted.
pub fn assert_prefix(
    actual: &BTreeMap<u64, Vec<String>>,
    expected: &BTreeMap<u64, Vec<String>>,
    when: &str,
) {
    for (customer, records) in actual {
        let want = expected.get(customer).map(Vec::as_slice).unwrap_or_default();
        if let Some(i) = (0..records.len()).find(|&i| records.get(i) != want.get(i)) {
            panic!(
                "{when}: customer {customer}'s result {i} is {:?}, expected {:?} (committed output must be a prefix of the expected results per customer; {} committed for them, {} expected)",
                records[i],
                want.get(i),
                records.len(),
                want.len()
            );
        }
    }
}

/// Run `spec` to completion with `data`, killing it with SIGKILL at random
/// instants at least five times and restarting it each time; the records
/// committed to `out` at each kill.
pub fn run_with_kills(spec: &Path, data: &Path, out: &Path) -> Vec<usize> {
    let seed = crash_seed();
    eprintln!("crash test seed {seed} (WEIR_CRASH_SEED={seed} repeats these kill instants)");
    let mut dice = Dice(seed);
    let mut kills = 0;
    let mut committed = Vec::new();
    let mut attempts = 0;
    // A slow sink stretches the run to several seconds so the kills land
    // mid-run: between checkpoints, mid-snapshot, mid-commit.
    let slow = ["--sink-delay-ms", "4"];
    // The longest a kill waits (see below), shortened to three quarters of
    // a run that finished first: a faster build or machine still has its
    // kills land mid-run.
    let mut kill_within_ms = 1_200;
    loop {
        attempts += 1;
        assert!(attempts < 60, "the pipeline never finished (seed {seed})");
        let mut child = start_weir(spec, data, &slow, &[]);
        if kills >= 5 {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "final run failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            return committed;
        }
        // A run from scratch first compiles or instantiates and writes
        // nothing: its kill's random instant counts from its first
        // committed output, so on a loaded machine it still lands in a run
        // that is processing. A restored run's counts from its start
        // (kills land in restores too).
        let started = Instant::now();
        while std::fs::metadata(out).map_or(true, |m| m.len() == 0)
            && started.elapsed() < Duration::from_secs(60)
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let counted_from = Instant::now();
        let deadline = counted_from + Duration::from_millis(dice.between(150, kill_within_ms));
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        match child.try_wait().unwrap() {
            Some(status) => {
                assert!(status.success(), "a run failed on its own (seed {seed})");
                let lasted = u64::try_from(counted_from.elapsed().as_millis()).unwrap();
                kill_within_ms = kill_within_ms.min((lasted * 3 / 4).max(200));
                // It finished before the kill: start over from scratch so
                // every kill lands in a run that has work left (compiled
                // code stays cached, so the next run starts at once), its
                // output too, so the next kill counts from its first output.
                if out.exists() {
                    std::fs::remove_file(out).unwrap();
                }
                for entry in std::fs::read_dir(data).unwrap() {
                    let path = entry.unwrap().path();
                    if path.file_name().is_some_and(|name| name != "cache") {
                        std::fs::remove_dir_all(&path)
                            .or_else(|_| std::fs::remove_file(&path))
                            .unwrap();
                    }
                }
                eprintln!(
                    "finished {lasted} ms after the kill's wait began; starting over, kills \
                     within {kill_within_ms} ms"
                );
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                let visible = std::fs::read_to_string(out).unwrap_or_default();
                assert!(
                    visible.is_empty() || visible.ends_with('\n'),
                    "committed output ends mid-line after kill {kills}"
                );
                eprintln!("kill {kills}: {} records committed", visible.lines().count());
                committed.push(visible.lines().count());
            }
        }
    }
}

/// A pipeline `name` over the stored function `revenue` (deployed to
/// `weir serve`), with these `source` and `sink` sections and `extra` lines.
pub fn stored_revenue_spec(name: &str, source: &str, sink: &str, extra: &str) -> String {
    format!("name: {name}\nsource: {source}\nkey: {{ function: revenue }}\nprocess: {{ function: revenue }}\nsink: {sink}\n{extra}")
}

/// A bounded generator pipeline `name` over the stored function `revenue`
/// into a discard sink, with `extra` lines.
pub fn generator_spec(name: &str, extra: &str) -> String {
    let source = "{ type: generator, count: 1000, keys: 10 }";
    stored_revenue_spec(name, source, "{ type: discard }", extra)
}

/// A running `weir serve` and its address; killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
}

impl Server {
    /// Start `weir serve` on a free port with `data` as its data directory.
    pub fn start(data: &Path, extra: &[&str]) -> Server {
        Server::start_with_env(data, extra, &[])
    }

    /// [`Server::start`] with `env` variables (a `WEIR_FAULT`, say).
    pub fn start_with_env(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_on("127.0.0.1:0", data, extra, env)
    }

    /// [`Server::start_with_env`] listening on `listen` (`0.0.0.0:0`, say);
    /// it is reached on 127.0.0.1 all the same.
    pub fn start_on(listen: &str, data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", listen, "--data-dir", data.to_str().unwrap()])
            .args(extra)
            .envs(env.iter().copied())
            .env_remove("WEIR_API_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("weir serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let address = line.trim().rsplit("http://").next().unwrap().to_string();
        let address = address.replace("0.0.0.0:", "127.0.0.1:");
        assert!(address.starts_with("127.0.0.1:"), "{line}");
        Server { child, address }
    }

    /// Whether the server process is still running (it never exited).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Send SIGTERM and wait at most `within` for the server to exit; its
    /// exit status.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "weir serve still runs {within:?} after SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// One request; the status and the body (JSON, else a JSON string).
    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, serde_json::Value) {
        let (status, body) = self.raw(method, path.as_bytes(), token, body);
        let text = String::from_utf8_lossy(&body).to_string();
        (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
    }

    /// One request with a raw (possibly invalid UTF-8) path; the status and
    /// body bytes. A body goes with a fitting `Content-Type`: Wasm, else
    /// JSON if it parses as JSON, else YAML.
    pub fn raw(
        &self,
        method: &str,
        path: &[u8],
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = Vec::new();
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        if !body.is_empty() {
            headers.push(("Content-Type", content_type_of(body)));
        }
        self.exchange(method, path, &headers, body)
    }

    /// One request with exactly `headers` (and `Host`, unless they give
    /// one); the status and the body (JSON, else a JSON string).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, serde_json::Value) {
        let (status, body) = self.exchange(method, path.as_bytes(), headers, body);
        let text = String::from_utf8_lossy(&body).to_string();
        (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
    }

    fn exchange(
        &self,
        method: &str,
        path: &[u8],
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        let mut lines = String::new();
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            lines.push_str(&format!("Host: {}\r\n", self.address));
        }
        for (name, value) in headers {
            lines.push_str(&format!("{name}: {value}\r\n"));
        }
        let mut head = format!("{method} ").into_bytes();
        head.extend_from_slice(path);
        head.extend_from_slice(
            format!(
                " HTTP/1.1\r\n{lines}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        stream.write_all(&head).unwrap();
        let _ = stream.write_all(body); // the server may answer (413) before reading it all
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let split =
            response.windows(4).position(|w| w == b"\r\n\r\n").map_or(response.len(), |i| i + 4);
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
        let body = response[split..].to_vec();
        (status, if chunked { dechunk(&body) } else { body })
    }

    /// Poll `GET path` until `done` holds for its body, for up to `within`.
    pub fn wait_for(
        &self,
        path: &str,
        token: Option<&str>,
        within: std::time::Duration,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            let (status, body) = self.call("GET", path, token, b"");
            if status == 200 && done(&body) {
                return body;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited {within:?} for GET {path}; last answer {status}: {body}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// The `Content-Type` of a request body: Wasm by its magic, else JSON if
/// it parses as JSON, else YAML.
fn content_type_of(body: &[u8]) -> &'static str {
    if body.starts_with(b"\0asm") {
        "application/wasm"
    } else if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
        "application/json"
    } else {
        "application/yaml"
    }
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&body[start..(start + size).min(body.len())]);
        body = &body[(start + size + 2).min(body.len())..];
    }
    out
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Make `data_dir` use the test binary's shared cache of compiled
/// components, as a server keeps them from upload on: a Python or
/// TypeScript component (an interpreter, tens of MiB of Wasm) then
/// compiles once per test run, not once per data directory.
pub fn share_component_cache(data_dir: &Path) {
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    std::fs::create_dir_all(&shared).unwrap();
    let cache = data_dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let link = cache.join("components");
    if !link.exists() {
        std::os::unix::fs::symlink(&shared, &link).unwrap();
    }
}
