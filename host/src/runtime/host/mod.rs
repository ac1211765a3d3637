//! The host side of the WIT interfaces, one module per interface —
//! [`state`], [`timers`], [`context`], [`broadcast`] — as wasmtime-wasi lays out its own:
//! each has a small context struct holding what it keeps, a view type
//! borrowing that context with the shared parts of the store it needs,
//! and an `add_to_linker(linker, fn(&mut T) -> View<'_>)` registering it
//! through [`HasData`].
//!
//! [`HostCtx`] is the data of every function's `Store`: it owns the
//! interfaces' contexts and what they share — the call in progress
//! ([`CallScope`]: the batch's keys, the selected key, processing time),
//! the state backend, the guest's handle table, the outputs — and hands
//! out the views ([`HostCtx::state`], [`HostCtx::timers`],
//! [`HostCtx::context`], [`HostCtx::broadcast`]). Before calling `process`, the caller records the
//! batch's keys with [`HostCtx::begin_batch`]; the guest then picks one
//! with `select-key` and every state call is scoped to that key. Emitted
//! events are collected in [`HostCtx::outputs`] for the pipeline to forward.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host::{self, HostCtx}};
//! # use weir_host::state::InMemoryBackend;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host::add_to_linker(&mut linker).unwrap();
//! let ctx = HostCtx::new("revenue", Some(Box::new(InMemoryBackend::new())), 128);
//! let store = wasmtime::Store::new(&engine, ctx);
//! ```

pub mod broadcast;
mod call;
pub mod context;
pub mod state;
pub mod timers;

use std::collections::HashMap;

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::weir::function::types::{self, KeyedTimers, TimeDomain};
use super::limits::FunctionLimits;
use super::packed::Emitted;
use crate::state::ttl::Ttl;
use crate::state::KeyedStateBackend;
use crate::Event;

pub use broadcast::{BroadcastCtx, BroadcastMapHandle, BroadcastView};
pub use call::CallScope;
pub use context::{ContextCtx, ContextView};
pub use state::{ListStateHandle, MapStateHandle, StateCtx, StateView, ValueStateHandle};
pub use timers::{TimersCtx, TimersView};

/// Largest key a key function may return, in bytes.
pub const MAX_KEY_LEN: usize = 1 << 20;
/// Most state handles a function may hold open at once.
pub const MAX_OPEN_HANDLES: usize = 10_000;

/// Everything a function instance's `Store` holds.
pub struct HostCtx {
    /// The guest's handles (state handles, WASI resources).
    table: ResourceTable,
    wasi: WasiCtx,
    /// The function and the call in progress.
    call: CallScope,
    /// The function's keyed state (key functions have none).
    backend: Option<Box<dyn KeyedStateBackend>>,
    state: StateCtx,
    timers: TimersCtx,
    context: ContextCtx,
    broadcast: BroadcastCtx,
    /// Events the function emitted to the main output, in order.
    pub outputs: Emitted,
    /// Events the function emitted to named side outputs, in order.
    pub side_outputs: Vec<(String, Event)>,
    /// Output lengths at the last [`HostCtx::mark`].
    marked_outputs: (usize, usize),
    /// Limits of the instance over this context (also its store's
    /// `ResourceLimiter`).
    pub(crate) limits: FunctionLimits,
    /// The calling thread's CPU time when the current call started.
    pub(crate) call_started: std::time::Duration,
}

impl HostCtx {
    /// Data for an instance of `function`; `backend` holds its keyed state
    /// (key functions have none).
    pub fn new(
        function: &str,
        backend: Option<Box<dyn KeyedStateBackend>>,
        max_parallelism: u16,
    ) -> Self {
        Self {
            table: handle_table(),
            wasi: super::wasi::sandboxed(),
            call: CallScope::new(function, max_parallelism, crate::clock::now_millis),
            backend,
            state: StateCtx::default(),
            timers: TimersCtx::new(max_parallelism),
            context: ContextCtx::default(),
            broadcast: BroadcastCtx::default(),
            outputs: Emitted::default(),
            side_outputs: Vec::new(),
            marked_outputs: (0, 0),
            limits: FunctionLimits::default(),
            call_started: std::time::Duration::ZERO,
        }
    }

