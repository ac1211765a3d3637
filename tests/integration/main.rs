//! Integration tests: run the real `weir` binary on real functions.
//!
//! The functions in `functions/` must be built first (`scripts/dev
//! build-functions`, which `scripts/dev test` does); they are looked up in
//! `$WEIR_FUNCTIONS_DIR`, else `target/functions/` of the repository.
//!
//! One test binary, one module per area; a test's name starts with its
//! area, so `cargo test -p weir-cli --test integration kafka::` runs one
//! area (no module name inside an area ends with another area's name, so
//! `area::` picks out exactly that area). The cut is by what a test
//! asserts, not by what it needs to run:
//! * [`api`]: the HTTP API of `weir serve` (functions, pipelines, graphs,
//!   access, grants, limits, fuzzing) — even where a pipeline it deploys
//!   reads Kafka;
//! * [`cli`]: the command line a new user meets (`weir init`/`build`,
//!   one-line errors on bad input);
//! * [`dataflow`]: what one pipeline computes on files (state, time,
//!   windows, parallelism), on the example functions;
//! * [`graphs`]: what a graph computes, on the graph examples;
//! * [`kafka`]: the Kafka source and sink on a real broker, their faults
//!   and recovery;
//! * [`recovery`]: exactly-once through kills, crashes, savepoints,
//!   restarts and `s3://` storage — files and object storage (the Kafka
//!   sink's own recovery stays with `kafka`, a cluster's with `cluster`);
//! * [`observe`]: metrics, state reads, tails, backpressure, OTLP spans;
//! * [`cluster`], [`polyglot`], [`isolation`], [`bench`]: areas of one
//!   module each (several `weir worker`s; Python and TypeScript functions
//!   against their Rust twins; hostile functions beside healthy ones;
//!   `weir bench`).
//!
//! Everything two areas share is in [`support`], which is also the only
//! place that locates (or starts) the Kafka broker and the S3 server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod bench;
mod cli;
mod cluster;
mod dataflow;
mod formats;
mod graphs;
mod isolation;
mod kafka;
mod observe;
mod polyglot;
mod recovery;
mod support;
