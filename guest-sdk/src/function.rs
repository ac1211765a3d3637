//! The traits a function implements, and the glue that runs them for a
//! batch from the host.

use serde::{de::DeserializeOwned, Serialize};

use crate::__private::wit::types::{
    Accumulate, AccumulateBatch, EventBatch, FunctionError, KeyedBatch, KeyedEvents, KeyedTimers,
    PackedKeys, ValueCells, Window, WindowEvents, WindowResults,
};
use std::cell::RefCell;

use crate::packing::EventBuffer;
use crate::{codec, host, packing, Context, Error, Event, FiredTimer};

/// Computes the key a keyed pipeline partitions events by.
///
/// Keys are plain bytes; events with equal keys share state and are
/// processed in order by one subtask.
pub trait KeyFunction: Default + 'static {
    /// The key of `event`.
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error>;

    /// Append the key of `event` to `out` (which may hold other keys
    /// before it: only append). What the host calls; override it to make
    /// keys without allocating one per event. By default, [`Self::key`].
    fn key_into(&mut self, event: &Event, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&self.key(event)?);
        Ok(())
    }
}

/// Processes the events of one key with that key's state.
pub trait ProcessFunction: Default + 'static {
    /// Handle `events` (oldest first) of `key`. State handles read and write
    /// `key`'s state; outputs go through `ctx`. The events are borrowed:
    /// the SDK reuses their buffers for the next batch.
    fn process(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error>;

    /// A timer registered for `key` (with `Context::register_*_timer`) has
    /// fired. State handles are scoped to `key`. Does nothing by default.
    fn on_timer(&mut self, key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let _ = (key, timer, ctx);
        Ok(())
    }
}

/// A stateless transform — a map, a filter or a flat-map — run in the
/// stage before it, with no exchange between them. For each event it
/// emits any number of outputs into `out`: none filters the event out, one
/// maps it, several flat-map it. It has no keyed state and no timers.
///
/// A map:
/// ```
/// use weir_sdk::{Emitter, Error, Event, TransformFunction};
///
/// /// Upper-cases every value.
/// #[derive(Default)]
/// struct Shout;
///
/// #[weir_sdk::function]
/// impl TransformFunction for Shout {
///     fn transform(&mut self, event: &Event, out: &mut Emitter) -> Result<(), Error> {
///         out.emit_value(&event.value.to_ascii_uppercase(), event.timestamp);
///         Ok(())
///     }
/// }
///
/// let mut harness = weir_sdk::testing::Harness::<Shout>::new();
/// let out = harness.transform(vec![Event::new(b"hi".to_vec(), 1)]).unwrap();
/// assert_eq!(out[0].value, b"HI");
/// ```
///
/// A filter and a flat-map:
/// ```
/// # use weir_sdk::{Emitter, Error, Event, TransformFunction};
/// /// Keeps non-empty values.
/// #[derive(Default)]
/// struct NonEmpty;
///
/// impl TransformFunction for NonEmpty {
///     fn transform(&mut self, event: &Event, out: &mut Emitter) -> Result<(), Error> {
///         if !event.value.is_empty() {
///             out.emit(event);
///         }
///         Ok(())
///     }
/// }
///
/// /// One output per space-separated word.
/// #[derive(Default)]
/// struct Words;
///
/// impl TransformFunction for Words {
///     fn transform(&mut self, event: &Event, out: &mut Emitter) -> Result<(), Error> {
///         for word in event.value.split(|b| *b == b' ').filter(|w| !w.is_empty()) {
///             out.emit_value(word, event.timestamp);
///         }
///         Ok(())
///     }
/// }
///
/// let events = vec![Event::new(b"a b".to_vec(), 0), Event::new(Vec::new(), 0)];
/// assert_eq!(weir_sdk::testing::Harness::<NonEmpty>::new().transform(events.clone()).unwrap().len(), 1);
/// assert_eq!(weir_sdk::testing::Harness::<Words>::new().transform(events).unwrap().len(), 2);
/// ```
pub trait TransformFunction: Default + 'static {
    /// Emit the outputs for `event` into `out`, in order.
    fn transform(&mut self, event: &Event, out: &mut Emitter) -> Result<(), Error>;
}

