//! The Kafka source and sink against a real broker (located by
//! [`crate::support::kafka`]; some tests start a dedicated broker they
//! kill): exactly-once output through `kill -9` and crashes at each commit
//! phase, positions from checkpoints, fencing, client settings, broker
//! and transaction faults, the sink's recovery decisions, a graph of
//! two topics into an exactly-once sink, and `weir kafka` (topics, a file
//! produced by key, a topic read back).
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! kafka::`.

mod cli;
mod commits;
mod config;
mod connector;
mod faults;
mod joins;
pub(crate) mod poison;
