//! Graphs recover exactly: a checkpointed join of two sources killed with
//! `kill -9` at random instants writes the same output as a run without
//! failures; a two-stage pipeline stopped with a savepoint continues
//! exactly with a different parallelism in each stage.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

/// Orders from two generators (different seeds) joined per customer: a
/// right order within 10 minutes after a left one; checkpoints every
/// 100 ms, the output exactly-once into `out`.
fn join_spec(dir: &Path, parallelism: u16, out: &Path) -> PathBuf {
    let key = function("revenue");
    let spec = dir.join(format!("join-p{parallelism}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: join\nparallelism: {parallelism}\nbatch_size: 100\n\
             watermark: {{ max_out_of_orderness: 5s }}\n\
             checkpoint: {{ interval: 100ms, retained: 2 }}\n\
             operators:\n\
             \x20 left: {{ source: {{ type: generator, count: 12000, keys: 200, seed: 1 }} }}\n\
             \x20 right: {{ source: {{ type: generator, count: 12000, keys: 200, seed: 2 }} }}\n\
             \x20 joined:\n\
             \x20   inputs: [left, right]\n\
             \x20   key: {{ wasm: {key:?} }}\n\
             \x20   join: {{ type: interval, lower: 0s, upper: 10m }}\n\
             \x20 out: {{ inputs: [joined], sink: {{ type: file, path: {out:?} }} }}\n"
        ),
    )
    .unwrap();
    spec
}

#[test]
fn a_join_of_two_sources_killed_at_random_instants_writes_what_a_run_without_failures_does() {
    let dir = tempfile::tempdir().unwrap();
    let expected_out = dir.path().join("expected.jsonl");
    run_ok(&join_spec(dir.path(), 2, &expected_out), &dir.path().join("expected-data"), &[]);
    let expected = sorted_lines(&expected_out);
    assert!(expected.len() > 20_000, "the join matches many pairs: {}", expected.len());

    let out = dir.path().join("out.jsonl");
    run_with_kills(&join_spec(dir.path(), 3, &out), &dir.path().join("data"), &out);
    let actual = sorted_lines(&out);
    assert_eq!(actual.len(), expected.len(), "pairs joined (none lost, none twice)");
    assert!(actual == expected, "the same pairs as the run without failures");
}

/// `count` orders of 24 customers in 4 regions, one a second from
/// 10:00:00, as `functions/region-top3` reads them.
fn regional_orders(path: &Path, count: u64) {
    let regions = ["apac", "emea", "latam", "us"];
    let mut lines = String::new();
    for i in 0..count {
        let customer = (i * 7 + i / 5) % 24 + 1;
        let cents = (i * 7919) % 20_000 + 1;
        lines.push_str(&format!(
            "{{\"order_id\":{},\"customer_id\":{customer},\"region\":\"{}\",\"amount\":{}.{:02},\"event_time\":\"2026-01-15T{:02}:{:02}:{:02}Z\"}}\n",
            i + 1,
            regions[(customer % 4) as usize],
            cents / 100,
            cents % 100,
            10 + i / 3600,
            i / 60 % 60,
            i % 60,
        ));
    }
    std::fs::write(path, lines).unwrap();
}

/// Running revenue per customer, re-keyed by region, the top 3 per region
/// per minute; each stage with its own parallelism.
fn two_stage_spec(dir: &Path, revenue: u16, top3: u16, input: &Path, out: &Path) -> PathBuf {
    let (stage1, stage2) = (function("customer-revenue"), function("region-top3"));
    let spec = dir.join(format!("two-stage-{revenue}-{top3}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: two-stage\nbatch_size: 1\n\
             watermark: {{ max_out_of_orderness: 5s }}\n\
             checkpoint: {{ interval: 200ms }}\n\
             operators:\n\
             \x20 orders: {{ source: {{ type: file, path: {input:?}, timestamp_field: event_time }} }}\n\
             \x20 revenue:\n\
             \x20   inputs: [orders]\n\
             \x20   parallelism: {revenue}\n\
             \x20   key: {{ wasm: {stage1:?} }}\n\
             \x20   process: {{ wasm: {stage1:?} }}\n\
             \x20 top3:\n\
             \x20   inputs: [revenue]\n\
             \x20   parallelism: {top3}\n\
             \x20   key: {{ wasm: {stage2:?} }}\n\
             \x20   window: {{ type: tumbling, size: 1m }}\n\
             \x20   aggregate: {{ wasm: {stage2:?} }}\n\
             \x20 out: {{ inputs: [top3], sink: {{ type: file, path: {out:?} }} }}\n"
        ),
    )
    .unwrap();
    spec
}

