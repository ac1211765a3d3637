//! The keyed operator a subtask runs: a process function, or a window
//! operator with an aggregate function. The subtask loop drives either
//! through the same calls.

use crate::state::hash::KeyMap;

use super::runner::RunError;
use crate::runtime::bindings::weir::function::types::{KeyedEvents, TimeDomain};
use crate::runtime::native::NativeRef;
use crate::runtime::{AggregateFunctionInstance, HostCtx, LoadedFunction, ProcessFunctionInstance, Role, WindowProcessFunctionInstance};
use crate::state::KeyedStateBackend;
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

/// What a subtask runs, before it is instantiated on the subtask's thread.
#[derive(Clone)]
pub(crate) enum OperatorPlan {
    /// A process function.
    Process(FunctionCode),
    /// Windows computed by an aggregate or window process function (the
    /// role says which).
    Window(FunctionCode, Role, WindowConfig),
}

/// A subtask's live operator.
pub(crate) enum KeyedOperator {
    /// A process function with its state and timers.
    Process(Box<ProcessFunctionInstance>, KeyGrouper),
    /// A window operator.
    Window(Box<WindowOperator>),
}

impl KeyedOperator {
    /// Instantiate `plan` for subtask `index` over `backend`.
    pub(crate) fn new(plan: &OperatorPlan, index: usize, backend: Box<dyn KeyedStateBackend>, ctx: impl FnOnce(Box<dyn KeyedStateBackend>) -> HostCtx) -> Result<Self, RunError> {
        let name = format!("process[{index}]");
        Ok(match plan {
            OperatorPlan::Process(code) => {
                let mut ctx = ctx(backend);
                ctx.load_timers()?;
                let instance = match code {
                    FunctionCode::Wasm(function) => ProcessFunctionInstance::new(function, &name, ctx)?,
                    FunctionCode::Native(native) => ProcessFunctionInstance::native(native.process().ok_or_else(|| RunError::Deploy("not a process function".into()))?, &name, ctx),
                };
                KeyedOperator::Process(Box::new(instance), KeyGrouper::default())
            }
            OperatorPlan::Window(code, role, config) => {
                let name = format!("window[{index}]");
                let function = match (code, role) {
                    (FunctionCode::Wasm(function), Role::WindowProcess) => WindowFunction::Process(WindowProcessFunctionInstance::new(function, &name)?),
                    (FunctionCode::Wasm(function), _) => WindowFunction::Aggregate(AggregateFunctionInstance::new(function, &name)?),
                    (FunctionCode::Native(native), _) => WindowFunction::Aggregate(AggregateFunctionInstance::native(native.aggregate().ok_or_else(|| RunError::Deploy("not an aggregate function".into()))?, &name)),
                };
                KeyedOperator::Window(Box::new(WindowOperator::new(config.clone(), function, backend)?))
            }
        })
    }

