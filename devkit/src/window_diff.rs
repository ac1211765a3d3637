//! `scripts/dev window-diff`: Weir's window operator against Apache Flink's
//! on the same out-of-order orders, firing by firing.
//!
//! Seeded orders (customers, amounts, event times mostly in order, some
//! out of order within the watermark bound, some late within the allowed
//! lateness, some later still) go through Flink's tumbling, sliding and
//! session event-time windows (`bench/flink`, `weir.bench.WindowDiff`) and
//! through `weir run` with the same windows and the windowed-revenue
//! function, at each parallelism. Every firing — (customer, window start,
//! end, total in cents, and how many times that window fired before: 0 on
//! time, 1 and up for late re-firings) — and every order sent to the late
//! output must be the same multiset on both sides.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The windows both sides run (all in milliseconds).
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    /// Tumbling windows' size and sliding windows' size.
    pub size: i64,
    /// Sliding windows' slide.
    pub slide: i64,
    /// Sessions' gap.
    pub gap: i64,
    /// The watermark's bound: newest event time − this − 1 ms.
    pub bound: i64,
    /// Allowed lateness of every window.
    pub lateness: i64,
}

/// The settings `window-diff` uses: 10 s tumbling, 10 s every 5 s sliding,
/// 8 s sessions, a 2 s bound and 5 s allowed lateness.
pub const WINDOWS: Windows =
    Windows { size: 10_000, slide: 5_000, gap: 8_000, bound: 2_000, lateness: 5_000 };

/// The window kinds compared, as Weir's spec names them.
pub const KINDS: [&str; 3] = ["tumbling", "sliding", "session"];

/// A differential run's settings.
pub struct WindowDiff {
    /// The repository's root (for `bench/flink`).
    pub root: PathBuf,
    /// The `weir` binary.
    pub weir: PathBuf,
    /// The compiled windowed-revenue function.
    pub function: PathBuf,
    /// How many orders.
    pub orders: usize,
    /// The generator's seed.
    pub seed: u64,
    /// The parallelisms both sides run at.
    pub parallelisms: Vec<u16>,
}

/// One window kind at one parallelism: what each side produced and how
/// they differ.
#[derive(Debug)]
pub struct Comparison {
    /// `tumbling`, `sliding` or `session`.
    pub kind: &'static str,
    /// Parallelism of both sides.
    pub parallelism: u16,
    /// Firings Flink emitted.
    pub flink_firings: usize,
    /// Of them, late re-firings.
    pub flink_refirings: usize,
    /// Firings Weir emitted.
    pub weir_firings: usize,
    /// Orders Flink sent to the late output.
    pub flink_late: usize,
    /// Orders Weir sent to the late output.
    pub weir_late: usize,
    /// Firings and late orders found on one side only (at most 20 listed).
    pub differences: Vec<String>,
    /// How many differ in all.
    pub different: usize,
}

impl Comparison {
    /// The table row.
    pub fn row(&self) -> String {
        format!(
            "{:<9} {:>2} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6}",
            self.kind,
            self.parallelism,
            self.flink_firings,
            self.flink_refirings,
            self.weir_firings,
            self.flink_late,
            self.weir_late,
            self.different
        )
    }
}

/// The table's header.
pub fn header() -> String {
    format!(
        "{:<9} {:>2} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6}",
        "kind", "p", "flink", "re-fired", "weir", "late-f", "late-w", "differ"
    )
}

/// One firing: customer, window, total in cents, earlier firings of it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Firing {
    /// The key.
    pub customer: u64,
    /// Window start (ms).
    pub start: i64,
    /// Window end (ms).
    pub end: i64,
    /// Sum of the window's amounts, in cents.
    pub cents: i64,
    /// Earlier firings of the same (customer, window).
    pub firing: u32,
}

/// SplitMix64, as Weir's and the benchmarks' generators.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_133a_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// 10:00:00 on 2026-01-15, where the orders start.
const START_MILLIS: i64 = 1_768_471_200_000;

