//! What a spec deployed through the real `weir serve` may touch on the
//! host, tried as a tenant would: files outside the files root and the
//! granted directories (absolute, `..`, a symbolic link out), `resources:
//! /`, checkpoint storage elsewhere, another pipeline's checkpoint,
//! librdkafka properties off the allow-list, brokers not allowed — each
//! refused with a 4xx naming the rule and the flag, nothing written
//! outside. Granted directories work end to end, and a server restarted
//! with fewer grants fails the pipeline instead of running it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;

/// A directory under /tmp no test creates (each test its own).
fn unique_tmp(what: &str) -> PathBuf {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    std::env::temp_dir().join(format!("weir-{what}-{}-{nanos}", std::process::id()))
}

fn upload_revenue(server: &Server) {
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
}

fn file_source(path: &str) -> String {
    format!("{{ type: file, path: {path:?}, timestamp_field: event_time }}")
}

fn file_sink(path: &str) -> String {
    format!("{{ type: file, path: {path:?} }}")
}

const GENERATOR: &str = "{ type: generator, count: 1000000000, keys: 10, interval_ms: 1 }";

/// Deploy `spec` (to `path`), expecting a refusal naming all of `mentions`.
fn refused(server: &Server, path: &str, spec: &str, status: u16, mentions: &[&str]) {
    let (got, body) = server.call("POST", path, None, spec.as_bytes());
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(got, status, "{spec}\n→ {body}");
    for mention in mentions {
        assert!(message.contains(mention), "{body} should mention {mention:?}");
    }
}

/// A server's data directory and, apart from it, a directory to grant for
/// reading (`r`), one for writing (`w`) and a third the test names.
struct Place {
    dir: tempfile::TempDir,
    data: PathBuf,
    area: tempfile::TempDir,
    readable: PathBuf,
    writable: PathBuf,
    third: PathBuf,
}

impl Place {
    fn new(third: &str) -> Place {
        let dir = tempfile::tempdir().unwrap();
        let area = tempfile::tempdir().unwrap();
        let (readable, writable) = (area.path().join("r"), area.path().join("w"));
        let third = area.path().join(third);
        for d in [&readable, &writable, &third] {
            std::fs::create_dir(d).unwrap();
        }
        Place { data: dir.path().join("data"), dir, area, readable, writable, third }
    }

