//! Checkpoints, recovery and savepoints on the real binary: `kill -9` at
//! random instants loses and duplicates nothing; recovery falls back past a
//! checkpoint without metadata; a savepoint taken at parallelism 2
//! restores at parallelism 3 with every key's state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

/// A revenue pipeline over `count` generated orders, checkpointing every
/// 100 ms, writing `out` exactly-once.
pub(crate) fn checkpointed_spec(
    dir: &Path,
    name: &str,
    count: u64,
    parallelism: u16,
    out: &Path,
) -> PathBuf {
    let wasm = function("revenue");
    let spec = dir.join(format!("{name}-p{parallelism}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: {name}\nparallelism: {parallelism}\nbatch_size: 200\n\
             source: {{ type: generator, count: {count}, keys: 500, seed: 11 }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\n\
             checkpoint: {{ interval: 100ms, retained: 2 }}\n"
        ),
    )
    .unwrap();
    spec
}

/// The ids of the checkpoint directories (`chk-<id>`) under `root`,
/// ascending (none if it does not exist yet).
pub(crate) fn checkpoint_ids(root: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .collect();
    ids.sort();
    ids
}

/// Each customer's records from a failure-free run of `count` orders.
pub(crate) fn expected_run(dir: &Path, name: &str, count: u64) -> BTreeMap<u64, Vec<String>> {
    let expected_out = dir.join(format!("{name}-expected.jsonl"));
    run_ok(
        &checkpointed_spec(dir, name, count, 2, &expected_out),
        &dir.join(format!("data-{name}-expected")),
        &[],
    );
    per_key(&expected_out)
}

#[test]
fn kill_9_at_random_instants_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let count = 60_000;
    let expected = expected_run(dir.path(), "crash", count);
    assert_eq!(expected.values().map(Vec::len).sum::<usize>(), count as usize);

    let out = dir.path().join("out.jsonl");
    run_with_kills(
        &checkpointed_spec(dir.path(), "crash", count, 2, &out),
        &dir.path().join("data"),
        &out,
    );
    let actual = per_key(&out);
    assert_eq!(actual.len(), expected.len(), "customers");
    for (customer, records) in &expected {
        assert_eq!(actual.get(customer), Some(records), "customer {customer}'s records, in order");
    }
}

#[test]
fn windows_and_watermarks_recover_exactly_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = function("windowed-revenue");
    let spec = |name: &str, out: &Path| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nparallelism: 2\nbatch_size: 100\nwatermark: {{ max_out_of_orderness: 5s }}\n\
                 source: {{ type: generator, count: 40000, keys: 50, seed: 3, interval_ms: 250 }}\n\
                 key: {{ wasm: {wasm:?} }}\nwindow: {{ type: tumbling, size: 1m }}\naggregate: {{ wasm: {wasm:?} }}\n\
                 sink: {{ type: file, path: {out:?} }}\ncheckpoint: {{ interval: 100ms }}\n"
            ),
        )
        .unwrap();
        path
    };
    let expected_out = dir.path().join("expected.jsonl");
    run_ok(&spec("windows-expected", &expected_out), &dir.path().join("data-expected"), &[]);
    let expected = sorted_lines(&expected_out);
    assert!(expected.len() > 1_000, "{} window results", expected.len());

    let out = dir.path().join("out.jsonl");
    run_with_kills(&spec("windows", &out), &dir.path().join("data"), &out);
    assert_eq!(sorted_lines(&out), expected, "every window result exactly once");
}

