//! Kafka faults on a real broker: a failed run aborts its open transaction
//! (a `read_committed` reader is not held back until the transaction
//! timeout), the next start aborts what a killed run left open, a broker
//! killed with `kill -9` and restarted mid-run (twice) is ridden out by the
//! running pipeline, and a transaction the broker aborts by its timeout
//! fails the run, whose rerun is exact; a run told to stop (SIGTERM)
//! ends with a final checkpoint, or within its stop grace saying why.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use super::connector::KafkaPipeline;
use crate::support::kafka::{produce_orders, unique, Record, TestKafka};
use crate::support::*;

/// Longer than the Kafka sink's transaction timeout could ever let pass
/// unnoticed in these tests is 5 minutes; a reader held back only by a
/// left-open transaction sees nothing for that long. Anything visible well
/// within this bound was not held back.
const NOT_HELD_BACK: Duration = Duration::from_secs(60);

/// A little longer than one Kafka call's timeout (`CALL_TIMEOUT`, 30 s):
/// an outage a single call cannot ride out.
const OUTAGE: Duration = Duration::from_secs(36);

/// A record no pipeline writes, produced to an output topic outside any
/// transaction.
const PLAIN: &str = r#"{"customer_id":0,"plain":true}"#;

/// Whether a `read_committed` reader sees [`PLAIN`] in `topic`.
fn plain_visible(kafka: &TestKafka, topic: &str) -> bool {
    kafka.read_committed(topic).iter().any(|(_, _, _, value)| value == PLAIN.as_bytes())
}

