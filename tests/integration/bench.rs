//! `weir bench`: the native twins compute exactly what the Wasm benchmark
//! functions compute (the two-stage workload's second stage feeds
//! `bench-sum` its own pairs), and the harness reports every case, the
//! graph workloads with their ratio to `sum`.

use crate::support::*;

use weir_bench::{Case, Implementation, Load, Workload};

#[test]
fn native_twins_produce_the_same_output_as_the_wasm_functions() {
    let dir = tempfile::tempdir().unwrap();
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    for workload in Workload::ALL {
        let mut outputs = Vec::new();
        for implementation in [Implementation::Wasm, Implementation::Native] {
            // The join's state scans cost more per event (see docs/benchmarks.md).
            let events = if workload == Workload::Join { 6_000 } else { 30_000 };
            let case = Case {
                workload,
                implementation,
                events,
                keys: 50,
                checkpoints: true,
                load: None,
                batch_linger: None,
            };
            let out = dir.path().join(format!("{}-{implementation:?}.bin", workload.name()));
            // One subtask, so the output order is deterministic; a file sink to compare it.
            let spec = case.spec(&functions).replace("parallelism: 2", "parallelism: 1").replace(
                "sink: { type: discard }",
                &format!("sink: {{ type: file, path: {out:?} }}"),
            );
            let spec_path = dir.path().join(format!("{}-{implementation:?}.yaml", workload.name()));
            std::fs::write(&spec_path, spec).unwrap();
            let data = dir.path().join(format!("data-{}-{implementation:?}", workload.name()));
            share_component_cache(&data);
            run_ok(&spec_path, &data, &[]);
            let mut output = std::fs::read(&out).unwrap();
            if workload == Workload::Join {
                // Two sources: the join's pairs arrive in either order.
                let mut lines: Vec<&[u8]> = output.split(|&b| b == b'\n').collect();
                lines.sort();
                output = lines.join(&b'\n');
            }
            outputs.push(output);
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
    let lines = bench_json(&[
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
        "--functions-dir",
        functions.to_str().unwrap(),
    ]);
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

#[test]
fn graph_workloads_count_every_source_event_and_compare_with_sum() {
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    let args = [
        "bench",
        "--events",
        "4001",
        "--keys",
        "50",
        "--workloads",
        "two-stage,join",
        "--checkpoints",
        "off",
        "--repeat",
        "1",
        "--functions-dir",
        functions.to_str().unwrap(),
    ];
    let lines = bench_json(&args);
    let runs: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["workload"].as_str().unwrap(), l["implementation"].as_str().unwrap()))
        .collect();
    assert_eq!(
        runs,
        [
            ("sum", "wasm"),
            ("sum", "native"),
            ("two-stage", "wasm"),
            ("two-stage", "native"),
            ("join", "wasm"),
            ("join", "native")
        ],
        "sum runs first, for the ratio"
    );
    for line in &lines {
        // The join's two sources each give half the events.
        assert_eq!(line["measurement"]["events"], 4001, "{line}");
        let ratio = line.get("ratio_to_sum").and_then(|r| r.as_f64());
        if line["workload"] == "sum" {
            assert_eq!(ratio, None, "{line}");
        } else {
            assert!(ratio > Some(0.0), "{line}");
        }
    }
    // The table: the ratios under it.
    let output = weir(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    let (_, under) = table.split_once("against sum").expect(&table);
    let rows: Vec<Vec<&str>> = under
        .lines()
        .filter(|l| l.starts_with("two-stage ") || l.starts_with("join "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    for row in rows {
        assert_eq!((row[1], row[2], row.len()), ("50", "off", 5), "{table}");
        assert!(row[3].parse::<f64>().unwrap() > 0.0, "{table}");
    }
}

#[test]
fn python_and_typescript_variants_are_compared_with_the_rust_sum() {
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    // The runs' compiled components in the tests' shared cache.
    let scratch = tempfile::tempdir().unwrap();
    share_component_cache(scratch.path());
    std::os::unix::fs::symlink(
        scratch.path().join("cache/components"),
        scratch.path().join("components"),
    )
    .unwrap();
    let output = weir(&[
        "bench",
        "--events",
        "20000",
        "--keys",
        "100",
        "--workload",
        "sum-py",
        "--workload",
        "sum-js",
        "--checkpoints",
        "off",
        "--repeat",
        "1",
        "--scratch",
        scratch.path().to_str().unwrap(),
        "--functions-dir",
        functions.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(table.contains("(sum-py and sum-js: 2000 events per run)"), "{table}");
    let (rows, against) = table.split_once("against sum's").expect("lines against sum");
    for workload in ["sum ", "sum-py ", "sum-js "] {
        assert!(rows.lines().any(|l| l.starts_with(workload)), "a {workload}row: {table}");
    }
    for workload in ["sum-py ", "sum-js "] {
        let line = against.lines().find(|l| l.starts_with(workload)).expect(workload);
        let ratio: f64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(ratio > 0.0 && ratio.is_finite(), "{line}");
    }
}

#[test]
fn the_latency_bench_runs_live_loads_below_the_maximum_and_reports_percentiles() {
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    let lines = bench_json(&[
        "bench",
        "--latency",
        "--latency-seconds",
        "1",
        "--events",
        "20000",
        "--keys",
        "100",
        "--workloads",
        "sum,window",
        "--checkpoints",
        "off",
        "--functions-dir",
        functions.to_str().unwrap(),
    ]);
    let loads: Vec<&str> = lines.iter().map(|l| l["load"].as_str().unwrap()).collect();
    let profile = ["max", "10%", "50%", "90%", "bursty 10%"];
    assert_eq!(loads, [profile, profile].concat(), "sum, then window");
    for pair in lines.chunks(5) {
        let max = pair[0]["events_per_second"].as_f64().unwrap();
        for live in &pair[1..] {
            let rate = live["rate"].as_f64().unwrap();
            assert!(rate > 0.0 && rate < max, "{live}");
            let latency = &live["measurement"]["latency"];
            let events = live["measurement"]["events"].as_u64().unwrap();
            assert_eq!(events, 2 * rate as u64, "a second of warm-up, one measured: {live}");
            // Every output after the warm-up is measured: one per order for
            // the sum, one per window and customer for the window.
            let count = latency["count"].as_u64().unwrap();
            let warm_up = latency["warm_up"].as_u64().unwrap();
            if live["workload"] == "sum" {
                assert!(warm_up > 0 && warm_up < events, "{live}");
                assert_eq!(count + warm_up, events, "{live}");
            } else {
                // The last windows may fire early, at the end of the input.
                let early = latency["early"].as_u64().unwrap();
                assert!(count + early > 0 && count + early + warm_up <= events, "{live}");
            }
            let stolen = live["measurement"]["stolen"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&stolen), "{live}");
            let at = |p: &str| latency[p].as_u64().unwrap();
            let order = [at("p50_us"), at("p90_us"), at("p99_us"), at("p999_us"), at("max_us")];
            assert!(order.windows(2).all(|w| w[0] <= w[1]), "{live}");
        }
    }
}

/// `weir bench ARGS --json`: its lines.
fn bench_json(args: &[&str]) -> Vec<serde_json::Value> {
    let output = weir(&[args, &["--json"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_low_rate_run_hands_each_event_on_within_the_linger_instead_of_filling_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let functions = function("bench-sum").parent().unwrap().to_path_buf();
    // 200 events at 100 a second in batches of 4096: a batch that waited
    // to fill would hold the first event until the input ends, 2 s later.
    let case = Case {
        workload: Workload::Sum,
        implementation: Implementation::Wasm,
        events: 200,
        keys: 10,
        checkpoints: false,
        load: Some(Load { rate: 100, burst_ms: None }),
        batch_linger: Some(std::time::Duration::from_millis(5)),
    };
    let spec = dir.path().join("low-rate.yaml");
    std::fs::write(&spec, case.spec(&functions)).unwrap();
    let data = dir.path().join("data");
    share_component_cache(&data);
    let output = weir(&[
        "run",
        spec.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--quiet",
        "--latency",
        "--report-json",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let latency = &report["latency"];
    assert_eq!(latency["count"], 200, "every output measured: {report}");
    let max_us = latency["max_us"].as_u64().unwrap();
    assert!(max_us < 1_000_000, "an event waited for its batch to fill: {report}");
}

#[test]
fn the_kafka_bench_measures_the_pipeline_and_the_raw_client_on_a_real_broker() {
    let kafka = crate::support::kafka::TestKafka::start();
    let functions = function("revenue").parent().unwrap().to_path_buf();
    let scratch = tempfile::tempdir().unwrap();
    let bootstrap = kafka.bootstrap();
    let output = weir(&[
        "bench",
        "cluster",
        "--kafka",
        &bootstrap,
        "--runs",
        "one-process-alo",
        "--events",
        "20000",
        "--state-keys",
        "0",
        "--latency-seconds",
        "1",
        "--functions-dir",
        functions.to_str().unwrap(),
        "--scratch",
        scratch.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let run = &report["runs"][0];
    assert_eq!((run["outputs"].as_u64(), run["duplicates"].as_u64()), (Some(20000), Some(0)));
    // The raw client's latency, at the rate the pipeline's was measured at.
    let raw = &report["ceiling"]["pass_through_latency"];
    assert!(raw["records"].as_u64().unwrap() > 0, "{raw}");
    assert_eq!(raw["rate"], run["latency"]["rate"]);
    // The machine's busy cores during each latency run.
    for latency in [raw, &run["latency"]] {
        assert!(latency["cores_busy"].as_f64().unwrap() > 0.0, "{latency}");
    }
    // The pipeline's own latency, as its log says (a 1 s run may end
    // before its first line with records).
    let in_weir = &run["latency"]["in_weir"];
    if !in_weir.is_null() {
        assert!(in_weir["p50_ms"].as_f64() <= in_weir["p99_ms"].as_f64(), "{in_weir}");
    }
}
