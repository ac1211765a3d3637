//! Pipelines: the spec users write and the machinery that runs it.
//!
//! Modules, from the bottom up (a module uses those above it in this list,
//! none below):
//!
//! * [`spec`]: the spec users write; [`record`]: the spec a deployed
//!   pipeline's record runs; [`grants`]: what such a spec may touch on
//!   the host; `error`: why a run failed;
//!   `summary`: counts and what a run reports; `sampling`: rates of a
//!   running pipeline; `live`: counters and control while it runs; `options`: how to run it;
//! * `failures`, `operator`: the keyed operator a subtask runs;
//!   [`inspect`]: reading a key's state while it runs; `tail`: a sample
//!   of what it writes; [`latency`]: how long its output took;
//!   `messages`: what flows between the threads; `thread`: starting them;
//! * `lock`: one process at a time runs a pipeline on a data directory
//!   (and one `weir serve` serves it);
//! * `load`: checking a spec (with its connectors' own checks, such as the
//!   Kafka sink's exactly-once rules) and loading its functions;
//!   `restore`: where a run starts; [`restart`]: how `weir serve`
//!   restarts a failed run;
//! * `source_task`, `subtask`, `sink_task`: the three kinds of thread;
//! * `runner`: [`run`], the outline that wires them together.

mod error;
pub mod failures;
pub mod grants;
pub mod graph;
pub mod inspect;
pub mod latency;
mod live;
mod load;
pub(crate) mod lock;
mod messages;
mod operator;
mod options;
pub mod record;
pub mod restart;
mod restore;
mod router;
mod runner;
pub mod sampling;
mod sink_task;
mod source_task;
pub mod spec;
mod subtask;
mod summary;
pub mod tail;
mod thread;

pub use live::{LiveCounts, LiveMetrics, RequestError, RunHandle};
pub use lock::LockError;
pub use record::DeployedSpec;
pub use runner::{
    check, checkpoint_storage, run, OperatorCounts, ProgressFn, RestoreFrom, RunError, RunOptions,
    RunSummary,
};
pub use spec::{PipelineSpec, SpecError};
