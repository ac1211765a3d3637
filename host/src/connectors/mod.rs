//! Connectors: where a pipeline's events come from and where its output
//! goes. Each connector is one module owning its settings (a serde config
//! type embedded in the spec), its checks and its factory; the
//! [`registry`] ties each to its `type:` name. The pipeline only sees
//! [`open_source`], [`open_sink`] and the [`Source`] and [`Sink`] traits.
//!
//! Adding a connector: a module here (config type deriving `Deserialize`,
//! implementing [`SourceConfig`] or [`SinkConfig`]; declared below) and
//! one line in [`registry`]. A connector passing client settings through
//! takes them as a `properties:` map, whose credentials [`secrets`] names
//! (never shown by the API).

pub mod config;
pub mod discard;
pub mod file;
pub mod generator;
pub mod kafka;
mod record_format;
pub mod registry;
pub mod secrets;
mod splits;
pub mod stdout;
mod timestamp;
pub mod transactional;

pub use config::{Access, ConfigError, SinkConfig, SinkMode, SinkRole, SourceConfig};
pub use discard::DiscardSink;
pub use file::{FileSink, FileSource};
pub use generator::{Encoding, GeneratorSource};
pub use registry::{open_sink, open_source, SinkSpec, SourceSpec};
pub use secrets::{is_secret_property, REDACTED};
pub use splits::SplitSource;
pub use stdout::StdoutSink;
pub use timestamp::BadTimestamps;
pub use transactional::{CommitMarker, NotExactlyOnce, TransactionalSink};

use crate::runtime::packed::PackedEvents;
use crate::Event;

/// Why a connector failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    /// Reading or writing failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A Kafka client call failed.
    #[error("kafka: {what}: {message}")]
    Kafka {
        /// What was being done.
        what: String,
        /// librdkafka's error.
        message: String,
    },
    /// A connector's settings cannot work.
    #[error("{what}: {message}")]
    Config {
        /// The setting.
        what: String,
        /// Why.
        message: String,
    },
    /// An input record is malformed; `location` says where (`file:line`).
    #[error("{location}: {message}")]
    BadRecord {
        /// Where the record is.
        location: String,
        /// What is wrong with it.
        message: String,
    },
    /// A checkpointed source position or sink state does not fit this
    /// connector (wrong shape, beyond the end of a file, files changed
    /// behind Weir's back).
    #[error("{what}: cannot restore: {message}")]
    Restore {
        /// The connector being restored (with its file, if any).
        what: String,
        /// Why the position or state does not fit.
        message: String,
    },
    /// A connector was driven out of order (for example, a write to an
    /// epoch whose checkpoint was already pre-committed).
    #[error("{what}: {message}")]
    OutOfOrder {
        /// The connector.
        what: String,
        /// What came out of order.
        message: String,
    },
}

/// What one [`Source::next_batch`] call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Polled {
    /// The split (file, partition) the batch's events came from.
    pub split: usize,
    /// That split will produce nothing more.
    pub split_finished: bool,
    /// The source as a whole has more to give.
    pub more: bool,
}

impl Polled {
    /// The result of a source with one split.
    pub fn single(more: bool) -> Self {
        Self { split: 0, split_finished: !more, more }
    }
}

/// A source of events, read in batches; each batch comes from one split.
pub trait Source: Send {
    /// Append up to `max` events of one split to `out`.
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError>;

    /// [`Self::next_batch`] into packed buffers, what the source task
    /// reads into: a source that makes its records from bytes it holds
    /// copies them in without an [`Event`] (an allocation) each. Default:
    /// `next_batch`, then packed.
    fn next_packed(
        &mut self,
        max: usize,
        out: &mut PackedEvents,
    ) -> Result<Polled, ConnectorError> {
        let mut events = Vec::new();
        let polled = self.next_batch(max, &mut events)?;
        out.push_all(&events);
        Ok(polled)
    }

    /// Number of splits (each gets its own watermark).
    fn splits(&self) -> usize {
        1
    }

    /// A name for each split, for metrics (default: its number).
    fn split_names(&self) -> Vec<String> {
        (0..self.splits()).map(|i| i.to_string()).collect()
    }

