//! `weir kafka` against the real broker, as the cluster quick start uses
//! it: `topic create` makes a topic with its partitions (and leaves an
//! existing one alone), `produce` writes a file of JSON lines keyed by a
//! field (each key's records in one partition, in file order; a line
//! without the field is an error naming it), and `consume` prints a
//! topic's values — with `--read-committed`, none of an aborted
//! transaction.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};

use crate::support::kafka::{unique, TestKafka};
use crate::support::*;

/// `weir kafka ARGS --bootstrap-servers <broker>`.
fn weir_kafka(kafka: &TestKafka, args: &[&str]) -> Output {
    let bootstrap = kafka.bootstrap();
    let mut all = vec!["kafka"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--bootstrap-servers", bootstrap.as_str()]);
    weir(&all)
}

/// Its stdout, asserting it succeeded.
fn ok(output: Output, what: &str) -> (String, String) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{what} failed: {stderr}");
    (stdout, stderr)
}

/// `count` orders over 7 customers, as JSON lines (a blank line among them).
fn orders(count: u64) -> Vec<String> {
    (1..=count)
        .map(|id| {
            format!(
                r#"{{"order_id":{id},"customer_id":{},"amount":{}.50,"event_time":"2026-01-15T10:{:02}:00Z"}}"#,
                id % 7 + 1,
                id % 40,
                id % 60
            )
        })
        .collect()
}

#[test]
fn topics_are_created_a_file_is_produced_by_key_and_read_back() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("cli-orders");
    let topic = topic.as_str();

    let (_, said) =
        ok(weir_kafka(&kafka, &["topic", "create", topic, "--partitions", "4"]), "topic create");
    assert!(said.contains(&format!("created topic {topic} (4 partitions)")), "{said}");
    let (listed, _) = ok(weir_kafka(&kafka, &["topic", "list"]), "topic list");
    let line = listed.lines().find(|l| l.split_whitespace().next() == Some(topic));
    assert_eq!(line.map(|l| l.split_whitespace().nth(1)), Some(Some("4")), "{listed}");
    // Again: left as it is, and said so.
    let (_, said) =
        ok(weir_kafka(&kafka, &["topic", "create", topic, "--partitions", "6"]), "create again");
    assert!(said.contains("exists already with 4 partitions, not 6"), "{said}");

    let lines = orders(60);
    let file = dir.path().join("orders.jsonl");
    let mut text = lines[..30].join("\n");
    text.push_str("\n\n");
    text.push_str(&lines[30..].join("\r\n"));
    text.push('\n');
    std::fs::write(&file, text).unwrap();
    let produce = ["produce", topic, file.to_str().unwrap(), "--key-field", "customer_id"];
    let (_, said) = ok(weir_kafka(&kafka, &produce), "produce");
    assert!(said.contains(&format!("wrote 60 records to {topic}")), "{said}");

    // Each customer's orders in one partition, keyed by its id, in file order.
    let mut by_customer: BTreeMap<String, (i32, Vec<String>)> = BTreeMap::new();
    for (partition, _, key, value) in kafka.read_committed(topic) {
        let key = String::from_utf8(key.expect("a key")).unwrap();
        let value = String::from_utf8(value).unwrap();
        let order: serde_json::Value = serde_json::from_str(&value).unwrap();
        assert_eq!(order["customer_id"].to_string(), key);
        let (first, values) = by_customer.entry(key).or_insert((partition, Vec::new()));
        assert_eq!(*first, partition, "one customer's orders in one partition");
        values.push(value);
    }
    assert_eq!(by_customer.len(), 7);
    for (customer, (_, values)) in &by_customer {
        let expected: Vec<&String> =
            lines.iter().filter(|l| l.contains(&format!(r#""customer_id":{customer},"#))).collect();
        assert_eq!(values.iter().collect::<Vec<_>>(), expected, "customer {customer}, in order");
    }
    let partitions: std::collections::BTreeSet<i32> =
        by_customer.values().map(|(p, _)| *p).collect();
    assert!(partitions.len() > 1, "7 customers spread over the partitions: {partitions:?}");

    // consume prints every value, each on its line.
    let (printed, said) = ok(weir_kafka(&kafka, &["consume", topic]), "consume");
    let mut printed: Vec<&str> = printed.lines().collect();
    printed.sort_unstable();
    let mut expected: Vec<&str> = lines.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(printed, expected);
    assert!(said.contains(&format!("read 60 records from {topic}")), "{said}");
    let (printed, _) = ok(weir_kafka(&kafka, &["consume", topic, "--max", "5", "--keys"]), "max");
    assert_eq!(printed.lines().count(), 5, "{printed}");
    for line in printed.lines() {
        let (key, value) = line.split_once('\t').expect("key, tab, value");
        assert!(value.contains(&format!(r#""customer_id":{key},"#)), "{line}");
    }
}

#[test]
fn read_committed_hides_an_aborted_transaction_and_bad_input_is_named() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("cli-txn");
    let topic = topic.as_str();
    ok(weir_kafka(&kafka, &["topic", "create", topic]), "topic create");
    kafka.produce(topic, None, None, b"committed");
    let producer: ThreadedProducer<DefaultProducerContext> = kafka
        .client_config()
        .set("transactional.id", unique("cli-txn-writer"))
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(30);
    producer.init_transactions(timeout).unwrap();
    producer.begin_transaction().unwrap();
    producer.send(BaseRecord::<(), str>::to(topic).payload("aborted")).map_err(|(e, _)| e).unwrap();
    producer.flush(timeout).unwrap();
    producer.abort_transaction(timeout).unwrap();

    let (all, _) = ok(weir_kafka(&kafka, &["consume", topic]), "consume");
    assert_eq!(all.lines().collect::<Vec<_>>(), ["committed", "aborted"]);
    let (committed, said) =
        ok(weir_kafka(&kafka, &["consume", topic, "--read-committed"]), "read committed");
    assert_eq!(committed.lines().collect::<Vec<_>>(), ["committed"]);
    assert!(said.contains("(read_committed)"), "{said}");

    // A line without the key field: an error naming the file and line.
    let file = dir.path().join("orders.jsonl");
    std::fs::write(&file, "{\"customer_id\":1}\n{\"customer\":2}\n").unwrap();
    let output = weir_kafka(
        &kafka,
        &["produce", topic, file.to_str().unwrap(), "--key-field", "customer_id"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("orders.jsonl:2"), "{stderr}");
    assert!(stderr.contains("no field \"customer_id\""), "{stderr}");

    // A topic that does not exist is not created by writing to it.
    let missing = unique("cli-missing");
    let output = weir_kafka(&kafka, &["produce", missing.as_str(), file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("does not exist") && stderr.contains("weir kafka topic create"),
        "{stderr}"
    );
}
