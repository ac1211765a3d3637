//! Looking into running pipelines: metrics, state reads, output tails,
//! checkpoint sizes and backpressure on a real `weir serve` (with the
//! Kafka broker), and spans exported over OTLP/HTTP by `weir run`, with
//! log lines the same either way.
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! observe::`.

mod pipelines;
mod telemetry;
