//! Credentials in a deployed spec's Kafka `properties` never reach an API
//! answer: every route a read token may call shows `<redacted>` in their
//! place, and an upgrade that sends the placeholder back keeps the stored
//! secret. The Kafka connectors point at a port where no broker listens:
//! the sink only ever gets a side output nobody writes to, so the
//! pipeline runs, checkpoints and upgrades without a broker; the source of
//! the second pipeline fails its run, and its failure is shown too.

use std::time::Duration;

use weir_host::api::access::{token_line, Role};

use crate::support::*;

const READ: Option<&str> = Some("read-t0ken");
const DEPLOY: Option<&str> = Some("deploy-t0ken");
const ADMIN: Option<&str> = Some("admin-t0ken");

/// The secrets of the specs; each must never be in an answer. The last
/// is only in the graph's.
const SECRETS: [&str; 4] = [
    "sasl-Pa55word-q7Zr",
    "key-Pa55phrase-w3Xt",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-private-k3y",
    "ssl-keystore-Pa55-p9Lm",
];

/// A Kafka connector's `properties` holding the first three secrets (and
/// settings that are none).
fn properties() -> String {
    let [password, key_password, key, _] = SECRETS;
    format!(
        "{{ sasl.username: weir-user, sasl.password: {password:?}, ssl.key.password: {key_password:?}, \
         ssl.key.pem: \"-----BEGIN PRIVATE KEY-----\\n{key}\\n-----END PRIVATE KEY-----\\n\", \
         linger.ms: '7' }}"
    )
}

/// A pipeline that keeps running: generated orders into a discard sink,
/// with a Kafka side output holding credentials.
fn running_spec() -> String {
    format!(
        "name: creds\n\
         checkpoint: {{ interval: 200ms }}\n\
         source: {{ type: generator, count: 1000000000, keys: 10, interval_ms: 1 }}\n\
         key: {{ function: revenue }}\n\
         process: {{ function: revenue }}\n\
         sink: {{ type: discard }}\n\
         side_outputs:\n\
         \x20 audit: {{ type: kafka, bootstrap_servers: \"127.0.0.1:1\", topic: audit, properties: {} }}\n",
        properties()
    )
}

/// A graph reading Kafka with credentials (as JSON), which fails to run.
fn kafka_graph_spec() -> String {
    let kafka = |extra: serde_json::Value| {
        let mut section: serde_json::Value = serde_yaml::from_str(&properties()).unwrap();
        section["ssl.keystore.password"] = SECRETS[3].into();
        let mut connector = serde_json::json!({
            "type": "kafka", "bootstrap_servers": "127.0.0.1:1", "properties": section,
        });
        connector.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        connector
    };
    serde_json::json!({
        "name": "creds-graph",
        "operators": {
            "orders": { "source": kafka(serde_json::json!({ "topics": ["orders"] })) },
            "totals": {
                "inputs": ["orders"],
                "key": { "function": "revenue" },
                "process": { "function": "revenue" },
            },
            "out": { "inputs": ["totals"], "sink": kafka(serde_json::json!({ "topic": "totals" })) },
        },
    })
    .to_string()
}

/// Every answer a read token gets about pipeline `name`, as text.
fn read_everything(server: &Server, name: &str) -> String {
    let mut answers = String::new();
    for path in [
        "/v1/pipelines".to_string(),
        format!("/v1/pipelines/{name}"),
        format!("/v1/pipelines/{name}/checkpoints"),
        format!("/v1/pipelines/{name}/state?state=total&key=1"),
        format!("/v1/pipelines/{name}/tail?output=nope"),
        "/v1/functions".to_string(),
        "/metrics".to_string(),
    ] {
        let (status, body) = server.call("GET", &path, READ, b"");
        assert!(status < 500, "GET {path}: {status} {body}");
        answers.push_str(&format!("GET {path} → {status} {body}\n"));
    }
    answers
}

fn assert_no_secret(answers: &str) {
    for secret in SECRETS {
        assert!(!answers.contains(secret), "{secret:?} was shown:\n{answers}");
    }
}

