//! Running a pipeline: the threads, channels and operators that carry
//! events from sources through keyed stages to sinks. The spec it runs
//! comes from [`crate::specification`]; what it measures goes to [`crate::observe`];
//! deciding when to run, restart or stop belongs to [`crate::serve`].
//!
//! Modules, from the bottom up (a module uses those above it in this list,
//! none below):
//!
//! * `error`: why a run failed; `options`: how to run it; `thread`:
//!   starting the threads;
//! * `failures`, `operator`: the keyed operator a subtask runs;
//!   `messages`: what flows between the threads;
//! * `lock`: one process at a time runs a pipeline on a data directory
//!   (and one `weir serve` serves it);
//! * `load`: checking a spec (with its connectors' own checks, such as the
//!   Kafka sink's exactly-once rules) and loading its functions;
//!   `restore`: where a run starts and the state it starts with;
//! * `router`, `source_task`, `subtask`, `sink_task`: moving events and
//!   the three kinds of thread;
//! * `runner`: [`run`], the outline that wires them together;
//! * `turn`: one run of a pipeline at a time in this process; `stop`:
//!   running a pipeline on a thread of its own and stopping it within a
//!   bound.

mod error;
pub mod failures;
mod load;
pub(crate) mod lock;
mod messages;
mod operator;
mod options;
mod restore;
mod router;
mod runner;
mod seed;
mod sink_task;
mod source_task;
mod stop;
mod subtask;
mod thread;
mod turn;

pub use load::{prepare, CheckedPipeline};
pub use lock::LockError;
pub use runner::{
    checkpoint_storage, run, run_checked, ProgressFn, RestoreFrom, RunError, RunOptions,
};
pub use seed::{Seed, SeedFrom};
pub use stop::{stop_run, RunThread, Stopped, CANCEL_WAIT, DEFAULT_STOP_GRACE};
