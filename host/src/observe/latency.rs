//! End-to-end latency of what a run writes: for each event a sink takes,
//! the time from its timestamp to the write, or, when output is
//! exactly-once (checkpoints on), to the commit of the checkpoint that
//! makes it visible. With a live source whose
//! event time is the wall clock at ingestion (the generator's `rate`),
//! that is ingestion to sink; for a window's result (stamped with the
//! window's last millisecond) it is from the moment the watermark could
//! pass the window's end. Recorded by the sink task, when asked (`weir run
//! --latency`, for `weir bench --latency`), in an HDR histogram of
//! microseconds with 3 significant digits; timestamps are milliseconds, so
//! a figure is up to 1 ms above the true one. An event stamped later than
//! its write (a window fired early by the end of a bounded input, whose
//! watermark then jumps to the end of time) is counted as early instead.
//! With a warm-up ([`LatencyRecorder::after_warm_up`]), events stamped
//! before it ends are counted apart, not recorded: a run's first moments
//! (its Wasm instances' first calls, fresh memory's page faults) say how
//! it starts, not how it runs. A run that may never end (a Kafka source)
//! can log the percentiles so far every while
//! ([`LatencyRecorder::logging_every`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::clock::{now_micros, now_millis};

/// The longest latency told apart: an hour (longer ones count as an hour).
const HIGHEST_MICROS: u64 = 3_600_000_000;

/// The message of the periodic latency log line.
pub const LATENCY_SO_FAR: &str = "latency so far";

/// Latencies of the events a sink task wrote (or of any outputs).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
    early: u64,
    /// Events stamped before this (ms since the epoch) are not recorded.
    recorded_from: i64,
    /// Events not recorded for that.
    warm_up: u64,
    /// Exactly-once output: per epoch not yet committed, how many events
    /// of each timestamp were written in it (`None`: visible when written).
    pending: Option<BTreeMap<u64, BTreeMap<i64, u64>>>,
    /// Log the summary so far this often (and when it was last logged).
    log_every: Option<(Duration, Instant)>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self {
            histogram: Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)
                .expect("valid histogram bounds"),
            early: 0,
            recorded_from: i64::MIN,
            warm_up: 0,
            pending: None,
            log_every: None,
        }
    }
}

impl LatencyRecorder {
    /// A recorder for output that becomes visible when the checkpoint of
    /// its epoch commits ([`LatencyRecorder::committed`]).
    pub fn until_commit() -> Self {
        Self { pending: Some(BTreeMap::new()), ..Self::default() }
    }

    /// Leave out events stamped within `warm_up` of now (counted as
    /// [`LatencySummary::warm_up`]); none for a zero warm-up.
    pub fn after_warm_up(self, warm_up: Duration) -> Self {
        if warm_up.is_zero() {
            return self;
        }
        let warm_up = i64::try_from(warm_up.as_millis()).unwrap_or(i64::MAX);
        Self { recorded_from: now_millis().saturating_add(warm_up), ..self }
    }

    /// Log the percentiles so far (info, `latency so far`) at most once
    /// every `every`, as events are recorded.
    pub fn logging_every(self, every: Duration) -> Self {
        Self { log_every: Some((every, Instant::now())), ..self }
    }

    /// Record events of `timestamps`, written now in `epoch`: with one
    /// clock read for the batch, or (until commit) kept by timestamp until
    /// their epoch commits.
    pub fn record(&mut self, epoch: u64, timestamps: &[i64]) {
        if let Some(pending) = &mut self.pending {
            // A batch's events mostly share their millisecond: one entry
            // per run of equal timestamps.
            let counts = pending.entry(epoch).or_default();
            for run in timestamps.chunk_by(|a, b| a == b) {
                if run[0] < self.recorded_from {
                    self.warm_up += run.len() as u64;
                } else {
                    *counts.entry(run[0]).or_default() += run.len() as u64;
                }
            }
            self.log_if_due();
            return;
        }
        self.record_visible(timestamps);
    }

    /// Record `events`, visible as they are written now (an at-least-once
    /// sink's output, even with checkpoints on): one clock read.
    pub fn record_visible(&mut self, timestamps: &[i64]) {
        let now = now_micros();
        for &timestamp in timestamps {
            if timestamp < self.recorded_from {
                self.warm_up += 1;
                continue;
            }
            self.record_micros(now.saturating_sub(timestamp.saturating_mul(1000)));
        }
        self.log_if_due();
    }

    /// Checkpoint `id` committed now: the events of epochs up to it are
    /// visible.
    pub fn committed(&mut self, id: u64) {
        let Some(pending) = &mut self.pending else { return };
        let later = pending.split_off(&(id + 1));
        let visible = std::mem::replace(pending, later);
        let now = now_micros();
        for (timestamp, count) in visible.into_values().flatten() {
            self.record_n(now.saturating_sub(timestamp.saturating_mul(1000)), count);
        }
        self.log_if_due();
    }

    /// With [`LatencyRecorder::logging_every`]: log the summary if its
    /// time has come.
    fn log_if_due(&mut self) {
        let Some((every, last)) = &mut self.log_every else { return };
        if last.elapsed() < *every {
            return;
        }
        *last = Instant::now();
        if let Some(s) = self.summary() {
            tracing::info!(
                count = s.count,
                warm_up = s.warm_up,
                early = s.early,
                p50_us = s.p50_us,
                p90_us = s.p90_us,
                p99_us = s.p99_us,
                p999_us = s.p999_us,
                max_us = s.max_us,
                "{LATENCY_SO_FAR}"
            );
        }
    }

