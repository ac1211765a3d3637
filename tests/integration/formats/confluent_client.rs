//! Orders produced with Confluent's Python client and its schema-registry
//! serializers (Avro, and Protobuf, whose schema that client registers as
//! a serialized descriptor), run through the revenue function into the
//! same format, and read back with the same client's deserializers: the
//! final totals are exact.

use std::path::Path;
use std::process::Command;

use weir_devkit::python_tool::CONFLUENT_KAFKA;

use super::*;

/// Run `confluent_client.py` with `args`; its JSON answer.
fn client(args: &[&str]) -> serde_json::Value {
    let python = CONFLUENT_KAFKA.install().unwrap_or_else(|e| panic!("{e:#}"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/integration/formats/confluent_client.py");
    let output = Command::new(python).arg(script).args(args).output().expect("python runs");
    assert!(
        output.status.success(),
        "confluent_client.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON answer")
}

/// The running totals' schema Weir's sink registers, in `format`.
fn total_schema(format: &str) -> String {
    match format {
        "avro" => r#"{"type":"record","name":"RunningTotal","namespace":"shop","fields":[
            {"name":"order_id","type":"long"},{"name":"customer_id","type":"long"},
            {"name":"amount","type":"double"},{"name":"total","type":"double"}]}"#
            .to_string(),
        _ => "syntax = \"proto3\";\npackage shop;\nmessage RunningTotal {\n  int64 order_id = 1;\n  int64 customer_id = 2;\n  double amount = 3;\n  double total = 4;\n}\n".to_string(),
    }
}

fn round_trip(format: &str) {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) =
        (unique(&format!("{format}-std-in")), unique(&format!("{format}-std-out")));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    let (bootstrap, registry) = (kafka.bootstrap(), shared_url());
    let count = (500 + crash_seed() % 1500).to_string();
    let expected = client(&["produce", format, &bootstrap, &registry, &input, &count]);

    let source = format!(", format: {format}{}", registry_setting());
    let sink = format!(
        ", format: {format}{}, schema: {}",
        registry_setting(),
        quoted(&total_schema(format))
    );
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink);
    run_ok(&spec, &dir.path().join("data"), &[]);

    let got = client(&["read", format, &bootstrap, &registry, &output]);
    assert_eq!(got["count"].as_u64(), count.parse().ok(), "one running total per order");
    assert_eq!(got["totals"], expected, "{format}: the final totals Confluent's client reads");
}

#[test]
fn avro_from_and_to_confluents_python_client_is_exact() {
    round_trip("avro");
}

#[test]
fn protobuf_from_and_to_confluents_python_client_is_exact() {
    round_trip("protobuf");
}