/// `count` orders as JSON lines, in arrival order:
/// `{"order_id":1,"customer_id":3,"amount":12.34,"event_time":1768471200000}`.
///
/// Arrival time advances a whole second about every fourth order; 40
/// customers, so a customer's orders are often exactly a session gap (or
/// a window size) apart. Event time is the arrival time less a delay:
/// none to the watermark's bound (80 %), a few seconds past it, within the
/// allowed lateness or not (12 %), or up to 40 s (8 %); mostly whole
/// seconds, one order in ten with milliseconds too.
pub fn orders(count: usize, seed: u64) -> String {
    let mut random = SplitMix(seed);
    let mut arrival = START_MILLIS + 60_000;
    let mut out = String::with_capacity(count * 80);
    for id in 1..=count {
        if random.below(4) == 0 {
            arrival += 1_000;
        }
        let customer = random.below(40) + 1;
        let cents = random.below(10_000) + 1;
        let delay_s = match random.below(100) {
            0..80 => random.below(3),
            80..92 => 3 + random.below(5),
            _ => 8 + random.below(33),
        } as i64;
        let millis = if random.below(10) == 0 { random.below(1_000) as i64 } else { 0 };
        let event_time = arrival - delay_s * 1_000 + millis;
        let _ = writeln!(
            out,
            r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":{event_time}}}"#,
            cents / 100,
            cents % 100
        );
    }
    out
}

/// Build Flink's jobs (`mvn package` in `bench/flink`), logging to `log`.
pub fn build_flink(root: &Path, log: &Path) -> Result<()> {
    let mut mvn = Command::new("mvn");
    mvn.current_dir(root.join("bench/flink")).args(["-q", "-B", "package", "-DskipTests"]);
    crate::process::run_logged(mvn, log, "building bench/flink")
}

/// The Weir spec of `kind` over `orders`, writing into `out`.
fn spec(kind: &str, parallelism: u16, orders: &Path, function: &Path, out: &Path) -> String {
    let w = WINDOWS;
    let shape = match kind {
        "tumbling" => format!("type: tumbling, size: {}ms", w.size),
        "sliding" => format!("type: sliding, size: {}ms, slide: {}ms", w.size, w.slide),
        _ => format!("type: session, gap: {}ms", w.gap),
    };
    format!(
        "name: window-diff\nparallelism: {parallelism}\nbatch_size: 1\n\
         watermark: {{ max_out_of_orderness: {}ms }}\n\
         source: {{ type: file, path: {orders:?}, timestamp_field: event_time }}\n\
         key: {{ wasm: {function:?} }}\n\
         window: {{ {shape}, allowed_lateness: {}ms, late_output: late }}\n\
         aggregate: {{ wasm: {function:?} }}\n\
         sink: {{ type: file, path: {:?} }}\n\
         side_outputs: {{ late: {{ type: file, path: {:?} }} }}\n",
        w.bound,
        w.lateness,
        out.join("firings.jsonl"),
        out.join("late.jsonl"),
    )
}

fn lines(file: &Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).with_context(|| format!("{}: {line}", file.display()))
        })
        .collect()
}

fn int(value: &serde_json::Value, field: &str) -> Result<i64> {
    value[field].as_i64().with_context(|| format!("no integer {field} in {value}"))
}

/// Flink's firings (`flink-<kind>-p<P>.jsonl`).
pub fn flink_firings(file: &Path) -> Result<Vec<Firing>> {
    lines(file)?
        .iter()
        .map(|v| {
            Ok(Firing {
                customer: int(v, "customer_id")? as u64,
                start: int(v, "window_start")?,
                end: int(v, "window_end")?,
                cents: int(v, "cents")?,
                firing: int(v, "firing")? as u32,
            })
        })
        .collect()
}