#[test]
fn a_two_stage_savepoint_restores_with_another_parallelism_in_each_stage() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    regional_orders(&input, 3_000);
    let expected_out = dir.path().join("expected.jsonl");
    run_ok(
        &two_stage_spec(dir.path(), 1, 1, &input, &expected_out),
        &dir.path().join("expected-data"),
        &[],
    );
    let expected = sorted_lines(&expected_out);
    assert_eq!(expected.len(), 50 * 4, "a top 3 per region per minute");

    let out = dir.path().join("out.jsonl");
    let data = dir.path().join("data");
    let first = two_stage_spec(dir.path(), 2, 3, &input, &out);
    let running = start_weir(&first, &data, &["--sink-delay-ms", "20"], &[]);
    // Stop once some results are committed (a loaded machine starts slowly).
    let started = Instant::now();
    while std::fs::read_to_string(&out).unwrap_or_default().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no result committed in a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let stop = loop {
        let asked = weir(&[
            "stop",
            first.to_str().unwrap(),
            "--savepoint",
            "--data-dir",
            data.to_str().unwrap(),
        ]);
        let not_yet = String::from_utf8_lossy(&asked.stderr).contains("not running here");
        if asked.status.success() || !not_yet || Instant::now() > deadline {
            break asked;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let location = String::from_utf8_lossy(&stop.stdout).trim().to_string();
    let stopped = running.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(stopped.status.success() && stderr.contains("stopped on request"), "{stderr}");
    let partial = sorted_lines(&out).len();
    assert!(partial > 0 && partial < expected.len(), "stopped part-way: {partial} results");
    let metadata: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&location).join("_metadata")).unwrap(),
    )
    .unwrap();
    let stages: Vec<(&str, u64)> = metadata["operators"]
        .as_array()
        .expect("a graph's savepoint lists its stages")
        .iter()
        .map(|o| (o["uid"].as_str().unwrap(), o["parallelism"].as_u64().unwrap()))
        .collect();
    assert_eq!(stages, [("revenue", 2), ("top3", 3)], "the savepoint holds both stages");

    let second = two_stage_spec(dir.path(), 3, 1, &input, &out);
    let output = run_ok(&second, &data, &["--restore", &location]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("restored from savepoint"), "{stderr}");
    assert_eq!(sorted_lines(&out), expected, "results continue exactly at parallelism 3 and 1");
}

/// The fraud-rules example as a spec of its own: its rules broadcast to
/// `parallelism` detector subtasks, transactions from source node
/// `transactions` reading `input`, checkpoints on.
fn fraud_spec(
    dir: &Path,
    parallelism: u16,
    transactions: &str,
    input: &Path,
    out: &Path,
) -> PathBuf {
    let wasm = function("fraud-rules");
    let rules = example_file("fraud-rules", "rules.jsonl");
    let spec = dir.join(format!("fraud-{parallelism}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: fraud\nparallelism: {parallelism}\n\
             watermark: {{ max_out_of_orderness: 5s }}\n\
             checkpoint: {{ interval: 1s }}\n\
             operators:\n\
             \x20 {transactions}: {{ source: {{ type: file, path: {input:?}, timestamp_field: time }} }}\n\
             \x20 rules: {{ source: {{ type: file, path: {rules:?}, timestamp_field: time }} }}\n\
             \x20 detect:\n\
             \x20   inputs: [{transactions}]\n\
             \x20   broadcast: [rules]\n\
             \x20   key: {{ wasm: {wasm:?} }}\n\
             \x20   process: {{ wasm: {wasm:?} }}\n\
             \x20 alerts: {{ inputs: [detect], sink: {{ type: file, path: {out:?} }} }}\n"
        ),
    )
    .unwrap();
    spec
}