#[test]
fn a_kill_after_changelog_checkpoints_restores_by_replaying_them() {
    let dir = tempfile::tempdir().unwrap();
    let count = 60_000;
    let expected = expected_run(dir.path(), "changelog", count);

    // Every checkpoint of a run is a changelog on the state it started from.
    let out = dir.path().join("out.jsonl");
    let spec = checkpointed_spec(dir.path(), "changelog", count, 2, &out);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("retained: 2", "retained: 2, materialize_every: 1000");
    std::fs::write(&spec, text).unwrap();
    let data = dir.path().join("data");
    let root = data.join("checkpoints/changelog");
    let mut child = start_weir(&spec, &data, &["--sink-delay-ms", "4"], &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let newest_with_changelogs = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before three checkpoints completed"
        );
        assert!(Instant::now() < deadline, "no changelog checkpoint completed within a minute");
        let newest = checkpoint_ids(&root)
            .into_iter()
            .filter(|id| root.join(format!("chk-{id}/_metadata")).exists())
            .max();
        if let Some(id) = newest.filter(|&id| id >= 3) {
            break id;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let metadata =
        std::fs::read_to_string(root.join(format!("chk-{newest_with_changelogs}/_metadata")))
            .unwrap();
    assert!(
        metadata.contains(".wcl"),
        "checkpoint {newest_with_changelogs} holds changelogs: {metadata}"
    );

    let output = run_ok(&spec, &data, &[]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("restored from checkpoint"),
        "the second run restored"
    );
    assert_eq!(per_key(&out), expected, "every customer's records exactly once, in order");
}

#[test]
fn recovery_falls_back_past_a_checkpoint_without_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let spec = checkpointed_spec(dir.path(), "fallback", 20_000, 2, &out);
    let data = dir.path().join("data");
    run_ok(&spec, &data, &["--sink-delay-ms", "2"]);
    let expected = per_key(&out);
    let root = data.join("checkpoints/fallback");
    let ids = checkpoint_ids(&root);
    assert!(ids.len() >= 2, "two checkpoints retained: {ids:?}");
    let (older, newest) = (ids[ids.len() - 2], ids[ids.len() - 1]);
    std::fs::remove_file(root.join(format!("chk-{newest}/_metadata"))).unwrap();

    let output = run_ok(&spec, &data, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("restored from checkpoint {older}")), "{stderr}");
    assert_eq!(
        per_key(&out),
        expected,
        "the output is rolled back to checkpoint {older} and replayed exactly once"
    );

    let listed = weir(&[
        "checkpoints",
        "list",
        spec.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listing.contains("checkpoint") && listing.contains("chk-"), "{listing}");
}

#[test]
fn a_savepoint_at_parallelism_2_restores_at_parallelism_3_with_every_keys_state() {
    let dir = tempfile::tempdir().unwrap();
    let count = 40_000;
    let expected = expected_run(dir.path(), "rescale", count);

    let out = dir.path().join("out.jsonl");
    let data = dir.path().join("data");
    let spec2 = checkpointed_spec(dir.path(), "rescale", count, 2, &out);
    let running = start_weir(&spec2, &data, &["--sink-delay-ms", "5"], &[]);
    // Ask once the run is up: it takes requests after loading its
    // functions, which a loaded machine can make take over a second.
    std::thread::sleep(Duration::from_millis(700));
    let deadline = Instant::now() + Duration::from_secs(30);
    let savepoint = loop {
        let asked =
            weir(&["savepoint", spec2.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
        let not_yet = String::from_utf8_lossy(&asked.stderr).contains("not running here");
        if asked.status.success() || !not_yet || Instant::now() > deadline {
            break asked;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(savepoint.status.success(), "{}", String::from_utf8_lossy(&savepoint.stderr));
    let first = String::from_utf8_lossy(&savepoint.stdout).trim().to_string();
    assert!(Path::new(&first).join("_metadata").exists(), "savepoint at {first}");
    let stop = weir(&[
        "stop",
        spec2.to_str().unwrap(),
        "--savepoint",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let location = String::from_utf8_lossy(&stop.stdout).trim().to_string();
    let stopped = running.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(stopped.status.success() && stderr.contains("stopped on request"), "{stderr}");
    let partial: usize = per_key(&out).values().map(Vec::len).sum();
    assert!(partial > 0 && partial < count as usize, "stopped part-way: {partial} of {count}");

    let spec3 = checkpointed_spec(dir.path(), "rescale", count, 3, &out);
    let output = run_ok(&spec3, &data, &["--restore", &location]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("restored from savepoint"), "{stderr}");
    assert_eq!(per_key(&out), expected, "running totals continue exactly at parallelism 3");
    let missing = weir(&["stop", spec3.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    assert!(
        !missing.status.success()
            && String::from_utf8_lossy(&missing.stderr).contains("not running")
    );
}
