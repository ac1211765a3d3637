//! Pipelines: the spec users write and the machinery that runs it.

pub mod failures;
mod live;
mod operator;
mod runner;
pub mod spec;

pub use live::{LiveCounts, LiveMetrics, RunHandle};
pub use runner::{
    check, checkpoint_storage, run, OperatorCounts, ProgressFn, RestoreFrom, RunError, RunOptions,
    RunSummary,
};
pub use spec::{PipelineSpec, SpecError};
