//! The keyed operator a subtask runs: a process function, or a window
//! operator with an aggregate function. The subtask loop drives either
//! through the same calls.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use std::hash::BuildHasher as _;

use super::failures;
use crate::specification::{OnError, PipelineSpec};
use crate::state::hash::KeyHashBuilder;
use crate::state::ttl::Ttl;

use super::error::RunError;
use crate::join::{JoinConfig, JoinOperator};
use crate::runtime::bindings::weir::function::types::{KeyedEvents, KeyedTimers, TimeDomain};
use crate::runtime::native::NativeRef;
use crate::runtime::packed::{Emitted, EventRef};
use crate::runtime::packing::{BareEvents, GroupOrder, Grouping, KeyList};
use crate::runtime::{
    AggregateFunctionInstance, FunctionLimits, HostCtx, Language, LoadedFunction,
    ProcessFunctionInstance, Role, WindowProcessFunctionInstance,
};
use crate::state::{JournaledBackend, KeyedStateBackend};
use crate::window::{WindowConfig, WindowFunction, WindowOperator};
use crate::Event;

/// A function's code: a loaded Wasm component or a native built-in.
#[derive(Clone)]
pub(crate) enum FunctionCode {
    /// A component, linked and ready to instantiate.
    Wasm(LoadedFunction),
    /// Compiled into the host (benchmark baselines).
    Native(NativeRef),
}

impl FunctionCode {
    /// The language it is written in (native code counts as compiled).
    pub(crate) fn language(&self) -> Language {
        match self {
            FunctionCode::Wasm(function) => function.language,
            FunctionCode::Native(_) => Language::Compiled,
        }
    }

    /// The types it declares for its states (native code declares none).
    pub(crate) fn state_types(&self) -> Arc<crate::runtime::StateTypes> {
        match self {
            FunctionCode::Wasm(function) => function.state_types.clone(),
            FunctionCode::Native(_) => Arc::default(),
        }
    }
}

/// Most keys whose timers are fired in one call of the function.
const TIMER_CHUNK: usize = 1024;

/// What every function instance of a pipeline gets: its limits, the
/// resources directory it may read, and (keyed functions) its state
/// settings.
#[derive(Clone, Debug)]
pub(crate) struct FunctionEnv {
    /// The limits of compiled functions.
    pub(crate) limits: FunctionLimits,
    /// The limits of interpreted ones (Python, JavaScript).
    pub(crate) interpreted_limits: FunctionLimits,
    pub(crate) resources: Option<PathBuf>,
    pub(crate) max_parallelism: u16,
    pub(crate) ttl_overrides: HashMap<String, Ttl>,
    /// The side output of the `dead-letter` failure policy, if chosen.
    pub(crate) dead_letter: Option<String>,
}

impl FunctionEnv {
    /// The environment `spec` sets.
    pub(crate) fn of(spec: &PipelineSpec) -> Result<Self, RunError> {
        let limits_for = |language| {
            spec.limits.to_limits_for(language).map_err(|e| RunError::Deploy(e.to_string()))
        };
        let (limits, interpreted_limits) =
            (limits_for(Language::Compiled)?, limits_for(Language::Python)?);
        if let Some(dir) = spec.resources.as_ref().filter(|dir| !dir.is_dir()) {
            return Err(RunError::Deploy(format!(
                "resources: {} is not a directory",
                dir.display()
            )));
        }
        let ttl_overrides = spec
            .state_ttl
            .iter()
            .filter_map(|(name, ttl)| Some((name.clone(), ttl.to_ttl()?)))
            .collect();
        let dead_letter = match &spec.on_error {
            OnError::Fail => None,
            OnError::DeadLetter(output) => Some(output.clone()),
        };
        Ok(Self {
            limits,
            interpreted_limits,
            resources: spec.resources.clone(),
            max_parallelism: spec.max_parallelism,
            ttl_overrides,
            dead_letter,
        })
    }

    /// The limits of a function written in `language`.
    pub(crate) fn limits_for(&self, language: Language) -> FunctionLimits {
        if language.is_interpreted() {
            self.interpreted_limits
        } else {
            self.limits
        }
    }

