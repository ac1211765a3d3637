//! Process-level measurements reported by `weir run` (and, later, the
//! metrics endpoint).

use serde::{Deserialize, Serialize};

/// The process's peak resident set size in bytes (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The process's CPU time so far, user + system, all threads (Linux
/// `/proc/self/stat`, in USER_HZ = 100 ticks a second), if known.
pub fn cpu_seconds() -> Option<f64> {
    process_cpu(std::path::Path::new("/proc/self/stat")).map(|(_, seconds)| seconds)
}

/// The whole machine's CPU time so far, in ticks: all of it, and what the
/// hypervisor stole (time a virtual CPU was ready but another guest ran;
/// `steal` in `/proc/stat`), if known.
pub fn machine_cpu_ticks() -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user and nice.
    Some(CpuTicks {
        all: fields.iter().take(8).sum(),
        idle: fields.get(3)? + fields.get(4)?,
        stolen: *fields.get(7)?,
    })
}

/// The machine's CPU time in ticks (see [`machine_cpu_ticks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    /// All CPU time, idle included.
    pub all: u64,
    /// Idle time, waiting for I/O included.
    pub idle: u64,
    /// Time stolen by the hypervisor.
    pub stolen: u64,
}

impl CpuTicks {
    /// The share of the machine's CPU time stolen since `before`.
    pub fn stolen_since(&self, before: &CpuTicks) -> f64 {
        self.stolen.saturating_sub(before.stolen) as f64 / self.all_since(before)
    }

    /// The machine's cores busy on average since `before` (not idle; time
    /// stolen counts as busy).
    pub fn busy_cores_since(&self, before: &CpuTicks) -> f64 {
        let idle = self.idle.saturating_sub(before.idle);
        let busy = self.all.saturating_sub(before.all).saturating_sub(idle);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        busy as f64 / self.all_since(before) * cores as f64
    }

    fn all_since(&self, before: &CpuTicks) -> f64 {
        self.all.saturating_sub(before.all).max(1) as f64
    }
}

/// The name and CPU time so far (user + system) of the process or thread
/// whose Linux `stat` file is `stat` (`/proc/<pid>/stat`,
/// `/proc/<pid>/task/<tid>/stat`), if known.
pub fn process_cpu(stat: &std::path::Path) -> Option<(String, f64)> {
    let stat = std::fs::read_to_string(stat).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    // Fields after the command name (which may contain spaces), from field 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<u64>().ok();
    Some((name, (ticks(14)? + ticks(15)?) as f64 / 100.0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_rss_is_plausible_on_linux() {
        if cfg!(target_os = "linux") {
            let rss = super::peak_rss_bytes().unwrap();
            assert!(rss > 1 << 20 && rss < 64 << 30, "{rss}");
            let spin = std::time::Instant::now();
            while spin.elapsed() < std::time::Duration::from_millis(50) {}
            assert!(super::cpu_seconds().unwrap() > 0.0);
            let (before, after) = (super::machine_cpu_ticks().unwrap(), {
                std::thread::sleep(std::time::Duration::from_millis(30));
                super::machine_cpu_ticks().unwrap()
            });
            assert!(after.all > before.all, "{before:?} {after:?}");
            assert!((0.0..=1.0).contains(&after.stolen_since(&before)));
            let cores = std::thread::available_parallelism().unwrap().get() as f64;
            assert!((0.0..=cores).contains(&after.busy_cores_since(&before)));
        }
    }
}

/// What one run measured (printed by `weir run --report-json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measurement {
    /// Events read.
    pub events: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// Seconds from the first event read to the last output written (or
    /// to the end of the input's processing, if later: see
    /// `LiveMetrics::processing`): the run without its start-up and
    /// shut-down, as the Flink harness of `scripts/dev bench-flink` times
    /// Flink. Absent when nothing was written or processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processing_seconds: Option<f64>,
    /// CPU seconds of the process (user + system, all threads).
    pub cpu_seconds: f64,
    /// Peak resident set size in bytes.
    pub peak_rss_bytes: u64,
    /// Checkpoints completed.
    pub checkpoints: usize,
    /// The share of the machine's CPU time the hypervisor stole during the
    /// run (on a virtual machine; 0 elsewhere), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen: Option<f64>,
    /// End-to-end latency, when recorded (`weir run --latency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::observe::latency::LatencySummary>,
}

impl Measurement {
    /// Events per second while processing: over
    /// [`processing_seconds`](Self::processing_seconds) when known, else
    /// over the whole run.
    pub fn rate(&self) -> f64 {
        let seconds = self.processing_seconds.filter(|s| *s > 0.0).unwrap_or(self.seconds);
        self.events as f64 / seconds.max(1e-9)
    }

    /// Its events per second over `other`'s.
    pub fn rate_over(&self, other: &Measurement) -> f64 {
        self.rate() / other.rate().max(1e-9)
    }
}
