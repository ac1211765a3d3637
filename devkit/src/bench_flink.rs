//! `scripts/dev bench-flink`: Apache Flink (the job in `bench/flink`) and
//! Weir side by side on the same workload, in turn, at each key count; a
//! table of events/s and Weir's multiple of Flink's, each pair's and, of
//! several pairs, the medians.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A benchmark run's settings.
pub struct BenchFlink {
    /// The repository's root (for `bench/flink`).
    pub root: PathBuf,
    /// The release `weir` binary.
    pub weir: PathBuf,
    /// The built functions.
    pub functions: PathBuf,
    /// `sum` and/or `window`.
    pub workloads: Vec<String>,
    /// The key counts.
    pub keys: Vec<u64>,
    /// Events per run.
    pub events: u64,
    /// Pairs of runs per workload and key count.
    pub pairs: u32,
}

/// One pair's events/s: Flink's, Weir's with the Wasm function, Weir's
/// with its native twin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Flink's events/s.
    pub flink: f64,
    /// Weir's events/s, Wasm function.
    pub wasm: f64,
    /// Weir's events/s, native function.
    pub native: f64,
}

/// The table's header.
pub fn header() -> String {
    format!(
        "{:<8} {:<10} {:<10} {:<6} {:>12} {:>12} {:>12} {:>8}",
        "workload", "keys", "events", "run", "flink", "weir-wasm", "weir-native", "wasm/flink"
    )
}

/// One row of the table.
pub fn row(workload: &str, keys: u64, events: u64, run: &str, rates: Rates) -> String {
    format!(
        "{workload:<8} {keys:<10} {events:<10} {run:<6} {:11.3}M {:11.3}M {:11.3}M {:7.1}x",
        rates.flink / 1e6,
        rates.wasm / 1e6,
        rates.native / 1e6,
        rates.wasm / rates.flink
    )
}

/// The median of `values` (the mean of the middle two of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    }
}

/// The medians of each column of `runs`.
pub fn medians(runs: &[Rates]) -> Rates {
    let column = |pick: fn(&Rates) -> f64| median(&runs.iter().map(pick).collect::<Vec<_>>());
    Rates { flink: column(|r| r.flink), wasm: column(|r| r.wasm), native: column(|r| r.native) }
}

/// Flink's events/s from the job's output: its last line is
/// `{"events_per_s": …}`.
pub fn flink_rate(stdout: &str) -> Result<f64> {
    let last = stdout
        .lines()
        .rfind(|line| !line.trim().is_empty())
        .context("Flink's job printed nothing")?;
    let value: serde_json::Value = serde_json::from_str(last)
        .with_context(|| format!("Flink's last line is not JSON: {last}"))?;
    value["events_per_s"].as_f64().with_context(|| format!("no events_per_s in {last}"))
}

/// Weir's events/s per implementation from `weir bench --json` (one JSON
/// object per line with `implementation` and `events_per_second`).
pub fn weir_rates(stdout: &str) -> Result<BTreeMap<String, f64>> {
    let mut rates = BTreeMap::new();
    for line in stdout.lines().filter(|line| line.starts_with('{')) {
        let value: serde_json::Value = serde_json::from_str(line)?;
        if let (Some(name), Some(rate)) =
            (value["implementation"].as_str(), value["events_per_second"].as_f64())
        {
            rates.insert(name.to_owned(), rate);
        }
    }
    Ok(rates)
}

