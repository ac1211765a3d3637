//! Kafka source and sink on a real Kafka broker (see `support::kafka`):
//! exactly-once output through 100 SIGKILLs and crashes injected at each
//! commit phase;
//! positions from checkpoints, not group offsets; idle partitions; fencing;
//! deploy-time refusals.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::*;

/// A pipeline from Kafka topic `source` to an exactly-once Kafka sink on
/// `sink`, with `function` as key and process function.
pub(crate) struct KafkaPipeline<'a> {
    pub(crate) name: String,
    pub(crate) function: &'a str,
    pub(crate) source: &'a str,
    pub(crate) sink: &'a str,
    /// The source's `timestamp_field`, if any.
    pub(crate) timestamp_field: Option<&'a str>,
    pub(crate) transaction_timeout: &'a str,
    pub(crate) checkpoint: &'a str,
}

impl KafkaPipeline<'_> {
    /// The revenue pipeline, named `name` made unique.
    pub(crate) fn revenue<'a>(name: &str, source: &'a str, sink: &'a str) -> KafkaPipeline<'a> {
        KafkaPipeline {
            name: unique(name),
            function: "revenue",
            source,
            sink,
            timestamp_field: Some("event_time"),
            transaction_timeout: "5m",
            checkpoint: "{ interval: 150ms, timeout: 1m }",
        }
    }

    /// Write the spec into `dir`; its path.
    pub(crate) fn write(&self, dir: &Path, kafka: &TestKafka) -> PathBuf {
        let wasm = function(self.function);
        let bootstrap = kafka.bootstrap();
        let timestamp = self
            .timestamp_field
            .map(|field| format!(", timestamp_field: {field}"))
            .unwrap_or_default();
        let spec = dir.join(format!("{}.yaml", self.name));
        std::fs::write(
            &spec,
            format!(
                "name: {}\nparallelism: 2\nbatch_size: 100\n\
                 source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{}], bounded: true{timestamp} }}\n\
                 key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
                 sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {}, delivery: exactly-once, transactional_id_prefix: {}, transaction_timeout: {} }}\n\
                 checkpoint: {}\n",
                self.name, self.source, self.sink, self.name, self.transaction_timeout, self.checkpoint
            ),
        )
        .unwrap();
        spec
    }
}

