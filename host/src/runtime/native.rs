//! Functions compiled into the host instead of loaded as Wasm: the
//! native baselines `weir bench` measures Wasm functions against. They
//! run where a Wasm function would — same batches, same [`HostCtx`] state
//! calls (select the key, open a state, get, set) — so the difference
//! between the two is what crossing the Wasm boundary costs.
//!
//! A spec names one with `native: <name>` in place of `wasm:` or
//! `function:`; a run finds it by name in the [`NativeCatalog`] it was
//! given (empty unless the binary supplies one, as `weir bench` does).

use std::sync::Arc;

use super::bindings::weir::function::types::{Accumulate, KeyedEvents, KeyedTimers};
use super::packed::PackedEvents;
use super::packing::{FiredWindows, KeyList};
use super::HostCtx;
use crate::Event;

/// A native key function.
pub trait NativeKeyFunction: Send {
    /// Add the key of each event to `keys`, in order.
    fn extract_keys(&mut self, events: &[Event], keys: &mut KeyList) -> Result<(), String>;

    /// [`Self::extract_keys`] of packed events (a source's batch).
    /// Default: of them as [`Event`]s.
    fn extract_packed_keys(
        &mut self,
        events: &PackedEvents,
        keys: &mut KeyList,
    ) -> Result<(), String> {
        self.extract_keys(&events.to_events(), keys)
    }
}

/// A native transform function (map, filter, flat-map).
pub trait NativeTransformFunction: Send {
    /// Append the outputs for `events` to `outputs`, in input order.
    fn transform(&mut self, events: &[Event], outputs: &mut Vec<Event>) -> Result<(), String>;
}

/// A native keyed process function.
pub trait NativeProcessFunction: Send {
    /// Process each key's events; before touching key `i`'s state, call
    /// `state::Host::select_key(&mut ctx.state(), i)` as the SDK's glue does.
    fn process(&mut self, batch: &[KeyedEvents], ctx: &mut HostCtx) -> Result<(), String>;

    /// Fired timers (none by default).
    fn on_timers(&mut self, _batch: &[KeyedTimers], _ctx: &mut HostCtx) -> Result<(), String> {
        Ok(())
    }
}

/// A native window aggregate function.
pub trait NativeAggregateFunction: Send {
    /// Fold each entry's events into its accumulator.
    fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, String>;
    /// Combine two accumulators.
    fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String>;
    /// The outputs of finished windows.
    fn results(&mut self, batch: &FiredWindows) -> Result<Vec<Event>, String>;
}

/// A named native function: the roles it can play.
pub trait NativeFunction: Send + Sync {
    /// A key function, if it is one.
    fn key(&self) -> Option<Box<dyn NativeKeyFunction>> {
        None
    }
    /// A process function, if it is one.
    fn process(&self) -> Option<Box<dyn NativeProcessFunction>> {
        None
    }
    /// An aggregate function, if it is one.
    fn aggregate(&self) -> Option<Box<dyn NativeAggregateFunction>> {
        None
    }
    /// A transform function, if it is one.
    fn transform(&self) -> Option<Box<dyn NativeTransformFunction>> {
        None
    }
}

/// Shared handle on a native function.
pub type NativeRef = Arc<dyn NativeFunction>;

/// The native functions a run may name, by name. Empty by default: the
/// binary that wants some (the benchmarks' twins) builds the catalogue
/// and hands it to the run.
#[derive(Clone, Default)]
pub struct NativeCatalog {
    functions: Vec<(&'static str, NativeRef)>,
}

impl NativeCatalog {
    /// A catalogue of `functions`, by name.
    pub fn new(functions: impl IntoIterator<Item = (&'static str, NativeRef)>) -> Self {
        Self { functions: functions.into_iter().collect() }
    }

    /// The function called `name`, if there is one.
    pub fn lookup(&self, name: &str) -> Option<NativeRef> {
        self.functions.iter().find(|(known, _)| *known == name).map(|(_, f)| f.clone())
    }

    /// The names it knows, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.functions.iter().map(|(name, _)| *name)
    }
}

impl std::fmt::Debug for NativeCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
