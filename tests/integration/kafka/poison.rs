//! Poison records on a Kafka source — a value that is not JSON, one
//! without the `timestamp_field`, a tombstone — and input headers that
//! look like Weir's own: by default the run stops naming topic, partition
//! and offset; `on_bad_timestamp: drop` and `{ side-output: NAME }` go past
//! them with the output exactly that of the input without them.

use std::path::Path;

use crate::support::kafka::{unique, RawRecord, TestKafka};
use crate::support::*;

/// Order `id` of customer `id % 5 + 1`, as `produce_orders` writes them.
fn order(id: u64) -> RawRecord {
    let customer = id % 5 + 1;
    let value = format!(
        r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":{}}}"#,
        id % 50 + 1,
        id % 100,
        1_768_471_200_000 + id as i64 * 1000
    );
    RawRecord {
        partition: Some(0),
        key: Some(customer.to_string().into_bytes()),
        value: Some(value.into_bytes()),
        headers: Vec::new(),
    }
}

/// Forty orders; with `poison`, a record that is not JSON at offset 5, a
/// tombstone at 10, an order without `event_time` at 15, and headers named
/// like Weir's exchange headers on every fourth order.
pub(crate) fn input(poison: bool) -> Vec<RawRecord> {
    let mut records = Vec::new();
    for id in 1..=40 {
        if poison && records.len() == 5 {
            records.push(RawRecord {
                partition: Some(0),
                value: Some(b"not json".to_vec()),
                ..RawRecord::default()
            });
        }
        if poison && records.len() == 10 {
            records.push(RawRecord {
                partition: Some(0),
                key: Some(b"3".to_vec()),
                ..RawRecord::default()
            });
        }
        if poison && records.len() == 15 {
            records.push(RawRecord {
                partition: Some(0),
                value: Some(br#"{"order_id":999,"customer_id":1,"amount":5.00}"#.to_vec()),
                ..RawRecord::default()
            });
        }
        let mut record = order(id);
        if poison && id % 4 == 0 {
            record.headers = vec![
                (
                    "weir-watermark".into(),
                    br#"{"producer":99,"watermark":9000000000000000}"#.to_vec(),
                ),
                ("weir-time".into(), i64::MAX.to_be_bytes().to_vec()),
                ("weir-key".into(), b"not-the-key".to_vec()),
            ];
        }
        records.push(record);
    }
    records
}

/// A revenue pipeline over `topic` into the file `out`, with the source's
/// `on_bad_timestamp` set to `policy` (none: the default) and a side output
/// `bad` into `dead`.
fn spec(dir: &Path, kafka: &TestKafka, topic: &str, policy: Option<&str>) -> std::path::PathBuf {
    let wasm = function("revenue");
    let name = unique("poison");
    let policy = policy.map(|p| format!(", on_bad_timestamp: {p}")).unwrap_or_default();
    let (out, dead) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.dead")));
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\nwatermark: {{ max_out_of_orderness: 5s }}\n\
             source: {{ type: kafka, bootstrap_servers: {:?}, topics: [{topic}], bounded: true, timestamp_field: event_time{policy} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: file, path: {out:?} }}\n\
             side_outputs: {{ bad: {{ type: file, path: {dead:?} }} }}\n",
            kafka.bootstrap()
        ),
    )
    .unwrap();
    path
}

fn output_of(spec: &Path, suffix: &str) -> std::path::PathBuf {
    spec.with_extension(suffix)
}

#[test]
fn poison_records_stop_the_run_naming_where_or_are_dropped_or_dead_lettered_exactly() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (clean, poisoned) = (unique("poison-clean"), unique("poison-bad"));
    kafka.create_topic(&clean, 1);
    kafka.create_topic(&poisoned, 1);
    kafka.produce_raw(&clean, &input(false));
    kafka.produce_raw(&poisoned, &input(true));

    let reference = spec(dir.path(), &kafka, &clean, None);
    run_ok(&reference, &dir.path().join("reference"), &[]);
    let expected = per_key(&output_of(&reference, "out"));
    assert_eq!(total(&expected), 40);

    // The default: the run stops at the first poison record, naming it.
    let failing = spec(dir.path(), &kafka, &poisoned, None);
    let data = dir.path().join("failing");
    let output = weir(&["run", failing.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a poison record must stop the run by default");
    assert!(
        stderr.contains(&format!("{poisoned}/0@5")),
        "names topic, partition, offset: {stderr}"
    );
    assert!(stderr.contains("on_bad_timestamp"), "says the way out: {stderr}");

    // drop: the three are counted and skipped; forged headers change nothing.
    let dropping = spec(dir.path(), &kafka, &poisoned, Some("drop"));
    let run = run_ok(&dropping, &dir.path().join("dropping"), &[]);
    assert_same(&per_key(&output_of(&dropping, "out")), &expected, "on_bad_timestamp: drop");
    let summary = String::from_utf8_lossy(&run.stderr);
    assert!(
        summary.contains("3 source records dropped"),
        "the summary counts the dropped records: {summary}"
    );

    // A side output receives them as they were read.
    let dead_lettering = spec(dir.path(), &kafka, &poisoned, Some("{ side-output: bad }"));
    run_ok(&dead_lettering, &dir.path().join("dead-lettering"), &[]);
    assert_same(&per_key(&output_of(&dead_lettering, "out")), &expected, "side output");
    let dead = std::fs::read_to_string(output_of(&dead_lettering, "dead")).unwrap();
    let dead: Vec<&str> = dead.lines().filter(|line| !line.is_empty()).collect();
    assert_eq!(dead, ["not json", r#"{"order_id":999,"customer_id":1,"amount":5.00}"#]);
}
