//! `s3://` checkpoint storage against a real S3-compatible server (moto,
//! see [`TestS3`]): checkpoints are written there, retention deletes the
//! old ones and the files only they referenced, and a run killed with
//! `kill -9` restores from its S3 checkpoint with exact output.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::checkpoints::{checkpointed_spec, expected_run};
use crate::support::s3::TestS3;
use crate::support::*;

/// Orders per run.
const COUNT: u64 = 40_000;

/// A checkpointed revenue pipeline `name` writing `out`, its checkpoints
/// under `s3://<bucket>/weir` (two retained); `extra` goes first.
fn s3_spec(dir: &Path, name: &str, out: &Path, bucket: &str, extra: &str) -> PathBuf {
    let spec = checkpointed_spec(dir, name, COUNT, 2, out);
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("retained: 2", &format!("retained: 2, storage: \"s3://{bucket}/weir\""));
    std::fs::write(&spec, format!("{extra}{text}")).unwrap();
    spec
}

/// `weir run` with the server's `AWS_*` environment, to its end.
fn run_with(s3: &TestS3, spec: &Path, data: &Path, extra: &[&str]) -> Output {
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start_weir(spec, data, extra, &env).wait_with_output().unwrap()
}

/// The ids of the checkpoints with `_metadata` among `keys`, under `root`.
fn completed(keys: &[String], root: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = keys
        .iter()
        .filter_map(|key| key.strip_prefix(root)?.strip_prefix("chk-")?.strip_suffix("/_metadata"))
        .filter_map(|id| id.parse().ok())
        .collect();
    ids.sort();
    ids
}

#[test]
fn checkpoints_go_to_s3_and_retention_deletes_the_old_ones() {
    let s3 = TestS3::start();
    let bucket = s3.create_bucket("weir-retention");
    let dir = tempfile::tempdir().unwrap();
    let expected = expected_run(dir.path(), "s3-retention", COUNT);
    let out = dir.path().join("out.jsonl");
    let spec = s3_spec(dir.path(), "s3-retention", &out, &bucket, "");
    let data = dir.path().join("data");
    let output = run_with(&s3, &spec, &data, &["--sink-delay-ms", "4"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(per_key(&out), expected, "every customer's records exactly once, in order");
    assert!(!data.join("checkpoints").exists(), "nothing stored in the local default");

    let root = "weir/s3-retention/";
    let keys = s3.keys(&bucket, root);
    let retained = completed(&keys, root);
    assert_eq!(retained.len(), 2, "the two newest are retained: {keys:#?}");
    assert!(retained[0] > 2, "older checkpoints were taken, and deleted: {retained:?}");
    let chk_dirs: BTreeSet<&str> = keys
        .iter()
        .filter_map(|key| key.strip_prefix(root)?.split('/').next())
        .filter(|dir| dir.starts_with("chk-"))
        .collect();
    let expected_dirs: BTreeSet<String> = retained.iter().map(|id| format!("chk-{id}")).collect();
    assert_eq!(
        chk_dirs,
        expected_dirs.iter().map(String::as_str).collect(),
        "no file of a deleted checkpoint is left"
    );
    let mut referenced = BTreeSet::new();
    for id in &retained {
        let metadata: serde_json::Value =
            serde_json::from_slice(&s3.get(&bucket, &format!("{root}chk-{id}/_metadata"))).unwrap();
        for subtask in metadata["state"]["subtasks"].as_array().unwrap() {
            for file in subtask.as_array().unwrap() {
                if let Some(shared) = file["shared"].as_str() {
                    referenced.insert(format!("{root}shared/{shared}"));
                }
            }
        }
    }
    let shared: BTreeSet<String> =
        keys.iter().filter(|key| key.starts_with(&format!("{root}shared/"))).cloned().collect();
    assert!(!referenced.is_empty(), "the checkpoints reference shared files");
    assert_eq!(shared, referenced, "exactly the shared files a retained checkpoint references");

    let listed = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["checkpoints", "list", spec.to_str().unwrap(), "--data-dir"])
        .arg(&data)
        .envs(s3.env())
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listing.contains(&format!("s3://{bucket}/weir/s3-retention/chk-{}", retained[1])),
        "{listing}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
}

#[test]
fn a_kill_9_mid_run_restores_from_the_s3_checkpoint_exactly() {
    let s3 = TestS3::start();
    let bucket = s3.create_bucket("weir-restore");
    let dir = tempfile::tempdir().unwrap();
    let expected = expected_run(dir.path(), "s3-restore", COUNT);
    let out = dir.path().join("out.jsonl");
    // Without a state cache every write reaches RocksDB: the checkpoints
    // hold SST files as well as the small files of each checkpoint.
    let spec = s3_spec(dir.path(), "s3-restore", &out, &bucket, "state_cache_bytes: 0\n");
    let data = dir.path().join("data");
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = start_weir(&spec, &data, &["--sink-delay-ms", "10"], &env);
    let root = "weir/s3-restore/";
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed(&s3.keys(&bucket, root), root).len() < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before two checkpoints");
        assert!(Instant::now() < deadline, "two checkpoints did not complete within a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let visible = std::fs::read_to_string(&out).unwrap();
    assert!(visible.lines().count() < COUNT as usize, "killed mid-run");
    assert!(visible.is_empty() || visible.ends_with('\n'), "committed output ends mid-line");
    // No local copy to restore from: every file comes from S3.
    std::fs::remove_dir_all(data.join("pipelines/s3-restore/local-checkpoints")).unwrap();

    let output = run_with(&s3, &spec, &data, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("restored from checkpoint"), "{stderr}");
    assert_eq!(per_key(&out), expected, "every customer's records exactly once, in order");
}

#[test]
fn storage_that_cannot_be_read_is_a_502_naming_it_not_a_server_error() {
    let s3 = TestS3::start();
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("s3://weir-missing-{}/ckpt", std::process::id());
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server =
        Server::start_with_env(&dir.path().join("data"), &["--allow-storage", &missing], &env);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let spec = format!("name: lost\nsource: {{ type: generator, count: 100000000, interval_ms: 1 }}\nkey: {{ function: revenue }}\nprocess: {{ function: revenue }}\nsink: {{ type: discard }}\ncheckpoint: {{ interval: 1s, storage: {missing:?} }}\n");
    let (status, body) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(status, 201, "{body}");
    let (status, body) = server.call("GET", "/v1/pipelines/lost/checkpoints", None, b"");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("storage_unavailable")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("checkpoint storage"), "{message}");
}
