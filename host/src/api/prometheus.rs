//! `GET /metrics`: every pipeline's counters in the Prometheus text format
//! (version 0.0.4), for scraping.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::{blocking, ApiError, AppState};
use crate::observe::sampling::{MetricsView, TaskMetrics};
use crate::observe::RunSummary;
use crate::store::PipelineState;

/// Counters of every pipeline, in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, content_type = "text/plain", body = String, description = "Prometheus text format")))]
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
) -> Result<impl IntoResponse, ApiError> {
    let text = blocking(move || Ok(render(&state))).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

/// The units of a served cluster's pipelines, as their workers reported
/// them (each worker's own /metrics has more).
struct UnitFamilies {
    records_in: Family,
    records_out: Family,
    lag: Family,
    running: Family,
}

impl UnitFamilies {
    fn new() -> Self {
        Self {
            records_in: Family::new(
                "weir_unit_records_in",
                "gauge",
                "Records a unit of a cluster pipeline read in its current run, by worker.",
            ),
            records_out: Family::new(
                "weir_unit_records_out",
                "gauge",
                "Records a unit of a cluster pipeline wrote in its current run, by worker.",
            ),
            lag: Family::new(
                "weir_unit_lag_records",
                "gauge",
                "Records of a unit's input partitions not yet checkpointed.",
            ),
            running: Family::new(
                "weir_unit_running",
                "gauge",
                "1 while a unit of a cluster pipeline runs on the worker (by version).",
            ),
        }
    }

    fn add(&mut self, pipeline: &str, units: &[crate::serve::ClusterUnit]) {
        for u in units {
            let labels = format!(
                "pipeline=\"{pipeline}\",unit=\"{}\",worker=\"{}\"",
                escape(&u.status.unit),
                escape(&u.worker)
            );
            self.records_in.add(labels.clone(), u.status.records_in as f64);
            self.records_out.add(labels.clone(), u.status.records_out as f64);
            if let Some(lag) = u.status.lag {
                self.lag.add(labels.clone(), lag as f64);
            }
            let running = u8::from(u.status.state == "running");
            self.running.add(format!("{labels},version=\"{}\"", u.version), running);
        }
    }

    fn into_families(self) -> [Family; 4] {
        [self.records_in, self.records_out, self.lag, self.running]
    }
}

/// A metric family: its help line, type and samples.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Self { name, help, kind, samples: Vec::new() }
    }

    fn add(&mut self, labels: String, value: impl Into<f64>) {
        self.samples.push((labels, value.into()));
    }
}

