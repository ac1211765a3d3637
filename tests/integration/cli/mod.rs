//! The `weir` command line as a user first meets it: `weir init` and `weir
//! build` making and building a new project in each language outside this
//! repository, and bad input (a broken component, spec or input line, a
//! failing function) answered with a one-line error and a non-zero exit,
//! never a panic.
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! cli::`.

mod bad_input;
mod projects;
