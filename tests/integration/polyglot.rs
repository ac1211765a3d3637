//! Functions written in Python and TypeScript run as their Rust twins do:
//! the same bytes out for the same input — the revenue example, generated
//! orders, windows with late orders — including through `kill -9` and
//! restore from checkpoints, where their state (JSON, as the SDKs write
//! it) is read back.

use std::path::{Path, PathBuf};

use crate::support::*;

/// The interpreted twins of the running revenue example.
const REVENUE_TWINS: [&str; 2] = ["revenue-py", "revenue-js"];

/// The interpreted twins of the windowed revenue example.
const WINDOWED_TWINS: [&str; 2] = ["windowed-revenue-py", "windowed-revenue-js"];

/// A running-revenue spec called `name` over `source`, run by `function`
/// at `parallelism`, writing `out`, with `extra` lines.
fn revenue_spec(
    dir: &Path,
    name: &str,
    function_name: &str,
    source: &str,
    out: &Path,
    extra: &str,
) -> PathBuf {
    let wasm = function(function_name);
    let spec = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: {name}\n{extra}source: {source}\nkey: {{ wasm: {wasm:?} }}\n\
             process: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\n"
        ),
    )
    .unwrap();
    spec
}

/// The output of `function` over `source` in a fresh run.
fn revenue_output(dir: &Path, function_name: &str, source: &str) -> String {
    let out = dir.join(format!("{function_name}.jsonl"));
    let spec = revenue_spec(dir, function_name, function_name, source, &out, "");
    let data = dir.join(format!("data-{function_name}"));
    share_component_cache(&data);
    run_ok(&spec, &data, &["--fresh"]);
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn python_and_typescript_revenue_match_rust_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let file =
        format!("{{ type: file, path: {:?}, timestamp_field: event_time }}", revenue_orders());
    let generated = "{ type: generator, count: 20000, keys: 300, seed: 5 }";
    for source in [file.as_str(), generated] {
        let rust = revenue_output(dir.path(), "revenue", source);
        assert!(rust.lines().count() >= 7, "{rust}");
        for twin in REVENUE_TWINS {
            let output = revenue_output(dir.path(), twin, source);
            assert!(output == rust, "{twin} differs from revenue over {source}:\n{output}");
        }
    }
}

/// The window results and late orders of the windowed revenue example
/// run by `function_name`.
fn windowed_output(function_name: &str) -> (String, String) {
    let example = |file: &str| example_file("windowed-revenue", file);
    let dir = tempfile::tempdir().unwrap();
    let wasm = function(function_name);
    let spec = dir.path().join("windows.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: windows\nbatch_size: 1\nwatermark: {{ max_out_of_orderness: 5s }}\n\
             source: {{ type: file, path: {:?}, timestamp_field: event_time }}\nkey: {{ wasm: {wasm:?} }}\n\
             window: {{ type: tumbling, size: 1m, late_output: late-orders }}\naggregate: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: file, path: out.jsonl }}\n\
             side_outputs: {{ late-orders: {{ type: file, path: late.jsonl }} }}\n",
            example("orders.jsonl")
        ),
    )
    .unwrap();
    share_component_cache(&dir.path().join("data"));
    run_ok(&spec, &dir.path().join("data"), &[]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    (read("out.jsonl"), read("late.jsonl"))
}

#[test]
fn python_and_typescript_window_aggregates_match_rust_byte_for_byte() {
    let (windows, late) = windowed_output("windowed-revenue");
    // The example's expected results (listed in window order there).
    let expected = |file: &str| sorted_lines(&example_file("windowed-revenue", file));
    let sorted = |text: &str| {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted(&windows), expected("expected-output.jsonl"));
    assert_eq!(sorted(&late), expected("expected-late.jsonl"));
    for twin in WINDOWED_TWINS {
        let (twin_windows, twin_late) = windowed_output(twin);
        assert!(twin_windows == windows, "{twin}'s windows:\n{twin_windows}");
        assert!(twin_late == late, "{twin}'s late orders:\n{twin_late}");
    }
}

#[test]
fn python_and_typescript_state_survives_kill_9_exactly_once() {
    let count = 30_000;
    let source = format!("{{ type: generator, count: {count}, keys: 400, seed: 17 }}");
    let settings =
        "parallelism: 2\nbatch_size: 200\ncheckpoint: { interval: 100ms, retained: 2 }\n";
    let dir = tempfile::tempdir().unwrap();
    let expected_out = dir.path().join("expected.jsonl");
    let spec = revenue_spec(dir.path(), "expected", "revenue", &source, &expected_out, settings);
    run_ok(&spec, &dir.path().join("data-expected"), &[]);
    let expected = per_key(&expected_out);
    assert_eq!(expected.values().map(Vec::len).sum::<usize>(), count);
    for twin in REVENUE_TWINS {
        let data = dir.path().join(format!("data-{twin}"));
        // Compiled once, so the kills land in runs that are processing,
        // not compiling.
        share_component_cache(&data);
        let warm = dir.path().join(format!("{twin}-warm.jsonl"));
        let file =
            format!("{{ type: file, path: {:?}, timestamp_field: event_time }}", revenue_orders());
        run_ok(&revenue_spec(dir.path(), "warm", twin, &file, &warm, ""), &data, &[]);

        let out = dir.path().join(format!("{twin}.jsonl"));
        let spec = revenue_spec(dir.path(), twin, twin, &source, &out, settings);
        let committed = run_with_kills(&spec, &data, &out);
        assert!(
            committed.iter().filter(|&&n| n > 0 && n < count).count() >= 3,
            "{twin}: the kills should land mid-run, after some output and before the end: {committed:?}"
        );
        let actual = per_key(&out);
        assert_eq!(actual.len(), expected.len(), "{twin}: customers");
        for (customer, records) in &expected {
            assert_eq!(
                actual.get(customer),
                Some(records),
                "{twin}: customer {customer}'s records"
            );
        }
    }
}

#[test]
fn a_python_key_function_feeds_a_typescript_process_function_and_rust_reads_along() {
    // One pipeline, three languages: Python keys, TypeScript processes; the
    // result is the Rust pipeline's.
    let dir = tempfile::tempdir().unwrap();
    let source = "{ type: generator, count: 5000, keys: 50, seed: 9 }";
    let rust = revenue_output(dir.path(), "revenue", source);
    let out = dir.path().join("mixed.jsonl");
    let (key, process) = (function("revenue-py"), function("revenue-js"));
    let spec = dir.path().join("mixed.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: mixed\nsource: {source}\nkey: {{ wasm: {key:?} }}\n\
             process: {{ wasm: {process:?} }}\nsink: {{ type: file, path: {out:?} }}\n"
        ),
    )
    .unwrap();
    share_component_cache(&dir.path().join("data-mixed"));
    run_ok(&spec, &dir.path().join("data-mixed"), &["--fresh"]);
    assert!(std::fs::read_to_string(&out).unwrap() == rust, "mixed pipeline differs from Rust");
}

#[test]
fn weir_inspect_names_the_language_of_interpreted_components() {
    for (twin, language) in [("revenue-py", "python"), ("revenue-js", "javascript")] {
        let output = weir(&["inspect", function(twin).to_str().unwrap()]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert!(text.contains(&format!("language: {language}")), "{twin}: {text}");
        assert!(text.contains("key-function") && text.contains("process-function"), "{text}");
    }
}
