//! JSON Schema orders in, JSON Schema running totals out, and an event
//! that does not fit the sink's schema stopping the run.

use schema_registry_converter::blocking::json::{JsonDecoder, JsonEncoder};
use schema_registry_converter::schema_registry_common::{
    SchemaType, SubjectNameStrategy, SuppliedSchema,
};

use super::*;

const ORDER: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object",
 "properties":{"order_id":{"type":"integer"},"customer_id":{"type":"integer"},"amount":{"type":"number"},"event_time":{"type":"integer"}},
 "required":["order_id","customer_id","amount","event_time"]}"#;

const TOTAL: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"RunningTotal","type":"object",
 "properties":{"order_id":{"type":"integer"},"customer_id":{"type":"integer"},"amount":{"type":"number"},"total":{"type":"number"}},
 "required":["order_id","customer_id","amount","total"]}"#;

fn produce(kafka: &TestKafka, topic: &str, orders: &[Order]) {
    let encoder = JsonEncoder::new(registry());
    let supplied = SuppliedSchema::new(None, SchemaType::Json, ORDER.to_string());
    let strategy =
        SubjectNameStrategy::TopicNameStrategyWithSchema(topic.to_string(), false, supplied);
    let records: Vec<_> = orders
        .iter()
        .map(|order| {
            let json: serde_json::Value = serde_json::from_str(&order.json()).unwrap();
            let value = encoder.encode(&json, &strategy).expect("encoding");
            (Some(0), Some(order.customer_id.to_string().into_bytes()), value)
        })
        .collect();
    kafka.produce_many(topic, &records);
}

#[test]
fn json_schema_orders_give_the_totals_json_orders_give() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let expected = reference(dir.path(), &orders);
    let (input, output) = (unique("jsonschema-orders"), unique("jsonschema-totals"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    produce(&kafka, &input, &orders);

    let source = format!(", format: json-schema{}", registry_setting());
    let sink = format!(", format: json-schema{}, schema: {}", registry_setting(), quoted(TOTAL));
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink);
    run_ok(&spec, &dir.path().join("data"), &[]);

    let decoder = JsonDecoder::new(registry());
    let got = per_customer(kafka.read_committed(&output).into_iter().map(|(_, _, _, value)| {
        total_of(&decoder.decode(Some(&value)).expect("a running total").expect("a value").value)
    }));
    assert_eq!(got, expected, "JSON Schema in and out gives what JSON gives");
}

#[test]
fn an_event_that_does_not_fit_the_sink_schema_stops_the_run_naming_it() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique("jsonschema-misfit-in"), unique("jsonschema-misfit-out"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    produce(&kafka, &input, &orders()[..5]);
    // The totals must carry a field the revenue function never writes.
    let strict = TOTAL.replace(r#""required":["order_id""#, r#""required":["currency","order_id""#);
    let source = format!(", format: json-schema{}", registry_setting());
    let sink = format!(", format: json-schema{}, schema: {}", registry_setting(), quoted(&strict));
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink);
    // A sink that fails after a bounded input ended is only noticed at the
    // checkpoint timeout (see the stop's note): keep it short.
    let text = std::fs::read_to_string(&spec).unwrap();
    let text =
        text.replace("checkpoint: { interval: 1s }", "checkpoint: { interval: 1s, timeout: 10s }");
    std::fs::write(&spec, text).unwrap();
    let data = dir.path().join("data");
    let run = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "an event that does not fit must stop the run");
    assert!(stderr.contains("does not fit the sink's schema"), "says why: {stderr}");
    assert!(stderr.contains("currency"), "names what is missing: {stderr}");
    assert!(kafka.read_committed(&output).is_empty(), "nothing is committed");
}
