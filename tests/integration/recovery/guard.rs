//! One process per pipeline, and checkpoints that are never taken for
//! incomplete when they cannot be read: a second `weir run` beside a
//! running one (or beside `weir serve` running the pipeline) is refused
//! before it touches anything, naming the holder's pid, and the first
//! finishes with exact output; `weir serve` neither runs nor deletes a
//! pipeline a `weir run` runs, and a second `weir serve` of the data
//! directory is refused; a corrupt newest `_metadata` stops start-up
//! naming it, and keeps the shared files it references.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

/// A revenue pipeline over `count` generated orders, checkpointing every
/// 100 ms (two retained), writing `out` exactly-once.
fn spec(dir: &Path, name: &str, count: u64, out: &Path) -> PathBuf {
    let wasm = function("revenue");
    let spec = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &spec,
        format!(
            "name: {name}\nparallelism: 2\nbatch_size: 200\n\
             source: {{ type: generator, count: {count}, keys: 500, seed: 11 }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {out:?} }}\n\
             checkpoint: {{ interval: 100ms, retained: 2 }}\n"
        ),
    )
    .unwrap();
    spec
}

/// The ids of the checkpoint directories under `root`, ascending.
fn checkpoint_ids(root: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .collect();
    ids.sort();
    ids
}

/// Every `"shared"` file name in a snapshot's metadata.
fn shared_files(metadata: &serde_json::Value, names: &mut BTreeSet<String>) {
    match metadata {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("shared", serde_json::Value::String(name)) => {
                        names.insert(name.clone());
                    }
                    _ => shared_files(value, names),
                }
            }
        }
        serde_json::Value::Array(values) => values.iter().for_each(|v| shared_files(v, names)),
        _ => {}
    }
}

/// Wait until `done` holds, for up to a minute.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_weir_run_of_a_running_pipeline_is_refused_and_the_first_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let count = 30_000;
    let expected_out = dir.path().join("expected.jsonl");
    run_ok(&spec(dir.path(), "twice", count, &expected_out), &dir.path().join("expected"), &[]);
    let expected = per_key(&expected_out);

    let out = dir.path().join("out.jsonl");
    let spec = spec(dir.path(), "twice", count, &out);
    let data = dir.path().join("data");
    let first = start_weir(&spec, &data, &["--sink-delay-ms", "20"], &[]);
    let pid = first.id();
    // Mid-run: it has completed a checkpoint and written output.
    let root = data.join("checkpoints/twice");
    wait_until("a checkpoint of the first run", || {
        checkpoint_ids(&root).iter().any(|id| root.join(format!("chk-{id}/_metadata")).exists())
    });

    for extra in [&[][..], &["--fresh"], &["--restore", "latest"]] {
        let mut args = vec!["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
        args.extend_from_slice(extra);
        let second = weir(&args);
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert!(!second.status.success(), "the second run ({extra:?}) was refused: {stderr}");
        assert!(
            stderr.contains(&format!(
                "pipeline twice is already running (pid {pid}) on data dir {}",
                data.display()
            )) && stderr.contains("weir stop"),
            "{stderr}"
        );
    }

    let finished = first.wait_with_output().unwrap();
    assert!(finished.status.success(), "{}", String::from_utf8_lossy(&finished.stderr));
    assert_eq!(per_key(&out), expected, "every customer's records exactly once, in order");

    // Once it has ended, the pipeline runs again (from its last checkpoint).
    let again = run_ok(&spec, &data, &[]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("restored from checkpoint"));
    assert_eq!(per_key(&out), expected);
}

