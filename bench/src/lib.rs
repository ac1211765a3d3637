//! `weir bench`: the standard workloads, each run with its Wasm function
//! and with the same logic compiled into the host ([`native`]), in one
//! invocation, so their ratio compares like with like on the same machine.
//!
//! Every measurement is its own `weir run` child process (generator source
//! with binary orders, JSON for `sum-json` → keyed operator → discard
//! sink, parallelism 2; the graph workloads have more stages, each of
//! parallelism 2), so its CPU time and peak RSS are its own. Events/s
//! counts source events (over every source). Workloads:
//!
//! | name        | logic                                                          |
//! |-------------|----------------------------------------------------------------|
//! | `sum`       | (a) running sum per customer, one output per order             |
//! | `sum-json`  | (a) over JSON orders: each parsed from its text                 |
//! | `window`    | (b) 1-minute tumbling sum per customer, 5 s watermark           |
//! | `dedup`     | (c) first order per customer, then none for a 1 m TTL           |
//! | `filter`    | (d) stateless filter and map                                    |
//! | `two-stage` | `sum`, re-keyed by region (customer % 64), running sum per region |
//! | `join`      | two order streams, an interval join by customer (≈ 1 match each) |
//! | `sum-py`    | `sum` by a Python function (`bench-sum-py`, componentize-py)   |
//! | `sum-js`    | `sum` by a TypeScript function (`bench-sum-js`, componentize-js) |
//! | `sum-untimed` | `sum` with the tasks' clocks off (`WEIR_TASK_METRICS=off`)     |
//!
//! The graph workloads (`two-stage`, `join`), the Python and TypeScript
//! variants of `sum` and `sum-untimed` are also reported as a ratio to
//! `sum` (the Rust function) measured in the same invocation, which then
//! always runs; the variants' native column is the same native twin as
//! `sum`'s. `sum-untimed`'s ratio is what the per-task metrics cost.
//!
//! [`cluster`] (`weir bench cluster`) measures Kafka → Weir → Kafka in one
//! process and on workers, against the broker's own rate.

pub mod cluster;
pub mod formats;
pub mod latency;
pub mod native;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A standard workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// (a) keyed running sum.
    Sum,
    /// (a) over JSON orders (JSON decoding measured on its own).
    SumJson,
    /// (b) 1-minute tumbling window sum with a 5 s watermark.
    Window,
    /// (c) per-key dedup with a TTL.
    Dedup,
    /// (d) stateless filter/map.
    Filter,
    /// Graph: `sum`, then re-keyed by region and summed again per region.
    TwoStage,
    /// Graph: two generated order streams joined by customer (interval join).
    Join,
    /// (a) by the Python twin of the function.
    SumPython,
    /// (a) by the TypeScript twin of the function.
    SumJavaScript,
    /// (a) without the per-task clocks of the metrics, to show their cost.
    SumUntimed,
}