/// How many `kill -9`s the chaos test lands: `$WEIR_CHAOS_KILLS`, else 100.
fn chaos_kills() -> usize {
    std::env::var("WEIR_CHAOS_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(100)
}

/// Every customer's records in `before` are a prefix of theirs in `after`:
/// committed output only grows, nothing is replaced or repeated.
fn assert_extends(
    before: &BTreeMap<u64, Vec<String>>,
    after: &BTreeMap<u64, Vec<String>>,
    when: &str,
) {
    assert_prefix(before, after, when);
}

/// Records of `expected` missing from `actual` and records of `actual`
/// beyond `expected` (as multisets): (lost, duplicated).
fn lost_and_duplicated(
    actual: &BTreeMap<u64, Vec<String>>,
    expected: &BTreeMap<u64, Vec<String>>,
) -> (usize, usize) {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for record in expected.values().flatten() {
        *counts.entry(record).or_default() += 1;
    }
    for record in actual.values().flatten() {
        *counts.entry(record).or_default() -= 1;
    }
    let lost = counts.values().filter(|&&c| c > 0).map(|&c| c as usize).sum();
    let duplicated = counts.values().filter(|&&c| c < 0).map(|&c| (-c) as usize).sum();
    (lost, duplicated)
}

#[test]
fn kafka_to_kafka_is_exactly_once_through_kill_9_and_commit_phase_crashes() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue, expected_topic) =
        (unique("orders"), unique("revenue"), unique("revenue-expected"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    kafka.create_topic(&expected_topic, 1);
    let mut produced = 40_000;
    produce_orders(&kafka, &orders, 3, produced, 40, 1);

    let spec = KafkaPipeline::revenue("chaos", &orders, &revenue).write(dir.path(), &kafka);
    let data = dir.path().join("data");
    let seed = crash_seed();
    eprintln!("kafka chaos seed {seed}");
    let mut dice = Dice(seed);
    // A slow sink (20 ms per batch of 100) keeps every run busy writing,
    // so the kills land mid-run; the restore is logged so each restart can
    // be seen to resume from a checkpoint, never from nothing.
    let slow = ["--sink-delay-ms", "20"];
    let log = ("WEIR_LOG", "warn,weir_host::pipeline::restore=info");
    // Crashes injected exactly at each commit phase, then SIGKILLs at random.
    let faults = ["kafka-after-pre-commit:3", "kafka-before-commit:2", "kafka-after-commit:2"];
    let mut visible = BTreeMap::new();
    for fault in faults {
        let output = start_weir(&spec, &data, &slow, &[("WEIR_FAULT", fault), log])
            .wait_with_output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains("fault injected"), "{fault}: {stderr}");
        let now = committed_per_key(&kafka, &revenue);
        assert_extends(&visible, &now, fault);
        eprintln!("crash at {fault}: {} results committed", total(&now));
        visible = now;
    }
    assert!(total(&visible) > 0, "the injected crashes left nothing committed");

    let wanted = chaos_kills();
    let (mut kills, mut progressed, mut restored, mut finished) = (0, 0, 0, 0);
    while kills < wanted {
        let mut child = start_weir(&spec, &data, &slow, &[log]);
        let after = dice.between(1_000, 4_000);
        let deadline = Instant::now() + Duration::from_millis(after);
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "a run failed on its own (seed {seed}): {}",
                String::from_utf8_lossy(&output.stderr)
            );
            // It read everything: give the next runs more to do.
            finished += 1;
            produce_orders(&kafka, &orders, 3, 20_000, 40, produced + 1);
            produced += 20_000;
            visible = committed_per_key(&kafka, &revenue);
            continue;
        }
        child.kill().unwrap();
        let output = child.wait_with_output().unwrap();
        kills += 1;
        let now = committed_per_key(&kafka, &revenue);
        let when = format!("after kill {kills} (seed {seed})");
        assert_extends(&visible, &now, &when);
        let committed = total(&now);
        assert!(committed > 0, "{when}: nothing committed");
        if committed == produced as usize {
            // Killed after committing everything, while shutting down: not
            // mid-work, so not counted; give the next runs more to do.
            kills -= 1;
            finished += 1;
            produce_orders(&kafka, &orders, 3, 20_000, 40, produced + 1);
            produced += 20_000;
            visible = now;
            continue;
        }
        assert!(
            committed < produced as usize,
            "{when}: more results committed ({committed}) than orders ({produced})"
        );
        eprintln!("kill {kills} after {after} ms: {committed} results committed");
        if committed > total(&visible) {
            progressed += 1;
        }
        // Every run that got as far as its restore resumed from a snapshot
        // (the others were killed while fencing or loading functions).
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("no snapshot restored"), "{when}: started from nothing: {stderr}");
        if stderr.contains("restored state") {
            restored += 1;
        }
        visible = now;
    }
    run_ok(&spec, &data, &[]);
    let actual = committed_per_key(&kafka, &revenue);

    // The reference: one failure-free run over the same input.
    let expected_spec =
        KafkaPipeline::revenue("expected", &orders, &expected_topic).write(dir.path(), &kafka);
    run_ok(&expected_spec, &dir.path().join("data-expected"), &[]);
    let expected = committed_per_key(&kafka, &expected_topic);
    assert_eq!(total(&expected), produced as usize, "the failure-free run");
    let (lost, duplicated) = lost_and_duplicated(&actual, &expected);
    // Written to the real stderr (not captured by the test harness), so
    // the figures show in every test run's log.
    let _ = writeln!(
        std::io::stderr(),
        "kafka chaos (seed {seed}): 3 injected commit-phase crashes, {kills} kill -9 \
         ({restored} after the run restored a checkpoint, {progressed} after more was committed; {finished} runs finished their input first); \
         {} results committed, {} expected, lost {lost}, duplicated {duplicated}",
        total(&actual),
        total(&expected)
    );
    assert_same(
        &actual,
        &expected,
        &format!("after 3 injected crashes and {kills} kills (seed {seed})"),
    );
    assert_eq!((lost, duplicated), (0, 0));
    assert!(
        progressed * 4 >= kills && restored * 2 >= kills,
        "of {kills} kills, only {progressed} came after more was committed and {restored} after a restore (seed {seed})"
    );
}

