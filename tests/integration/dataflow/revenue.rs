//! The revenue example end to end: totals, a second data set, persistence
//! of state across runs, and the generator source.

use std::collections::BTreeMap;

use crate::support::*;

fn totals(pairs: &[(u64, &str)]) -> BTreeMap<u64, String> {
    pairs.iter().map(|(c, t)| (*c, t.to_string())).collect()
}

#[test]
fn revenue_demo_prints_the_expected_totals() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let spec = revenue_spec(dir.path(), &revenue_orders(), &output, "");
    let run = run_ok(&spec, &dir.path().join("data"), &[]);
    assert_eq!(final_totals(&output), totals(&[(1, "50.00"), (2, "48.00"), (3, "17.00")]));
    let records = records(&output);
    assert_eq!(records.len(), 7, "one output per order");
    let order_ids_of = |customer: u64| -> Vec<u64> {
        records
            .iter()
            .filter(|r| r["customer_id"] == customer)
            .map(|r| r["order_id"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(order_ids_of(1), vec![110, 114], "each key's events keep their order");
    assert_eq!(order_ids_of(2), vec![111, 113, 151]);
    assert_eq!(order_ids_of(3), vec![112, 150]);
    let summary = String::from_utf8_lossy(&run.stderr);
    assert!(summary.contains("7 records in, 7 out"), "{summary}");
}

#[test]
fn the_shipped_pipeline_yaml_runs_to_the_same_totals() {
    let spec =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions/revenue/pipeline.yaml");
    // The shipped spec points at target/functions/ of the repository; skip
    // it when the functions were built somewhere else.
    let shipped = spec.parent().unwrap().join("../../target/functions/revenue.wasm");
    if std::fs::canonicalize(&shipped).ok() != std::fs::canonicalize(function("revenue")).ok() {
        eprintln!("skipped: functions were not built into target/functions/");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = run_ok(&spec, &dir.path().join("data"), &["--fresh"]);
    let output = dir.path().join("stdout.jsonl");
    std::fs::write(&output, &run.stdout).unwrap();
    assert_eq!(final_totals(&output), totals(&[(1, "50.00"), (2, "48.00"), (3, "17.00")]));
}

#[test]
fn another_data_set_gives_exact_totals() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    // 0.10 + 0.20 is where floating point drifts; a thousand 0.01s too.
    let mut lines = vec![
        r#"{"order_id":1,"customer_id":70,"amount":0.10,"event_time":"2026-02-01T00:00:00Z"}"#
            .to_string(),
        r#"{"order_id":2,"customer_id":70,"amount":0.20,"event_time":"2026-02-01T00:00:01Z"}"#
            .to_string(),
        r#"{"order_id":3,"customer_id":9,"amount":"1999.99","event_time":"2026-02-01T00:00:02Z"}"#
            .to_string(),
        r#"{"order_id":4,"customer_id":9,"amount":-0.99,"event_time":"2026-02-01T00:00:03Z"}"#
            .to_string(),
    ];
    for i in 0..1000 {
        lines.push(format!(r#"{{"order_id":{},"customer_id":123456,"amount":0.01,"event_time":"2026-02-01T00:01:00Z"}}"#, 100 + i));
    }
    std::fs::write(&input, lines.join("\n")).unwrap();
    let output = dir.path().join("out.jsonl");
    let spec = revenue_spec(dir.path(), &input, &output, "batch_size: 64\n");
    run_ok(&spec, &dir.path().join("data"), &[]);
    assert_eq!(final_totals(&output), totals(&[(9, "1999.00"), (70, "0.30"), (123456, "10.00")]));
}

#[test]
fn state_is_kept_across_runs_on_the_same_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = dir.path().join("out.jsonl");
    let spec = revenue_spec(dir.path(), &revenue_orders(), &output, "");
    run_ok(&spec, &data, &[]);
    run_ok(&spec, &data, &[]);
    assert_eq!(
        final_totals(&output),
        totals(&[(1, "100.00"), (2, "96.00"), (3, "34.00")]),
        "second run adds to the kept totals"
    );
    run_ok(&spec, &data, &["--fresh"]);
    assert_eq!(
        final_totals(&output),
        totals(&[(1, "50.00"), (2, "48.00"), (3, "17.00")]),
        "--fresh starts from empty state"
    );
}

#[test]
fn fresh_in_the_spec_discards_state() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = dir.path().join("out.jsonl");
    let spec = revenue_spec(dir.path(), &revenue_orders(), &output, "fresh: true\n");
    run_ok(&spec, &data, &[]);
    run_ok(&spec, &data, &[]);
    assert_eq!(final_totals(&output), totals(&[(1, "50.00"), (2, "48.00"), (3, "17.00")]));
}

#[test]
fn generator_source_totals_match_the_amounts() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = function("revenue");
    let output = dir.path().join("out.jsonl");
    let spec = dir.path().join("gen.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: gen\nsource: {{ type: generator, count: 20000, keys: 37, seed: 9 }}\nkey: {{ wasm: {wasm:?} }}\n\
             process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {output:?} }}\n"
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);
    let text = std::fs::read_to_string(&output).unwrap();
    let mut sums: BTreeMap<u64, i64> = BTreeMap::new();
    let mut count = 0;
    for line in text.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let customer = record["customer_id"].as_u64().unwrap();
        let amount = line.split("\"amount\":").nth(1).unwrap().split(',').next().unwrap();
        let total = line.split("\"total\":").nth(1).unwrap().trim_end_matches('}');
        let sum = sums.entry(customer).or_default();
        *sum += cents(amount);
        assert_eq!(
            *sum,
            cents(total),
            "running total of customer {customer} after order {}",
            record["order_id"]
        );
        count += 1;
    }
    assert_eq!(count, 20000);
    assert_eq!(sums.len(), 37);
}

#[test]
fn state_not_touched_for_longer_than_its_ttl_reads_as_absent() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = dir.path().join("out.jsonl");
    let short =
        revenue_spec(dir.path(), &revenue_orders(), &output, "state_ttl: { total: { ttl: 1s } }\n");
    run_ok(&short, &data, &[]);
    // Let every total outlive its one-second TTL (this waits; it asserts no timing).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    run_ok(&short, &data, &[]);
    assert_eq!(
        final_totals(&output),
        totals(&[(1, "50.00"), (2, "48.00"), (3, "17.00")]),
        "expired totals start again from zero"
    );

    let long =
        revenue_spec(dir.path(), &revenue_orders(), &output, "state_ttl: { total: { ttl: 1h } }\n");
    let data = dir.path().join("data-long");
    run_ok(&long, &data, &[]);
    run_ok(&long, &data, &[]);
    assert_eq!(
        final_totals(&output),
        totals(&[(1, "100.00"), (2, "96.00"), (3, "34.00")]),
        "live totals are kept"
    );
}
