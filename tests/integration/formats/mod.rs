//! Registry formats on Kafka sources and sinks, against the real broker
//! and a real schema registry ([`crate::support::schema_registry`]):
//! orders produced with a standard client's serializers
//! (`schema_registry_converter`, as a Rust producer would write them) in
//! Avro, Protobuf and JSON Schema run through the revenue function and
//! come out, in the sink's format, exactly as the same orders in JSON do;
//! a new compatible writer schema mid-stream changes nothing; a sink
//! schema the registry refuses stops the run at start naming why; a record
//! that cannot be decoded stops the run naming where, or is dropped.
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! formats::`.

mod avro;
mod confluent_client;
mod files;
mod json_schema;
mod protobuf;
mod types;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schema_registry_converter::blocking::schema_registry::SrSettings;

use crate::support::kafka::{unique, TestKafka};
use crate::support::schema_registry::shared_url;
use crate::support::*;

/// One order as the tests produce it, in every format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order {
    pub order_id: u64,
    pub customer_id: u64,
    /// Cents.
    pub cents: u64,
    pub event_time: i64,
}

impl Order {
    /// The amount as a decimal number (what JSON and the formats carry).
    pub fn amount(&self) -> f64 {
        self.cents as f64 / 100.0
    }

    /// The order as JSON text (the reference input).
    pub fn json(&self) -> String {
        format!(
            r#"{{"order_id":{},"customer_id":{},"amount":{}.{:02},"event_time":{}}}"#,
            self.order_id,
            self.customer_id,
            self.cents / 100,
            self.cents % 100,
            self.event_time
        )
    }
}

/// A count of orders the tests do not fix in advance (between 300 and
/// 700, from the crash seed), over seven customers, a second apart.
pub(crate) fn orders() -> Vec<Order> {
    let count = 300 + crash_seed() % 400;
    (1..=count)
        .map(|id| Order {
            order_id: id,
            customer_id: id * 7 % 7 + id % 5 + 1,
            cents: (id % 50 + 1) * 100 + id % 100,
            event_time: 1_768_471_200_000 + id as i64 * 1000,
        })
        .collect()
}

/// A running total as compared: order, customer, amount and total in
/// cents (rounded from the format's number).
pub(crate) type Total = (u64, u64, i64, i64);

/// A running total's fields read from its JSON.
pub(crate) fn total_of(json: &serde_json::Value) -> Total {
    let cents = |v: &serde_json::Value| (v.as_f64().expect("a number") * 100.0).round() as i64;
    (
        json["order_id"].as_u64().expect("order_id"),
        json["customer_id"].as_u64().expect("customer_id"),
        cents(&json["amount"]),
        cents(&json["total"]),
    )
}

/// Each customer's running totals, in order.
pub(crate) fn per_customer(totals: impl IntoIterator<Item = Total>) -> BTreeMap<u64, Vec<Total>> {
    let mut keys: BTreeMap<u64, Vec<Total>> = BTreeMap::new();
    for total in totals {
        keys.entry(total.1).or_default().push(total);
    }
    keys
}

/// What the revenue function makes of `orders` given as JSON lines
/// (a file source), per customer.
pub(crate) fn reference(dir: &Path, orders: &[Order]) -> BTreeMap<u64, Vec<Total>> {
    let input = dir.join("reference.jsonl");
    let text: String = orders.iter().map(|o| o.json() + "\n").collect();
    std::fs::write(&input, text).unwrap();
    let output = dir.join("reference.out");
    let spec = revenue_spec(dir, &input, &output, "watermark: { max_out_of_orderness: 5s }\n");
    run_ok(&spec, &dir.join("reference-data"), &[]);
    per_customer(records(&output).iter().map(total_of))
}

/// The registry client the tests produce and read with.
pub(crate) fn registry() -> SrSettings {
    SrSettings::new(shared_url())
}

/// A revenue pipeline from `input` (a Kafka source with `source_extra`
/// settings) to `output` (a Kafka sink, exactly-once, with `sink_extra`),
/// written to `dir`; its path.
pub(crate) fn kafka_spec(
    dir: &Path,
    kafka: &TestKafka,
    input: &str,
    source_extra: &str,
    output: &str,
    sink_extra: &str,
) -> PathBuf {
    let wasm = function("revenue");
    let name = unique("formats");
    let path = dir.join(format!("{name}.yaml"));
    let bootstrap = kafka.bootstrap();
    std::fs::write(
        &path,
        format!(
            "name: {name}\nwatermark: {{ max_out_of_orderness: 5s }}\n\
             checkpoint: {{ interval: 1s }}\n\
             source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{input}], bounded: true, timestamp_field: event_time{source_extra} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {output}, delivery: exactly-once, transactional_id_prefix: {name}{sink_extra} }}\n"
        ),
    )
    .unwrap();
    path
}

/// A schema's text as a YAML double-quoted string.
pub(crate) fn quoted(schema: &str) -> String {
    serde_json::to_string(schema).unwrap()
}

/// The registry settings of a spec.
pub(crate) fn registry_setting() -> String {
    format!(", schema_registry: {{ url: {:?} }}", shared_url())
}