    /// The context of instance `name` of `code`, over `backend` if it
    /// keeps keyed state (journaled, so a failed call can be undone; it
    /// records only when asked).
    pub(crate) fn ctx(
        &self,
        name: &str,
        code: &FunctionCode,
        backend: Option<Box<dyn KeyedStateBackend>>,
    ) -> Result<HostCtx, RunError> {
        let backend = backend
            .map(|backend| Box::new(JournaledBackend::new(backend)) as Box<dyn KeyedStateBackend>);
        HostCtx::new(name, backend, self.max_parallelism)
            .with_ttl_overrides(self.ttl_overrides.clone())
            .with_limits(self.limits_for(code.language()))
            .with_resources(self.resources.as_deref())
            .map_err(RunError::Deploy)
    }
}

/// What a subtask runs, before it is instantiated on the subtask's thread.
#[derive(Clone)]
pub(crate) enum OperatorPlan {
    /// A process function (co-process, or with broadcast state, as the
    /// component says).
    Process(FunctionCode),
    /// A host-provided join of two inputs.
    Join(JoinConfig),
    /// Windows computed by an aggregate or window process function (the
    /// role says which).
    Window(FunctionCode, Role, WindowConfig),
}

impl OperatorPlan {
    /// The language of its function (a join has none).
    pub(crate) fn language(&self) -> Option<crate::runtime::Language> {
        match self {
            OperatorPlan::Process(code) | OperatorPlan::Window(code, ..) => Some(code.language()),
            OperatorPlan::Join(_) => None,
        }
    }

    /// The state types of its function (a join's: none).
    pub(crate) fn state_types(&self) -> Arc<crate::runtime::StateTypes> {
        match self {
            OperatorPlan::Process(code) | OperatorPlan::Window(code, ..) => code.state_types(),
            OperatorPlan::Join(_) => Arc::default(),
        }
    }

    /// Whether the operator takes events packed from the source on (see
    /// [`RoutedEvents::Bare`]): a Wasm process function unless failures go
    /// to a dead-letter output (retried event by event, as objects), or a
    /// Wasm aggregate over windows that do not merge.
    pub(crate) fn takes_packed_events(&self, dead_letter: bool) -> bool {
        match self {
            OperatorPlan::Process(FunctionCode::Wasm(_)) => !dead_letter,
            OperatorPlan::Window(FunctionCode::Wasm(_), Role::Aggregate, config) => {
                !config.assigner.is_merging()
            }
            _ => false,
        }
    }
}

/// A subtask's live operator.
pub(crate) enum KeyedOperator {
    /// A process function with its state and timers, and the dead-letter
    /// output if failures go there.
    Process(Box<ProcessFunctionInstance>, Box<KeyGrouper>, Option<String>),
    /// A window operator.
    Window(Box<WindowOperator>),
    /// A join.
    Join(Box<JoinOperator>),
}

