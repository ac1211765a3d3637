//! Pipelines over HTTP on the real `weir serve`: deploy from a spec naming
//! stored functions, status, savepoint, upgrade to a new function version
//! and parallelism keeping state, `kill -9` of the server and resumption,
//! stop, delete; refusals of bad specs and hostile requests that change
//! nothing; the OpenAPI document matching the routes.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::kafka::{committed_per_key, produce_orders, unique, TestKafka};
use crate::support::*;

const TOKEN: Option<&str> = Some("t0ken");

/// The same component with a custom section appended: other bytes (a new
/// version), the same behaviour.
fn new_version_of(wasm: &[u8]) -> Vec<u8> {
    let (name, payload) = (b"weir-test-version", b"2");
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(payload);
    let mut bytes = wasm.to_vec();
    bytes.push(0);
    bytes.push(section.len() as u8);
    bytes.extend_from_slice(&section);
    bytes
}

#[test]
fn deploy_upgrade_survive_kill_9_and_stop_over_http() {
    let kafka = TestKafka::start();
    let dir = tempfile::tempdir().unwrap();
    let (orders, revenue, expected_topic) =
        (unique("orders"), unique("revenue"), unique("expected"));
    kafka.create_topic(&orders, 3);
    kafka.create_topic(&revenue, 1);
    kafka.create_topic(&expected_topic, 1);
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--token", "t0ken"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", TOKEN, &wasm).0, 201);

    produce_orders(&kafka, &orders, 3, 3000, 40, 1);
    let bootstrap = kafka.bootstrap();
    let spec = format!(
        "name: orders\nparallelism: 2\nbatch_size: 100\n\
         source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{orders}], timestamp_field: event_time }}\n\
         key: {{ function: revenue }}\nprocess: {{ function: revenue }}\n\
         sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {revenue}, delivery: exactly-once, transactional_id_prefix: {revenue}, transaction_timeout: 5m }}\n\
         checkpoint: {{ interval: 200ms, timeout: 1m }}\nwatermark: {{ max_out_of_orderness: 5s }}\n"
    );
    let (status, deployed) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
    assert_eq!(status, 201, "{deployed}");
    assert_eq!(
        (deployed["state"].as_str(), deployed["generation"].as_u64()),
        (Some("running"), Some(1))
    );
    assert_eq!(
        deployed["functions"][0],
        serde_json::json!({ "field": "key", "function": "revenue", "version": 1 })
    );

    // Status: counts, watermark and a completed checkpoint.
    let status = server.wait_for("/v1/pipelines/orders", TOKEN, Duration::from_secs(60), |s| {
        s["counts"]["sink_records"].as_u64() >= Some(3000) && !s["last_checkpoint"].is_null()
    });
    assert_eq!(status["counts"]["source_records"], 3000, "{status}");
    assert_eq!(status["counts"]["process"].as_array().map(Vec::len), Some(2));
    assert!(status["watermark"].as_i64() > Some(1_768_471_200_000), "{status}");
    let (code, metrics) = server.call("GET", "/metrics", TOKEN, b"");
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    assert_eq!(code, 200);
    assert!(
        metrics
            .contains("weir_operator_records_in_total{pipeline=\"orders\",operator=\"key\"} 3000"),
        "{metrics}"
    );
    assert!(
        metrics.contains("weir_pipeline_state{pipeline=\"orders\",state=\"running\"} 1"),
        "{metrics}"
    );

    // The function is in use.
    assert_eq!(
        server.call("DELETE", "/v1/functions/revenue", TOKEN, b"").1["error"]["code"],
        "in_use"
    );

    // A savepoint, then an upgrade to version 2 at parallelism 3 (through the CLI).
    let (code, savepoint) = server.call("POST", "/v1/pipelines/orders/savepoints", TOKEN, b"");
    assert_eq!(code, 201, "{savepoint}");
    let (_, list) = server.call("GET", "/v1/pipelines/orders/checkpoints", TOKEN, b"");
    assert!(
        list["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "savepoint" && c["location"] == savepoint["location"]),
        "{list}"
    );
    let (code, v2) = server.call("PUT", "/v1/functions/revenue", TOKEN, &new_version_of(&wasm));
    assert_eq!((code, v2["version"].as_u64()), (201, Some(2)), "{v2}");
    let upgraded = weir(&[
        "pipeline",
        "upgrade",
        "orders",
        "--function",
        "revenue",
        "--parallelism",
        "3",
        "--server",
        &server.url(),
        "--token",
        "t0ken",
        "--json",
    ]);
    assert!(upgraded.status.success(), "{}", String::from_utf8_lossy(&upgraded.stderr));
    let upgraded: serde_json::Value = serde_json::from_slice(&upgraded.stdout).unwrap();
    assert_eq!(
        (upgraded["generation"].as_u64(), upgraded["parallelism"].as_u64()),
        (Some(2), Some(3)),
        "{upgraded}"
    );
    assert_eq!(upgraded["functions"][1]["version"], 2, "{upgraded}");
    let status = server.wait_for("/v1/pipelines/orders", TOKEN, Duration::from_secs(30), |s| {
        !s["restored_from"].is_null()
    });
    assert_eq!(
        status["restored_from"]["kind"], "savepoint",
        "the upgrade started from its savepoint: {status}"
    );

    produce_orders(&kafka, &orders, 3, 3000, 40, 3001);
    wait_until(Duration::from_secs(60), || total(&committed_per_key(&kafka, &revenue)) >= 6000);

    // kill -9 of the server; more orders arrive while it is down.
    drop(server);
    produce_orders(&kafka, &orders, 3, 3000, 40, 6001);
    let server = Server::start(&data, &["--token", "t0ken"]);
    let (_, status) = server.call("GET", "/v1/pipelines/orders", TOKEN, b"");
    assert_eq!(
        (status["state"].as_str(), status["generation"].as_u64()),
        (Some("running"), Some(2)),
        "resumed after the restart: {status}"
    );
    wait_until(Duration::from_secs(60), || total(&committed_per_key(&kafka, &revenue)) >= 9000);

    // Stop with a savepoint; the pipeline is stopped and stays so.
    let (code, stopped) =
        server.call("POST", "/v1/pipelines/orders/stop", TOKEN, br#"{"savepoint": true}"#);
    assert_eq!((code, stopped["state"].as_str()), (200, Some("stopped")), "{stopped}");
    assert!(stopped["location"].as_str().unwrap().contains("savepoints/sp-"), "{stopped}");
    let (_, status) = server.call("GET", "/v1/pipelines/orders", TOKEN, b"");
    assert_eq!(status["state"], "stopped");
    assert_eq!(
        server.call("POST", "/v1/pipelines/orders/savepoints", TOKEN, b"").1["error"]["code"],
        "not_running"
    );

    // Exactly the results of one failure-free run over all 9000 orders:
    // the upgrade kept the running totals, the restart lost and repeated nothing.
    let wasm_path = function("revenue");
    let reference = dir.path().join("reference.yaml");
    std::fs::write(
        &reference,
        format!(
            "name: reference\nparallelism: 2\nbatch_size: 100\n\
             source: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topics: [{orders}], bounded: true, timestamp_field: event_time }}\n\
             key: {{ wasm: {wasm_path:?} }}\nprocess: {{ wasm: {wasm_path:?} }}\n\
             sink: {{ type: kafka, bootstrap_servers: {bootstrap:?}, topic: {expected_topic}, delivery: exactly-once, transactional_id_prefix: {expected_topic}, transaction_timeout: 5m }}\n\
             checkpoint: {{ interval: 1s, timeout: 1m }}\n"
        ),
    )
    .unwrap();
    run_ok(&reference, &dir.path().join("data-reference"), &[]);
    let expected = committed_per_key(&kafka, &expected_topic);
    let actual = committed_per_key(&kafka, &revenue);
    assert_eq!(total(&expected), 9000);
    assert_eq!(
        actual, expected,
        "per-customer results over HTTP deploy, upgrade and kill -9 equal a failure-free run's"
    );

    // Delete: the pipeline goes, then its function may go.
    assert_eq!(server.call("DELETE", "/v1/pipelines/orders", TOKEN, b"").0, 204);
    assert_eq!(server.call("GET", "/v1/pipelines/orders", TOKEN, b"").0, 404);
    assert_eq!(server.call("DELETE", "/v1/functions/revenue", TOKEN, b"").0, 204);
}

fn wait_until(within: Duration, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "condition not reached within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Everything the server stores, as seen through the API.
fn snapshot_of(
    server: &Server,
) -> (serde_json::Value, Vec<(String, serde_json::Value, serde_json::Value)>) {
    let functions = server.call("GET", "/v1/functions", None, b"").1;
    let pipelines = server.call("GET", "/v1/pipelines", None, b"").1;
    let pipelines = pipelines["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["generation"].clone(),
                p["functions"].clone(),
            )
        })
        .collect();
    (functions, pipelines)
}

