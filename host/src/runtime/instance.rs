//! Instances of functions and calls into them, one `Store` each.

use wasmtime::Store;

use super::bindings::exports::weir::function::{
    aggregate_fn, broadcast_fn, co_process_fn, key_fn, process_fn, transform_fn, window_process_fn,
};
use super::bindings::weir::function::types::{
    Accumulate, AccumulateBatch, EventBatch, KeyedBatch, KeyedEvents, KeyedTimers, ValueCells,
    WindowEvents,
};
use super::host::MAX_KEY_LEN;
use super::native::{
    NativeAggregateFunction, NativeKeyFunction, NativeProcessFunction, NativeTransformFunction,
};
use super::packed::PackedEvents;
use super::packing::{self, BareEvents, FiredWindows, Grouping, KeyList};
use super::{HostCtx, LoadedFunction, Role};
use crate::Event;

/// A function's code: a Wasm instance in its store (with the component,
/// to instantiate it again after a trap), or native code.
enum Code<G, N: ?Sized> {
    Wasm { store: Box<Store<HostCtx>>, guest: G, function: LoadedFunction },
    Native { ctx: Box<HostCtx>, function: Box<N> },
}

/// Looks up a role's export in a new instance (a generated
/// `GuestIndices::new(..).load(..)`).
type LoadGuest<G> =
    fn(&LoadedFunction, &mut Store<HostCtx>, &wasmtime::component::Instance) -> wasmtime::Result<G>;

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
    #[error("function `{function}` failed {activity}: {message}")]
    Failed {
        /// The function's name.
        function: String,
        /// What it was doing (`while processing key "c1"`).
        activity: String,
        /// The function's message.
        message: String,
    },
    /// The function trapped (panicked, hit `unreachable`, misused a host
    /// call…).
    #[error("function `{function}` trapped {activity}: {message}")]
    Trapped {
        /// The function's name.
        function: String,
        /// What it was doing.
        activity: String,
        /// The trap and its backtrace.
        message: String,
    },
    /// The function ran into one of its limits (deadline, memory, fuel) and
    /// was stopped.
    #[error("function `{function}` stopped: {limit} {activity}")]
    LimitExceeded {
        /// The function's name.
        function: String,
        /// Which limit (`deadline of 100ms exceeded`).
        limit: String,
        /// What it was doing.
        activity: String,
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

impl CallError {
    /// Whether the instance must be replaced before it is called again
    /// (after a trap, a component instance cannot be entered).
    pub fn poisons_instance(&self) -> bool {
        matches!(self, CallError::Trapped { .. } | CallError::LimitExceeded { .. })
    }
}

/// A new instance of `function` in a new store over `ctx`, its limits
/// applied, with its export looked up by `load`.
fn instantiate<G>(
    function: &LoadedFunction,
    ctx: HostCtx,
    name: &str,
    load: LoadGuest<G>,
) -> Result<(Store<HostCtx>, G), CallError> {
    let limits = ctx.limits;
    let failed = |e: wasmtime::Error| {
        let message = super::limits::limit_hit(&e, &limits).unwrap_or_else(|| format!("{e:#}"));
        CallError::Instantiate { function: name.to_string(), message }
    };
    let mut store = Store::new(function.pre.engine(), ctx);
    store.limiter(|ctx| &mut ctx.limits);
    limits.enforce(&mut store);
    limits.arm(&mut store);
    let instance = function.pre.instantiate(&mut store).map_err(failed)?;
    let guest = load(function, &mut store, &instance).map_err(failed)?;
    Ok((store, guest))
}

/// What a call without a current key was doing (`while aggregating 3
/// windows`), put into words only when it fails.
#[derive(Clone, Copy)]
struct Doing {
    what: &'static str,
    count: usize,
    unit: &'static str,
}

impl Doing {
    fn text(self) -> String {
        format!("while {} {} {}", self.what, self.count, self.unit)
    }
}

/// Call into a Wasm instance with its limits armed; name what stopped it
/// and what it was doing (`doing`, or else the key it had selected).
fn call_wasm<R>(
    store: &mut Store<HostCtx>,
    name: &str,
    doing: Option<Doing>,
    call: impl FnOnce(&mut Store<HostCtx>) -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    let limits = store.data().limits;
    limits.arm(store);
    store.data_mut().start_call();
    call(store).map_err(|error| {
        let activity = doing.map_or_else(|| store.data().describe_selected_key(), Doing::text);
        match super::limits::limit_hit(&error, &limits) {
            Some(limit) => CallError::LimitExceeded { function: name.to_string(), limit, activity },
            None => {
                tracing::debug!(function = name, "trap: {error:?}");
                let mut message = error.root_cause().to_string();
                if let Some(logged) = store.data_mut().take_logged_error() {
                    message = format!("{message}; it logged: {logged}");
                }
                CallError::Trapped { function: name.to_string(), activity, message }
            }
        }
    })
}

impl<G, N: ?Sized> Code<G, N> {
    fn wasm(
        function: &LoadedFunction,
        ctx: HostCtx,
        name: &str,
        load: LoadGuest<G>,
    ) -> Result<Self, CallError> {
        let (store, guest) = instantiate(function, ctx, name, load)?;
        Ok(Code::Wasm { store: Box::new(store), guest, function: function.clone() })
    }

    fn ctx(&mut self) -> &mut HostCtx {
        match self {
            Code::Wasm { store, .. } => store.data_mut(),
            Code::Native { ctx, .. } => ctx,
        }
    }

    /// Replace a (trapped) Wasm instance by a new one over the same
    /// context; the guest's own memory starts afresh. Native code is kept.
    fn reinstantiate(&mut self, name: &str, load: LoadGuest<G>) -> Result<(), CallError> {
        let Code::Wasm { store, guest, function } = self else { return Ok(()) };
        let mut ctx = HostCtx::new(name, None, 1);
        std::mem::swap(&mut ctx, store.data_mut());
        ctx.forget_guest_handles();
        // Free the old instance's pool slot before taking a new one.
        **store = Store::new(function.pre.engine(), HostCtx::new(name, None, 1));
        let (new_store, new_guest) = instantiate(function, ctx, name, load)?;
        **store = new_store;
        *guest = new_guest;
        Ok(())
    }
}

/// A live key function.
pub struct KeyFunctionInstance {
    name: String,
    code: Code<key_fn::Guest, dyn NativeKeyFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: EventBatch,
}

fn load_key(
    function: &LoadedFunction,
    store: &mut Store<HostCtx>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<key_fn::Guest> {
    key_fn::GuestIndices::new(&function.pre)?.load(store, instance)
}

impl KeyFunctionInstance {
    /// Instantiate `function` (which must export `key-fn`) as `name`, over
    /// `ctx` (which holds no state: its limits and grants apply).
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        Ok(Self {
            name: name.to_string(),
            code: Code::wasm(function, ctx, name, load_key)?,
            packed: packing::empty_batch(),
        })
    }

    /// A native key function as `name`.
    pub fn native(function: Box<dyn NativeKeyFunction>, name: &str) -> Self {
        Self {
            name: name.to_string(),
            code: Code::Native { ctx: Box::new(HostCtx::new(name, None, 1)), function },
            packed: packing::empty_batch(),
        }
    }

    /// The key of each event, in order.
    pub fn extract_keys(&mut self, events: &[Event]) -> Result<KeyList, CallError> {
        self.extract(KeyInput::Events(events))
    }

    /// [`Self::extract_keys`] of packed events (a source's batch).
    pub fn extract_packed_keys(&mut self, events: &PackedEvents) -> Result<KeyList, CallError> {
        self.extract(KeyInput::Packed(events))
    }

    fn extract(&mut self, events: KeyInput<'_>) -> Result<KeyList, CallError> {
        let doing = Doing { what: "computing the keys of", count: events.len(), unit: "events" };
        let failed = |message| CallError::Failed {
            function: self.name.clone(),
            activity: doing.text(),
            message,
        };
        let keys = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                match events {
                    KeyInput::Events(events) => packing::pack(events, &mut self.packed),
                    KeyInput::Packed(events) => events.pack_into(&mut self.packed),
                }
                let keys = call_wasm(store, &self.name, Some(doing), |store| {
                    guest.call_extract_keys(store, &self.packed)
                })?
                .map_err(|e| failed(e.message))?;
                KeyList::from_packed(keys).map_err(failed)?
            }
            Code::Native { function, .. } => {
                let mut keys = KeyList::default();
                match events {
                    KeyInput::Events(events) => function.extract_keys(events, &mut keys),
                    KeyInput::Packed(events) => function.extract_packed_keys(events, &mut keys),
                }
                .map_err(failed)?;
                keys
            }
        };
        if keys.len() != events.len() {
            return Err(CallError::KeyCount {
                function: self.name.clone(),
                expected: events.len(),
                got: keys.len(),
            });
        }
        if let Some(key) = keys.iter().find(|key| key.len() > MAX_KEY_LEN) {
            return Err(failed(format!(
                "returned a key of {} bytes; keys may have at most {}",
                key.len(),
                crate::units::format_bytes(MAX_KEY_LEN as u64)
            )));
        }
        Ok(keys)
    }

    /// After a trap: continue with a new instance.
    pub fn recover(&mut self) -> Result<(), CallError> {
        self.code.reinstantiate(&self.name, load_key)
    }
}

