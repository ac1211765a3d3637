//! Avro orders in, Avro running totals out.

use std::time::{Duration, Instant};

use apache_avro::types::Value;
use schema_registry_converter::blocking::avro::{AvroDecoder, AvroEncoder};
use schema_registry_converter::schema_registry_common::{
    SchemaType, SubjectNameStrategy, SuppliedSchema,
};

use super::*;
use crate::support::kafka::RawRecord;
use crate::support::schema_registry::set_compatibility;

/// The orders' first writer schema.
const ORDER_V1: &str = r#"{"type":"record","name":"Order","namespace":"weir.test","fields":[
    {"name":"order_id","type":"long"},
    {"name":"customer_id","type":"long"},
    {"name":"amount","type":"double"},
    {"name":"event_time","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;

/// The second: a new optional field, compatible under BACKWARD.
const ORDER_V2: &str = r#"{"type":"record","name":"Order","namespace":"weir.test","fields":[
    {"name":"order_id","type":"long"},
    {"name":"customer_id","type":"long"},
    {"name":"amount","type":"double"},
    {"name":"event_time","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"channel","type":["null","string"],"default":null}]}"#;

/// The running totals the sink writes.
const TOTAL: &str = r#"{"type":"record","name":"RunningTotal","namespace":"weir.test","fields":[
    {"name":"order_id","type":"long"},
    {"name":"customer_id","type":"long"},
    {"name":"amount","type":"double"},
    {"name":"total","type":"double"}]}"#;

/// `orders` as Avro records of `topic`, the first half with `ORDER_V1`
/// and the rest with `ORDER_V2`, keyed by customer, on one partition.
fn produce(kafka: &TestKafka, topic: &str, orders: &[Order]) -> Vec<RawRecord> {
    let records: Vec<RawRecord> = framed_orders(topic, orders)
        .into_iter()
        .zip(orders)
        .map(|(value, order)| RawRecord {
            partition: Some(0),
            key: Some(order.customer_id.to_string().into_bytes()),
            value: Some(value),
            headers: Vec::new(),
        })
        .collect();
    kafka.produce_raw(topic, &records);
    records
}

/// `orders` as framed Avro records (their schemas registered under
/// `<topic>-value`), the first half written with `ORDER_V1` and the rest
/// with `ORDER_V2`.
pub(super) fn framed_orders(topic: &str, orders: &[Order]) -> Vec<Vec<u8>> {
    let encoder = AvroEncoder::new(registry());
    let half = orders.len() / 2;
    orders
        .iter()
        .enumerate()
        .map(|(i, order)| {
            let mut fields = vec![
                ("order_id", Value::Long(order.order_id as i64)),
                ("customer_id", Value::Long(order.customer_id as i64)),
                ("amount", Value::Double(order.amount())),
                ("event_time", Value::TimestampMillis(order.event_time)),
            ];
            let schema = if i < half {
                ORDER_V1
            } else {
                fields.push(("channel", Value::Union(1, Box::new(Value::String("web".into())))));
                ORDER_V2
            };
            let supplied = SuppliedSchema::new(None, SchemaType::Avro, schema.to_string());
            let strategy = SubjectNameStrategy::TopicNameStrategyWithSchema(
                topic.to_string(),
                false,
                supplied,
            );
            encoder.encode(fields, &strategy).expect("encoding an order")
        })
        .collect()
}

/// The running totals `topic` holds, decoded with the registry.
fn totals(kafka: &TestKafka, topic: &str) -> BTreeMap<u64, Vec<Total>> {
    let decoder = AvroDecoder::new(registry());
    per_customer(kafka.read_committed(topic).into_iter().map(|(_, _, _, value)| {
        let decoded = decoder.decode(Some(&value)).expect("an Avro running total");
        total_of(&serde_json::Value::try_from(decoded.value).expect("JSON of the total"))
    }))
}

fn sink_setting(schema: &str) -> String {
    format!(", format: avro{}, schema: {}", registry_setting(), quoted(schema))
}