    /// Records each split has that the source has not read yet (a Kafka
    /// partition's consumer lag), where known; empty when not.
    fn lag(&self) -> Vec<Option<i64>> {
        Vec::new()
    }

    /// Events set aside since the last call (for example for a bad
    /// timestamp), with the side output they go to.
    fn take_rejected(&mut self) -> Vec<(String, Event)> {
        Vec::new()
    }

    /// Events dropped so far (for example for a bad timestamp).
    fn dropped(&self) -> u64 {
        0
    }

    /// How far a bounded source has got, as `(done, total)` in a unit of
    /// its choosing; `None` for an unbounded source.
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }

    /// Where the source stands: enough to resume right after the last event
    /// `next_batch` returned (JSON, source-specific; stored in checkpoints).
    fn position(&self) -> serde_json::Value;

    /// Resume from a `position()` taken from a source with the same settings.
    /// A position that does not fit (wrong shape, beyond the end of a file) is a
    /// `ConnectorError` naming the source, never a panic.
    fn seek(&mut self, position: &serde_json::Value) -> Result<(), ConnectorError>;

    /// Resume from the positions of several readers that split this
    /// source's input between them (a snapshot taken with another reader
    /// count): each reader takes what concerns its part. Default: a source
    /// that is never split takes exactly one position.
    fn seek_merged(&mut self, positions: &[serde_json::Value]) -> Result<(), ConnectorError> {
        match positions {
            [position] => self.seek(position),
            _ => Err(ConnectorError::Restore {
                what: "source".into(),
                message: format!(
                    "the snapshot holds {} readers' positions, and this source is read by one",
                    positions.len()
                ),
            }),
        }
    }

    /// Barrier `position` was just recorded for a checkpoint: a source may
    /// publish it (Kafka commits it as group offsets, for lag monitoring
    /// only; restores always use the checkpoint's positions).
    fn on_barrier(&mut self, position: &serde_json::Value) {
        let _ = position;
    }

    /// Retry transient failures of an external system (a broker outage)
    /// for up to `budget` before failing (the pipeline gives its checkpoint
    /// timeout). Default: nothing to retry.
    fn set_retry_budget(&mut self, budget: std::time::Duration) {
        let _ = budget;
    }

    /// How long the next `next_batch` may wait for input when none is at
    /// hand: `Some(wait)` while the source task holds a batch it must hand
    /// on by then, `None` for the source's own wait. Default: a source
    /// that never waits long ignores it.
    fn set_max_wait(&mut self, wait: Option<std::time::Duration>) {
        let _ = wait;
    }

    /// How long the reads since the last call waited for input (a paced
    /// source's sleep until its next events are due, a fetch waiting for
    /// a record), for the source task's idle time: the reads that returned
    /// events count as busy except for this. Measured only around the
    /// waits, never per event. Default: a source that never waits.
    fn take_waited(&mut self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// Whether the source reports event time itself ([`Source::take_watermarks`])
    /// instead of the host deriving it from event timestamps (a cluster
    /// task reading an exchange topic). Default: no.
    fn reports_watermarks(&self) -> bool {
        false
    }

    /// The watermarks reported since the last call, in order, each for
    /// `(split, watermark)` (`None`: that split is idle). The events
    /// `next_batch` returned before a report come before it.
    fn take_watermarks(&mut self, out: &mut Vec<(usize, Option<i64>)>) {
        let _ = out;
    }

    /// Whether every producer of what it reads has ended (a cluster task
    /// whose exchange producers were drained): nothing more will come.
    /// Default: never.
    fn inputs_ended(&self) -> bool {
        false
    }
}

/// Decode a position or state stored by `what`, or say why it does not fit.
fn decode<T: serde::de::DeserializeOwned>(
    what: impl FnOnce() -> String,
    value: &serde_json::Value,
) -> Result<T, ConnectorError> {
    T::deserialize(value).map_err(|e| ConnectorError::Restore {
        what: what(),
        message: format!("malformed {value}: {e}"),
    })
}