/// What a key function is called on.
#[derive(Clone, Copy)]
enum KeyInput<'a> {
    Events(&'a [Event]),
    Packed(&'a PackedEvents),
}

impl KeyInput<'_> {
    fn len(&self) -> usize {
        match self {
            KeyInput::Events(events) => events.len(),
            KeyInput::Packed(events) => events.len(),
        }
    }
}

/// A live transform function (map, filter, flat-map): no keyed state.
pub struct TransformInstance {
    name: String,
    code: Code<transform_fn::Guest, dyn NativeTransformFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: EventBatch,
}

fn load_transform(
    function: &LoadedFunction,
    store: &mut Store<HostCtx>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<transform_fn::Guest> {
    transform_fn::GuestIndices::new(&function.pre)?.load(store, instance)
}

impl TransformInstance {
    /// Instantiate `function` (which must export `transform-fn`) as `name`,
    /// over `ctx` (which holds no state: its limits and grants apply).
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        Ok(Self {
            name: name.to_string(),
            code: Code::wasm(function, ctx, name, load_transform)?,
            packed: packing::empty_batch(),
        })
    }

    /// A native transform function as `name`.
    pub fn native(function: Box<dyn NativeTransformFunction>, name: &str) -> Self {
        Self {
            name: name.to_string(),
            code: Code::Native { ctx: Box::new(HostCtx::new(name, None, 1)), function },
            packed: packing::empty_batch(),
        }
    }

    /// The outputs for `events`, in input order: those the function
    /// returned, then any it emitted through `context.emit`. Events it sent
    /// to side outputs are left in [`HostCtx::side_outputs`].
    pub fn transform(&mut self, events: &[Event]) -> Result<Vec<Event>, CallError> {
        let doing = Doing { what: "transforming", count: events.len(), unit: "events" };
        let failed = |message| CallError::Failed {
            function: self.name.clone(),
            activity: doing.text(),
            message,
        };
        let mut outputs = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                packing::pack(events, &mut self.packed);
                let batch = call_wasm(store, &self.name, Some(doing), |store| {
                    guest.call_transform(store, &self.packed)
                })?
                .map_err(|e| failed(e.message))?;
                super::packed::unpack(batch).map_err(failed)?
            }
            Code::Native { function, .. } => {
                let mut outputs = Vec::new();
                function.transform(events, &mut outputs).map_err(failed)?;
                outputs
            }
        };
        outputs.extend(std::mem::take(&mut self.code.ctx().outputs).into_events());
        Ok(outputs)
    }

    /// After a trap: continue with a new instance.
    pub fn recover(&mut self) -> Result<(), CallError> {
        self.code.reinstantiate(&self.name, load_transform)
    }

    /// The store's data: side outputs, limits.
    pub fn ctx(&mut self) -> &mut HostCtx {
        self.code.ctx()
    }
}