/// Where a [`TransformFunction`] puts its outputs. They are packed as they
/// come and handed to the host once per batch.
#[derive(Debug, Default)]
pub struct Emitter {
    outputs: packing::BatchPacker,
}

impl Emitter {
    /// Emit `event` (owned or borrowed), as it is or changed.
    pub fn emit(&mut self, event: impl std::borrow::Borrow<Event>) {
        self.outputs.push_event(event.borrow());
    }

    /// Emit an event with payload `value` at event time `timestamp` (no
    /// source key, no headers) without building an [`Event`].
    #[inline]
    pub fn emit_value(&mut self, value: &[u8], timestamp: i64) {
        self.outputs.push(value, timestamp, None, &[]);
    }

    /// Send `event` to the side output called `name` (declared in the
    /// pipeline spec; events for undeclared outputs are counted and
    /// dropped).
    pub fn emit_to(&mut self, name: &str, event: impl std::borrow::Borrow<Event>) {
        host::emit_to(name, event.borrow());
    }
}

/// Processes two keyed inputs whose events share the key's state and
/// timers, as Flink's `KeyedCoProcessFunction`: for example orders and
/// payments keyed by order id. State handles and [`Context`] work as in
/// [`ProcessFunction`].
///
/// ```
/// use weir_sdk::{function, CoProcessFunction, Context, Error, Event, ValueState};
///
/// /// Emits a payment once its order has been seen (payments that come
/// /// first wait in state).
/// struct Match { order: ValueState<bool>, waiting: ValueState<Vec<Vec<u8>>> }
///
/// impl Default for Match {
///     fn default() -> Self {
///         Self { order: ValueState::new("order"), waiting: ValueState::new("waiting") }
///     }
/// }
///
/// #[function]
/// impl CoProcessFunction for Match {
///     fn process1(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
///         self.order.set(&true)?;
///         for payment in self.waiting.get()?.unwrap_or_default() {
///             ctx.emit_value(&payment, events[0].timestamp);
///         }
///         self.waiting.clear()
///     }
///
///     fn process2(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
///         if self.order.get()?.unwrap_or(false) {
///             events.iter().for_each(|e| ctx.emit(e));
///             return Ok(());
///         }
///         let mut waiting = self.waiting.get()?.unwrap_or_default();
///         waiting.extend(events.iter().map(|e| e.value.clone()));
///         self.waiting.set(&waiting)
///     }
/// }
///
/// let mut harness = weir_sdk::testing::Harness::<Match>::new();
/// assert!(harness.process2(b"o1", vec![Event::new(b"pay".to_vec(), 5)]).unwrap().is_empty());
/// let out = harness.process1(b"o1", vec![Event::new(b"order".to_vec(), 6)]).unwrap();
/// assert_eq!(out[0].value, b"pay");
/// ```
pub trait CoProcessFunction: Default + 'static {
    /// Handle `events` (oldest first) of `key` from the first input.
    fn process1(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error>;

    /// Handle `events` (oldest first) of `key` from the second input.
    fn process2(&mut self, key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error>;

    /// A timer registered for `key` has fired (whichever input registered
    /// it). Does nothing by default.
    fn on_timer(&mut self, key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let _ = (key, timer, ctx);
        Ok(())
    }
}

/// A [`ProcessFunction`] that also reads a broadcast input, as Flink's
/// `KeyedBroadcastProcessFunction`: broadcast events (rules, a
/// configuration) reach every subtask in the same order and go to
/// [`Self::process_broadcast`], which keeps them in [`BroadcastState`]
/// (the same on every subtask, checkpointed and restored by the host);
/// [`ProcessFunction::process`] reads that state for any key.
///
/// Put `#[function]` on the `impl BroadcastProcessFunction` block only:
/// it exports the keyed side (`ProcessFunction`) too.
///
/// Broadcast state is read-only in `process` and `on_timer` (a write
/// returns an error), and keyed state and timers are not available in
/// `process_broadcast` (no key is selected). Broadcast events are not
/// ordered with keyed events by event time: a rule applies from the moment
/// the broadcast event reaches the subtask.
///
/// ```
/// use weir_sdk::{
///     function, BroadcastProcessFunction, BroadcastState, Context, Error, Event, ProcessFunction,
/// };
///
/// /// Emits values that are on the broadcast block list.
/// struct Blocked { list: BroadcastState<Vec<u8>, ()> }
///
/// impl Default for Blocked {
///     fn default() -> Self { Self { list: BroadcastState::new("blocked") } }
/// }
///
/// impl ProcessFunction for Blocked {
///     fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
///         for event in events {
///             if self.list.contains(&event.value)? {
///                 ctx.emit(event);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// #[function]
/// impl BroadcastProcessFunction for Blocked {
///     fn process_broadcast(&mut self, event: &Event, _ctx: &mut Context) -> Result<(), Error> {
///         self.list.put(&event.value, &())
///     }
/// }
///
/// let mut harness = weir_sdk::testing::Harness::<Blocked>::new();
/// harness.process_broadcast(vec![Event::new(b"x".to_vec(), 0)]).unwrap();
/// let out = harness.process(b"k", vec![Event::new(b"x".to_vec(), 1), Event::new(b"y".to_vec(), 2)]);
/// assert_eq!(out.unwrap().len(), 1);
/// ```
///
/// [`BroadcastState`]: crate::BroadcastState
pub trait BroadcastProcessFunction: ProcessFunction {
    /// Handle one broadcast event: update [`BroadcastState`](crate::BroadcastState),
    /// emit outputs if need be.
    fn process_broadcast(&mut self, event: &Event, ctx: &mut Context) -> Result<(), Error>;
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
    fn merge(
        &mut self,
        a: Self::Accumulator,
        b: Self::Accumulator,
    ) -> Result<Self::Accumulator, Error>;

    /// The output of `key`'s finished `window` (fired again with the
    /// updated accumulator when a late event arrives within the allowed
    /// lateness).
    fn result(
        &mut self,
        key: &[u8],
        window: Window,
        accumulator: Self::Accumulator,
    ) -> Result<Vec<Event>, Error>;
}

/// A window process function: sees all events of a window at once when it
/// fires (the host keeps them until then). Prefer [`AggregateFunction`]
/// when an accumulator suffices: it keeps far less state.
pub trait WindowProcessFunction: Default + 'static {
    /// The output of `key`'s finished `window`, given all its events.
    fn process_window(
        &mut self,
        key: &[u8],
        window: Window,
        events: Vec<Event>,
    ) -> Result<Vec<Event>, Error>;
}