#[test]
fn weir_run_beside_weir_serve_running_the_pipeline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let served = "name: orders\nsource: { type: generator, count: 1000000000, keys: 100 }\n\
                  key: { function: revenue }\nprocess: { function: revenue }\nsink: { type: discard }\n\
                  checkpoint: { interval: 200ms }\n";
    let (status, deployed) = server.call("POST", "/v1/pipelines", None, served.as_bytes());
    assert_eq!(status, 201, "{deployed}");
    server.wait_for("/v1/pipelines/orders", None, Duration::from_secs(60), |s| {
        !s["last_checkpoint"].is_null()
    });

    let out = dir.path().join("out.jsonl");
    let spec = spec(dir.path(), "orders", 1_000, &out);
    let refused = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "pipeline orders is already running (pid {}, in `weir serve`) on data dir {}",
            server.pid(),
            data.display()
        )) && stderr.contains("weir pipeline stop orders"),
        "{stderr}"
    );
    assert!(!out.exists(), "the refused run wrote nothing");

    // A second server on the data directory is refused before it resumes
    // (and rewrites) the first one's pipelines.
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "data dir {} is already served by another `weir serve` (pid {}",
            data.display(),
            server.pid()
        )),
        "{stderr}"
    );

    // The served pipeline is untouched: it runs on and stops with a
    // savepoint.
    let (_, status) = server.call("GET", "/v1/pipelines/orders", None, b"");
    assert_eq!(status["state"], "running", "{status}");
    let (code, stopped) =
        server.call("POST", "/v1/pipelines/orders/stop", None, br#"{"savepoint": true}"#);
    assert_eq!(code, 200, "{stopped}");
    // Stopped, the pipeline's lock is free for `weir run`.
    let output = run_ok(&spec, &data, &["--fresh"]);
    assert!(output.status.success());
    assert_eq!(per_key(&out).values().map(Vec::len).sum::<usize>(), 1_000);
}

#[test]
fn weir_serve_does_not_run_or_delete_a_pipeline_that_weir_run_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = dir.path().join("out.jsonl");
    let count = 30_000;
    let spec = spec(dir.path(), "beside", count, &out);
    let running = start_weir(&spec, &data, &["--sink-delay-ms", "20"], &[]);
    let pid = running.id();
    let lock = data.join("pipelines/beside/lock");
    wait_until("the run's lock", || {
        std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&format!("\"pid\":{pid}")))
    });

    let server = Server::start(&data, &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let served = "name: beside\nsource: { type: generator, count: 1000, keys: 100 }\n\
                  key: { function: revenue }\nprocess: { function: revenue }\nsink: { type: discard }\n";
    let (status, deployed) = server.call("POST", "/v1/pipelines", None, served.as_bytes());
    assert_eq!(status, 201, "{deployed}");
    let failed = server.wait_for("/v1/pipelines/beside", None, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    let failure = failed["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains(&format!("pipeline beside is already running (pid {pid}) on data dir"))
            && failure.contains("weir stop"),
        "{failed}"
    );
    let (code, refused) = server.call("DELETE", "/v1/pipelines/beside", None, b"");
    assert_eq!(
        (code, refused["error"]["code"].as_str()),
        (409, Some("running_elsewhere")),
        "{refused}"
    );

    let finished = running.wait_with_output().unwrap();
    assert!(finished.status.success(), "{}", String::from_utf8_lossy(&finished.stderr));
    assert_eq!(per_key(&out).values().map(Vec::len).sum::<usize>(), count as usize);
    assert_eq!(server.call("DELETE", "/v1/pipelines/beside", None, b"").0, 204);
}

#[test]
fn a_corrupt_newest_metadata_stops_start_up_and_keeps_its_shared_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let spec = spec(dir.path(), "corrupt", 20_000, &out);
    let data = dir.path().join("data");
    run_ok(&spec, &data, &["--sink-delay-ms", "2"]);
    let expected = per_key(&out);
    let root = data.join("checkpoints/corrupt");
    let ids = checkpoint_ids(&root);
    assert!(ids.len() >= 2, "two checkpoints retained: {ids:?}");
    let (older, newest) = (ids[ids.len() - 2], ids[ids.len() - 1]);
    let metadata_path = root.join(format!("chk-{newest}/_metadata"));
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&metadata_path).unwrap()).unwrap();
    let mut referenced = BTreeSet::new();
    shared_files(&metadata, &mut referenced);
    assert!(!referenced.is_empty(), "checkpoint {newest} references shared files: {metadata}");
    std::fs::write(&metadata_path, b"{\"id\": 7, \"kind\": ").unwrap();

    // Start-up fails loudly, naming the checkpoint and the way out.
    let refused = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "corrupt metadata in snapshot {}",
            root.join(format!("chk-{newest}")).display()
        )) && stderr.contains("--restore"),
        "{stderr}"
    );

    // Restoring the older one explicitly works; retention around the
    // corrupt checkpoint deletes none of the files it references.
    let older_dir = root.join(format!("chk-{older}"));
    let output = run_ok(&spec, &data, &["--restore", older_dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("restored from checkpoint {older}")), "{stderr}");
    assert_eq!(per_key(&out), expected, "rolled back to checkpoint {older}, replayed exactly once");
    assert!(metadata_path.exists(), "the corrupt checkpoint is kept");
    for name in &referenced {
        assert!(root.join("shared").join(name).exists(), "shared file {name} is kept");
    }
}