impl KeyedOperator {
    /// Instantiate `plan` for subtask `index` over `backend`.
    pub(crate) fn new(
        plan: &OperatorPlan,
        role: &str,
        index: usize,
        backend: Box<dyn KeyedStateBackend>,
        env: &FunctionEnv,
    ) -> Result<Self, RunError> {
        let name = match plan {
            OperatorPlan::Process(FunctionCode::Wasm(function))
            | OperatorPlan::Window(FunctionCode::Wasm(function), ..) => {
                format!("{} ({role}[{index}])", function.label)
            }
            _ => format!("{role}[{index}]"),
        };
        Ok(match plan {
            OperatorPlan::Join(config) => {
                KeyedOperator::Join(Box::new(JoinOperator::new(config.clone(), backend)?))
            }
            OperatorPlan::Process(code) => {
                let mut ctx = env.ctx(&name, code, Some(backend))?;
                ctx.load_timers()?;
                let instance = match code {
                    FunctionCode::Wasm(function) => {
                        ProcessFunctionInstance::new(function, &name, ctx)?
                    }
                    FunctionCode::Native(native) => ProcessFunctionInstance::native(
                        native
                            .process()
                            .ok_or_else(|| RunError::Deploy("not a process function".into()))?,
                        &name,
                        ctx,
                    ),
                };
                KeyedOperator::Process(Box::new(instance), Box::default(), env.dead_letter.clone())
            }
            OperatorPlan::Window(code, role, config) => {
                let function = match (code, role) {
                    (FunctionCode::Wasm(function), Role::WindowProcess) => {
                        WindowFunction::Process(WindowProcessFunctionInstance::new(
                            function,
                            &name,
                            env.ctx(&name, code, None)?,
                        )?)
                    }
                    (FunctionCode::Wasm(function), _) => {
                        WindowFunction::Aggregate(Box::new(AggregateFunctionInstance::new(
                            function,
                            &name,
                            env.ctx(&name, code, None)?,
                        )?))
                    }
                    (FunctionCode::Native(native), _) => {
                        WindowFunction::Aggregate(Box::new(AggregateFunctionInstance::native(
                            native.aggregate().ok_or_else(|| {
                                RunError::Deploy("not an aggregate function".into())
                            })?,
                            &name,
                        )))
                    }
                };
                KeyedOperator::Window(Box::new(WindowOperator::new(
                    config.clone(),
                    function,
                    backend,
                )?))
            }
        })
    }

    /// Handle a batch of keyed events of input `input` (0, or 1 for the
    /// second input of a co-process function or join).
    pub(crate) fn on_events(&mut self, input: usize, batch: RoutedBatch) -> Result<(), RunError> {
        match self {
            KeyedOperator::Join(join) => {
                let (keys, events) = batch.into_objects();
                Ok(join.process(input, &keys, events)?)
            }
            KeyedOperator::Process(processor, grouper, _) if input > 0 => {
                let groups = grouper.group(batch);
                processor.process_input(input, groups).map_err(|error| {
                    failures::pinpoint(processor, groups.len(), error, |p, i| {
                        p.process_input(input, &groups[i..=i])
                    })
                    .into()
                })
            }
            KeyedOperator::Process(processor, grouper, None) => {
                if let (RoutedEvents::Bare(events), true) = (&batch.events, processor.is_wasm()) {
                    let grouping = grouper.group_in_place(&batch.keys);
                    if let Err(error) = processor.process_grouped(events, &batch.keys, grouping) {
                        // Find the key at fault as for events (the pipeline stops).
                        let groups = grouper.group(batch);
                        return Err(failures::pinpoint(processor, groups.len(), error, |p, i| {
                            p.process(&groups[i..=i])
                        })
                        .into());
                    }
                    return Ok(());
                }
                let groups = grouper.group(batch);
                processor.process(groups).map_err(|error| {
                    failures::pinpoint(processor, groups.len(), error, |p, i| {
                        p.process(&groups[i..=i])
                    })
                    .into()
                })
            }
            KeyedOperator::Process(processor, grouper, Some(output)) => {
                failures::dead_letter_process(processor, grouper.group(batch), output)
            }
            KeyedOperator::Window(windows) => match batch.events {
                RoutedEvents::Bare(events) => Ok(windows.process_bare(&batch.keys, &events)?),
                RoutedEvents::Objects(events) => Ok(windows.process(&batch.keys, events)?),
            },
        }
    }