fn function_error(error: Error) -> FunctionError {
    FunctionError { message: error.message().to_string() }
}

/// Run `function`'s key extraction over a batch (called by the test harness).
pub fn extract_keys<F: KeyFunction>(
    function: &mut F,
    events: Vec<Event>,
) -> Result<Vec<Vec<u8>>, FunctionError> {
    events.iter().map(|event| function.key(event)).collect::<Result<_, _>>().map_err(function_error)
}

thread_local! {
    /// The input events and the output context, reused from call to call
    /// (a component instance runs one call at a time).
    static SCRATCH: RefCell<(EventBuffer, Context)> = RefCell::new((EventBuffer::default(), Context::new()));
}

/// Run `f` with the reused input buffer and a context emptied of what an
/// earlier (failed) call may have left.
fn with_scratch<R>(f: impl FnOnce(&mut EventBuffer, &mut Context) -> R) -> R {
    SCRATCH.with_borrow_mut(|(input, ctx)| {
        ctx.clear();
        f(input, ctx)
    })
}

/// Run `function`'s key extraction over a packed batch (called by the glue):
/// events unpacked into reused buffers, keys packed as they come.
pub fn extract_packed_keys<F: KeyFunction>(
    function: &mut F,
    events: EventBatch,
) -> Result<PackedKeys, FunctionError> {
    with_scratch(|input, _| {
        let mut keys = packing::KeyPacker::with_capacity(events.timestamps.len());
        input.for_each(&events, |event| keys.push_with(|out| function.key_into(event, out)))?;
        Ok(keys.finish())
    })
    .map_err(function_error)
}

/// Run `function` over a packed batch, one key at a time (called by the
/// glue): no allocation per event once the buffers have grown.
pub fn process_packed<F: ProcessFunction>(
    function: &mut F,
    batch: KeyedBatch,
) -> Result<(), FunctionError> {
    run_packed(batch, |key, events, ctx| function.process(key, events, ctx))
}

