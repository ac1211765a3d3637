//! Where a producer's output goes: a source's events, or what a keyed
//! subtask emits. Each output (the main one, each side output) has routes:
//! to a sink, through a stateless transform chained into the producer, or
//! over an exchange to a keyed stage — keyed by that stage's key function
//! (run here, where the records are) and sent to the subtask owning the
//! key's group, or broadcast to every subtask.
//!
//! Events are buffered per destination and sent as batches ([`Router::flush`]);
//! watermarks, barriers and the end of input go to every channel of every
//! route after what was buffered before them, so each consumer sees them
//! in order with the events of this producer.

use crossbeam_channel::Sender as SyncSender;
use std::collections::BTreeMap;
use std::sync::mpsc::SyncSender as SinkSender;

use super::error::RunError;
use super::failures::{self, SideEvents};
use super::messages::{SinkMessage, SubtaskMessage};
use super::operator::{FunctionCode, FunctionEnv, RoutedBatch};
use crate::connectors::kafka::exchange::KEY_HEADER;
use crate::observe::live::{LiveCounts, LiveMetrics, Stopwatch};
use crate::runtime::packed::{Emitted, EventRef, PackedEvents};
use crate::runtime::packing::KeyList;
use crate::runtime::{KeyFunctionInstance, TransformInstance};
use crate::state::{key_group, subtask_for_key_group, SnapshotForm};
use crate::Event;

/// A route before its functions are instantiated (on the producer's thread).
pub(crate) enum RoutePlan {
    /// To sink `index` (see [`SinkMessage::Batch`]).
    Sink(usize),
    /// To sink `sink`, each event with its key by `key` as its last header
    /// (a cluster exchange; the sink strips it).
    KeyedSink {
        /// The key function of the stage the sink feeds.
        key: FunctionCode,
        /// The sink.
        sink: usize,
    },
    /// Keyed by `key` to the subtasks of a stage (one channel each).
    Keyed {
        /// The key function.
        key: FunctionCode,
        /// The stage it keys for, for errors (empty in a line spec).
        name: String,
        /// Route events packed (see [`RoutedBatch`]).
        bare: bool,
        /// One channel per subtask of the stage.
        subtasks: Vec<SyncSender<SubtaskMessage>>,
    },
    /// To every subtask of a stage.
    Broadcast(Vec<SyncSender<SubtaskMessage>>),
    /// Through a stateless transform.
    Transform {
        /// The function.
        code: FunctionCode,
        /// Its node's name.
        name: String,
        /// Where its outputs go.
        outputs: PortsPlan,
    },
}

/// Routes by output (`None`: the main output), before instantiation.
#[derive(Default)]
pub(crate) struct PortsPlan {
    /// Routes by output.
    pub(crate) ports: BTreeMap<Option<String>, Vec<RoutePlan>>,
}

impl PortsPlan {
    /// Every subtask channel of every route, transforms included.
    fn channels(&self) -> Vec<SyncSender<SubtaskMessage>> {
        let mut all = Vec::new();
        for route in self.ports.values().flatten() {
            match route {
                RoutePlan::Keyed { subtasks, .. } | RoutePlan::Broadcast(subtasks) => {
                    all.extend(subtasks.iter().cloned())
                }
                RoutePlan::Transform { outputs, .. } => all.extend(outputs.channels()),
                RoutePlan::Sink(_) | RoutePlan::KeyedSink { .. } => {}
            }
        }
        all
    }
}

/// A live route.
enum Route {
    Sink(usize),
    KeyedSink {
        keyer: Box<KeyFunctionInstance>,
        sink: usize,
    },
    Keyed {
        keyer: Box<KeyFunctionInstance>,
        bare: bool,
        subtasks: Vec<SyncSender<SubtaskMessage>>,
        /// Events waiting for each subtask.
        routed: Vec<RoutedBatch>,
    },
    Broadcast {
        subtasks: Vec<SyncSender<SubtaskMessage>>,
        waiting: Vec<Event>,
    },
    Transform {
        function: Box<TransformInstance>,
        outputs: Ports,
    },
}

/// Live routes by output.
struct Ports {
    ports: BTreeMap<Option<String>, Vec<Route>>,
}