#[test]
fn a_read_token_never_sees_kafka_credentials_and_an_upgrade_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = dir.path().join("tokens");
    let lines: Vec<String> = [(Role::Read, READ), (Role::Deploy, DEPLOY), (Role::Admin, ADMIN)]
        .into_iter()
        .map(|(role, token)| token_line(role, token.unwrap(), None))
        .collect();
    std::fs::write(&tokens, lines.join("\n")).unwrap();
    let server = Server::start(&data, &["--tokens", tokens.to_str().unwrap()]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", DEPLOY, &wasm).0, 201);

    // Deployed: a read token's list shows no secret; nor does the answer
    // to the deploy.
    let (status, deployed) =
        server.call("POST", "/v1/pipelines", DEPLOY, running_spec().as_bytes());
    assert_eq!(status, 201, "{deployed}");
    assert_no_secret(&read_everything(&server, "creds"));
    assert_no_secret(&deployed.to_string());
    let (status, graph) =
        server.call("POST", "/v1/pipelines", DEPLOY, kafka_graph_spec().as_bytes());
    assert_eq!(status, 201, "{graph}");
    assert_no_secret(&graph.to_string());

    // Running, with a checkpoint and live metrics: nothing a read token
    // reaches holds a secret, and the spec shows where they are.
    let status = server.wait_for("/v1/pipelines/creds", READ, Duration::from_secs(60), |s| {
        !s["last_checkpoint"].is_null() && !s["metrics"].is_null()
    });
    assert_no_secret(&read_everything(&server, "creds"));
    let shown = status["spec"].as_str().unwrap();
    for (property, value) in [
        ("sasl.password", "<redacted>"),
        ("ssl.key.password", "<redacted>"),
        ("ssl.key.pem", "<redacted>"),
        ("sasl.username", "weir-user"),
        ("linger.ms", "'7'"),
    ] {
        assert!(shown.contains(&format!("{property}: {value}")), "{property} in {shown}");
    }
    for token in [DEPLOY, ADMIN] {
        let (_, status) = server.call("GET", "/v1/pipelines/creds", token, b"");
        assert_no_secret(&status.to_string());
    }

    // The graph's run fails (no broker): its failure shows no secret either.
    server.wait_for("/v1/pipelines/creds-graph", READ, Duration::from_secs(120), |s| {
        s["state"] != "running"
    });
    let answers = read_everything(&server, "creds-graph");
    assert_no_secret(&answers);
    assert!(answers.contains(r#"\"ssl.keystore.password\": \"<redacted>\""#), "{answers}");

    // GET → edit something else → upgrade: the placeholders stand for the
    // stored secrets, which the pipeline keeps.
    let edited = shown.replace("interval: 200ms", "interval: 300ms");
    assert_ne!(edited, shown);
    let upgrade = serde_json::json!({ "spec": edited }).to_string();
    let (code, upgraded) =
        server.call("POST", "/v1/pipelines/creds/upgrade", DEPLOY, upgrade.as_bytes());
    assert_eq!(code, 200, "{upgraded}");
    assert_eq!(upgraded["generation"], 2, "{upgraded}");
    assert_no_secret(&upgraded.to_string());
    assert!(upgraded["spec"].as_str().unwrap().contains("300ms"), "{upgraded}");
    let stored = std::fs::read_to_string(data.join("api/pipelines/creds.json")).unwrap();
    for secret in &SECRETS[..3] {
        assert!(stored.contains(secret), "the stored spec lost {secret:?}: {stored}");
    }
    assert!(!stored.contains("<redacted>"), "{stored}");
    assert!(stored.contains("300ms"), "{stored}");
    server.wait_for("/v1/pipelines/creds", READ, Duration::from_secs(60), |s| {
        s["state"] == "running" && s["restored_from"]["kind"] == "savepoint"
    });
    assert_no_secret(&read_everything(&server, "creds"));

    // A placeholder for a secret that was never stored is refused, naming
    // it; so is one in a new deploy. Nothing changes.
    let invented: String = edited
        .lines()
        .flat_map(|line| match line.strip_suffix("linger.ms: '7'") {
            Some(indent) => {
                vec![line.to_string(), format!("{indent}ssl.keystore.password: <redacted>")]
            }
            None => vec![line.to_string()],
        })
        .map(|line| line + "\n")
        .collect();
    assert!(invented.contains("ssl.keystore.password"), "{invented}");
    let upgrade = serde_json::json!({ "spec": invented }).to_string();
    let (code, refused) =
        server.call("POST", "/v1/pipelines/creds/upgrade", DEPLOY, upgrade.as_bytes());
    assert_eq!(code, 400, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("side_outputs.audit.properties.ssl.keystore.password")
            && message.contains("<redacted>"),
        "{message}"
    );
    let copy = shown.replace("name: creds", "name: creds-copy");
    let (code, refused) = server.call("POST", "/v1/pipelines", DEPLOY, copy.as_bytes());
    assert_eq!(code, 400, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("side_outputs.audit.properties.") && message.contains("<redacted>"),
        "{message}"
    );
    let (_, status) = server.call("GET", "/v1/pipelines/creds", READ, b"");
    assert_eq!(status["generation"], 2, "{status}");
    let (_, list) = server.call("GET", "/v1/pipelines", READ, b"");
    assert_eq!(list["pipelines"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(stored, std::fs::read_to_string(data.join("api/pipelines/creds.json")).unwrap());
}
