//! Raw bindings to the host's imports, generated once from `wit/` and used
//! by the rest of the SDK (and, through `__private`, by the glue that
//! `#[function]` generates). Function authors never see these.
#![allow(missing_docs, clippy::all, unsafe_code)]

wit_bindgen::generate!({
    path: "../wit",
    world: "weir:function/imports",
    generate_unused_types: true,
});
