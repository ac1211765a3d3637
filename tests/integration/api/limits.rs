//! The operator's limits on `weir serve`: pipelines kept, keyed subtasks
//! per pipeline (deploys and upgrades, line specs and graphs), state
//! cache, batch size and spec size, each refused with a 4xx naming the
//! limit and its flag, with nothing deployed or changed.

use crate::support::*;

/// The answer's status and message.
fn refusal(answer: (u16, serde_json::Value)) -> (u16, String, String) {
    let (status, body) = answer;
    let code = body["error"]["code"].as_str().unwrap_or_default().to_string();
    (status, code, body["error"]["message"].as_str().unwrap_or_default().to_string())
}

/// Every pipeline's name and generation.
fn pipelines(server: &Server) -> Vec<(String, u64)> {
    let (_, list) = server.call("GET", "/v1/pipelines", None, b"");
    let list = list["pipelines"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["generation"].as_u64().unwrap()))
        .collect()
}

#[test]
fn deploys_and_upgrades_past_the_operators_limits_are_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--max-pipelines",
            "2",
            "--max-parallelism",
            "4",
            "--max-state-cache",
            "100MiB",
            "--max-batch-size",
            "5000",
            "--max-spec-bytes",
            "2KiB",
        ],
    );
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);

    let cases = [
        ("parallelism: 5\n", 422, "limit_exceeded", "--max-parallelism"),
        ("state_cache_bytes: 134217728\n", 422, "limit_exceeded", "--max-state-cache"),
        ("batch_size: 5001\n", 422, "limit_exceeded", "--max-batch-size"),
    ];
    for (extra, status, code, flag) in cases {
        let (got, got_code, message) = refusal(server.call(
            "POST",
            "/v1/pipelines",
            None,
            generator_spec("greedy", extra).as_bytes(),
        ));
        assert_eq!((got, got_code.as_str()), (status, code), "{extra}: {message}");
        assert!(message.contains(flag), "{extra}: {message}");
    }
    let padded = generator_spec("padded", &format!("# {}\n", "x".repeat(2048)));
    let (got, code, message) =
        refusal(server.call("POST", "/v1/pipelines", None, padded.as_bytes()));
    assert_eq!((got, code.as_str()), (413, "too_large"), "{message}");
    assert!(message.contains("--max-spec-bytes"), "{message}");

    // A graph counts the subtasks of all its stages.
    let graph = "name: graph\nparallelism: 2\noperators:\n\
        \x20 src: { source: { type: generator, count: 1000, keys: 10 } }\n\
        \x20 a: { inputs: [src], key: { function: revenue }, process: { function: revenue }, parallelism: 3 }\n\
        \x20 b: { inputs: [a], key: { function: revenue }, process: { function: revenue }, parallelism: 2 }\n\
        \x20 out: { inputs: [b], sink: { type: discard } }\n";
    let (got, _, message) = refusal(server.call("POST", "/v1/pipelines", None, graph.as_bytes()));
    assert!(got == 422 && message.contains("5 keyed subtasks (a: 3, b: 2)"), "{got}: {message}");
    assert!(pipelines(&server).is_empty(), "{:?}", pipelines(&server));

    for name in ["one", "two"] {
        let (status, body) = server.call(
            "POST",
            "/v1/pipelines",
            None,
            generator_spec(name, "parallelism: 2\n").as_bytes(),
        );
        assert_eq!(status, 201, "{body}");
    }
    let (got, code, message) =
        refusal(server.call("POST", "/v1/pipelines", None, generator_spec("three", "").as_bytes()));
    assert_eq!((got, code.as_str()), (422, "limit_exceeded"), "{message}");
    assert!(message.contains("at most 2 pipelines") && message.contains("--max-pipelines"));

    // An upgrade is held to the same limits, and changes nothing when refused.
    let before = pipelines(&server);
    let (got, _, message) =
        refusal(server.call("POST", "/v1/pipelines/one/upgrade", None, br#"{"parallelism": 8}"#));
    assert!(got == 422 && message.contains("--max-parallelism"), "{got}: {message}");
    let bigger =
        serde_json::json!({ "spec": generator_spec("one", "batch_size: 6000\n") }).to_string();
    let (got, _, message) =
        refusal(server.call("POST", "/v1/pipelines/one/upgrade", None, bigger.as_bytes()));
    assert!(got == 422 && message.contains("--max-batch-size"), "{got}: {message}");
    assert_eq!(pipelines(&server), before);

    // Room again after a delete.
    let (status, body) = server.call("DELETE", "/v1/pipelines/two", None, b"");
    assert_eq!(status, 204, "{body}");
    let (status, body) =
        server.call("POST", "/v1/pipelines", None, generator_spec("three", "").as_bytes());
    assert_eq!(status, 201, "{body}");
}