/// Weir's firings from windowed-revenue's output. The function does not
/// number them: a window's firings are numbered by their totals, which
/// grow with each re-firing (every late order adds at least a cent).
pub fn weir_firings(file: &Path) -> Result<Vec<Firing>> {
    let mut by_window: BTreeMap<(u64, i64, i64), Vec<i64>> = BTreeMap::new();
    for v in lines(file)? {
        let revenue = v["revenue"].as_f64().with_context(|| format!("no revenue in {v}"))?;
        let window =
            (int(&v, "customer_id")? as u64, int(&v, "window_start")?, int(&v, "window_end")?);
        by_window.entry(window).or_default().push((revenue * 100.0).round() as i64);
    }
    let mut firings = Vec::new();
    for ((customer, start, end), mut totals) in by_window {
        totals.sort_unstable();
        for (firing, cents) in totals.into_iter().enumerate() {
            firings.push(Firing { customer, start, end, cents, firing: firing as u32 });
        }
    }
    Ok(firings)
}

/// Order ids of a late output (each line an object with `order_id`).
pub fn late_orders(file: &Path) -> Result<Vec<u64>> {
    lines(file)?.iter().map(|v| Ok(int(v, "order_id")? as u64)).collect()
}

/// What is in one multiset and not the other, as lines naming the side.
pub fn differences<T: Ord + Clone + std::fmt::Debug>(flink: &[T], weir: &[T]) -> Vec<String> {
    let mut counts: BTreeMap<T, i64> = BTreeMap::new();
    for item in flink {
        *counts.entry(item.clone()).or_default() += 1;
    }
    for item in weir {
        *counts.entry(item.clone()).or_default() -= 1;
    }
    let mut out = Vec::new();
    for (item, surplus) in counts {
        let side = if surplus > 0 { "only Flink" } else { "only Weir" };
        for _ in 0..surplus.unsigned_abs() {
            out.push(format!("{side}: {item:?}"));
        }
    }
    out
}

impl WindowDiff {
    /// Run both sides in `scratch` (Flink's jobs already built) and compare
    /// each window kind at each parallelism.
    pub fn compare(&self, scratch: &Path) -> Result<Vec<Comparison>> {
        let orders = scratch.join("orders.jsonl");
        std::fs::write(&orders, self::orders(self.orders, self.seed))?;
        let started = std::time::Instant::now();
        self.run_flink(&orders, scratch)?;
        eprintln!("==> Flink: {:.1} s", started.elapsed().as_secs_f64());
        let started = std::time::Instant::now();
        let mut comparisons = Vec::new();
        for &parallelism in &self.parallelisms {
            for kind in KINDS {
                let out = scratch.join(format!("weir-{kind}-p{parallelism}"));
                std::fs::create_dir_all(&out)?;
                let spec_file = out.join("spec.yaml");
                std::fs::write(&spec_file, spec(kind, parallelism, &orders, &self.function, &out))?;
                let mut weir = Command::new(&self.weir);
                weir.arg("run").arg(&spec_file).arg("--data-dir").arg(out.join("data"));
                weir.env_remove("WEIR_DATA_DIR");
                let log = out.join("weir.log");
                crate::process::run_logged(weir, &log, "weir run").map_err(|error| {
                    error.context(std::fs::read_to_string(&log).unwrap_or_default())
                })?;
                let name = format!("flink-{kind}-p{parallelism}");
                let flink = flink_firings(&scratch.join(format!("{name}.jsonl")))?;
                let weir = weir_firings(&out.join("firings.jsonl"))?;
                let flink_late = late_orders(&scratch.join(format!("{name}-late.jsonl")))?;
                let weir_late = late_orders(&out.join("late.jsonl")).unwrap_or_default();
                let mut all = differences(&flink, &weir);
                all.extend(
                    differences(&flink_late, &weir_late)
                        .into_iter()
                        .map(|line| format!("late order, {line}")),
                );
                comparisons.push(Comparison {
                    kind,
                    parallelism,
                    flink_firings: flink.len(),
                    flink_refirings: flink.iter().filter(|f| f.firing > 0).count(),
                    weir_firings: weir.len(),
                    flink_late: flink_late.len(),
                    weir_late: weir_late.len(),
                    different: all.len(),
                    differences: all.into_iter().take(20).collect(),
                });
            }
        }
        eprintln!("==> Weir: {:.1} s", started.elapsed().as_secs_f64());
        Ok(comparisons)
    }

