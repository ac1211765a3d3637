//! Host bindings for the `weir:function` WIT package, generated once here
//! and re-exported; nothing else in the host runs `bindgen!`.
#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "weir:function/host",
    imports: { default: trappable },
    with: {
        "weir:function/state.value-state": crate::runtime::host::ValueStateHandle,
        "weir:function/state.map-state": crate::runtime::host::MapStateHandle,
        "weir:function/state.list-state": crate::runtime::host::ListStateHandle,
        "weir:function/broadcast.broadcast-map": crate::runtime::host::BroadcastMapHandle,
    },
});
