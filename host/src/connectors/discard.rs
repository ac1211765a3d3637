//! The discard sink: drops everything, for benchmarks and dry runs
//! (`type: discard`).

use super::config::{SinkConfig, SinkMode};
use super::{ConnectorError, Sink};
use crate::runtime::packed::PackedEvents;

/// `sink: { type: discard }`: no settings.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscardConfig {}

impl SinkConfig for DiscardConfig {
    fn open(&self, _mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError> {
        Ok(Box::new(DiscardSink))
    }
}

/// Accepts events and drops them. It ignores epochs and checkpoints
/// (at-least-once, trivially: nothing is kept).
#[derive(Debug, Default)]
pub struct DiscardSink;

impl Sink for DiscardSink {
    fn write(&mut self, _epoch: u64, _events: &PackedEvents) -> Result<(), ConnectorError> {
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ConnectorError> {
        Ok(())
    }
}
