//! Windows: assigning events to event-time windows, keeping one
//! accumulator per (key, window), firing results when the watermark passes
//! a window's end, and handling late events.
//!
//! It calls a Wasm aggregate or window process function through
//! [`WindowFunction`] and keeps its state and timers in the subtask's
//! state backend.

mod assigner;
mod elements;
mod function;
mod operator;
pub mod session;

pub use assigner::WindowAssigner;
pub use function::WindowFunction;
pub use operator::{WindowConfig, WindowError, WindowOperator};

#[cfg(test)]
mod tests;
