//! The host side of the WIT `timers` interface: event- and processing-time
//! timers for the key the guest selected.
//!
//! [`TimersCtx`] holds the function's [`TimerService`] (the queue, written
//! through to keyed state) and the timer changes since the last mark, so a
//! failed call's changes can be undone; [`TimersView`] borrows it with the
//! call's batch and the state backend and implements the bindings'
//! `timers::Host`. Due timers go back to the function through
//! `process-fn.on-timers`, driven by the pipeline.
//!
//! ```no_run
//! # use weir_host::runtime::{new_engine, host::{self, HostCtx}};
//! # use weir_host::runtime::bindings::weir::function::{state::Host as _, timers::Host as _};
//! # use weir_host::runtime::bindings::weir::function::types::TimeDomain;
//! # use weir_host::state::InMemoryBackend;
//! let engine = new_engine(Default::default()).unwrap();
//! let mut linker = wasmtime::component::Linker::<HostCtx>::new(&engine);
//! host::timers::add_to_linker(&mut linker, HostCtx::timers).unwrap();
//! // The host calls it natively the same way:
//! let mut ctx = HostCtx::new("sessions", Some(Box::new(InMemoryBackend::new())), 128);
//! ctx.begin_batch([&b"c1"[..]].into_iter());
//! ctx.state().select_key(0).unwrap().unwrap();
//! ctx.timers().register(TimeDomain::EventTime, 60_000).unwrap().unwrap();
//! assert_eq!(ctx.take_due_timers(TimeDomain::EventTime, 60_000).unwrap().len(), 1);
//! ```

use wasmtime::component::{HasData, Linker};

use super::super::bindings::weir::function::types::{FiredTimer, KeyedTimers, TimeDomain};
use super::super::bindings::weir::function::{state, timers};
use super::state::{backend_error, no_keyed_state};
use super::CallScope;
use crate::state::{KeyedStateBackend, StateError};
use crate::time::{self, TimerService, FUNCTION_TIMERS};

impl From<TimeDomain> for time::TimeDomain {
    fn from(domain: TimeDomain) -> Self {
        match domain {
            TimeDomain::EventTime => time::TimeDomain::EventTime,
            TimeDomain::ProcessingTime => time::TimeDomain::ProcessingTime,
        }
    }
}

/// What the `timers` interface keeps for one function instance.
pub struct TimersCtx {
    /// The function's timers.
    service: TimerService,
    /// Each timer change since the last mark: (registered?, key, domain,
    /// timestamp).
    changes: Vec<(bool, Vec<u8>, time::TimeDomain, i64)>,
}

impl TimersCtx {
    /// No timers yet, for keys of `max_parallelism` key groups.
    pub fn new(max_parallelism: u16) -> Self {
        Self { service: TimerService::new(max_parallelism, FUNCTION_TIMERS), changes: Vec::new() }
    }

    /// Load the timers stored in `backend` (at subtask start).
    pub fn load(
        &mut self,
        backend: &mut dyn KeyedStateBackend,
        max_parallelism: u16,
    ) -> Result<(), StateError> {
        self.service = TimerService::load(backend, max_parallelism, FUNCTION_TIMERS)?;
        Ok(())
    }

    /// Remove and return the timers of `domain` due at `up_to`, by key, as
    /// `on-timers` takes them.
    pub fn take_due(
        &mut self,
        backend: &mut dyn KeyedStateBackend,
        domain: TimeDomain,
        up_to: i64,
    ) -> Result<Vec<KeyedTimers>, StateError> {
        let due = self.service.take_due(backend, domain.into(), up_to)?;
        Ok(due
            .into_iter()
            .map(|due| KeyedTimers {
                key: due.key,
                timers: due
                    .timestamps
                    .into_iter()
                    .map(|timestamp| FiredTimer { timestamp, domain })
                    .collect(),
            })
            .collect())
    }

    /// The earliest timer of `domain`, if any.
    pub fn next(&self, domain: TimeDomain) -> Option<i64> {
        self.service.next(domain.into())
    }

    /// Forget the changes recorded so far (a mark, or the end of one).
    pub(super) fn forget_changes(&mut self) {
        self.changes.clear();
    }

    /// Undo the queue's changes since the mark (the backend's journal
    /// restores the stored timers).
    pub(super) fn undo_changes(&mut self) {
        while let Some((registered, key, domain, timestamp)) = self.changes.pop() {
            self.service.undo(registered, key, domain, timestamp);
        }
    }
}

/// The `timers` interface's view of a store: its context, the call's batch
/// and the state backend the timers are written to.
pub struct TimersView<'a> {
    pub(super) ctx: &'a mut TimersCtx,
    pub(super) call: &'a CallScope,
    pub(super) backend: Option<&'a mut (dyn KeyedStateBackend + 'static)>,
}

/// [`HasData`] for the `timers` interface: its bindings see a [`TimersView`].
pub struct WeirTimers;

impl HasData for WeirTimers {
    type Data<'a> = TimersView<'a>;
}

/// Register the `timers` interface in `linker`, reached through `get`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> TimersView<'_>,
) -> wasmtime::Result<()> {
    timers::add_to_linker::<T, WeirTimers>(linker, get)
}

impl TimersView<'_> {
    /// Register or delete a timer for the selected key.
    fn change(
        &mut self,
        domain: TimeDomain,
        timestamp: i64,
        register: bool,
    ) -> Result<(), state::StateError> {
        let index = self.call.selected.ok_or(state::StateError::NoCurrentKey)?;
        let (key, _) = self.call.key(index);
        let backend = self.backend.as_deref_mut().ok_or_else(no_keyed_state)?;
        let (service, domain) = (&mut self.ctx.service, domain.into());
        let result = if register {
            service.register(backend, key, domain, timestamp)
        } else {
            service.delete(backend, key, domain, timestamp)
        };
        if result.as_ref().is_ok_and(|changed| *changed) {
            self.ctx.changes.push((register, key.to_vec(), domain, timestamp));
        }
        result.map(drop).map_err(backend_error)
    }
}

impl timers::Host for TimersView<'_> {
    fn register(
        &mut self,
        domain: TimeDomain,
        timestamp: i64,
    ) -> wasmtime::Result<Result<(), state::StateError>> {
        Ok(self.change(domain, timestamp, true))
    }

    fn delete(
        &mut self,
        domain: TimeDomain,
        timestamp: i64,
    ) -> wasmtime::Result<Result<(), state::StateError>> {
        Ok(self.change(domain, timestamp, false))
    }
}