    /// `weir serve` granting `r` to read and `w` to write, and `extra`.
    fn start(&self, extra: &[&str]) -> Server {
        let grants = ["--allow-read", self.readable.to_str().unwrap()];
        let writes = ["--allow-write", self.writable.to_str().unwrap()];
        let flags: Vec<&str> =
            grants.into_iter().chain(writes).chain(extra.iter().copied()).collect();
        Server::start(&self.data, &flags)
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn tenant_specs_reach_nothing_the_server_does_not_grant() {
    let place = Place::new("outside");
    let (dir, data, area) = (&place.dir, &place.data, &place.area);
    let (readable, writable, outside) = (&place.readable, &place.writable, &place.third);
    let tmp = unique_tmp("tenant");
    let server = place.start(&["--allow-kafka", "127.0.0.1:1"]);
    upload_revenue(&server);
    let orders = revenue_orders();
    let orders = orders.to_str().unwrap();

    // Files: written anywhere, up out of the files root, through a link out.
    let x = tmp.join("x");
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec("abs", GENERATOR, &file_sink(x.to_str().unwrap()), ""),
        422,
        &["sink.path", "outside the files", "--allow-write"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec("up", GENERATOR, &file_sink("../../x"), ""),
        422,
        &["sink.path", "`..` leads out", "--allow-write"],
    );
    std::os::unix::fs::symlink(outside, data.join("files/link")).unwrap();
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec("link", GENERATOR, &file_sink("link/x"), ""),
        422,
        &["sink.path", "symbolic link", "--allow-write"],
    );
    // A side output and a graph's sink are files too.
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec(
            "side",
            GENERATOR,
            "{ type: discard }",
            &format!("side_outputs: {{ late: {} }}\n", file_sink(x.to_str().unwrap())),
        ),
        422,
        &["side_outputs.late.path", "--allow-write"],
    );
    let graph = format!(
        "name: graph\noperators:\n\
         \x20 in: {{ source: {GENERATOR} }}\n\
         \x20 out: {{ inputs: [in], sink: {} }}\n",
        file_sink(x.to_str().unwrap())
    );
    refused(&server, "/v1/pipelines", &graph, 422, &["operators.out.sink.path", "--allow-write"]);
    // Reads: /etc/passwd, a readable grant is not writable, `resources: /`.
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec("passwd", &file_source("/etc/passwd"), "{ type: discard }", ""),
        422,
        &["source.path: /etc/passwd", "--allow-read"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec("ro", GENERATOR, &file_sink(readable.join("x").to_str().unwrap()), ""),
        422,
        &["sink.path", "--allow-write"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec(
            "everything",
            &file_source(orders),
            "{ type: discard }",
            "resources: /\n",
        ),
        422,
        &["resources: / is outside", "--allow-read"],
    );
    // Checkpoint storage elsewhere.
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec(
            "storage",
            GENERATOR,
            "{ type: discard }",
            &format!("checkpoint: {{ interval: 1s, storage: \"file://{}\" }}\n", tmp.display()),
        ),
        422,
        &["checkpoint.storage", "--allow-storage"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &stored_revenue_spec(
            "writable-storage",
            GENERATOR,
            "{ type: discard }",
            &format!(
                "checkpoint: {{ interval: 1s, storage: \"file://{}/ckpt\" }}\n",
                writable.display()
            ),
        ),
        422,
        &["checkpoint.storage", "--allow-storage"],
    );
    // Kafka: a property loading native code, one off the allow-list, a key
    // file outside the grants, a broker not allowed.
    let kafka = |name: &str, servers: &str, properties: &str| {
        stored_revenue_spec(
            name,
            GENERATOR,
            &format!("{{ type: kafka, bootstrap_servers: {servers:?}, topic: t, properties: {{ {properties} }} }}"),
            "",
        )
    };
    refused(
        &server,
        "/v1/pipelines",
        &kafka("plugin", "127.0.0.1:1", "plugin.library.paths: /tmp/evil.so"),
        400,
        &["properties.plugin.library.paths", "native code"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &kafka("intercept", "127.0.0.1:1", "interceptors: x"),
        422,
        &["sink.properties.interceptors", "not on the list"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &kafka("key", "127.0.0.1:1", "ssl.key.location: /etc/ssl/private/server.key"),
        422,
        &["sink.properties.ssl.key.location", "--allow-read"],
    );
    refused(
        &server,
        "/v1/pipelines",
        &kafka("broker", "127.0.0.1:1,elsewhere:9092", "linger.ms: '5'"),
        422,
        &["sink.bootstrap_servers", "\"elsewhere:9092\"", "--allow-kafka"],
    );

    // Another pipeline's checkpoint is not a restore point.
    let first = stored_revenue_spec(
        "first",
        GENERATOR,
        "{ type: discard }",
        "checkpoint: { interval: 200ms }\n",
    );
    let (code, body) = server.call("POST", "/v1/pipelines", None, first.as_bytes());
    assert_eq!(code, 201, "{body}");
    server.wait_for("/v1/pipelines/first", None, Duration::from_secs(60), |s| {
        !s["last_checkpoint"].is_null()
    });
    let (_, list) = server.call("GET", "/v1/pipelines/first/checkpoints", None, b"");
    let location = list["checkpoints"][0]["location"].as_str().unwrap().to_string();
    let second = first.replace("name: first", "name: second");
    refused(
        &server,
        &format!("/v1/pipelines?restore={location}"),
        &second,
        422,
        &["restore: ", "--allow-storage"],
    );
    refused(
        &server,
        &format!(
            "/v1/pipelines?restore=file://{location}/../../first/{}",
            location.rsplit('/').next().unwrap()
        ),
        &second,
        422,
        &["restore: "],
    );

    // Nothing but `first` was deployed, nothing written outside the grants.
    let (_, pipelines) = server.call("GET", "/v1/pipelines", None, b"");
    let names: Vec<&str> = pipelines["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["first"], "{pipelines}");
    assert!(!tmp.exists(), "nothing was made at {}", tmp.display());
    assert!(!dir.path().join("x").exists() && !area.path().join("x").exists());
    assert!(is_empty_dir(outside), "nothing was written through the link");
    assert!(is_empty_dir(readable), "nothing was written into the read grant");
    assert!(!data.join("checkpoints/second").exists(), "the refused restore made nothing");
}

#[test]
fn granted_directories_work_end_to_end() {
    let place = Place::new("ckpt");
    let (data, readable, writable, storage) =
        (&place.data, &place.readable, &place.writable, &place.third);
    std::fs::copy(revenue_orders(), readable.join("orders.jsonl")).unwrap();
    let storage_url = format!("file://{}", storage.display());
    let server = place.start(&["--allow-storage", &storage_url]);
    upload_revenue(&server);
    let expected: BTreeMap<u64, String> =
        [(1, "50.00"), (2, "48.00"), (3, "17.00")].map(|(c, t)| (c, t.to_string())).into();

    // A read grant in, a relative path out: into <data>/files/.
    let spec = stored_revenue_spec(
        "relative",
        &file_source(readable.join("orders.jsonl").to_str().unwrap()),
        &file_sink("out/totals.jsonl"),
        "",
    );
    let (code, body) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 201, "{body}");
    let done = server.wait_for("/v1/pipelines/relative", None, Duration::from_secs(60), |s| {
        s["state"] != "running"
    });
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(final_totals(&data.join("files/out/totals.jsonl")), expected);

    // A relative path in (the files root), a write grant out, checkpoints
    // in granted storage.
    std::fs::copy(revenue_orders(), data.join("files/orders.jsonl")).unwrap();
    let spec = stored_revenue_spec(
        "granted",
        &file_source("orders.jsonl"),
        &file_sink(writable.join("deep/totals.jsonl").to_str().unwrap()),
        &format!("checkpoint: {{ interval: 1s, storage: \"{storage_url}/team\" }}\n"),
    );
    let (code, body) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 201, "{body}");
    let done = server.wait_for("/v1/pipelines/granted", None, Duration::from_secs(60), |s| {
        s["state"] != "running"
    });
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(final_totals(&writable.join("deep/totals.jsonl")), expected);
    assert!(storage.join("team").is_dir(), "its checkpoint storage is the granted one");
}

#[test]
fn a_server_restarted_with_fewer_grants_fails_the_pipeline_instead_of_running_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let area = tempfile::tempdir().unwrap();
    let out = area.path().join("out.jsonl");
    let server = Server::start(&data, &["--allow-write", area.path().to_str().unwrap()]);
    upload_revenue(&server);
    let spec = stored_revenue_spec(
        "endless",
        GENERATOR,
        &file_sink(out.to_str().unwrap()),
        "checkpoint: { interval: 200ms }\n",
    );
    let (code, body) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 201, "{body}");
    server.wait_for("/v1/pipelines/endless", None, Duration::from_secs(60), |s| {
        !s["last_checkpoint"].is_null()
    });
    drop(server); // kill -9
    std::fs::remove_file(&out).unwrap();

    let server = Server::start(&data, &[]);
    let status = server.wait_for("/v1/pipelines/endless", None, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    let failure = status["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("not started")
            && failure.contains("sink.path")
            && failure.contains("--allow-write"),
        "{status}"
    );
    assert_eq!(status["restart"]["restarts"], 0, "{status}");
    assert!(!out.exists(), "the pipeline did not run");
}

#[test]
fn grants_that_would_expose_the_data_directory_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for (flag, value) in [
        ("--allow-write", dir.path().to_path_buf()),
        ("--allow-write", data.join("api")),
        ("--allow-read", dir.path().to_path_buf()),
    ] {
        std::fs::create_dir_all(data.join("api")).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()])
            .args([flag, value.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("the server's own records"),
            "{flag} {}: {stderr}",
            value.display()
        );
    }
}