#[test]
fn restarts_that_die_before_their_first_commit_keep_the_committed_checkpoint() {
    // Seen in CI: after many kills each landing before the run's first
    // Kafka commit, retention had retired the checkpoint the commit marker
    // names, and the next start could not resume. Here: commit twice, then
    // five runs that each complete a checkpoint and die before committing
    // it (more than `retained` = 3), then a clean run.
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue, expected_topic) =
        (unique("orders"), unique("revenue"), unique("revenue-expected"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    kafka.create_topic(&expected_topic, 1);
    produce_orders(&kafka, &orders, 2, 20_000, 40, 1);
    let expected_spec =
        KafkaPipeline::revenue("expected", &orders, &expected_topic).write(dir.path(), &kafka);
    run_ok(&expected_spec, &dir.path().join("data-expected"), &[]);
    let expected = committed_per_key(&kafka, &expected_topic);

    let spec = KafkaPipeline::revenue("pinned", &orders, &revenue).write(dir.path(), &kafka);
    let data = dir.path().join("data");
    let slow = ["--sink-delay-ms", "20"];
    for fault in [
        "kafka-after-commit:2",
        "kafka-before-commit:1",
        "kafka-before-commit:1",
        "kafka-before-commit:1",
        "kafka-before-commit:1",
        "kafka-before-commit:1",
    ] {
        let output =
            start_weir(&spec, &data, &slow, &[("WEIR_FAULT", fault)]).wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains("fault injected"), "{fault}: {stderr}");
        assert_prefix(&committed_per_key(&kafka, &revenue), &expected, fault);
    }
    run_ok(&spec, &data, &[]);
    assert_same(
        &committed_per_key(&kafka, &revenue),
        &expected,
        "after five runs that died before their first commit",
    );
}

#[test]
fn restores_positions_from_the_checkpoint_not_from_group_offsets() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = unique("orders");
    kafka.create_topic(&orders, 2);
    produce_orders(&kafka, &orders, 2, 500, 10, 1);
    let out = dir.path().join("out.jsonl");
    let wasm = function("revenue");
    let name = unique("positions");
    let spec = dir.path().join("positions.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: {name}\nsource: {{ type: kafka, bootstrap_servers: {:?}, topics: [{orders}], bounded: true, start: committed, group_id: {name} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\ncheckpoint: {{ interval: 100ms }}\n",
            kafka.bootstrap()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    run_ok(&spec, &data, &[]);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 500);
    // Rewind the group's offsets: a restart must not follow them.
    kafka.commit_offsets(&name, &orders, &[0, 0]);
    produce_orders(&kafka, &orders, 2, 100, 10, 501);
    let output = run_ok(&spec, &data, &[]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("restored from checkpoint"));
    let lines = std::fs::read_to_string(&out).unwrap().lines().count();
    assert_eq!(lines, 600, "the 500 old orders once, then only the 100 new ones");
}

#[test]
fn a_source_read_by_several_tasks_restores_at_another_task_count() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = unique("orders");
    kafka.create_topic(&orders, 6);
    let out = dir.path().join("out.jsonl");
    let wasm = function("revenue");
    let spec = dir.path().join("readers.yaml");
    let write_spec = |tasks: u16| {
        std::fs::write(
            &spec,
            format!(
                "name: {}\nparallelism: 2\nsource: {{ type: kafka, bootstrap_servers: {:?}, topics: [{orders}], bounded: true, parallelism: {tasks} }}\n\
                 key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\ncheckpoint: {{ interval: 100ms }}\n",
                "readers",
                kafka.bootstrap()
            ),
        )
        .unwrap();
    };
    let data = dir.path().join("data");
    let ids = || -> Vec<u64> {
        let text = std::fs::read_to_string(&out).unwrap();
        let mut ids: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["order_id"].as_u64().unwrap()
            })
            .collect();
        ids.sort_unstable();
        ids
    };
    // One source task; three, two partitions each; two; one again: each
    // restore takes up every partition where the last run left it.
    let mut produced = 0;
    for (tasks, count) in [(1, 200), (3, 600), (2, 300), (1, 100)] {
        produce_orders(&kafka, &orders, 6, count, 12, produced + 1);
        produced += count;
        write_spec(tasks);
        let output = run_ok(&spec, &data, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            ids(),
            (1..=produced).collect::<Vec<_>>(),
            "each order once after {tasks} tasks: {stderr}"
        );
        if tasks > 1 {
            let snapshots = data.join("checkpoints").join("readers");
            let recorded = std::fs::read_dir(&snapshots)
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("_metadata")).ok())
                .any(|meta| meta.contains(&format!("\"source#{}\"", tasks - 1)));
            assert!(recorded, "snapshots hold each source task's position");
        }
    }
}

