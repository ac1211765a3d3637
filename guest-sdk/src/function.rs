//! The traits a function implements, and the glue that runs them for a
//! batch from the host.

use serde::{de::DeserializeOwned, Serialize};

use crate::__private::wit::types::{Accumulate, EventBatch, FunctionError, KeyedBatch, KeyedEvents, KeyedTimers, PackedKeys, Window, WindowEvents, WindowResult};
use crate::{codec, host, packing, Context, Error, Event, FiredTimer};

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

/// A window aggregate: the host assigns events to windows and keeps one
/// accumulator per (key, window); this folds events into accumulators and
/// turns a finished window's accumulator into output.
pub trait AggregateFunction: Default + 'static {
    /// What is kept per window (stored by the host in the compact codec).
    type Accumulator: Serialize + DeserializeOwned + Default;

    /// Fold `event` into `accumulator`.
    fn add(&mut self, accumulator: &mut Self::Accumulator, event: &Event) -> Result<(), Error>;

    /// Combine two accumulators (when session windows merge).
    fn merge(&mut self, a: Self::Accumulator, b: Self::Accumulator) -> Result<Self::Accumulator, Error>;

    /// The output of `key`'s finished `window` (fired again with the
    /// updated accumulator when a late event arrives within the allowed
    /// lateness).
    fn result(&mut self, key: &[u8], window: Window, accumulator: Self::Accumulator) -> Result<Vec<Event>, Error>;
}

/// A window process function: sees all events of a window at once when it
/// fires (the host keeps them until then). Prefer [`AggregateFunction`]
/// when an accumulator suffices: it keeps far less state.
pub trait WindowProcessFunction: Default + 'static {
    /// The output of `key`'s finished `window`, given all its events.
    fn process_window(&mut self, key: &[u8], window: Window, events: Vec<Event>) -> Result<Vec<Event>, Error>;
}

fn function_error(error: Error) -> FunctionError {
    FunctionError { message: error.message().to_string() }
}

/// Run `function`'s key extraction over a batch (called by the test harness).
pub fn extract_keys<F: KeyFunction>(function: &mut F, events: Vec<Event>) -> Result<Vec<Vec<u8>>, FunctionError> {
    events.iter().map(|event| function.key(event)).collect::<Result<_, _>>().map_err(function_error)
}

/// Run `function`'s key extraction over a packed batch (called by the glue):
/// one reused `Event`, keys packed as they come.
pub fn extract_packed_keys<F: KeyFunction>(function: &mut F, events: EventBatch) -> Result<PackedKeys, FunctionError> {
    let mut keys = packing::KeyPacker::default();
    packing::for_each_event(&events, |event| {
        keys.push(&function.key(event)?);
        Ok(())
    })
    .map_err(function_error)?;
    Ok(keys.finish())
}

/// Run `function` over a packed batch (called by the glue).
pub fn process_packed<F: ProcessFunction>(function: &mut F, batch: KeyedBatch) -> Result<(), FunctionError> {
    process_batch(function, packing::unpack_keyed(&batch).map_err(function_error)?)
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
    ctx.flush();
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
    ctx.flush();
    Ok(())
}

/// Fold each entry's events into its accumulator (called by the glue).
pub fn aggregate_add<F: AggregateFunction>(function: &mut F, batch: Vec<Accumulate>) -> Result<Vec<Vec<u8>>, FunctionError> {
    let fold = |function: &mut F, Accumulate { accumulator, events }: Accumulate| -> Result<Vec<u8>, Error> {
        let mut acc: F::Accumulator = accumulator.map_or(Ok(Default::default()), |bytes| codec::decode(&bytes))?;
        for event in &events {
            function.add(&mut acc, event)?;
        }
        codec::encode(&acc)
    };
    batch.into_iter().map(|entry| fold(function, entry)).collect::<Result<_, _>>().map_err(function_error)
}

/// Merge two encoded accumulators (called by the glue).
pub fn aggregate_merge<F: AggregateFunction>(function: &mut F, a: Vec<u8>, b: Vec<u8>) -> Result<Vec<u8>, FunctionError> {
    let merged = (|| function.merge(codec::decode(&a)?, codec::decode(&b)?).and_then(|m| codec::encode(&m)))();
    merged.map_err(function_error)
}

/// The outputs of finished windows (called by the glue).
pub fn aggregate_results<F: AggregateFunction>(function: &mut F, batch: Vec<WindowResult>) -> Result<Vec<Event>, FunctionError> {
    let mut out = Vec::new();
    for WindowResult { key, window, accumulator } in batch {
        let acc = codec::decode(&accumulator).map_err(function_error)?;
        out.extend(function.result(&key, window, acc).map_err(function_error)?);
    }
    Ok(out)
}

/// The outputs of finished windows given their events (called by the glue).
pub fn window_process<F: WindowProcessFunction>(function: &mut F, batch: Vec<WindowEvents>) -> Result<Vec<Event>, FunctionError> {
    let mut out = Vec::new();
    for WindowEvents { key, window, events } in batch {
        out.extend(function.process_window(&key, window, events).map_err(function_error)?);
    }
    Ok(out)
}