    /// Record one latency of `micros` (negative: early).
    pub fn record_micros(&mut self, micros: i64) {
        self.record_n(micros, 1);
    }

    /// Record `count` latencies of `micros` (negative: early).
    fn record_n(&mut self, micros: i64, count: u64) {
        match micros {
            micros if micros < 0 => self.early += count,
            micros => self.histogram.saturating_record_n(micros.max(1) as u64, count),
        }
    }

    /// What was recorded; `None` if nothing was.
    pub fn summary(&self) -> Option<LatencySummary> {
        let h = &self.histogram;
        (!h.is_empty() || self.early > 0 || self.warm_up > 0).then(|| LatencySummary {
            count: h.len(),
            early: self.early,
            warm_up: self.warm_up,
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        })
    }
}

/// Percentiles of a run's end-to-end latency, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Events recorded.
    pub count: u64,
    /// Events written before their timestamp, not recorded.
    #[serde(default)]
    pub early: u64,
    /// Events stamped within the warm-up, not recorded.
    #[serde(default)]
    pub warm_up: u64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// The longest.
    pub max_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's timestamp (what the recorder reads of it).
    fn event(timestamp: i64) -> i64 {
        timestamp
    }

    #[test]
    fn percentiles_are_the_time_from_each_timestamp_to_the_write() {
        let mut recorder = LatencyRecorder::default();
        assert_eq!(recorder.summary(), None);
        let now = crate::clock::now_millis();
        // 990 events 2 ms old, 9 events 50 ms old, one a minute old.
        let mut events: Vec<i64> = (0..990).map(|_| event(now - 2)).collect();
        events.extend((0..9).map(|_| event(now - 50)));
        events.push(event(now - 60_000));
        recorder.record(1, &events);
        let summary = recorder.summary().unwrap();
        assert_eq!(summary.count, 1000);
        assert!((2_000..50_000).contains(&summary.p50_us), "{summary:?}");
        assert!((2_000..50_000).contains(&summary.p90_us), "{summary:?}");
        assert!(summary.p999_us >= 50_000 && summary.p999_us < 60_000_000, "{summary:?}");
        assert!(summary.max_us >= 60_000_000, "{summary:?}");
        // An event stamped in the future is counted as early.
        recorder.record(2, &[event(now + 10_000)]);
        assert_eq!(recorder.summary().unwrap(), LatencySummary { early: 1, ..summary });
    }

    #[test]
    fn events_stamped_within_the_warm_up_are_counted_apart() {
        let warm_up = Duration::from_secs(60);
        for mut recorder in [LatencyRecorder::default(), LatencyRecorder::until_commit()]
            .map(|recorder| recorder.after_warm_up(warm_up))
        {
            let now = crate::clock::now_millis();
            recorder.record(1, &[event(now - 5_000), event(now), event(now + 61_000)]);
            recorder.committed(1);
            let summary = recorder.summary().unwrap();
            assert_eq!((summary.count, summary.warm_up), (0, 2), "{summary:?}");
        }
    }

    #[test]
    fn exactly_once_output_counts_from_the_commit_that_makes_it_visible() {
        let mut recorder = LatencyRecorder::until_commit();
        let now = crate::clock::now_millis();
        recorder.record(1, &[event(now - 5), event(now - 5), event(now - 3)]);
        recorder.record(2, &[event(now - 1)]);
        recorder.record(3, &[event(now + 60_000)]);
        assert_eq!(recorder.summary(), None, "nothing is visible before a commit");
        // Checkpoint 2 commits epochs 1 and 2, a while after the writes.
        std::thread::sleep(std::time::Duration::from_millis(20));
        recorder.committed(2);
        let summary = recorder.summary().unwrap();
        assert_eq!((summary.count, summary.early), (4, 0));
        assert!(summary.p50_us >= 20_000, "the wait for the commit counts: {summary:?}");
        // Epoch 3 (one event stamped a minute ahead) commits later: early.
        recorder.committed(3);
        assert_eq!(recorder.summary().unwrap().early, 1);
        recorder.committed(3);
        assert_eq!(recorder.summary().unwrap().count, 4, "each epoch counts once");
        // An at-least-once sink's output is visible when written.
        recorder.record_visible(&[event(now)]);
        assert_eq!(recorder.summary().unwrap().count, 5);
    }

    /// A log writer that keeps what is written.
    #[derive(Clone, Default)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_recorder_logs_its_percentiles_at_most_once_a_period() {
        let kept = Kept::default();
        let writer = kept.clone();
        let subscriber =
            tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            let now = crate::clock::now_millis();
            let mut recorder = LatencyRecorder::default().logging_every(Duration::from_millis(50));
            recorder.record(1, &[event(now - 2)]);
            std::thread::sleep(Duration::from_millis(60));
            recorder.record(1, &[event(now - 2), event(now - 2)]);
            recorder.record(1, &[event(now - 2)]);
        });
        let text = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(LATENCY_SO_FAR)).collect();
        assert_eq!(lines.len(), 1, "one line in the period after the first: {text}");
        assert!(lines[0].contains("count=3 ") && lines[0].contains("p99_us="), "{text}");
        // Without `logging_every`, nothing is logged.
        let kept = Kept::default();
        let writer = kept.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).finish();
        tracing::subscriber::with_default(subscriber, || {
            LatencyRecorder::default().record_visible(&[event(crate::clock::now_millis())]);
        });
        assert!(kept.0.lock().unwrap().is_empty());
    }
}
