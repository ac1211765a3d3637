//! The pipeline spec: what a user writes in `pipeline.yaml`.
//!
//! Parsing rejects unknown fields and names the field at fault
//! (`source.path: missing field`); durations and sizes are parsed then.
//! [`PipelineSpec::validate`] checks what types cannot express across the
//! spec (names, parallelism, side outputs declared, …) and asks each
//! section's owner for the rest: connectors check their own settings
//! ([`crate::connectors::registry`]), checkpoint settings theirs. Relative
//! paths are resolved against the spec file's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::node::NodeSpec;
use super::parts::{
    FunctionSpec, LimitsSpec, OnError, SpecError, TtlSpec, WatermarkSpec, WindowSpec,
};
use crate::checkpoint::CheckpointSettings;
use crate::connectors::config::{resolve, NESTED_FIELD};
pub use crate::connectors::{SinkSpec, SourceSpec};
use crate::specification::restart::{RestartSpec, RestartStrategy};
use crate::state::DEFAULT_MAX_PARALLELISM;

/// A whole pipeline: source → key function → process function → sink.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// The pipeline's name: `[a-z0-9-]{1,63}`; names its state directory.
    pub name: String,
    /// Start from empty state instead of the state a previous run left.
    #[serde(default)]
    pub fresh: bool,
    /// Number of key groups; fixed for the life of the pipeline's state.
    #[serde(default = "default_max_parallelism")]
    pub max_parallelism: u16,
    /// Number of keyed subtasks (threads, each with its own Wasm instance
    /// and RocksDB); at most `max_parallelism`.
    #[serde(default = "default_parallelism")]
    pub parallelism: u16,
    /// Events read from the source and handed to the key function per call.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// How long a source may hold a batch that is not full, waiting for
    /// more input, before handing it on; and, without checkpoints, how long
    /// written output may sit in a sink's buffer. `0s`: hand on whatever
    /// each read finds.
    #[serde(default = "default_batch_linger", with = "humantime_serde")]
    pub batch_linger: Duration,
    /// Bytes of the write-back cache in front of RocksDB, shared out among
    /// the subtasks; 0 turns it off.
    #[serde(default = "default_state_cache_bytes")]
    pub state_cache_bytes: usize,
    /// How event time advances: without it, the watermark only jumps to
    /// the end of time when a bounded source is exhausted.
    #[serde(default)]
    pub watermark: Option<WatermarkSpec>,
    /// Where events come from (a line spec; a graph has `operators`).
    #[serde(default)]
    pub source: Option<SourceSpec>,
    /// The function computing each event's key (a line spec).
    #[serde(default)]
    pub key: Option<FunctionSpec>,
    /// The keyed function processing each key's events with its state
    /// (or use `window` + `aggregate`).
    #[serde(default)]
    pub process: Option<FunctionSpec>,
    /// Host-assigned event-time windows, aggregated by `aggregate`.
    #[serde(default)]
    pub window: Option<WindowSpec>,
    /// The window aggregate function (with `window`).
    #[serde(default)]
    pub aggregate: Option<FunctionSpec>,
    /// The window process function, seeing all of a window's events (with
    /// `window`, instead of `aggregate`).
    #[serde(default)]
    pub window_process: Option<FunctionSpec>,
    /// Where the process function's output goes (a line spec).
    #[serde(default)]
    pub sink: Option<SinkSpec>,
    /// The pipeline as a graph of named operators, instead of the line
    /// fields `source`, `key`, `process`/`window`, `sink` and
    /// `side_outputs` (see [`super::graph`]).
    #[serde(default)]
    pub operators: BTreeMap<String, NodeSpec>,
    /// Time to live per state name, overriding what the function declares:
    /// `state_ttl: { total: { ttl: 10m, update: on-read-and-write } }`.
    #[serde(default)]
    pub state_ttl: BTreeMap<String, TtlSpec>,
    /// Where each named side output goes (`context.emit-to(name, …)`).
    /// Events sent to an undeclared side output are counted and dropped.
    #[serde(default)]
    pub side_outputs: BTreeMap<String, SinkSpec>,
    /// Periodic checkpoints (off without it): state, source positions and
    /// sink commits snapshotted together, for exactly-once recovery.
    #[serde(default)]
    pub checkpoint: Option<CheckpointSettings>,
    /// What each function instance may use:
    /// `limits: { call_timeout: 100ms, memory: 64MiB, fuel: 100000000 }`.
    #[serde(default)]
    pub limits: LimitsSpec,
    /// What happens when a function fails (returns an error, traps or hits
    /// a limit): `fail` (default) stops the pipeline; `{ dead-letter: NAME }`
    /// sends each offending event, with the error, to side output NAME and
    /// goes on.
    #[serde(default)]
    pub on_error: OnError,
    /// How `weir serve` restarts the pipeline when a run fails:
    /// `restart: { strategy: fixed-delay, attempts: 3, delay: 10s }`,
    /// `{ strategy: exponential-backoff, … }` or `{ strategy: none }`
    /// (default: exponential backoff with checkpoints, none without).
    #[serde(default)]
    pub restart: Option<RestartSpec>,
    /// A directory the functions may read, read-only, as `/resources`
    /// (through WASI); nothing else of the host's file system is visible.
    #[serde(default)]
    pub resources: Option<PathBuf>,
    /// Settings for running it on several machines (`weir worker`).
    #[serde(default)]
    pub cluster: Option<crate::specification::cluster::ClusterSettings>,
}