    /// The `state` interface's view of this store.
    pub fn state(&mut self) -> StateView<'_> {
        StateView {
            ctx: &mut self.state,
            call: &mut self.call,
            backend: self.backend.as_deref_mut(),
            table: &mut self.table,
        }
    }

    /// The `timers` interface's view of this store.
    pub fn timers(&mut self) -> TimersView<'_> {
        TimersView { ctx: &mut self.timers, call: &self.call, backend: self.backend.as_deref_mut() }
    }

    /// The `context` interface's view of this store.
    pub fn context(&mut self) -> ContextView<'_> {
        ContextView {
            ctx: &mut self.context,
            call: &self.call,
            outputs: &mut self.outputs,
            side_outputs: &mut self.side_outputs,
        }
    }

    /// The `broadcast` interface's view of this store.
    pub fn broadcast(&mut self) -> BroadcastView<'_> {
        BroadcastView {
            ctx: &mut self.broadcast,
            call: &self.call,
            backend: self.backend.as_deref_mut(),
            table: &mut self.table,
        }
    }

    /// Allow the function to write broadcast state (only while it handles
    /// broadcast events), or stop allowing it.
    pub fn set_broadcast_writable(&mut self, writable: bool) {
        self.broadcast.set_writable(writable);
    }

    /// Remember where state, timers and outputs stand, so a failed call's
    /// effects can be undone with [`HostCtx::roll_back`] (state needs a
    /// journaling backend).
    pub fn mark(&mut self) {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.mark();
        }
        self.marked_outputs = (self.outputs.len(), self.side_outputs.len());
        self.timers.forget_changes();
    }

    /// Stop remembering for [`HostCtx::roll_back`].
    pub fn unmark(&mut self) {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.unmark();
        }
        self.timers.forget_changes();
    }

    /// Undo everything since [`HostCtx::mark`]: state writes, timer
    /// changes, emitted events.
    pub fn roll_back(&mut self) -> Result<(), crate::state::StateError> {
        if let Some(backend) = self.backend.as_deref_mut() {
            backend.roll_back()?;
        }
        self.outputs.truncate(self.marked_outputs.0);
        self.side_outputs.truncate(self.marked_outputs.1);
        self.timers.undo_changes();
        Ok(())
    }

    /// Run the instance over this context under `limits`.
    pub fn with_limits(mut self, limits: FunctionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Grant the function read-only access to `dir`, seen as `/resources`.
    pub fn with_resources(mut self, dir: Option<&std::path::Path>) -> Result<Self, String> {
        if let Some(dir) = dir {
            self.wasi = super::wasi::with_resources(dir)?;
        }
        Ok(self)
    }

    /// Use these times to live instead of the function's, per state name.
    pub fn with_ttl_overrides(mut self, overrides: HashMap<String, Ttl>) -> Self {
        self.state.set_ttl_overrides(overrides);
        self
    }

    /// Read processing time from `clock` (ms since the epoch) instead of
    /// the system clock.
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.call.clock = clock;
        self
    }

    /// Drop every handle the guest held: a new instance starts without any.
    pub(crate) fn forget_guest_handles(&mut self) {
        self.table = handle_table();
    }

    /// What a call was doing, by the key it had selected:
    /// `while processing key "c1"` (long keys cut, bytes escaped).
    pub fn describe_selected_key(&self) -> String {
        self.call.describe_selected_key()
    }

    /// Read ahead, for every key of the current batch, the value states the
    /// function has opened (see [`StateView::prefetch_values`]).
    pub fn prefetch_values(&mut self, cells: &mut types::ValueCells) {
        self.state().prefetch_values(cells);
    }

    /// A call is about to start: its emit budget starts afresh.
    pub(crate) fn start_call(&mut self) {
        self.context.start_call();
    }

    /// The error the function logged last in the current call, if any.
    pub(crate) fn take_logged_error(&mut self) -> Option<String> {
        self.context.logged_error.take()
    }

    /// Record the keys of the batch about to be passed to `process`, and fix
    /// processing time for the call.
    pub fn begin_batch<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.call.begin(keys);
        self.start_call();
    }

    /// Forget the batch once the call returned.
    pub fn end_batch(&mut self) {
        self.call.end();
    }

    /// Set the watermark the function sees.
    pub fn set_watermark(&mut self, watermark: i64) {
        self.context.watermark = watermark;
    }

    /// The watermark the function sees.
    pub fn watermark(&self) -> i64 {
        self.context.watermark
    }

    /// Load the timers stored in this context's state (at subtask start).
    pub fn load_timers(&mut self) -> Result<(), crate::state::StateError> {
        if let Some(backend) = self.backend.as_deref_mut() {
            self.timers.load(backend, self.call.max_parallelism())?;
        }
        Ok(())
    }

    /// Remove and return the timers of `domain` due at `up_to`, by key.
    pub fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        up_to: i64,
    ) -> Result<Vec<KeyedTimers>, crate::state::StateError> {
        match self.backend.as_deref_mut() {
            Some(backend) => self.timers.take_due(backend, domain, up_to),
            None => Ok(Vec::new()),
        }
    }

    /// The earliest processing-time timer, if any.
    pub fn next_processing_timer(&self) -> Option<i64> {
        self.timers.next(TimeDomain::ProcessingTime)
    }

    /// The current processing time by this context's clock.
    pub fn now(&self) -> i64 {
        (self.call.clock)()
    }

    /// The state backend, to flush it.
    pub fn backend_mut(&mut self) -> Option<&mut (dyn KeyedStateBackend + 'static)> {
        self.backend.as_deref_mut()
    }
}

impl WasiView for HostCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A table for a guest's handles, holding at most [`MAX_OPEN_HANDLES`].
fn handle_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_OPEN_HANDLES);
    table
}

/// [`HasData`] for the `types` interface, which has no functions: its
/// instance only carries the types the others use.
struct WeirTypes;

impl HasData for WeirTypes {
    type Data<'a> = WeirTypes;
}

impl types::Host for WeirTypes {}

/// Register the `state`, `timers`, `context`, `broadcast` and `types`
/// interfaces, and the sandboxed WASI (see [`super::wasi`]), in `linker`.
pub fn add_to_linker(linker: &mut Linker<HostCtx>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    state::add_to_linker(linker, HostCtx::state)?;
    timers::add_to_linker(linker, HostCtx::timers)?;
    context::add_to_linker(linker, HostCtx::context)?;
    broadcast::add_to_linker(linker, HostCtx::broadcast)?;
    types::add_to_linker::<HostCtx, WeirTypes>(linker, |_| WeirTypes)?;
    Ok(())
}