/// A producer's live routes, its channels and its buffers.
pub(crate) struct Router<'m> {
    ports: Ports,
    /// Every subtask channel, for watermarks, barriers and the end.
    channels: Vec<SyncSender<SubtaskMessage>>,
    /// To the sink thread.
    sink: SinkSender<SinkMessage>,
    /// This producer's input number at the sink.
    from: usize,
    /// Events waiting for each sink.
    sinks: Vec<PackedEvents>,
    /// The side output of the `dead-letter` failure policy, if chosen.
    dead_letter: Option<String>,
    max_parallelism: u16,
    metrics: &'m LiveMetrics,
    /// The producer's own counts (time held up by full channels).
    counts: std::sync::Arc<LiveCounts>,
    /// Events sent to outputs nobody takes.
    dropped: u64,
}

/// What a router needs besides its plan.
pub(crate) struct RouterLinks<'m> {
    /// To the sink thread.
    pub(crate) sink: SinkSender<SinkMessage>,
    /// The producer's input number at the sink.
    pub(crate) from: usize,
    /// How many sinks.
    pub(crate) sinks: usize,
    /// The run's counters.
    pub(crate) metrics: &'m LiveMetrics,
    /// The producer's own counters.
    pub(crate) counts: std::sync::Arc<LiveCounts>,
}

impl<'m> Router<'m> {
    /// Instantiate `plan`'s functions as `owner`'s.
    pub(crate) fn new(
        plan: PortsPlan,
        owner: &str,
        env: &FunctionEnv,
        links: RouterLinks<'m>,
    ) -> Result<Self, RunError> {
        let channels = plan.channels();
        Ok(Self {
            ports: instantiate(plan, owner, env)?,
            channels,
            sink: links.sink,
            from: links.from,
            sinks: (0..links.sinks).map(|_| PackedEvents::default()).collect(),
            dead_letter: env.dead_letter.clone(),
            max_parallelism: env.max_parallelism,
            metrics: links.metrics,
            counts: links.counts,
            dropped: 0,
        })
    }

    /// Route `events` of output `port` (`None`: the main output).
    pub(crate) fn emit(
        &mut self,
        port: Option<&str>,
        events: impl Into<Emitted>,
    ) -> Result<(), RunError> {
        let mut context = Emit {
            sinks: &mut self.sinks,
            dead_letter: self.dead_letter.as_deref(),
            max_parallelism: self.max_parallelism,
            metrics: self.metrics,
            dropped: &mut self.dropped,
        };
        route_events(&mut self.ports, port, events.into(), &mut context)
    }

    /// Route side-output events, each named by its output.
    pub(crate) fn emit_side(&mut self, events: Vec<(String, Event)>) -> Result<(), RunError> {
        by_name(events).into_iter().try_for_each(|(name, events)| self.emit(Some(&name), events))
    }

    /// The run's metrics.
    pub(crate) fn metrics(&self) -> &'m LiveMetrics {
        self.metrics
    }

    /// Send what is buffered.
    pub(crate) fn flush(&mut self) -> Result<(), RunError> {
        flush_ports(&mut self.ports, &self.counts)?;
        for (index, events) in self.sinks.iter_mut().enumerate() {
            if !events.is_empty() {
                let next = events.with_capacity_of();
                let events = std::mem::replace(events, next);
                let batch = SinkMessage::Batch { from: self.from, sink: index, events };
                self.sink.send_counted(batch, &self.counts)?;
            }
        }
        if self.dropped > 0 {
            self.metrics.side_dropped.fetch_add(self.dropped, std::sync::atomic::Ordering::Relaxed);
            self.dropped = 0;
        }
        Ok(())
    }

    /// Send `message()` to every subtask channel, after what is buffered;
    /// watermarks and idleness also to the sink thread (event time of the
    /// output, for sinks that pass it on).
    pub(crate) fn broadcast(
        &mut self,
        message: impl Fn() -> SubtaskMessage,
    ) -> Result<(), RunError> {
        self.flush()?;
        self.channels.iter().try_for_each(|tx| tx.send_counted(message(), &self.counts))?;
        let mark = match message() {
            SubtaskMessage::Watermark(mark) => Some(mark),
            SubtaskMessage::Idle => None,
            _ => return Ok(()),
        };
        self.sink.send_counted(SinkMessage::Watermark { from: self.from, mark }, &self.counts)
    }

    /// Barrier `id` after everything before it, to every subtask and the sink.
    pub(crate) fn barrier(&mut self, id: u64, form: SnapshotForm) -> Result<(), RunError> {
        self.broadcast(|| SubtaskMessage::Barrier(id, form))?;
        self.sink.send_counted(SinkMessage::Barrier { from: self.from, id }, &self.counts)
    }
}

