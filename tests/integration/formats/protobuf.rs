//! Protobuf orders in, Protobuf running totals out.

use prost_reflect::{SerializeOptions, Value};
use schema_registry_converter::blocking::proto_decoder::ProtoDecoder;
use schema_registry_converter::blocking::proto_encoder::ProtoEncoder;
use schema_registry_converter::schema_registry_common::{
    SchemaType, SubjectNameStrategy, SuppliedSchema,
};

use super::*;

const ORDER: &str = "syntax = \"proto3\";\npackage weir.test;\n\nmessage Order {\n  int64 order_id = 1;\n  int64 customer_id = 2;\n  double amount = 3;\n  int64 event_time = 4;\n}\n";

const TOTAL: &str = "syntax = \"proto3\";\npackage weir.test;\n\nmessage RunningTotal {\n  int64 order_id = 1;\n  int64 customer_id = 2;\n  double amount = 3;\n  double total = 4;\n}\n";

/// Register `schema` under `<topic>-value`.
pub(super) fn register(topic: &str, schema: &str) {
    let encoder = ProtoEncoder::new(registry());
    let supplied = SuppliedSchema::new(None, SchemaType::Protobuf, schema.to_string());
    let strategy =
        SubjectNameStrategy::TopicNameStrategyWithSchema(topic.to_string(), false, supplied);
    encoder.get_message_descriptor("weir.test.Order", &strategy).expect("registering the schema");
}

/// `orders` as framed Protobuf records, their schema registered under
/// `<topic>-value`.
pub(super) fn framed_orders(topic: &str, orders: &[Order]) -> Vec<Vec<u8>> {
    let encoder = ProtoEncoder::new(registry());
    let supplied = SuppliedSchema::new(None, SchemaType::Protobuf, ORDER.to_string());
    let strategy =
        SubjectNameStrategy::TopicNameStrategyWithSchema(topic.to_string(), false, supplied);
    orders
        .iter()
        .map(|order| {
            let json = serde_json::json!({
                "order_id": order.order_id, "customer_id": order.customer_id,
                "amount": order.amount(), "event_time": order.event_time,
            });
            encoder.encode_json(&json, "weir.test.Order", &strategy).expect("encoding")
        })
        .collect()
}

#[test]
fn protobuf_orders_give_the_totals_json_orders_give() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let expected = reference(dir.path(), &orders);
    let (input, output) = (unique("proto-orders"), unique("proto-totals"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);

    let records: Vec<_> = framed_orders(&input, &orders)
        .into_iter()
        .zip(&orders)
        .map(|(value, order)| (Some(0), Some(order.customer_id.to_string().into_bytes()), value))
        .collect();
    kafka.produce_many(&input, &records);

    let source = format!(", format: protobuf{}", registry_setting());
    let sink = format!(", format: protobuf{}, schema: {}", registry_setting(), quoted(TOTAL));
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink);
    run_ok(&spec, &dir.path().join("data"), &[]);

    let decoder = ProtoDecoder::new(registry());
    let options = SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(false);
    let got = per_customer(kafka.read_committed(&output).into_iter().map(|(_, _, _, value)| {
        let Value::Message(message) = decoder.decode(Some(&value)).expect("a running total") else {
            panic!("not a Protobuf message");
        };
        let json = message.serialize_with_options(serde_json::value::Serializer, &options).unwrap();
        total_of(&json)
    }));
    assert_eq!(got, expected, "Protobuf in and out gives what JSON gives");
}
