//! Exactly-once through failures, with files and object storage: `kill -9`
//! at random instants and crashes injected in the file sink's commit lose
//! and duplicate nothing; savepoints restore at another parallelism (also
//! per stage of a graph); snapshots restore into another pipeline, data
//! directory or storage; `s3://` checkpoint storage on a real
//! S3-compatible server; `weir serve` restarting a failed pipeline from
//! its checkpoint; and the guards that keep checkpoints restorable (one
//! process per pipeline, a corrupt `_metadata` never taken for
//! incomplete). Recovery of the Kafka sink is `kafka::commits`; of a
//! cluster, `cluster`.
//!
//! The revenue pipeline these tests checkpoint and its failure-free run
//! are in [`checkpoints`].
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! recovery::`.

mod checkpoints;
mod file_faults;
mod foreign_restore;
mod graph_restores;
mod guard;
mod restarts;
mod s3;