#[test]
fn an_idle_partition_does_not_stall_event_time() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let orders = unique("orders");
    kafka.create_topic(&orders, 2);
    // Three minutes of orders, all on partition 0, produced while the
    // pipeline runs; partition 1 stays empty.
    let out = dir.path().join("windows.jsonl");
    let wasm = function("windowed-revenue");
    let spec = dir.path().join("idle.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: {}\nwatermark: {{ max_out_of_orderness: 1s, idle_timeout: 300ms }}\n\
             source: {{ type: kafka, bootstrap_servers: {:?}, topics: [{orders}], timestamp_field: event_time }}\n\
             key: {{ wasm: {wasm:?} }}\nwindow: {{ type: tumbling, size: 1m }}\naggregate: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: file, path: {out:?} }}\ncheckpoint: {{ interval: 100ms }}\n",
            unique("idle"),
            kafka.bootstrap()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let running = start_weir(&spec, &data, &[], &[]);
    for minute in 0..3 {
        produce_orders(&kafka, &orders, 1, 60, 3, 1 + minute * 60);
        std::thread::sleep(Duration::from_millis(400));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let fired = loop {
        let lines = std::fs::read_to_string(&out).map(|t| t.lines().count()).unwrap_or(0);
        if lines > 0 || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stop = weir(&["stop", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let output = running.wait_with_output().unwrap();
    assert!(
        fired > 0,
        "no window fired while partition 1 was idle: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stop.status.success() && output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_read_fills_the_room_left_beside_events_already_held() {
    use weir_host::connectors::kafka::{KafkaSource, KafkaSourceConfig};
    use weir_host::connectors::Source;

    let kafka = TestKafka::start();
    let orders = unique("orders");
    kafka.create_topic(&orders, 1);
    produce_orders(&kafka, &orders, 1, 300, 5, 1);
    let config: KafkaSourceConfig = serde_json::from_value(serde_json::json!({
        "bootstrap_servers": kafka.bootstrap(),
        "topics": [orders],
        "bounded": true,
    }))
    .unwrap();
    let mut source = KafkaSource::open(&config, &unique("held")).unwrap();
    // As the source task calls it: five events held, room for ten more.
    let held = weir_host::Event { key: None, value: b"{}".to_vec(), timestamp: 0, headers: vec![] };
    let (mut out, mut added) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        out.clear();
        out.resize(5, held.clone());
        let polled = source.next_batch(10, &mut out).unwrap();
        added.push(out.len() - 5);
        if !polled.more || Instant::now() > deadline {
            break;
        }
    }
    assert_eq!(added.iter().sum::<usize>(), 300, "every record read once");
    // Before the fix, a read stopped once `out` held ten events: five added.
    assert_eq!(added.iter().max(), Some(&10), "reads fill the room, no more: {added:?}");
}

#[test]
fn a_second_host_with_the_same_transactional_ids_fences_the_first() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 1);
    kafka.create_topic(&revenue, 1);
    // Enough input that the first host is still running (minutes of slow
    // sink) when the second one, compiling its functions afresh on a
    // loaded machine and retrying while the broker finishes the first
    // one's transaction, gets to fence it (24,000 orders once ran out
    // after 53 s, before the fence, while cluster tests loaded both
    // cores). Fenced, the first host stops early.
    produce_orders(&kafka, &orders, 1, 96_000, 10, 1);
    let spec = KafkaPipeline::revenue("zombie", &orders, &revenue).write(dir.path(), &kafka);
    let zombie = start_weir(&spec, &dir.path().join("data-a"), &["--sink-delay-ms", "100"], &[]);
    std::thread::sleep(Duration::from_millis(1_500));
    let successor = start_weir(&spec, &dir.path().join("data-b"), &["--sink-delay-ms", "100"], &[]);
    let zombie = zombie.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&zombie.stderr).to_lowercase();
    let mut successor = successor;
    let _ = successor.kill();
    let _ = successor.wait();
    assert!(
        !zombie.status.success() && stderr.contains("fenc"),
        "the first host is fenced: {stderr}"
    );
}

#[test]
fn impossible_exactly_once_settings_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = function("revenue");
    let spec = |name: &str, prefix: &str, timeout: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nsource: {{ type: kafka, bootstrap_servers: 127.0.0.1:1, topics: [orders] }}\n\
                 key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
                 sink: {{ type: kafka, bootstrap_servers: 127.0.0.1:1, topic: revenue, delivery: exactly-once, transactional_id_prefix: {prefix}, transaction_timeout: {timeout}, broker_transaction_max_timeout: 15m }}\n\
                 checkpoint: {{ interval: 2s, timeout: 1m }}\n"
            ),
        )
        .unwrap();
        path
    };
    let data = dir.path().join("data");
    let short = weir(&[
        "run",
        spec("short", "short", "5s").to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let message = String::from_utf8_lossy(&short.stderr);
    assert!(
        !short.status.success()
            && message.contains("transaction_timeout 5s")
            && message.contains("checkpoint.interval 2s"),
        "{message}"
    );
    let long = weir(&[
        "run",
        spec("long", "long", "1h").to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let message = String::from_utf8_lossy(&long.stderr);
    assert!(!long.status.success() && message.contains("15m"), "{message}");

    // A pipeline that ran with a prefix owns it on this host; another
    // pipeline with the same prefix is refused.
    let kafka = TestKafka::start();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 1);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 1, 10, 3, 1);
    let first = KafkaPipeline {
        name: "first".into(),
        ..KafkaPipeline::revenue("first", &orders, &revenue)
    }
    .write(dir.path(), &kafka);
    let first_text = std::fs::read_to_string(&first)
        .unwrap()
        .replace("transactional_id_prefix: first", "transactional_id_prefix: shared");
    std::fs::write(&first, &first_text).unwrap();
    run_ok(&first, &data, &[]);
    let second = dir.path().join("second.yaml");
    std::fs::write(&second, first_text.replace("name: first", "name: second")).unwrap();
    let refused = weir(&["run", second.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && message.contains("already used by pipeline \"first\""),
        "{message}"
    );
    let no_checkpoints = dir.path().join("none.yaml");
    std::fs::write(
        &no_checkpoints,
        std::fs::read_to_string(spec("none", "none", "5m"))
            .unwrap()
            .replace("checkpoint: { interval: 2s, timeout: 1m }\n", ""),
    )
    .unwrap();
    let refused =
        weir(&["run", no_checkpoints.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("needs checkpoints"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn an_at_least_once_sink_without_checkpoints_delivers_everything() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 2, 300, 5, 1);
    let spec = KafkaPipeline::revenue("plain", &orders, &revenue).write(dir.path(), &kafka);
    let text = std::fs::read_to_string(&spec).unwrap();
    let text = text
        .replace("delivery: exactly-once, ", "delivery: at-least-once, ")
        .replace("checkpoint: { interval: 150ms, timeout: 1m }\n", "");
    std::fs::write(&spec, text).unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);
    assert_eq!(committed_per_key(&kafka, &revenue).values().map(Vec::len).sum::<usize>(), 300);
}

#[test]
fn an_at_least_once_sink_loses_nothing_when_killed_as_a_checkpoint_completes() {
    // The sink acknowledges a checkpoint only once its records are
    // delivered; a 300 ms linger keeps records in librdkafka's queue long
    // after they were written, so a checkpoint acknowledged before their
    // delivery would lose them at this crash.
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 2, 20_000, 20, 1);
    let spec = KafkaPipeline::revenue("alo", &orders, &revenue).write(dir.path(), &kafka);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "delivery: exactly-once, ",
        "delivery: at-least-once, properties: { linger.ms: \"300\" }, ",
    );
    std::fs::write(&spec, text).unwrap();
    let data = dir.path().join("data");
    let slow = ["--sink-delay-ms", "20"];
    let crashed =
        start_weir(&spec, &data, &slow, &[("WEIR_FAULT", "kafka-at-least-once-complete:2")])
            .wait_with_output()
            .unwrap();
    let stderr = String::from_utf8_lossy(&crashed.stderr);
    assert!(!crashed.status.success() && stderr.contains("fault injected"), "{stderr}");
    let before = total(&committed_per_key(&kafka, &revenue));
    assert!(before < 20_000, "the crash landed after all the output ({before})");
    run_ok(&spec, &data, &[]);
    let written = committed_per_key(&kafka, &revenue);
    let ids: std::collections::BTreeSet<u64> = written
        .values()
        .flatten()
        .map(|text| {
            serde_json::from_str::<serde_json::Value>(text).unwrap()["order_id"].as_u64().unwrap()
        })
        .collect();
    let lost: Vec<u64> = (1..=20_000).filter(|id| !ids.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "{} orders' results lost, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

#[test]
fn the_kafka_example_spec_is_valid() {
    let spec = weir_host::specification::PipelineSpec::load(&example_file(
        "revenue",
        "kafka-pipeline.yaml",
    ))
    .unwrap();
    assert!(matches!(
        &spec.sink,
        Some(weir_host::specification::SinkSpec::Kafka(sink))
            if sink.delivery == weir_host::connectors::kafka::Delivery::ExactlyOnce
    ));
}
