//! The host API on `wasm32`: calls to the component's imports, with value
//! state served from the batch.
//!
//! The host sends, with each `process` batch, the values of the value
//! states the function has opened for every key of the batch
//! (`keyed-batch.prefetched`). Reads of those states are answered from
//! there and writes are collected and sent back with one
//! `state.write-values` call at the end of the batch, so the common
//! read-modify-write of a value per key costs no host call. Selecting the
//! key is lazy too: `state.select-key` is called only before a call that
//! needs it (map and list state, timers, value states not read ahead).

use std::cell::{Cell, RefCell};

use crate::bindings::weir::function::{broadcast, context, state, timers, types};
use crate::{Error, Event, LogLevel, Ttl, TtlUpdate};

/// No write to a cell in this batch.
const UNWRITTEN: u32 = u32::MAX;

/// The current batch, as far as state is concerned.
struct Batch {
    /// Counts batches, so handles know when their cell index is stale.
    generation: u64,
    /// The key index the function is processing.
    current: Option<u32>,
    /// The key index the host has selected.
    selected: Option<u32>,
    /// Keys in the batch.
    keys: usize,
    /// What the host read ahead; `None` outside `process`.
    prefetched: Option<types::ValueCells>,
    /// Per prefetched cell, the index of its latest write in `writes`.
    latest: Vec<u32>,
    /// Writes to send back: (state, key) cells and their values.
    cells: Vec<(u32, u32)>,
    writes: types::ValueCells,
}

thread_local! {
    static BATCH: RefCell<Batch> = RefCell::new(Batch {
        generation: 0,
        current: None,
        selected: None,
        keys: 0,
        prefetched: None,
        latest: Vec::new(),
        cells: Vec::new(),
        writes: crate::packing::no_cells(),
    });
}

/// A `process` batch begins: `prefetched` holds the host's read-ahead
/// values for its `keys` keys.
pub(crate) fn begin_batch(prefetched: types::ValueCells, keys: usize) {
    BATCH.with_borrow_mut(|batch| {
        batch.generation += 1;
        batch.current = None;
        batch.selected = None;
        batch.keys = keys;
        batch.latest.clear();
        batch.latest.resize(prefetched.states.len() * keys, UNWRITTEN);
        batch.prefetched = Some(prefetched);
        batch.cells.clear();
        batch.writes.states.clear();
        batch.writes.present.clear();
        batch.writes.values.clear();
        batch.writes.ends.clear();
    });
}

/// The batch ends: send the buffered value writes to the host.
pub(crate) fn end_batch() -> Result<(), Error> {
    BATCH.with_borrow_mut(|batch| {
        let prefetched = batch.prefetched.take();
        batch.current = None;
        batch.selected = None;
        if batch.cells.is_empty() {
            return Ok(());
        }
        batch.writes.states = prefetched.map(|p| p.states).unwrap_or_default();
        let result = state::write_values(&batch.cells, &batch.writes).map_err(state_error);
        batch.cells.clear();
        result
    })
}

/// Scope state to entry `index` of the current batch (`key` is only used
/// natively). The host hears of it when a call needs it.
pub(crate) fn select_key(index: u32, _key: &[u8]) -> Result<(), Error> {
    BATCH.with_borrow_mut(|batch| batch.current = Some(index));
    Ok(())
}

/// Tell the host which key the function is on (before reporting an error,
/// so the host can name the key).
pub(crate) fn report_current_key() {
    let _ = selected();
}

/// Make sure the host has the current key selected before a state call.
fn selected() -> Result<(), Error> {
    BATCH.with_borrow_mut(|batch| match batch.current {
        Some(current) if batch.selected != Some(current) => {
            state::select_key(current).map_err(state_error)?;
            batch.selected = Some(current);
            Ok(())
        }
        _ => Ok(()),
    })
}

fn state_error(error: state::StateError) -> Error {
    Error::msg(match error {
        state::StateError::InvalidName(name) => format!("invalid state name {name:?}"),
        state::StateError::InvalidTtl => {
            "a time to live must be at least a millisecond".to_string()
        }
        state::StateError::TooLarge(limit) => {
            format!("state key or value larger than the host's limit of {limit} bytes")
        }
        state::StateError::NoCurrentKey => "state used outside of `process`".to_string(),
        state::StateError::UnknownKey(index) => {
            format!("key index {index} is not in the current batch")
        }
        state::StateError::Backend(message) => format!("state backend: {message}"),
    })
}

