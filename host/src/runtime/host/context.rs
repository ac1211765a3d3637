//! The host side of the WIT `context` interface: what a function may ask
//! of the host while it runs — emit events, read the watermark and the
//! call's processing time, log.
//!
//! [`ContextCtx`] holds the watermark, the per-call emit budget and the
//! last error the function logged; [`ContextView`] borrows it with the
//! call and the store's output buffers and implements the bindings'
//! `context::Host`. Emitted events are bounded per call (count and bytes)
//! and a side output's name is checked before it is kept.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host::{self, HostCtx}};
//! # use weir_host::runtime::bindings::weir::function::context::Host as _;
//! # use weir_host::Event;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host::context::add_to_linker(&mut linker, HostCtx::context).unwrap();
//! // The host calls it natively the same way:
//! let mut ctx = HostCtx::new("enrich", None, 1);
//! let event = Event { key: None, value: b"x".to_vec(), timestamp: 0, headers: Vec::new() };
//! ctx.context().emit(event).unwrap();
//! assert_eq!(ctx.outputs.len(), 1);
//! ```

use wasmtime::component::{HasData, Linker};

use super::super::bindings::weir::function::{context, types};
use super::super::packed::Emitted;
use super::CallScope;
use crate::Event;

/// Most bytes (values, keys and headers) one call may emit.
pub const MAX_EMITTED_BYTES_PER_CALL: usize = 256 << 20;
/// Most events one call may emit.
pub const MAX_EMITTED_EVENTS_PER_CALL: usize = 1 << 20;

/// What the `context` interface keeps for one function instance.
pub struct ContextCtx {
    /// The event-time watermark the function sees.
    pub(super) watermark: i64,
    /// What the current call emitted so far: events, bytes.
    emitted: (usize, usize),
    /// The last error the function logged in the current call (a panic
    /// message, reported with the trap that follows).
    pub(super) logged_error: Option<String>,
}

impl Default for ContextCtx {
    fn default() -> Self {
        Self { watermark: i64::MIN, emitted: (0, 0), logged_error: None }
    }
}

impl ContextCtx {
    /// A call is about to start: its emit budget starts afresh.
    pub(super) fn start_call(&mut self) {
        self.emitted = (0, 0);
        self.logged_error = None;
    }
}

/// The `context` interface's view of a store: its context, the call, and
/// where emitted events go (main output, side outputs).
pub struct ContextView<'a> {
    pub(super) ctx: &'a mut ContextCtx,
    pub(super) call: &'a CallScope,
    pub(super) outputs: &'a mut Emitted,
    pub(super) side_outputs: &'a mut Vec<(String, Event)>,
}

/// [`HasData`] for the `context` interface: its bindings see a
/// [`ContextView`].
pub struct WeirContext;

impl HasData for WeirContext {
    type Data<'a> = ContextView<'a>;
}

/// Register the `context` interface in `linker`, reached through `get`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> ContextView<'_>,
) -> wasmtime::Result<()> {
    context::add_to_linker::<T, WeirContext>(linker, get)
}

impl ContextView<'_> {
    /// Count `events` emitted events of `bytes` bytes against the per-call
    /// bounds; past them, the call traps.
    fn count_emitted(&mut self, events: usize, bytes: usize) -> wasmtime::Result<()> {
        let emitted = &mut self.ctx.emitted;
        emitted.0 += events;
        emitted.1 += bytes;
        if emitted.0 > MAX_EMITTED_EVENTS_PER_CALL || emitted.1 > MAX_EMITTED_BYTES_PER_CALL {
            return Err(wasmtime::Error::msg(format!(
                "function {} emitted more than {MAX_EMITTED_EVENTS_PER_CALL} events or {} in one call",
                self.call.function,
                crate::units::format_bytes(MAX_EMITTED_BYTES_PER_CALL as u64)
            )));
        }
        Ok(())
    }
}

/// Bytes an event occupies: value, key and headers.
fn event_bytes(event: &Event) -> usize {
    event.value.len()
        + event.key.as_ref().map_or(0, Vec::len)
        + event.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
}

impl context::Host for ContextView<'_> {
    fn emit(&mut self, output: Event) -> wasmtime::Result<()> {
        self.count_emitted(1, event_bytes(&output))?;
        self.outputs.push(output);
        Ok(())
    }

    fn emit_batch(&mut self, outputs: types::EventBatch) -> wasmtime::Result<()> {
        self.count_emitted(
            outputs.timestamps.len(),
            outputs.values.len()
                + outputs.keys.len()
                + outputs.headers.iter().map(|(_, k, v)| k.len() + v.len()).sum::<usize>(),
        )?;
        self.outputs.extend_batch(outputs).map_err(|e| {
            wasmtime::Error::msg(format!(
                "function {} emitted a malformed batch: {e}",
                self.call.function
            ))
        })
    }

    fn emit_to(&mut self, name: String, output: Event) -> wasmtime::Result<()> {
        if !crate::names::is_valid_name(&name) {
            let shown: String = name.chars().take(64).collect();
            return Err(wasmtime::Error::msg(format!(
                "function {} emitted to {shown:?}, which is not a side output name ({})",
                self.call.function,
                crate::names::NAME_RULE
            )));
        }
        self.count_emitted(1, event_bytes(&output))?;
        self.side_outputs.push((name, output));
        Ok(())
    }

    fn current_watermark(&mut self) -> wasmtime::Result<i64> {
        Ok(self.ctx.watermark)
    }

    fn processing_time(&mut self) -> wasmtime::Result<i64> {
        Ok(self.call.processing_time)
    }

    fn log(&mut self, level: types::LogLevel, message: String) -> wasmtime::Result<()> {
        let function = self.call.function.as_str();
        match level {
            types::LogLevel::Trace => tracing::trace!(function, "{message}"),
            types::LogLevel::Debug => tracing::debug!(function, "{message}"),
            types::LogLevel::Info => tracing::info!(function, "{message}"),
            types::LogLevel::Warn => tracing::warn!(function, "{message}"),
            types::LogLevel::Error => tracing::error!(function, "{message}"),
        }
        if level == types::LogLevel::Error {
            self.ctx.logged_error = Some(message.chars().take(1024).collect());
        }
        Ok(())
    }
}
