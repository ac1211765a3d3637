//! Graph specs (several sources, joins, chained and re-keyed stages) on
//! files: the graph examples of `functions/` (orders-payments,
//! region-top3, fraud-rules as a graph, order-status) at parallelism 1
//! and 3 per stage, compared line by line with their `expected.jsonl`
//! (written by each example's `expected.py`, independently of the host).
//! Graphs killed and restored are in `recovery::graph_restores`, graphs on
//! Kafka in `kafka::joins`, graphs over HTTP in `api::graph_pipelines`.
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! graphs::`.

mod examples;
mod function_kinds;
