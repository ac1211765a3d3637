//! Copies the WIT package into `OUT_DIR` so the macro can embed it, and
//! tells cargo to rebuild the macro whenever the WIT changes.
//!
//! Paths come from the environment cargo sets when it *runs* this script
//! (not `env!`, which would bake in the checkout the script was compiled
//! in; checkouts may share a target directory).

fn main() {
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let wit = std::path::Path::new(&manifest_dir).join("../../wit/weir.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("weir.wit");
    std::fs::copy(&wit, &out).unwrap_or_else(|e| panic!("cannot copy {}: {e}", wit.display()));
}
