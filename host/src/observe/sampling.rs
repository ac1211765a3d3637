//! Rates of a running pipeline: every task's counters sampled about once
//! a second ([`LiveMetrics::tick`](super::LiveMetrics::tick)) and turned
//! into per-second figures between the last two samples — records in and
//! out, and, as Flink reports them, milliseconds per second busy, idle and
//! backpressured — plus the graph the tasks form. Plain data; the API
//! shows it as JSON and as Prometheus metrics.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::summary::OperatorCounts;
use crate::checkpoint::CompletedSnapshot;
use crate::units::millis;

/// The graph of a run's tasks, by node name.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Source nodes: name and source tasks (readers), in task order.
    pub sources: Vec<(String, usize)>,
    /// Keyed stages: name and parallelism, in subtask order.
    pub stages: Vec<(String, usize)>,
    /// Sink nodes: name (`main` for a line spec's main sink) and whether
    /// it takes a side output.
    pub sinks: Vec<(String, bool)>,
    /// Which node's output goes to which node (`from`, `to`).
    pub edges: Vec<(String, String)>,
}

/// What one task had counted at one instant.
#[derive(Debug, Clone, Default)]
pub struct TaskSample {
    /// Records in, out and dropped late.
    pub counts: OperatorCounts,
    /// Batches received.
    pub batches_in: u64,
    /// Since the task started.
    pub alive: Duration,
    /// Waiting for input, in all.
    pub idle: Duration,
    /// Held up by a full channel downstream, in all.
    pub backpressured: Duration,
    /// In calls into its functions, in all.
    pub calls: Duration,
    /// Its event time.
    pub watermark: Option<i64>,
    /// Its state's size, if known.
    pub state_bytes: Option<u64>,
    /// Reads its state cache answered.
    pub cache_hits: u64,
    /// Reads its state cache passed on.
    pub cache_misses: u64,
    /// A source's splits.
    pub splits: Vec<SplitMetrics>,
}

/// One split of a source (a Kafka partition, a file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SplitMetrics {
    /// Its name (`topic/partition` for Kafka).
    pub split: String,
    /// Its own watermark (newest timestamp less the allowed lateness).
    pub watermark: Option<i64>,
    /// Records it holds that the source has not read (Kafka: the
    /// partition's last stable offset less the next offset to read).
    pub lag: Option<i64>,
}

/// Every task's sample at one instant.
#[derive(Debug, Clone)]
pub struct RunSample {
    /// When.
    pub at: Instant,
    /// Each source task.
    pub sources: Vec<TaskSample>,
    /// Every key function together.
    pub key: TaskSample,
    /// Each keyed subtask, stage after stage.
    pub subtasks: Vec<TaskSample>,
    /// The sink thread.
    pub sink: TaskSample,
    /// Snapshots failed or expired so far.
    pub snapshots_failed: u64,
}

/// The last two samples of a run.
#[derive(Debug, Default)]
pub struct Sampler {
    previous: Option<RunSample>,
    last: Option<RunSample>,
}

impl Sampler {
    /// Keep `sample` as the newest.
    pub fn push(&mut self, sample: RunSample) {
        self.previous = self.last.replace(sample);
    }