    /// Handle a batch of (key, event) pairs.
    pub(crate) fn on_events(&mut self, batch: Vec<(Vec<u8>, Event)>) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, grouper) => Ok(processor.process(grouper.group(batch))?),
            KeyedOperator::Window(windows) => Ok(windows.process(batch)?),
        }
    }

    /// Event time has reached `watermark`.
    pub(crate) fn on_watermark(&mut self, watermark: i64) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, _) => {
                processor.ctx().set_watermark(watermark);
                fire_due(processor, TimeDomain::EventTime, watermark)
            }
            KeyedOperator::Window(windows) => Ok(windows.on_watermark(watermark)?),
        }
    }

    /// Fire processing-time timers due at the operator's clock.
    pub(crate) fn on_processing_time(&mut self) -> Result<(), RunError> {
        match self {
            KeyedOperator::Process(processor, _) => {
                let now = processor.ctx().now();
                fire_due(processor, TimeDomain::ProcessingTime, now)
            }
            KeyedOperator::Window(_) => Ok(()),
        }
    }

    /// The earliest pending processing-time timer.
    pub(crate) fn next_processing_timer(&mut self) -> Option<i64> {
        match self {
            KeyedOperator::Process(processor, _) => processor.ctx().next_processing_timer(),
            KeyedOperator::Window(_) => None,
        }
    }

    /// Take what the operator emitted: main output, side outputs, and the
    /// number of late events it dropped.
    pub(crate) fn take_outputs(&mut self) -> (Vec<Event>, Vec<(String, Event)>, u64) {
        match self {
            KeyedOperator::Process(processor, _) => {
                let ctx = processor.ctx();
                (std::mem::take(&mut ctx.outputs), std::mem::take(&mut ctx.side_outputs), 0)
            }
            KeyedOperator::Window(windows) => {
                (std::mem::take(&mut windows.outputs), std::mem::take(&mut windows.side_outputs), std::mem::take(&mut windows.dropped_late))
            }
        }
    }

    /// Make the operator's state durable.
    pub(crate) fn flush(&mut self) -> Result<(), RunError> {
        Ok(self.backend().map_or(Ok(()), |b| b.flush())?)
    }

    /// Write a snapshot of the operator's state into the new directory
    /// `dir` (see [`KeyedStateBackend::checkpoint`]).
    pub(crate) fn checkpoint(&mut self, dir: &std::path::Path) -> Result<(), RunError> {
        match self.backend() {
            Some(backend) => Ok(backend.checkpoint(dir)?),
            None => Err(crate::state::StateError::Unsupported("the operator has no state backend to checkpoint".into()).into()),
        }
    }

    fn backend(&mut self) -> Option<&mut (dyn KeyedStateBackend + 'static)> {
        match self {
            KeyedOperator::Process(processor, _) => processor.ctx().backend_mut(),
            KeyedOperator::Window(windows) => Some(windows.backend_mut()),
        }
    }
}

/// Deliver every timer of `domain` due at `up_to`, including timers the
/// function registers while handling them.
fn fire_due(processor: &mut ProcessFunctionInstance, domain: TimeDomain, up_to: i64) -> Result<(), RunError> {
    loop {
        let due = processor.ctx().take_due_timers(domain, up_to)?;
        if due.is_empty() {
            return Ok(());
        }
        processor.fire_timers(&due)?;
    }
}

/// Groups a batch by key, keeping keys in order of first appearance and
/// each key's events in arrival order. Reuses its allocations.
#[derive(Default)]
pub(crate) struct KeyGrouper {
    index: KeyMap<Vec<u8>, usize>,
    groups: Vec<KeyedEvents>,
}

impl KeyGrouper {
    pub(crate) fn group(&mut self, batch: Vec<(Vec<u8>, Event)>) -> &[KeyedEvents] {
        self.index.clear();
        self.groups.clear();
        for (key, event) in batch {
            match self.index.get(&key) {
                Some(&i) => self.groups[i].events.push(event),
                None => {
                    self.index.insert(key.clone(), self.groups.len());
                    self.groups.push(KeyedEvents { key, events: vec![event] });
                }
            }
        }
        &self.groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_first_appearance_and_arrival_order() {
        let event = |v: &str| Event { key: None, value: v.as_bytes().to_vec(), timestamp: 0, headers: vec![] };
        let batch = [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("b", "b2")].iter().map(|(k, v)| (k.as_bytes().to_vec(), event(v))).collect();
        let mut grouper = KeyGrouper::default();
        let groups = grouper.group(batch);
        let shape: Vec<(String, Vec<String>)> = groups
            .iter()
            .map(|g| (String::from_utf8(g.key.clone()).unwrap(), g.events.iter().map(|e| String::from_utf8(e.value.clone()).unwrap()).collect()))
            .collect();
        assert_eq!(shape, vec![
            ("a".into(), vec!["a1".into(), "a2".into()]),
            ("b".into(), vec!["b1".into(), "b2".into()]),
            ("c".into(), vec!["c1".into()]),
        ]);
    }
}
