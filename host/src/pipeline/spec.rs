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

use serde::{Deserialize, Deserializer};

use super::graph::{Graph, NodeSpec, StageKind};
use crate::checkpoint::CheckpointSettings;
use crate::connectors::registry::{resolve, ConfigError, NESTED_FIELD};
use crate::connectors::SinkRole;
pub use crate::connectors::{SinkSpec, SourceSpec};
use crate::names::{is_valid_name, NAME_RULE};
use crate::pipeline::restart::{RestartSpec, RestartStrategy};
use crate::runtime::{FunctionLimits, Language};
use crate::state::ttl::{Ttl, TtlUpdate};
use crate::state::DEFAULT_MAX_PARALLELISM;
use crate::window::WindowAssigner;

/// Why a spec was rejected.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The spec file could not be read.
    #[error("cannot read spec {path}: {source}")]
    Read {
        /// The spec file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The YAML does not match the spec's shape; `field` says where.
    #[error("invalid spec: {field}: {message}")]
    Field {
        /// Dotted path of the offending field (`.` for the whole document).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl SpecError {
    pub(crate) fn field(field: &str, message: impl Into<String>) -> Self {
        Self::Field { field: field.to_string(), message: message.into() }
    }

    /// The same complaint about a field under `section`
    /// (`operators.top3`): `window.size` becomes `operators.top3.window.size`.
    pub(crate) fn under(self, section: &str) -> Self {
        match self {
            Self::Field { field, message } => Self::field(&format!("{section}.{field}"), message),
            other => other,
        }
    }

    /// A connector's complaint about its field, under `section` (`sink`).
    pub(crate) fn connector(section: &str, error: ConfigError) -> Self {
        Self::field(&format!("{section}.{}", error.field), error.message)
    }
}

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
    pub cluster: Option<crate::cluster::ClusterSettings>,
}

/// Resource limits of every function instance of a pipeline.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// CPU time one call (one batch) may use (default `100ms`, `1s` for
    /// Python and JavaScript functions); past it the function is stopped. Time spent waiting (for a core, for the disk)
    /// does not count.
    #[serde(default, with = "humantime_serde")]
    pub call_timeout: Option<Duration>,
    /// Largest linear memory of one instance: `64MiB` (the default;
    /// `256MiB` for Python and JavaScript functions), `1GiB`, or a number of
    /// bytes.
    #[serde(default)]
    pub memory: Option<Size>,
    /// Fuel (about one unit per Wasm instruction) one call may burn; off
    /// by default (counting costs a little on every instruction).
    #[serde(default)]
    pub fuel: Option<u64>,
}

/// A size in bytes, written as a number of bytes or as text like `64MiB`;
/// parsed when the spec is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub usize);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// How a size may be written.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        let bytes = match Written::deserialize(deserializer)? {
            Written::Bytes(bytes) => usize::try_from(bytes).map_err(|_| bytes.to_string()),
            Written::Text(text) => {
                crate::units::parse_bytes(&text).ok_or_else(|| format!("{text:?}"))
            }
        };
        bytes.map(Size).map_err(|text| {
            serde::de::Error::custom(format!("{text} is not a size (like 64MiB, 1GiB)"))
        })
    }
}

impl LimitsSpec {
    /// The limits of compiled functions, or the field at fault.
    pub fn to_limits(&self) -> Result<FunctionLimits, SpecError> {
        self.to_limits_for(Language::Compiled)
    }

    /// The limits of functions written in `language`: what the spec sets,
    /// else that language's defaults; or the field at fault.
    pub fn to_limits_for(&self, language: Language) -> Result<FunctionLimits, SpecError> {
        let mut limits = FunctionLimits::defaults_for(language);
        if let Some(timeout) = self.call_timeout {
            if !(Duration::from_millis(1)..=Duration::from_secs(3600)).contains(&timeout) {
                return Err(SpecError::field("limits.call_timeout", "must be between 1ms and 1h"));
            }
            limits.call_timeout = timeout;
        }
        if let Some(Size(bytes)) = self.memory {
            if !(1 << 20..=4 << 30).contains(&bytes) {
                return Err(SpecError::field("limits.memory", "must be between 1MiB and 4GiB"));
            }
            limits.memory_bytes = bytes;
        }
        if let Some(fuel) = self.fuel {
            if fuel == 0 {
                return Err(SpecError::field("limits.fuel", "must be at least 1"));
            }
            limits.fuel = Some(fuel);
        }
        Ok(limits)
    }
}

/// What happens when a function fails on some input.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "OnErrorText")]
pub enum OnError {
    /// Stop the pipeline with the error; state and output stay as of the
    /// last checkpoint, and a restart replays from there.
    #[default]
    Fail,
    /// Send each offending event (with headers `weir.error` and
    /// `weir.function`) to this side output, undo what the function did for
    /// it, and go on.
    DeadLetter(String),
}

