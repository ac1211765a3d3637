//! What a handler may ask of the host while it runs: emit outputs, read
//! event time, log.

use std::borrow::Borrow;

use crate::packing::BatchPacker;
use crate::{host, Error, Event, TimeDomain};

/// Severity of a [`Context::log`] line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Very detailed tracing output.
    Trace,
    /// Diagnostic output for developers.
    Debug,
    /// Normal operational messages.
    Info,
    /// Something unexpected that the function recovered from.
    Warn,
    /// A failure the function could not recover from.
    Error,
}

/// The handle a [`ProcessFunction`](crate::ProcessFunction) uses to talk to
/// the host during a call.
///
/// Outputs are buffered and handed to the host once per call, so a
/// function emitting one output per event crosses the Wasm boundary once
/// per batch, not once per output.
#[derive(Debug)]
pub struct Context {
    outputs: BatchPacker,
}

impl Context {
    /// Send `event` (owned or borrowed) to the pipeline's main output.
    pub fn emit(&mut self, event: impl Borrow<Event>) {
        self.outputs.push_event(event.borrow());
    }

    /// Send an event with payload `value` at event time `timestamp` (no
    /// source key, no headers) to the main output: [`Context::emit`]
    /// without building an [`Event`] (the bytes are copied into the batch
    /// for the host right away).
    #[inline]
    pub fn emit_value(&mut self, value: &[u8], timestamp: i64) {
        self.outputs.push(value, timestamp, None, &[]);
    }

    /// Hand the buffered outputs to the host (the glue calls this at the
    /// end of each call).
    pub(crate) fn flush(&mut self) {
        if !self.outputs.is_empty() {
            host::emit_batch(self.outputs.batch());
            self.outputs.clear();
        }
    }

    /// Drop what is buffered (a failed call's outputs).
    pub(crate) fn clear(&mut self) {
        self.outputs.clear();
    }

    /// Send `event` to the side output called `name` (declared in the
    /// pipeline spec; events for undeclared outputs are counted and dropped).
    pub fn emit_to(&mut self, name: &str, event: impl Borrow<Event>) {
        host::emit_to(name, event.borrow());
    }

    /// The current event-time watermark (ms since the epoch); `i64::MIN`
    /// before the first watermark.
    pub fn current_watermark(&self) -> i64 {
        host::current_watermark()
    }

    /// The host's processing time (ms since the epoch), fixed for one call.
    pub fn processing_time(&self) -> i64 {
        host::processing_time()
    }

    /// Call [`on_timer`](crate::ProcessFunction::on_timer) for the current
    /// key once the watermark reaches `timestamp`. Registering the same
    /// timestamp twice fires once.
    pub fn register_event_time_timer(&mut self, timestamp: i64) -> Result<(), Error> {
        host::register_timer(TimeDomain::EventTime, timestamp)
    }

    /// Call `on_timer` for the current key once processing time reaches
    /// `timestamp`.
    pub fn register_processing_time_timer(&mut self, timestamp: i64) -> Result<(), Error> {
        host::register_timer(TimeDomain::ProcessingTime, timestamp)
    }

    /// Cancel the current key's event-time timer at `timestamp`.
    pub fn delete_event_time_timer(&mut self, timestamp: i64) -> Result<(), Error> {
        host::delete_timer(TimeDomain::EventTime, timestamp)
    }

    /// Cancel the current key's processing-time timer at `timestamp`.
    pub fn delete_processing_time_timer(&mut self, timestamp: i64) -> Result<(), Error> {
        host::delete_timer(TimeDomain::ProcessingTime, timestamp)
    }

    /// Write a line to the host's log.
    pub fn log(&self, level: LogLevel, message: &str) {
        host::log(level, message);
    }

    /// Create a context; only the SDK's glue and test harness do this.
    pub(crate) fn new() -> Self {
        Self { outputs: BatchPacker::default() }
    }
}

/// Make a panic log its message (as an error, through `context.log`)
/// before the function traps, so the pipeline's failure says what
/// panicked and where. The SDK's glue installs it with the instance.
pub fn report_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            host::log(LogLevel::Error, &info.to_string().replace('\n', " "))
        }))
    });
}
