//! Instances of functions and calls into them, one `Store` each.

use wasmtime::Store;

use super::bindings::exports::weir::function::{aggregate_fn, key_fn, process_fn, window_process_fn};
use super::bindings::weir::function::types::{Accumulate, KeyedEvents, KeyedTimers, WindowEvents, WindowResult};
use super::{HostCtx, LoadedFunction};
use crate::Event;

/// Why a call into a function failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The component could not be instantiated.
    #[error("function `{function}` could not be instantiated: {message}")]
    Instantiate {
        /// The function's name.
        function: String,
        /// Why.
        message: String,
    },
    /// The function returned an error.
    #[error("function `{function}` failed: {message}")]
    Failed {
        /// The function's name.
        function: String,
        /// The function's message.
        message: String,
    },
    /// The function trapped (panicked, hit `unreachable`, ran out of memory…).
    #[error("function `{function}` trapped: {message}")]
    Trapped {
        /// The function's name.
        function: String,
        /// The trap and its backtrace.
        message: String,
    },
    /// A key function returned the wrong number of keys.
    #[error("key function `{function}` returned {got} keys for {expected} events")]
    KeyCount {
        /// The function's name.
        function: String,
        /// Events passed.
        expected: usize,
        /// Keys returned.
        got: usize,
    },
}

/// Instantiate `function` over `ctx` and look up its export with `guest`
/// (a generated `GuestIndices::new(..).load(..)`).
fn instantiate<G>(
    function: &LoadedFunction,
    ctx: HostCtx,
    name: &str,
    guest: impl FnOnce(&mut Store<HostCtx>, &wasmtime::component::Instance) -> wasmtime::Result<G>,
) -> Result<(Store<HostCtx>, G), CallError> {
    let failed = |e: wasmtime::Error| CallError::Instantiate { function: name.to_string(), message: format!("{e:#}") };
    let mut store = Store::new(function.pre.engine(), ctx);
    let instance = function.pre.instantiate(&mut store).map_err(failed)?;
    let guest = guest(&mut store, &instance).map_err(failed)?;
    Ok((store, guest))
}

fn trapped(function: &str, error: wasmtime::Error) -> CallError {
    CallError::Trapped { function: function.to_string(), message: format!("{error:#}") }
}

/// A live key function.
pub struct KeyFunctionInstance {
    name: String,
    store: Store<HostCtx>,
    guest: key_fn::Guest,
}

impl KeyFunctionInstance {
    /// Instantiate `function` (which must export `key-fn`) as `name`.
    pub fn new(function: &LoadedFunction, name: &str) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, HostCtx::new(name, None, 1), name, |store, instance| key_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), store, guest })
    }

    /// The key of each event, in order.
    pub fn extract_keys(&mut self, events: &[Event]) -> Result<Vec<Vec<u8>>, CallError> {
        let keys = self
            .guest
            .call_extract_keys(&mut self.store, events)
            .map_err(|e| trapped(&self.name, e))?
            .map_err(|e| CallError::Failed { function: self.name.clone(), message: e.message })?;
        if keys.len() != events.len() {
            return Err(CallError::KeyCount { function: self.name.clone(), expected: events.len(), got: keys.len() });
        }
        Ok(keys)
    }
}

/// A live keyed process function with its state.
pub struct ProcessFunctionInstance {
    name: String,
    store: Store<HostCtx>,
    guest: process_fn::Guest,
}

impl ProcessFunctionInstance {
    /// Instantiate `function` (which must export `process-fn`) as `name`,
    /// with its state in `ctx`.
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, ctx, name, |store, instance| process_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), store, guest })
    }

    /// Process `batch` (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn process(&mut self, batch: &[KeyedEvents]) -> Result<(), CallError> {
        self.store.data_mut().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = self.guest.call_process(&mut self.store, batch);
        self.store.data_mut().end_batch();
        result.map_err(|e| trapped(&self.name, e))?.map_err(|e| CallError::Failed { function: self.name.clone(), message: e.message })
    }

    /// Deliver fired timers (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn fire_timers(&mut self, batch: &[KeyedTimers]) -> Result<(), CallError> {
        self.store.data_mut().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = self.guest.call_on_timers(&mut self.store, batch);
        self.store.data_mut().end_batch();
        result.map_err(|e| trapped(&self.name, e))?.map_err(|e| CallError::Failed { function: self.name.clone(), message: e.message })
    }

    /// The store's data: outputs, state backend.
    pub fn ctx(&mut self) -> &mut HostCtx {
        self.store.data_mut()
    }
}

/// A live window aggregate function (it keeps no state of its own: the
/// window operator passes accumulators in and out).
pub struct AggregateFunctionInstance {
    name: String,
    store: Store<HostCtx>,
    guest: aggregate_fn::Guest,
}

impl AggregateFunctionInstance {
    /// Instantiate `function` (which must export `aggregate-fn`) as `name`.
    pub fn new(function: &LoadedFunction, name: &str) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, HostCtx::new(name, None, 1), name, |store, instance| aggregate_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), store, guest })
    }

    fn failed(&self, message: String) -> CallError {
        CallError::Failed { function: self.name.clone(), message }
    }

    /// Fold each entry's events into its accumulator.
    pub fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, CallError> {
        let accumulators = self.guest.call_add(&mut self.store, batch).map_err(|e| trapped(&self.name, e))?.map_err(|e| self.failed(e.message))?;
        if accumulators.len() != batch.len() {
            return Err(self.failed(format!("returned {} accumulators for {} windows", accumulators.len(), batch.len())));
        }
        Ok(accumulators)
    }

    /// Combine two accumulators.
    pub fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, CallError> {
        self.guest.call_merge(&mut self.store, a, b).map_err(|e| trapped(&self.name, e))?.map_err(|e| self.failed(e.message))
    }

    /// The outputs of finished windows.
    pub fn results(&mut self, batch: &[WindowResult]) -> Result<Vec<Event>, CallError> {
        self.guest.call_results(&mut self.store, batch).map_err(|e| trapped(&self.name, e))?.map_err(|e| self.failed(e.message))
    }
}

/// A live window process function.
pub struct WindowProcessFunctionInstance {
    name: String,
    store: Store<HostCtx>,
    guest: window_process_fn::Guest,
}

impl WindowProcessFunctionInstance {
    /// Instantiate `function` (which must export `window-process-fn`).
    pub fn new(function: &LoadedFunction, name: &str) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, HostCtx::new(name, None, 1), name, |store, instance| window_process_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), store, guest })
    }

    /// The outputs of finished windows, given their events.
    pub fn process_windows(&mut self, batch: &[WindowEvents]) -> Result<Vec<Event>, CallError> {
        self.guest
            .call_process_windows(&mut self.store, batch)
            .map_err(|e| trapped(&self.name, e))?
            .map_err(|e| CallError::Failed { function: self.name.clone(), message: e.message })
    }
}