/// A live keyed process function with its state.
pub struct ProcessFunctionInstance {
    name: String,
    code: Code<ProcessGuest, dyn NativeProcessFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: KeyedBatch,
    /// Broadcast events as they cross the boundary (buffers reused).
    packed_broadcast: EventBatch,
}

/// The exports of a keyed process function, by the world it implements.
enum ProcessGuest {
    /// `process-fn`, and `broadcast-fn` for a broadcast process function.
    Process { process: process_fn::Guest, broadcast: Option<broadcast_fn::Guest> },
    /// `co-process-fn`: two keyed inputs.
    CoProcess(co_process_fn::Guest),
}

fn load_process(
    function: &LoadedFunction,
    store: &mut Store<HostCtx>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<ProcessGuest> {
    if function.implements(Role::Process) {
        let process = process_fn::GuestIndices::new(&function.pre)?.load(&mut *store, instance)?;
        let broadcast = if function.implements(Role::BroadcastProcess) {
            Some(broadcast_fn::GuestIndices::new(&function.pre)?.load(store, instance)?)
        } else {
            None
        };
        Ok(ProcessGuest::Process { process, broadcast })
    } else if function.implements(Role::CoProcess) {
        let co = co_process_fn::GuestIndices::new(&function.pre)?.load(store, instance)?;
        Ok(ProcessGuest::CoProcess(co))
    } else {
        Err(wasmtime::Error::msg(format!(
            "it exports neither `{}` nor `{}`",
            Role::Process.interface(),
            Role::CoProcess.interface()
        )))
    }
}

impl ProcessFunctionInstance {
    /// Instantiate `function` as `name`, with its state in `ctx`. It must
    /// export `process-fn` (a process function, and with `broadcast-fn` a
    /// broadcast process function) or `co-process-fn` (a co-process
    /// function).
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        Ok(Self {
            name: name.to_string(),
            code: Code::wasm(function, ctx, name, load_process)?,
            packed: packing::empty_keyed_batch(),
            packed_broadcast: packing::empty_batch(),
        })
    }

    /// A native process function as `name`, with its state in `ctx`.
    pub fn native(function: Box<dyn NativeProcessFunction>, name: &str, ctx: HostCtx) -> Self {
        Self {
            name: name.to_string(),
            code: Code::Native { ctx: Box::new(ctx), function },
            packed: packing::empty_keyed_batch(),
            packed_broadcast: packing::empty_batch(),
        }
    }

    /// How many keyed inputs the function takes: 2 for a co-process
    /// function, else 1.
    pub fn inputs(&self) -> usize {
        match &self.code {
            Code::Wasm { guest: ProcessGuest::CoProcess(_), .. } => 2,
            _ => 1,
        }
    }

    /// Whether the function handles broadcast events (a broadcast process
    /// function: [`Self::process_broadcast`]).
    pub fn has_broadcast(&self) -> bool {
        matches!(
            &self.code,
            Code::Wasm { guest: ProcessGuest::Process { broadcast: Some(_), .. }, .. }
        )
    }

    /// Process `batch` (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`]. For a co-process
    /// function, the events of its first input.
    pub fn process(&mut self, batch: &[KeyedEvents]) -> Result<(), CallError> {
        self.process_input(0, batch)
    }

    /// Process `batch` (one entry per key) of keyed input `input` (below
    /// [`Self::inputs`]): 0 is `process` (`process1` of a co-process
    /// function), 1 is `process2`. Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn process_input(&mut self, input: usize, batch: &[KeyedEvents]) -> Result<(), CallError> {
        self.check_input(input)?;
        self.ctx().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                packing::pack_keyed(batch, &mut self.packed);
                call_process(store, guest, input, &self.name, &mut self.packed)
            }
            Code::Native { ctx, function } => Ok(function.process(batch, ctx)),
        };
        self.finish_call(result, None)
    }

    /// Whether the function is a Wasm component: only then does it take
    /// packed batches ([`Self::process_grouped`]).
    pub fn is_wasm(&self) -> bool {
        matches!(self.code, Code::Wasm { .. })
    }

    /// [`Self::process`] for packed events grouped by key (`keys` has one
    /// key per event): the batch goes to the Wasm function without an
    /// [`Event`] per event. A native function takes events: an error.
    pub fn process_grouped(
        &mut self,
        events: &BareEvents,
        keys: &KeyList,
        grouping: Grouping<'_>,
    ) -> Result<(), CallError> {
        self.process_input_grouped(0, events, keys, grouping)
    }

    /// [`Self::process_input`] for packed events grouped by key, as
    /// [`Self::process_grouped`].
    pub fn process_input_grouped(
        &mut self,
        input: usize,
        events: &BareEvents,
        keys: &KeyList,
        grouping: Grouping<'_>,
    ) -> Result<(), CallError> {
        self.check_input(input)?;
        self.ctx().begin_batch(grouping.first_events().map(|first| keys.get(first)));
        let result = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                packing::pack_grouped(events, keys, grouping, &mut self.packed);
                call_process(store, guest, input, &self.name, &mut self.packed)
            }
            Code::Native { .. } => Ok(Err(NATIVE_TAKES_EVENTS.to_string())),
        };
        self.finish_call(result, None)
    }

    /// Handle broadcast events (in the order every subtask sees them):
    /// no key is selected, and broadcast state is writable for the call.
    /// Emitted events are left in [`HostCtx::outputs`] and
    /// [`HostCtx::side_outputs`]. A function without broadcast input
    /// ([`Self::has_broadcast`]): an error.
    pub fn process_broadcast(&mut self, events: &[Event]) -> Result<(), CallError> {
        let doing = Doing { what: "processing", count: events.len(), unit: "broadcast events" };
        self.ctx().begin_batch(std::iter::empty());
        self.ctx().set_broadcast_writable(true);
        let result = match &mut self.code {
            Code::Wasm {
                store,
                guest: ProcessGuest::Process { broadcast: Some(guest), .. },
                ..
            } => {
                packing::pack(events, &mut self.packed_broadcast);
                let packed = &self.packed_broadcast;
                call_wasm(store, &self.name, Some(doing), |store| {
                    guest.call_process_broadcast(store, packed)
                })
                .map(|r| r.map_err(|e| e.message))
            }
            _ => Ok(Err(format!(
                "it takes no broadcast input: it does not export `{}` (implement \
                 `BroadcastProcessFunction` in the SDK)",
                Role::BroadcastProcess.interface()
            ))),
        };
        self.ctx().set_broadcast_writable(false);
        self.finish_call(result, Some(doing))
    }

    /// Deliver fired timers (one entry per key). Emitted events are left in
    /// [`HostCtx::outputs`] and [`HostCtx::side_outputs`].
    pub fn fire_timers(&mut self, batch: &[KeyedTimers]) -> Result<(), CallError> {
        self.ctx().begin_batch(batch.iter().map(|k| k.key.as_slice()));
        let result = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                call_wasm(store, &self.name, None, |store| match guest {
                    ProcessGuest::Process { process, .. } => process.call_on_timers(store, batch),
                    ProcessGuest::CoProcess(co) => co.call_on_timers(store, batch),
                })
                .map(|r| r.map_err(|e| e.message))
            }
            Code::Native { ctx, function } => Ok(function.on_timers(batch, ctx)),
        };
        self.finish_call(result, None)
    }

    /// An error unless the function has keyed input `input`.
    fn check_input(&self, input: usize) -> Result<(), CallError> {
        let inputs = self.inputs();
        if input < inputs {
            return Ok(());
        }
        Err(CallError::Failed {
            function: self.name.clone(),
            activity: format!("while processing input {input}"),
            message: format!(
                "it takes {inputs} keyed input{} (a co-process function takes 2)",
                if inputs == 1 { "" } else { "s" }
            ),
        })
    }

    /// Name what the call was doing when it failed (`doing`, or else the
    /// key it had selected), and forget the batch.
    fn finish_call(
        &mut self,
        result: Result<Result<(), String>, CallError>,
        doing: Option<Doing>,
    ) -> Result<(), CallError> {
        let outcome = match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(CallError::Failed {
                function: self.name.clone(),
                activity: doing.map_or_else(|| self.ctx().describe_selected_key(), Doing::text),
                message,
            }),
            Err(error) => Err(error),
        };
        self.ctx().end_batch();
        outcome
    }

    /// After a trap: continue with a new instance over the same state.
    pub fn recover(&mut self) -> Result<(), CallError> {
        self.code.reinstantiate(&self.name, load_process)
    }

    /// The store's data: outputs, state backend.
    pub fn ctx(&mut self) -> &mut HostCtx {
        self.code.ctx()
    }
}

