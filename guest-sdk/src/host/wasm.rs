//! The host API on `wasm32`: thin calls to the component's imports.

use crate::bindings::weir::function::{context, state, timers, types};
use crate::{Error, Event, LogLevel, Ttl, TtlUpdate};

fn state_error(error: state::StateError) -> Error {
    Error::msg(match error {
        state::StateError::InvalidName(name) => format!("invalid state name {name:?}"),
        state::StateError::InvalidTtl => "a time to live must be at least a millisecond".to_string(),
        state::StateError::TooLarge(limit) => format!("state key or value larger than the host's limit of {limit} bytes"),
        state::StateError::NoCurrentKey => "state used outside of `process`".to_string(),
        state::StateError::UnknownKey(index) => format!("key index {index} is not in the current batch"),
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

/// Scope state to entry `index` of the current batch (`key` is only used natively).
pub(crate) fn select_key(index: u32, _key: &[u8]) -> Result<(), Error> {
    state::select_key(index).map_err(state_error)
}

/// A value-state handle.
pub(crate) struct RawValue(state::ValueState);

impl RawValue {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        state::ValueState::open(name, wit_ttl(ttl)).map(Self).map_err(state_error)
    }
    pub(crate) fn get(&self) -> Result<Option<Vec<u8>>, Error> {
        self.0.get().map_err(state_error)
    }
    pub(crate) fn set(&self, value: &[u8]) -> Result<(), Error> {
        self.0.set(value).map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.0.clear().map_err(state_error)
    }
}

/// A map-state handle.
pub(crate) struct RawMap(state::MapState);

impl RawMap {
    pub(crate) fn open(name: &str, ttl: Option<Ttl>) -> Result<Self, Error> {
        state::MapState::open(name, wit_ttl(ttl)).map(Self).map_err(state_error)
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
    pub(crate) fn contains(&self, key: &[u8]) -> Result<bool, Error> {
        self.0.contains(key).map_err(state_error)
    }
    pub(crate) fn entries(&self, start_after: Option<&[u8]>, limit: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        self.0.entries(start_after, limit).map_err(state_error)
    }
    pub(crate) fn is_empty(&self) -> Result<bool, Error> {
        self.0.is_empty().map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
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
        self.0.add(value).map_err(state_error)
    }
    pub(crate) fn add_all(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.0.add_all(values).map_err(state_error)
    }
    pub(crate) fn get(&self) -> Result<Vec<Vec<u8>>, Error> {
        self.0.get().map_err(state_error)
    }
    pub(crate) fn update(&self, values: &[Vec<u8>]) -> Result<(), Error> {
        self.0.update(values).map_err(state_error)
    }
    pub(crate) fn clear(&self) -> Result<(), Error> {
        self.0.clear().map_err(state_error)
    }
}

pub(crate) fn register_timer(domain: types::TimeDomain, timestamp: i64) -> Result<(), Error> {
    timers::register(domain, timestamp).map_err(state_error)
}

pub(crate) fn delete_timer(domain: types::TimeDomain, timestamp: i64) -> Result<(), Error> {
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
