//! Hostile and buggy functions (functions/misbehaving, forbidden-network)
//! beside a healthy pipeline in one `weir serve`: each misbehaving function
//! fails its own pipeline, within a bounded time, with a message naming the
//! cause; the healthy pipeline runs on to exactly the results of a run on
//! its own; the server process never restarts. Also: the dead-letter
//! policy (offending events set aside and undone, the rest exact), the
//! read-only resources grant, and refused network imports.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;

const TOKEN: Option<&str> = Some("is0late");

/// JSON lines for the misbehaving function: `per_customer` ordinary events
/// for each of `customers`, round-robin, with `bad` (act, customer) lines
/// inserted after line `at`.
fn events(customers: usize, per_customer: usize, at: usize, bad: &[(&str, &str)]) -> String {
    let mut lines: Vec<String> = (0..customers * per_customer)
        .map(|i| format!(r#"{{"customer":"c{}"}}"#, i % customers))
        .collect();
    let bad_lines =
        bad.iter().map(|(act, customer)| format!(r#"{{"customer":"{customer}","act":"{act}"}}"#));
    lines.splice(at..at, bad_lines);
    lines.join("\n") + "\n"
}

/// Each customer's `count`s in `output` (the misbehaving function's
/// results), in output order.
fn counts_per_customer(output: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u64>> {
    let mut counts: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for record in records(output) {
        counts
            .entry(record["customer"].as_str().unwrap().to_string())
            .or_default()
            .push(record["count"].as_u64().unwrap());
    }
    counts
}

/// What each misbehaviour must fail its pipeline with.
const MISBEHAVIOURS: &[(&str, &[&str])] = &[
    ("loop", &["deadline exceeded", "100ms of CPU time", "while processing key \"c3\""]),
    ("alloc", &["memory limit of 64 MiB exceeded", "while processing key \"c3\""]),
    (
        "trap",
        &[
            "trapped while processing key \"c3\"",
            "unreachable",
            "it logged: panicked at",
            "asked to trap",
        ],
    ),
    ("fail", &["failed while processing key \"c3\"", "asked to fail"]),
    ("huge-state", &["16777216"]),
    ("bad-handle", &["trapped while processing key \"c3\"", "unknown handle"]),
    ("bad-key", &["4294967295", "not in the current batch"]),
    ("huge-name", &["invalid state name"]),
    ("emit-flood", &["while processing key \"c3\""]),
    ("bad-batch", &["malformed batch"]),
    ("key-trap", &["(key)` trapped while computing the keys of"]),
    ("key-loop", &["(key)` stopped: deadline exceeded", "while computing the keys of"]),
    ("key-huge", &["returned a key of 4194304 bytes; keys may have at most 1 MiB"]),
];

fn healthy_spec(output: &Path, functions: &str) -> String {
    format!(
        "name: healthy\nparallelism: 2\nbatch_size: 200\n\
         source: {{ type: generator, count: 300000, keys: 500, seed: 7 }}\n\
         key: {{ {functions} }}\nprocess: {{ {functions} }}\n\
         sink: {{ type: file, path: {output:?} }}\ncheckpoint: {{ interval: 200ms }}\n"
    )
}

#[test]
fn misbehaving_functions_fail_only_their_own_pipelines() {
    let dir = tempfile::tempdir().unwrap();
    // The pipelines read and write files in `dir`, granted to them; the
    // server's data directory is elsewhere (a grant may not hold it).
    let served = tempfile::tempdir().unwrap();
    let data = served.path().join("data");
    let granted = dir.path().to_str().unwrap();
    let mut server = Server::start(&data, &["--token", "is0late", "--allow-write", granted]);
    for name in ["revenue", "misbehaving"] {
        assert_eq!(
            server
                .call(
                    "PUT",
                    &format!("/v1/functions/{name}"),
                    TOKEN,
                    &std::fs::read(function(name)).unwrap()
                )
                .0,
            201
        );
    }

    // A function that imports the network is refused at upload.
    let (code, refused) = server.call(
        "PUT",
        "/v1/functions/forbidden-network",
        TOKEN,
        &std::fs::read(function("forbidden-network")).unwrap(),
    );
    assert_eq!(code, 422, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("wasi:sockets/") && message.contains("no network"), "{refused}");

    // A pipeline may not grant its functions more than the server allows.
    for (limits, field, flag) in [
        ("{ memory: 2GiB }", "limits.memory", "--max-function-memory"),
        ("{ call_timeout: 30s }", "limits.call_timeout", "--max-call-timeout"),
    ] {
        let spec = format!("name: greedy\nsource: {{ type: generator, count: 10 }}\nkey: {{ function: revenue }}\nprocess: {{ function: revenue }}\nsink: {{ type: discard }}\nlimits: {limits}\n");
        let (code, refused) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            code == 422 && message.contains(field) && message.contains(flag),
            "{code}: {refused}"
        );
    }
    assert_eq!(server.call("GET", "/v1/pipelines/greedy", TOKEN, b"").0, 404);

    let healthy_out = dir.path().join("healthy.jsonl");
    let (code, body) = server.call(
        "POST",
        "/v1/pipelines",
        TOKEN,
        healthy_spec(&healthy_out, "function: revenue").as_bytes(),
    );
    assert_eq!(code, 201, "{body}");

    let started = Instant::now();
    for (act, _) in MISBEHAVIOURS {
        let input = dir.path().join(format!("{act}.jsonl"));
        std::fs::write(&input, events(5, 40, 103, &[(act, "c3")])).unwrap();
        let output = dir.path().join(format!("{act}-out.jsonl"));
        // Lifting a 17 MiB list takes a debug build most of 100ms of CPU,
        // and so can the kernel's zeroing of 64 MiB of fresh pages on a
        // busy VM: these two are about memory, not time.
        let limits = if ["huge-state", "alloc"].contains(act) {
            "limits: { call_timeout: 5s }\n"
        } else {
            ""
        };
        let spec = format!(
            "name: bad-{act}\nbatch_size: 16\n{limits}source: {{ type: file, path: {input:?} }}\n\
             key: {{ function: misbehaving }}\nprocess: {{ function: misbehaving }}\nsink: {{ type: file, path: {output:?} }}\n"
        );
        let (code, body) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
        assert_eq!(code, 201, "{act}: {body}");
    }
    for (act, expected) in MISBEHAVIOURS {
        let status = server.wait_for(
            &format!("/v1/pipelines/bad-{act}"),
            TOKEN,
            Duration::from_secs(120),
            |s| s["state"] != "running",
        );
        let failure = status["failure"].as_str().unwrap_or_default();
        assert_eq!(status["state"], "failed", "{act}: {status}");
        for part in *expected {
            assert!(failure.contains(part), "{act}: the failure names {part:?}: {failure}");
        }
        if *act == "emit-flood" {
            assert!(
                failure.contains("deadline exceeded") || failure.contains("emitted more than"),
                "{failure}"
            );
        }
    }
    eprintln!(
        "all {} misbehaving pipelines failed within {:?} of their deploy",
        MISBEHAVIOURS.len(),
        started.elapsed()
    );

    // The healthy pipeline ran on: finished, with the results of a run on
    // its own; the server stayed up (the same process throughout).
    let status = server.wait_for("/v1/pipelines/healthy", TOKEN, Duration::from_secs(300), |s| {
        s["state"] != "running"
    });
    assert_eq!(status["state"], "finished", "{status}");
    assert_eq!(server.call("GET", "/healthz", None, b"").0, 200);
    assert!(server.is_alive(), "the server never restarted");
    let alone_out = dir.path().join("alone.jsonl");
    let alone = dir.path().join("alone.yaml");
    std::fs::write(&alone, healthy_spec(&alone_out, &format!("wasm: {:?}", function("revenue"))))
        .unwrap();
    run_ok(&alone, &dir.path().join("data-alone"), &[]);
    assert_eq!(
        sorted_lines(&healthy_out),
        sorted_lines(&alone_out),
        "the healthy pipeline's results are exact"
    );
    assert_eq!(sorted_lines(&healthy_out).len(), 300_000);
}

#[test]
fn dead_letters_set_offending_events_aside_and_undo_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let bad = [
        ("trap", "c2"),
        ("fail", "c1"),
        ("loop", "c3"),
        ("alloc", "c0"),
        ("key-trap", "c2"),
        ("bad-handle", "c1"),
        ("key-loop", "c0"),
    ];
    std::fs::write(&input, events(4, 50, 77, &bad)).unwrap();
    let (output, dead) = (dir.path().join("out.jsonl"), dir.path().join("dead.jsonl"));
    let wasm = function("misbehaving");
    let spec = dir.path().join("pipeline.yaml");
    std::fs::write(
        &spec,
        format!(
            "name: dead-letters\nparallelism: 2\nbatch_size: 32\nsource: {{ type: file, path: {input:?} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {output:?} }}\n\
             on_error: {{ dead-letter: dead }}\nside_outputs: {{ dead: {{ type: file, path: {dead:?} }} }}\n\
             limits: {{ call_timeout: 50ms, memory: 32MiB }}\n"
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);

    // Every customer counts 1..=50 without a gap: each offending event
    // wrote its count before misbehaving, and that write was undone.
    let counts = counts_per_customer(&output);
    for customer in ["c0", "c1", "c2", "c3"] {
        assert_eq!(counts[customer], (1..=50).collect::<Vec<u64>>(), "{customer}");
    }

    // The dead letters: each offending event, once, with its cause.
    let letters = records(&dead);
    assert_eq!(letters.len(), bad.len(), "{letters:?}");
    let cause = |act: &str| {
        let letter = letters
            .iter()
            .find(|l| l["value"].as_str().unwrap().contains(&format!("\"act\":\"{act}\"")))
            .unwrap_or_else(|| panic!("no letter for {act}: {letters:?}"));
        letter["error"].as_str().unwrap().to_string()
    };
    assert!(
        cause("trap").contains("trapped while processing key \"c2\"")
            && cause("trap").contains("asked to trap"),
        "{}",
        cause("trap")
    );
    assert!(cause("fail").contains("asked to fail"), "{}", cause("fail"));
    assert!(
        cause("loop").contains("deadline exceeded: a call used more than 50ms"),
        "{}",
        cause("loop")
    );
    assert!(cause("alloc").contains("memory limit of 32 MiB exceeded"), "{}", cause("alloc"));
    assert!(
        cause("key-trap").contains("trapped while computing the keys of 1 events"),
        "{}",
        cause("key-trap")
    );
    assert!(cause("bad-handle").contains("unknown handle"), "{}", cause("bad-handle"));
    assert!(cause("key-loop").contains("deadline exceeded"), "{}", cause("key-loop"));
    assert_eq!(
        letters.iter().filter(|l| l["key"].is_string()).count(),
        5,
        "process-function letters carry their key: {letters:?}"
    );
}

#[test]
fn dead_letters_of_every_stage_of_a_graph_go_to_the_node_that_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.jsonl");
    let bad = [("trap", "c2"), ("fail", "c1"), ("key-trap", "c3")];
    std::fs::write(&input, events(4, 30, 41, &bad)).unwrap();
    let (output, dead) = (dir.path().join("out.jsonl"), dir.path().join("dead.jsonl"));
    let wasm = function("misbehaving");
    let spec = dir.path().join("pipeline.yaml");
    // Two keyed stages, each counting per customer; the second counts the
    // first's results, re-keyed by the same function.
    std::fs::write(
        &spec,
        format!(
            "name: graph-letters\nparallelism: 2\nbatch_size: 16\n\
             on_error: {{ dead-letter: dead }}\nlimits: {{ call_timeout: 50ms }}\n\
             operators:\n\
             \x20 events: {{ source: {{ type: file, path: {input:?} }} }}\n\
             \x20 first: {{ inputs: [events], key: {{ wasm: {wasm:?} }}, process: {{ wasm: {wasm:?} }} }}\n\
             \x20 second: {{ inputs: [first], key: {{ wasm: {wasm:?} }}, process: {{ wasm: {wasm:?} }}, parallelism: 3 }}\n\
             \x20 out: {{ inputs: [second], sink: {{ type: file, path: {output:?} }} }}\n\
             \x20 letters: {{ inputs: [events.dead, first.dead, second.dead], sink: {{ type: file, path: {dead:?} }} }}\n"
        ),
    )
    .unwrap();
    run_ok(&spec, &dir.path().join("data"), &[]);
    // Each stage counted every good event once: the second stage's counts
    // run 1..=30 for every customer.
    let counts = counts_per_customer(&output);
    for customer in ["c0", "c1", "c2", "c3"] {
        assert_eq!(counts[customer], (1..=30).collect::<Vec<u64>>(), "{customer}");
    }
    let letters = records(&dead);
    assert_eq!(letters.len(), bad.len(), "{letters:?}");
    for (act, words) in [
        ("trap", "trapped while processing key \"c2\""),
        ("fail", "asked to fail"),
        ("key-trap", "trapped while computing the keys of 1 events"),
    ] {
        let letter = letters
            .iter()
            .find(|l| l["value"].as_str().unwrap().contains(&format!("\"act\":\"{act}\"")))
            .unwrap_or_else(|| panic!("no letter for {act}: {letters:?}"));
        assert!(letter["error"].as_str().unwrap().contains(words), "{letter}");
    }
}

#[test]
fn functions_read_only_the_granted_resources_directory() {
    let dir = tempfile::tempdir().unwrap();
    let resources = dir.path().join("resources");
    std::fs::create_dir(&resources).unwrap();
    std::fs::write(resources.join("rates.txt"), "# cents of USD per 100\nEUR 110\nUSD 100\n")
        .unwrap();
    let input = dir.path().join("payments.jsonl");
    std::fs::write(&input, "{\"customer\":\"c1\",\"amount_cents\":250,\"currency\":\"EUR\"}\n{\"customer\":\"c1\",\"amount_cents\":1000,\"currency\":\"USD\"}\n").unwrap();
    let output = dir.path().join("out.jsonl");
    let wasm = function("currency");
    let spec = |grant: &str| {
        let path = dir.path().join("pipeline.yaml");
        std::fs::write(
            &path,
            format!("name: currency\nfresh: true\n{grant}source: {{ type: file, path: {input:?} }}\nkey: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\nsink: {{ type: file, path: {output:?} }}\n"),
        )
        .unwrap();
        path
    };

    run_ok(&spec(&format!("resources: {resources:?}\n")), &dir.path().join("data"), &[]);
    let out = records(&output);
    assert_eq!(
        (out[0]["usd_cents"].as_i64(), out[1]["usd_total"].as_i64()),
        (Some(275), Some(1275)),
        "{out:?}"
    );

    // Without the grant the function sees no directory and says so.
    let failed = weir(&[
        "run",
        spec("").to_str().unwrap(),
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success() && stderr.contains("no resources directory"), "{stderr}");

    // A grant that is not a directory is refused before anything runs.
    let failed = weir(&[
        "run",
        spec(&format!("resources: {:?}\n", resources.join("rates.txt"))).to_str().unwrap(),
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success() && stderr.contains("is not a directory"), "{stderr}");
}
