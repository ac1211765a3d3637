//! The minute-revenue example: watermarks and event-time timers through
//! the real host, with out-of-order and late events.

use crate::support::*;

fn example(file: &str) -> std::path::PathBuf {
    example_file("minute-revenue", file)
}

#[test]
fn each_minute_fires_once_with_exact_totals_and_late_orders_go_aside() {
    let wasm = function("minute-revenue");
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("minutes.yaml");
        std::fs::write(
            &spec,
            format!(
                "name: minutes\nparallelism: {parallelism}\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 5s }}\n\
                 source: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
                 sink: {{ type: file, path: out.jsonl }}\nside_outputs: {{ late-orders: {{ type: file, path: late.jsonl }} }}\n",
                example("orders.jsonl")
            ),
        )
        .unwrap();
        run_ok(&spec, &dir.path().join("data"), &[]);
        assert_eq!(
            sorted_lines(&dir.path().join("out.jsonl")),
            sorted_lines(&example("expected-output.jsonl")),
            "parallelism {parallelism}"
        );
        assert_eq!(
            sorted_lines(&dir.path().join("late.jsonl")),
            sorted_lines(&example("expected-late.jsonl")),
            "parallelism {parallelism}"
        );
    }
}

#[test]
fn without_a_watermark_every_minute_fires_at_the_end_of_input() {
    let wasm = function("minute-revenue");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("minutes.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: minutes\nsource: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\n\
             process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: out.jsonl }}\n",
            revenue_orders()
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);
    let records = records(&dir.path().join("out.jsonl"));
    assert_eq!(records.len(), 7, "the seven orders fall in seven (customer, minute) pairs");
}

#[test]
fn a_finished_split_stops_holding_the_watermark_and_bad_timestamps_go_aside() {
    let wasm = function("minute-revenue");
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.jsonl");
    std::fs::write(
        &other,
        "{\"order_id\":900,\"customer_id\":9,\"amount\":1.00,\"event_time\":\"2026-01-15T10:00:02Z\"}\n{\"order_id\":901,\"customer_id\":9,\"amount\":2.00}\n",
    )
    .unwrap();
    let spec = dir.path().join("minutes.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: minutes\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 5s }}\n\
             source: {{ type: file, paths: [{:?}, {other:?}], timestamp_field: event_time, on_bad_timestamp: {{ side-output: no-time }} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: out.jsonl }}\n\
             side_outputs: {{ late-orders: {{ type: file, path: late.jsonl }}, no-time: {{ type: file, path: no-time.jsonl }} }}\n",
            example("orders.jsonl")
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);
    let mut expected = sorted_lines(&example("expected-output.jsonl"));
    expected.push(r#"{"customer_id":9,"minute_start":1768471200000,"revenue":1.00}"#.to_string());
    expected.sort();
    assert_eq!(sorted_lines(&dir.path().join("out.jsonl")), expected);
    // The second file finishes early; were it still counted, its old
    // timestamp would hold the watermark back and nothing would be late.
    assert_eq!(
        sorted_lines(&dir.path().join("late.jsonl")),
        sorted_lines(&example("expected-late.jsonl"))
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("no-time.jsonl")).unwrap(),
        "{\"order_id\":901,\"customer_id\":9,\"amount\":2.00}\n"
    );
}

#[test]
fn thousands_of_keys_firing_at_once_fire_in_chunks_with_their_state() {
    // 3000 customers' minutes all fire at the end of input: more keys than
    // one timer call takes, so the host fires them in consecutive calls,
    // each reading the keys' map state.
    let dir = tempfile::tempdir().unwrap();
    let source = "source: { type: generator, count: 6000, keys: 3000, seed: 3, interval_ms: 1 }";
    let spec = |name: &str, wasm: &std::path::Path, sink: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        // A timer call fires 1024 keys, each reading its map state through
        // the debug build's host: on two cores shared with the cluster
        // tests' workers it once used more than the default 100 ms of CPU.
        // What is tested is the chunking, not the limit.
        std::fs::write(&path, format!("name: {name}\n{source}\nlimits: {{ call_timeout: 2s }}\nkey: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {sink} }}\n")).unwrap();
        path
    };
    run_ok(
        &spec("minutes", &function("minute-revenue"), "minutes.jsonl"),
        &dir.path().join("data"),
        &[],
    );
    run_ok(&spec("totals", &function("revenue"), "totals.jsonl"), &dir.path().join("data"), &[]);
    let mut per_customer: std::collections::BTreeMap<u64, i64> = Default::default();
    for record in records(&dir.path().join("minutes.jsonl")) {
        *per_customer.entry(record["customer_id"].as_u64().unwrap()).or_default() +=
            cents(&record["revenue"].to_string());
    }
    let totals: std::collections::BTreeMap<u64, i64> =
        final_totals(&dir.path().join("totals.jsonl"))
            .into_iter()
            .map(|(customer, total)| (customer, cents(&total)))
            .collect();
    assert!(per_customer.len() > 1024, "{} customers", per_customer.len());
    assert_eq!(per_customer, totals, "every customer's minutes add up to their total");
}