#[test]
fn bad_specs_and_hostile_requests_get_4xx_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--max-upload-bytes", "10000000"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let (code, body) =
        server.call("POST", "/v1/pipelines", None, generator_spec("good", "").as_bytes());
    assert_eq!(code, 201, "{body}");
    let finished = server.wait_for("/v1/pipelines/good", None, Duration::from_secs(30), |s| {
        s["state"] == "finished"
    });
    assert_eq!(finished["counts"]["source_records"], 1000, "{finished}");
    let before = snapshot_of(&server);

    let refusals: Vec<(String, u16, &str, &str)> = vec![
        (generator_spec("x", "colour: blue\n"), 400, "invalid_spec", "colour"),
        (
            generator_spec("x", "checkpoint: { interval: soon }\n"),
            400,
            "invalid_spec",
            "checkpoint.interval",
        ),
        (generator_spec("x", "parallelism: 0\n"), 400, "invalid_spec", "parallelism"),
        (
            generator_spec("x", "max_parallelism: 4\nparallelism: 9\n"),
            400,
            "invalid_spec",
            "parallelism",
        ),
        (
            generator_spec("x", "")
                .replace("process: { function: revenue }", "process: { function: missing }"),
            422,
            "invalid_pipeline",
            "missing",
        ),
        (
            generator_spec("x", "").replace(
                "process: { function: revenue }",
                "process: { function: revenue, version: 7 }",
            ),
            422,
            "invalid_pipeline",
            "version 7",
        ),
        (
            generator_spec("x", "")
                .replace("process: { function: revenue }", "process: { wasm: /etc/passwd }"),
            400,
            "invalid_spec",
            "stored functions",
        ),
        (generator_spec("good", ""), 409, "exists", "already exists"),
        (generator_spec("../../etc", ""), 400, "invalid_spec", "name"),
        ("{not yaml: [".to_string(), 400, "invalid_spec", ""),
        (String::new(), 400, "invalid_spec", ""),
    ];
    for (spec, status, code, mention) in refusals {
        let (got, body) = server.call("POST", "/v1/pipelines", None, spec.as_bytes());
        assert_eq!((got, body["error"]["code"].as_str()), (status, Some(code)), "{spec}\n→ {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(mention),
            "{body} should mention {mention:?}"
        );
    }
    assert_eq!(
        server.call("POST", "/v1/pipelines", None, &[0xff, 0xfe, b'\n', 0x80]).0,
        400,
        "invalid UTF-8"
    );
    assert_eq!(
        server.call("POST", "/v1/pipelines/good/upgrade", None, br#"{"parallelism": 0}"#).0,
        400
    );
    assert_eq!(server.call("POST", "/v1/pipelines/good/upgrade", None, br#"{"colour": 1}"#).0, 400);
    assert_eq!(
        server
            .call("POST", "/v1/pipelines/good/upgrade", None, br#"{"functions": {"revenue": 9}}"#)
            .0,
        422
    );
    assert_eq!(
        server.call("POST", "/v1/pipelines/good/stop", None, b"").1["error"]["code"],
        "not_running"
    );
    for path in [
        "/v1/pipelines/missing",
        "/v1/pipelines/..%2F..%2Fetc",
        "/v1/pipelines/missing/stop",
        "/v1/pipelines/missing/checkpoints",
    ] {
        let method = if path.ends_with("stop") { "POST" } else { "GET" };
        assert_eq!(server.call(method, path, None, b"").0, 404, "{path}");
    }
    assert_eq!(snapshot_of(&server), before, "refused requests changed nothing");

    // Random bodies, paths and methods (seeded; WEIR_CRASH_SEED repeats).
    let seed = crash_seed();
    eprintln!("hostile request seed {seed}");
    let mut dice = Dice(seed);
    let routes: [(&str, &str); 10] = [
        ("POST", "/v1/pipelines"),
        ("PUT", "/v1/functions/fuzz"),
        ("POST", "/v1/pipelines/good/upgrade"),
        ("POST", "/v1/pipelines/good/stop"),
        ("POST", "/v1/pipelines/good/savepoints"),
        ("DELETE", "/v1/functions/revenue"),
        ("GET", "/v1/pipelines/%FF%FE"),
        ("PATCH", "/v1/pipelines/good"),
        ("POST", "/v1/functions/revenue"),
        ("GET", "/v1/functions/%2e%2e%2f%2e%2e%2fetc"),
    ];
    for _ in 0..300 {
        let (method, path) = routes[dice.between(0, routes.len() as u64 - 1) as usize];
        let length = dice.between(1, 2000) as usize;
        let mut body: Vec<u8> = (0..length).map(|_| dice.between(0, 255) as u8).collect();
        body[0] = 1; // never blank: an empty upgrade or stop body is a valid request
        if dice.between(0, 3) == 0 {
            // Something shaped like a spec, with random damage.
            body = generator_spec("fuzzed", "").into_bytes();
            let at = dice.between(0, body.len() as u64 - 1) as usize;
            body[at] = dice.between(0, 255) as u8;
            body.truncate(dice.between(at as u64, body.len() as u64) as usize);
        }
        let (status, answer) = server.call(method, path, None, &body);
        let accepted_fuzzed_spec = method == "POST" && path == "/v1/pipelines" && status == 201;
        assert!(
            (400..500).contains(&status) || accepted_fuzzed_spec,
            "{method} {path} with {length} random bytes → {status} {answer}"
        );
        if accepted_fuzzed_spec {
            let name = answer["name"].as_str().unwrap();
            server.wait_for(&format!("/v1/pipelines/{name}"), None, Duration::from_secs(30), |s| {
                s["state"] != "running"
            });
            assert_eq!(server.call("DELETE", &format!("/v1/pipelines/{name}"), None, b"").0, 204);
        }
    }
    let (status, _) = server.raw("GET", b"/v1/pipelines/\xff\xfe", None, b"");
    assert!((400..500).contains(&status), "a raw invalid UTF-8 path → {status}");
    let huge = format!("/v1/pipelines/{}", "a".repeat(20_000));
    assert!((400..500).contains(&server.call("GET", &huge, None, b"").0));
    assert_eq!(server.call("GET", "/healthz", None, b"").0, 200, "the server is up");
    assert_eq!(snapshot_of(&server), before, "hostile requests changed nothing");
}

#[test]
fn the_openapi_document_lists_exactly_the_routes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--token", "t0ken"]);
    assert_eq!(
        server.call("GET", "/v1/openapi.json", None, b"").0,
        401,
        "the document needs the token too"
    );
    let (status, document) = server.call("GET", "/v1/openapi.json", TOKEN, b"");
    assert_eq!(status, 200);
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item
            .as_object()
            .unwrap()
            .keys()
            .filter(|m| ["get", "put", "post", "delete"].contains(&m.as_str()))
        {
            operations.push(format!("{} {path}", method.to_uppercase()));
            // The route exists: whatever it answers, it is not the router's
            // "no such route" nor "method not allowed".
            let concrete = path.replace("{name}", "nothing-here");
            let (code, body) = server.call(&method.to_uppercase(), &concrete, TOKEN, b"");
            assert!(
                code != 405 && body["error"]["message"] != "no such route",
                "{method} {path} is documented but not routed: {code} {body}"
            );
        }
    }
    operations.sort();
    // The routes table of docs/api.md lists the same operations.
    let api_doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md"))
            .unwrap();
    for operation in &operations {
        assert!(api_doc.contains(operation.as_str()), "docs/api.md does not document {operation}");
    }
    assert_eq!(operations.len(), 18, "{operations:#?}");
}

/// SIGTERM to `weir serve` stops each running pipeline with a final
/// checkpoint (none is taken otherwise: the interval is an hour) and exits
/// cleanly; started again, the server resumes the pipeline from it.
#[test]
fn a_server_told_to_stop_checkpoints_its_pipelines_and_resumes_them_when_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flags = ["--token", "t0ken", "--stop-grace", "15s"];
    let mut server = Server::start(&data, &flags);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", TOKEN, &wasm).0, 201);
    let source = "{ type: generator, count: 100000000, keys: 10, rate: 2000 }";
    let spec =
        stored_revenue_spec("paced", source, "{ type: discard }", "checkpoint: { interval: 1h }");
    let (status, body) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
    assert_eq!(status, 201, "{body}");
    server.wait_for("/v1/pipelines/paced", TOKEN, Duration::from_secs(60), |s| {
        s["counts"]["sink_records"].as_u64() > Some(0)
    });
    let stopping = Instant::now();
    let exit = server.terminate(Duration::from_secs(60));
    assert!(exit.success(), "a shutdown with every final checkpoint taken is clean: {exit}");
    let took = stopping.elapsed();

    let server = Server::start(&data, &flags);
    let resumed = server.wait_for("/v1/pipelines/paced", TOKEN, Duration::from_secs(60), |s| {
        s["state"] == "running" && !s["restored_from"].is_null()
    });
    assert_eq!(resumed["restored_from"]["kind"], "checkpoint", "{resumed}");
    println!(
        "weir serve shutdown: exited {took:?} after SIGTERM; resumed from checkpoint {}",
        resumed["restored_from"]["id"]
    );
}