fn default_max_parallelism() -> u16 {
    DEFAULT_MAX_PARALLELISM
}

fn default_parallelism() -> u16 {
    1
}

fn default_batch_size() -> usize {
    4096
}

fn default_batch_linger() -> Duration {
    Duration::from_millis(1)
}

fn default_state_cache_bytes() -> usize {
    64 << 20
}

impl PipelineSpec {
    /// Read, parse and validate the spec at `path`, resolving relative
    /// paths against its directory.
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SpecError::Read { path: path.to_path_buf(), source })?;
        let mut spec = Self::parse(&text)?;
        spec.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        Ok(spec)
    }

    /// Parse and validate spec text (paths stay as written).
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let deserializer = serde_yaml::Deserializer::from_str(text);
        let spec: Self = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let field = e.path().to_string();
            let message = e.into_inner().to_string();
            // A connector's section names the field within it first.
            match message.strip_prefix(NESTED_FIELD).and_then(|m| m.split_once(": ")) {
                Some((inner, message)) => SpecError::field(&format!("{field}.{inner}"), message),
                None => SpecError::field(&field, message),
            }
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// How a failed run is restarted (by `weir serve`), defaults applied.
    pub fn restart_strategy(&self) -> Result<RestartStrategy, SpecError> {
        match &self.restart {
            Some(restart) => restart
                .strategy()
                .map_err(|e| SpecError::field(&format!("restart.{}", e.field), e.message)),
            None => Ok(RestartStrategy::default_for(self.checkpoint.is_some())),
        }
    }

    /// The keyed operator's identity in savepoints: the `uid` of its
    /// function, else `process` or `window`.
    pub fn operator_uid(&self) -> String {
        let function =
            self.process.as_ref().or(self.aggregate.as_ref()).or(self.window_process.as_ref());
        match function.and_then(|f| f.uid.clone()) {
            Some(uid) => uid,
            None if self.process.is_some() => "process".to_string(),
            None => "window".to_string(),
        }
    }

    /// Every function the spec names, with its field (`key`, `process`,
    /// `operators.paid.key`, `operators.paid.inputs.1.key`, …).
    pub fn functions(&self) -> Vec<(String, &FunctionSpec)> {
        let line = [
            ("key", self.key.as_ref()),
            ("process", self.process.as_ref()),
            ("aggregate", self.aggregate.as_ref()),
            ("window_process", self.window_process.as_ref()),
        ];
        let mut all: Vec<(String, &FunctionSpec)> =
            line.into_iter().filter_map(|(field, f)| Some((field.to_string(), f?))).collect();
        for (name, node) in &self.operators {
            for (field, function) in node.functions() {
                all.push((format!("operators.{name}.{field}"), function));
            }
        }
        all
    }

    /// Every function the spec names, to change (resolve, pin).
    pub fn functions_mut(&mut self) -> Vec<(String, &mut FunctionSpec)> {
        let line = [
            ("key", self.key.as_mut()),
            ("process", self.process.as_mut()),
            ("aggregate", self.aggregate.as_mut()),
            ("window_process", self.window_process.as_mut()),
        ];
        let mut all: Vec<(String, &mut FunctionSpec)> =
            line.into_iter().filter_map(|(field, f)| Some((field.to_string(), f?))).collect();
        for (name, node) in &mut self.operators {
            for (field, function) in node.functions_mut() {
                all.push((format!("operators.{name}.{field}"), function));
            }
        }
        all
    }

    /// Make relative file paths relative to `base` (the spec file's directory).
    pub(crate) fn resolve_paths(&mut self, base: &Path) {
        for (_, function) in self.functions_mut() {
            function.wasm.iter_mut().for_each(|path| resolve(path, base));
        }
        self.resources.iter_mut().for_each(|path| resolve(path, base));
        let sources = self.operators.values_mut().filter_map(|n| n.source.as_mut());
        for source in self.source.iter_mut().chain(sources) {
            source.config_mut().resolve_paths(base);
        }
        let sinks = self.operators.values_mut().filter_map(|n| n.sink.as_mut());
        for sink in self.sink.iter_mut().chain(self.side_outputs.values_mut()).chain(sinks) {
            sink.config_mut().resolve_paths(base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ttl::{Ttl, TtlUpdate};
    use crate::window::WindowAssigner;

    const GOOD: &str = "
name: revenue
source: { type: file, path: orders.jsonl, timestamp_field: event_time }
key: { wasm: revenue.wasm }
process: { wasm: revenue.wasm }
sink: { type: stdout }
";

    fn error_of(text: &str) -> String {
        PipelineSpec::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_a_good_spec_with_defaults() {
        let spec = PipelineSpec::parse(GOOD).unwrap();
        assert_eq!(spec.name, "revenue");
        assert!(!spec.fresh);
        assert_eq!(spec.max_parallelism, 128);
        assert_eq!(spec.batch_linger, Duration::from_millis(1));
        assert!(
            matches!(spec.source, Some(SourceSpec::File(ref file)) if file.timestamp_field.as_deref() == Some("event_time"))
        );
        assert!(matches!(spec.sink, Some(SinkSpec::Stdout(_))));
    }

    #[test]
    fn one_checkpoint_in_materialize_every_is_full() {
        let settings = |extra: &str| {
            PipelineSpec::parse(&format!("{GOOD}checkpoint: {{ interval: 1s{extra} }}\n"))
                .map(|s| s.checkpoint.expect("checkpoint"))
        };
        assert_eq!(settings("").unwrap().materialize_every, 10, "default");
        assert_eq!(settings(", materialize_every: 1").unwrap().materialize_every, 1);
        assert!(settings(", materialize_every: 0")
            .unwrap_err()
            .to_string()
            .contains("checkpoint.materialize_every"));
    }

    #[test]
    fn state_ttl_parses_durations_and_update_modes() {
        let spec = PipelineSpec::parse(&format!("{GOOD}state_ttl: {{ a: {{ ttl: 1h 30m }}, b: {{ ttl: 250ms, update: on-read-and-write }} }}\n")).unwrap();
        assert_eq!(
            spec.state_ttl["a"].to_ttl(),
            Some(Ttl { millis: 5_400_000, update: TtlUpdate::OnCreateAndWrite })
        );
        assert_eq!(
            spec.state_ttl["b"].to_ttl(),
            Some(Ttl { millis: 250, update: TtlUpdate::OnReadAndWrite })
        );
    }

    #[test]
    fn windows_are_validated() {
        let windowed =
            GOOD.replace("process: { wasm: revenue.wasm }", "aggregate: { wasm: revenue.wasm }");
        let with = |window: &str| format!("{windowed}window: {window}\n");
        let spec = PipelineSpec::parse(&with(
            "{ type: sliding, size: 1m, slide: 20s, allowed_lateness: 30s }",
        ))
        .unwrap();
        let window = spec.window.unwrap();
        assert_eq!(
            window.assigner().unwrap(),
            WindowAssigner::Sliding { size: 60_000, slide: 20_000, offset: 0 }
        );
        assert_eq!(window.allowed_lateness().unwrap(), 30_000);
        assert!(error_of(&with("{ type: tumbling, size: soon }")).contains("window.size"));
        assert!(error_of(&with("{ type: sliding, size: 1m }")).contains("window.slide"));
        assert!(error_of(&with("{ type: tumbling, size: 1m, late_output: late }"))
            .contains("window.late_output"));
        assert!(error_of(&with("{ type: hopping, size: 1m }")).contains("window.type"));
        assert_eq!(
            PipelineSpec::parse(&with("{ type: session, gap: 30m }"))
                .unwrap()
                .window
                .unwrap()
                .assigner()
                .unwrap(),
            WindowAssigner::Session { gap: 1_800_000 }
        );
        assert!(error_of(&with("{ type: session, size: 1m, gap: 1m }")).contains("window.size"));
        assert!(error_of(&with("{ type: session }")).contains("window.gap"));
        assert!(error_of(&with("{ type: tumbling, size: 1m, gap: 1m }")).contains("window.gap"));
        assert!(error_of(&windowed).contains("window"));
        assert!(error_of(&format!("{GOOD}window: {{ type: tumbling, size: 1m }}\n"))
            .contains("process"));
    }

    #[test]
    fn restart_strategies_default_and_are_named() {
        use crate::specification::restart::RestartStrategy;
        let strategy = |extra: &str| {
            PipelineSpec::parse(&format!("{GOOD}{extra}")).map(|s| s.restart_strategy().unwrap())
        };
        assert_eq!(strategy("").unwrap(), RestartStrategy::None, "no checkpoints: no restarts");
        assert_eq!(
            strategy("checkpoint: { interval: 1s }\n").unwrap(),
            RestartStrategy::default_for(true)
        );
        assert_eq!(
            strategy("restart: { strategy: fixed-delay, attempts: 3, delay: 10s }\n").unwrap(),
            RestartStrategy::FixedDelay { delay: Duration::from_secs(10), attempts: Some(3) }
        );
        assert!(error_of(&format!("{GOOD}restart: {{ strategy: fixed-delay, delay: soon }}\n"))
            .contains("restart.delay"));
        assert!(error_of(&format!("{GOOD}restart: {{ strategy: none, delay: 1s }}\n"))
            .contains("restart.delay"));
        assert!(error_of(&format!("{GOOD}restart: {{ delay: 1s }}\n")).contains("strategy"));
    }

    #[test]
    fn unknown_field_is_named() {
        let err = error_of(
            &GOOD.replace("sink: { type: stdout }", "sink: { type: stdout, colour: red }"),
        );
        assert!(err.contains("sink") && err.contains("colour"), "{err}");
    }

    #[test]
    fn missing_field_is_named() {
        let err = error_of(&GOOD.replace(
            "source: { type: file, path: orders.jsonl, timestamp_field: event_time }",
            "source: { type: file }",
        ));
        assert!(err.contains("source") && err.contains("path"), "{err}");
    }

    #[test]
    fn unknown_source_type_is_named() {
        let err = error_of(&GOOD.replace("type: file,", "type: carrier-pigeon,"));
        assert!(err.contains("source") && err.contains("carrier-pigeon"), "{err}");
    }

    #[test]
    fn wrong_type_is_named() {
        let err = error_of(&format!("{GOOD}max_parallelism: lots\n"));
        assert!(err.contains("max_parallelism"), "{err}");
    }

    #[test]
    fn limits_and_failure_policy_parse_and_are_checked() {
        let spec = PipelineSpec::parse(&format!(
            "{GOOD}limits: {{ call_timeout: 250ms, memory: 128MiB, fuel: 5000 }}\non_error: fail\n"
        ))
        .unwrap();
        let limits = spec.limits.to_limits().unwrap();
        assert_eq!(
            (limits.call_timeout, limits.memory_bytes, limits.fuel),
            (std::time::Duration::from_millis(250), 128 << 20, Some(5000))
        );
        assert_eq!(spec.on_error, OnError::Fail);
        assert_eq!(
            PipelineSpec::parse(&format!("{GOOD}limits: {{ memory: 33554432 }}\n"))
                .unwrap()
                .limits
                .to_limits()
                .unwrap()
                .memory_bytes,
            32 << 20
        );
        let dead = PipelineSpec::parse(&format!("{GOOD}on_error: {{ dead-letter: dead }}\nside_outputs: {{ dead: {{ type: stdout }} }}\n")).unwrap();
        assert_eq!(dead.on_error, OnError::DeadLetter("dead".into()));
        assert!(error_of(&format!("{GOOD}on_error: {{ dead-letter: missing }}\n"))
            .contains("on_error.dead-letter"));
        assert!(error_of(&format!("{GOOD}on_error: retry\n")).contains("not a failure policy"));
        assert!(error_of(&format!("{GOOD}limits: {{ call_timeout: soon }}\n"))
            .contains("limits.call_timeout"));
        assert!(error_of(&format!("{GOOD}limits: {{ call_timeout: 2h }}\n"))
            .contains("between 1ms and 1h"));
        assert!(error_of(&format!("{GOOD}limits: {{ memory: 12 parsecs }}\n"))
            .contains("limits.memory"));
        assert!(error_of(&format!("{GOOD}limits: {{ memory: 512KiB }}\n"))
            .contains("between 1MiB and 4GiB"));
        assert!(error_of(&format!("{GOOD}limits: {{ fuel: 0 }}\n")).contains("limits.fuel"));
        assert!(error_of(&format!("{GOOD}limits: {{ cpu: 1 }}\n")).contains("cpu"));
    }

    #[test]
    fn bad_values_are_named() {
        assert!(error_of(&GOOD.replace("name: revenue", "name: Revenue/../x")).contains("name"));
        assert!(error_of(&format!("{GOOD}max_parallelism: 0\n")).contains("max_parallelism"));
        assert!(error_of(&format!("{GOOD}batch_size: 0\n")).contains("batch_size"));
        assert!(error_of(&format!("{GOOD}batch_linger: 2s\n")).contains("batch_linger"));
        assert!(error_of(&format!("{GOOD}parallelism: 0\n")).contains("parallelism"));
        assert!(error_of(&format!("{GOOD}watermark: {{ max_out_of_orderness: later }}\n"))
            .contains("watermark.max_out_of_orderness"));
        assert!(error_of(&format!(
            "{GOOD}watermark: {{ max_out_of_orderness: 1s, idle_timeout: never }}\n"
        ))
        .contains("watermark.idle_timeout"));
        let both = GOOD.replace("path: orders.jsonl,", "path: orders.jsonl, paths: [a.jsonl],");
        assert!(error_of(&both).contains("source.path"));
        let undeclared = GOOD.replace(
            "timestamp_field: event_time",
            "timestamp_field: event_time, on_bad_timestamp: { side-output: bad }",
        );
        assert!(error_of(&undeclared).contains("source.on_bad_timestamp"));
        assert!(PipelineSpec::parse(&format!(
            "{undeclared}side_outputs: {{ bad: {{ type: stdout }} }}\n"
        ))
        .is_ok());
        assert_eq!(
            PipelineSpec::parse(&format!("{GOOD}watermark: {{ max_out_of_orderness: 5s }}\n"))
                .unwrap()
                .watermark
                .unwrap()
                .delay_ms(),
            Some(5000)
        );
        assert!(error_of(&format!("{GOOD}state_ttl: {{ total: {{ ttl: soon }} }}\n"))
            .contains("state_ttl.total.ttl"));
        assert!(error_of(&format!("{GOOD}state_ttl: {{ total: {{ ttl: 0s }} }}\n"))
            .contains("state_ttl.total.ttl"));
        assert!(error_of(&format!(
            "{GOOD}state_ttl: {{ total: {{ ttl: 1s, update: sometimes }} }}\n"
        ))
        .contains("state_ttl.total.update"));
        assert!(error_of(&format!("{GOOD}max_parallelism: 4\nparallelism: 5\n"))
            .contains("parallelism"));
        assert!(error_of(&format!("{GOOD}side_outputs: {{ Bad_Name: {{ type: stdout }} }}\n"))
            .contains("side_outputs"));
        let generator = GOOD.replace(
            "source: { type: file, path: orders.jsonl, timestamp_field: event_time }",
            "source: { type: generator, count: 5, start_time: yesterday }",
        );
        assert!(error_of(&generator).contains("source.start_time"));
    }

    #[test]
    fn connector_and_checkpoint_fields_are_named() {
        let kafka_sink = |extra: &str| {
            GOOD.replace(
                "sink: { type: stdout }",
                &format!("sink: {{ type: kafka, bootstrap_servers: b, topic: t{extra} }}"),
            )
        };
        assert!(error_of(&kafka_sink(", transaction_timeout: soon"))
            .contains("sink.transaction_timeout"));
        assert!(error_of(&kafka_sink(", delivery: exactly-once"))
            .contains("sink.transactional_id_prefix"));
        assert!(error_of(&kafka_sink(", delivery: exactly-once, transactional_id_prefix: A/B"))
            .contains("sink.transactional_id_prefix"));
        assert!(PipelineSpec::parse(&kafka_sink(
            ", delivery: exactly-once, transactional_id_prefix: ok, transaction_timeout: 20m"
        ))
        .is_ok());
        let side = format!("{GOOD}side_outputs: {{ k: {{ type: kafka, bootstrap_servers: b, topic: t, delivery: exactly-once, transactional_id_prefix: k }} }}\n");
        assert!(error_of(&side).contains("side_outputs.k.delivery"));
        let kafka_source = GOOD.replace(
            "source: { type: file, path: orders.jsonl, timestamp_field: event_time }",
            "source: { type: kafka, bootstrap_servers: b }",
        );
        assert!(error_of(&kafka_source).contains("source.topics"));
        assert!(error_of(&format!("{GOOD}checkpoint: {{ interval: soon }}\n"))
            .contains("checkpoint.interval"));
        assert!(error_of(&format!("{GOOD}checkpoint: {{ interval: 1ms }}\n"))
            .contains("checkpoint.interval"));
        assert!(error_of(&format!("{GOOD}checkpoint: {{ interval: 1s, timeout: 0s }}\n"))
            .contains("checkpoint.timeout"));
    }

    #[test]
    fn relative_paths_resolve_against_the_spec_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipeline.yaml");
        std::fs::write(
            &path,
            format!("{GOOD}side_outputs: {{ late: {{ type: file, path: late.jsonl }} }}\n"),
        )
        .unwrap();
        let spec = PipelineSpec::load(&path).unwrap();
        assert_eq!(spec.key.as_ref().unwrap().wasm, Some(dir.path().join("revenue.wasm")));
        assert_eq!(spec.process.unwrap().wasm, Some(dir.path().join("revenue.wasm")));
        assert!(
            matches!(spec.source, Some(SourceSpec::File(ref file)) if file.path.as_deref() == Some(dir.path().join("orders.jsonl").as_path()))
        );
        assert!(
            matches!(spec.side_outputs["late"], SinkSpec::File(ref file) if file.path == dir.path().join("late.jsonl"))
        );
    }
}
