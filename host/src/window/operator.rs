//! The window operator of one keyed subtask.
//!
//! Per (key, window) it stores the aggregate's accumulator under
//! `StateKey(group, "window-acc", Value, key, [start BE][end BE])` and an
//! event-time timer at the window's last millisecond. When the watermark
//! reaches the timer, the window fires once. With `allowed_lateness`, the
//! accumulator is kept until `end − 1 + lateness`: an event arriving in
//! that time updates it and fires the window again at once. An event all
//! of whose windows are past that point is late: it goes to the late side
//! output if the spec names one, else it is dropped and counted.

use std::collections::HashMap;

use crate::runtime::bindings::weir::function::types::{Accumulate, TimeDomain, Window, WindowResult};
use crate::runtime::{AggregateFunctionInstance, CallError};
use crate::state::{key_group, ttl, KeyedStateBackend, StateError, StateKey, StateKind};
use crate::time::TimerService;
use crate::Event;

use super::WindowAssigner;

const ACCUMULATORS: &str = "window-acc";
const FIRE_TIMERS: &str = "window-fire";
const CLEANUP_TIMERS: &str = "window-cleanup";

/// Why the window operator failed.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The aggregate function failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The state backend failed.
    #[error("window state: {0}")]
    State(#[from] StateError),
}

/// How a window operator behaves (from the pipeline spec).
#[derive(Debug, Clone)]
pub struct WindowConfig {
    /// How events are assigned to windows.
    pub assigner: WindowAssigner,
    /// How long after a window's end late events still update it (ms).
    pub allowed_lateness: i64,
    /// Where events too late for every window go, if anywhere.
    pub late_output: Option<String>,
    /// Number of key groups.
    pub max_parallelism: u16,
}

/// Windows and their accumulators for one subtask.
pub struct WindowOperator {
    config: WindowConfig,
    function: AggregateFunctionInstance,
    backend: Box<dyn KeyedStateBackend>,
    fire: TimerService,
    cleanup: TimerService,
    watermark: i64,
    windows: Vec<Window>,
    /// Results of fired windows, in order.
    pub outputs: Vec<Event>,
    /// Late events bound for the late side output.
    pub side_outputs: Vec<(String, Event)>,
    /// Late events dropped (no late side output declared).
    pub dropped_late: u64,
}

fn window_key(group: u16, key: &[u8], window: Window) -> Vec<u8> {
    let mut namespace = [0u8; 16];
    namespace[..8].copy_from_slice(&window.start.to_be_bytes());
    namespace[8..].copy_from_slice(&window.end.to_be_bytes());
    StateKey::new(group, ACCUMULATORS, StateKind::Value, key, &namespace).encode()
}

impl WindowOperator {
    /// An operator over `backend` calling `function`, restoring its timers.
    pub fn new(config: WindowConfig, function: AggregateFunctionInstance, mut backend: Box<dyn KeyedStateBackend>) -> Result<Self, WindowError> {
        let fire = TimerService::load(backend.as_mut(), config.max_parallelism, FIRE_TIMERS)?;
        let cleanup = TimerService::load(backend.as_mut(), config.max_parallelism, CLEANUP_TIMERS)?;
        Ok(Self { config, function, backend, fire, cleanup, watermark: i64::MIN, windows: Vec::new(), outputs: Vec::new(), side_outputs: Vec::new(), dropped_late: 0 })
    }

    /// The state backend, to flush it.
    pub fn backend_mut(&mut self) -> &mut dyn KeyedStateBackend {
        self.backend.as_mut()
    }

    /// Whether `window` no longer accepts events at the current watermark.
    fn is_late(&self, window: Window) -> bool {
        (window.end - 1).saturating_add(self.config.allowed_lateness) <= self.watermark
    }

    fn accumulator_key(&self, key: &[u8], window: Window) -> Vec<u8> {
        window_key(key_group(key, self.config.max_parallelism), key, window)
    }

    fn read_accumulator(&mut self, key: &[u8], window: Window) -> Result<Option<Vec<u8>>, StateError> {
        let stored = self.backend.get(&self.accumulator_key(key, window))?;
        Ok(match stored {
            Some(bytes) => ttl::decode(&bytes, i64::MIN)?.map(<[u8]>::to_vec),
            None => None,
        })
    }