    /// Events of a broadcast input (every subtask gets them all).
    pub(crate) fn on_broadcast(&mut self, events: Vec<Event>) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, ..) => Ok(processor.process_broadcast(&events)?),
            _ => Err(RunError::Deploy("only a process function takes broadcast inputs".into())),
        }
    }

    /// Event time has reached `watermark`.
    pub(crate) fn on_watermark(&mut self, watermark: i64) -> Result<(), RunError> {
        match self {
            KeyedOperator::Join(join) => Ok(join.on_watermark(watermark)?),
            KeyedOperator::Process(processor, _, dead_letter) => {
                processor.ctx().set_watermark(watermark);
                fire_due(processor, TimeDomain::EventTime, watermark, dead_letter.as_deref())
            }
            KeyedOperator::Window(windows) => Ok(windows.on_watermark(watermark)?),
        }
    }

    /// Fire processing-time timers due at the operator's clock.
    pub(crate) fn on_processing_time(&mut self) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, _, dead_letter) => {
                let now = processor.ctx().now();
                fire_due(processor, TimeDomain::ProcessingTime, now, dead_letter.as_deref())
            }
            KeyedOperator::Window(_) | KeyedOperator::Join(_) => Ok(()),
        }
    }

    /// The input has ended: processing time ends with it. Fire every
    /// processing-time timer pending now, due or not, once (timers the
    /// handlers register meanwhile stay pending, so a timer that renews
    /// itself cannot keep the run from ending).
    pub(crate) fn end_processing_time(&mut self) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, _, dead_letter) => {
                let pending =
                    processor.ctx().take_due_timers(TimeDomain::ProcessingTime, i64::MAX)?;
                fire_taken(processor, &pending, dead_letter.as_deref())
            }
            KeyedOperator::Window(_) | KeyedOperator::Join(_) => Ok(()),
        }
    }

    /// The earliest pending processing-time timer.
    pub(crate) fn next_processing_timer(&mut self) -> Option<i64> {
        match self {
            KeyedOperator::Process(processor, ..) => processor.ctx().next_processing_timer(),
            KeyedOperator::Window(_) | KeyedOperator::Join(_) => None,
        }
    }

    /// Take what the operator emitted: main output, side outputs, and the
    /// number of late events it dropped.
    pub(crate) fn take_outputs(&mut self) -> (Emitted, Vec<(String, Event)>, u64) {
        match self {
            KeyedOperator::Process(processor, ..) => {
                let ctx = processor.ctx();
                (std::mem::take(&mut ctx.outputs), std::mem::take(&mut ctx.side_outputs), 0)
            }
            KeyedOperator::Window(windows) => (
                std::mem::take(&mut windows.outputs).into(),
                std::mem::take(&mut windows.side_outputs),
                std::mem::take(&mut windows.dropped_late),
            ),
            KeyedOperator::Join(join) => (
                std::mem::take(&mut join.outputs).into(),
                std::mem::take(&mut join.side_outputs),
                std::mem::take(&mut join.dropped_late),
            ),
        }
    }

    /// Between batches: let the state backend do what it kept off the hot
    /// path (see [`KeyedStateBackend::relieve`]).
    pub(crate) fn relieve(&mut self) -> Result<(), RunError> {
        Ok(self.backend().map_or(Ok(()), |b| b.relieve())?)
    }

    /// Make the operator's state durable.
    pub(crate) fn flush(&mut self) -> Result<(), RunError> {
        Ok(self.backend().map_or(Ok(()), |b| b.flush())?)
    }

    /// Write a snapshot of the operator's state into the new directory
    /// `dir`, in `form` (see [`KeyedStateBackend::checkpoint`]).
    pub(crate) fn checkpoint(
        &mut self,
        dir: &std::path::Path,
        form: crate::state::SnapshotForm,
    ) -> Result<(), RunError> {
        match self.backend() {
            Some(backend) => Ok(backend.checkpoint(dir, form)?),
            None => Err(crate::state::StateError::Unsupported(
                "the operator has no state backend to checkpoint".into(),
            )
            .into()),
        }
    }

    /// What its state backend says of itself (nothing without one).
    pub(crate) fn state_stats(&mut self) -> crate::state::StateStats {
        self.backend().map(|b| b.stats()).unwrap_or_default()
    }

    /// Its state backend, if it keeps keyed state.
    pub(crate) fn backend(&mut self) -> Option<&mut (dyn KeyedStateBackend + 'static)> {
        match self {
            KeyedOperator::Process(processor, ..) => processor.ctx().backend_mut(),
            KeyedOperator::Window(windows) => Some(windows.backend_mut()),
            KeyedOperator::Join(join) => Some(join.backend_mut()),
        }
    }
}

