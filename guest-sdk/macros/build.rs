//! Copies the WIT package into `OUT_DIR` so the macro can embed it, and
//! tells cargo to rebuild the macro whenever the WIT changes.

fn main() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/weir.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("weir.wit");
    std::fs::copy(&wit, &out).unwrap_or_else(|e| panic!("cannot copy {}: {e}", wit.display()));
}
