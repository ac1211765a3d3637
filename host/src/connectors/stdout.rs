//! The stdout sink: one event value per line on standard output
//! (`type: stdout`).

use std::io::{BufWriter, Stdout, Write};

use super::config::{SinkConfig, SinkMode};
use super::{write_lines, ConnectorError, Sink};
use crate::runtime::packed::PackedEvents;

/// `sink: { type: stdout }`: no settings.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdoutConfig {}

impl SinkConfig for StdoutConfig {
    fn open(&self, _mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError> {
        Ok(Box::new(StdoutSink::new()))
    }
}

/// Writes event values to standard output, one per line. It ignores
/// epochs and checkpoints: output is at-least-once (after a restore, the
/// replayed events are printed again).
pub struct StdoutSink {
    out: BufWriter<Stdout>,
}

impl StdoutSink {
    /// A sink on this process's standard output.
    pub fn new() -> Self {
        Self { out: BufWriter::new(std::io::stdout()) }
    }
}

impl Default for StdoutSink {
    fn default() -> Self {
        Self::new()
    }
}

fn stdout_error(source: std::io::Error) -> ConnectorError {
    ConnectorError::Io { what: "writing to stdout".into(), source }
}

impl Sink for StdoutSink {
    fn write(&mut self, _epoch: u64, events: &PackedEvents) -> Result<(), ConnectorError> {
        write_lines(&mut self.out, events).map_err(stdout_error)
    }

    fn flush(&mut self) -> Result<(), ConnectorError> {
        self.out.flush().map_err(stdout_error)
    }

    fn release(&mut self) -> Result<(), ConnectorError> {
        self.flush()
    }
}
