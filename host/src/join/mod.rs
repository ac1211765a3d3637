//! Host-provided joins of two keyed inputs: the interval join and the
//! window join, each an operator a keyed subtask drives like the window
//! operator. Events come with their key (the key function's output) and
//! the side they arrived on: 0 = the left (first) input, 1 = the right
//! (second). Both sides' events are buffered in the subtask's keyed state,
//! under the usual per-key-group layout, so checkpoints, savepoints and
//! rescaling carry them unchanged. It never calls Wasm.
//!
//! # Output
//!
//! Each matching pair of a left event `l` and a right event `r` of the same
//! key gives one event whose value is the JSON object
//! `{"left":<l's value>,"right":<r's value>}`. A value that is a UTF-8 JSON
//! document is embedded verbatim (surrounding whitespace dropped); any
//! other value is embedded as a JSON string of its text (invalid UTF-8
//! replaced by U+FFFD). The output has no key and no headers. Event time
//! is the watermark `W` of the subtask (the minimum over both inputs): an
//! event at `t ≤ W` is behind it.
//!
//! # Interval join (`lower ≤ upper`, ms, either may be negative)
//!
//! `l` at `t` joins every `r` of its key at `t' ∈ [t + lower, t + upper]`
//! (bounds inclusive); the output's timestamp is `max(t, t')`. A pair is
//! emitted when its second event arrives; one arriving event's pairs come
//! in the order of the other side's timestamps, events of one timestamp in
//! arrival order.
//!
//! A left event is late when `t + upper ≤ W`, a right one when
//! `t' − lower ≤ W` (its every partner time is behind the watermark). Late
//! events join nothing: they go to the late side output if one is named,
//! else they are dropped and counted. Every other event is kept until the
//! watermark reaches its time plus `upper − lower` (no event accepted
//! after that can match it), so the output is exactly the pairs of
//! accepted events, whatever the order of their arrival. (Flink instead
//! calls an event late when `t ≤ W` and keeps it until `t + upper`, left,
//! or `t' − lower`, right; Weir accepts more events and misses none of
//! their pairs.) After the last watermark (`i64::MAX`) nothing remains.
//!
//! # Window join (tumbling, sliding, session windows)
//!
//! Each event is assigned to windows as by a window stage; sessions merge
//! per key over the events of both sides when they overlap or touch, as a
//! window stage's (and Flink's) do (`crate::window::session`). When the watermark reaches a
//! window's last millisecond (`end − 1`), the window emits the cross
//! product of its left and right events of that key — left-major: for
//! each left event in arrival order, each right event in arrival order —
//! with timestamp `end − 1`, and its state is dropped. A window with
//! events on one side only emits nothing. Windows due at one watermark
//! fire in order of their end, then of key bytes. When sessions merge,
//! each side's events are those of the merged sessions in order of their
//! starts, then the batch's new ones (deterministic, not strictly arrival
//! order). An event all of whose windows have fired is late (side output,
//! or dropped and counted); there is no allowed lateness.
//!
//! # State (all values with the never-expires TTL header)
//!
//! * interval: `StateKey(group, "weir.join.left" | "weir.join.right", Map,
//!   key, "")` ++ timestamp (8 bytes, order-preserving) → records of the
//!   values at that timestamp, in arrival order; cleanup timers
//!   `StateKey(group, "weir.join.cleanup", Timer, key, [0][time BE])` at
//!   `t + upper − lower`;
//! * window: `StateKey(group, "weir.join.left" | "weir.join.right", Value,
//!   key, [start BE][end BE])` → records; timers `"weir.join.fire"` at
//!   `end − 1`; sessions `StateKey(group, "weir.join.sessions", Value, key,
//!   "")` → `([start BE][end BE])*`.
//!
//! Records are `[len u32 BE][value embedded as JSON]`.

mod encoding;
mod interval;
mod window;

pub use encoding::embed_json;

use crate::runtime::bindings::weir::function::types::Window;
use crate::runtime::packing::KeyList;
use crate::state::{KeyedStateBackend, StateError};
use crate::time::TimerService;
use crate::window::WindowAssigner;
use crate::Event;

/// State name of buffered left events.
const LEFT: &str = "weir.join.left";
/// State name of buffered right events.
const RIGHT: &str = "weir.join.right";
/// Timers of the interval join: when a key's buffers may shrink.
const CLEANUP_TIMERS: &str = "weir.join.cleanup";
/// Timers of the window join: when a key's window fires.
const FIRE_TIMERS: &str = "weir.join.fire";
/// Open sessions of a key (session window join).
const SESSIONS: &str = "weir.join.sessions";

/// Why a join failed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The state backend failed.
    #[error("join state: {0}")]
    State(#[from] StateError),
    /// The join is configured in a way it cannot run.
    #[error("join: {0}")]
    Config(String),
    /// Events came on an input a join does not have.
    #[error("join: input {0} does not exist (a join has inputs 0 and 1)")]
    Side(usize),
}

/// Which join, and its bounds or windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// A left event at `t` joins right events at `[t + lower, t + upper]`.
    Interval {
        /// Lower bound (ms, inclusive, may be negative).
        lower: i64,
        /// Upper bound (ms, inclusive, at least `lower`).
        upper: i64,
    },
    /// Events of both sides in the same window join.
    Window {
        /// How events are assigned to windows.
        assigner: WindowAssigner,
    },
}

