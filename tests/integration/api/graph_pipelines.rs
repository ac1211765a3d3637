//! A graph over HTTP on the real `weir serve`: deployed from a spec naming
//! stored functions, status and metrics per stage, one function upgraded
//! wherever the graph uses it with every stage's state kept, stopped.

use std::time::Duration;

use crate::support::*;

const TOKEN: Option<&str> = Some("t0ken");

#[test]
fn a_graph_deploys_reports_each_stage_and_upgrades_one_function_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--token", "t0ken"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", TOKEN, &wasm).0, 201);

    // Two generated streams joined per customer, and a running total per
    // customer of the first: two keyed stages, one stored function in three
    // places.
    let spec = "name: graph\nparallelism: 2\nbatch_size: 100\n\
        watermark: { max_out_of_orderness: 1s }\n\
        checkpoint: { interval: 200ms }\n\
        operators:\n\
        \x20 left: { source: { type: generator, count: 100000000, keys: 50, seed: 1, interval_ms: 1 } }\n\
        \x20 right: { source: { type: generator, count: 100000000, keys: 50, seed: 2, interval_ms: 1 } }\n\
        \x20 paid: { inputs: [left, right], key: { function: revenue }, join: { type: interval, lower: 0s, upper: 10ms }, parallelism: 3 }\n\
        \x20 totals: { inputs: [left], key: { function: revenue }, process: { function: revenue } }\n\
        \x20 joined: { inputs: [paid], sink: { type: discard } }\n\
        \x20 out: { inputs: [totals], sink: { type: discard } }\n";
    let (status, deployed) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
    assert_eq!(status, 201, "{deployed}");
    let fields: Vec<&str> = deployed["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["field"].as_str())
        .collect();
    assert_eq!(
        fields,
        ["operators.paid.key", "operators.totals.key", "operators.totals.process"],
        "{deployed}"
    );

    // Status and metrics name each stage and count each of its subtasks.
    let stage = |status: &serde_json::Value, name: &str| -> Vec<u64> {
        status["counts"]["operators"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["name"] == name)
            .flat_map(|o| o["subtasks"].as_array().unwrap().iter())
            .map(|s| s["records_in"].as_u64().unwrap())
            .collect()
    };
    let status = server.wait_for("/v1/pipelines/graph", TOKEN, Duration::from_secs(60), |s| {
        stage(s, "paid").iter().all(|n| *n > 0)
            && stage(s, "totals").iter().all(|n| *n > 0)
            && !s["last_checkpoint"].is_null()
    });
    assert_eq!((stage(&status, "paid").len(), stage(&status, "totals").len()), (3, 2), "{status}");
    let (_, metrics) = server.call("GET", "/metrics", TOKEN, b"");
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    for labels in [
        "pipeline=\"graph\",operator=\"paid\",subtask=\"2\"",
        "pipeline=\"graph\",operator=\"totals\",subtask=\"1\"",
    ] {
        assert!(
            metrics.contains(&format!("weir_operator_records_in_total{{{labels}}}")),
            "{metrics}"
        );
    }

    // Version 2 of the function, wherever the graph uses it; every stage's
    // state comes back from the upgrade's savepoint.
    let mut v2 = wasm.clone();
    v2.extend_from_slice(&[0, 4, 3, b'v', b'e', b'r']);
    let (code, stored) = server.call("PUT", "/v1/functions/revenue", TOKEN, &v2);
    assert_eq!((code, stored["version"].as_u64()), (201, Some(2)), "{stored}");
    let (code, upgraded) = server.call(
        "POST",
        "/v1/pipelines/graph/upgrade",
        TOKEN,
        br#"{"functions":{"revenue":2}}"#,
    );
    assert_eq!(code, 200, "{upgraded}");
    assert_eq!(upgraded["generation"], 2, "{upgraded}");
    let versions: Vec<u64> = upgraded["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [2, 2, 2], "{upgraded}");
    let status = server.wait_for("/v1/pipelines/graph", TOKEN, Duration::from_secs(60), |s| {
        s["state"] == "running" && stage(s, "paid").iter().sum::<u64>() > 0
    });
    assert_eq!(status["restored_from"]["kind"], "savepoint", "{status}");

    let (code, stopped) = server.call("POST", "/v1/pipelines/graph/stop", TOKEN, b"{}");
    assert_eq!(code, 200, "{stopped}");
    server.wait_for("/v1/pipelines/graph", TOKEN, Duration::from_secs(60), |s| {
        s["state"] == "stopped"
    });
}
