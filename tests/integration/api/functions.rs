//! The HTTP API on the real `weir serve`: function upload, idempotence,
//! listing, deletion, token enforcement, hostile requests, and functions
//! surviving a `kill -9` of the server.

use crate::support::*;

#[test]
fn functions_upload_list_delete_and_survive_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--token", "s3cret"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    let token = Some("s3cret");

    assert_eq!(server.call("GET", "/healthz", None, b"").0, 200, "health needs no token");
    let (status, body) = server.call("PUT", "/v1/functions/revenue", None, &wasm);
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthorized")));
    assert_eq!(server.call("GET", "/v1/functions", Some("wrong"), b"").0, 401);

    let (status, first) = server.call("PUT", "/v1/functions/revenue", token, &wasm);
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["version"], 1);
    let worlds = first["worlds"].to_string();
    assert!(worlds.contains("key-function") && worlds.contains("process-function"), "{worlds}");
    let (status, again) = server.call("PUT", "/v1/functions/revenue", token, &wasm);
    assert_eq!((status, &again), (200, &first), "the same bytes again are the same version");

    let (status, list) = server.call("GET", "/v1/functions", token, b"");
    assert_eq!(status, 200);
    assert_eq!(list["functions"][0]["name"], "revenue");

    // Hostile requests: each a clear 4xx, nothing stored.
    let (status, body) = server.call("PUT", "/v1/functions/..%2F..%2Fetc", token, &wasm);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_name")), "{body}");
    assert_eq!(server.call("PUT", "/v1/functions/BAD", token, &wasm).0, 400);
    assert_eq!(
        server.call("PUT", &format!("/v1/functions/{}", "a".repeat(200)), token, &wasm).0,
        400
    );
    let (status, body) = server.call("PUT", "/v1/functions/junk", token, b"not wasm at all");
    assert_eq!((status, body["error"]["code"].as_str()), (415, Some("not_wasm")));
    let (status, body) = server.call("PUT", "/v1/functions/cut", token, &wasm[..wasm.len() / 2]);
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("invalid_function")), "{body}");
    assert_eq!(server.call("GET", "/v1/functions/missing", token, b"").0, 404);
    assert_eq!(server.call("GET", "/no/such/route", token, b"").0, 404);
    for old in ["/functions", "/pipelines", "/openapi.json", "/functions/revenue"] {
        assert_eq!(server.call("GET", old, token, b"").0, 404, "{old} is unversioned");
    }
    let (_, list) = server.call("GET", "/v1/functions", token, b"");
    assert_eq!(list["functions"].as_array().unwrap().len(), 1, "nothing else was stored: {list}");

    // kill -9 and restart: the function is still there.
    drop(server);
    let server = Server::start(&data, &["--token", "s3cret"]);
    let (status, one) = server.call("GET", "/v1/functions/revenue", token, b"");
    assert_eq!((status, one["newest"].as_u64()), (200, Some(1)), "{one}");
    // The CLI client talks to the same server.
    let url = format!("http://{}", server.address);
    let wasm_path = function("windowed-revenue");
    let uploaded = weir(&[
        "function",
        "upload",
        "windows",
        wasm_path.to_str().unwrap(),
        "--server",
        &url,
        "--token",
        "s3cret",
    ]);
    assert!(uploaded.status.success(), "{}", String::from_utf8_lossy(&uploaded.stderr));
    assert!(String::from_utf8_lossy(&uploaded.stdout).starts_with("windows version 1 sha256:"));
    let listed = weir(&["function", "list", "--server", &url, "--token", "s3cret", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["functions"].as_array().map(Vec::len), Some(2), "{listed}");
    let refused = weir(&["function", "list", "--server", &url]);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("401 unauthorized")
    );
    assert_eq!(server.call("DELETE", "/v1/functions/revenue", token, b"").0, 204);
    assert_eq!(server.call("GET", "/v1/functions/revenue", token, b"").0, 404);
}

#[test]
fn uploads_over_the_size_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--max-upload-bytes", "1000"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 413);
    assert_eq!(
        server.call("GET", "/v1/functions", None, b"").1["functions"].as_array().map(Vec::len),
        Some(0)
    );
}

#[test]
fn concurrent_uploads_of_the_same_function_make_one_version() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let uploads: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| server.call("PUT", "/v1/functions/same", None, &wasm).0))
            .collect();
        uploads.into_iter().map(|u| u.join().unwrap()).collect()
    });
    assert!(statuses.iter().all(|s| *s == 200 || *s == 201), "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "one upload creates the version: {statuses:?}"
    );
    let (_, one) = server.call("GET", "/v1/functions/same", None, b"");
    assert_eq!(one["versions"].as_array().map(Vec::len), Some(1), "{one}");
}