/// How a join behaves (from the pipeline spec).
#[derive(Debug, Clone)]
pub struct JoinConfig {
    /// Interval or window join.
    pub kind: JoinKind,
    /// Where late events go, if anywhere.
    pub late_output: Option<String>,
    /// Number of key groups.
    pub max_parallelism: u16,
}

/// The join of one keyed subtask.
pub struct JoinOperator {
    kind: JoinKind,
    late_output: Option<String>,
    max_parallelism: u16,
    backend: Box<dyn KeyedStateBackend>,
    /// Cleanup timers (interval) or firing timers (window).
    timers: TimerService,
    watermark: i64,
    /// Joined events, in order.
    pub outputs: Vec<Event>,
    /// Late events bound for the late side output.
    pub side_outputs: Vec<(String, Event)>,
    /// Late events dropped (no late side output named).
    pub dropped_late: u64,
    /// Reused: an event's embedded value; a storage key; a stored value.
    record: Vec<u8>,
    key_buf: Vec<u8>,
    read_buf: Vec<u8>,
    /// Reused for an event's windows.
    windows: Vec<Window>,
    /// Interval join: the buffered timestamps of each (key, side), by the
    /// side's state prefix — what the state holds, read once per prefix
    /// (and kept while it empties, up to a bound), so matching and cleanup
    /// read single entries instead of scanning the backend per event.
    buffered: std::collections::HashMap<Vec<u8>, std::collections::BTreeSet<i64>>,
}

impl JoinOperator {
    /// A join over `backend`, restoring its timers from it.
    pub fn new(
        config: JoinConfig,
        mut backend: Box<dyn KeyedStateBackend>,
    ) -> Result<Self, JoinError> {
        if config.max_parallelism == 0 {
            return Err(JoinError::Config("max_parallelism must be at least 1".into()));
        }
        let timers = match config.kind {
            JoinKind::Interval { lower, upper } => {
                if lower > upper {
                    return Err(JoinError::Config(format!(
                        "the lower bound ({lower} ms) is above the upper bound ({upper} ms): \
                         give lower ≤ upper"
                    )));
                }
                CLEANUP_TIMERS
            }
            JoinKind::Window { assigner } => {
                let positive = match assigner {
                    WindowAssigner::Tumbling { size, .. } => size > 0,
                    WindowAssigner::Sliding { size, slide, .. } => size > 0 && slide > 0,
                    WindowAssigner::Session { gap } => gap > 0,
                };
                if !positive {
                    return Err(JoinError::Config(format!(
                        "window sizes, slides and gaps must be positive, not {assigner:?}"
                    )));
                }
                FIRE_TIMERS
            }
        };
        let timers = TimerService::load(backend.as_mut(), config.max_parallelism, timers)?;
        Ok(Self {
            kind: config.kind,
            late_output: config.late_output,
            max_parallelism: config.max_parallelism,
            backend,
            timers,
            watermark: i64::MIN,
            outputs: Vec::new(),
            side_outputs: Vec::new(),
            dropped_late: 0,
            record: Vec::new(),
            key_buf: Vec::new(),
            read_buf: Vec::new(),
            windows: Vec::new(),
            buffered: std::collections::HashMap::new(),
        })
    }

    /// Join a batch of events of input `side` (0 = left, 1 = right);
    /// `keys[i]` is event `i`'s key. Events are taken in order.
    pub fn process(
        &mut self,
        side: usize,
        keys: &KeyList,
        events: Vec<Event>,
    ) -> Result<(), JoinError> {
        let left = match side {
            0 => true,
            1 => false,
            _ => return Err(JoinError::Side(side)),
        };
        match self.kind {
            JoinKind::Interval { lower, upper } => {
                self.process_interval(left, lower, upper, keys, events)
            }
            JoinKind::Window { assigner } if assigner.is_merging() => {
                self.process_sessions(left, assigner, keys, events)
            }
            JoinKind::Window { assigner } => self.process_windows(left, assigner, keys, events),
        }
    }

    /// Event time has reached `watermark`: fire due windows (window join)
    /// or forget events that can match no more (interval join).
    pub fn on_watermark(&mut self, watermark: i64) -> Result<(), JoinError> {
        self.watermark = self.watermark.max(watermark);
        match self.kind {
            JoinKind::Interval { lower, upper } => self.clean_interval(upper.saturating_sub(lower)),
            JoinKind::Window { assigner } => self.fire_windows(assigner),
        }
    }

    /// The current watermark (`i64::MIN` before the first).
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// The state backend, to flush or snapshot it.
    pub fn backend_mut(&mut self) -> &mut (dyn KeyedStateBackend + 'static) {
        self.backend.as_mut()
    }

    /// A late event: to the late output if there is one, else counted.
    fn set_aside_late(&mut self, event: Event) {
        match &self.late_output {
            Some(name) => self.side_outputs.push((name.clone(), event)),
            None => self.dropped_late += 1,
        }
    }
}

/// Whether `side` is left, as a state name.
fn side_name(left: bool) -> &'static str {
    if left {
        LEFT
    } else {
        RIGHT
    }
}

#[cfg(test)]
mod tests;