fn render(state: &AppState) -> String {
    let mut up = Family::new(
        "weir_pipeline_state",
        "gauge",
        "1 for the pipeline's current state (running, finished, stopped, failed).",
    );
    let mut records_in = Family::new(
        "weir_operator_records_in_total",
        "counter",
        "Records an operator received in the current run.",
    );
    let mut records_out = Family::new(
        "weir_operator_records_out_total",
        "counter",
        "Records an operator emitted in the current run.",
    );
    let mut late = Family::new(
        "weir_operator_late_records_dropped_total",
        "counter",
        "Late records a window operator dropped.",
    );
    let mut sink = Family::new(
        "weir_sink_records_total",
        "counter",
        "Records written by the sinks, by output.",
    );
    let mut watermark =
        Family::new("weir_watermark_milliseconds", "gauge", "The pipeline's event-time watermark.");
    let mut snapshots = Family::new(
        "weir_snapshots_completed_total",
        "counter",
        "Checkpoints and savepoints the current run completed.",
    );
    let mut last_duration = Family::new(
        "weir_last_snapshot_duration_seconds",
        "gauge",
        "How long the newest snapshot took.",
    );
    let mut last_size =
        Family::new("weir_last_snapshot_size_bytes", "gauge", "Size of the newest snapshot.");
    let mut incremental = Family::new(
        "weir_last_snapshot_incremental_bytes",
        "gauge",
        "Bytes the newest snapshot uploaded.",
    );
    let mut alignment = Family::new(
        "weir_last_snapshot_alignment_seconds",
        "gauge",
        "The longest barrier alignment of any subtask in the newest snapshot.",
    );
    let mut failed = Family::new(
        "weir_snapshots_failed_total",
        "counter",
        "Checkpoints and savepoints the current run abandoned (failed or expired).",
    );
    let mut restarts = Family::new(
        "weir_pipeline_restarts_total",
        "counter",
        "Restarts of the pipeline after failed runs.",
    );
    let mut lag = Family::new(
        "weir_watermark_lag_milliseconds",
        "gauge",
        "How far the pipeline's event time is behind the clock.",
    );
    let mut tails =
        Family::new("weir_tail_readers", "gauge", "Tail readers open (GET …/tail), per pipeline.");
    let mut lookups = Family::new(
        "weir_state_lookups_waiting",
        "gauge",
        "State lookups (GET …/state) waiting for their answer, per pipeline.",
    );
    let (mut tails_held, mut lookups_held) = (state.tails.held(), state.lookups.held());
    let mut tasks = TaskFamilies::new();
    let mut functions = Family::new("weir_functions", "gauge", "Functions in the function store.");
    functions.add(String::new(), state.functions.list().map_or(0, |l| l.len()) as f64);
    let mut units = UnitFamilies::new();
    let local = match &state.pipelines {
        super::pipelines::Pipelines::Local(supervisor) => supervisor.list(),
        super::pipelines::Pipelines::Cluster(cluster) => {
            // A cluster's pipelines as their workers last reported them.
            for view in cluster.list().unwrap_or_default() {
                let pipeline = escape(&view.deployment.pipeline);
                let running = view.deployment.desired == crate::cluster::Desired::Running;
                for s in PipelineState::ALL {
                    let now = if running { PipelineState::Running } else { PipelineState::Stopped };
                    up.add(
                        format!("pipeline=\"{pipeline}\",state=\"{}\"", s.name()),
                        u8::from(now == s),
                    );
                }
                units.add(&pipeline, &view.units);
            }
            Vec::new()
        }
    };
    for view in local {
        let pipeline = escape(&view.record.name);
        for s in PipelineState::ALL {
            up.add(
                format!("pipeline=\"{pipeline}\",state=\"{}\"", s.name()),
                u8::from(view.record.state == s),
            );
        }
        restarts.add(format!("pipeline=\"{pipeline}\""), view.restart.restarts);
        let open = tails_held.remove(&view.record.name).unwrap_or(0);
        tails.add(format!("pipeline=\"{pipeline}\""), open as f64);
        let waiting = lookups_held.remove(&view.record.name).unwrap_or(0);
        lookups.add(format!("pipeline=\"{pipeline}\""), waiting as f64);
        let Some((handle, _)) = view.run else { continue };
        if handle.listening() {
            let live = handle.metrics.view();
            let labels = format!("pipeline=\"{pipeline}\"");
            failed.add(labels.clone(), live.checkpoints.failed as f64);
            if let Some(ms) = live.checkpoints.last_alignment_ms {
                alignment.add(labels.clone(), ms as f64 / 1000.0);
            }
            if let Some(bytes) = live.checkpoints.last_incremental_bytes {
                incremental.add(labels.clone(), bytes as f64);
            }
            if let Some(ms) = live.watermark_lag_ms {
                lag.add(labels, ms as f64);
            }
            tasks.add(&pipeline, &live);
        }
        let summary = RunSummary::from(&handle.metrics);
        let subtasks = summary.stages.iter().flat_map(|(stage, subtasks)| {
            let stage = escape(stage);
            subtasks.iter().enumerate().map(move |(i, c)| (format!("{stage}\",subtask=\"{i}"), *c))
        });
        let operators = std::iter::once(("key".to_string(), summary.key)).chain(subtasks);
        for (operator, counts) in operators {
            let labels = format!("pipeline=\"{pipeline}\",operator=\"{operator}\"");
            records_in.add(labels.clone(), counts.records_in as f64);
            records_out.add(labels.clone(), counts.records_out as f64);
            if counts.late_dropped > 0 {
                late.add(labels, counts.late_dropped as f64);
            }
        }
        sink.add(format!("pipeline=\"{pipeline}\",output=\"main\""), summary.records_out as f64);
        sink.add(
            format!("pipeline=\"{pipeline}\",output=\"side\""),
            summary.side_outputs_written as f64,
        );
        if let Some(w) = handle.metrics.watermark() {
            watermark.add(format!("pipeline=\"{pipeline}\""), w as f64);
        }
        snapshots.add(format!("pipeline=\"{pipeline}\""), summary.snapshots_completed as f64);
        if let Some(last) = &summary.last_snapshot {
            last_duration.add(format!("pipeline=\"{pipeline}\""), last.duration.as_secs_f64());
            last_size.add(format!("pipeline=\"{pipeline}\""), last.size_bytes as f64);
        }
    }
    // Reads of pipelines deleted meanwhile.
    for (name, open) in tails_held {
        tails.add(format!("pipeline=\"{}\"", escape(&name)), open as f64);
    }
    for (name, waiting) in lookups_held {
        lookups.add(format!("pipeline=\"{}\"", escape(&name)), waiting as f64);
    }
    let mut text = String::new();
    let families = [
        up,
        records_in,
        records_out,
        late,
        sink,
        watermark,
        lag,
        snapshots,
        failed,
        last_duration,
        last_size,
        incremental,
        alignment,
        restarts,
        tails,
        lookups,
        functions,
    ];
    for family in families.into_iter().chain(tasks.into_families()).chain(units.into_families()) {
        let _ = writeln!(
            text,
            "# HELP {} {}\n# TYPE {} {}",
            family.name, family.help, family.name, family.kind
        );
        for (labels, value) in family.samples {
            let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
            let _ = writeln!(text, "{}{labels} {value}", family.name);
        }
    }
    text
}

