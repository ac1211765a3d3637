//! A graph against the real broker: two Kafka topics joined per key into
//! an exactly-once Kafka sink, killed with `kill -9` at random instants,
//! commits exactly what a run without failures commits.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::kafka::{unique, Record, TestKafka};
use crate::support::*;

/// `count` orders of 3 customers, one a second from 2026-01-15T10:00:00Z,
/// on 2 partitions of `topic` (a customer's on one); `cents` shifts the
/// amounts, so two topics hold different orders at the same times.
fn produce(kafka: &TestKafka, topic: &str, count: u64, cents: u64) {
    let records: Vec<Record> = (1..=count)
        .map(|id| {
            let customer = id * 7 % 3 + 1;
            let value = format!(
                r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":{}}}"#,
                id % 50 + 1,
                (id + cents) % 100,
                1_768_471_200_000 + id as i64 * 1000
            );
            (
                Some((customer % 2) as i32),
                Some(customer.to_string().into_bytes()),
                value.into_bytes(),
            )
        })
        .collect();
    kafka.produce_many(topic, &records);
}

/// Orders joined with the payments of the same customer 0–5 s after
/// them, into `sink` exactly-once.
fn join_spec(
    dir: &Path,
    kafka: &TestKafka,
    name: &str,
    topics: (&str, &str),
    sink: &str,
) -> PathBuf {
    let key = function("revenue");
    let bootstrap = kafka.bootstrap();
    let (orders, payments) = topics;
    let source = |topic: &str| {
        format!("{{ source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{topic}], bounded: true, timestamp_field: event_time }} }}")
    };
    let spec = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: {name}\nparallelism: 2\nbatch_size: 50\n\
             watermark: {{ max_out_of_orderness: 5s }}\n\
             checkpoint: {{ interval: 150ms, timeout: 1m }}\n\
             operators:\n\
             \x20 orders: {}\n\
             \x20 payments: {}\n\
             \x20 paid: {{ inputs: [orders, payments], key: {{ wasm: {key:?} }}, join: {{ type: interval, lower: 0s, upper: 5s }}, parallelism: 3 }}\n\
             \x20 out: {{ inputs: [paid], sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {sink}, delivery: exactly-once, transactional_id_prefix: {name}, transaction_timeout: 5m }} }}\n",
            source(orders),
            source(payments),
        ),
    )
    .unwrap();
    spec
}

/// The committed values of `topic`, sorted.
fn committed(kafka: &TestKafka, topic: &str) -> Vec<String> {
    let mut values: Vec<String> = kafka
        .read_committed(topic)
        .into_iter()
        .map(|(_, _, _, value)| String::from_utf8(value).unwrap())
        .collect();
    values.sort();
    values
}

#[test]
fn a_kafka_join_killed_at_random_instants_commits_what_a_run_without_failures_does() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, payments, reference) = (unique("orders"), unique("payments"), unique("paid-ref"));
    for topic in [&orders, &payments] {
        kafka.create_topic(topic, 2);
    }
    kafka.create_topic(&reference, 1);
    produce(&kafka, &orders, 20_000, 0);
    produce(&kafka, &payments, 20_000, 37);

    let name = unique("join-ref");
    let started = Instant::now();
    run_ok(
        &join_spec(dir.path(), &kafka, &name, (&orders, &payments), &reference),
        &dir.path().join("ref"),
        &[],
    );
    let expected = committed(&kafka, &reference);
    eprintln!("reference run: {:?}", started.elapsed());
    assert!(expected.len() > 4000, "pairs joined: {}", expected.len());

    let seed = crash_seed();
    eprintln!("kafka join crash seed {seed} (WEIR_CRASH_SEED={seed} repeats these kill instants)");
    let mut dice = Dice(seed);
    // A round whose run finishes before three kills landed mid-run starts
    // over: a new pipeline writing a new topic.
    let mut out = String::new();
    for round in 1.. {
        assert!(round <= 5, "no round took three kills mid-run (seed {seed})");
        out = unique("paid");
        kafka.create_topic(&out, 1);
        let name = unique("join");
        let spec = join_spec(dir.path(), &kafka, &name, (&orders, &payments), &out);
        let data = dir.path().join(&name);
        let (mut kills, mut mid_commits) = (0, 0);
        loop {
            // 10 ms a sink batch makes a run ~8 s, so that three kills at
            // 1-4 s land mid-run (at 5 ms a run often ended after two).
            let mut child = start_weir(&spec, &data, &["--sink-delay-ms", "10"], &[]);
            let deadline = Instant::now() + Duration::from_millis(dice.between(1_000, 4_000));
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            match child.try_wait().unwrap() {
                Some(status) => {
                    assert!(status.success(), "a run failed on its own (seed {seed})");
                    break;
                }
                None if kills < 5 => {
                    child.kill().unwrap(); // SIGKILL, mid-run
                    child.wait().unwrap();
                    kills += 1;
                    let visible = committed(&kafka, &out);
                    assert!(visible.len() <= expected.len(), "kill {kills}: more than expected");
                    if !visible.is_empty() && visible.len() < expected.len() {
                        mid_commits += 1;
                    }
                    eprintln!("round {round}, kill {kills}: {} pairs committed", visible.len());
                }
                None => {
                    let output = child.wait_with_output().unwrap();
                    let stderr = String::from_utf8_lossy(&output.stderr);
                    assert!(output.status.success(), "{stderr}");
                    break;
                }
            }
        }
        if kills >= 3 && mid_commits >= 2 {
            break;
        }
        eprintln!("round {round}: {kills} kills, {mid_commits} between commits; starting over");
    }
    let actual = committed(&kafka, &out);
    assert_eq!(actual.len(), expected.len(), "pairs committed (none lost, none twice)");
    assert!(actual == expected, "the same pairs as the run without failures");
}
