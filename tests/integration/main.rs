//! Integration tests: run the real `weir` binary on real functions.
//!
//! The functions in `functions/` must be built first (`scripts/dev
//! build-functions`, which `scripts/dev test` does); they are looked up in
//! `$WEIR_FUNCTIONS_DIR`, else `target/functions/` of the repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod api_pipelines;
mod bad_input;
mod bench;
mod checkpoints;
mod customer_profile;
mod fraud_detector;
mod isolation;
mod kafka;
mod kafka_faults;
mod kafka_support;
mod minute_revenue;
mod parallel;
mod revenue;
mod support;
mod windows;
