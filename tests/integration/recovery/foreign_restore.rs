//! Restoring from another pipeline's or another storage's snapshot: the
//! new run's checkpoints are its own (every file they reference is in its
//! own storage), so they still restore, exactly, once the other storage is
//! gone.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use super::checkpoints::{checkpoint_ids, checkpointed_spec, expected_run};
use crate::support::*;

/// Orders per run: enough for a slowed run to take many checkpoints.
const COUNT: u64 = 60_000;

/// Slows the sink so a run lasts seconds and is killed part-way.
const SLOW: [&str; 2] = ["--sink-delay-ms", "10"];

/// The completed checkpoints (with `_metadata`) under `root`, ascending.
fn completed(root: &Path) -> Vec<u64> {
    checkpoint_ids(root)
        .into_iter()
        .filter(|id| root.join(format!("chk-{id}/_metadata")).exists())
        .collect()
}

/// Wait until `child` completed at least `count` checkpoints under `root`
/// with ids above `after`, then kill it (`kill -9`).
fn kill_after_checkpoints(child: &mut Child, root: &Path, after: u64, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed(root).iter().filter(|&&id| id > after).count() < count {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {count} checkpoints completed in {}",
            root.display()
        );
        assert!(Instant::now() < deadline, "{count} checkpoints did not complete within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// Every shared file that a completed checkpoint under `root` references
/// is stored under `root/shared`.
fn assert_self_contained(root: &Path) {
    for id in completed(root) {
        let text = std::fs::read_to_string(root.join(format!("chk-{id}/_metadata"))).unwrap();
        let metadata: serde_json::Value = serde_json::from_str(&text).unwrap();
        let subtasks = metadata["state"]["subtasks"].as_array().expect("a RocksDB checkpoint");
        for file in subtasks.iter().flat_map(|files| files.as_array().unwrap()) {
            if let Some(shared) = file["shared"].as_str() {
                assert!(
                    root.join("shared").join(shared).exists(),
                    "checkpoint {id} references shared/{shared}, which is not in {}",
                    root.display()
                );
            }
        }
    }
}

/// A pipeline `name` like `checkpointed_spec`'s, writing `out`, its
/// checkpoints in the directory `storage` when given. Without a state
/// cache every write reaches RocksDB, so checkpoints hold SST files.
fn spec_with_storage(dir: &Path, name: &str, out: &Path, storage: Option<&Path>) -> PathBuf {
    let spec = checkpointed_spec(dir, name, COUNT, 2, out);
    let mut text = format!("state_cache_bytes: 0\n{}", std::fs::read_to_string(&spec).unwrap());
    if let Some(storage) = storage {
        let with = format!("retained: 2, storage: \"file://{}\"", storage.display());
        text = text.replace("retained: 2", &with);
    }
    std::fs::write(&spec, text).unwrap();
    spec
}

/// Pipeline `origin` runs part-way and is killed; the snapshot `take`
/// gives (its path) is restored by another pipeline run whose checkpoints
/// go to `successor_root`, which is killed after two checkpoints of its
/// own; the origin's data directory and the successor's local checkpoint
/// copies are deleted (as on another host); the successor starts again
/// from its own newest checkpoint and finishes with exactly the output of
/// a run without failures.
fn take_over(
    dir: &Path,
    successor: &Path,
    successor_data: &Path,
    successor_root: &Path,
    take: impl FnOnce(&Path, &Path, Child) -> String,
) {
    let expected = expected_run(dir, "origin", COUNT);
    let out = dir.join("out.jsonl");
    let origin = spec_with_storage(dir, "origin", &out, None);
    let origin_data = dir.join("origin-data");
    let child = start_weir(&origin, &origin_data, &SLOW, &[]);
    let location = take(&origin, &origin_data, child);
    let restored_id: u64 = location.rsplit('-').next().unwrap().parse().unwrap();

    // Its exactly-once output continues the origin's file: a run writing
    // elsewhere is refused, saying so.
    let elsewhere = dir.join("elsewhere.yaml");
    let text = std::fs::read_to_string(successor).unwrap().replace("out.jsonl", "elsewhere.jsonl");
    std::fs::write(&elsewhere, text).unwrap();
    let refused = weir(&[
        "run",
        elsewhere.to_str().unwrap(),
        "--data-dir",
        dir.join("refused-data").to_str().unwrap(),
        "--restore",
        &location,
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("copy that file here first"), "{stderr}");

    let restore = [SLOW[0], SLOW[1], "--restore", location.as_str()];
    let mut child = start_weir(successor, successor_data, &restore, &[]);
    kill_after_checkpoints(&mut child, successor_root, restored_id, 2);
    let visible = std::fs::read_to_string(&out).unwrap().lines().count();
    assert!(visible < COUNT as usize, "killed part-way: {visible} of {COUNT} records");
    assert_self_contained(successor_root);

    std::fs::remove_dir_all(&origin_data).unwrap();
    let pipelines = successor_data.join("pipelines");
    for entry in std::fs::read_dir(&pipelines).unwrap() {
        let local = entry.unwrap().path().join("local-checkpoints");
        if local.exists() {
            std::fs::remove_dir_all(local).unwrap();
        }
    }
    let output = run_ok(successor, successor_data, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("restored from checkpoint"), "{stderr}");
    assert_eq!(per_key(&out), expected, "every customer's records exactly once, in order");
}

#[test]
fn a_checkpoint_restored_into_another_pipeline_and_storage_leaves_its_checkpoints_restorable() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let store = dir.join("store-b");
    let successor = spec_with_storage(dir, "successor", &dir.join("out.jsonl"), Some(&store));
    let take_checkpoint = |_: &Path, data: &Path, mut child: Child| {
        let root = data.join("checkpoints/origin");
        kill_after_checkpoints(&mut child, &root, 0, 2);
        let newest = *completed(&root).last().unwrap();
        root.join(format!("chk-{newest}")).display().to_string()
    };
    take_over(
        dir,
        &successor,
        &dir.join("successor-data"),
        &store.join("successor"),
        take_checkpoint,
    );
}

#[test]
fn a_savepoint_restored_into_another_data_directory_leaves_its_checkpoints_restorable() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // The same pipeline, moved: its checkpoints go to the new data directory.
    let moved = spec_with_storage(dir, "origin", &dir.join("out.jsonl"), None);
    let data = dir.join("moved-data");
    let out = dir.join("out.jsonl");
    let take_savepoint = |spec: &Path, data: &Path, mut child: Child| {
        // Once some output is committed, so the savepoint's sink state
        // names the origin's file (on a loaded machine the first savepoint
        // could otherwise come before any output).
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::metadata(&out).map_or(0, |m| m.len()) == 0 {
            assert!(Instant::now() < deadline, "the origin committed no output within a minute");
            assert!(child.try_wait().unwrap().is_none(), "the origin ended before any output");
            std::thread::sleep(Duration::from_millis(20));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let asked = loop {
            let asked =
                weir(&["savepoint", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
            let not_yet = String::from_utf8_lossy(&asked.stderr).contains("not running here");
            if asked.status.success() || !not_yet || Instant::now() > deadline {
                break asked;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(asked.status.success(), "{}", String::from_utf8_lossy(&asked.stderr));
        assert!(child.try_wait().unwrap().is_none(), "the origin still runs");
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        String::from_utf8_lossy(&asked.stdout).trim().to_string()
    };
    take_over(dir, &moved, &data, &data.join("checkpoints/origin"), take_savepoint);
}
