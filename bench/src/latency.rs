//! `weir bench --latency`: end-to-end latency at fixed loads. For each
//! workload (and checkpoint mode) one run as fast as it goes measures its
//! maximum; then live runs (the generator's `rate`: events stamped with
//! the wall-clock time each was due) at 10 %, 50 % and 90 % of it and a
//! bursty one (10 % on average, each second's events within its first
//! 100 ms) record each written event's latency after a warm-up of
//! [`LIVE_WARM_UP`], from ingestion to the
//! sink's write, or with checkpoints to the commit that makes it visible
//! (a window's result: from its end, with no out-of-orderness allowed),
//! in an HDR histogram (see
//! [`pipeline::latency`](weir_host::observe::latency)). With several
//! `batch_linger`s, each gets its own maximum and live runs, all at the
//! rates of the first one's maximum, so both ends compare: throughput at
//! full load, latency at low rates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{measure, BenchError, Case, Implementation, Load, Measurement, Workload};
use weir_host::observe::latency::LatencySummary;

/// How long each live run goes before its latency is recorded (its
/// start-up: the Wasm instances' first calls, fresh memory); the run is
/// that much longer than `--latency-seconds`.
pub const LIVE_WARM_UP: Duration = Duration::from_secs(1);

/// The steady loads, as shares of the maximum.
pub const STEADY_SHARES: [f64; 3] = [0.1, 0.5, 0.9];

/// The bursty load: this share of the maximum on average…
const BURSTY_SHARE: f64 = 0.1;

/// …each second's events within its first this many ms.
const BURST_MS: u64 = 100;

/// What `weir bench --latency` runs.
#[derive(Debug, Clone)]
pub struct LatencySuite {
    /// Workloads to run.
    pub workloads: Vec<Workload>,
    /// Distinct keys.
    pub keys: u64,
    /// Events of the run that measures the maximum.
    pub events: u64,
    /// Seconds of each live run.
    pub seconds: u64,
    /// Checkpoint modes (`false`: off, `true`: every second).
    pub checkpoints: Vec<bool>,
    /// The pipelines' `batch_linger`s to compare (`None`: the default).
    pub lingers: Vec<Option<Duration>>,
    /// Where the `bench-*.wasm` functions are.
    pub functions_dir: PathBuf,
    /// Scratch space for the runs' data directories.
    pub scratch: PathBuf,
    /// Print one JSON object per run instead of the table.
    pub json: bool,
}

/// The live loads at `max` events/s: a name and the load.
pub fn loads(max: f64) -> Vec<(String, Load)> {
    let rate = |share: f64| ((max * share).round() as u64).max(1);
    let mut loads: Vec<(String, Load)> = STEADY_SHARES
        .iter()
        .map(|&share| {
            (format!("{:.0}%", share * 100.0), Load { rate: rate(share), burst_ms: None })
        })
        .collect();
    loads.push((
        format!("bursty {:.0}%", BURSTY_SHARE * 100.0),
        Load { rate: rate(BURSTY_SHARE), burst_ms: Some(BURST_MS) },
    ));
    loads
}

/// Run `suite` with the `weir` binary at `weir`, writing the table (or
/// JSON lines) to `out`.
pub fn run_latency(
    suite: &LatencySuite,
    weir: &Path,
    out: &mut dyn std::io::Write,
) -> Result<(), BenchError> {
    let write = |e: std::io::Error| BenchError::Io(format!("writing the results: {e}"));
    let case = |workload, events, checkpoints, load, batch_linger| Case {
        workload,
        implementation: Implementation::Wasm,
        events,
        keys: suite.keys,
        checkpoints,
        load,
        batch_linger,
    };
    let lingers = if suite.lingers.is_empty() { vec![None] } else { suite.lingers.clone() };
    if !suite.json {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        writeln!(out, "{cores} cores; Wasm functions; {} keys; {} s per live run after {} s of warm-up; latency in ms from ingestion to the output's write, with checkpoints to its commit (window: from its end); cores: CPU seconds per second; stolen: the machine's CPU time the hypervisor took", suite.keys, suite.seconds, LIVE_WARM_UP.as_secs()).map_err(write)?;
        writeln!(
            out,
            "{:<8} {:>4} {:>6} {:<11} {:>10} {:>10} {:>6} {:>6}  {:>7} {:>7} {:>7} {:>7} {:>7}",
            "workload",
            "chk",
            "linger",
            "load",
            "events/s",
            "achieved",
            "cores",
            "stolen",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        )
        .map_err(write)?;
    }
    for &workload in &suite.workloads {
        // Compile the function once, before anything is measured.
        let warm_up = case(workload, 1000, false, None, None);
        measure(weir, &warm_up, &suite.functions_dir, &suite.scratch)?;
        for &checkpoints in &suite.checkpoints {
            // The first linger's maximum sets every linger's live rates.
            let mut first_max = None;
            for &linger in &lingers {
                let row = Row { suite, workload, checkpoints, linger };
                let full = case(workload, suite.events, checkpoints, None, linger);
                let max = measure(weir, &full, &suite.functions_dir, &suite.scratch)?.rate();
                row.write_max(out, max).map_err(write)?;
                for (name, load) in loads(*first_max.get_or_insert(max)) {
                    let events = load.rate * (suite.seconds.max(1) + LIVE_WARM_UP.as_secs());
                    let live = case(workload, events, checkpoints, Some(load), linger);
                    let measured = measure(weir, &live, &suite.functions_dir, &suite.scratch)?;
                    let latency = measured.latency.ok_or_else(|| BenchError::Run {
                        case: format!("{} {name}", workload.name()),
                        message: "the run reported no latency".into(),
                    })?;
                    row.write_live(out, &name, load, &measured, latency).map_err(write)?;
                }
            }
        }
    }
    Ok(())
}