#[test]
fn avro_orders_give_the_totals_json_orders_give_through_a_schema_change_mid_stream() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let expected = reference(dir.path(), &orders);
    let (input, output) = (unique("avro-orders"), unique("avro-totals"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    set_compatibility(&format!("{input}-value"), "BACKWARD");
    produce(&kafka, &input, &orders);

    let source = format!(", format: avro{}", registry_setting());
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink_setting(TOTAL));
    run_ok(&spec, &dir.path().join("data"), &[]);
    let got = totals(&kafka, &output);
    assert_eq!(got.values().map(Vec::len).sum::<usize>(), orders.len());
    assert_eq!(got, expected, "Avro in and out gives what JSON gives");
}

#[test]
fn a_sink_schema_the_registry_refuses_stops_the_run_at_start_naming_why() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique("avro-refused-in"), unique("avro-refused-out"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    produce(&kafka, &input, &orders()[..10]);
    let subject = format!("{output}-value");
    set_compatibility(&subject, "BACKWARD");
    let source = format!(", format: avro{}", registry_setting());
    // The first schema registers; the run writes with it.
    let first = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink_setting(TOTAL));
    run_ok(&first, &dir.path().join("first"), &[]);

    // A total that became a string is not a backward-compatible change.
    let changed =
        TOTAL.replace(r#"{"name":"total","type":"double"}"#, r#"{"name":"total","type":"string"}"#);
    assert_ne!(changed, TOTAL);
    let refused = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink_setting(&changed));
    let data = dir.path().join("refused");
    let run = weir(&["run", refused.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "an incompatible sink schema must stop the run: {stderr}");
    assert!(stderr.contains(&subject), "names the subject: {stderr}");
    assert!(stderr.contains("compatib"), "says it is a compatibility refusal: {stderr}");
    // Nothing more was written.
    assert_eq!(kafka.read_committed(&output).len(), 10);
}

#[test]
fn a_record_that_is_not_avro_stops_the_run_naming_where_or_is_dropped() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let orders = &orders[..40];
    let expected = reference(dir.path(), orders);
    let (input, output) = (unique("avro-poison-in"), unique("avro-poison-out"));
    let untouched = unique("avro-poison-failed");
    for topic in [&input, &output, &untouched] {
        kafka.create_topic(topic, 1);
    }
    let mut records = produce(&kafka, &unique("avro-scratch"), orders);
    // A JSON order at offset 3, and a record naming a schema id that does not exist at 10.
    records.insert(
        3,
        RawRecord {
            partition: Some(0),
            value: Some(orders[0].json().into_bytes()),
            ..RawRecord::default()
        },
    );
    records.insert(
        10,
        RawRecord {
            partition: Some(0),
            value: Some(vec![0, 0x7f, 0xff, 0xff, 0xf0, 2, 4]),
            ..RawRecord::default()
        },
    );
    kafka.produce_raw(&input, &records);

    let failing = format!(", format: avro{}", registry_setting());
    let spec = kafka_spec(dir.path(), &kafka, &input, &failing, &untouched, &sink_setting(TOTAL));
    let data = dir.path().join("failing");
    let run = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "an undecodable record must stop the run by default");
    assert!(stderr.contains(&format!("{input}/0@3")), "names topic, partition, offset: {stderr}");
    assert!(stderr.contains("on_undecodable"), "says the way out: {stderr}");

    let dropping = format!("{failing}, on_undecodable: drop");
    let spec = kafka_spec(dir.path(), &kafka, &input, &dropping, &output, &sink_setting(TOTAL));
    let run = run_ok(&spec, &dir.path().join("dropping"), &[]);
    assert_eq!(totals(&kafka, &output), expected, "the output of the orders without the two");
    let summary = String::from_utf8_lossy(&run.stderr);
    assert!(summary.contains("2 source records dropped"), "counted: {summary}");

    // A side output receives the two as they were read.
    let dead = dir.path().join("dead.out");
    let side = unique("avro-poison-side");
    kafka.create_topic(&side, 1);
    let lettering = format!("{failing}, on_undecodable: {{ side-output: bad }}");
    let spec = kafka_spec(dir.path(), &kafka, &input, &lettering, &side, &sink_setting(TOTAL));
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = format!("{text}side_outputs: {{ bad: {{ type: file, path: {dead:?} }} }}\n");
    std::fs::write(&spec, text).unwrap();
    run_ok(&spec, &dir.path().join("lettering"), &[]);
    assert_eq!(totals(&kafka, &side), expected, "the side output takes nothing from the output");
    let dead = std::fs::read(&dead).unwrap();
    let mut expected_dead = orders[0].json().into_bytes();
    expected_dead.push(b'\n');
    expected_dead.extend_from_slice(&[0, 0x7f, 0xff, 0xff, 0xf0, 2, 4, b'\n']);
    assert_eq!(dead, expected_dead, "both records, as they were read");
}