/// Deliver every timer of `domain` due at `up_to`, including timers the
/// function registers while handling them (failures to `dead_letter`, if
/// given).
fn fire_due(
    processor: &mut ProcessFunctionInstance,
    domain: TimeDomain,
    up_to: i64,
    dead_letter: Option<&str>,
) -> Result<(), RunError> {
    loop {
        let due = processor.ctx().take_due_timers(domain, up_to)?;
        if due.is_empty() {
            return Ok(());
        }
        fire_taken(processor, &due, dead_letter)?;
    }
}

/// Fire the timers `due`, taken from the queue.
fn fire_taken(
    processor: &mut ProcessFunctionInstance,
    due: &[KeyedTimers],
    dead_letter: Option<&str>,
) -> Result<(), RunError> {
    // In chunks, so no single call grows with the number of keys (each
    // call has a deadline).
    for chunk in due.chunks(TIMER_CHUNK) {
        match dead_letter {
            None => processor.fire_timers(chunk).map_err(|error| {
                failures::pinpoint(processor, chunk.len(), error, |p, i| {
                    p.fire_timers(&chunk[i..=i])
                })
            })?,
            Some(output) => failures::dead_letter_timers(processor, chunk, output)?,
        }
    }
    Ok(())
}

/// Events routed to one subtask, each with its key (the keys packed: no
/// allocation per key).
#[derive(Default)]
pub(crate) struct RoutedBatch {
    /// Key `i` is event `i`'s.
    pub(crate) keys: KeyList,
    pub(crate) events: RoutedEvents,
}

/// The events of a [`RoutedBatch`].
pub(crate) enum RoutedEvents {
    /// As they came from the source.
    Objects(Vec<Event>),
    /// Packed, as long as none has a source key or headers (for a Wasm
    /// process function or window aggregate: see [`BareEvents`]).
    Bare(BareEvents),
}

impl Default for RoutedEvents {
    fn default() -> Self {
        RoutedEvents::Objects(Vec::new())
    }
}

impl RoutedBatch {
    /// Room for `capacity` events, packed if `bare` (see [`RoutedEvents`]).
    pub(crate) fn with_capacity(capacity: usize, bare: bool) -> Self {
        let events = if bare {
            RoutedEvents::Bare(BareEvents::with_capacity(capacity))
        } else {
            RoutedEvents::Objects(Vec::with_capacity(capacity))
        };
        Self { keys: KeyList::default(), events }
    }

    /// An empty batch with room for as much as this one holds (so the
    /// next batch of a source does not grow its buffers step by step),
    /// packed if `bare`.
    pub(crate) fn with_capacity_of(&self, bare: bool) -> Self {
        let events = match (&self.events, bare) {
            (RoutedEvents::Bare(events), true) => RoutedEvents::Bare(events.with_capacity_of()),
            (_, true) => RoutedEvents::Bare(BareEvents::with_capacity(self.len())),
            (_, false) => RoutedEvents::Objects(Vec::with_capacity(self.len())),
        };
        Self { keys: self.keys.with_capacity_of(), events }
    }

    /// Add `event` with its `key`. A packed batch takes an event with a
    /// source key or headers by turning into [`RoutedEvents::Objects`].
    pub(crate) fn push(&mut self, key: &[u8], event: Event) {
        if !self.push_bare(key, EventRef::from(&event)) {
            self.push_owned(key, event);
        }
    }

    /// [`Self::push`] of a borrowed event (copied in).
    pub(crate) fn push_ref(&mut self, key: &[u8], event: EventRef<'_>) {
        if !self.push_bare(key, event) {
            self.push_owned(key, event.to_event());
        }
    }

    /// Add `event` with its `key` to a packed batch, if this is one and
    /// the event has no source key or headers; whether it did.
    fn push_bare(&mut self, key: &[u8], event: EventRef<'_>) -> bool {
        match &mut self.events {
            RoutedEvents::Bare(bare) if event.key.is_none() && event.headers.is_empty() => {
                self.keys.push(key);
                bare.push(event.value, event.timestamp);
                true
            }
            _ => false,
        }
    }

