//! # weir-host
//!
//! The Weir host: reads events from sources, keys them with a Wasm key
//! function, hands each key's events in batches to a Wasm process function
//! whose keyed state lives in RocksDB, and writes what it emits to sinks.
//!
//! One concern per module:
//! * [`runtime`] — wasmtime engine, component loading and caching, the host
//!   side of the WIT interfaces, calling functions;
//! * [`state`] — keyed state backends and the state key layout;
//! * [`checkpoint`] — checkpoint storage (object_store);
//! * [`time`] — watermarks and timers;
//! * [`window`] — window assignment, accumulators, firing and lateness;
//! * [`connectors`] — sources and sinks;
//! * [`pipeline`] — the spec and running a pipeline;
//! * [`config`] — where the host keeps its files;
//! * [`metrics`] — process-level measurements.

pub mod api;
pub mod bench;
pub mod checkpoint;
pub mod config;
pub mod connectors;
pub mod fault;
pub mod metrics;
pub mod names;
pub mod pipeline;
pub mod registry;
pub mod runtime;
pub mod state;
pub mod time;
pub mod units;
pub mod window;

/// The event type that flows through pipelines (the WIT `event` record).
pub use runtime::bindings::weir::function::types::Event;
