//! # weir-host
//!
//! The Weir host: reads events from sources, keys them with a Wasm key
//! function, hands each key's events in batches to a Wasm process function
//! whose keyed state lives in RocksDB, and writes what it emits to sinks.
//!
//! One concern per module, in layers: a module uses only modules of the
//! layers below it (and its own layer's leaves), never one above, so no two
//! modules import each other.
//!
//! ```text
//! binary      cli/ (main.rs: arguments → commands; not part of this library)
//!   ─────────────────────────────────────────────────────────────────────
//! serving     api          bench (runs `weir` processes)   project
//! running     pipeline
//! parts       connectors   window   join   registry
//! engine      runtime
//! storage     checkpoint   time
//!             state
//! leaves      names   units   config   fault   metrics
//! ```
//!
//! * [`api`] — the HTTP API (axum routes, OpenAPI), the supervisor that
//!   runs deployed pipelines, and the CLI's client of it;
//! * `bench` — `weir bench` (cargo feature `bench`, on by default): the
//!   standard workloads, their native twins (handed to runs as a
//!   [`runtime::native::NativeCatalog`]) and the tables;
//! * [`project`] — `weir init` and `weir build`: function projects in
//!   Rust, Python and TypeScript, with the SDKs embedded in the binary;
//! * [`pipeline`] — the spec and running a pipeline: the source task, keyed
//!   subtasks and sink task, restore, function loading;
//! * [`connectors`] — sources and sinks, each owning its configuration, and
//!   the registry that ties a spec's `type:` to them;
//! * [`window`] — window assignment, accumulators, firing and lateness;
//! * [`join`] — the host-provided interval and window joins of two inputs;
//! * [`registry`] — the stores of uploaded functions and deployed pipelines;
//! * [`runtime`] — wasmtime engine, component loading and caching, the host
//!   side of the WIT interfaces (one module per interface), calling functions;
//! * [`checkpoint`] — checkpoint settings, the coordinator, storage
//!   (object_store), savepoints and restore;
//! * [`time`] — watermarks and timers;
//! * [`state`] — keyed state backends, the state key layout and encodings;
//! * [`names`] — the one rule for user-given names; [`units`] — sizes;
//!   [`config`] — where the host keeps its files; [`files`] — writing
//!   large ones; [`fault`] — fault injection for crash tests; [`metrics`]
//!   — process-level measurements.

pub mod api;
#[cfg(feature = "bench")]
pub mod bench;
pub mod checkpoint;
pub mod cluster;
pub mod config;
pub mod connectors;
pub mod fault;
pub mod files;
pub mod join;
pub mod metrics;
pub mod names;
pub mod pipeline;
pub mod project;
pub mod registry;
pub mod runtime;
pub mod state;
pub mod telemetry;
pub mod time;
pub mod units;
pub mod window;

/// The event type that flows through pipelines (the WIT `event` record).
pub use runtime::bindings::weir::function::types::Event;