    /// Add `event` with its `key` as an [`Event`].
    fn push_owned(&mut self, key: &[u8], event: Event) {
        self.keys.push(key);
        match &mut self.events {
            RoutedEvents::Bare(bare) => {
                let mut events = bare.to_events();
                events.push(event);
                self.events = RoutedEvents::Objects(events);
            }
            RoutedEvents::Objects(events) => events.push(event),
        }
    }

    /// How many events.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys and the events as [`Event`]s.
    pub(crate) fn into_objects(self) -> (KeyList, Vec<Event>) {
        let events = match self.events {
            RoutedEvents::Objects(events) => events,
            RoutedEvents::Bare(bare) => bare.to_events(),
        };
        (self.keys, events)
    }
}

/// Groups a batch by key, keeping keys in order of first appearance and
/// each key's events in arrival order. Reuses its allocations: groups (and
/// their event lists) from batch to batch, and it never copies a key.
#[derive(Default)]
pub(crate) struct KeyGrouper {
    /// The first group of each key hash.
    index: std::collections::HashMap<u64, usize, IdentityHash>,
    /// Per group, the next group whose key has the same hash.
    chained: Vec<Option<usize>>,
    /// Per group, its first event (whose key is the group's).
    firsts: Vec<u32>,
    /// Per event in arrival order, (its group, its index).
    members: Vec<(u32, u32)>,
    /// Groups of packed batches.
    order: GroupOrder,
    groups: Vec<KeyedEvents>,
    hasher: KeyHashBuilder,
}

impl KeyGrouper {
    /// The batch's events moved into one entry per key.
    pub(crate) fn group(&mut self, batch: RoutedBatch) -> &[KeyedEvents] {
        let hasher = self.hasher;
        self.group_by_hash(batch, |key| hasher.hash_one(key))
    }

    /// [`Self::group`] with keys hashed by `hash` (tests force collisions).
    fn group_by_hash(&mut self, batch: RoutedBatch, hash: impl Fn(&[u8]) -> u64) -> &[KeyedEvents] {
        let (keys, events) = batch.into_objects();
        let len = self.assign(&keys, hash);
        if self.groups.len() < len {
            self.groups.resize_with(len, || KeyedEvents { key: Vec::new(), events: Vec::new() });
        }
        for (group, &first) in self.groups.iter_mut().zip(&self.firsts) {
            group.key.clear();
            group.key.extend_from_slice(keys.get(first as usize));
            group.events.clear();
        }
        for (event, &(group, _)) in events.into_iter().zip(&self.members) {
            self.groups[group as usize].events.push(event);
        }
        // Keep the spare groups' buffers for the next batch, not their events.
        self.groups[len..].iter_mut().for_each(|g| g.events.clear());
        &self.groups[..len]
    }

    /// The groups of `keys` (one per event of a packed batch), the events
    /// left where they are.
    pub(crate) fn group_in_place(&mut self, keys: &KeyList) -> Grouping<'_> {
        let hasher = self.hasher;
        let len = self.assign(keys, |key| hasher.hash_one(key));
        self.order.sort(len, &self.members)
    }

    /// Find each key's group (numbered by first appearance) into
    /// `members`, the first event of each group into `firsts`; returns how
    /// many groups.
    fn assign(&mut self, keys: &KeyList, hash: impl Fn(&[u8]) -> u64) -> usize {
        self.index.clear();
        self.chained.clear();
        self.firsts.clear();
        self.members.clear();
        for (event, key) in keys.iter().enumerate() {
            let hash = hash(key);
            let mut candidate = self.index.get(&hash).copied();
            while let Some(group) = candidate.filter(|&g| keys.get(self.firsts[g] as usize) != key)
            {
                candidate = self.chained[group];
            }
            let group = candidate.unwrap_or_else(|| {
                let group = self.firsts.len();
                self.firsts.push(event as u32);
                self.chained.push(self.index.insert(hash, group));
                group
            });
            self.members.push((group as u32, event as u32));
        }
        self.firsts.len()
    }
}

/// A hasher for keys that are hashes already.
#[derive(Default, Clone, Copy)]
struct IdentityHash;

