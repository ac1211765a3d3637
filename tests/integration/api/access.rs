//! Who may reach `weir serve` and what they may do: no open API on a
//! public address by accident, no cross-site or DNS-rebinding requests,
//! tokens with roles from a tokens file rotated without a restart, and
//! only versioned routes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// A bounded generator pipeline named `name` over stored function `revenue`.
fn spec(name: &str) -> String {
    generator_spec(name, "")
}

/// The names of the deployed pipelines.
fn pipelines(server: &Server, token: Option<&str>) -> Vec<String> {
    let (status, body) = server.call("GET", "/v1/pipelines", token, b"");
    assert_eq!(status, 200, "{body}");
    body["pipelines"].as_array().unwrap().iter().map(|p| p["name"].to_string()).collect()
}

/// `weir token new --role role`: the token and its tokens file line.
fn new_token(role: &str, label: &str) -> (String, String) {
    let output = weir(&["token", "new", "--role", role, "--label", label]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let field = |name: &str| {
        let line =
            text.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{text}"));
        line.trim().to_string()
    };
    let (token, line) = (field("token:"), field("line:"));
    assert_eq!(token.len(), 64, "{text}");
    assert!(line.starts_with(&format!("{role} sha256:")) && !line.contains(&token), "{line}");
    (token, line)
}

/// `weir serve` with `args`, expected to exit at once; its stderr.
fn refused_start(data: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--data-dir", data.to_str().unwrap()])
        .args(args)
        .env_remove("WEIR_API_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "weir serve {args:?} started");
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn a_public_address_without_a_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let error = refused_start(&data, &["--listen", "0.0.0.0:0"]);
    assert!(error.contains("--insecure-no-token") && error.contains("--token"), "{error}");
    assert!(!data.join("api").exists(), "nothing was opened");

    let server = Server::start_on("0.0.0.0:0", &data, &["--insecure-no-token"], &[]);
    assert_eq!(server.call("GET", "/v1/functions", None, b"").0, 200);
    drop(server);
    let server = Server::start_on("0.0.0.0:0", &data, &["--token", "s3cret"], &[]);
    assert_eq!(server.call("GET", "/v1/functions", None, b"").0, 401);
    assert_eq!(server.call("GET", "/v1/functions", Some("s3cret"), b"").0, 200);
}

#[test]
fn cross_site_requests_and_rebinding_hosts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    let deploy = spec("orders");

    // What a plain HTML form or a "simple" fetch can send: no deploy, no upload.
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> =
            content_type.iter().map(|t| ("Content-Type", *t)).collect();
        let (status, body) = server.request("PUT", "/v1/functions/revenue", &headers, &wasm);
        assert_eq!((status, body["error"]["code"].as_str()), (415, Some("unsupported_media_type")));
        let (status, body) = server.request("POST", "/v1/pipelines", &headers, deploy.as_bytes());
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (415, Some("unsupported_media_type")),
            "{content_type:?}: {body}"
        );
        assert!(body["error"]["message"].as_str().unwrap().contains("application/yaml"), "{body}");
    }
    assert_eq!(
        server.call("GET", "/v1/functions", None, b"").1["functions"],
        serde_json::json!([])
    );
    assert!(pipelines(&server, None).is_empty(), "nothing deployed");

    let wasm_type = [("Content-Type", "application/wasm")];
    assert_eq!(server.request("PUT", "/v1/functions/revenue", &wasm_type, &wasm).0, 201);

    // A page of another site, even with a fitting type.
    let own = format!("http://{}", server.address);
    for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
        let headers = [("Content-Type", "application/yaml; charset=utf-8"), ("Origin", origin)];
        let (status, body) = server.request("POST", "/v1/pipelines", &headers, deploy.as_bytes());
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("foreign_origin")),
            "{origin}"
        );
        let (status, _) =
            server.request("DELETE", "/v1/functions/revenue", &[("Origin", origin)], b"");
        assert_eq!(status, 403, "{origin}");
    }
    assert!(pipelines(&server, None).is_empty(), "nothing deployed");

    // DNS rebinding: a name that points here but is not ours.
    for host in ["evil.example", "evil.example:80", "localhost.evil.example"] {
        let (status, body) = server.request("GET", "/v1/pipelines", &[("Host", host)], b"");
        assert_eq!((status, body["error"]["code"].as_str()), (421, Some("unknown_host")), "{host}");
        assert_eq!(server.request("GET", "/metrics", &[("Host", host)], b"").0, 421);
        let headers = [("Host", host), ("Content-Type", "application/yaml")];
        assert_eq!(server.request("POST", "/v1/pipelines", &headers, deploy.as_bytes()).0, 421);
    }
    assert_eq!(server.request("GET", "/healthz", &[("Host", "evil.example")], b"").0, 200);
    assert!(pipelines(&server, None).is_empty(), "nothing deployed");

    // The server's own pages, localhost, and the JSON the CLI sends pass.
    let port = server.address.rsplit(':').next().unwrap().to_string();
    let local = format!("localhost:{port}");
    let headers = [("Content-Type", "application/yaml"), ("Origin", own.as_str())];
    let (status, body) = server.request("POST", "/v1/pipelines", &headers, deploy.as_bytes());
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        server.request("GET", "/v1/pipelines/orders", &[("Host", local.as_str())], b"").0,
        200
    );
    let local_origin = format!("http://{local}");
    let headers = [
        ("Host", local.as_str()),
        ("Origin", local_origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    server.wait_for("/v1/pipelines/orders", None, Duration::from_secs(60), |s| {
        s["state"] == "finished"
    });
    let (status, body) = server.request("POST", "/v1/pipelines/orders/stop", &headers, b"{}");
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not_running")), "{body}");
}

#[test]
fn allowed_hosts_and_origins_are_let_through() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--allow-host", "weir.internal", "--allow-origin", "https://console.example/"],
    );
    let wasm = std::fs::read(function("revenue")).unwrap();
    let headers = [
        ("Host", "weir.internal:8080"),
        ("Origin", "https://console.example"),
        ("Content-Type", "application/wasm"),
    ];
    assert_eq!(server.request("PUT", "/v1/functions/revenue", &headers, &wasm).0, 201);
    let (status, body) = server.request("GET", "/v1/pipelines", &[("Host", "other.internal")], b"");
    assert_eq!(status, 421);
    assert!(body["error"]["message"].as_str().unwrap().contains("--allow-host other.internal"));
    let headers = [("Origin", "https://other.example"), ("Content-Type", "application/yaml")];
    let (status, body) = server.request("POST", "/v1/pipelines", &headers, spec("p").as_bytes());
    assert_eq!(status, 403);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("--allow-origin https://other.example"), "{message}");
}

