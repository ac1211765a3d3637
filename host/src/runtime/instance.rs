//! Instances of functions and calls into them, one `Store` each.

use wasmtime::Store;

use super::bindings::exports::weir::function::{aggregate_fn, key_fn, process_fn, window_process_fn};
use super::bindings::weir::function::types::{Accumulate, EventBatch, KeyedBatch, KeyedEvents, KeyedTimers, WindowEvents, WindowResult};
use super::packing;
use super::native::{NativeAggregateFunction, NativeKeyFunction, NativeProcessFunction};
use super::{HostCtx, LoadedFunction};
use crate::Event;

/// A function's code: a Wasm instance in its store, or native code.
enum Code<G, N: ?Sized> {
    Wasm { store: Box<Store<HostCtx>>, guest: G },
    Native { ctx: Box<HostCtx>, function: Box<N> },
}

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
    code: Code<key_fn::Guest, dyn NativeKeyFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: EventBatch,
}

impl KeyFunctionInstance {
    /// Instantiate `function` (which must export `key-fn`) as `name`.
    pub fn new(function: &LoadedFunction, name: &str) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, HostCtx::new(name, None, 1), name, |store, instance| key_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), code: Code::Wasm { store: Box::new(store), guest }, packed: packing::empty_batch() })
    }

    /// A native key function as `name`.
    pub fn native(function: Box<dyn NativeKeyFunction>, name: &str) -> Self {
        Self { name: name.to_string(), code: Code::Native { ctx: Box::new(HostCtx::new(name, None, 1)), function }, packed: packing::empty_batch() }
    }

    /// The key of each event, in order.
    pub fn extract_keys(&mut self, events: &[Event]) -> Result<Vec<Vec<u8>>, CallError> {
        let failed = |message| CallError::Failed { function: self.name.clone(), message };
        let keys = match &mut self.code {
            Code::Wasm { store, guest } => {
                packing::pack(events, &mut self.packed);
                let keys = guest.call_extract_keys(store.as_mut(), &self.packed).map_err(|e| trapped(&self.name, e))?.map_err(|e| failed(e.message))?;
                packing::unpack_keys(&keys).map_err(failed)?
            }
            Code::Native { function, .. } => function.extract_keys(events).map_err(failed)?,
        };
        if keys.len() != events.len() {
            return Err(CallError::KeyCount { function: self.name.clone(), expected: events.len(), got: keys.len() });
        }
        Ok(keys)
    }
}

/// A live keyed process function with its state.
pub struct ProcessFunctionInstance {
    name: String,
    code: Code<process_fn::Guest, dyn NativeProcessFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: KeyedBatch,
}

impl ProcessFunctionInstance {
    /// Instantiate `function` (which must export `process-fn`) as `name`,
    /// with its state in `ctx`.
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, ctx, name, |store, instance| process_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), code: Code::Wasm { store: Box::new(store), guest }, packed: packing::empty_keyed_batch() })
    }

    /// A native process function as `name`, with its state in `ctx`.
    pub fn native(function: Box<dyn NativeProcessFunction>, name: &str, ctx: HostCtx) -> Self {
        Self { name: name.to_string(), code: Code::Native { ctx: Box::new(ctx), function }, packed: packing::empty_keyed_batch() }
    }

    /// Process `batch` (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn process(&mut self, batch: &[KeyedEvents]) -> Result<(), CallError> {
        self.ctx().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = match &mut self.code {
            Code::Wasm { store, guest } => {
                packing::pack_keyed(batch, &mut self.packed);
                guest.call_process(store.as_mut(), &self.packed).map(|r| r.map_err(|e| e.message))
            }
            Code::Native { ctx, function } => Ok(function.process(batch, ctx)),
        };
        self.ctx().end_batch();
        result.map_err(|e| trapped(&self.name, e))?.map_err(|message| CallError::Failed { function: self.name.clone(), message })
    }

    /// Deliver fired timers (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn fire_timers(&mut self, batch: &[KeyedTimers]) -> Result<(), CallError> {
        self.ctx().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = match &mut self.code {
            Code::Wasm { store, guest } => guest.call_on_timers(store.as_mut(), batch).map(|r| r.map_err(|e| e.message)),
            Code::Native { ctx, function } => Ok(function.on_timers(batch, ctx)),
        };
        self.ctx().end_batch();
        result.map_err(|e| trapped(&self.name, e))?.map_err(|message| CallError::Failed { function: self.name.clone(), message })
    }

    /// The store's data: outputs, state backend.
    pub fn ctx(&mut self) -> &mut HostCtx {
        match &mut self.code {
            Code::Wasm { store, .. } => store.data_mut(),
            Code::Native { ctx, .. } => ctx,
        }
    }
}

/// A live window aggregate function (it keeps no state of its own: the
/// window operator passes accumulators in and out).
pub struct AggregateFunctionInstance {
    name: String,
    code: Code<aggregate_fn::Guest, dyn NativeAggregateFunction>,
}

impl AggregateFunctionInstance {
    /// Instantiate `function` (which must export `aggregate-fn`) as `name`.
    pub fn new(function: &LoadedFunction, name: &str) -> Result<Self, CallError> {
        let pre = &function.pre;
        let (store, guest) = instantiate(function, HostCtx::new(name, None, 1), name, |store, instance| aggregate_fn::GuestIndices::new(pre)?.load(store, instance))?;
        Ok(Self { name: name.to_string(), code: Code::Wasm { store: Box::new(store), guest } })
    }

    /// A native aggregate function as `name`.
    pub fn native(function: Box<dyn NativeAggregateFunction>, name: &str) -> Self {
        Self { name: name.to_string(), code: Code::Native { ctx: Box::new(HostCtx::new(name, None, 1)), function } }
    }

    fn failed(&self, message: String) -> CallError {
        CallError::Failed { function: self.name.clone(), message }
    }

    /// Fold each entry's events into its accumulator.
    pub fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, CallError> {
        let accumulators = match &mut self.code {
            Code::Wasm { store, guest } => guest.call_add(store.as_mut(), batch).map_err(|e| trapped(&self.name, e))?.map_err(|e| e.message),
            Code::Native { function, .. } => function.add(batch),
        }
        .map_err(|m| self.failed(m))?;
        if accumulators.len() != batch.len() {
            return Err(self.failed(format!("returned {} accumulators for {} windows", accumulators.len(), batch.len())));
        }
        Ok(accumulators)
    }

    /// Combine two accumulators.
    pub fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, CallError> {
        match &mut self.code {
            Code::Wasm { store, guest } => guest.call_merge(store.as_mut(), a, b).map_err(|e| trapped(&self.name, e))?.map_err(|e| e.message),
            Code::Native { function, .. } => function.merge(a, b),
        }
        .map_err(|m| self.failed(m))
    }

    /// The outputs of finished windows.
    pub fn results(&mut self, batch: &[WindowResult]) -> Result<Vec<Event>, CallError> {
        match &mut self.code {
            Code::Wasm { store, guest } => guest.call_results(store.as_mut(), batch).map_err(|e| trapped(&self.name, e))?.map_err(|e| e.message),
            Code::Native { function, .. } => function.results(batch),
        }
        .map_err(|m| self.failed(m))
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