/// Run `command` and return its stdout; fail with its stderr.
fn output(mut command: Command, what: &str) -> Result<String> {
    let output = command.output().with_context(|| format!("starting {what}"))?;
    if !output.status.success() {
        bail!("{what} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8(output.stdout)?)
}

impl BenchFlink {
    /// Build Flink's job and print the table, row by row.
    pub fn run(&self) -> Result<()> {
        for workload in &self.workloads {
            if !["sum", "window"].contains(&workload.as_str()) {
                bail!("bench-flink: no workload {workload} (sum, window)");
            }
        }
        let scratch = tempfile::tempdir()?;
        let flink_dir = self.root.join("bench/flink");
        eprintln!("==> building the Flink job (Maven, bench/flink)");
        let mut mvn = Command::new("mvn");
        mvn.current_dir(&flink_dir).args(["-q", "-B", "package", "-DskipTests"]);
        let log = scratch.path().join("mvn.log");
        if let Err(error) = crate::process::run_logged(mvn, &log, "building bench/flink") {
            eprintln!("{}", std::fs::read_to_string(&log).unwrap_or_default());
            return Err(error);
        }
        println!("{}", header());
        for workload in &self.workloads {
            for &keys in &self.keys {
                let mut runs = Vec::new();
                for pair in 1..=self.pairs {
                    let rates = self.pair(workload, keys, scratch.path())?;
                    println!("{}", row(workload, keys, self.events, &pair.to_string(), rates));
                    runs.push(rates);
                }
                if self.pairs > 1 {
                    println!("{}", row(workload, keys, self.events, "median", medians(&runs)));
                }
            }
        }
        Ok(())
    }

    /// One Flink run, then one Weir run.
    fn pair(&self, workload: &str, keys: u64, scratch: &std::path::Path) -> Result<Rates> {
        for dir in ["flink", "weir"] {
            let _ = std::fs::remove_dir_all(scratch.join(dir));
        }
        let mut java = flink_java(&self.root, "weir.bench.FlinkBench");
        java.args([workload, &self.events.to_string(), &keys.to_string(), "2"])
            .arg(scratch.join("flink"));
        let flink = flink_rate(&output(java, "Flink's job")?)?;
        let mut weir = Command::new(&self.weir);
        weir.arg("bench")
            .arg("--functions-dir")
            .arg(&self.functions)
            .args(["--workload", workload, "--checkpoints", "on", "--keys", &keys.to_string()])
            .args(["--events", &self.events.to_string(), "--repeat", "1", "--json", "--scratch"])
            .arg(scratch.join("weir"));
        let rates = weir_rates(&output(weir, "weir bench")?)?;
        let pick = |name: &str| {
            rates.get(name).copied().with_context(|| format!("weir bench printed no {name} rate"))
        };
        Ok(Rates { flink, wasm: pick("wasm")?, native: pick("native")? })
    }
}

/// `java` running `main_class` of the bench/flink build under `root`
/// (its jar and the Flink jars Maven copied beside it), with the module
/// openings Flink needs on Java 17.
pub fn flink_java(root: &std::path::Path, main_class: &str) -> Command {
    let target = root.join("bench/flink/target");
    let mut java = Command::new("java");
    java.args([
        "--add-opens=java.base/java.util=ALL-UNNAMED",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
    ])
    .arg("-cp")
    .arg(format!("{}:{}/lib/*", target.join("weir-bench-flink-1.jar").display(), target.display()))
    .arg(main_class);
    java
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn a_row_shows_millions_and_the_multiple() {
        let rates = Rates { flink: 250_000.0, wasm: 3_000_000.0, native: 4_500_000.0 };
        assert_eq!(
            row("sum", 10000, 10_000_000, "1", rates),
            "sum      10000      10000000   1            0.250M       3.000M       4.500M    12.0x"
        );
        let median_row = row("sum", 10000, 10_000_000, "median", rates);
        assert_eq!(median_row.len(), row("sum", 10000, 10_000_000, "1", rates).len());
    }

    #[test]
    fn rates_are_read_from_each_side_s_output() {
        assert_eq!(flink_rate("log line\n{\"events_per_s\": 123.5}\n\n").unwrap(), 123.5);
        assert!(flink_rate("no json").is_err());
        let weir = "==> noise\n{\"implementation\":\"wasm\",\"events_per_second\":10.0}\n\
                    {\"implementation\":\"native\",\"events_per_second\":20.0}\n";
        let rates = weir_rates(weir).unwrap();
        assert_eq!((rates["wasm"], rates["native"]), (10.0, 20.0));
    }
}