#[test]
fn avro_in_and_out_is_exactly_once_through_kill_9() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let mut orders = Vec::new();
    // Enough orders, in batches of 100 into a slowed sink (20 ms per
    // batch), that a run lasts several seconds.
    for round in 0..100 {
        orders.extend(super::orders().into_iter().map(|mut order| {
            order.order_id += round * 1_000;
            order.event_time += round as i64 * 1_000_000;
            order
        }));
    }
    let expected = reference(dir.path(), &orders);
    let (input, output) = (unique("avro-kills-in"), unique("avro-kills-out"));
    kafka.create_topic(&input, 1);
    kafka.create_topic(&output, 1);
    produce(&kafka, &input, &orders);
    let source = format!(", format: avro{}", registry_setting());
    let spec = kafka_spec(dir.path(), &kafka, &input, &source, &output, &sink_setting(TOTAL));
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("batch_size: 100\n{text}")).unwrap();
    let data = dir.path().join("data");

    let seed = crash_seed();
    let mut dice = Dice(seed);
    let log = ("WEIR_LOG", "warn,weir_host::pipeline::restore=info");
    let mut visible: BTreeMap<u64, Vec<Total>> = BTreeMap::new();
    let (mut kills, mut mid_work) = (0, 0);
    while kills < 5 {
        let mut child = start_weir(&spec, &data, &["--sink-delay-ms", "20"], &[log]);
        // Each kill lands a random instant after the run committed more,
        // so it falls between commits, not before the first one.
        let before = visible.values().map(Vec::len).sum::<usize>();
        let started = Instant::now();
        while kafka.read_committed(&output).len() <= before
            && child.try_wait().unwrap().is_none()
            && started.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        let deadline = Instant::now() + Duration::from_millis(dice.between(0, 1_000));
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        let now = totals(&kafka, &output);
        for (customer, before) in &visible {
            assert!(
                now.get(customer).is_some_and(|after| after.starts_with(before)),
                "kill {kills} (seed {seed}): customer {customer}'s committed totals were replaced or lost"
            );
        }
        let committed = now.values().map(Vec::len).sum::<usize>();
        eprintln!("kill {kills}: {committed} of {} totals committed", orders.len());
        if committed < orders.len() {
            mid_work += 1;
        }
        visible = now;
    }
    run_ok(&spec, &data, &[]);
    assert_eq!(totals(&kafka, &output), expected, "exact after {kills} kills (seed {seed})");
    assert!(
        kills >= 3 && mid_work >= 3,
        "only {mid_work} of {kills} kills landed with work left (seed {seed})"
    );
}

#[test]
fn rust_python_and_typescript_revenue_over_avro_orders_write_the_same_bytes() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let input = unique("avro-twins-in");
    kafka.create_topic(&input, 1);
    let orders = orders();
    produce(&kafka, &input, &orders);
    let source = format!(
        "{{ type: kafka, bootstrap_servers: {:?}, topics: [{input}], bounded: true, timestamp_field: event_time, format: avro{} }}",
        kafka.bootstrap(),
        registry_setting()
    );
    let output_of = |function_name: &str| {
        let wasm = function(function_name);
        let out = dir.path().join(format!("{function_name}.jsonl"));
        let spec = dir.path().join(format!("{function_name}.yaml"));
        std::fs::write(
            &spec,
            format!(
                "name: {}\nsource: {source}\nkey: {{ wasm: {wasm:?} }}\n\
                 process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\n",
                unique("avro-twins")
            ),
        )
        .unwrap();
        run_ok(&spec, &dir.path().join(format!("data-{function_name}")), &[]);
        sorted_lines(&out)
    };
    let rust = output_of("revenue");
    assert_eq!(rust.len(), orders.len());
    for twin in ["revenue-py", "revenue-js"] {
        assert_eq!(output_of(twin), rust, "{twin} over Avro orders");
    }
}
