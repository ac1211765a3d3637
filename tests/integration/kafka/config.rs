//! Kafka source and client settings against the real broker: a restored
//! position below a partition's log start (records deleted before they
//! were read) is refused, naming the partition and the lost offsets,
//! unless the source says `on_data_loss: skip`; user `properties` may not
//! override what Weir sets itself.

use std::path::Path;

use crate::support::kafka::{produce_orders, unique, TestKafka};
use crate::support::*;

/// A bounded, checkpointed revenue pipeline from `topic` to `output`.
fn spec(
    dir: &Path,
    bootstrap: &str,
    topic: &str,
    output: &Path,
    extra: &str,
) -> std::path::PathBuf {
    let wasm = function("revenue");
    let path = dir.join("pipeline.yaml");
    std::fs::write(
        &path,
        format!(
            "name: lossy\n\
             source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{topic}], bounded: true, timestamp_field: event_time{extra} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {output:?} }}\n\
             checkpoint: {{ interval: 200ms }}\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_position_below_the_log_start_is_refused_unless_skipping() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("retained");
    kafka.create_topic(&topic, 1);
    produce_orders(&kafka, &topic, 1, 100, 10, 1);
    let (data, output) = (dir.path().join("data"), dir.path().join("out.jsonl"));
    let bootstrap = kafka.bootstrap();
    let pipeline = spec(dir.path(), &bootstrap, &topic, &output, "");
    run_ok(&pipeline, &data, &[]);
    assert_eq!(records(&output).len(), 100);

    // Records 100..200 arrive; retention deletes up to 150 before they are read.
    produce_orders(&kafka, &topic, 1, 100, 10, 101);
    kafka.delete_records_before(&topic, 0, 150);
    let refused = weir(&["run", pipeline.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a restore past deleted records must fail: {stderr}");
    let partition = format!("topic {topic} partition 0");
    for part in [partition.as_str(), "100..150", "on_data_loss: skip"] {
        assert!(stderr.contains(part), "{part:?} not in: {stderr}");
    }
    assert_eq!(records(&output).len(), 100, "the refused run wrote nothing");

    // Skipping: on from the log start, 150..200.
    let pipeline = spec(dir.path(), &bootstrap, &topic, &output, ", on_data_loss: skip");
    run_ok(&pipeline, &data, &[]);
    let ids: Vec<u64> = records(&output).iter().map(|r| r["order_id"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=100).chain(151..=200).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected, "everything retained, once; the deleted 101..=150 skipped");
}

#[test]
fn properties_weir_sets_itself_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let refusals = [
        (
            ", properties: { isolation.level: read_uncommitted }",
            "source.properties.isolation.level",
        ),
        (
            ", properties: { plugin.library.paths: /tmp/evil.so }",
            "source.properties.plugin.library.paths",
        ),
    ];
    for (extra, field) in refusals {
        let pipeline = spec(dir.path(), "127.0.0.1:1", "t", &output, extra);
        let refused = weir(&[
            "run",
            pipeline.to_str().unwrap(),
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && stderr.contains(field), "{field}: {stderr}");
        assert!(stderr.contains("remove it"), "{stderr}");
    }
    assert!(!output.exists(), "nothing ran");
}
