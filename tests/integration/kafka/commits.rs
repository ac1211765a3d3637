//! Recovery decisions of the exactly-once Kafka sink against a real broker:
//! a lost commit marker is refused, then overridden with the documented
//! result; a restore that does not match the marker is refused, and the
//! way out the error names works; output emitted after the final barrier
//! is committed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_host::pipeline::{self, RunOptions};
use weir_host::runtime::bindings::weir::function::context::Host as _;
use weir_host::runtime::bindings::weir::function::state::Host as _;
use weir_host::runtime::bindings::weir::function::timers::Host as _;
use weir_host::runtime::bindings::weir::function::types::{KeyedEvents, KeyedTimers, TimeDomain};
use weir_host::runtime::native::{
    NativeCatalog, NativeFunction, NativeKeyFunction, NativeProcessFunction,
};
use weir_host::runtime::packing::KeyList;
use weir_host::runtime::HostCtx;
use weir_host::specification::PipelineSpec;
use weir_host::Event;

use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::*;

/// A revenue pipeline from `source` (bounded) to `sink`, exactly-once with
/// transactional-id prefix `name`, checkpointing every 150 ms.
fn spec(dir: &Path, kafka: &TestKafka, name: &str, source: &str, sink: &str) -> PathBuf {
    let wasm = function("revenue");
    let bootstrap = kafka.bootstrap();
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\nparallelism: 2\nbatch_size: 100\n\
             source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{source}], bounded: true, timestamp_field: event_time }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {sink}, delivery: exactly-once, transactional_id_prefix: {name}, transaction_timeout: 5m }}\n\
             checkpoint: {{ interval: 150ms, timeout: 1m }}\n"
        ),
    )
    .unwrap();
    path
}

/// `weir run` of `spec`, expected to fail; its stderr.
fn run_refused(spec: &Path, data: &Path, extra: &[&str]) -> String {
    let mut args = vec!["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = weir(&args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the run was not refused: {stderr}");
    stderr
}

/// The committed results of a failure-free run over `orders` (fresh
/// topic, fresh data directory).
fn reference(kafka: &TestKafka, dir: &Path, orders: &str) -> BTreeMap<u64, Vec<String>> {
    let topic = unique("reference");
    kafka.create_topic(&topic, 1);
    let name = unique("reference");
    run_ok(&spec(dir, kafka, &name, orders, &topic), &dir.join(&name), &[]);
    committed_per_key(kafka, &topic)
}

/// The commit marker: the offset group `weir-txn-<name>` committed on
/// partition 0 of `topic`.
fn marker(kafka: &TestKafka, name: &str, topic: &str) -> Option<i64> {
    kafka.committed_offsets(&format!("weir-txn-{name}"), topic, 1)[0]
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> u64 {
    let at = text.find(prefix).unwrap_or_else(|| panic!("no {prefix:?} in: {text}"));
    let digits: String =
        text[at + prefix.len()..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number after {prefix:?} in: {text}"))
}

#[test]
fn a_lost_commit_marker_is_refused_and_overriding_it_replays_from_the_last_recorded_commit() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 2, 3000, 30, 1);
    let name = unique("lost-marker");
    let spec = spec(dir.path(), &kafka, &name, &orders, &revenue);
    let data = dir.path().join("data");
    // A slow sink: several checkpoints, each recording the one before it
    // as committed.
    run_ok(&spec, &data, &["--sink-delay-ms", "10"]);
    let first = committed_per_key(&kafka, &revenue);
    assert_eq!(total(&first), 3000);
    let last = marker(&kafka, &name, &revenue).expect("the marker of the final checkpoint");
    assert!(last >= 3, "only {last} checkpoints");

    // The marker is lost (as offsets retention would lose it); more input.
    kafka.delete_group(&format!("weir-txn-{name}"));
    produce_orders(&kafka, &orders, 2, 1000, 30, 3001);
    let stderr = run_refused(&spec, &data, &[]);
    for part in [
        format!("cannot start pipeline {name}"),
        format!("the Kafka commit marker (consumer group weir-txn-{name} on topic {revenue} partition 0) is absent"),
        "the marker was lost or reset".to_string(),
        "--override-kafka-marker".to_string(),
        "--fresh".to_string(),
    ] {
        assert!(stderr.contains(&part), "{part:?} missing from: {stderr}");
    }
    let recorded = number_after(
        &stderr,
        "Pass --override-kafka-marker (API: override_kafka_marker=true) to restore snapshot ",
    );
    assert!(recorded < last as u64 && recorded >= 1, "recorded {recorded}, marker was {last}");
    assert_eq!(committed_per_key(&kafka, &revenue), first, "a refused run writes nothing");

    // Overridden: it restores the newest snapshot the checkpoints record as
    // committed, and replays from there — results after it may be written
    // again, none is lost.
    let output = run_ok(&spec, &data, &["--override-kafka-marker"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("restored from checkpoint {recorded}"))
            || stderr.contains(&format!("restored from savepoint {recorded}")),
        "{stderr}"
    );
    let expected = reference(&kafka, dir.path(), &orders);
    assert_eq!(total(&expected), 4000);
    let actual = committed_per_key(&kafka, &revenue);
    for (customer, want) in &expected {
        let got: BTreeSet<&String> = actual.get(customer).into_iter().flatten().collect();
        let want: BTreeSet<&String> = want.iter().collect();
        assert_eq!(got, want, "customer {customer}: every result, none lost, none foreign");
    }
    // Results after the restored snapshot are written again — none when
    // its successor's epoch was empty (a checkpoint taken after the last
    // input came), and never all of them.
    let repeated = total(&actual) - total(&expected);
    assert!(repeated < 3000, "{repeated} results written again");
    // The marker follows the new run; the next start is normal again.
    assert!(marker(&kafka, &name, &revenue) > Some(last));
    run_ok(&spec, &data, &[]);
    assert_eq!(total(&committed_per_key(&kafka, &revenue)), total(&actual));
}