    /// The view of `current` (counts and totals as they are now), with
    /// rates between the last two samples pushed (none before the second).
    pub fn view(
        &self,
        current: &RunSample,
        topology: &Topology,
        last_snapshot: Option<&CompletedSnapshot>,
        completed: usize,
        watermark: Option<i64>,
    ) -> MetricsView {
        let now_ms = crate::clock::now_millis();
        let pair = self.previous.as_ref().zip(self.last.as_ref());
        let seconds = pair.map_or(0.0, |(p, l)| l.at.saturating_duration_since(p.at).as_secs_f64());
        // Task `index` of what `pick` takes from a sample: now, and its
        // rates over the last two samples.
        let task = |index: usize, pick: &dyn Fn(&RunSample) -> Option<&TaskSample>| {
            let now = pick(current)?;
            let rates = pair.and_then(|(p, l)| pick(p).zip(pick(l)));
            Some(TaskMetrics::between(index, now, rates, seconds))
        };
        let mut operators = Vec::new();
        let mut first = 0;
        for (name, readers) in &topology.sources {
            let tasks =
                (0..*readers).filter_map(|i| task(i, &|s| s.sources.get(first + i))).collect();
            first += readers;
            operators.push(OperatorMetrics::new(name, "source", tasks));
        }
        // Key functions run chained into their producers, on their
        // threads: busy is their share of the time in calls, idle the rest.
        let key = task(0, &|s| Some(&s.key)).map(|mut key| {
            key.busy_ms_per_second = key.call_ms_per_second;
            key.idle_ms_per_second = 1000.0 - key.call_ms_per_second;
            key.busy_seconds = key.call_seconds;
            key
        });
        operators.push(OperatorMetrics::new("key", "key", key.into_iter().collect()));
        let mut slot = 0;
        for (name, parallelism) in &topology.stages {
            let first = slot;
            let subtasks =
                (0..*parallelism).filter_map(|i| task(i, &|s| s.subtasks.get(first + i))).collect();
            slot += parallelism;
            operators.push(OperatorMetrics::new(name, "keyed", subtasks));
        }
        // One sink thread writes every sink: its figures go with the first.
        for (i, (name, side)) in topology.sinks.iter().enumerate() {
            let kind = if *side { "side_output" } else { "sink" };
            let tasks = task(0, &|s| Some(&s.sink)).filter(|_| i == 0).into_iter().collect();
            operators.push(OperatorMetrics::new(name, kind, tasks));
        }
        let rate_of = |kind: &str, pick: fn(&TaskMetrics) -> f64| -> f64 {
            operators.iter().filter(|o| o.kind == kind).flat_map(|o| &o.subtasks).map(pick).sum()
        };
        MetricsView {
            at: now_ms,
            records_in_per_second: rate_of("source", |t| t.records_out_per_second),
            records_out_per_second: rate_of("sink", |t| t.records_in_per_second),
            watermark,
            watermark_lag_ms: watermark.map(|w| now_ms.saturating_sub(w).max(0)),
            edges: topology.edges.clone(),
            checkpoints: CheckpointMetrics {
                completed: completed as u64,
                failed: current.snapshots_failed,
                last_duration_ms: last_snapshot.map(|s| millis(s.duration)),
                last_alignment_ms: last_snapshot.map(|s| millis(s.alignment)),
                last_size_bytes: last_snapshot.map(|s| s.size_bytes),
                last_incremental_bytes: last_snapshot.map(|s| s.incremental_bytes),
            },
            operators,
        }
    }
}

/// A running pipeline's figures at one instant, with rates over the last
/// second or so.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MetricsView {
    /// When this view was made, in milliseconds since the epoch.
    pub at: i64,
    /// Records the sources read, per second.
    pub records_in_per_second: f64,
    /// Records the sinks took, per second.
    pub records_out_per_second: f64,
    /// The pipeline's event time.
    pub watermark: Option<i64>,
    /// How far event time is behind the clock, in milliseconds.
    pub watermark_lag_ms: Option<i64>,
    /// Each operator: sources, the key functions, keyed stages, the sink.
    pub operators: Vec<OperatorMetrics>,
    /// Which node's output goes to which node: `[from, to]` pairs.
    #[schema(value_type = Vec<Vec<String>>)]
    pub edges: Vec<(String, String)>,
    /// Checkpoints and savepoints.
    pub checkpoints: CheckpointMetrics,
}

/// One operator's tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperatorMetrics {
    /// Its node's name (`key`: every key function together; a line spec's
    /// main sink: `main`).
    pub id: String,
    /// `source`, `key`, `keyed`, `sink` or `side_output`.
    pub kind: String,
    /// Its tasks: one per subtask of a keyed stage; one for a source and
    /// the key functions; the sink thread, which writes every sink, with
    /// the first sink (none with the others).
    pub subtasks: Vec<TaskMetrics>,
}

