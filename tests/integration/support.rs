//! Helpers shared by the integration tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Path of a built function component, e.g. `function("revenue")`.
pub fn function(name: &str) -> PathBuf {
    let dir = std::env::var_os("WEIR_FUNCTIONS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/functions"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run `scripts/dev build-functions` first", path.display());
    path
}

/// The seven orders of the revenue example.
pub fn revenue_orders() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions/revenue/orders.jsonl")
}

/// Run `weir` with `args`.
pub fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).env_remove("WEIR_DATA_DIR").output().expect("weir runs")
}

/// Run `weir run` on `spec` with `data_dir`, expecting success.
pub fn run_ok(spec: &Path, data_dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", spec.to_str().unwrap(), "--data-dir", data_dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = weir(&args);
    assert!(output.status.success(), "weir run failed: {}", String::from_utf8_lossy(&output.stderr));
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
    let value = whole.trim_start_matches('-').parse::<i64>().unwrap() * 100 + format!("{fraction:0<2}").parse::<i64>().unwrap();
    if negative { -value } else { value }
}

/// Output records as JSON values.
pub fn records(output: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
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
    let mut lines: Vec<String> = std::fs::read_to_string(path).unwrap().lines().map(String::from).collect();
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
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    })
}