#[test]
fn a_restore_that_does_not_match_the_commit_marker_is_refused() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 2, 3000, 30, 1);
    let name = unique("restore-marker");
    let spec = spec(dir.path(), &kafka, &name, &orders, &revenue);
    let data = dir.path().join("data");
    // Checkpoint 2 completes, and the process dies before Kafka commits it:
    // the marker says 1.
    let output = start_weir(
        &spec,
        &data,
        &["--sink-delay-ms", "10"],
        &[("WEIR_FAULT", "kafka-before-commit:2")],
    )
    .wait_with_output()
    .unwrap();
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // (Its open transaction holds the marker group's offsets until a start
    // fences it: the marker is read after the refused run below.)
    let checkpoints = data.join("checkpoints").join(&name);
    let newest = std::fs::read_dir(&checkpoints)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse::<u64>().ok())
        .filter(|id| checkpoints.join(format!("chk-{id}/_metadata")).exists())
        .max()
        .expect("a completed checkpoint");
    let marked = newest - 1;
    let newest = checkpoints.join(format!("chk-{newest}"));

    // Restoring the newer checkpoint would lose its results: refused,
    // naming both ids and the checkpoint that replays them.
    let stderr = run_refused(&spec, &data, &["--restore", newest.to_str().unwrap()]);
    // That start fenced the dead run's open transactions, which held back
    // what a read_committed reader sees of the committed ones: from here
    // on the topic only changes if a run writes to it.
    let visible = committed_per_key(&kafka, &revenue);
    let again = run_refused(&spec, &data, &["--restore", newest.to_str().unwrap()]);
    let reason = format!("but snapshot {} (asked to restore) is newer", marked + 1);
    assert!(again.contains(&reason), "refused the same way again: {again}");
    for part in [
        format!("says the output of snapshot {marked} is the last in the topic"),
        format!("but snapshot {} (asked to restore) is newer", marked + 1),
        format!("the results between snapshots {marked} and {} were never committed", marked + 1),
        "--override-kafka-marker".to_string(),
    ] {
        assert!(stderr.contains(&part), "{part:?} missing from: {stderr}");
    }
    assert_eq!(committed_per_key(&kafka, &revenue), visible, "a refused run writes nothing");
    assert_eq!(marker(&kafka, &name, &revenue), Some(marked as i64));
    let suggested = stderr
        .split("(--restore ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no --restore suggested: {stderr}"))
        .to_string();
    assert!(suggested.ends_with(&format!("chk-{marked}")), "{suggested}");

    // The way out the error names: exact output.
    run_ok(&spec, &data, &["--restore", &suggested]);
    let expected = reference(&kafka, dir.path(), &orders);
    assert_eq!(committed_per_key(&kafka, &revenue), expected);

    // Restoring a checkpoint older than the marker would write results
    // again: refused too.
    let last = marker(&kafka, &name, &revenue).unwrap() as u64;
    let older = std::fs::read_dir(data.join("checkpoints").join(&name))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("chk-")?.parse::<u64>().ok())
        .filter(|&id| id < last)
        .max()
        .expect("an older retained checkpoint");
    let older_dir = data.join("checkpoints").join(&name).join(format!("chk-{older}"));
    let stderr = run_refused(&spec, &data, &["--restore", older_dir.to_str().unwrap()]);
    assert!(
        stderr.contains(&format!("but snapshot {older} (asked to restore) is older"))
            && stderr.contains("would write the results between snapshots"),
        "{stderr}"
    );
    assert_eq!(committed_per_key(&kafka, &revenue), expected, "a refused run writes nothing");
}

