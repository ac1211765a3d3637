//! Bad input gets a one-line error and a non-zero exit, never a panic.

use std::path::Path;

use crate::support::*;

fn spec_with(dir: &Path, key_wasm: &Path, process_wasm: &Path) -> std::path::PathBuf {
    let spec = dir.join("pipeline.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: bad\nsource: {{ type: file, path: {:?} }}\nkey: {{ wasm: {key_wasm:?} }}\nprocess: {{ wasm: {process_wasm:?} }}\nsink: {{ type: stdout }}\n",
            revenue_orders()
        ),
    )
    .unwrap();
    spec
}

/// Run the spec and return its stderr, asserting a clean one-line failure.
fn fails(spec: &Path, data: &Path) -> String {
    let output = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(1), "expected exit 1, got {:?}: {stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one-line error expected: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

#[test]
fn malformed_wasm_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"this is not wasm").unwrap();
    let err =
        fails(&spec_with(dir.path(), &garbage, &function("revenue")), &dir.path().join("data"));
    assert!(err.contains("garbage.wasm") && err.contains("not a WebAssembly file"), "{err}");

    let truncated = dir.path().join("truncated.wasm");
    let bytes = std::fs::read(function("revenue")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err =
        fails(&spec_with(dir.path(), &function("revenue"), &truncated), &dir.path().join("data"));
    assert!(err.contains("truncated.wasm") && err.contains("invalid component"), "{err}");
}

#[test]
fn a_core_module_without_a_component_type_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("plain.wasm");
    std::fs::write(&module, wat::parse_str("(module (func (export \"f\")))").unwrap()).unwrap();
    let err =
        fails(&spec_with(dir.path(), &module, &function("revenue")), &dir.path().join("data"));
    assert!(err.contains("plain.wasm") && err.contains("no component type"), "{err}");
}

#[test]
fn a_component_exporting_the_wrong_world_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.wasm");
    let component = r#"(component
        (core module $m (func (export "f") (result i32) i32.const 7))
        (core instance $i (instantiate $m))
        (func $f (result u32) (canon lift (core func $i "f")))
        (instance $e (export "answer" (func $f)))
        (export "example:other/thing@1.0.0" (instance $e)))"#;
    std::fs::write(&other, wat::parse_str(component).unwrap()).unwrap();
    let err = fails(&spec_with(dir.path(), &function("revenue"), &other), &dir.path().join("data"));
    assert!(err.contains("other.wasm"), "{err}");
    assert!(
        err.contains("weir:function/process-function")
            && err.contains("weir:function/process-fn@0.2.0"),
        "{err}"
    );
    assert!(err.contains("example:other/thing@1.0.0"), "names what it does export: {err}");
}

#[test]
fn a_component_importing_unknown_interfaces_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let needy = dir.path().join("needy.wasm");
    let component = r#"(component
        (import "example:net/socket@1.0.0" (instance (export "connect" (func))))
    )"#;
    std::fs::write(&needy, wat::parse_str(component).unwrap()).unwrap();
    let err = fails(&spec_with(dir.path(), &needy, &function("revenue")), &dir.path().join("data"));
    assert!(err.contains("needy.wasm") && err.contains("example:net/socket@1.0.0"), "{err}");
}

#[test]
fn a_broken_spec_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("pipeline.yaml");
    std::fs::write(&spec, "name: x\nsource: { type: file }\nkey: { wasm: a }\nprocess: { wasm: a }\nsink: { type: stdout }\n").unwrap();
    let err = fails(&spec, &dir.path().join("data"));
    assert!(err.contains("source") && err.contains("path"), "{err}");
}

#[test]
fn a_malformed_input_line_is_reported_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    std::fs::write(&input, "{\"order_id\":1,\"customer_id\":1,\"amount\":1,\"event_time\":\"2026-01-15T10:00:05Z\"}\n{oops\n").unwrap();
    let output = dir.path().join("out.jsonl");
    let err = fails(&revenue_spec(dir.path(), &input, &output, ""), &dir.path().join("data"));
    assert!(err.contains("orders.jsonl:2"), "{err}");
}

#[test]
fn a_function_error_fails_the_run_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    std::fs::write(&input, "{\"order_id\":1,\"customer_id\":1,\"amount\":\"1.234\",\"event_time\":\"2026-01-15T10:00:05Z\"}\n").unwrap();
    let output = dir.path().join("out.jsonl");
    let err = fails(&revenue_spec(dir.path(), &input, &output, ""), &dir.path().join("data"));
    assert!(
        err.contains("function `revenue.wasm (process[0])` failed while processing key \"1\"")
            && err.contains("1.234"),
        "{err}"
    );
}

#[test]
fn a_function_error_early_in_a_long_input_is_the_error_reported() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("orders.jsonl");
    let mut lines = vec![
        r#"{"order_id":1,"customer_id":1,"amount":"oops","event_time":"2026-01-15T10:00:05Z"}"#
            .to_string(),
    ];
    lines.extend((2..20_000).map(|i| {
        format!(
            r#"{{"order_id":{i},"customer_id":{},"amount":1,"event_time":"2026-01-15T10:00:05Z"}}"#,
            i % 7
        )
    }));
    std::fs::write(&input, lines.join("\n")).unwrap();
    let output = dir.path().join("out.jsonl");
    let err = fails(
        &revenue_spec(dir.path(), &input, &output, "batch_size: 10\n"),
        &dir.path().join("data"),
    );
    assert!(
        err.contains("failed") && err.contains("oops"),
        "the function's own error, not a closed channel: {err}"
    );
}