fn wit_ttl(ttl: Option<Ttl>) -> Option<state::Ttl> {
    ttl.map(|ttl| state::Ttl {
        millis: ttl.millis(),
        update: match ttl.update {
            TtlUpdate::OnCreateAndWrite => state::TtlUpdate::OnCreateAndWrite,
            TtlUpdate::OnReadAndWrite => state::TtlUpdate::OnReadAndWrite,
        },
    })
}

/// Cell `i` of packed value cells: `None` when the host did not send it,
/// else the value if present.
fn value<'a>(
    present: &[bool],
    values: &'a [u8],
    ends: &[u32],
    i: usize,
) -> Option<Option<&'a [u8]>> {
    let start = match i.checked_sub(1) {
        Some(previous) => *ends.get(previous)? as usize,
        None => 0,
    };
    let bytes = values.get(start..*ends.get(i)? as usize)?;
    Some(present.get(i)?.then_some(bytes))
}

/// A value-state handle.
pub(crate) struct RawValue {
    handle: state::ValueState,
    name: String,
    /// (batch generation, index of this state among the read-ahead ones).
    slot: Cell<(u64, Option<u32>)>,
}

impl RawValue {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        let handle = state::ValueState::open(name, wit_ttl(ttl)).map_err(state_error)?;
        Ok(Self { handle, name: name.to_string(), slot: Cell::new((0, None)) })
    }

    /// The current key's cell, when the host read this state ahead.
    fn cell(&self, batch: &Batch) -> Option<usize> {
        let (generation, state) = self.slot.get();
        let state = if generation == batch.generation {
            state
        } else {
            let found = batch
                .prefetched
                .as_ref()?
                .states
                .iter()
                .position(|s| *s == self.name)
                .map(|i| i as u32);
            self.slot.set((batch.generation, found));
            found
        };
        Some(state? as usize * batch.keys + batch.current? as usize)
    }

    /// Run `f` on the current key's value (served from the batch when the
    /// host read this state ahead: no copy, no host call).
    pub(crate) fn get_with<R>(&self, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R, Error> {
        // `Err(f)`: not served (a state or cell the host did not send).
        let served = BATCH.with_borrow(|batch| {
            let found = self.cell(batch).and_then(|cell| match *batch.latest.get(cell)? {
                UNWRITTEN => {
                    let p = batch.prefetched.as_ref()?;
                    value(&p.present, &p.values, &p.ends, cell)
                }
                write => value(
                    &batch.writes.present,
                    &batch.writes.values,
                    &batch.writes.ends,
                    write as usize,
                ),
            });
            match found {
                Some(found) => Ok(f(found)),
                None => Err(f),
            }
        });
        match served {
            Ok(result) => Ok(result),
            Err(f) => {
                selected()?;
                Ok(f(self.handle.get().map_err(state_error)?.as_deref()))
            }
        }
    }

    /// Write the current key's value: what `fill` appends to an empty
    /// buffer (`None`: clear it). Buffered in the batch when the host read
    /// this state ahead (`fill` then writes straight into the batch), else
    /// a host call.
    fn write_with(
        &self,
        fill: Option<impl FnOnce(&mut Vec<u8>) -> Result<(), Error>>,
    ) -> Result<(), Error> {
        let buffered = BATCH.with_borrow_mut(|batch| {
            let Some((cell, key)) =
                self.cell(batch).zip(batch.current).filter(|&(cell, _)| cell < batch.latest.len())
            else {
                return Err(fill);
            };
            let (start, present) = (batch.writes.values.len(), fill.is_some());
            if let Some(fill) = fill {
                if let Err(error) = fill(&mut batch.writes.values) {
                    batch.writes.values.truncate(start);
                    return Ok(Err(error));
                }
            }
            batch.latest[cell] = batch.cells.len() as u32;
            batch.cells.push(((cell / batch.keys) as u32, key));
            batch.writes.present.push(present);
            batch.writes.ends.push(u32::try_from(batch.writes.values.len()).unwrap_or(u32::MAX));
            Ok(Ok(()))
        });
        let fill = match buffered {
            Ok(result) => return result,
            Err(fill) => fill,
        };
        selected()?;
        match fill {
            Some(fill) => {
                let mut value = Vec::new();
                fill(&mut value)?;
                self.handle.set(&value)
            }
            None => self.handle.clear(),
        }
        .map_err(state_error)
    }

    /// Set the current key's value to what `encode` appends to an empty
    /// buffer.
    pub(crate) fn set_with(
        &self,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.write_with(Some(encode))
    }

    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.write_with(None::<fn(&mut Vec<u8>) -> Result<(), Error>>)
    }
}

