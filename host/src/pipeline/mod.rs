//! Pipelines: the spec users write and the machinery that runs it.

mod exactly_once;
mod operator;
mod runner;
pub mod spec;

pub use runner::{run, OperatorCounts, ProgressFn, RestoreFrom, RunError, RunOptions, RunSummary};
pub use spec::{PipelineSpec, SpecError};