    /// Add a batch of (key, event) pairs to their windows.
    pub fn process(&mut self, batch: Vec<(Vec<u8>, Event)>) -> Result<(), WindowError> {
        let mut index: HashMap<(Vec<u8>, i64, i64), usize> = HashMap::new();
        let mut groups: Vec<(Vec<u8>, Window, Vec<Event>)> = Vec::new();
        for (key, event) in batch {
            self.windows.clear();
            self.config.assigner.assign(event.timestamp, &mut self.windows);
            let live: Vec<Window> = self.windows.iter().copied().filter(|w| !self.is_late(*w)).collect();
            if live.is_empty() {
                match &self.config.late_output {
                    Some(name) => self.side_outputs.push((name.clone(), event)),
                    None => self.dropped_late += 1,
                }
                continue;
            }
            for window in live {
                let slot = *index.entry((key.clone(), window.start, window.end)).or_insert_with(|| {
                    groups.push((key.clone(), window, Vec::new()));
                    groups.len() - 1
                });
                groups[slot].2.push(event.clone());
            }
        }
        if groups.is_empty() {
            return Ok(());
        }
        let mut batch = Vec::with_capacity(groups.len());
        for (key, window, events) in &mut groups {
            batch.push(Accumulate { accumulator: self.read_accumulator(key, *window)?, events: std::mem::take(events) });
        }
        let accumulators = self.function.add(&batch)?;
        let mut refire = Vec::new();
        for ((key, window, _), accumulator) in groups.into_iter().zip(accumulators) {
            let storage = self.accumulator_key(&key, window);
            self.backend.put(&storage, &ttl::encode(&accumulator, None))?;
            if window.end - 1 <= self.watermark {
                refire.push((key, window));
            } else {
                self.fire.register(self.backend.as_mut(), &key, TimeDomain::EventTime, window.end - 1)?;
            }
        }
        self.fire_windows(refire)
    }

    /// Event time has reached `watermark`: fire and clean up due windows.
    pub fn on_watermark(&mut self, watermark: i64) -> Result<(), WindowError> {
        self.watermark = watermark;
        let size = self.config.assigner.size();
        loop {
            let due = self.fire.take_due(self.backend.as_mut(), TimeDomain::EventTime, watermark)?;
            if due.is_empty() {
                break;
            }
            let windows = due
                .into_iter()
                .flat_map(|keyed| {
                    let key = keyed.key;
                    keyed.timers.into_iter().map(move |t| (key.clone(), Window { start: t.timestamp + 1 - size, end: t.timestamp + 1 }))
                })
                .collect();
            self.fire_windows(windows)?;
        }
        for keyed in self.cleanup.take_due(self.backend.as_mut(), TimeDomain::EventTime, watermark)? {
            for timer in keyed.timers {
                let window = Window { start: timer.timestamp + 1 - self.config.allowed_lateness - size, end: timer.timestamp + 1 - self.config.allowed_lateness };
                let storage = self.accumulator_key(&keyed.key, window);
                self.backend.delete(&storage)?;
            }
        }
        Ok(())
    }

    /// Emit the results of `windows`, then drop or keep their state.
    fn fire_windows(&mut self, windows: Vec<(Vec<u8>, Window)>) -> Result<(), WindowError> {
        let mut requests = Vec::with_capacity(windows.len());
        for (key, window) in windows {
            if let Some(accumulator) = self.read_accumulator(&key, window)? {
                requests.push(WindowResult { key, window, accumulator });
            }
        }
        if requests.is_empty() {
            return Ok(());
        }
        self.outputs.extend(self.function.results(&requests)?);
        for WindowResult { key, window, .. } in requests {
            if self.config.allowed_lateness == 0 {
                let storage = self.accumulator_key(&key, window);
                self.backend.delete(&storage)?;
            } else {
                let until = (window.end - 1).saturating_add(self.config.allowed_lateness);
                self.cleanup.register(self.backend.as_mut(), &key, TimeDomain::EventTime, until)?;
            }
        }
        Ok(())
    }
}