/// A process function keyed by the event's value that emits nothing for
/// events: each key registers a processing-time timer an hour ahead, and
/// the timer emits `fired <key>`. Only the end of the input makes it fire.
struct TimerAtEnd;

impl NativeFunction for TimerAtEnd {
    fn key(&self) -> Option<Box<dyn NativeKeyFunction>> {
        Some(Box::new(TimerAtEnd))
    }
    fn process(&self) -> Option<Box<dyn NativeProcessFunction>> {
        Some(Box::new(TimerAtEnd))
    }
}

impl NativeKeyFunction for TimerAtEnd {
    fn extract_keys(&mut self, events: &[Event], keys: &mut KeyList) -> Result<(), String> {
        events.iter().for_each(|event| keys.push(&event.value));
        Ok(())
    }
}

impl NativeProcessFunction for TimerAtEnd {
    fn process(&mut self, batch: &[KeyedEvents], ctx: &mut HostCtx) -> Result<(), String> {
        let in_an_hour = ctx.now() + 3_600_000;
        for index in 0..batch.len() {
            ctx.state()
                .select_key(index as u32)
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("{e:?}"))?;
            ctx.timers()
                .register(TimeDomain::ProcessingTime, in_an_hour)
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("{e:?}"))?;
        }
        Ok(())
    }

    fn on_timers(&mut self, batch: &[KeyedTimers], ctx: &mut HostCtx) -> Result<(), String> {
        for keyed in batch {
            for _ in &keyed.timers {
                let value = [b"fired ".as_slice(), &keyed.key].concat();
                let event = Event { key: None, value, timestamp: 0, headers: Vec::new() };
                ctx.context().emit(event).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// Run the `timer-at-end` pipeline in this process from `input` (its
/// 50 keys, bounded) to `sink`, checkpointing every 100 ms.
fn run_timer_at_end(kafka: &TestKafka, data: &Path, name: &str, input: &str, sink: &str) {
    let bootstrap = kafka.bootstrap();
    let spec = PipelineSpec::parse(&format!(
        "name: {name}\nparallelism: 2\n\
         source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{input}], bounded: true }}\n\
         key: {{ native: timer-at-end }}\nprocess: {{ native: timer-at-end }}\n\
         sink: {sink}\ncheckpoint: {{ interval: 100ms, timeout: 1m }}\n"
    ))
    .unwrap();
    let catalog =
        NativeCatalog::new([("timer-at-end", Arc::new(TimerAtEnd) as Arc<dyn NativeFunction>)]);
    let options = RunOptions::new(data.to_path_buf()).with_natives(catalog);
    let summary = pipeline::run(&spec, &options).unwrap();
    assert_eq!(summary.records_in, 50);
}

#[test]
fn output_of_processing_time_timers_firing_at_the_end_is_committed() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique("keys"), unique("fired"));
    kafka.create_topic(&input, 2);
    kafka.create_topic(&output, 1);
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let records: Vec<_> =
        keys.iter().map(|k| (Some(k.len() as i32 % 2), None, k.clone().into_bytes())).collect();
    kafka.produce_many(&input, &records);
    let expected: BTreeSet<String> = keys.iter().map(|k| format!("fired {k}")).collect();

    // Into an exactly-once Kafka topic.
    let name = unique("timers");
    let bootstrap = kafka.bootstrap();
    let sink = format!("{{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {output}, delivery: exactly-once, transactional_id_prefix: {name}, transaction_timeout: 5m }}");
    run_timer_at_end(&kafka, &dir.path().join("data"), &name, &input, &sink);
    let fired: Vec<String> = kafka
        .read_committed(&output)
        .into_iter()
        .map(|(_, _, _, value)| String::from_utf8(value).unwrap())
        .collect();
    assert_eq!(fired.len(), 50, "{fired:?}");
    assert_eq!(fired.into_iter().collect::<BTreeSet<_>>(), expected, "committed in Kafka");

    // Into a file (committed when its checkpoint completes).
    let out = dir.path().join("fired.txt");
    let sink = format!("{{ type: file, path: {out:?} }}");
    run_timer_at_end(&kafka, &dir.path().join("data-file"), &unique("timers"), &input, &sink);
    let lines = sorted_lines(&out);
    assert_eq!(lines.len(), 50, "{lines:?}");
    assert_eq!(lines.into_iter().collect::<BTreeSet<_>>(), expected, "committed in the file");
}