impl Workload {
    /// Every workload, in the order.
    pub const ALL: [Workload; 10] = [
        Workload::Sum,
        Workload::SumJson,
        Workload::Window,
        Workload::Dedup,
        Workload::Filter,
        Workload::TwoStage,
        Workload::Join,
        Workload::SumPython,
        Workload::SumJavaScript,
        Workload::SumUntimed,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sum => "sum",
            Workload::SumJson => "sum-json",
            Workload::Window => "window",
            Workload::Dedup => "dedup",
            Workload::Filter => "filter",
            Workload::TwoStage => "two-stage",
            Workload::Join => "join",
            Workload::SumPython => "sum-py",
            Workload::SumJavaScript => "sum-js",
            Workload::SumUntimed => "sum-untimed",
        }
    }

    /// Whether it is a graph of several stages or sources, reported also
    /// as a ratio to [`Workload::Sum`].
    pub fn is_graph(self) -> bool {
        matches!(self, Workload::TwoStage | Workload::Join)
    }

    /// Whether it is reported also as a ratio to [`Workload::Sum`]: the
    /// graphs, `sum` in other languages and `sum` untimed.
    pub fn is_compared_with_sum(self) -> bool {
        self.is_graph()
            || matches!(self, Workload::SumPython | Workload::SumJavaScript | Workload::SumUntimed)
    }

    /// Its runs' `WEIR_TASK_METRICS`: whether tasks time their work.
    fn task_metrics(self) -> &'static str {
        match self {
            Workload::SumUntimed => "off",
            _ => "on",
        }
    }

    /// The workload called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Events of its runs in a suite of `events` per run: a tenth for the
    /// interpreted variants (tens of times slower), so a suite's runs take
    /// comparable time; rates stay comparable.
    pub fn events_in_suite(self, events: u64) -> u64 {
        match self {
            Workload::SumPython | Workload::SumJavaScript => (events / 10).max(1000),
            _ => events,
        }
    }

    /// The native built-in implementing it.
    fn native_function(self) -> &'static str {
        match self {
            Workload::Sum
            | Workload::Window
            | Workload::TwoStage
            | Workload::Join
            | Workload::SumPython
            | Workload::SumJavaScript
            | Workload::SumUntimed => "bench-sum",
            Workload::SumJson => "bench-json",
            Workload::Dedup => "bench-dedup",
            Workload::Filter => "bench-filter",
        }
    }

    /// The Wasm function implementing it (a package in `functions/`).
    fn wasm_function(self) -> &'static str {
        match self {
            Workload::SumPython => "bench-sum-py",
            Workload::SumJavaScript => "bench-sum-js",
            other => other.native_function(),
        }
    }

    /// How its generated orders are encoded (the generator's `encoding`).
    fn encoding(self) -> &'static str {
        match self {
            Workload::SumJson => "json",
            _ => "binary",
        }
    }
}

/// Wasm, or the same logic native.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// The function compiled to a Wasm component.
    Wasm,
    /// The same logic compiled into the host.
    Native,
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct Case {
    /// What runs.
    pub workload: Workload,
    /// How.
    pub implementation: Implementation,
    /// Events generated.
    pub events: u64,
    /// Distinct keys (customers).
    pub keys: u64,
    /// Checkpoint every second to `file://` storage in the data directory.
    pub checkpoints: bool,
    /// A live input at this load, its latency recorded (see [`latency`]);
    /// `None`: as fast as it goes.
    pub load: Option<Load>,
    /// The pipeline's `batch_linger` (`None`: the spec's default).
    pub batch_linger: Option<std::time::Duration>,
}

/// A live input's rate: events a second, each second's within its first
/// `burst_ms` (evenly spread without).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Events a second.
    pub rate: u64,
    /// Each second's events within its first this many ms.
    pub burst_ms: Option<u64>,
}

/// The upper bound of the `join` workload's interval join, in ms, at
/// `keys` customers: each stream has one order a millisecond over `keys`
/// customers, so an order of the first stream meets one order of its
/// customer in the second's next `keys` milliseconds `[t, t + keys − 1]`
/// on average: about one match per order of the first stream.
pub fn join_upper_ms(keys: u64) -> u64 {
    keys.saturating_sub(1)
}