/// Run `function`'s `process1` (`input` 0) or `process2` over a packed
/// batch, one key at a time (called by the glue).
pub fn co_process_packed<F: CoProcessFunction>(
    function: &mut F,
    input: u8,
    batch: KeyedBatch,
) -> Result<(), FunctionError> {
    match input {
        0 => run_packed(batch, |key, events, ctx| function.process1(key, events, ctx)),
        _ => run_packed(batch, |key, events, ctx| function.process2(key, events, ctx)),
    }
}

/// A handler of one key's events.
type Handler<'a> = dyn FnMut(&[u8], &[Event], &mut Context) -> Result<(), Error> + 'a;

/// Run `handle` over a packed batch, one key at a time.
fn run_packed(
    mut batch: KeyedBatch,
    mut handle: impl FnMut(&[u8], &[Event], &mut Context) -> Result<(), Error>,
) -> Result<(), FunctionError> {
    host::begin_batch(
        std::mem::replace(&mut batch.prefetched, packing::no_cells()),
        batch.event_ends.len(),
    );
    let processed = with_scratch(|input, ctx| {
        let events = input.fill(&batch.events)?;
        for (index, group) in packing::groups(&batch, events).enumerate() {
            let (key, events) = group?;
            host::select_key(key_index(index)?, key)?;
            handle(key, events, ctx).inspect_err(|_| host::report_current_key())?;
        }
        ctx.flush();
        Ok(())
    });
    // State written before an error is kept, as without read-ahead.
    let written = host::end_batch();
    processed.and(written).map_err(function_error)
}

fn key_index(index: usize) -> Result<u32, Error> {
    u32::try_from(index).map_err(|_| Error::msg("batch too large"))
}

/// Run `function` over a batch, one key at a time (called by the native
/// test harness).
pub fn process_batch<F: ProcessFunction>(
    function: &mut F,
    batch: Vec<KeyedEvents>,
) -> Result<(), FunctionError> {
    run_batch(batch, &mut |key, events, ctx| function.process(key, events, ctx))
}

/// Run `function`'s `process1` (`input` 0) or `process2` over a batch, one
/// key at a time (called by the native test harness).
pub fn co_process_batch<F: CoProcessFunction>(
    function: &mut F,
    input: u8,
    batch: Vec<KeyedEvents>,
) -> Result<(), FunctionError> {
    match input {
        0 => run_batch(batch, &mut |key, events, ctx| function.process1(key, events, ctx)),
        _ => run_batch(batch, &mut |key, events, ctx| function.process2(key, events, ctx)),
    }
}

fn run_batch(batch: Vec<KeyedEvents>, handle: &mut Handler<'_>) -> Result<(), FunctionError> {
    with_scratch(|_, ctx| {
        for (index, KeyedEvents { key, events }) in batch.iter().enumerate() {
            host::select_key(key_index(index)?, key)?;
            handle(key, events, ctx)?;
        }
        ctx.flush();
        Ok(())
    })
    .map_err(function_error)
}

/// Deliver fired timers to `function`, one key at a time (called by the
/// glue and by the native test harness).
pub fn fire_timers<F: ProcessFunction>(
    function: &mut F,
    batch: Vec<KeyedTimers>,
) -> Result<(), FunctionError> {
    run_timers(batch, |key, timer, ctx| function.on_timer(key, timer, ctx))
}

/// Deliver fired timers to a co-process `function`, one key at a time
/// (called by the glue and by the native test harness).
pub fn co_fire_timers<F: CoProcessFunction>(
    function: &mut F,
    batch: Vec<KeyedTimers>,
) -> Result<(), FunctionError> {
    run_timers(batch, |key, timer, ctx| function.on_timer(key, timer, ctx))
}

fn run_timers(
    batch: Vec<KeyedTimers>,
    mut handle: impl FnMut(&[u8], FiredTimer, &mut Context) -> Result<(), Error>,
) -> Result<(), FunctionError> {
    // Nothing is read ahead for timers; the batch scope still starts the
    // call's key selection afresh.
    host::begin_batch(packing::no_cells(), batch.len());
    let fired = with_scratch(|_, ctx| {
        for (index, KeyedTimers { key, timers }) in batch.into_iter().enumerate() {
            host::select_key(key_index(index)?, &key)?;
            for timer in timers {
                handle(&key, timer, ctx).inspect_err(|_| host::report_current_key())?;
            }
        }
        ctx.flush();
        Ok(())
    });
    let written = host::end_batch();
    fired.and(written).map_err(function_error)
}

