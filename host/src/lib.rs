//! # weir-host
//!
//! The Weir host: reads events from sources, keys them with a Wasm key
//! function, hands each key's events in batches to a Wasm process function
//! whose keyed state lives in RocksDB, and writes what it emits to sinks.
//!
//! One job per module, in layers: a module uses only modules on the rows
//! below its own in this drawing, never one on its row or above, so no two
//! modules import each other. `tests/architecture.rs` reads this drawing
//! and fails when an import climbs (or a folder's files import each other
//! in a circle). Above all of it: the `weir` binary (crate `weir-cli`)
//! and the benchmarks (crate `weir-bench`), outside this library.
//!
//! ```text
//! serving     api
//! lifecycle   serve   project
//! scale-out   cluster
//! running     pipeline
//! language    specification
//! parts       connectors   join   store
//! windows     window
//! observing   observe
//! engine      runtime
//! storage     checkpoint   time
//! state       state
//! leaves      clock   config   fault   files   formats   names   telemetry   units
//! ```
//!
//! * [`api`] — the HTTP API (axum routes, OpenAPI, the console) over
//!   [`serve`], and the CLI's client of it;
//! * [`serve`] — the lifecycle of deployed pipelines under `weir serve`
//!   (deploy, start, restart, savepoint, upgrade, stop), with the server's
//!   limits and grants; no HTTP types;
//! * [`cluster`] — `weir worker`: a pipeline cut into units run by several
//!   processes, coordinated by Kafka;
//! * [`project`] — `weir init` and `weir build`: function projects in
//!   Rust, Python and TypeScript, with the SDKs embedded in the binary;
//! * [`pipeline`] — running a pipeline: the source task, keyed subtasks
//!   and sink task, routing, restore, function loading;
//! * [`specification`] — the spec language users write: one model, lowered into a
//!   graph and checked by one validator;
//! * [`connectors`] — sources and sinks, each owning its configuration, and
//!   the registry that ties a spec's `type:` to them;
//! * [`join`] — the host-provided interval and window joins of two inputs;
//! * [`store`] — the stores of uploaded functions and deployed pipelines;
//! * [`window`] — window assignment, accumulators, firing and lateness;
//! * [`observe`] — live counters, sampling, latency, tail, state lookup,
//!   run summaries and process measurements;
//! * [`runtime`] — wasmtime engine, component loading and caching, the host
//!   side of the WIT interfaces (one module per interface), calling functions;
//! * [`checkpoint`] — checkpoint settings, the coordinator, storage
//!   (object_store), savepoints and restore;
//! * [`time`] — watermarks and timers;
//! * [`state`] — keyed state backends, the state key layout and encodings;
//! * [`formats`] — record formats of the Kafka connectors (Avro,
//!   Protobuf, JSON Schema) and the schema registry;
//! * [`clock`] — the wall clock; [`names`] — the one rule for user-given
//!   names; [`units`] — sizes; [`config`] — where the host keeps its
//!   files; [`files`] — writing large ones; [`fault`] — fault injection for
//!   crash tests; [`telemetry`] — logs and OpenTelemetry spans.

pub mod api;
pub mod checkpoint;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connectors;
pub mod fault;
pub mod files;
pub mod formats;
pub mod join;
pub mod names;
pub mod observe;
pub mod pipeline;
pub mod project;
pub mod runtime;
pub mod serve;
pub mod specification;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod units;
pub mod window;

/// The event type that flows through pipelines (the WIT `event` record).
pub use runtime::bindings::weir::function::types::Event;
