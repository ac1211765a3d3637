//! Crashes injected (`WEIR_FAULT`) at each step of the exactly-once file
//! sink's commit — after the pre-commit, after `_metadata` before the
//! append, after the append before any part is deleted, after a part is
//! deleted, after the commit — each followed by a restart: the output is
//! exactly a failure-free run's, no line lost or duplicated.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use super::checkpoints::{checkpointed_spec, expected_run};
use crate::support::*;

/// Orders per run: enough for a slowed run to take many checkpoints.
const COUNT: u64 = 60_000;

/// Each customer's records from a failure-free run (computed once).
fn expected() -> &'static BTreeMap<u64, Vec<String>> {
    static EXPECTED: OnceLock<BTreeMap<u64, Vec<String>>> = OnceLock::new();
    EXPECTED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        expected_run(dir.path(), "faults", COUNT)
    })
}

/// The files in the sink's pending directory beside `out`.
fn pending_parts(out: &Path) -> usize {
    let pending = out.with_file_name(".out.jsonl.pending");
    std::fs::read_dir(pending).map_or(0, |entries| entries.count())
}

/// Run with `fault` injected: the run dies there part-way with committed
/// output a prefix of the expected one (`parts_left`: whether pending parts
/// must remain at the crash); the restart restores from a checkpoint and
/// ends with exactly the expected output.
fn crash_and_restart(fault: &str, parts_left: bool) {
    let expected = expected();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let spec = checkpointed_spec(dir.path(), "faults", COUNT, 2, &out);
    let data = dir.path().join("data");
    let slow = ["--sink-delay-ms", "10"];
    let crashed =
        start_weir(&spec, &data, &slow, &[("WEIR_FAULT", fault)]).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&crashed.stderr);
    assert!(!crashed.status.success() && stderr.contains("fault injected"), "{fault}: {stderr}");
    let visible = per_key(&out);
    let committed: usize = visible.values().map(Vec::len).sum();
    assert!(
        0 < committed && committed < COUNT as usize,
        "{fault}: the crash landed mid-run ({committed} of {COUNT} records committed)"
    );
    for (customer, records) in &visible {
        assert!(
            expected[customer].starts_with(records),
            "{fault}: customer {customer}'s committed records are a prefix of the expected"
        );
    }
    if parts_left {
        assert!(pending_parts(&out) > 0, "{fault}: pending parts remain at the crash");
    }

    let restarted = run_ok(&spec, &data, &[]);
    let stderr = String::from_utf8_lossy(&restarted.stderr);
    assert!(stderr.contains("restored from checkpoint"), "{fault}: {stderr}");
    assert_eq!(&per_key(&out), expected, "{fault}: every record exactly once, in order");
}

#[test]
fn a_crash_after_the_pre_commit_loses_and_duplicates_nothing() {
    crash_and_restart("file-after-pre-commit:3", true);
}

#[test]
fn a_crash_after_metadata_before_the_commit_loses_and_duplicates_nothing() {
    crash_and_restart("file-before-commit:2", true);
}

#[test]
fn a_crash_after_the_append_before_deleting_parts_loses_and_duplicates_nothing() {
    crash_and_restart("file-after-append:2", true);
}

#[test]
fn a_crash_after_a_part_is_deleted_loses_and_duplicates_nothing() {
    crash_and_restart("file-after-delete:2", false);
}

#[test]
fn a_crash_after_the_commit_loses_and_duplicates_nothing() {
    crash_and_restart("file-after-commit:2", false);
}