impl Case {
    /// The pipeline spec of this case; Wasm functions are read from
    /// `functions_dir/<name>.wasm`.
    pub fn spec(&self, functions_dir: &Path) -> String {
        let function = match self.implementation {
            Implementation::Wasm => format!(
                "{{ wasm: {:?} }}",
                functions_dir.join(format!("{}.wasm", self.workload.wasm_function()))
            ),
            Implementation::Native => format!("{{ native: {} }}", self.workload.native_function()),
        };
        let pace = match self.load {
            None => String::new(),
            Some(Load { rate, burst_ms: None }) => format!(", rate: {rate}"),
            Some(Load { rate, burst_ms: Some(burst) }) => {
                format!(", rate: {rate}, burst_ms: {burst}")
            }
        };
        let source = |count: u64, seed: u64| {
            format!(
                "{{ type: generator, count: {count}, keys: {}, seed: {seed}, interval_ms: 1, encoding: {}{pace} }}",
                self.keys,
                self.workload.encoding()
            )
        };
        let body = match self.workload {
            Workload::TwoStage => format!(
                "operators:\n  \
                 orders: {{ source: {} }}\n  \
                 totals: {{ inputs: [orders], key: {function}, process: {function} }}\n  \
                 regions: {{ inputs: [totals], key: {function}, process: {function} }}\n  \
                 out: {{ inputs: [regions], sink: {{ type: discard }} }}\n",
                source(self.events, 7)
            ),
            Workload::Join => {
                let first = self.events / 2;
                format!(
                    "watermark: {{ max_out_of_orderness: 5ms }}\noperators:\n  \
                     orders: {{ source: {} }}\n  \
                     more: {{ source: {} }}\n  \
                     joined: {{ inputs: [orders, more], key: {function}, \
                     join: {{ type: interval, lower: 0s, upper: {}ms }} }}\n  \
                     out: {{ inputs: [joined], sink: {{ type: discard }} }}\n",
                    source(first, 7),
                    source(self.events - first, 8),
                    join_upper_ms(self.keys)
                )
            }
            _ => {
                let keyed = match self.workload {
                    // Live: 1 s windows, results as soon as a window ends.
                    Workload::Window if self.load.is_some() => format!("window: {{ type: tumbling, size: 1s }}\nwatermark: {{ max_out_of_orderness: 0s }}\naggregate: {function}\n"),
                    Workload::Window => format!("window: {{ type: tumbling, size: 1m }}\nwatermark: {{ max_out_of_orderness: 5s }}\naggregate: {function}\n"),
                    _ => format!("process: {function}\n"),
                };
                format!(
                    "source: {}\nkey: {function}\n{keyed}sink: {{ type: discard }}\n",
                    source(self.events, 7)
                )
            }
        };
        let checkpoint = if self.checkpoints { "checkpoint: { interval: 1s }\n" } else { "" };
        let linger = self
            .batch_linger
            .map(|linger| format!("batch_linger: {}us\n", linger.as_micros()))
            .unwrap_or_default();
        format!(
            "name: bench-{}\nparallelism: 2\nstate_cache_bytes: 134217728\n{linger}{body}{checkpoint}",
            self.workload.name()
        )
    }
}

pub use weir_host::observe::process::Measurement;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or process could not be used.
    #[error("{0}")]
    Io(String),
    /// A run failed.
    #[error("{case}: {message}")]
    Run {
        /// Which.
        case: String,
        /// Its error output.
        message: String,
    },
}

/// Run `case` as a child process of `weir` (the executable at `weir`),
/// with a fresh data directory under `scratch`. Compiled components are
/// kept in `scratch`'s shared component cache, as a server keeps them
/// from upload on: a run measures processing, not compiling.
pub fn measure(
    weir: &Path,
    case: &Case,
    functions_dir: &Path,
    scratch: &Path,
) -> Result<Measurement, BenchError> {
    let label = format!(
        "{} {:?} K={} checkpoints={}",
        case.workload.name(),
        case.implementation,
        case.keys,
        case.checkpoints
    );
    let dir = format!(
        "{}-{:?}-{}-{}",
        case.workload.name(),
        case.implementation,
        case.keys,
        case.checkpoints
    );
    let mut args = Vec::new();
    if case.load.is_some() {
        let warm_up = format!("{}ms", latency::LIVE_WARM_UP.as_millis());
        args.extend(["--latency".to_string(), "--latency-warm-up".to_string(), warm_up]);
    }
    let run = SpecRun {
        label: &label,
        dir: &dir,
        args: &args,
        task_metrics: case.workload.task_metrics(),
    };
    run.measure(weir, &case.spec(functions_dir), scratch)
}

/// One `weir run` of a spec, measured.
pub(crate) struct SpecRun<'a> {
    /// What the run is, for errors.
    pub label: &'a str,
    /// Its directory's name under the scratch space.
    pub dir: &'a str,
    /// More `weir run` arguments.
    pub args: &'a [String],
    /// `WEIR_TASK_METRICS`.
    pub task_metrics: &'a str,
}