#[test]
fn roles_limit_what_tokens_may_do() {
    let dir = tempfile::tempdir().unwrap();
    let (read, read_line) = new_token("read", "dashboards");
    let (deploy, deploy_line) = new_token("deploy", "ci");
    let (admin, admin_line) = new_token("admin", "ops");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# API tokens\n{read_line}\n\n{deploy_line}\n{admin_line}\n"))
        .unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        &["--tokens", tokens.to_str().unwrap(), "--token", "root"],
    );
    let wasm = std::fs::read(function("revenue")).unwrap();
    let (read, deploy, admin) = (Some(read.as_str()), Some(deploy.as_str()), Some(admin.as_str()));

    assert_eq!(server.call("GET", "/v1/functions", None, b"").0, 401);
    assert_eq!(server.call("GET", "/v1/functions", Some("guess"), b"").0, 401);
    assert_eq!(server.call("GET", "/healthz", None, b"").0, 200);

    // read: every GET, nothing else.
    for path in ["/v1/functions", "/v1/pipelines", "/metrics", "/v1/openapi.json"] {
        assert_eq!(server.call("GET", path, read, b"").0, 200, "{path}");
    }
    let (status, body) = server.call("PUT", "/v1/functions/revenue", read, &wasm);
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("role deploy"), "{body}");
    assert_eq!(
        server.call("GET", "/v1/functions", read, b"").1["functions"],
        serde_json::json!([])
    );

    // deploy: uploads, deploys, stops; no deletes, no marker override.
    assert_eq!(server.call("PUT", "/v1/functions/revenue", deploy, &wasm).0, 201);
    let (status, body) = server.call("POST", "/v1/pipelines", read, spec("p").as_bytes());
    assert_eq!(status, 403, "{body}");
    let (status, body) = server.call(
        "POST",
        "/v1/pipelines?override_kafka_marker=true",
        deploy,
        spec("p").as_bytes(),
    );
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("role admin"), "{body}");
    assert!(pipelines(&server, read).is_empty());
    let (status, body) = server.call("POST", "/v1/pipelines", deploy, spec("p").as_bytes());
    assert_eq!(status, 201, "{body}");
    server.wait_for("/v1/pipelines/p", read, Duration::from_secs(60), |s| s["state"] != "running");
    let (status, body) = server.call(
        "POST",
        "/v1/pipelines/p/upgrade",
        deploy,
        br#"{"override_kafka_marker": true}"#,
    );
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")), "{body}");
    for path in ["/v1/pipelines/p", "/v1/functions/revenue"] {
        let (status, body) = server.call("DELETE", path, deploy, b"");
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden")), "{path}");
        assert!(body["error"]["message"].as_str().unwrap().contains("role admin"), "{body}");
    }
    assert_eq!(pipelines(&server, read).len(), 1, "still deployed");

    // admin (from the file, or --token): deletes.
    assert_eq!(server.call("DELETE", "/v1/pipelines/p", admin, b"").0, 204);
    assert_eq!(server.call("DELETE", "/v1/functions/revenue", Some("root"), b"").0, 204);
}