/// Why a native function cannot take a packed batch.
const NATIVE_TAKES_EVENTS: &str = "a native function takes events, not packed batches";

/// Call a Wasm process function on `packed` of keyed input `input`
/// (checked against the function's inputs), with the value states it reads
/// read ahead.
fn call_process(
    store: &mut Store<HostCtx>,
    guest: &ProcessGuest,
    input: usize,
    name: &str,
    packed: &mut KeyedBatch,
) -> Result<Result<(), String>, CallError> {
    store.data_mut().prefetch_values(&mut packed.prefetched);
    call_wasm(store, name, None, |store| match (guest, input) {
        (ProcessGuest::Process { process, .. }, _) => process.call_process(store, packed),
        (ProcessGuest::CoProcess(co), 0) => co.call_process1(store, packed),
        (ProcessGuest::CoProcess(co), _) => co.call_process2(store, packed),
    })
    .map(|r| r.map_err(|e| e.message))
}

/// Call a Wasm aggregate function's `add` on `packed`.
fn call_add(
    store: &mut Store<HostCtx>,
    guest: &aggregate_fn::Guest,
    name: &str,
    doing: Doing,
    packed: &AccumulateBatch,
) -> Result<Result<Vec<Vec<u8>>, String>, CallError> {
    let cells = call_wasm(store, name, Some(doing), |store| guest.call_add(store, packed))?
        .map_err(|e| e.message);
    Ok(cells.and_then(|cells| packing::unpack_values(&cells)))
}