/// A bounded channel whose sends count the time a full channel holds the
/// sender up as backpressure (a send that finds room costs no clock read).
trait CountedSend<T> {
    /// Send without waiting: `Err(Some(message))` when the channel is
    /// full, `Err(None)` when its receiver is gone.
    fn offer(&self, message: T) -> Result<(), Option<T>>;

    /// Send, waiting while the channel is full; false when its receiver
    /// is gone.
    fn send_waiting(&self, message: T) -> bool;

    /// Send `message`, waiting while the channel is full.
    fn send_counted(&self, message: T, counts: &LiveCounts) -> Result<(), RunError> {
        match self.offer(message) {
            Ok(()) => Ok(()),
            Err(Some(message)) => {
                let waiting = Stopwatch::start();
                let sent = self.send_waiting(message);
                counts.add_backpressured(waiting.elapsed());
                sent.then_some(()).ok_or(RunError::Stopped)
            }
            Err(None) => Err(RunError::Stopped),
        }
    }
}

impl<T> CountedSend<T> for SyncSender<T> {
    fn offer(&self, message: T) -> Result<(), Option<T>> {
        self.try_send(message).map_err(|e| match e {
            crossbeam_channel::TrySendError::Full(message) => Some(message),
            crossbeam_channel::TrySendError::Disconnected(_) => None,
        })
    }

    fn send_waiting(&self, message: T) -> bool {
        self.send(message).is_ok()
    }
}

impl<T> CountedSend<T> for SinkSender<T> {
    fn offer(&self, message: T) -> Result<(), Option<T>> {
        self.try_send(message).map_err(|e| match e {
            std::sync::mpsc::TrySendError::Full(message) => Some(message),
            std::sync::mpsc::TrySendError::Disconnected(_) => None,
        })
    }

    fn send_waiting(&self, message: T) -> bool {
        self.send(message).is_ok()
    }
}

/// What routing needs besides the routes.
struct Emit<'a> {
    sinks: &'a mut Vec<PackedEvents>,
    dead_letter: Option<&'a str>,
    max_parallelism: u16,
    metrics: &'a LiveMetrics,
    dropped: &'a mut u64,
}

fn route_events(
    ports: &mut Ports,
    port: Option<&str>,
    events: Emitted,
    context: &mut Emit<'_>,
) -> Result<(), RunError> {
    if events.is_empty() {
        return Ok(());
    }
    let Some(routes) = ports.ports.get_mut(&port.map(str::to_string)) else {
        if port.is_some() {
            *context.dropped += events.len() as u64;
        }
        return Ok(());
    };
    let last = routes.len().saturating_sub(1);
    let mut events = Some(events);
    let mut letters = Vec::new();
    for (index, route) in routes.iter_mut().enumerate() {
        // The events as a batch of their own: the last route takes them.
        let mut taken = || {
            if index == last {
                events.take().unwrap_or_default()
            } else {
                events.clone().unwrap_or_default()
            }
        };
        let mut batch = || taken().into_events();
        match route {
            // Packed as they came: no event taken apart on the way.
            Route::Sink(sink) => {
                if let Some(events) = &events {
                    events.append_to(&mut context.sinks[*sink]);
                }
            }
            Route::KeyedSink { keyer, sink } => {
                letters.extend(key_for_sink(keyer, taken(), *sink, context)?);
            }
            Route::Keyed { keyer, routed, subtasks, .. } => {
                letters.extend(key_and_route(keyer, taken(), routed, subtasks.len(), context)?);
            }
            Route::Broadcast { waiting, .. } => waiting.extend(batch()),
            Route::Transform { function, outputs } => {
                let output = function.transform(&batch())?;
                let side = std::mem::take(&mut function.ctx().side_outputs);
                route_events(outputs, None, output.into(), context)?;
                for (name, events) in by_name(side) {
                    route_events(outputs, Some(&name), events.into(), context)?;
                }
            }
        }
    }
    if let (Some(output), false) = (context.dead_letter, letters.is_empty()) {
        let output = output.to_string();
        let letters: Vec<Event> = letters.into_iter().map(|(_, e)| e).collect();
        route_events(ports, Some(&output), letters.into(), context)?;
    }
    Ok(())
}

