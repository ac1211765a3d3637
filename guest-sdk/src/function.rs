//! The traits a function implements, and the glue that runs them for a
//! batch from the host.

use crate::__private::wit::types::{FunctionError, KeyedEvents, KeyedTimers};
use crate::{host, Context, Error, Event, FiredTimer};

/// Computes the key a keyed pipeline partitions events by.
///
/// Keys are plain bytes; events with equal keys share state and are
/// processed in order by one subtask.
pub trait KeyFunction: Default + 'static {
    /// The key of `event`.
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error>;
}

/// Processes the events of one key with that key's state.
pub trait ProcessFunction: Default + 'static {
    /// Handle `events` (oldest first) of `key`. State handles read and write
    /// `key`'s state; outputs go through `ctx`.
    fn process(&mut self, key: &[u8], events: Vec<Event>, ctx: &mut Context) -> Result<(), Error>;

    /// A timer registered for `key` (with `Context::register_*_timer`) has
    /// fired. State handles are scoped to `key`. Does nothing by default.
    fn on_timer(&mut self, key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let _ = (key, timer, ctx);
        Ok(())
    }
}

fn function_error(error: Error) -> FunctionError {
    FunctionError { message: error.message().to_string() }
}

/// Run `function`'s key extraction over a batch (called by the glue).
pub fn extract_keys<F: KeyFunction>(function: &mut F, events: Vec<Event>) -> Result<Vec<Vec<u8>>, FunctionError> {
    events.iter().map(|event| function.key(event)).collect::<Result<_, _>>().map_err(function_error)
}

/// Run `function` over a batch, one key at a time (called by the glue and
/// by the native test harness).
pub fn process_batch<F: ProcessFunction>(function: &mut F, batch: Vec<KeyedEvents>) -> Result<(), FunctionError> {
    let mut ctx = Context::new();
    for (index, KeyedEvents { key, events }) in batch.into_iter().enumerate() {
        let index = u32::try_from(index).map_err(|_| FunctionError { message: "batch too large".into() })?;
        host::select_key(index, &key).map_err(function_error)?;
        function.process(&key, events, &mut ctx).map_err(function_error)?;
    }
    Ok(())
}

/// Deliver fired timers to `function`, one key at a time (called by the
/// glue and by the native test harness).
pub fn fire_timers<F: ProcessFunction>(function: &mut F, batch: Vec<KeyedTimers>) -> Result<(), FunctionError> {
    let mut ctx = Context::new();
    for (index, KeyedTimers { key, timers }) in batch.into_iter().enumerate() {
        let index = u32::try_from(index).map_err(|_| FunctionError { message: "batch too large".into() })?;
        host::select_key(index, &key).map_err(function_error)?;
        for timer in timers {
            function.on_timer(&key, timer, &mut ctx).map_err(function_error)?;
        }
    }
    Ok(())
}
