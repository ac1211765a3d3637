//! The parts of a spec that nodes and the line form share: functions and
//! their limits, windows, watermarks, state TTLs, what happens on a
//! function's error — and [`SpecError`], why a spec was rejected.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::connectors::config::ConfigError;
use crate::runtime::{FunctionLimits, Language};
use crate::state::ttl::{Ttl, TtlUpdate};
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