/// How [`OnError`] is written: `fail`, or `{ dead-letter: NAME }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum OnErrorText {
    Word(String),
    DeadLetter {
        #[serde(rename = "dead-letter")]
        dead_letter: String,
    },
}

impl TryFrom<OnErrorText> for OnError {
    type Error = String;

    fn try_from(text: OnErrorText) -> Result<Self, String> {
        match text {
            OnErrorText::Word(word) if word == "fail" => Ok(OnError::Fail),
            OnErrorText::Word(word) => Err(format!("{word:?} is not a failure policy: give `fail` or `{{ dead-letter: <side output> }}`")),
            OnErrorText::DeadLetter { dead_letter } => Ok(OnError::DeadLetter(dead_letter)),
        }
    }
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

/// The kind of window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowKind {
    /// Back-to-back windows of `size`.
    Tumbling,
    /// Windows of `size` every `slide`.
    Sliding,
    /// Per-key sessions closed by a `gap` of inactivity.
    Session,
}

/// Event-time windows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// `tumbling`, `sliding` or `session`.
    #[serde(rename = "type")]
    pub kind: WindowKind,
    /// Window length, e.g. `1m` (tumbling and sliding).
    #[serde(default, with = "humantime_serde")]
    pub size: Option<Duration>,
    /// Inactivity that closes a session, e.g. `30m` (session only).
    #[serde(default, with = "humantime_serde")]
    pub gap: Option<Duration>,
    /// Distance between window starts (sliding only), e.g. `30s`.
    #[serde(default, with = "humantime_serde")]
    pub slide: Option<Duration>,
    /// Shift of the window starts, e.g. `15s` (default 0).
    #[serde(default, with = "humantime_serde")]
    pub offset: Option<Duration>,
    /// How long after a window's end late events still update it and fire
    /// it again (default 0: late events are not accepted).
    #[serde(default, with = "humantime_serde")]
    pub allowed_lateness: Option<Duration>,
    /// Side output for events too late for every window of theirs; without
    /// it they are dropped and counted.
    #[serde(default)]
    pub late_output: Option<String>,
}

/// `duration` in milliseconds, or an error naming `field` if it is too long.
fn millis(field: &str, duration: Duration) -> Result<i64, SpecError> {
    i64::try_from(duration.as_millis())
        .map_err(|_| SpecError::field(field, format!("{duration:?} is too long")))
}

impl WindowSpec {
    /// The window assigner this spec describes.
    pub fn assigner(&self) -> Result<WindowAssigner, SpecError> {
        let positive = |field: &str, duration: Duration| match millis(field, duration)? {
            ms if ms > 0 => Ok(ms),
            _ => Err(SpecError::field(field, "must be at least 1ms")),
        };
        let only = |field: &str, present: bool, kinds: &str| {
            if present {
                Err(SpecError::field(field, format!("only {kinds} windows have it")))
            } else {
                Ok(())
            }
        };
        if self.kind == WindowKind::Session {
            only("window.size", self.size.is_some(), "tumbling and sliding")?;
            only("window.slide", self.slide.is_some(), "sliding")?;
            only("window.offset", self.offset.is_some(), "tumbling and sliding")?;
            let gap = self
                .gap
                .ok_or_else(|| SpecError::field("window.gap", "session windows need a gap"))?;
            return Ok(WindowAssigner::Session { gap: positive("window.gap", gap)? });
        }
        only("window.gap", self.gap.is_some(), "session")?;
        let size = positive(
            "window.size",
            self.size.ok_or_else(|| {
                SpecError::field("window.size", "tumbling and sliding windows need a size")
            })?,
        )?;
        let offset = self.offset.map_or(Ok(0), |o| millis("window.offset", o))?;
        match (self.kind, self.slide) {
            (WindowKind::Sliding, Some(slide)) => Ok(WindowAssigner::Sliding {
                size,
                slide: positive("window.slide", slide)?,
                offset,
            }),
            (WindowKind::Sliding, None) => {
                Err(SpecError::field("window.slide", "sliding windows need a slide"))
            }
            (_, Some(_)) => {
                Err(SpecError::field("window.slide", "only sliding windows have a slide"))
            }
            (_, None) => Ok(WindowAssigner::Tumbling { size, offset }),
        }
    }

    /// The allowed lateness in milliseconds.
    pub fn allowed_lateness(&self) -> Result<i64, SpecError> {
        self.allowed_lateness.map_or(Ok(0), |l| millis("window.allowed_lateness", l))
    }
}

/// Watermark generation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkSpec {
    /// How late (in event time) an event may be behind the newest one and
    /// still be on time, e.g. `5s`: the watermark is the newest timestamp
    /// minus this, minus 1 ms.
    #[serde(with = "humantime_serde")]
    pub max_out_of_orderness: Duration,
    /// A split that produces nothing for this long (processing time, e.g.
    /// `30s`) stops holding the watermark back until it produces again.
    #[serde(default, with = "humantime_serde")]
    pub idle_timeout: Option<Duration>,
}

