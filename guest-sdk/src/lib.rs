//! # weir-sdk — write Weir functions in plain Rust
//!
//! A Weir function is a Rust crate compiled to a WebAssembly component. It
//! implements [`KeyFunction`] (which key does an event belong to?) and/or
//! [`ProcessFunction`] (what happens to a key's events?) — or one of the
//! other roles: [`TransformFunction`] (map, filter, flat-map),
//! [`CoProcessFunction`] (two keyed inputs), [`BroadcastProcessFunction`]
//! (a keyed input and broadcast rules), [`AggregateFunction`] and
//! [`WindowProcessFunction`] (windows) — and marks each implementation
//! with [`#[weir_sdk::function]`](macro@function). The attribute generates
//! the component glue; there is nothing else to write.
//!
//! State is kept by the host, scoped to the key being processed, and typed
//! on the guest side: [`ValueState`], [`MapState`] and [`ListState`] store
//! any `serde` type in a compact binary encoding ([`codec`]).
//! [`BroadcastState`] is the same for every key. [`declare_states!`]
//! tells the host their types, so a state lookup shows them as JSON
//! ([`state_type`]).
//!
//! ```
//! use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};
//!
//! /// Counts the events of each key and emits the running count.
//! struct Counter { count: ValueState<u64> }
//!
//! impl Default for Counter {
//!     fn default() -> Self { Self { count: ValueState::new("count") } }
//! }
//!
//! #[function]
//! impl KeyFunction for Counter {
//!     fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
//!         Ok(event.value.clone())
//!     }
//! }
//!
//! #[function]
//! impl ProcessFunction for Counter {
//!     fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
//!         let mut count = self.count.get()?.unwrap_or(0);
//!         for event in events {
//!             count += 1;
//!             ctx.emit(Event::new(count.to_string().into_bytes(), event.timestamp));
//!         }
//!         self.count.set(&count)
//!     }
//! }
//!
//! // Natively, the same code runs against an in-memory host:
//! let mut harness = weir_sdk::testing::Harness::<Counter>::new();
//! let out = harness.process(b"a", vec![Event::new(b"a".to_vec(), 0); 3]).unwrap();
//! assert_eq!(out.last().unwrap().value, b"3");
//! ```
//!
//! ## Building
//! `scripts/dev build-functions` in the Weir repository builds every crate
//! under `functions/` to a component (see `docs/functions.md` there for both
//! the rustup `wasm32-wasip2` route and the Debian `-Zbuild-std` route).
#![deny(missing_docs)]

// `#[derive(StateType)]` names `::weir_sdk`, in this crate's tests too.
extern crate self as weir_sdk;

pub mod binary;
mod bindings;
pub mod codec;
mod context;
mod error;
mod event;
mod function;
mod host;
mod money;
mod packing;
mod state;
pub mod state_type;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use context::{Context, LogLevel};
pub use error::Error;
pub use event::{Event, FiredTimer, TimeDomain, Window};
pub use function::{
    AggregateFunction, BroadcastProcessFunction, CoProcessFunction, Emitter, KeyFunction,
    ProcessFunction, TransformFunction, WindowProcessFunction,
};
pub use money::Cents;
pub use state::{BroadcastState, ListState, MapState, Ttl, TtlUpdate, ValueState};
pub use state_type::StateType;
/// Marks an `impl KeyFunction for T` or `impl ProcessFunction for T` block
/// (or any other function trait's) as the component's implementation of
/// that interface. For a broadcast process function, mark the `impl
/// BroadcastProcessFunction` block only: it exports the keyed side too.
///
/// `T` must implement `Default`: the component creates one instance the
/// first time it is called and keeps it for the life of the instance. On
/// non-Wasm targets the attribute leaves the block unchanged, so the same
/// crate builds and tests natively.
pub use weir_sdk_macros::function;
/// Implements [`StateType`] for a struct or an enum whose fields' types
/// implement it: the description of its [`codec`] layout that
/// [`declare_states!`] writes into the component (see [`state_type`]).
/// Serde attributes that change the layout (`skip`, `flatten`, `tag`,
/// `untagged`, `with`, …) are refused: their layout is not the one
/// described.
pub use weir_sdk_macros::StateType;

/// Glue used by the code that `#[function]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::__weir_export_role as export_role;
    pub use crate::bindings::weir::function as wit;
    pub use crate::context::report_panics;
    pub use crate::function::{
        aggregate_add, aggregate_add_packed, aggregate_merge, aggregate_results, broadcast_packed,
        co_fire_timers, co_process_batch, co_process_packed, extract_keys, extract_packed_keys,
        fire_timers, process_batch, process_packed, transform_packed, window_process,
    };
    pub use wit_bindgen;
}

/// The reader of `wit/roles.toml` the macro's build script uses, for the
/// test that every kind of the table has its export.
#[cfg(test)]
#[path = "../macros/roles.rs"]
mod roles_table;

#[cfg(test)]
mod tests {
    /// `#[function]` takes its kinds from `wit/roles.toml` and expands
    /// `__private::export_role!(Trait)` for them, but only when building
    /// for `wasm32`: so check here that the arms of `export_role!` are
    /// exactly the Rust SDK's rows of the table.
    #[test]
    fn every_kind_of_the_table_has_its_export() {
        let rows = crate::roles_table::parse(include_str!("../../wit/roles.toml"))
            .unwrap_or_else(|e| panic!("wit/roles.toml: {e}"));
        let mut kinds: Vec<&str> =
            rows.iter().filter(|r| r.in_sdk("rust")).map(|r| r.rust_trait.as_str()).collect();
        let source = include_str!("function.rs");
        let body = source.split("macro_rules! __weir_export_role {").nth(1).unwrap_or_default();
        let mut arms: Vec<&str> = body
            .lines()
            .filter_map(|line| line.strip_prefix("    (")?.strip_suffix(") => {"))
            .collect();
        kinds.sort_unstable();
        arms.sort_unstable();
        assert_eq!(arms, kinds, "export_role!'s arms (src/function.rs) and the table's Rust kinds");
    }
}
