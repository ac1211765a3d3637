//! Host-assigned windows with a Wasm aggregate: exact results, late events
//! and allowed lateness, at parallelism 1 and 3.

use std::path::Path;

use crate::support::*;

fn example(file: &str) -> std::path::PathBuf {
    example_file("windowed-revenue", file)
}

/// Run the windowed-revenue pipeline with `window` at `parallelism`.
fn run_windows(dir: &Path, parallelism: u16, window: &str) {
    let wasm = function("windowed-revenue");
    let spec = dir.join("windows.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: windows\nparallelism: {parallelism}\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 5s }}\n\
             source: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\n\
             window: {window}\naggregate: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: out.jsonl }}\n\
             side_outputs: {{ late-orders: {{ type: file, path: late.jsonl }} }}\n",
            example("orders.jsonl")
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.join("data"), &[]);
}

#[test]
fn tumbling_windows_fire_once_each_and_late_orders_go_only_aside() {
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        run_windows(
            dir.path(),
            parallelism,
            "{ type: tumbling, size: 1m, late_output: late-orders }",
        );
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
fn allowed_lateness_refires_with_the_late_order_and_sets_aside_only_what_is_later() {
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        run_windows(
            dir.path(),
            parallelism,
            "{ type: tumbling, size: 1m, allowed_lateness: 30s, late_output: late-orders }",
        );
        let mut expected = sorted_lines(&example("expected-output.jsonl"));
        expected.push(r#"{"customer_id":1,"window_start":1768471200000,"window_end":1768471260000,"revenue":25.00}"#.to_string());
        expected.sort();
        assert_eq!(
            sorted_lines(&dir.path().join("out.jsonl")),
            expected,
            "parallelism {parallelism}"
        );
        let late = sorted_lines(&dir.path().join("late.jsonl"));
        assert_eq!(late.len(), 1, "{late:?}");
        assert!(late[0].contains("\"order_id\":118"), "{late:?}");
    }
}

#[test]
fn sliding_windows_count_each_order_in_every_window_covering_it() {
    let dir = tempfile::tempdir().unwrap();
    run_windows(dir.path(), 2, "{ type: sliding, size: 2m, slide: 1m }");
    let records = records(&dir.path().join("out.jsonl"));
    let revenue_of = |customer: u64, start: i64| -> Vec<String> {
        records
            .iter()
            .filter(|r| r["customer_id"] == customer && r["window_start"] == start)
            .map(|r| r["revenue"].to_string())
            .collect()
    };
    let t = 1_768_471_200_000i64; // 10:00
                                  // Customer 3: 7.25 @10:01:10, 1.00 @10:01:27, 9.75 @10:02:20.
    assert_eq!(revenue_of(3, t), vec!["8.25"], "[10:00, 10:02)");
    assert_eq!(revenue_of(3, t + 60_000), vec!["18.0"], "[10:01, 10:03)");
    assert_eq!(revenue_of(3, t + 120_000), vec!["9.75"], "[10:02, 10:04)");
    // Order 116 (10:00:50) arrives at watermark 10:01:24.999: [10:00, 10:02)
    // is still open, so with 2-minute windows it is on time.
    assert_eq!(revenue_of(1, t - 60_000), vec!["20.0"], "[09:59, 10:01) had closed");
    assert_eq!(revenue_of(1, t), vec!["25.0"], "[10:00, 10:02) took the out-of-order 5.00");
}

#[test]
fn session_windows_merge_when_a_bridging_view_arrives_out_of_order() {
    let wasm = function("sessions");
    let example = |file: &str| example_file("sessions", file);
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("sessions.yaml");
        std::fs::write(
            &spec,
            format!(
                "name: sessions\nparallelism: {parallelism}\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 10s }}\n\
                 source: {{ type: file, path: {:?}, timestamp_field: time }}\nkey: {{ wasm: {wasm:?} }}\n\
                 window: {{ type: session, gap: 30s, late_output: late-views }}\naggregate: {{ wasm: {wasm:?} }}\n\
                 sink: {{ type: file, path: out.jsonl }}\nside_outputs: {{ late-views: {{ type: file, path: late.jsonl }} }}\n",
                example("views.jsonl")
            ),
        )
        .unwrap();
        run_ok(&spec, &dir.path().join("data"), &[]);
        assert_eq!(
            sorted_lines(&dir.path().join("out.jsonl")),
            sorted_lines(&example("expected-sessions.jsonl")),
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
fn a_window_process_function_sees_every_event_of_its_window() {
    let wasm = function("window-orders");
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("ranked.yaml");
        std::fs::write(
            &spec,
            format!(
                "name: ranked\nparallelism: {parallelism}\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 5s }}\n\
                 source: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\n\
                 window: {{ type: tumbling, size: 1m }}\nwindow_process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: out.jsonl }}\n",
                example("orders.jsonl")
            ),
        )
        .unwrap();
        let run = run_ok(&spec, &dir.path().join("data"), &[]);
        assert_eq!(
            sorted_lines(&dir.path().join("out.jsonl")),
            sorted_lines(&example_file("window-orders", "expected-output.jsonl")),
            "parallelism {parallelism}"
        );
        let summary = String::from_utf8_lossy(&run.stderr);
        assert!(
            summary.contains("2 late records dropped"),
            "orders 116 and 118 are late: {summary}"
        );
    }
}