impl std::hash::BuildHasher for IdentityHash {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

/// Passes a `u64` through.
struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, &b| h.rotate_left(8) ^ u64::from(b));
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_first_appearance_and_arrival_order() {
        let event = |v: &str| Event {
            key: None,
            value: v.as_bytes().to_vec(),
            timestamp: 0,
            headers: vec![],
        };
        let batch = || {
            let mut batch = RoutedBatch::default();
            [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("b", "b2")]
                .iter()
                .for_each(|(k, v)| batch.push(k.as_bytes(), event(v)));
            batch
        };
        let mut grouper = KeyGrouper::default();
        let groups = grouper.group(batch());
        let shape: Vec<(String, Vec<String>)> = groups
            .iter()
            .map(|g| {
                (
                    String::from_utf8(g.key.clone()).unwrap(),
                    g.events.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect(),
                )
            })
            .collect();
        let expected: Vec<(String, Vec<String>)> = vec![
            ("a".into(), vec!["a1".into(), "a2".into()]),
            ("b".into(), vec!["b1".into(), "b2".into()]),
            ("c".into(), vec!["c1".into()]),
        ];
        assert_eq!(shape, expected);
        // Every key colliding, and the grouper reused: the same groups.
        let groups = grouper.group_by_hash(batch(), |_| 42);
        let shape: Vec<(String, Vec<String>)> = groups
            .iter()
            .map(|g| {
                (
                    String::from_utf8(g.key.clone()).unwrap(),
                    g.events.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect(),
                )
            })
            .collect();
        assert_eq!(shape, expected);
        let mut small = RoutedBatch::default();
        small.push(b"z", event("z1"));
        assert_eq!(grouper.group(small).len(), 1, "a smaller batch reuses fewer groups");
    }

    #[test]
    fn packed_batches_group_in_place_and_cross_as_the_same_batch() {
        let orders = [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("b", "b2")];
        let mut packed = RoutedBatch::with_capacity(8, true);
        let mut objects = RoutedBatch::default();
        for (i, (key, value)) in orders.iter().enumerate() {
            let event = Event {
                key: None,
                value: value.as_bytes().to_vec(),
                timestamp: i as i64,
                headers: vec![],
            };
            packed.push(key.as_bytes(), event.clone());
            objects.push(key.as_bytes(), event);
        }
        let RoutedEvents::Bare(events) = &packed.events else {
            panic!("events without key or headers stay packed")
        };
        let mut grouper = KeyGrouper::default();
        let grouping = grouper.group_in_place(&packed.keys);
        assert_eq!(
            (grouping.first_events().collect::<Vec<_>>(), grouping.ends, grouping.order),
            (vec![0, 1, 3], &[2, 4, 5][..], &[0, 2, 1, 4, 3][..])
        );
        let mut in_place = crate::runtime::packing::empty_keyed_batch();
        crate::runtime::packing::pack_grouped(events, &packed.keys, grouping, &mut in_place);
        let mut moved = crate::runtime::packing::empty_keyed_batch();
        crate::runtime::packing::pack_keyed(KeyGrouper::default().group(objects), &mut moved);
        let shape = |b: &crate::runtime::bindings::weir::function::types::KeyedBatch| {
            (
                b.keys.bytes.clone(),
                b.keys.ends.clone(),
                b.event_ends.clone(),
                b.events.values.clone(),
                b.events.value_ends.clone(),
                b.events.timestamps.clone(),
            )
        };
        assert_eq!(shape(&in_place), shape(&moved));
        // An event with a source key turns the batch into objects, keeping
        // the events before it.
        let mut batch = RoutedBatch::with_capacity(8, true);
        batch.push(b"a", Event { key: None, value: b"1".to_vec(), timestamp: 1, headers: vec![] });
        batch.push(
            b"b",
            Event { key: Some(b"k".to_vec()), value: b"2".to_vec(), timestamp: 2, headers: vec![] },
        );
        let (keys, events) = batch.into_objects();
        assert_eq!(
            (keys.len(), events[0].value.as_slice(), events[1].key.as_deref()),
            (2, &b"1"[..], Some(&b"k"[..]))
        );
    }
}