#[test]
fn broadcast_state_restored_at_a_higher_parallelism_reaches_every_subtask() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = dir.path().join("alerts.jsonl");
    // Run 1, two subtasks: every rule change reaches both; the final
    // checkpoint holds the rules.
    let first = example_file("fraud-rules", "transactions.jsonl");
    run_ok(&fraud_spec(dir.path(), 2, "transactions", &first, &out), &data, &[]);
    let expected_first = sorted_lines(&example_file("fraud-rules", "expected-alerts.jsonl"));
    assert_eq!(sorted_lines(&out), expected_first);

    // Run 2, three subtasks, restored from that checkpoint: the rules
    // source is at its end (no rule is read again) and new accounts'
    // transactions, after every rule change, come from a new source.
    // Rules in force then: big above 300.00, medium above 200.00 (huge
    // was deleted).
    let input = dir.path().join("later.jsonl");
    let amounts = ["150.00", "250.00", "350.00", "5000.00"];
    let mut lines = String::new();
    let mut expected = Vec::new();
    for i in 0..60u32 {
        let (account, amount) = (format!("z{}", i % 30), amounts[(i % 4) as usize]);
        let time = format!("2026-01-15T11:{:02}:{:02}Z", i / 60, i % 60);
        lines.push_str(&format!(
            "{{\"transaction_id\":{},\"account_id\":\"{account}\",\"amount\":{amount},\"time\":\"{time}\"}}\n",
            1000 + i
        ));
        let broken: &[&str] = match amount {
            "150.00" => &[],
            "250.00" => &["medium"],
            _ => &["big", "medium"],
        };
        expected.push((account, 1000 + i, broken));
    }
    std::fs::write(&input, lines).unwrap();
    let output = run_ok(&fraud_spec(dir.path(), 3, "later", &input, &out), &data, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("restored from checkpoint"), "{stderr}");
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    let mut want = Vec::new();
    for (account, id, broken) in expected {
        for rule in broken {
            let n = counts.entry(account.clone()).or_default();
            *n += 1;
            let amount = if id % 4 == 2 { "350.00" } else { "5000.00" };
            let amount = if *rule == "medium" && id % 4 == 1 { "250.00" } else { amount };
            want.push(format!(
                "{{\"account_id\":\"{account}\",\"transaction_id\":{id},\"rule_id\":\"{rule}\",\"amount\":{amount},\"account_alerts\":{n}}}"
            ));
        }
    }
    want.sort();
    // The exactly-once sink appends to what run 1 committed.
    let written = std::fs::read_to_string(&out).unwrap();
    let mut got: Vec<String> =
        written.lines().skip(expected_first.len()).map(String::from).collect();
    got.sort();
    assert_eq!(got, want, "every subtask holds every rule");
}

#[test]
fn a_pipeline_without_keyed_stages_is_exactly_once_through_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |out: &Path| {
        let path = dir.path().join(format!("{}.yaml", out.file_stem().unwrap().to_str().unwrap()));
        std::fs::write(
            &path,
            format!(
                "name: copy\nbatch_size: 200\ncheckpoint: {{ interval: 100ms }}\n\
                 operators:\n\
                 \x20 orders: {{ source: {{ type: generator, count: 60000, keys: 50 }} }}\n\
                 \x20 out: {{ inputs: [orders], sink: {{ type: file, path: {out:?} }} }}\n"
            ),
        )
        .unwrap();
        path
    };
    let expected_out = dir.path().join("expected.jsonl");
    run_ok(&spec(&expected_out), &dir.path().join("expected-data"), &[]);
    let expected = sorted_lines(&expected_out);
    assert_eq!(expected.len(), 60_000);
    let out = dir.path().join("out.jsonl");
    run_with_kills(&spec(&out), &dir.path().join("data"), &out);
    assert!(sorted_lines(&out) == expected, "every order once");
}
