//! `weir serve` restarts a failed pipeline as its spec's `restart:` says:
//! from its newest checkpoint with exact output (a run failing once, on
//! the real broker), until the attempts run out (then it is `failed` with
//! the reason), and never after a stop or delete during the delay.

use std::path::Path;
use std::time::Duration;

use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::*;

fn upload(server: &Server, name: &str) {
    let wasm = std::fs::read(function(name)).unwrap();
    assert_eq!(server.call("PUT", &format!("/v1/functions/{name}"), None, &wasm).0, 201);
}

#[test]
fn a_run_that_fails_once_is_restarted_from_its_checkpoint_with_exact_output() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue, expected_topic) =
        (unique("orders"), unique("revenue"), unique("expected"));
    kafka.create_topic(&orders, 2);
    kafka.create_topic(&revenue, 1);
    kafka.create_topic(&expected_topic, 1);
    produce_orders(&kafka, &orders, 2, 2000, 30, 1);
    // The run fails at the source's third barrier (checkpoints 1 and 2 are
    // done then); the restarted run, in the same process, passes it.
    let server = Server::start_with_env(
        &dir.path().join("data"),
        &[],
        &[("WEIR_FAULT", "source-barrier:3")],
    );
    upload(&server, "revenue");
    let bootstrap = kafka.bootstrap();
    let spec = format!(
        "name: orders\nparallelism: 2\nbatch_size: 100\n\
         source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{orders}], timestamp_field: event_time }}\n\
         key: {{ function: revenue }}\nprocess: {{ function: revenue }}\n\
         sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {revenue}, delivery: exactly-once, transactional_id_prefix: {revenue}, transaction_timeout: 5m }}\n\
         checkpoint: {{ interval: 200ms, timeout: 1m }}\n\
         restart: {{ strategy: fixed-delay, attempts: 3, delay: 500ms }}\n"
    );
    let (code, deployed) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
    assert_eq!(code, 201, "{deployed}");
    assert_eq!(deployed["restart"]["restarts"], 0, "{deployed}");

    let status = server.wait_for("/v1/pipelines/orders", None, Duration::from_secs(60), |s| {
        s["restart"]["restarts"] == 1
            && s["restart"]["next_attempt_at"].is_null()
            && !s["restored_from"].is_null()
            && s["snapshots_completed"].as_u64() >= Some(1)
    });
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["failure"], serde_json::Value::Null, "{status}");
    assert_eq!(status["restored_from"]["kind"], "checkpoint", "{status}");
    assert!(status["restored_from"]["id"].as_u64() >= Some(1), "{status}");
    let last_failure = status["restart"]["last_failure"].as_str().unwrap_or_default();
    assert!(last_failure.contains("source-barrier"), "{status}");

    // More orders for the restarted run.
    produce_orders(&kafka, &orders, 2, 1000, 30, 2001);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while total(&committed_per_key(&kafka, &revenue)) < 3000 {
        assert!(std::time::Instant::now() < deadline, "the restarted run did not catch up");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, stopped) = server.call("POST", "/v1/pipelines/orders/stop", None, b"");
    let status = server.call("GET", "/v1/pipelines/orders", None, b"").1;
    assert_eq!(code, 200, "{stopped}\n{status}");

    // Exactly the output of a failure-free run.
    let wasm = function("revenue");
    let reference = dir.path().join("reference.yaml");
    std::fs::write(
        &reference,
        format!(
            "name: reference\nparallelism: 2\nbatch_size: 100\n\
             source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{orders}], bounded: true, timestamp_field: event_time }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {expected_topic}, delivery: exactly-once, transactional_id_prefix: {expected_topic}, transaction_timeout: 5m }}\n\
             checkpoint: {{ interval: 1s, timeout: 1m }}\n"
        ),
    )
    .unwrap();
    run_ok(&reference, &dir.path().join("data-reference"), &[]);
    let expected = committed_per_key(&kafka, &expected_topic);
    assert_eq!(total(&expected), 3000);
    assert_eq!(
        committed_per_key(&kafka, &revenue),
        expected,
        "restarted: nothing lost or repeated"
    );
}