    fn run_flink(&self, orders: &Path, scratch: &Path) -> Result<()> {
        let w = WINDOWS;
        let mut java = crate::bench_flink::flink_java(&self.root, "weir.bench.WindowDiff");
        java.arg(orders)
            .arg(scratch)
            .args([w.size, w.slide, w.gap, w.bound, w.lateness].map(|ms| ms.to_string()))
            .args(self.parallelisms.iter().map(u16::to_string));
        let log = scratch.join("flink.log");
        crate::process::run_logged(java, &log, "Flink's WindowDiff job")
            .map_err(|error| error.context(std::fs::read_to_string(&log).unwrap_or_default()))
    }

    /// Build Flink's jobs, compare, print the table and the differences;
    /// fail if any.
    pub fn run(&self) -> Result<()> {
        let scratch = tempfile::tempdir()?;
        eprintln!("==> building the Flink jobs (Maven, bench/flink)");
        let log = scratch.path().join("mvn.log");
        if let Err(error) = build_flink(&self.root, &log) {
            eprintln!("{}", std::fs::read_to_string(&log).unwrap_or_default());
            return Err(error);
        }
        eprintln!("==> {} orders (seed {}), Flink then Weir", self.orders, self.seed);
        let comparisons = self.compare(scratch.path())?;
        println!("{}", header());
        for comparison in &comparisons {
            println!("{}", comparison.row());
        }
        let different: usize = comparisons.iter().map(|c| c.different).sum();
        for comparison in comparisons.iter().filter(|c| c.different > 0) {
            println!("{} at parallelism {}:", comparison.kind, comparison.parallelism);
            for line in &comparison.differences {
                println!("  {line}");
            }
        }
        if different > 0 {
            bail!("Weir and Flink differ in {different} firings or late orders");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_seeded_and_partly_late() {
        assert_eq!(orders(500, 3), orders(500, 3));
        assert_ne!(orders(500, 3), orders(500, 4));
        let times: Vec<i64> = orders(2_000, 3)
            .lines()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line).unwrap()["event_time"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        let mut newest = i64::MIN;
        let (mut behind_bound, mut past_lateness) = (0, 0);
        for t in times {
            let behind = newest.saturating_sub(t);
            behind_bound += usize::from(behind > WINDOWS.bound);
            past_lateness += usize::from(behind > WINDOWS.bound + WINDOWS.lateness + WINDOWS.size);
            newest = newest.max(t);
        }
        assert!(behind_bound > 100 && past_lateness > 20, "{behind_bound} {past_lateness}");
    }

    #[test]
    fn weir_firings_are_numbered_by_growing_totals_and_multisets_compared() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.jsonl");
        std::fs::write(
            &file,
            "{\"customer_id\":1,\"window_start\":0,\"window_end\":10,\"revenue\":3.50}\n\
             {\"customer_id\":1,\"window_start\":0,\"window_end\":10,\"revenue\":1.25}\n",
        )
        .unwrap();
        let weir = weir_firings(&file).unwrap();
        let firing = |cents, firing| Firing { customer: 1, start: 0, end: 10, cents, firing };
        assert_eq!(weir, vec![firing(125, 0), firing(350, 1)]);
        assert!(differences(&[firing(350, 1), firing(125, 0)], &weir).is_empty());
        assert_eq!(
            differences(&[firing(125, 0)], &weir),
            vec![format!("only Weir: {:?}", firing(350, 1))]
        );
    }
}
