//! The raw host API the typed wrappers are built on: bytes in, bytes out.
//!
//! On `wasm32` it calls the component's imports; elsewhere it is an
//! in-memory stand-in (one per thread) so function crates can run their
//! logic with `cargo test`. Both sides expose the same items.

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod native;
#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use native::*;
#[cfg(target_arch = "wasm32")]
pub(crate) use wasm::*;

/// How many map entries one `entries` call fetches from the host.
pub(crate) const MAP_PAGE: u32 = 256;
