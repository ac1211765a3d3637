//! Windows: assigning events to event-time windows, keeping one
//! accumulator per (key, window), firing results when the watermark passes
//! a window's end, and handling late events.
//!
//! It calls a Wasm aggregate function through
//! [`AggregateFunctionInstance`](crate::runtime::AggregateFunctionInstance)
//! and keeps its state and timers in the subtask's state backend.

mod assigner;
mod operator;

pub use assigner::WindowAssigner;
pub use operator::{WindowConfig, WindowError, WindowOperator};
