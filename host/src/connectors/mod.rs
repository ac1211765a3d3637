//! Connectors: where a pipeline's events come from and where its output
//! goes. Each source and sink is one module; the pipeline only sees the
//! [`Source`] and [`Sink`] traits.

mod discard;
mod file;
mod generator;
mod splits;
mod stdout;

pub use discard::DiscardSink;
pub use file::{BadTimestamps, FileSink, FileSource};
pub use splits::SplitSource;
pub(crate) use file::parse_rfc3339_millis;
pub use generator::GeneratorSource;
pub use stdout::StdoutSink;

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
    /// An input record is malformed; `location` says where (`file:line`).
    #[error("{location}: {message}")]
    BadRecord {
        /// Where the record is.
        location: String,
        /// What is wrong with it.
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

    /// Number of splits (each gets its own watermark).
    fn splits(&self) -> usize {
        1
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
}

/// A destination for events.
pub trait Sink: Send {
    /// Write `events` in order.
    fn write(&mut self, events: &[Event]) -> Result<(), ConnectorError>;
    /// Make everything written so far durable / visible.
    fn flush(&mut self) -> Result<(), ConnectorError>;
}

/// Write each event's value as one line.
fn write_lines(out: &mut impl std::io::Write, events: &[Event]) -> std::io::Result<()> {
    for event in events {
        out.write_all(&event.value)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
