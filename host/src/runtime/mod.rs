//! The Wasm runtime: the wasmtime engine, loading and caching components,
//! the host side of the WIT interfaces, and calling a function's exports.
//!
//! It never touches sources, sinks or RocksDB directly: state goes through
//! the [`KeyedStateBackend`](crate::state::KeyedStateBackend) trait and
//! outputs are collected for the pipeline to forward.

pub mod bindings;
mod engine;
#[cfg(any(test, feature = "fuzz"))]
#[doc(hidden)]
pub mod fuzz;
pub mod host;
mod instance;
pub mod language;
pub mod limits;
pub(crate) mod loader;
pub mod native;
pub mod packed;
pub mod packing;
mod role;
pub mod state_types;
pub mod wasi;

pub use engine::{new_engine, EngineLimits};
pub use host::HostCtx;
pub use instance::{
    AggregateFunctionInstance, CallError, KeyFunctionInstance, ProcessFunctionInstance,
    TransformInstance, WindowProcessFunctionInstance,
};
pub use language::Language;
pub use limits::FunctionLimits;
pub use loader::{componentize, digest, FunctionLoader, LoadError, LoadedFunction};
pub use role::{Inputs, Role};
pub use state_types::{DeclaredKind, DeclaredState, Shape, StateTypes};

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "0.2.0";