/// Encode a position or state (plain serde structs always encode).
fn encode(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// Whether the run a connector serves was cancelled: asked by calls that
/// could otherwise wait long on an external system.
pub type Cancelled = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// A destination for events, written in checkpoint epochs: sinks that can
/// pre-commit and commit give exactly-once output; the others are
/// at-least-once (after a restore they see replayed events again).
pub trait Sink: Send {
    /// Write `events` in order as part of checkpoint epoch `epoch` (the id of the
    /// checkpoint that will cover them; runs without checkpoints always pass 0).
    fn write(&mut self, epoch: u64, events: &PackedEvents) -> Result<(), ConnectorError>;

    /// Make everything written so far durable / visible (end of a run).
    fn flush(&mut self) -> Result<(), ConnectorError>;

    /// Without checkpoints: hand what `write` buffered on to its readers,
    /// without `flush`'s durability (the sink task calls it when written
    /// output has waited the pipeline's `batch_linger`). Default: nothing
    /// buffered (a Kafka producer sends on its own `linger.ms`).
    fn release(&mut self) -> Result<(), ConnectorError> {
        Ok(())
    }

    /// One input has written all it has of `epoch`; what it writes next
    /// belongs to a later epoch. A sink writing epochs through separate
    /// channels (Kafka's two transactional producers) delivers what it has
    /// of `epoch` first, so that input's records — each key's — stay in
    /// order in the output. Default: nothing to do.
    fn end_of_epoch(&mut self, epoch: u64) -> Result<(), ConnectorError> {
        let _ = epoch;
        Ok(())
    }

    /// Event time of epoch `epoch`'s output, given just before its
    /// pre-commit: the least watermark its inputs had sent before their
    /// barrier `epoch` (`None`: every input idle). A sink that passes event
    /// time on (a cluster exchange topic) writes it within the epoch.
    /// Default: nothing to do.
    fn watermark(&mut self, epoch: u64, watermark: Option<i64>) -> Result<(), ConnectorError> {
        let _ = (epoch, watermark);
        Ok(())
    }

    /// The run stops drained after barrier `epoch`: a sink whose readers
    /// wait for its end (a cluster exchange topic, a unit's drained
    /// record) writes it within the epoch. Default: nothing to do.
    fn drain(&mut self, epoch: u64) -> Result<(), ConnectorError> {
        let _ = epoch;
        Ok(())
    }

    /// Checkpoint `checkpoint` has reached the sink: everything of epochs ≤ checkpoint
    /// has been written. Make it durable but not yet visible, and return the state
    /// that `recover` needs (JSON; Null for sinks without state). Default: flush, Null.
    fn pre_commit(&mut self, checkpoint: u64) -> Result<serde_json::Value, ConnectorError> {
        let _ = checkpoint;
        self.flush()?;
        Ok(serde_json::Value::Null)
    }

    /// Whether what `pre_commit(checkpoint)` covers is durable yet. A sink
    /// whose pre-commit only starts delivering (at-least-once Kafka) says
    /// `false` until it is, and the sink task acknowledges the checkpoint
    /// only then, writing later epochs meanwhile; `flush` makes it durable
    /// at once. Default: `true` (the pre-commit made it durable).
    fn is_durable(&mut self, checkpoint: u64) -> Result<bool, ConnectorError> {
        let _ = checkpoint;
        Ok(true)
    }

    /// With checkpoints on, whether readers see what `write` wrote as soon
    /// as it is delivered rather than at the commit (at-least-once Kafka):
    /// what latency is measured to. Default: `false`, visible at the commit.
    fn visible_when_written(&self) -> bool {
        false
    }

    /// Checkpoint `checkpoint` completed: make epochs ≤ checkpoint visible. Default: Ok.
    fn commit(&mut self, checkpoint: u64) -> Result<(), ConnectorError> {
        let _ = checkpoint;
        Ok(())
    }

    /// Retry transient failures of an external system (a broker outage)
    /// for up to `budget` before failing (the pipeline gives its checkpoint
    /// timeout). Default: nothing to retry.
    fn set_retry_budget(&mut self, budget: std::time::Duration) {
        let _ = budget;
    }

    /// Stop waiting on an external system that takes nothing (a full
    /// producer queue) once `cancelled` says the run was cancelled.
    /// Default: nothing waits that long.
    fn set_cancelled(&mut self, cancelled: Cancelled) {
        let _ = cancelled;
    }
}

/// Write each event's value as one line.
fn write_lines(out: &mut impl std::io::Write, events: &PackedEvents) -> std::io::Result<()> {
    for event in events.iter() {
        out.write_all(event.value)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