impl OperatorMetrics {
    fn new(id: &str, kind: &str, subtasks: Vec<TaskMetrics>) -> Self {
        Self { id: id.to_string(), kind: kind.to_string(), subtasks }
    }
}

/// One task's counts and its rates over the last second or so.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskMetrics {
    /// Its index in its operator.
    pub subtask: usize,
    /// Records received in this run.
    pub records_in: u64,
    /// Records emitted in this run.
    pub records_out: u64,
    /// Late records dropped in this run.
    pub late_dropped: u64,
    /// Records received per second.
    pub records_in_per_second: f64,
    /// Records emitted per second.
    pub records_out_per_second: f64,
    /// Milliseconds per second working (not idle, not backpressured).
    pub busy_ms_per_second: f64,
    /// Milliseconds per second waiting for input.
    pub idle_ms_per_second: f64,
    /// Milliseconds per second held up by a full channel downstream.
    pub backpressured_ms_per_second: f64,
    /// Milliseconds per second in calls into its functions.
    pub call_ms_per_second: f64,
    /// Records per batch received, on average over the last second.
    pub average_batch_size: f64,
    /// Its event time.
    pub watermark: Option<i64>,
    /// Its state's size in bytes, if known.
    pub state_bytes: Option<u64>,
    /// Share of state reads its cache answered (0 to 1), if it read any.
    pub cache_hit_ratio: Option<f64>,
    /// Seconds it has been busy, idle, backpressured and in calls, in all.
    pub busy_seconds: f64,
    /// Seconds it waited for input, in all.
    pub idle_seconds: f64,
    /// Seconds a full channel downstream held it up, in all.
    pub backpressured_seconds: f64,
    /// Seconds in calls into its functions, in all.
    pub call_seconds: f64,
    /// A source's splits: each one's watermark and lag (empty for others).
    pub splits: Vec<SplitMetrics>,
}

impl TaskMetrics {
    /// Task `subtask` as sampled `now`, with its rates between the two
    /// samples `rates` (`seconds` apart).
    fn between(
        subtask: usize,
        now: &TaskSample,
        rates: Option<(&TaskSample, &TaskSample)>,
        seconds: f64,
    ) -> Self {
        let busy = |s: &TaskSample| s.alive.saturating_sub(s.idle + s.backpressured);
        let mut metrics = Self {
            subtask,
            records_in: now.counts.records_in,
            records_out: now.counts.records_out,
            late_dropped: now.counts.late_dropped,
            watermark: now.watermark,
            state_bytes: now.state_bytes,
            busy_seconds: busy(now).as_secs_f64(),
            idle_seconds: now.idle.as_secs_f64(),
            backpressured_seconds: now.backpressured.as_secs_f64(),
            call_seconds: now.calls.as_secs_f64(),
            splits: now.splits.clone(),
            ..Default::default()
        };
        let Some((then, last)) = rates.filter(|_| seconds > 0.0) else { return metrics };
        let per_second = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
        let ms_per_second =
            |a: Duration, b: Duration| a.saturating_sub(b).as_secs_f64() * 1000.0 / seconds;
        metrics.records_in_per_second = per_second(last.counts.records_in, then.counts.records_in);
        metrics.records_out_per_second =
            per_second(last.counts.records_out, then.counts.records_out);
        // The three add up to 1000 ms a second.
        let idle = ms_per_second(last.idle, then.idle).min(1000.0);
        let backpressured = ms_per_second(last.backpressured, then.backpressured).min(1000.0);
        metrics.idle_ms_per_second = idle;
        metrics.backpressured_ms_per_second = backpressured;
        metrics.busy_ms_per_second = (1000.0 - idle - backpressured).max(0.0);
        metrics.call_ms_per_second = ms_per_second(last.calls, then.calls).min(1000.0);
        let batches = last.batches_in.saturating_sub(then.batches_in);
        if batches > 0 {
            metrics.average_batch_size =
                last.counts.records_in.saturating_sub(then.counts.records_in) as f64
                    / batches as f64;
        }
        let reads = (last.cache_hits + last.cache_misses)
            .saturating_sub(then.cache_hits + then.cache_misses);
        if reads > 0 {
            metrics.cache_hit_ratio =
                Some(last.cache_hits.saturating_sub(then.cache_hits) as f64 / reads as f64);
        }
        metrics
    }
}