/// A live window aggregate function (it keeps no state of its own: the
/// window operator passes accumulators in and out).
pub struct AggregateFunctionInstance {
    name: String,
    code: Code<aggregate_fn::Guest, dyn NativeAggregateFunction>,
    /// The batch as it crosses the boundary (buffers reused).
    packed: AccumulateBatch,
}

fn load_aggregate(
    function: &LoadedFunction,
    store: &mut Store<HostCtx>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<aggregate_fn::Guest> {
    aggregate_fn::GuestIndices::new(&function.pre)?.load(store, instance)
}

impl AggregateFunctionInstance {
    /// Instantiate `function` (which must export `aggregate-fn`) as `name`
    /// over `ctx` (no state: its limits and grants apply).
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        Ok(Self {
            name: name.to_string(),
            code: Code::wasm(function, ctx, name, load_aggregate)?,
            packed: packing::empty_accumulate_batch(),
        })
    }

    /// A native aggregate function as `name`.
    pub fn native(function: Box<dyn NativeAggregateFunction>, name: &str) -> Self {
        Self {
            name: name.to_string(),
            code: Code::Native { ctx: Box::new(HostCtx::new(name, None, 1)), function },
            packed: packing::empty_accumulate_batch(),
        }
    }

    fn failed(&self, doing: Doing, message: String) -> CallError {
        CallError::Failed { function: self.name.clone(), activity: doing.text(), message }
    }

    /// Fold each entry's events into its accumulator.
    pub fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, CallError> {
        let doing = Doing { what: "aggregating", count: batch.len(), unit: "windows" };
        let accumulators = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                packing::pack_accumulate(batch, &mut self.packed);
                call_add(store, guest, &self.name, doing, &self.packed)?
            }
            Code::Native { function, .. } => function.add(batch),
        };
        self.checked_accumulators(doing, accumulators, batch.len())
    }

    /// Whether the function is a Wasm component: only then does it take
    /// packed batches ([`Self::add_grouped`]).
    pub fn is_wasm(&self) -> bool {
        matches!(self.code, Code::Wasm { .. })
    }

    /// [`Self::add`] for packed events grouped by window: window `i` has
    /// accumulator cell `i` (absent: new) and group `i`'s events. A native
    /// function takes events: an error.
    pub fn add_grouped(
        &mut self,
        accumulators: &ValueCells,
        events: &BareEvents,
        grouping: Grouping<'_>,
    ) -> Result<Vec<Vec<u8>>, CallError> {
        let doing = Doing { what: "aggregating", count: accumulators.ends.len(), unit: "windows" };
        let added = match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                packing::pack_accumulate_grouped(accumulators, events, grouping, &mut self.packed);
                call_add(store, guest, &self.name, doing, &self.packed)?
            }
            Code::Native { .. } => Err(NATIVE_TAKES_EVENTS.to_string()),
        };
        self.checked_accumulators(doing, added, accumulators.ends.len())
    }

    /// The accumulators a call returned for `windows` windows, or why not.
    fn checked_accumulators(
        &self,
        doing: Doing,
        accumulators: Result<Vec<Vec<u8>>, String>,
        windows: usize,
    ) -> Result<Vec<Vec<u8>>, CallError> {
        let accumulators = accumulators.map_err(|m| self.failed(doing, m))?;
        if accumulators.len() != windows {
            return Err(self.failed(
                doing,
                format!("returned {} accumulators for {windows} windows", accumulators.len()),
            ));
        }
        Ok(accumulators)
    }

    /// Combine two accumulators.
    pub fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, CallError> {
        let doing = Doing { what: "merging", count: 2, unit: "windows" };
        match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                call_wasm(store, &self.name, Some(doing), |store| guest.call_merge(store, a, b))?
                    .map_err(|e| e.message)
            }
            Code::Native { function, .. } => function.merge(a, b),
        }
        .map_err(|m| self.failed(doing, m))
    }

    /// The outputs of finished windows.
    pub fn results(&mut self, batch: &FiredWindows) -> Result<Vec<Event>, CallError> {
        let doing = Doing { what: "computing the results of", count: batch.len(), unit: "windows" };
        match &mut self.code {
            Code::Wasm { store, guest, .. } => {
                call_wasm(store, &self.name, Some(doing), |store| {
                    guest.call_results(store, batch.packed())
                })?
                .map_err(|e| e.message)
                .and_then(super::packed::unpack)
            }
            Code::Native { function, .. } => function.results(batch),
        }
        .map_err(|m| self.failed(doing, m))
    }
}