impl SpecRun<'_> {
    /// Run `spec` as a child process of `weir` (the executable at
    /// `weir`), with a fresh data directory under `scratch`. Compiled
    /// components are kept in `scratch`'s shared component cache, as a
    /// server keeps them from upload on: a run measures processing, not
    /// compiling.
    pub fn measure(
        &self,
        weir: &Path,
        spec: &str,
        scratch: &Path,
    ) -> Result<Measurement, BenchError> {
        let label = self.label;
        let io = |e: std::io::Error| BenchError::Io(format!("{label}: {e}"));
        let dir = scratch.join(self.dir);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io)?;
        }
        std::fs::create_dir_all(&dir).map_err(io)?;
        let spec_path = dir.join("pipeline.yaml");
        std::fs::write(&spec_path, spec).map_err(io)?;
        let shared_components = scratch.join("components");
        let components = weir_host::config::component_cache_dir(&dir.join("data"));
        std::fs::create_dir_all(&shared_components).map_err(io)?;
        std::fs::create_dir_all(components.parent().unwrap_or(&dir)).map_err(io)?;
        std::os::unix::fs::symlink(&shared_components, &components).map_err(io)?;
        let output = Command::new(weir)
            .arg("run")
            .arg(&spec_path)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--quiet", "--report-json"])
            .args(self.args)
            .env_remove("WEIR_FAULT")
            .env("WEIR_TASK_METRICS", self.task_metrics)
            .output()
            .map_err(io)?;
        let _ = std::fs::remove_dir_all(&dir);
        if !output.status.success() {
            return Err(BenchError::Run {
                case: label.to_string(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        let text = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(text.trim()).map_err(|e| BenchError::Run {
            case: label.to_string(),
            message: format!("unreadable report {text:?}: {e}"),
        })
    }
}

/// Default directory of the Wasm functions: `target/functions` of the
/// current directory.
pub fn default_functions_dir() -> PathBuf {
    PathBuf::from("target").join("functions")
}

/// What `weir bench` runs: every workload × key count × checkpoint mode,
/// Wasm and native, `repeat` times each.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Events per run.
    pub events: u64,
    /// Distinct keys, one row each.
    pub keys: Vec<u64>,
    /// Workloads to run.
    pub workloads: Vec<Workload>,
    /// Checkpoint modes (`false`: off, `true`: every second).
    pub checkpoints: Vec<bool>,
    /// Where the `bench-*.wasm` functions are.
    pub functions_dir: PathBuf,
    /// Scratch space for the runs' data directories.
    pub scratch: PathBuf,
    /// Runs per case; the table shows the median by events/s.
    pub repeat: usize,
    /// Print one JSON object per run instead of the table.
    pub json: bool,
}

/// The workloads [`run_suite`] runs for `asked`, in order: `sum` first
/// when a graph workload needs it for its ratio (added if not asked for).
pub fn workloads_to_run(asked: &[Workload]) -> Vec<Workload> {
    let mut run = Vec::new();
    if asked.iter().any(|w| w.is_compared_with_sum()) {
        run.push(Workload::Sum);
    }
    for &workload in asked {
        if !run.contains(&workload) {
            run.push(workload);
        }
    }
    run
}

/// Run `suite` with the `weir` binary at `weir`, writing the table (or
/// JSON lines) to `out`. Each repeat runs every workload in turn, each
/// checkpoint mode, Wasm and native, side by side (the modes in
/// alternating order), so a slow spell of the machine hits them all; the
/// ratios and the checkpoint cost are the medians of each repeat's own
/// (paired) ratios, the cost's over the Wasm and the native pairs. The
/// workloads compared with `sum` (which then runs first in each repeat)
/// are reported against it: the median of their events/s over `sum`'s in
/// the same repeat, keys, checkpoint mode and implementation, in lines
/// under the table (in JSON, each run's own ratio, as `ratio_to_sum`).
pub fn run_suite(
    suite: &Suite,
    weir: &Path,
    out: &mut dyn std::io::Write,
) -> Result<(), BenchError> {
    let write = |e: std::io::Error| BenchError::Io(format!("writing the results: {e}"));
    let workloads = workloads_to_run(&suite.workloads);
    if !suite.json {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let json: Vec<&str> =
            workloads.iter().filter(|w| w.encoding() == "json").map(|w| w.name()).collect();
        let orders = if json.is_empty() {
            "binary orders".to_string()
        } else {
            format!("binary orders ({}: JSON)", json.join(", "))
        };
        let parallelism = if workloads.iter().any(|w| w.is_graph()) {
            "parallelism 2 per stage"
        } else {
            "parallelism 2"
        };
        writeln!(out, "{cores} cores; {} events per run; median of {} runs; {orders}; {parallelism}; discard sink", suite.events, suite.repeat).map_err(write)?;
        if let Some(variant) =
            workloads.iter().find(|w| w.events_in_suite(suite.events) != suite.events)
        {
            writeln!(
                out,
                "(sum-py and sum-js: {} events per run)",
                variant.events_in_suite(suite.events)
            )
            .map_err(write)?;
        }
        writeln!(
            out,
            "{:<11} {:>9} {:>5}  {:>11} {:>11}  {:>7}  {:>8} {:>8}  {:>9}",
            "", "", "", "wasm", "native", "wasm/", "wasm", "wasm", ""
        )
        .map_err(write)?;
        writeln!(
            out,
            "{:<11} {:>9} {:>5}  {:>11} {:>11}  {:>7}  {:>8} {:>8}  {:>9}",
            "workload",
            "keys",
            "chk",
            "events/s",
            "events/s",
            "native",
            "cpu s",
            "peak RSS",
            "chk cost"
        )
        .map_err(write)?;
    }
    // Compile each function once, before anything is measured.
    for &workload in &workloads {
        let warm_up = Case {
            workload,
            implementation: Implementation::Wasm,
            events: 1000,
            keys: 10,
            checkpoints: false,
            load: None,
            batch_linger: None,
        };
        measure(weir, &warm_up, &suite.functions_dir, &suite.scratch)?;
    }
    // runs[(workload, keys)][mode][repeat] = [wasm, native]. Each repeat
    // runs every workload in turn (`sum` first), so a workload's ratio to
    // `sum` pairs runs made close together, as the modes' are.
    let mut runs: BTreeMap<(usize, u64), Vec<Vec<[Measurement; 2]>>> = BTreeMap::new();
    let sum_index = workloads.iter().position(|&w| w == Workload::Sum);
    for repeat in 0..suite.repeat.max(1) {
        for (index, &workload) in workloads.iter().enumerate() {
            for &keys in &suite.keys {
                // Every other repeat runs the modes in the opposite order, so
                // a machine slowing down or speeding up favours neither.
                let mut modes: Vec<(usize, bool)> =
                    suite.checkpoints.iter().copied().enumerate().collect();
                if repeat % 2 == 1 {
                    modes.reverse();
                }
                for (mode, checkpoints) in modes {
                    let mut pair: [Measurement; 2] = Default::default();
                    for (slot, implementation) in
                        [Implementation::Wasm, Implementation::Native].into_iter().enumerate()
                    {
                        let case = Case {
                            workload,
                            implementation,
                            events: workload.events_in_suite(suite.events),
                            keys,
                            checkpoints,
                            load: None,
                            batch_linger: None,
                        };
                        pair[slot] = measure(weir, &case, &suite.functions_dir, &suite.scratch)?;
                        if suite.json {
                            let name = if slot == 0 { "wasm" } else { "native" };
                            let mut line = serde_json::json!({ "workload": workload.name(), "keys": keys, "checkpoints": checkpoints, "implementation": name, "measurement": pair[slot], "events_per_second": pair[slot].rate() });
                            let sum = sum_index
                                .and_then(|sum| runs.get(&(sum, keys)))
                                .and_then(|sum| sum[mode].get(repeat))
                                .filter(|_| workload.is_compared_with_sum());
                            if let Some(sum) = sum {
                                line["ratio_to_sum"] =
                                    serde_json::json!(pair[slot].rate_over(&sum[slot]));
                            }
                            writeln!(out, "{line}").map_err(write)?;
                        }
                    }
                    runs.entry((index, keys))
                        .or_insert_with(|| vec![Vec::new(); suite.checkpoints.len()])[mode]
                        .push(pair);
                }
            }
        }
    }
    // The lines under the table: workloads against `sum`.
    let mut against_sum = Vec::new();
    for ((index, keys), modes) in &runs {
        let workload = workloads[*index];
        let off = suite.checkpoints.iter().position(|&c| !c).map(|mode| &modes[mode]);
        for (mode, (&checkpoints, pairs)) in suite.checkpoints.iter().zip(modes).enumerate() {
            let chk = if checkpoints { "1s" } else { "off" };
            if workload.is_compared_with_sum() {
                if let Some(sum) = sum_index.and_then(|sum| runs.get(&(sum, *keys))) {
                    let paired = |slot: usize| {
                        median_of(
                            pairs
                                .iter()
                                .zip(&sum[mode])
                                .map(|(own, sum)| own[slot].rate_over(&sum[slot]))
                                .collect(),
                        )
                    };
                    against_sum.push(format!(
                        "{:<11} {:>9} {:>5}  {:>11.2} {:>11.2}",
                        workload.name(),
                        keys,
                        chk,
                        paired(0),
                        paired(1)
                    ));
                }
            }
            if suite.json {
                continue;
            }
            let (wasm, native) = (
                median(pairs.iter().map(|p| p[0].clone()).collect()),
                median(pairs.iter().map(|p| p[1].clone()).collect()),
            );
            let ratio = median_of(pairs.iter().map(|[w, n]| w.rate_over(n)).collect());
            let cost = match (checkpoints, off) {
                // Wasm and native runs pay the same checkpoints: both
                // pairs of each repeat count.
                (true, Some(off)) => format!(
                    "{:+.1}%",
                    (median_of(
                        pairs
                            .iter()
                            .zip(off)
                            .flat_map(|(on, off)| [0, 1].map(|i| on[i].rate_over(&off[i])))
                            .collect()
                    ) - 1.0)
                        * 100.0
                ),
                _ => String::new(),
            };
            writeln!(
                out,
                "{:<11} {:>9} {:>5}  {:>10.2}M {:>10.2}M  {:>7.2}  {:>8.2} {:>7.0}M  {:>9}",
                workload.name(),
                keys,
                chk,
                wasm.rate() / 1e6,
                native.rate() / 1e6,
                ratio,
                wasm.cpu_seconds,
                wasm.peak_rss_bytes as f64 / f64::from(1 << 20),
                cost
            )
            .map_err(write)?;
        }
    }
    if !suite.json && !against_sum.is_empty() {
        writeln!(out, "\nevents/s against sum's in this run (medians; same keys, checkpoints, implementation):").map_err(write)?;
        writeln!(
            out,
            "{:<11} {:>9} {:>5}  {:>11} {:>11}",
            "workload", "keys", "chk", "wasm/sum", "native/sum"
        )
        .map_err(write)?;
        for line in against_sum {
            writeln!(out, "{line}").map_err(write)?;
        }
    }
    Ok(())
}

/// The median of `values` (the upper one of an even count).
pub(crate) fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The run with the median rate.
fn median(mut runs: Vec<Measurement>) -> Measurement {
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    runs.swap_remove(runs.len() / 2)
}

#[cfg(test)]
mod tests {
    use crate::*;
    use weir_host::specification::PipelineSpec;

    fn case(workload: Workload, implementation: Implementation, checkpoints: bool) -> Case {
        Case {
            workload,
            implementation,
            events: 1001,
            keys: 10_000,
            checkpoints,
            load: None,
            batch_linger: None,
        }
    }

    #[test]
    fn every_case_spec_parses_and_validates() {
        for workload in Workload::ALL {
            for implementation in [Implementation::Wasm, Implementation::Native] {
                for checkpoints in [false, true] {
                    let text =
                        case(workload, implementation, checkpoints).spec(Path::new("/functions"));
                    let spec = PipelineSpec::parse(&text)
                        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", workload.name()));
                    assert_eq!(spec.parallelism, 2, "{text}");
                    assert_eq!(spec.checkpoint.is_some(), checkpoints, "{text}");
                    assert_eq!(spec.operators.is_empty(), !workload.is_graph(), "{text}");
                    spec.graph().unwrap();
                }
            }
        }
    }

    #[test]
    fn two_stage_sums_by_customer_then_by_region() {
        let text = case(Workload::TwoStage, Implementation::Wasm, false).spec(Path::new("/f"));
        let spec = PipelineSpec::parse(&text).unwrap();
        let graph = spec.graph().unwrap();
        assert_eq!(graph.sources.len(), 1);
        assert_eq!(
            graph.stages.iter().map(|s| (s.name.as_str(), s.parallelism)).collect::<Vec<_>>(),
            [("totals", 2), ("regions", 2)]
        );
        for (field, function) in spec.functions() {
            assert_eq!(function.wasm.as_deref(), Some(Path::new("/f/bench-sum.wasm")), "{field}");
        }
        let native = case(Workload::TwoStage, Implementation::Native, false).spec(Path::new("/f"));
        let spec = PipelineSpec::parse(&native).unwrap();
        assert_eq!(spec.functions().len(), 4);
        for (field, function) in spec.functions() {
            assert_eq!(function.native.as_deref(), Some("bench-sum"), "{field}");
        }
        assert!(text.contains("count: 1001, keys: 10000, seed: 7"), "{text}");
    }

    #[test]
    fn join_has_two_sources_with_every_event_between_them() {
        let text = case(Workload::Join, Implementation::Native, true).spec(Path::new("/f"));
        let spec = PipelineSpec::parse(&text).unwrap();
        assert!(spec.watermark.is_some(), "{text}");
        let graph = spec.graph().unwrap();
        assert_eq!(graph.sources.len(), 2);
        assert_eq!(graph.stages.len(), 1);
        assert_eq!(graph.stages[0].parallelism, 2);
        assert!(matches!(
            graph.stages[0].kind,
            weir_host::specification::graph::StageKind::Join(
                weir_host::specification::JoinSpec::Interval { lower: 0, upper: 9_999, .. }
            )
        ));
        assert!(text.contains("count: 500, keys: 10000, seed: 7"), "{text}");
        assert!(text.contains("count: 501, keys: 10000, seed: 8"), "{text}");
        assert_eq!(join_upper_ms(1), 0);
    }

    #[test]
    fn graph_workloads_bring_sum_first() {
        use Workload::*;
        assert_eq!(workloads_to_run(&[Join, TwoStage]), [Sum, Join, TwoStage]);
        assert_eq!(workloads_to_run(&[Join, Sum, Filter]), [Sum, Join, Filter]);
        assert_eq!(workloads_to_run(&[Window, Dedup]), [Window, Dedup]);
        assert_eq!(workloads_to_run(&[SumJavaScript, SumPython]), [Sum, SumJavaScript, SumPython]);
        let python = case(SumPython, Implementation::Wasm, false).spec(Path::new("/f"));
        assert!(python.contains("/f/bench-sum-py.wasm"), "{python}");
        let native = case(SumJavaScript, Implementation::Native, false).spec(Path::new("/f"));
        assert!(native.contains("native: bench-sum"), "{native}");
        let untimed = case(SumUntimed, Implementation::Wasm, false).spec(Path::new("/f"));
        assert!(untimed.contains("/f/bench-sum.wasm"), "{untimed}");
        assert_eq!((SumUntimed.task_metrics(), Sum.task_metrics()), ("off", "on"));
        assert!(SumUntimed.is_compared_with_sum());
        for workload in Workload::ALL {
            assert_eq!(Workload::parse(workload.name()), Some(workload));
        }
    }
}