/// Side-output events grouped by output, each output's in order.
fn by_name(events: Vec<(String, Event)>) -> BTreeMap<String, Vec<Event>> {
    let mut grouped: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for (name, event) in events {
        grouped.entry(name).or_default().push(event);
    }
    grouped
}

/// The keys of `events` (counted), the events the key function failed on
/// taken out as dead letters (under `dead-letter`).
fn keys_of(
    keyer: &mut KeyFunctionInstance,
    events: &mut Vec<Event>,
    context: &mut Emit<'_>,
) -> Result<(KeyList, SideEvents), RunError> {
    let dead_letter = context.dead_letter;
    count_key_call(context.metrics, events.len(), || match dead_letter {
        None => Ok((keyer.extract_keys(events)?, Vec::new())),
        Some(output) => failures::dead_letter_keys(keyer, events, output),
    })
}

/// Call the key function on `events` events by `call`, counted in the
/// run's metrics (events in, time, keys out).
fn count_key_call(
    metrics: &LiveMetrics,
    events: usize,
    call: impl FnOnce() -> Result<(KeyList, SideEvents), RunError>,
) -> Result<(KeyList, SideEvents), RunError> {
    metrics.key.add_in(events);
    let calling = Stopwatch::start();
    let (keys, letters) = call()?;
    metrics.key.add_call(calling.elapsed());
    metrics.key.add_out(keys.len());
    Ok((keys, letters))
}

/// Key `events` and add each to its subtask's batch; returns the dead
/// letters of events the key function failed on (under `dead-letter`).
/// Packed events (a source's) are keyed and routed as they are, unless
/// dead letters may have to be taken out of them; those read from an
/// exchange topic with the keys they were routed by (a cluster task's)
/// are routed by those keys, the key function not called again.
fn key_and_route(
    keyer: &mut KeyFunctionInstance,
    events: Emitted,
    routed: &mut [RoutedBatch],
    subtasks: usize,
    context: &mut Emit<'_>,
) -> Result<SideEvents, RunError> {
    let parallelism = u16::try_from(subtasks).unwrap_or(u16::MAX);
    let max_parallelism = context.max_parallelism;
    let target = |key: &[u8]| {
        let group = key_group(key, max_parallelism);
        usize::from(subtask_for_key_group(group, max_parallelism, parallelism))
    };
    match events {
        Emitted::Packed(events) if context.dead_letter.is_none() => {
            let computed;
            let keys = match events.routes() {
                Some(routes) => routes,
                None => {
                    computed = count_key_call(context.metrics, events.len(), || {
                        Ok((keyer.extract_packed_keys(&events)?, Vec::new()))
                    })?
                    .0;
                    &computed
                }
            };
            for (event, key) in events.iter().zip(keys.iter()) {
                routed[target(key)].push_ref(key, event);
            }
            Ok(Vec::new())
        }
        events => {
            let mut events = events.into_events();
            let (keys, letters) = keys_of(keyer, &mut events, context)?;
            for (event, key) in events.into_iter().zip(keys.iter()) {
                routed[target(key)].push(key, event);
            }
            Ok(letters)
        }
    }
}

/// Key `events` and add each with its key to sink `sink`'s batch (an
/// exchange's, which routes by it); returns the dead letters of events the
/// key function failed on (under `dead-letter`). Packed events (a
/// source's) stay packed.
fn key_for_sink(
    keyer: &mut KeyFunctionInstance,
    events: Emitted,
    sink: usize,
    context: &mut Emit<'_>,
) -> Result<SideEvents, RunError> {
    match events {
        Emitted::Packed(events) if context.dead_letter.is_none() => {
            let (keys, _) = count_key_call(context.metrics, events.len(), || {
                Ok((keyer.extract_packed_keys(&events)?, Vec::new()))
            })?;
            let out = &mut context.sinks[sink];
            for (event, key) in events.iter().zip(keys.iter()) {
                push_keyed(out, event, key);
            }
            Ok(Vec::new())
        }
        events => {
            let mut events = events.into_events();
            let (keys, letters) = keys_of(keyer, &mut events, context)?;
            let out = &mut context.sinks[sink];
            for (event, key) in events.iter().zip(keys.iter()) {
                push_keyed(out, event.into(), key);
            }
            Ok(letters)
        }
    }
}