/// A live window process function.
pub struct WindowProcessFunctionInstance {
    name: String,
    store: Store<HostCtx>,
    guest: window_process_fn::Guest,
}

fn load_window_process(
    function: &LoadedFunction,
    store: &mut Store<HostCtx>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<window_process_fn::Guest> {
    window_process_fn::GuestIndices::new(&function.pre)?.load(store, instance)
}

impl WindowProcessFunctionInstance {
    /// Instantiate `function` (which must export `window-process-fn`) over
    /// `ctx` (no state: its limits and grants apply).
    pub fn new(function: &LoadedFunction, name: &str, ctx: HostCtx) -> Result<Self, CallError> {
        let (store, guest) = instantiate(function, ctx, name, load_window_process)?;
        Ok(Self { name: name.to_string(), store, guest })
    }

    /// The outputs of finished windows, given their events.
    pub fn process_windows(&mut self, batch: &[WindowEvents]) -> Result<Vec<Event>, CallError> {
        let doing = Doing { what: "processing", count: batch.len(), unit: "windows" };
        let guest = &self.guest;
        call_wasm(&mut self.store, &self.name, Some(doing), |store| {
            guest.call_process_windows(store, batch)
        })?
        .map_err(|e| CallError::Failed {
            function: self.name.clone(),
            activity: doing.text(),
            message: e.message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{new_engine, EngineLimits, FunctionLimits, FunctionLoader};
    use std::time::{Duration, Instant};

    /// A component exporting `spin` (an endless loop) and `grow` (asks for
    /// `pages` more 64 KiB pages, returns the old size or -1).
    const MISBEHAVES: &str = r#"(component
        (core module $m
            (memory (export "memory") 1)
            (func (export "spin") (loop $l (br $l)))
            (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
        (core instance $i (instantiate $m))
        (func (export "spin") (canon lift (core func $i "spin")))
        (func (export "grow") (param "pages" u32) (result s32) (canon lift (core func $i "grow"))))"#;

    /// A bump allocator as `cabi_realloc`, over one growing memory.
    const ALLOCATOR: &str = r#"
        (memory (export "memory") 1)
        (global $heap (mut i32) (i32.const 1024))
        (func (export "cabi_realloc") (param i32 i32) (param $align i32) (param $size i32)
            (result i32)
            (local $p i32)
            (local.set $p (i32.and
                (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                (i32.sub (i32.const 0) (local.get $align))))
            (global.set $heap (i32.add (local.get $p) (local.get $size)))
            (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
                (then (drop (memory.grow (i32.add (i32.const 1) (i32.div_u
                    (global.get $heap) (i32.const 65536)))))))
            (local.get $p))"#;

    /// A transform that returns its batch unchanged, except that a batch of
    /// exactly 3 events comes back malformed (2 value ends).
    fn identity_transform() -> String {
        let params = (0..14).map(|i| format!("(local.get {i})")).collect::<Vec<_>>();
        let stores: String = params
            .iter()
            .enumerate()
            .map(|(i, p)| format!("(i32.store (i32.const {}) {p})\n", 20 + 4 * i))
            .collect();
        format!(
            r#"(module {ALLOCATOR}
            (func (export "weir:function/transform-fn@0.2.0#transform")
                (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
                (if (i32.eq (local.get 5) (i32.const 3)) (then (local.set 3 (i32.const 2))))
                (i32.store8 (i32.const 16) (i32.const 0))
                {stores}
                (i32.const 16)))"#
        )
    }

    /// A co-process function whose `process1` succeeds and whose
    /// `process2` and `on-timers` fail with "two" and "timers".
    fn co_process() -> String {
        format!(
            r#"(module {ALLOCATOR}
            (data (i32.const 64) "two")
            (data (i32.const 80) "timers")
            (func (export "weir:function/co-process-fn@0.2.0#process1") (param i32) (result i32)
                (i32.store8 (i32.const 16) (i32.const 0))
                (i32.const 16))
            (func (export "weir:function/co-process-fn@0.2.0#process2") (param i32) (result i32)
                (i32.store8 (i32.const 16) (i32.const 1))
                (i32.store (i32.const 20) (i32.const 64))
                (i32.store (i32.const 24) (i32.const 3))
                (i32.const 16))
            (func (export "weir:function/co-process-fn@0.2.0#on-timers") (param i32 i32)
                (result i32)
                (i32.store8 (i32.const 16) (i32.const 1))
                (i32.store (i32.const 20) (i32.const 80))
                (i32.store (i32.const 24) (i32.const 6))
                (i32.const 16)))"#
        )
    }

    fn load(wat: Option<&str>, world: &str) -> LoadedFunction {
        let engine = new_engine(EngineLimits { instances: 4, ..Default::default() }).unwrap();
        let module = crate::runtime::loader::tests::module_with_world(wat, world);
        FunctionLoader::new(engine, None).unwrap().load(&module).unwrap()
    }

    fn keyed_ctx() -> HostCtx {
        HostCtx::new("f", Some(Box::new(crate::state::InMemoryBackend::new())), 128)
    }

    fn keyed(key: &str, values: &[&str]) -> KeyedEvents {
        KeyedEvents { key: key.as_bytes().to_vec(), events: values.iter().map(|v| ev(v)).collect() }
    }

    fn ev(value: &str) -> Event {
        Event { key: None, value: value.as_bytes().to_vec(), timestamp: 7, headers: Vec::new() }
    }

    #[test]
    fn a_transform_passes_batches_both_ways_and_checks_what_comes_back() {
        let function = load(Some(&identity_transform()), "transform-function");
        let mut transform =
            TransformInstance::new(&function, "identity", HostCtx::new("identity", None, 1))
                .unwrap();
        let events = vec![
            Event { key: Some(b"k".to_vec()), ..ev("a") },
            Event { headers: vec![("h".into(), b"v".to_vec())], timestamp: -3, ..ev("bc") },
        ];
        let out = transform.transform(&events).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].key.as_deref(), &out[0].value[..]), (Some(&b"k"[..]), &b"a"[..]));
        assert_eq!((out[1].timestamp, &out[1].headers), (-3, &events[1].headers));
        assert!(transform.transform(&[]).unwrap().is_empty());
        let error = transform.transform(&[ev("x"), ev("y"), ev("z")]).unwrap_err().to_string();
        assert!(
            error.contains("function `identity` failed while transforming 3 events")
                && error.contains("2 value ends for 3 events"),
            "{error}"
        );
    }

    #[test]
    fn a_transform_that_traps_is_replaced_on_recovery() {
        let function = load(None, "transform-function");
        let mut transform =
            TransformInstance::new(&function, "dummy", HostCtx::new("dummy", None, 1)).unwrap();
        let error = transform.transform(&[ev("a")]).unwrap_err();
        assert!(error.poisons_instance(), "{error}");
        assert!(error.to_string().contains("while transforming 1 events"), "{error}");
        transform.recover().unwrap();
        assert!(transform.transform(&[ev("a")]).unwrap_err().poisons_instance());
    }

    #[test]
    fn a_co_process_function_has_two_inputs() {
        let function = load(Some(&co_process()), "co-process-function");
        let mut co = ProcessFunctionInstance::new(&function, "co", keyed_ctx()).unwrap();
        assert_eq!((co.inputs(), co.has_broadcast()), (2, false));
        co.process_input(0, &[keyed("k", &["a"])]).unwrap();
        co.process(&[keyed("k", &["a"])]).unwrap();
        let second = co.process_input(1, &[keyed("k", &["b"])]).unwrap_err().to_string();
        assert!(second.contains("failed while processing key \"k\": two"), "{second}");
        let timers = [KeyedTimers {
            key: b"k".to_vec(),
            timers: vec![crate::runtime::bindings::weir::function::types::FiredTimer {
                timestamp: 5,
                domain: crate::runtime::bindings::weir::function::types::TimeDomain::EventTime,
            }],
        }];
        let fired = co.fire_timers(&timers).unwrap_err().to_string();
        assert!(fired.ends_with(": timers"), "on-timers of co-process-fn: {fired}");
        let third = co.process_input(2, &[keyed("k", &["c"])]).unwrap_err().to_string();
        assert!(third.contains("it takes 2 keyed inputs"), "{third}");
        let broadcast = co.process_broadcast(&[ev("rule")]).unwrap_err().to_string();
        assert!(
            broadcast.contains("while processing 1 broadcast events")
                && broadcast.contains("it takes no broadcast input"),
            "{broadcast}"
        );
    }

    #[test]
    fn a_broadcast_process_function_is_one_process_function_with_broadcast_input() {
        let function = load(None, "broadcast-process-function");
        let mut f = ProcessFunctionInstance::new(&function, "rules", keyed_ctx()).unwrap();
        assert_eq!((f.inputs(), f.has_broadcast()), (1, true));
        let error = f.process_broadcast(&[ev("rule")]).unwrap_err();
        assert!(
            error.poisons_instance()
                && error.to_string().contains("while processing 1 broadcast events"),
            "{error}"
        );
        use crate::runtime::bindings::weir::function::broadcast::HostBroadcastMap;
        let ctx = f.ctx();
        let map = HostBroadcastMap::open(&mut ctx.broadcast(), "m".into()).unwrap().unwrap();
        assert!(
            HostBroadcastMap::put(&mut ctx.broadcast(), map, b"k".to_vec(), b"v".to_vec())
                .unwrap()
                .is_err(),
            "read-only again once the broadcast call is over, even after a trap"
        );
        let plain = load(None, "process-function");
        let mut plain = ProcessFunctionInstance::new(&plain, "plain", keyed_ctx()).unwrap();
        assert_eq!((plain.inputs(), plain.has_broadcast()), (1, false));
        let one = plain.process_input(1, &[keyed("k", &["a"])]).unwrap_err().to_string();
        assert!(one.contains("it takes 1 keyed input (a co-process"), "{one}");
        let neither = load(None, "key-function");
        let error = ProcessFunctionInstance::new(&neither, "key", keyed_ctx())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("exports neither `weir:function/process-fn@0.2.0`"), "{error}");
    }

    /// What the test calls are doing.
    const TESTING: Doing = Doing { what: "testing", count: 1, unit: "call" };

    fn instance(limits: FunctionLimits) -> (Store<HostCtx>, wasmtime::component::Instance) {
        let engine = new_engine(EngineLimits::for_functions(2, &limits)).unwrap();
        let function = FunctionLoader::new(engine, None)
            .unwrap()
            .load(&wat::parse_str(MISBEHAVES).unwrap())
            .unwrap();
        instantiate(
            &function,
            HostCtx::new("misbehaves", None, 1).with_limits(limits),
            "misbehaves",
            |_, _, instance| Ok(*instance),
        )
        .unwrap()
    }

    #[test]
    fn an_endless_loop_is_stopped_after_its_cpu_budget() {
        let limits =
            FunctionLimits { call_timeout: Duration::from_millis(50), ..Default::default() };
        let (mut store, instance) = instance(limits);
        let spin = instance.get_typed_func::<(), ()>(&mut store, "spin").unwrap();
        let started = Instant::now();
        let error =
            call_wasm(&mut store, "misbehaves", Some(TESTING), |store| spin.call(store, ()))
                .unwrap_err();
        assert!(
            error.to_string().contains(
                "deadline exceeded: a call used more than 50ms of CPU time while testing"
            ),
            "{error}"
        );
        assert!(error.poisons_instance());
        assert!(started.elapsed() < Duration::from_secs(30), "stopped in {:?}", started.elapsed());
    }

    #[test]
    fn fuel_runs_out() {
        let limits = FunctionLimits {
            fuel: Some(1_000_000),
            call_timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let (mut store, instance) = instance(limits);
        let spin = instance.get_typed_func::<(), ()>(&mut store, "spin").unwrap();
        let error =
            call_wasm(&mut store, "misbehaves", Some(TESTING), |store| spin.call(store, ()))
                .unwrap_err();
        assert!(error.to_string().contains("fuel of 1000000 exhausted"), "{error}");
    }

    #[test]
    fn memory_beyond_the_limit_traps_with_the_limit() {
        let limits = FunctionLimits { memory_bytes: 2 << 20, ..Default::default() };
        let (mut store, instance) = instance(limits);
        let grow = instance.get_typed_func::<(u32,), (i32,)>(&mut store, "grow").unwrap();
        let within =
            call_wasm(&mut store, "misbehaves", Some(TESTING), |store| grow.call(store, (15,)))
                .unwrap();
        assert_eq!(within, (1,), "1 + 15 pages = 1 MiB fits");
        let error =
            call_wasm(&mut store, "misbehaves", Some(TESTING), |store| grow.call(store, (32,)))
                .unwrap_err();
        assert!(
            error.to_string().contains("memory limit of 2 MiB exceeded (it asked for 3 MiB)"),
            "{error}"
        );
    }
}