/// The families every task (source, key functions, keyed subtask, sink)
/// reports, labelled by pipeline, operator and subtask.
/// What a family reads of a task.
type TaskValue = fn(&TaskMetrics) -> Option<f64>;

struct TaskFamilies {
    families: Vec<(Family, TaskValue)>,
    split_watermark: Family,
    lag: Family,
}

impl TaskFamilies {
    fn new() -> Self {
        let family = |name, kind, help, value: TaskValue| (Family::new(name, kind, help), value);
        Self {
            families: vec![
                family("weir_task_records_in_per_second", "gauge", "Records a task received per second, over the last second.", |t| Some(t.records_in_per_second)),
                family("weir_task_records_out_per_second", "gauge", "Records a task emitted per second, over the last second.", |t| Some(t.records_out_per_second)),
                family("weir_task_busy_seconds_total", "counter", "Time a task spent working (neither idle nor backpressured).", |t| Some(t.busy_seconds)),
                family("weir_task_idle_seconds_total", "counter", "Time a task spent waiting for input.", |t| Some(t.idle_seconds)),
                family("weir_task_backpressured_seconds_total", "counter", "Time a full channel downstream held a task up.", |t| Some(t.backpressured_seconds)),
                family("weir_task_call_seconds_total", "counter", "Time a task spent in calls into its functions (keyed subtasks) or writing (the sink).", |t| Some(t.call_seconds)),
                family("weir_task_busy_milliseconds_per_second", "gauge", "Milliseconds a second a task worked, over the last second (Flink's busyTimeMsPerSecond).", |t| Some(t.busy_ms_per_second)),
                family("weir_task_backpressured_milliseconds_per_second", "gauge", "Milliseconds a second a task was held up downstream, over the last second (Flink's backPressuredTimeMsPerSecond).", |t| Some(t.backpressured_ms_per_second)),
                family("weir_task_idle_milliseconds_per_second", "gauge", "Milliseconds a second a task waited for input, over the last second.", |t| Some(t.idle_ms_per_second)),
                family("weir_task_batch_size_records", "gauge", "Records per batch a task received, on average over the last second.", |t| Some(t.average_batch_size)),
                family("weir_task_watermark_milliseconds", "gauge", "A task's event time.", |t| t.watermark.map(|w| w as f64)),
                family("weir_task_state_bytes", "gauge", "Estimated size of a keyed subtask's state (RocksDB live data and memtables).", |t| t.state_bytes.map(|b| b as f64)),
                family("weir_task_state_cache_hit_ratio", "gauge", "Share of a keyed subtask's state reads its cache answered, over the last second.", |t| t.cache_hit_ratio),
            ],
            split_watermark: Family::new("weir_source_split_watermark_milliseconds", "gauge", "The watermark of one split of a source (a Kafka partition, a file)."),
            lag: Family::new("weir_source_split_lag_records", "gauge", "Records of a source split not read yet (Kafka consumer lag per partition)."),
        }
    }

    fn add(&mut self, pipeline: &str, view: &MetricsView) {
        for operator in &view.operators {
            let operator_name = escape(&operator.id);
            for (task, split) in
                operator.subtasks.iter().flat_map(|t| t.splits.iter().map(move |s| (t, s)))
            {
                let labels = format!(
                    "pipeline=\"{pipeline}\",operator=\"{operator_name}\",subtask=\"{}\",split=\"{}\"",
                    task.subtask,
                    escape(&split.split)
                );
                if let Some(watermark) = split.watermark {
                    self.split_watermark.add(labels.clone(), watermark as f64);
                }
                if let Some(lag) = split.lag {
                    self.lag.add(labels, lag as f64);
                }
            }
            for task in &operator.subtasks {
                let labels = format!(
                    "pipeline=\"{pipeline}\",operator=\"{operator_name}\",kind=\"{}\",subtask=\"{}\"",
                    operator.kind, task.subtask
                );
                for (family, value) in &mut self.families {
                    if let Some(value) = value(task) {
                        family.add(labels.clone(), value);
                    }
                }
            }
        }
    }

    fn into_families(self) -> impl Iterator<Item = Family> {
        let splits = [self.split_watermark, self.lag];
        self.families.into_iter().map(|(family, _)| family).chain(splits)
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