/// What one row of the results is about: a workload, checkpoint mode and
/// linger of `suite`.
struct Row<'a> {
    suite: &'a LatencySuite,
    workload: Workload,
    checkpoints: bool,
    linger: Option<Duration>,
}

impl Row<'_> {
    /// The first columns of a table row.
    fn columns(&self, load: &str) -> String {
        let chk = if self.checkpoints { "1s" } else { "off" };
        let linger = self.linger.map_or("dflt".to_string(), |l| format!("{}ms", l.as_millis()));
        format!("{:<8} {chk:>4} {linger:>6} {load:<11}", self.workload.name())
    }

    /// The JSON line's fields naming the row.
    fn json(&self, load: &str) -> serde_json::Value {
        serde_json::json!({
            "workload": self.workload.name(),
            "checkpoints": self.checkpoints,
            "batch_linger_ms": self.linger.map(|l| l.as_secs_f64() * 1000.0),
            "load": load,
        })
    }

    /// The run as fast as it goes: `max` events/s.
    fn write_max(&self, out: &mut dyn std::io::Write, max: f64) -> std::io::Result<()> {
        if self.suite.json {
            let mut line = self.json("max");
            line["events_per_second"] = serde_json::json!(max);
            return writeln!(out, "{line}");
        }
        writeln!(out, "{} {:>9.2}M", self.columns("max"), max / 1e6)
    }

    /// The live run `name` at `load`, its `latency`.
    fn write_live(
        &self,
        out: &mut dyn std::io::Write,
        name: &str,
        load: Load,
        measured: &Measurement,
        latency: LatencySummary,
    ) -> std::io::Result<()> {
        if self.suite.json {
            let mut line = self.json(name);
            line["rate"] = serde_json::json!(load.rate);
            line["burst_ms"] = serde_json::json!(load.burst_ms);
            line["measurement"] = serde_json::json!(measured);
            return writeln!(out, "{line}");
        }
        let ms = |us: u64| us as f64 / 1000.0;
        writeln!(
            out,
            "{} {:>9.3}M {:>9.3}M {:>6.2} {:>6}  {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1}",
            self.columns(name),
            load.rate as f64 / 1e6,
            measured.rate() / 1e6,
            measured.cpu_seconds / measured.seconds.max(1e-9),
            measured.stolen.map_or("-".to_string(), |share| format!("{:.1}%", share * 100.0)),
            ms(latency.p50_us),
            ms(latency.p90_us),
            ms(latency.p99_us),
            ms(latency.p999_us),
            ms(latency.max_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_host::specification::PipelineSpec;

    #[test]
    fn the_loads_are_shares_of_the_maximum_and_one_burst() {
        let loads = loads(1_000_000.0);
        let names: Vec<&str> = loads.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["10%", "50%", "90%", "bursty 10%"]);
        assert_eq!(loads[1].1, Load { rate: 500_000, burst_ms: None });
        assert_eq!(loads[3].1, Load { rate: 100_000, burst_ms: Some(100) });
    }

    #[test]
    fn live_cases_pace_the_generator_and_fire_windows_at_their_end() {
        let load = Some(Load { rate: 5000, burst_ms: Some(100) });
        for workload in [Workload::Sum, Workload::Window] {
            let case = Case {
                workload,
                implementation: Implementation::Wasm,
                events: 50_000,
                keys: 100,
                checkpoints: false,
                load,
                batch_linger: Some(Duration::from_micros(1500)),
            };
            let text = case.spec(Path::new("/f"));
            assert!(text.contains("rate: 5000, burst_ms: 100"), "{text}");
            let spec = PipelineSpec::parse(&text).unwrap();
            assert_eq!(spec.batch_linger, Duration::from_micros(1500));
            spec.graph().unwrap();
            if workload == Workload::Window {
                assert!(text.contains("size: 1s") && text.contains("max_out_of_orderness: 0s"));
            }
        }
    }
}
