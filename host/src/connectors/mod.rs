//! Connectors: where a pipeline's events come from and where its output
//! goes. Each source and sink is one module; the pipeline only sees the
//! [`Source`] and [`Sink`] traits.

mod discard;
mod file;
mod generator;
mod stdout;

pub use discard::DiscardSink;
pub use file::{FileSink, FileSource};
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

/// A source of events, read in batches.
pub trait Source: Send {
    /// Append up to `max` events to `out`. Returns `false` once the source
    /// is exhausted (a bounded source has nothing more to give).
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<bool, ConnectorError>;

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
