//! The fraud-detector example: exact alerts at any parallelism.

use crate::support::*;

fn example(file: &str) -> std::path::PathBuf {
    example_file("fraud-detector", file)
}

#[test]
fn alerts_match_the_expected_output_at_parallelism_one_and_three() {
    let expected = sorted_lines(&example("expected-alerts.jsonl"));
    assert_eq!(expected.len(), 3);
    let wasm = function("fraud-detector");
    for parallelism in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("fraud.yaml");
        std::fs::write(
            &spec,
            format!(
                "name: fraud\nparallelism: {parallelism}\nbatch_size: 3\nsource: {{ type: file, path: {:?}, timestamp_field: time }}\n\
                 key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: alerts.jsonl }}\n",
                example("transactions.jsonl")
            ),
        )
        .unwrap();
        run_ok(&spec, &dir.path().join("data"), &[]);
        let alerts = sorted_lines(&dir.path().join("alerts.jsonl"));
        assert_eq!(alerts, expected, "parallelism {parallelism}");
    }
}
