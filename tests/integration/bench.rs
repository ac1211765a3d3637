//! `weir bench`: the native twins compute exactly what the Wasm benchmark
//! functions compute, and the harness reports every case.

use crate::support::*;

use weir_host::bench::{Case, Implementation, Workload};

#[test]
fn native_twins_produce_the_same_output_as_the_wasm_functions() {
    let dir = tempfile::tempdir().unwrap();
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    for workload in Workload::ALL {
        let mut outputs = Vec::new();
        for implementation in [Implementation::Wasm, Implementation::Native] {
            let case =
                Case { workload, implementation, events: 30_000, keys: 50, checkpoints: true };
            let out = dir.path().join(format!("{}-{implementation:?}.bin", workload.name()));
            // One subtask, so the output order is deterministic; a file sink to compare it.
            let spec = case.spec(&functions).replace("parallelism: 2", "parallelism: 1").replace(
                "sink: { type: discard }",
                &format!("sink: {{ type: file, path: {out:?} }}"),
            );
            let spec_path = dir.path().join(format!("{}-{implementation:?}.yaml", workload.name()));
            std::fs::write(&spec_path, spec).unwrap();
            run_ok(
                &spec_path,
                &dir.path().join(format!("data-{}-{implementation:?}", workload.name())),
                &[],
            );
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert!(!outputs[0].is_empty(), "{} produced output", workload.name());
        assert!(
            outputs[0] == outputs[1],
            "{}: Wasm and native outputs differ ({} vs {} bytes)",
            workload.name(),
            outputs[0].len(),
            outputs[1].len()
        );
    }
}

#[test]
fn the_harness_reports_every_case() {
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    let output = weir(&[
        "bench",
        "--events",
        "20000",
        "--keys",
        "100",
        "--workload",
        "sum",
        "--workload",
        "filter",
        "--checkpoints",
        "both",
        "--repeat",
        "1",
        "--json",
        "--functions-dir",
        functions.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2 * 2 * 2, "workloads × checkpoint modes × implementations");
    for line in &lines {
        assert_eq!(line["measurement"]["events"], 20000, "{line}");
        assert!(line["measurement"]["cpu_seconds"].as_f64() > Some(0.0), "{line}");
        assert!(line["measurement"]["peak_rss_bytes"].as_u64() > Some(1 << 20), "{line}");
        if line["checkpoints"] == true {
            assert!(
                line["measurement"]["checkpoints"].as_u64() >= Some(1),
                "at least the final checkpoint: {line}"
            );
        }
    }
    // The table: a row per workload and mode, the checkpoint cost on the
    // row with checkpoints.
    let output = weir(&[
        "bench",
        "--events",
        "20000",
        "--keys",
        "100",
        "--workload",
        "sum",
        "--checkpoints",
        "both",
        "--repeat",
        "2",
        "--functions-dir",
        functions.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("sum "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(
        (rows[0][2], rows[0].len(), rows[1][2], rows[1].len()),
        ("off", 8, "1s", 9),
        "{table}"
    );
    assert!(rows[1][8].ends_with('%'), "{table}");
}
