//! The discard sink: drops everything (for benchmarks and dry runs).

use super::{ConnectorError, Sink};
use crate::Event;

/// Accepts events and drops them. It ignores epochs and checkpoints
/// (at-least-once, trivially: nothing is kept).
#[derive(Debug, Default)]
pub struct DiscardSink;

impl Sink for DiscardSink {
    fn write(&mut self, _epoch: u64, _events: &[Event]) -> Result<(), ConnectorError> {
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ConnectorError> {
        Ok(())
    }
}
