//! The fraud-detector example: exact alerts at any parallelism.

use std::path::Path;

use crate::support::*;

fn example(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions/fraud-detector").join(file)
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.sort();
    lines
}

#[test]
fn alerts_match_the_expected_output_at_parallelism_one_and_three() {
    let expected = sorted_lines(&std::fs::read_to_string(example("expected-alerts.jsonl")).unwrap());
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
        let alerts = sorted_lines(&std::fs::read_to_string(dir.path().join("alerts.jsonl")).unwrap());
        assert_eq!(alerts, expected, "parallelism {parallelism}");
    }
}
