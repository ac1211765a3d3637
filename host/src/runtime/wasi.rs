//! WASI for functions, without ambient authority.
//!
//! Components built for `wasm32-wasip2` import WASI interfaces even when
//! they never use them (the Rust standard library does). The host links
//! them so such components run, but the context grants nothing: no
//! preopened directories, no environment or arguments, no network, stdio
//! discarded, clocks frozen at the Unix epoch and randomness a fixed
//! sequence — so a function's output stays a deterministic function of
//! its input and state, and replay gives the same result. Time comes from
//! `context.processing-time` and the watermark instead. The network
//! interfaces are never granted: the loader refuses components importing
//! them.
//!
//! The one grant a pipeline spec can make is `resources: <dir>`: that
//! directory, read-only, preopened as `/resources` (reference data such as
//! rate tables or models). It goes through cap-std, so nothing outside it
//! (`..`, symlinks leading out) can be reached.

use std::path::Path;
use std::time::Duration;

use wasmtime_wasi::{
    Deterministic, FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder,
};

/// Where a granted resources directory appears to a function.
pub const RESOURCES_GUEST_PATH: &str = "/resources";

/// A clock that always reads zero.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A WASI context that grants nothing and behaves deterministically.
pub fn sandboxed() -> WasiCtx {
    deterministic().build()
}

/// A sandboxed WASI context that may read `dir` (as `/resources`).
pub fn with_resources(dir: &Path) -> Result<WasiCtx, String> {
    let mut builder = deterministic();
    builder
        .preopened_dir(dir, RESOURCES_GUEST_PATH, FsPerms::ReadOnly)
        .map_err(|e| format!("cannot open the resources directory {}: {e:#}", dir.display()))?;
    Ok(builder.build())
}

fn deterministic() -> WasiCtxBuilder {
    let sequence: Vec<u8> = (0..=255).collect();
    let mut builder = WasiCtxBuilder::new();
    builder
        .secure_random(Deterministic::new(sequence.clone()))
        .insecure_random(Deterministic::new(sequence))
        .insecure_random_seed(0)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock);
    builder
}

#[cfg(test)]
mod tests {
    use crate::runtime::{new_engine, EngineLimits, FunctionLoader, HostCtx};

    /// A component importing a WASI clock, as a `wasm32-wasip2` build does.
    const READS_CLOCK: &str = r#"(component
        (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock (export "now" (func (result u64)))))
        (core func $now (canon lower (func $clock "now")))
        (core module $m
            (import "host" "now" (func $now (result i64)))
            (func (export "go") (result i64) call $now))
        (core instance $i (instantiate $m (with "host" (instance (export "now" (func $now))))))
        (func $go (result u64) (canon lift (core func $i "go")))
        (export "go" (func $go)))"#;

    #[test]
    fn wasi_components_link_and_see_a_frozen_clock() {
        let engine = new_engine(EngineLimits { instances: 2, ..Default::default() }).unwrap();
        let loader = FunctionLoader::new(engine.clone(), None).unwrap();
        let function = loader.load(&wat::parse_str(READS_CLOCK).unwrap()).unwrap();
        let mut store = wasmtime::Store::new(&engine, HostCtx::new("clock", None, 1));
        store.set_epoch_deadline(1000);
        let instance = function.pre.instantiate(&mut store).unwrap();
        let go = instance.get_typed_func::<(), (u64,)>(&mut store, "go").unwrap();
        assert_eq!(go.call(&mut store, ()).unwrap(), (0,));
    }
}