/// Add `event` with its exchange key `key` to `out`: as the batch's route
/// ([`PackedEvents::push_routed`]) while it has one for each event, else
/// as its last header ([`KEY_HEADER`]).
fn push_keyed(out: &mut PackedEvents, event: EventRef<'_>, key: &[u8]) {
    if out.is_empty() || out.routes().is_some() {
        out.push_routed(event, key);
    } else {
        let mut event = event.to_event();
        event.headers.push((KEY_HEADER.to_string(), key.to_vec()));
        out.push((&event).into());
    }
}

fn flush_ports(ports: &mut Ports, counts: &LiveCounts) -> Result<(), RunError> {
    for route in ports.ports.values_mut().flatten() {
        match route {
            Route::Sink(_) | Route::KeyedSink { .. } => {}
            Route::Keyed { routed, subtasks, bare, .. } => {
                for (batch, tx) in routed.iter_mut().zip(subtasks.iter()) {
                    if !batch.is_empty() {
                        let next = batch.with_capacity_of(*bare);
                        let full = std::mem::replace(batch, next);
                        tx.send_counted(SubtaskMessage::Events(full), counts)?;
                    }
                }
            }
            Route::Broadcast { subtasks, waiting } => {
                if !waiting.is_empty() {
                    let events = std::mem::take(waiting);
                    for tx in subtasks.iter() {
                        tx.send_counted(SubtaskMessage::Broadcast(events.clone()), counts)?;
                    }
                }
            }
            Route::Transform { outputs, .. } => flush_ports(outputs, counts)?,
        }
    }
    Ok(())
}

/// Instantiate key function `key` of stage `stage` (empty in a line spec)
/// as `owner`'s.
fn key_function(
    key: &FunctionCode,
    stage: &str,
    owner: &str,
    env: &FunctionEnv,
) -> Result<KeyFunctionInstance, RunError> {
    let function = match key {
        FunctionCode::Wasm(function) => function.label.as_str(),
        FunctionCode::Native(_) => "native",
    };
    let label = match stage {
        "" => format!("{function} (key)"),
        stage => format!("{function} (key of {stage}, in {owner})"),
    };
    Ok(match key {
        FunctionCode::Wasm(function) => {
            KeyFunctionInstance::new(function, &label, env.ctx(&label, key, None)?)?
        }
        FunctionCode::Native(native) => KeyFunctionInstance::native(
            native.key().ok_or_else(|| RunError::Deploy("not a key function".into()))?,
            &label,
        ),
    })
}

fn instantiate(plan: PortsPlan, owner: &str, env: &FunctionEnv) -> Result<Ports, RunError> {
    let mut ports = BTreeMap::new();
    for (port, routes) in plan.ports {
        let mut live = Vec::new();
        for route in routes {
            live.push(match route {
                RoutePlan::Sink(index) => Route::Sink(index),
                RoutePlan::Keyed { key, name, bare, subtasks } => {
                    let keyer = key_function(&key, &name, owner, env)?;
                    let routed =
                        (0..subtasks.len()).map(|_| RoutedBatch::with_capacity(64, bare)).collect();
                    Route::Keyed { keyer: Box::new(keyer), bare, subtasks, routed }
                }
                RoutePlan::KeyedSink { key, sink } => {
                    let keyer = key_function(&key, "exchange", owner, env)?;
                    Route::KeyedSink { keyer: Box::new(keyer), sink }
                }
                RoutePlan::Broadcast(subtasks) => {
                    Route::Broadcast { subtasks, waiting: Vec::new() }
                }
                RoutePlan::Transform { code, name, outputs } => {
                    let FunctionCode::Wasm(function) = &code else {
                        return Err(RunError::Deploy(format!(
                            "{name}: a transform runs a Wasm function"
                        )));
                    };
                    let label = format!("{} ({name}, in {owner})", function.label);
                    let function =
                        TransformInstance::new(function, &label, env.ctx(&label, &code, None)?)?;
                    Route::Transform {
                        function: Box::new(function),
                        outputs: instantiate(outputs, owner, env)?,
                    }
                }
            });
        }
        ports.insert(port, live);
    }
    Ok(Ports { ports })
}
