//! The customer-profile example: list and map state and a side output,
//! through the real host.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::*;

fn spec(dir: &Path, side_outputs: &str) -> std::path::PathBuf {
    let wasm = function("customer-profile");
    let path = dir.join("profile.yaml");
    let text = format!(
        "name: profile\nsource: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\n\
         process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: out.jsonl }}\n{side_outputs}",
        revenue_orders()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn last_profile_of(dir: &Path, customer: u64) -> serde_json::Value {
    records(&dir.join("out.jsonl")).into_iter().rfind(|r| r["customer_id"] == customer).unwrap()
}

#[test]
fn profiles_use_list_and_map_state_and_fill_the_side_output() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        dir.path(),
        "side_outputs:\n  repeat-customers: { type: file, path: repeats.jsonl }\n",
    );
    let run = run_ok(&spec, &dir.path().join("data"), &[]);
    assert_eq!(records(&dir.path().join("out.jsonl")).len(), 7);
    let c2 = last_profile_of(dir.path(), 2);
    assert_eq!(c2["orders"], 3);
    assert_eq!(c2["recent_orders"], serde_json::json!([111, 113, 151]));
    assert_eq!(c2["busiest_hour"], 10);
    // Every order is in the 10:00 hour, so each customer's second and later
    // orders are repeats.
    let repeats: BTreeSet<u64> = records(&dir.path().join("repeats.jsonl"))
        .iter()
        .map(|r| r["order_id"].as_u64().unwrap())
        .collect();
    assert_eq!(repeats, BTreeSet::from([113, 114, 150, 151]));
    let summary = String::from_utf8_lossy(&run.stderr);
    assert!(summary.contains("4 to side outputs (0 dropped)"), "{summary}");
}

#[test]
fn undeclared_side_outputs_are_counted_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_ok(&spec(dir.path(), ""), &dir.path().join("data"), &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("0 to side outputs (4 dropped)"), "{stderr}");
}

#[test]
fn list_and_map_state_are_kept_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), "");
    let data = dir.path().join("data");
    run_ok(&spec, &data, &[]);
    run_ok(&spec, &data, &[]);
    let c2 = last_profile_of(dir.path(), 2);
    assert_eq!(c2["orders"], 6, "the hour histogram (map state) kept the first run's orders");
    assert_eq!(
        c2["recent_orders"],
        serde_json::json!([111, 113, 151]),
        "the list keeps only the last three"
    );
    let c1 = last_profile_of(dir.path(), 1);
    assert_eq!(c1["recent_orders"], serde_json::json!([114, 110, 114]));
}