/// Wait up to [`NOT_HELD_BACK`] for [`PLAIN`] to be visible in `topic`.
fn wait_for_plain(kafka: &TestKafka, topic: &str) -> bool {
    let deadline = Instant::now() + NOT_HELD_BACK;
    while Instant::now() < deadline {
        if plain_visible(kafka, topic) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

/// Each customer's committed revenue results in topic order (without
/// [`PLAIN`]).
fn results(kafka: &TestKafka, topic: &str) -> BTreeMap<u64, Vec<String>> {
    let mut keys: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (_, _, _, value) in kafka.read_committed(topic) {
        if value == PLAIN.as_bytes() {
            continue;
        }
        let text = String::from_utf8(value).unwrap();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        keys.entry(record["customer_id"].as_u64().unwrap()).or_default().push(text);
    }
    keys
}

/// The results of `pipeline` written failure-free to a topic of their
/// own: what every faulty run of it must end up with.
fn reference(
    kafka: &TestKafka,
    dir: &Path,
    pipeline: &KafkaPipeline,
) -> BTreeMap<u64, Vec<String>> {
    let topic = unique("revenue-expected");
    kafka.create_topic(&topic, 1);
    let spec =
        KafkaPipeline { name: unique("expected"), sink: &topic, ..*pipeline }.write(dir, kafka);
    run_ok(&spec, &dir.join("data-expected"), &[]);
    results(kafka, &topic)
}

fn stderr_of(child: Child) -> (bool, String) {
    let output = child.wait_with_output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_failed_run_aborts_its_open_transaction() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (acts, counts) = (unique("acts"), unique("counts"));
    kafka.create_topic(&acts, 1);
    kafka.create_topic(&counts, 1);
    // Ordinary events, then one that makes the process function trap.
    let total = 20_000;
    let mut records: Vec<Record> = (0..total)
        .map(|i| {
            let customer = format!("c{}", i % 20);
            let value = format!(r#"{{"customer":"{customer}"}}"#);
            (Some(0), Some(customer.into_bytes()), value.into_bytes())
        })
        .collect();
    records.push((Some(0), None, br#"{"customer":"c1","act":"trap"}"#.to_vec()));
    kafka.produce_many(&acts, &records);
    let spec = KafkaPipeline {
        name: unique("trap"),
        function: "misbehaving",
        source: &acts,
        sink: &counts,
        timestamp_field: None,
        transaction_timeout: "5m",
        checkpoint: "{ interval: 150ms, timeout: 1m }",
    }
    .write(dir.path(), &kafka);
    // A slow sink: the trap comes while output is being written, some of
    // it committed, the rest in an open transaction.
    let (ok, stderr) =
        stderr_of(start_weir(&spec, &dir.path().join("data"), &["--sink-delay-ms", "10"], &[]));
    assert!(!ok && stderr.contains("trapped"), "the run fails on the trap: {stderr}");
    let committed = kafka.read_committed(&counts).len();
    assert!(0 < committed && committed < total, "the run failed mid-run: {committed} committed");

    // Right after the process is gone, a record produced now is visible to
    // read_committed readers: nothing holds the last stable offset back
    // (an open transaction would, for its 5 minutes).
    kafka.produce(&counts, Some(0), None, PLAIN.as_bytes());
    assert!(
        wait_for_plain(&kafka, &counts),
        "a read_committed reader is held back after the failed run: its transaction was left open"
    );
}

#[test]
fn the_next_start_aborts_what_a_killed_run_left_open() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 3, 20_000, 40, 1);
    let pipeline = KafkaPipeline::revenue("killed", &orders, &revenue);
    let expected = reference(&kafka, dir.path(), &pipeline);

    let spec = pipeline.write(dir.path(), &kafka);
    let data = dir.path().join("data");
    let slow = ["--sink-delay-ms", "10"];
    // Killed (no unwinding: nothing aborts) right after pre-committing
    // checkpoint 3: its transaction holds output and stays open.
    let (ok, stderr) =
        stderr_of(start_weir(&spec, &data, &slow, &[("WEIR_FAULT", "kafka-after-pre-commit:3")]));
    assert!(!ok && stderr.contains("fault injected"), "{stderr}");
    kafka.produce(&revenue, Some(0), None, PLAIN.as_bytes());
    assert!(!plain_visible(&kafka, &revenue), "the killed run's transaction holds readers back");

    // The next start fences the transactional ids, which aborts it.
    let rerun = start_weir(&spec, &data, &slow, &[]);
    assert!(
        wait_for_plain(&kafka, &revenue),
        "the next start did not abort the killed run's transaction"
    );
    let (ok, stderr) = stderr_of(rerun);
    assert!(ok, "{stderr}");
    assert_same(&results(&kafka, &revenue), &expected, "after the faults");
}

/// Wait until `topic` has more than `than` committed results (the run
/// makes progress), failing if `child` ends first; the count.
fn wait_for_progress(kafka: &TestKafka, topic: &str, than: usize, child: &mut Child) -> usize {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let committed = total(&results(kafka, topic));
        if committed > than {
            return committed;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before making progress");
        assert!(Instant::now() < deadline, "no progress past {than} results");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_broker_killed_and_restarted_twice_mid_run_is_ridden_out() {
    let kafka = TestKafka::dedicated(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    // Enough that a loaded machine, reading the topic slowly, still finds
    // the run mid-way when it kills the broker.
    let orders_count = 120_000;
    for first in [1, 60_001] {
        produce_orders(&kafka, &orders, 3, 60_000, 40, first);
    }
    // The checkpoint timeout (the retry budget) outlasts an outage.
    let pipeline = KafkaPipeline {
        checkpoint: "{ interval: 150ms, timeout: 2m }",
        ..KafkaPipeline::revenue("outage", &orders, &revenue)
    };
    let expected = reference(&kafka, dir.path(), &pipeline);
    assert_eq!(total(&expected), orders_count);
    let spec = pipeline.write(dir.path(), &kafka);
    let mut run = start_weir(&spec, &dir.path().join("data"), &["--sink-delay-ms", "20"], &[]);
    let mut committed = 0;
    for outage in 1..=2 {
        committed = wait_for_progress(&kafka, &revenue, committed, &mut run);
        assert!(committed < orders_count, "outage {outage}: the run is already done");
        kafka.kill();
        assert!(run.try_wait().unwrap().is_none(), "outage {outage} began mid-run");
        eprintln!("broker killed with {committed} of {orders_count} results committed");
        std::thread::sleep(OUTAGE);
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run failed during outage {outage}: {}",
            stderr_of(run).1
        );
        kafka.restart(&[]);
    }
    let (ok, stderr) = stderr_of(run);
    assert!(ok, "the run did not ride out the outages: {stderr}");
    assert_same(&results(&kafka, &revenue), &expected, "after the faults");
}

#[test]
fn a_transaction_the_broker_aborts_by_timeout_fails_the_run_and_the_rerun_is_exact() {
    // The broker aborts transactions open longer than their timeout
    // (checked every second); the sink's timeout is the shortest the
    // checkpoint settings allow (3s + 150ms + the 1m commit margin).
    let kafka = TestKafka::dedicated(&[
        "transaction.max.timeout.ms=70000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 3, 20_000, 40, 1);
    let pipeline = KafkaPipeline {
        transaction_timeout: "65s",
        checkpoint: "{ interval: 150ms, timeout: 3s }",
        ..KafkaPipeline::revenue("stalled", &orders, &revenue)
    };
    let expected = reference(&kafka, dir.path(), &pipeline);
    let spec = pipeline.write(dir.path(), &kafka);
    let data = dir.path().join("data");
    // The sink stalls 80 s after its 20th batch, inside a transaction.
    let (ok, stderr) = stderr_of(start_weir(
        &spec,
        &data,
        &["--sink-delay-ms", "10"],
        &[("WEIR_FAULT", "kafka-after-write:20:pause=80000")],
    ));
    assert!(stderr.contains("pausing"), "the sink stalled: {stderr}");
    assert!(!ok, "a run whose transaction the broker aborted fails: {stderr}");
    eprintln!("the stalled run: {}", stderr.lines().last().unwrap_or_default());
    let visible = results(&kafka, &revenue);
    assert!(total(&visible) < total(&expected), "the stalled run did not finish");

    run_ok(&spec, &data, &[]);
    assert_same(&results(&kafka, &revenue), &expected, "after the faults");
}

/// Send SIGTERM to `child`; wait at most `within` for it to exit.
fn terminate(child: &mut Child, within: Duration) {
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "weir run still runs {within:?} after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_run_told_to_stop_ends_with_a_final_checkpoint_or_within_its_grace_saying_why() {
    let kafka = TestKafka::dedicated(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    let orders_count = 60_000;
    produce_orders(&kafka, &orders, 3, orders_count as u64, 40, 1);
    let pipeline = KafkaPipeline::revenue("stopped", &orders, &revenue);
    let expected = reference(&kafka, dir.path(), &pipeline);
    let spec = pipeline.write(dir.path(), &kafka);
    let data = dir.path().join("data");
    let slow = ["--sink-delay-ms", "20"];

    // Broker up: the stop takes a final checkpoint and exits cleanly.
    let mut run = start_weir(&spec, &data, &slow, &[]);
    wait_for_progress(&kafka, &revenue, 0, &mut run);
    terminate(&mut run, Duration::from_secs(60));
    let (ok, stderr) = stderr_of(run);
    assert!(ok, "a stop with the broker up is clean: {stderr}");
    let first = total(&results(&kafka, &revenue));
    assert!(first < orders_count, "the stop landed mid-run: {first} of {orders_count} results");
    assert_prefix(&results(&kafka, &revenue), &expected, "after a clean stop");

    // Broker gone: the stop gives up on the final checkpoint after the
    // grace, and says so.
    let mut run = start_weir(&spec, &data, &slow, &[("WEIR_STOP_GRACE", "3s")]);
    let second = wait_for_progress(&kafka, &revenue, first, &mut run);
    kafka.kill();
    let stopping = Instant::now();
    terminate(&mut run, Duration::from_secs(60));
    let took = stopping.elapsed();
    let (ok, stderr) = stderr_of(run);
    assert!(!ok, "a stop without a final checkpoint is not a clean exit: {stderr}");
    assert!(stderr.contains("stopped without a clean end"), "says why: {stderr}");

    // The next run, broker back, finishes exactly.
    kafka.restart(&[]);
    let (ok, stderr) = stderr_of(start_weir(&spec, &data, &[], &[]));
    assert!(ok, "the rerun: {stderr}");
    assert_same(&results(&kafka, &revenue), &expected, "after a clean and an unclean stop");
    println!(
        "weir run stops: clean at {first} of {orders_count} results; with the broker gone at {second}, exited {took:?} after SIGTERM (grace 3 s); rerun exact"
    );
}
