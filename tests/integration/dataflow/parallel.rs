//! Parallel keyed execution: the same results at any parallelism, state
//! that follows its keys when the parallelism changes, and backpressure.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;

/// A revenue pipeline over generated orders at `parallelism`.
fn generated_spec(
    dir: &Path,
    name: &str,
    count: u64,
    parallelism: u16,
    out: &str,
) -> std::path::PathBuf {
    let wasm = function("revenue");
    let spec = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: {name}\nparallelism: {parallelism}\nbatch_size: 500\nsource: {{ type: generator, count: {count}, keys: 300, seed: 5 }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out} }}\n"
        ),
    )
    .unwrap();
    spec
}

/// Each customer's output records, in output order.
fn per_key(output: &Path) -> BTreeMap<u64, Vec<String>> {
    let mut keys: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        keys.entry(record["customer_id"].as_u64().unwrap()).or_default().push(line.to_string());
    }
    keys
}

#[test]
fn parallelism_four_gives_the_same_results_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let one = run_ok(&generated_spec(dir.path(), "p-one", 20_000, 1, "one.jsonl"), &data, &[]);
    let four = run_ok(&generated_spec(dir.path(), "p-four", 20_000, 4, "four.jsonl"), &data, &[]);
    let (one_keys, four_keys) =
        (per_key(&dir.path().join("one.jsonl")), per_key(&dir.path().join("four.jsonl")));
    assert_eq!(one_keys.len(), 300);
    assert_eq!(one_keys, four_keys, "same records, in the same order per key");
    let summary = String::from_utf8_lossy(&four.stderr);
    assert!(summary.contains("process[3]"), "four subtasks ran: {summary}");
    assert!(String::from_utf8_lossy(&one.stderr).contains("20000 records in, 20000 out"));
}

#[test]
fn state_follows_its_keys_when_parallelism_changes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    run_ok(&generated_spec(dir.path(), "rescaled", 5_000, 1, "first.jsonl"), &data, &[]);
    // Same pipeline name, so the same state, now split over three subtasks.
    run_ok(&generated_spec(dir.path(), "rescaled", 5_000, 3, "second.jsonl"), &data, &[]);
    let first = per_key(&dir.path().join("first.jsonl"));
    let second = per_key(&dir.path().join("second.jsonl"));
    let total = |line: &str| cents(line.split("\"total\":").nth(1).unwrap().trim_end_matches('}'));
    for (customer, records) in &first {
        let after_first = total(records.last().unwrap());
        let after_second = total(second[customer].last().unwrap());
        assert_eq!(
            after_second,
            2 * after_first,
            "customer {customer}'s total carried over the rescale"
        );
    }
}

#[test]
fn a_slow_sink_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = generated_spec(dir.path(), "slow", 6_000, 2, "slow.jsonl");
    let run = run_ok(&spec, &dir.path().join("data"), &["--sink-delay-ms", "20"]);
    let lines = std::fs::read_to_string(dir.path().join("slow.jsonl")).unwrap().lines().count();
    assert_eq!(lines, 6_000);
    assert!(String::from_utf8_lossy(&run.stderr).contains("6000 records in, 6000 out"));
}

/// Peak RSS in MiB from a run's summary.
fn peak_rss_mib(stderr: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.contains("peak RSS"))
        .unwrap_or_else(|| panic!("no peak RSS in {text}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn memory_does_not_grow_with_the_number_of_events() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = function("revenue");
    let spec = |name: &str, count: u64| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nparallelism: 2\nstate_cache_bytes: 8000000\nsource: {{ type: generator, count: {count}, keys: 100000, seed: 3 }}\n\
                 key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: discard }}\n"
            ),
        )
        .unwrap();
        path
    };
    let small = run_ok(&spec("small", 100_000), &dir.path().join("data"), &[]);
    let large = run_ok(&spec("large", 600_000), &dir.path().join("data"), &[]);
    let (small, large) = (peak_rss_mib(&small.stderr), peak_rss_mib(&large.stderr));
    assert!(large < small * 1.5 + 16.0, "6x the events took {large:.1} MiB against {small:.1} MiB");
}
