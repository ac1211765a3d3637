//! Event time: watermarks and timers.
//!
//! Owns how watermarks are generated from event timestamps and how timers
//! are queued, persisted in keyed state and handed out when due. It never
//! calls Wasm: the pipeline delivers due timers to the function.

mod timers;
mod watermark;

pub use timers::{DueTimers, TimeDomain, TimerService, FUNCTION_TIMERS};
pub use watermark::{BoundedOutOfOrderness, SplitWatermarks, WatermarkSnapshot};