/// A map-state handle.
pub(crate) struct RawMap(state::MapState);

impl RawMap {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        state::MapState::open(name, wit_ttl(ttl)).map(Self).map_err(state_error)
    }
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        selected()?;
        self.0.get(key).map_err(state_error)
    }
    pub(crate) fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        selected()?;
        self.0.put(key, value).map_err(state_error)
    }
    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), Error> {
        selected()?;
        self.0.remove(key).map_err(state_error)
    }
    pub(crate) fn contains(&self, key: &[u8]) -> Result<bool, Error> {
        selected()?;
        self.0.contains(key).map_err(state_error)
    }
    pub(crate) fn entries(
        &self,
        start_after: Option<&[u8]>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        selected()?;
        self.0.entries(start_after, limit).map_err(state_error)
    }
    pub(crate) fn is_empty(&self) -> Result<bool, Error> {
        selected()?;
        self.0.is_empty().map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        selected()?;
        self.0.clear().map_err(state_error)
    }
}

/// A list-state handle.
pub(crate) struct RawList(state::ListState);

impl RawList {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        state::ListState::open(name, wit_ttl(ttl)).map(Self).map_err(state_error)
    }
    pub(crate) fn add(&self, value: &[u8]) -> Result<(), Error> {
        selected()?;
        self.0.add(value).map_err(state_error)
    }
    pub(crate) fn add_all(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        selected()?;
        self.0.add_all(values).map_err(state_error)
    }
    pub(crate) fn get(&self) -> Result<Vec<Vec<u8>>, Error> {
        selected()?;
        self.0.get().map_err(state_error)
    }
    pub(crate) fn update(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        selected()?;
        self.0.update(values).map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        selected()?;
        self.0.clear().map_err(state_error)
    }
}

/// A broadcast-map handle (no key involved: never selects one).
pub(crate) struct RawBroadcast(broadcast::BroadcastMap);

impl RawBroadcast {
    pub(crate) fn open(name: &str) -> Result<Self, Error> {
        broadcast::BroadcastMap::open(name).map(Self).map_err(state_error)
    }
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.0.get(key).map_err(state_error)
    }
    pub(crate) fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.0.put(key, value).map_err(state_error)
    }
    pub(crate) fn remove(&self, key: &[u8]) -> Result<(), Error> {
        self.0.remove(key).map_err(state_error)
    }
    pub(crate) fn entries(
        &self,
        start_after: Option<&[u8]>,
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        self.0.entries(start_after, limit).map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.0.clear().map_err(state_error)
    }
}

pub(crate) fn register_timer(domain: types::TimeDomain, timestamp: i64) -> Result<(), Error> {
    selected()?;
    timers::register(domain, timestamp).map_err(state_error)
}

pub(crate) fn delete_timer(domain: types::TimeDomain, timestamp: i64) -> Result<(), Error> {
    selected()?;
    timers::delete(domain, timestamp).map_err(state_error)
}

pub(crate) fn emit_batch(batch: &crate::bindings::weir::function::types::EventBatch) {
    context::emit_batch(batch);
}

pub(crate) fn emit_to(name: &str, event: &Event) {
    context::emit_to(name, event);
}

pub(crate) fn current_watermark() -> i64 {
    context::current_watermark()
}

pub(crate) fn processing_time() -> i64 {
    context::processing_time()
}

pub(crate) fn log(level: LogLevel, message: &str) {
    let level = match level {
        LogLevel::Trace => types::LogLevel::Trace,
        LogLevel::Debug => types::LogLevel::Debug,
        LogLevel::Info => types::LogLevel::Info,
        LogLevel::Warn => types::LogLevel::Warn,
        LogLevel::Error => types::LogLevel::Error,
    };
    context::log(level, message);
}