/// Run `function`'s `process_broadcast` over a packed batch of broadcast
/// events (called by the glue and by the native test harness): no key is
/// selected, broadcast state is writable.
pub fn broadcast_packed<F: BroadcastProcessFunction>(
    function: &mut F,
    events: EventBatch,
) -> Result<(), FunctionError> {
    host::begin_batch(packing::no_cells(), 0);
    let processed = with_scratch(|input, ctx| {
        for event in input.fill(&events)? {
            function.process_broadcast(event, ctx)?;
        }
        ctx.flush();
        Ok(())
    });
    let written = host::end_batch();
    processed.and(written).map_err(function_error)
}

/// Run `function` over a packed batch of events, packing its outputs
/// (called by the glue and by the native test harness).
pub fn transform_packed<F: TransformFunction>(
    function: &mut F,
    events: EventBatch,
) -> Result<EventBatch, FunctionError> {
    with_scratch(|input, _| {
        let mut out = Emitter::default();
        for event in input.fill(&events)? {
            function.transform(event, &mut out)?;
        }
        Ok(out.outputs.into_batch())
    })
    .map_err(function_error)
}

/// Fold `events` into the encoded accumulator (`None`: a new window's),
/// appending the new one to `out`.
fn fold<F: AggregateFunction>(
    function: &mut F,
    accumulator: Option<&[u8]>,
    events: &[Event],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let mut acc: F::Accumulator = accumulator.map_or(Ok(Default::default()), codec::decode)?;
    for event in events {
        function.add(&mut acc, event)?;
    }
    codec::encode_into(&acc, out)
}

/// Fold each entry's events into its accumulator (called by the native
/// test harness).
pub fn aggregate_add<F: AggregateFunction>(
    function: &mut F,
    batch: Vec<Accumulate>,
) -> Result<Vec<Vec<u8>>, FunctionError> {
    let mut out = Vec::with_capacity(batch.len());
    for Accumulate { accumulator, events } in &batch {
        let mut encoded = Vec::new();
        fold(function, accumulator.as_deref(), events, &mut encoded).map_err(function_error)?;
        out.push(encoded);
    }
    Ok(out)
}

/// Fold each window's events into its accumulator, packed both ways
/// (called by the glue): no allocation per event.
pub fn aggregate_add_packed<F: AggregateFunction>(
    function: &mut F,
    batch: AccumulateBatch,
) -> Result<ValueCells, FunctionError> {
    with_scratch(|input, _| {
        let events = input.fill(&batch.events)?;
        let windows = batch.event_ends.len();
        let mut out = ValueCells {
            states: Vec::new(),
            present: Vec::with_capacity(windows),
            values: Vec::with_capacity(windows * 8),
            ends: Vec::with_capacity(windows),
        };
        for (accumulator, events) in packing::accumulate_groups(&batch, events) {
            let (accumulator, events) = (accumulator?, events?);
            fold(function, accumulator, events, &mut out.values)?;
            out.present.push(true);
            out.ends.push(
                u32::try_from(out.values.len())
                    .map_err(|_| Error::msg("accumulators over 4 GiB"))?,
            );
        }
        Ok(out)
    })
    .map_err(function_error)
}

/// Merge two encoded accumulators (called by the glue).
pub fn aggregate_merge<F: AggregateFunction>(
    function: &mut F,
    a: Vec<u8>,
    b: Vec<u8>,
) -> Result<Vec<u8>, FunctionError> {
    let merged = (|| {
        function.merge(codec::decode(&a)?, codec::decode(&b)?).and_then(|m| codec::encode(&m))
    })();
    merged.map_err(function_error)
}

/// The outputs of finished windows, packed (called by the glue and by the
/// native test harness).
pub fn aggregate_results<F: AggregateFunction>(
    function: &mut F,
    batch: WindowResults,
) -> Result<EventBatch, FunctionError> {
    let mut out = packing::BatchPacker::default();
    let produced = packing::window_results(&batch).try_for_each(|window| {
        let (key, window, accumulator) = window?;
        let accumulator = codec::decode(accumulator)?;
        function.result(key, window, accumulator)?.iter().for_each(|event| out.push_event(event));
        Ok(())
    });
    produced.map(|()| out.into_batch()).map_err(function_error)
}

