//! Integration tests: run the real `weir` binary on real functions.
//!
//! The functions in `functions/` must be built first (`scripts/dev
//! build-functions`, which `scripts/dev test` does); they are looked up in
//! `$WEIR_FUNCTIONS_DIR`, else `target/functions/` of the repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod api_access;
mod api_fuzz;
mod api_grants;
mod api_graphs;
mod api_limits;
mod api_pipelines;
mod bad_input;
mod bench;
mod checkpoints;
mod cluster;
mod customer_profile;
mod file_faults;
mod foreign_restore;
mod fraud_detector;
mod fraud_rules;
mod graph_functions;
mod graph_recovery;
mod graphs;
mod guard;
mod isolation;
mod kafka;
mod kafka_config;
mod kafka_faults;
mod kafka_graphs;
mod kafka_recovery;
mod kafka_support;
mod minute_revenue;
mod observe;
mod parallel;
mod polyglot;
mod projects;
mod restarts;
mod revenue;
mod s3;
mod s3_support;
mod support;
mod telemetry;
mod windows;