impl WatermarkSpec {
    /// The out-of-orderness in milliseconds (`None` if too long).
    pub fn delay_ms(&self) -> Option<i64> {
        i64::try_from(self.max_out_of_orderness.as_millis()).ok()
    }
}

/// A time to live for one state.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtlSpec {
    /// How long an untouched value lives, e.g. `30s`, `10m`, `1h 30m`.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Which accesses renew it: `on-create-and-write` (default) or
    /// `on-read-and-write`.
    #[serde(default = "default_ttl_update")]
    pub update: TtlUpdate,
}

fn default_ttl_update() -> TtlUpdate {
    TtlUpdate::OnCreateAndWrite
}

impl TtlSpec {
    /// The TTL, if `ttl` is at least 1ms.
    pub fn to_ttl(&self) -> Option<Ttl> {
        let millis = u64::try_from(self.ttl.as_millis()).ok().filter(|m| *m > 0)?;
        Some(Ttl { millis, update: self.update })
    }
}

/// A reference to a function: a `.wasm` file, or a function uploaded to
/// the host's function store (`weir function upload`, `PUT /v1/functions/…`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionSpec {
    /// Path of a `.wasm` file (a component, or a core module carrying a
    /// component type).
    #[serde(default)]
    pub wasm: Option<PathBuf>,
    /// Or: the name of a stored function.
    #[serde(default)]
    pub function: Option<String>,
    /// With `function`: which version (default: the newest; the HTTP API
    /// pins the newest at deploy time).
    #[serde(default)]
    pub version: Option<u32>,
    /// Or: a function built into the host (the native baselines of
    /// `weir bench`: `bench-sum`, `bench-dedup`, `bench-filter`).
    #[serde(default)]
    pub native: Option<String>,
    /// Stable identity of the operator running this function, under which
    /// savepoints keep its state (default: `process` or `window`). Keep it
    /// when replacing the function by a new version.
    #[serde(default)]
    pub uid: Option<String>,
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

    /// The graph the spec describes (a line spec is the simplest one).
    pub(crate) fn graph(&self) -> Result<Graph, SpecError> {
        Graph::of(self)
    }

    /// Check what the types cannot.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !is_valid_name(&self.name) {
            return Err(SpecError::field("name", format!("{:?} must be {NAME_RULE}", self.name)));
        }
        for (field, function) in self.functions() {
            match (&function.wasm, &function.function, &function.native) {
                (_, None, _) if function.version.is_some() => return Err(SpecError::field(&format!("{field}.version"), "a version goes with `function`")),
                (Some(_), None, None) | (None, None, Some(_)) => {}
                (None, Some(name), None) if !is_valid_name(name) => return Err(SpecError::field(&format!("{field}.function"), format!("{name:?} is not a function name ({NAME_RULE})"))),
                (None, Some(_), None) => {}
                _ => return Err(SpecError::field(&field, "give one of `wasm` (a file), `function` (a stored function's name) or `native` (a built-in)")),
            }
        }
        if let Some((name, spec)) = self.state_ttl.iter().find(|(_, spec)| spec.to_ttl().is_none())
        {
            return Err(SpecError::field(
                &format!("state_ttl.{name}.ttl"),
                format!("{} is less than 1ms", humantime::format_duration(spec.ttl)),
            ));
        }
        if self.operators.is_empty() {
            self.validate_line()?;
        } else {
            let line = [
                ("source", self.source.is_some()),
                ("key", self.key.is_some()),
                ("process", self.process.is_some()),
                ("window", self.window.is_some()),
                ("aggregate", self.aggregate.is_some()),
                ("window_process", self.window_process.is_some()),
                ("sink", self.sink.is_some()),
                ("side_outputs", !self.side_outputs.is_empty()),
            ];
            if let Some((field, _)) = line.iter().find(|(_, present)| *present) {
                return Err(SpecError::field(field, "a spec with `operators:` says it there (a node with `source:`, `sink:`, `process:`, …)"));
            }
            let graph = self.graph()?;
            if let (OnError::DeadLetter(_), Some(stage)) = (
                &self.on_error,
                graph.stages.iter().find(|s| !matches!(s.kind, StageKind::Process(_))),
            ) {
                return Err(SpecError::field(
                    "on_error",
                    format!(
                        "dead-letter works with process functions; {:?} is not one",
                        stage.name
                    ),
                ));
            }
            let exactly_once = graph
                .sinks
                .iter()
                .filter(|s| crate::connectors::kafka::exactly_once_sink(&s.spec).is_some())
                .count();
            if exactly_once > 1 {
                return Err(SpecError::field(
                    "operators",
                    "at most one sink can be an exactly-once Kafka sink",
                ));
            }
        }
        if let Some(watermark) = self.watermark.as_ref().filter(|w| w.delay_ms().is_none()) {
            return Err(SpecError::field(
                "watermark.max_out_of_orderness",
                format!("{:?} is too long", watermark.max_out_of_orderness),
            ));
        }
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint
                .validate()
                .map_err(|e| SpecError::field(&format!("checkpoint.{}", e.field), e.message))?;
        }
        self.limits.to_limits()?;
        self.restart_strategy()?;
        if !(1..=32768).contains(&self.max_parallelism) {
            return Err(SpecError::field("max_parallelism", "must be between 1 and 32768"));
        }
        if self.parallelism == 0 || self.parallelism > self.max_parallelism {
            return Err(SpecError::field(
                "parallelism",
                format!("must be between 1 and max_parallelism ({})", self.max_parallelism),
            ));
        }
        if !(1..=1_000_000).contains(&self.batch_size) {
            return Err(SpecError::field("batch_size", "must be between 1 and 1000000"));
        }
        if self.batch_linger > Duration::from_secs(1) {
            return Err(SpecError::field("batch_linger", "must be at most 1s"));
        }
        Ok(())
    }

    /// The checks of a line spec (source → key → keyed function → sink).
    fn validate_line(&self) -> Result<(), SpecError> {
        let missing = |field: &str| {
            SpecError::field(field, "missing field (a line spec needs source, key, process or window, and sink; a graph gives `operators:`)")
        };
        let (Some(source), Some(_), Some(sink)) = (&self.source, &self.key, &self.sink) else {
            let field = [("source", self.source.is_none()), ("key", self.key.is_none())]
                .into_iter()
                .find(|(_, absent)| *absent)
                .map_or("sink", |(field, _)| field);
            return Err(missing(field));
        };
        let window_function = match (&self.aggregate, &self.window_process) {
            (Some(_), Some(_)) => {
                return Err(SpecError::field(
                    "window_process",
                    "give either `aggregate` or `window_process`, not both",
                ))
            }
            (aggregate, process) => aggregate.as_ref().or(process.as_ref()),
        };
        match (&self.process, &self.window, window_function) {
            (Some(_), None, None) => {}
            (None, Some(window), Some(_)) => {
                window.assigner()?;
                window.allowed_lateness()?;
                if let Some(name) =
                    window.late_output.as_ref().filter(|n| !self.side_outputs.contains_key(*n))
                {
                    return Err(SpecError::field(
                        "window.late_output",
                        format!("side output {name:?} is not declared in side_outputs"),
                    ));
                }
            }
            (None, None, None) => {
                return Err(SpecError::field(
                    "process",
                    "give a process function, or a window and an aggregate function",
                ))
            }
            (Some(_), _, _) => return Err(SpecError::field(
                "process",
                "a pipeline has either a process function or a window with an aggregate, not both",
            )),
            (None, None, Some(_)) => {
                return Err(SpecError::field("window", "an aggregate function needs a window"))
            }
            (None, Some(_), None) => {
                return Err(SpecError::field(
                    "aggregate",
                    "a window needs an aggregate (or window_process) function",
                ))
            }
        }
        let source = source.config();
        source.validate().map_err(|e| SpecError::connector("source", e))?;
        for (field, name) in source.side_outputs() {
            if !self.side_outputs.contains_key(name) {
                return Err(SpecError::field(
                    &format!("source.{field}"),
                    format!("side output {name:?} is not declared in side_outputs"),
                ));
            }
        }
        sink.config().validate(SinkRole::Main).map_err(|e| SpecError::connector("sink", e))?;
        for (name, sink) in &self.side_outputs {
            sink.config()
                .validate(SinkRole::SideOutput)
                .map_err(|e| SpecError::connector(&format!("side_outputs.{name}"), e))?;
        }
        if let Some(bad) = self.side_outputs.keys().find(|name| !is_valid_name(name)) {
            return Err(SpecError::field("side_outputs", format!("{bad:?} must be {NAME_RULE}")));
        }
        if let OnError::DeadLetter(name) = &self.on_error {
            if !self.side_outputs.contains_key(name) {
                return Err(SpecError::field(
                    "on_error.dead-letter",
                    format!("side output {name:?} is not declared in side_outputs"),
                ));
            }
            if self.process.is_none() {
                return Err(SpecError::field(
                    "on_error",
                    "dead-letter works with a process function; window pipelines use `fail`",
                ));
            }
        }
        if !is_valid_name(&self.operator_uid()) {
            return Err(SpecError::field(
                "uid",
                format!("{:?} must be {NAME_RULE}", self.operator_uid()),
            ));
        }
        Ok(())
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
        use crate::pipeline::restart::RestartStrategy;
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