/// A pipeline over the misbehaving function whose input makes it trap
/// every time, restarted as `restart` says.
fn trapping_spec(dir: &Path, name: &str, restart: &str) -> String {
    let input = dir.join(format!("{name}.jsonl"));
    let lines: Vec<String> = (0..20).map(|i| format!(r#"{{"customer":"c{}"}}"#, i % 4)).collect();
    std::fs::write(&input, lines.join("\n") + "\n{\"customer\":\"c1\",\"act\":\"trap\"}\n")
        .unwrap();
    format!(
        "name: {name}\nbatch_size: 4\nsource: {{ type: file, path: {input:?} }}\n\
         key: {{ function: misbehaving }}\nprocess: {{ function: misbehaving }}\nsink: {{ type: discard }}\n\
         checkpoint: {{ interval: 100ms }}\nrestart: {restart}\n"
    )
}

#[test]
fn when_the_attempts_run_out_the_pipeline_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // The pipelines read their input in `dir`, granted to them; the
    // server's data directory is elsewhere (a grant may not hold it).
    let served = tempfile::tempdir().unwrap();
    let server =
        Server::start(&served.path().join("data"), &["--allow-read", dir.path().to_str().unwrap()]);
    upload(&server, "misbehaving");
    let spec = trapping_spec(
        dir.path(),
        "trapper",
        "{ strategy: fixed-delay, attempts: 2, delay: 100ms }",
    );
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    let status = server.wait_for("/v1/pipelines/trapper", None, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    let failure = status["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("asked to trap"), "{status}");
    assert!(
        failure.contains("gave up after 2 restart(s)") && failure.contains("restart.attempts is 2"),
        "{status}"
    );
    assert_eq!(status["restart"]["restarts"], 2, "{status}");
    assert!(status["restart"]["next_attempt_at"].is_null(), "{status}");
    assert!(
        status["restart"]["last_failure"].as_str().unwrap_or_default().contains("asked to trap"),
        "{status}"
    );

    // Without checkpoints (and no `restart:`), a failure is final at once.
    let spec = trapping_spec(dir.path(), "plain", "{ strategy: none }")
        .replace("checkpoint: { interval: 100ms }\n", "")
        .replace("restart: { strategy: none }\n", "");
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    let status = server
        .wait_for("/v1/pipelines/plain", None, Duration::from_secs(60), |s| s["state"] == "failed");
    assert_eq!(status["restart"]["restarts"], 0, "{status}");
    assert!(!status["failure"].as_str().unwrap_or_default().contains("gave up"), "{status}");
}

#[test]
fn a_stop_or_delete_during_the_delay_cancels_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    // The pipelines read their input in `dir`, granted to them; the
    // server's data directory is elsewhere (a grant may not hold it).
    let served = tempfile::tempdir().unwrap();
    let server =
        Server::start(&served.path().join("data"), &["--allow-read", dir.path().to_str().unwrap()]);
    upload(&server, "misbehaving");
    let spec = trapping_spec(dir.path(), "waiting", "{ strategy: fixed-delay, delay: 3s }");
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    let pending = |server: &Server| {
        server.wait_for("/v1/pipelines/waiting", None, Duration::from_secs(60), |s| {
            !s["restart"]["next_attempt_at"].is_null()
        })
    };
    let status = pending(&server);
    assert_eq!(
        (status["state"].as_str(), status["restart"]["restarts"].as_u64()),
        (Some("running"), Some(1)),
        "{status}"
    );
    assert!(status["restart"]["last_failure"].as_str().unwrap().contains("asked to trap"));

    // No running state to savepoint; a stop cancels the restart.
    let (code, refused) = server.call("POST", "/v1/pipelines/waiting/savepoints", None, b"");
    assert_eq!((code, refused["error"]["code"].as_str()), (409, Some("restarting")), "{refused}");
    let (code, stopped) = server.call("POST", "/v1/pipelines/waiting/stop", None, b"");
    assert_eq!((code, stopped["state"].as_str()), (200, Some("stopped")), "{stopped}");
    std::thread::sleep(Duration::from_secs(4));
    let (_, status) = server.call("GET", "/v1/pipelines/waiting", None, b"");
    assert_eq!(status["state"], "stopped", "the restart was cancelled: {status}");
    assert_eq!(status["restart"]["restarts"], 1, "{status}");
    assert!(status["restart"]["next_attempt_at"].is_null(), "{status}");

    // Started again (an upgrade), it fails and waits again: the count starts over.
    let (code, upgraded) = server.call("POST", "/v1/pipelines/waiting/upgrade", None, b"");
    assert_eq!(code, 200, "{upgraded}");
    let status = pending(&server);
    assert_eq!(status["restart"]["restarts"], 1, "{status}");
    assert_eq!(server.call("DELETE", "/v1/pipelines/waiting", None, b"").0, 204);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(server.call("GET", "/v1/pipelines/waiting", None, b"").0, 404);
    assert_eq!(
        server.call("GET", "/v1/pipelines", None, b"").1["pipelines"],
        serde_json::json!([])
    );
}

#[test]
fn a_start_refused_on_purpose_is_not_restarted() {
    // The commit marker of a running pipeline is lost while its server is
    // down: the resumed run is refused, and restarting it would only be
    // refused again, so the pipeline is failed at once with the reason.
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue) = (unique("orders"), unique("revenue"));
    kafka.create_topic(&orders, 1);
    kafka.create_topic(&revenue, 1);
    produce_orders(&kafka, &orders, 1, 500, 10, 1);
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    upload(&server, "revenue");
    let bootstrap = kafka.bootstrap();
    let spec = format!(
        "name: orders\nsource: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{orders}], timestamp_field: event_time }}\n\
         key: {{ function: revenue }}\nprocess: {{ function: revenue }}\n\
         sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {revenue}, delivery: exactly-once, transactional_id_prefix: {revenue}, transaction_timeout: 5m }}\n\
         checkpoint: {{ interval: 200ms, timeout: 1m }}\n\
         restart: {{ strategy: fixed-delay, attempts: 5, delay: 100ms }}\n"
    );
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    server.wait_for("/v1/pipelines/orders", None, Duration::from_secs(60), |s| {
        s["snapshots_completed"].as_u64() >= Some(2)
    });
    assert!(total(&committed_per_key(&kafka, &revenue)) > 0, "the run committed output");
    drop(server); // kill -9
    kafka.delete_group(&format!("weir-txn-{revenue}"));

    let server = Server::start(&data, &[]);
    let status = server.wait_for("/v1/pipelines/orders", None, Duration::from_secs(60), |s| {
        s["state"] == "failed"
    });
    let failure = status["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("commit marker") && failure.contains("not restarted"), "{status}");
    assert_eq!(status["restart"]["restarts"], 0, "{status}");
    assert!(status["restart"]["next_attempt_at"].is_null(), "{status}");
}
