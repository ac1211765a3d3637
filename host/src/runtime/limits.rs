//! What one function instance may use: CPU time per call (checked at epoch
//! deadlines), linear memory, and optionally fuel (instructions) per call.
//!
//! Every engine counts epochs: a ticker thread advances the engine's epoch
//! every [`EPOCH_TICK`], and each call into a function arms a deadline of
//! `call_timeout` worth of ticks. When it passes, the call's thread's CPU
//! time decides: a call that burnt `call_timeout` of CPU is stopped
//! ([`LimitExceeded::Deadline`]); one that was waiting (for a core on a
//! busy machine, for the disk in a state read) gets the rest of its budget.
//! So an endless loop stops about one tick after its budget is spent, and a
//! healthy function is never stopped for the machine's load. Memory growth beyond the limit traps with
//! [`LimitExceeded::Memory`] instead of letting the guest see a failed
//! `memory.grow`. Fuel is counted only by engines built for it (it slows
//! every function by its bookkeeping), so it is off unless a pipeline asks.

use std::time::Duration;

use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};

use super::{HostCtx, Language};
use crate::units::format_bytes;

/// How often the engine's epoch advances: the granularity of deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Default time a call into a function may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_millis(100);

/// Default linear memory of one function instance.
pub const DEFAULT_MEMORY_BYTES: usize = 64 << 20;

/// Default time a call into an interpreted function (Python, JavaScript)
/// may take: an interpreter runs a batch tens of times slower than
/// compiled code (and collects garbage inside the call).
pub const INTERPRETED_CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// Default linear memory of an interpreted function instance: the
/// interpreter, its heap and the batch (CPython starts at ~24 MiB,
/// SpiderMonkey at ~30 MiB, both grow with the batch and the garbage).
pub const INTERPRETED_MEMORY_BYTES: usize = 256 << 20;

/// Most table elements an instance may grow its tables to.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The resources one function instance may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionLimits {
    /// CPU time one call (one batch) may use, host calls included.
    pub call_timeout: Duration,
    /// Largest linear memory, in bytes.
    pub memory_bytes: usize,
    /// Fuel (roughly, Wasm instructions) one call may burn; `None` counts
    /// none.
    pub fuel: Option<u64>,
}

impl Default for FunctionLimits {
    fn default() -> Self {
        Self { call_timeout: DEFAULT_CALL_TIMEOUT, memory_bytes: DEFAULT_MEMORY_BYTES, fuel: None }
    }
}

impl FunctionLimits {
    /// The defaults for a function written in `language`: a deadline and
    /// memory that a healthy function of that language stays well within,
    /// so that an endless loop or a leak is still stopped.
    pub fn defaults_for(language: Language) -> Self {
        if language.is_interpreted() {
            Self {
                call_timeout: INTERPRETED_CALL_TIMEOUT,
                memory_bytes: INTERPRETED_MEMORY_BYTES,
                fuel: None,
            }
        } else {
            Self::default()
        }
    }

    /// Epoch ticks a call may run: its timeout rounded up, plus the tick
    /// already under way when the call starts.
    fn deadline_ticks(&self) -> u64 {
        let tick = EPOCH_TICK.as_nanos();
        (self.call_timeout.as_nanos().div_ceil(tick) as u64).max(1) + 1
    }

    /// Arm `store` for one call: a fresh deadline and fuel budget, and the
    /// thread's CPU time at the start.
    pub(crate) fn arm(&self, store: &mut Store<HostCtx>) {
        store.data_mut().call_started = thread_cpu_time();
        store.set_epoch_deadline(self.deadline_ticks());
        if let Some(fuel) = self.fuel {
            // Only fails on engines without fuel, which `fuel: None` means.
            let _ = store.set_fuel(fuel);
        }
    }

    /// Make `store` check, at each passed deadline, the CPU time its call
    /// has used.
    pub(crate) fn enforce(&self, store: &mut Store<HostCtx>) {
        let limits = *self;
        store.epoch_deadline_callback(move |store| {
            let used = thread_cpu_time().saturating_sub(store.data().call_started);
            match limits.call_timeout.checked_sub(used) {
                Some(left) if !left.is_zero() => {
                    let ticks = left.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64;
                    Ok(UpdateDeadline::Continue(ticks.max(1)))
                }
                _ => Err(LimitExceeded::Deadline { timeout: limits.call_timeout }.into()),
            }
        });
    }
}

/// CPU time the calling thread has used.
pub(crate) fn thread_cpu_time() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// A limit a function ran into (the error inside its trap).
#[derive(Debug, thiserror::Error)]
pub enum LimitExceeded {
    /// One call used more CPU time than it may.
    #[error("deadline exceeded: a call used more than {} of CPU time", humantime::format_duration(*timeout))]
    Deadline {
        /// The limit (`call_timeout`).
        timeout: Duration,
    },
    /// It tried to grow its linear memory beyond the limit.
    #[error("memory limit of {} exceeded (it asked for {})", format_bytes(*limit as u64), format_bytes(*requested as u64))]
    Memory {
        /// The limit, in bytes.
        limit: usize,
        /// What it asked to grow to, in bytes.
        requested: usize,
    },
    /// It tried to grow a table beyond [`MAX_TABLE_ELEMENTS`].
    #[error("table limit of {limit} elements exceeded (it asked for {requested})")]
    Table {
        /// The limit.
        limit: usize,
        /// What it asked to grow to.
        requested: usize,
    },
}

/// The limits are their store's `ResourceLimiter` (memory; tables are
/// capped at [`MAX_TABLE_ELEMENTS`]).
impl ResourceLimiter for FunctionLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(
                LimitExceeded::Memory { limit: self.memory_bytes, requested: desired }.into()
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Err(
                LimitExceeded::Table { limit: MAX_TABLE_ELEMENTS, requested: desired }.into()
            );
        }
        Ok(true)
    }
}

/// Advance `engine`'s epoch every [`EPOCH_TICK`] until the engine is
/// dropped.
pub(crate) fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new().name("wasm-epoch".into()).spawn(move || {
        while let Some(engine) = weak.upgrade() {
            engine.increment_epoch();
            drop(engine);
            std::thread::sleep(EPOCH_TICK);
        }
    })?;
    Ok(())
}

/// What stopped a call, when a limit did: the deadline, the fuel, or a
/// [`LimitExceeded`].
pub(crate) fn limit_hit(error: &wasmtime::Error, limits: &FunctionLimits) -> Option<String> {
    if let Some(exceeded) = error.downcast_ref::<LimitExceeded>() {
        return Some(exceeded.to_string());
    }
    match error.downcast_ref::<wasmtime::Trap>()? {
        wasmtime::Trap::OutOfFuel => {
            Some(format!("fuel of {} exhausted", limits.fuel.unwrap_or(0)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_to_ticks() {
        let limits =
            |ms| FunctionLimits { call_timeout: Duration::from_millis(ms), ..Default::default() };
        assert_eq!(limits(100).deadline_ticks(), 11);
        assert_eq!(limits(1).deadline_ticks(), 2);
        assert_eq!(limits(0).deadline_ticks(), 2);
    }
}