#[test]
fn a_rotated_tokens_file_takes_effect_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (old, old_line) = new_token("deploy", "ci-2025");
    let (new, new_line) = new_token("deploy", "ci-2026");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{old_line}\n")).unwrap();
    let mut server =
        Server::start(&dir.path().join("data"), &["--tokens", tokens.to_str().unwrap()]);
    let (old, new) = (Some(old.as_str()), Some(new.as_str()));
    assert_eq!(server.call("GET", "/v1/pipelines", old, b"").0, 200);
    assert_eq!(server.call("GET", "/v1/pipelines", new, b"").0, 401);

    // Rotation: add the new token, then drop the old one; just rewriting works.
    std::fs::write(&tokens, format!("{old_line}\n{new_line}\n")).unwrap();
    wait_until(|| server.call("GET", "/v1/pipelines", new, b"").0 == 200);
    assert_eq!(server.call("GET", "/v1/pipelines", old, b"").0, 200);
    std::fs::write(&tokens, format!("# rotated\n{new_line}\n")).unwrap();
    wait_until(|| server.call("GET", "/v1/pipelines", old, b"").0 == 401);
    assert_eq!(server.call("GET", "/v1/pipelines", new, b"").0, 200);

    // SIGHUP reads it at once; a new file renamed over it with the old
    // file's time and size is taken too (its contents changed).
    let (third, third_line) = new_token("deploy", "ci-2027");
    let before = std::fs::metadata(&tokens).unwrap().modified().unwrap();
    let staged = dir.path().join("tokens.new");
    std::fs::write(&staged, format!("# rotated\n{third_line}\n")).unwrap();
    std::fs::File::options().write(true).open(&staged).unwrap().set_modified(before).unwrap();
    std::fs::rename(&staged, &tokens).unwrap();
    let hup = Command::new("kill").args(["-HUP", &server.pid().to_string()]).status().unwrap();
    assert!(hup.success());
    wait_until(|| server.call("GET", "/v1/pipelines", Some(&third), b"").0 == 200);
    assert_eq!(server.call("GET", "/v1/pipelines", new, b"").0, 401);
    assert!(server.is_alive(), "SIGHUP does not end the server");

    // A broken file keeps the tokens in force.
    std::fs::write(&tokens, "deploy not-a-hash\n").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let hup = Command::new("kill").args(["-HUP", &server.pid().to_string()]).status().unwrap();
    assert!(hup.success());
    assert_eq!(server.call("GET", "/v1/pipelines", Some(&third), b"").0, 200, "the tokens stay");
    assert!(server.is_alive());

    // A deleted file revokes its tokens (and the API stays closed).
    std::fs::remove_file(&tokens).unwrap();
    wait_until(|| server.call("GET", "/v1/pipelines", Some(&third), b"").0 == 401);
    assert_eq!(server.call("GET", "/v1/pipelines", None, b"").0, 401);
    assert!(server.is_alive());
}

#[test]
fn a_malformed_tokens_file_refuses_to_start_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, line) = new_token("read", "x");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# ok\n{line}\nwriter sha256:{}\n", "0".repeat(64))).unwrap();
    let error = refused_start(&dir.path().join("data"), &["--tokens", tokens.to_str().unwrap()]);
    assert!(error.contains("line 3") && error.contains("\"writer\" is not a role"), "{error}");
    let missing = dir.path().join("missing");
    let error = refused_start(&dir.path().join("data"), &["--tokens", missing.to_str().unwrap()]);
    assert!(error.contains("tokens file") && error.contains("missing"), "{error}");
}

#[test]
fn only_versioned_routes_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/functions/revenue", None, &wasm).0, 404);
    assert_eq!(server.call("POST", "/pipelines", None, spec("p").as_bytes()).0, 404);
    for path in ["/functions", "/pipelines", "/openapi.json", "/v2/pipelines", "/v1/healthz"] {
        assert_eq!(server.call("GET", path, None, b"").0, 404, "{path}");
    }
    assert_eq!(
        server.call("GET", "/v1/functions", None, b"").1["functions"],
        serde_json::json!([])
    );
    assert_eq!(server.call("GET", "/healthz", None, b"").0, 200);
    assert_eq!(server.call("GET", "/metrics", None, b"").0, 200);
}

/// Wait (up to a minute) until `done`.
fn wait_until(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited a minute");
        std::thread::sleep(Duration::from_millis(100));
    }
}