/// Checkpoints and savepoints of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckpointMetrics {
    /// Completed in this run.
    pub completed: u64,
    /// Failed or expired in this run.
    pub failed: u64,
    /// Trigger to completion of the newest completed one.
    pub last_duration_ms: Option<u64>,
    /// The longest barrier alignment of any subtask in the newest one.
    pub last_alignment_ms: Option<u64>,
    /// Bytes of every file the newest one references.
    pub last_size_bytes: Option<u64>,
    /// Bytes the newest one uploaded.
    pub last_incremental_bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(records_in: u64, alive_ms: u64, idle_ms: u64, backpressured_ms: u64) -> TaskSample {
        TaskSample {
            counts: OperatorCounts { records_in, records_out: records_in, late_dropped: 0 },
            batches_in: records_in / 100,
            alive: Duration::from_millis(alive_ms),
            idle: Duration::from_millis(idle_ms),
            backpressured: Duration::from_millis(backpressured_ms),
            cache_hits: records_in,
            cache_misses: records_in / 4,
            ..Default::default()
        }
    }

    fn run(at: Instant, subtask: TaskSample) -> RunSample {
        RunSample {
            at,
            sources: vec![task(0, 0, 0, 0)],
            key: TaskSample::default(),
            subtasks: vec![subtask],
            sink: TaskSample::default(),
            snapshots_failed: 0,
        }
    }

    #[test]
    fn rates_and_time_shares_are_taken_between_the_last_two_samples() {
        let topology = Topology {
            sources: vec![("source".into(), 1)],
            stages: vec![("process".into(), 1)],
            sinks: vec![("main".into(), false)],
            edges: vec![("source".into(), "process".into())],
        };
        let start = Instant::now();
        let mut sampler = Sampler::default();
        let first = run(start, task(1_000, 5_000, 1_000, 0));
        sampler.push(first.clone());
        let view = sampler.view(&first, &topology, None, 0, None);
        let process = &view.operators[2];
        assert_eq!((process.id.as_str(), process.kind.as_str()), ("process", "keyed"));
        assert_eq!(process.subtasks[0].records_in, 1_000);
        assert_eq!(process.subtasks[0].records_in_per_second, 0.0, "no rate from one sample");
        // Two seconds later: 3,000 more records, 500 ms more idle and
        // 1,000 ms more backpressured.
        sampler.push(run(start + Duration::from_secs(2), task(4_000, 7_000, 1_500, 1_000)));
        // Counts are read now; rates come from the last two samples.
        let current = run(start + Duration::from_millis(2_500), task(4_500, 7_500, 1_500, 1_000));
        let view = sampler.view(&current, &topology, None, 0, None);
        let t = &view.operators[2].subtasks[0];
        assert_eq!(t.records_in, 4_500);
        assert_eq!(t.records_in_per_second, 1_500.0);
        assert_eq!(t.idle_ms_per_second, 250.0);
        assert_eq!(t.backpressured_ms_per_second, 500.0);
        assert_eq!(t.busy_ms_per_second, 250.0);
        assert_eq!(t.average_batch_size, 100.0);
        assert_eq!(t.cache_hit_ratio, Some(0.8));
        assert_eq!((t.busy_seconds, t.idle_seconds, t.backpressured_seconds), (5.0, 1.5, 1.0));
        let ids: Vec<&str> = view.operators.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["source", "key", "process", "main"]);
        assert_eq!(view.edges, topology.edges);
    }
}