/// The outputs of finished windows given their events (called by the glue).
pub fn window_process<F: WindowProcessFunction>(
    function: &mut F,
    batch: Vec<WindowEvents>,
) -> Result<Vec<Event>, FunctionError> {
    let mut out = Vec::new();
    for WindowEvents { key, window, events } in batch {
        out.extend(function.process_window(&key, window, events).map_err(function_error)?);
    }
    Ok(out)
}

/// The WIT export of a function trait's implementation, by the trait's
/// name: what `#[weir_sdk::function]` expands inside the module it
/// generates for a `wasm32` build, where that world's bindings
/// (`exports`), the `Export` type and `with_instance` are. One arm per
/// function kind of `wit/roles.toml` the Rust SDK implements (the macro
/// itself takes its list of kinds from that table).
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_export_role {
    (KeyFunction) => {
        impl exports::weir::function::key_fn::Guest for Export {
            fn extract_keys(
                events: $crate::__private::wit::types::EventBatch,
            ) -> ::std::result::Result<
                $crate::__private::wit::types::PackedKeys,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::extract_packed_keys(f, events))
            }
        }
    };
    (TransformFunction) => {
        impl exports::weir::function::transform_fn::Guest for Export {
            fn transform(
                events: $crate::__private::wit::types::EventBatch,
            ) -> ::std::result::Result<
                $crate::__private::wit::types::EventBatch,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::transform_packed(f, events))
            }
        }
    };
    (ProcessFunction) => {
        impl exports::weir::function::process_fn::Guest for Export {
            fn process(
                batch: $crate::__private::wit::types::KeyedBatch,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::process_packed(f, batch))
            }

            fn on_timers(
                batch: ::std::vec::Vec<$crate::__private::wit::types::KeyedTimers>,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::fire_timers(f, batch))
            }
        }
    };
    (BroadcastProcessFunction) => {
        // The keyed side, as for `ProcessFunction`.
        impl exports::weir::function::process_fn::Guest for Export {
            fn process(
                batch: $crate::__private::wit::types::KeyedBatch,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::process_packed(f, batch))
            }

            fn on_timers(
                batch: ::std::vec::Vec<$crate::__private::wit::types::KeyedTimers>,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::fire_timers(f, batch))
            }
        }

        impl exports::weir::function::broadcast_fn::Guest for Export {
            fn process_broadcast(
                events: $crate::__private::wit::types::EventBatch,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::broadcast_packed(f, events))
            }
        }
    };
    (CoProcessFunction) => {
        impl exports::weir::function::co_process_fn::Guest for Export {
            fn process1(
                batch: $crate::__private::wit::types::KeyedBatch,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::co_process_packed(f, 0, batch))
            }

            fn process2(
                batch: $crate::__private::wit::types::KeyedBatch,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::co_process_packed(f, 1, batch))
            }

            fn on_timers(
                batch: ::std::vec::Vec<$crate::__private::wit::types::KeyedTimers>,
            ) -> ::std::result::Result<(), $crate::__private::wit::types::FunctionError> {
                with_instance(|f| $crate::__private::co_fire_timers(f, batch))
            }
        }
    };
    (AggregateFunction) => {
        impl exports::weir::function::aggregate_fn::Guest for Export {
            fn add(
                batch: $crate::__private::wit::types::AccumulateBatch,
            ) -> ::std::result::Result<
                $crate::__private::wit::types::ValueCells,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::aggregate_add_packed(f, batch))
            }

            fn merge(
                a: ::std::vec::Vec<u8>,
                b: ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<
                ::std::vec::Vec<u8>,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::aggregate_merge(f, a, b))
            }

            fn results(
                batch: $crate::__private::wit::types::WindowResults,
            ) -> ::std::result::Result<
                $crate::__private::wit::types::EventBatch,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::aggregate_results(f, batch))
            }
        }
    };
    (WindowProcessFunction) => {
        impl exports::weir::function::window_process_fn::Guest for Export {
            fn process_windows(
                batch: ::std::vec::Vec<$crate::__private::wit::types::WindowEvents>,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::Event>,
                $crate::__private::wit::types::FunctionError,
            > {
                with_instance(|f| $crate::__private::window_process(f, batch))
            }
        }
    };
}
