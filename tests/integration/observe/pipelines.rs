//! Looking into running pipelines on the real `weir serve`: the metrics
//! in the status and on `/metrics`, a key's state read while the pipeline
//! runs, a tail of its output, a checkpoint's reported size against its
//! files, a slow sink showing up as backpressure upstream, and sources
//! waiting for input (a paced generator, Kafka on a trickling topic)
//! reading as idle.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::kafka::{unique, TestKafka};
use crate::support::*;

const TOKEN: Option<&str> = Some("l00k");

/// The revenue example's orders, one per line.
fn example_orders() -> Vec<String> {
    let text = std::fs::read_to_string(revenue_orders()).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

/// Bytes on disk of every file checkpoint `location` references (its own
/// and the shared ones).
fn referenced_bytes(location: &str) -> u64 {
    let dir = PathBuf::from(location.strip_prefix("file://").unwrap_or(location));
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("_metadata")).unwrap()).unwrap();
    let shared = dir.parent().unwrap().join("shared");
    // A checkpoint's own files are under its writer's generation.
    let own = match metadata["generation"].as_u64().unwrap_or(0) {
        0 => dir.to_path_buf(),
        generation => dir.join(format!("g{generation}")),
    };
    let mut states = vec![metadata["state"].clone()];
    states
        .extend(metadata["operators"].as_array().into_iter().flatten().map(|o| o["state"].clone()));
    let mut total = 0;
    for state in states {
        for (index, files) in state["subtasks"].as_array().into_iter().flatten().enumerate() {
            for file in files.as_array().unwrap() {
                let path = match file["shared"].as_str() {
                    Some(name) => shared.join(name),
                    None => {
                        own.join(format!("subtask-{index}")).join(file["name"].as_str().unwrap())
                    }
                };
                total += std::fs::metadata(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")).len();
            }
        }
    }
    total
}

/// `GET path` as the raw body text (a tail's server-sent events).
fn text(server: &Server, path: &str) -> (u16, String) {
    let (status, body) = server.raw("GET", path.as_bytes(), TOKEN, b"");
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn a_running_pipelines_state_output_and_metrics_are_read_without_stopping_it() {
    let kafka = TestKafka::start();
    let orders = unique("observed-orders");
    kafka.create_topic(&orders, 1);
    for order in example_orders() {
        kafka.produce(&orders, Some(0), None, order.as_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--token", "l00k"]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", TOKEN, &wasm).0, 201);
    let source = format!(
        "{{ type: kafka, bootstrap_servers: {:?}, topics: [{orders}], timestamp_field: event_time }}",
        kafka.bootstrap()
    );
    let spec = stored_revenue_spec(
        "observed",
        &source,
        "{ type: discard }",
        "parallelism: 2\ncheckpoint: { interval: 200ms }\nwatermark: { max_out_of_orderness: 5s }\n",
    );
    let (status, body) = server.call("POST", "/v1/pipelines", TOKEN, spec.as_bytes());
    assert_eq!(status, 201, "{body}");
    let path = "/v1/pipelines/observed";
    let status = server.wait_for(path, TOKEN, Duration::from_secs(60), |s| {
        s["counts"]["sink_records"].as_u64() >= Some(7)
            && s["metrics"]["checkpoints"]["completed"].as_u64() >= Some(2)
    });

    // State: exactly the example's totals (c1 50.00, c2 48.00, c3 17.00),
    // read from the running pipeline.
    for (customer, cents) in [("1", 5000), ("2", 4800), ("3", 1700)] {
        let query = format!("{path}/state?state=total&key={customer}&decode=i64");
        let (code, answer) = server.call("GET", &query, TOKEN, b"");
        assert_eq!(code, 200, "{answer}");
        assert_eq!(answer["found"], true, "{answer}");
        assert_eq!(
            (answer["kind"].as_str(), answer["value"].as_i64()),
            (Some("value"), Some(cents))
        );
        assert_eq!(answer["operator"], "process", "the only keyed operator by default");
    }
    let url = server.url();
    let cli =
        ["pipeline", "state", "observed", "--state", "total", "--key", "2", "--decode", "i64"];
    let printed = weir(&[&cli[..], &["--server", &url, "--token", "l00k"]].concat());
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), "4800");
    // revenue declares its total an i64: by default it reads as the number.
    let (code, typed) = server.call("GET", &format!("{path}/state?state=total&key=1"), TOKEN, b"");
    assert_eq!((code, typed["encoding"].as_str()), (200, Some("declared")), "{typed}");
    assert_eq!(typed["value"], 5000, "{typed}");
    assert_eq!(typed["declared"], serde_json::json!({"kind": "value", "type": "i64"}), "{typed}");
    let cli = ["pipeline", "state", "observed", "--state", "total", "--key", "3"];
    let printed = weir(&[&cli[..], &["--server", &url, "--token", "l00k"]].concat());
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), "1700", "the total, not its bytes");
    let raw_query = format!("{path}/state?state=total&key=1&decode=bytes");
    let (code, raw) = server.call("GET", &raw_query, TOKEN, b"");
    assert_eq!((code, raw["encoding"].as_str()), (200, Some("bytes")), "as asked");
    assert_eq!(raw["value"], "904e", "5000 as postcard's zigzag varint, in hex");
    let undeclared = format!("{path}/state?state=other&key=1&decode=declared");
    assert_eq!(server.call("GET", &undeclared, TOKEN, b"").0, 400, "no type declared for it");
    let (_, absent) = server.call("GET", &format!("{path}/state?state=total&key=9"), TOKEN, b"");
    assert_eq!((absent["found"].as_bool(), absent["value"].is_null()), (Some(false), true));
    let unknown =
        server.call("GET", &format!("{path}/state?operator=nope&state=total&key=1"), TOKEN, b"");
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    assert!(unknown.1["error"]["message"].as_str().unwrap().contains("process"), "{}", unknown.1);
    assert_eq!(server.call("GET", &format!("{path}/state?key=1"), TOKEN, b"").0, 400);
    assert_eq!(server.call("GET", &format!("{path}/state?state=total&key=1"), None, b"").0, 401);
    assert_eq!(server.call("GET", &format!("{path}/tail"), None, b"").0, 401);

    // Metrics in the status: the graph, every task, checkpoints.
    let metrics = &status["metrics"];
    let ids: Vec<&str> = metrics["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["source", "key", "process", "main"], "{metrics}");
    assert_eq!(metrics["operators"][2]["subtasks"].as_array().map(Vec::len), Some(2));
    let edges = metrics["edges"].as_array().unwrap();
    assert!(edges.contains(&serde_json::json!(["source", "process"])), "{metrics}");
    assert!(edges.contains(&serde_json::json!(["process", "main"])), "{metrics}");
    let keyed: u64 = metrics["operators"][2]["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["records_in"].as_u64().unwrap())
        .sum();
    assert_eq!(keyed, 7, "{metrics}");
    assert!(metrics["watermark_lag_ms"].as_i64() > Some(0), "{metrics}");
    // The source's partition: its watermark, and no lag once all is read.
    let status = server.wait_for(path, TOKEN, Duration::from_secs(30), |s| {
        s["metrics"]["operators"][0]["subtasks"][0]["splits"][0]["lag"] == 0
    });
    let split = &status["metrics"]["operators"][0]["subtasks"][0]["splits"][0];
    assert_eq!(split["split"].as_str(), Some(format!("{orders}/0").as_str()), "{split}");
    assert!(split["watermark"].as_i64() > Some(1_768_471_200_000), "{split}");

    // The newest checkpoint's size is the files it references.
    let (_, list) = server.call("GET", &format!("{path}/checkpoints"), TOKEN, b"");
    let newest = &list["checkpoints"][0];
    let location = newest["location"].as_str().unwrap();
    assert_eq!(newest["size_bytes"].as_u64(), Some(referenced_bytes(location)), "{newest}");
    assert!(newest["size_bytes"].as_u64() > Some(0));
    // Its alignment is kept with it: part of its duration.
    let alignment = newest["alignment_ms"].as_u64().expect("alignment_ms");
    assert!(Some(alignment) <= newest["duration_ms"].as_u64(), "{newest}");

    // Prometheus: per task, labelled.
    let (_, text_metrics) = server.call("GET", "/metrics", TOKEN, b"");
    let text_metrics = text_metrics.as_str().unwrap().to_string();
    let lag_line = format!("weir_source_split_lag_records{{pipeline=\"observed\",operator=\"source\",subtask=\"0\",split=\"{orders}/0\"}} 0");
    for family in [
        "weir_task_busy_seconds_total{pipeline=\"observed\",operator=\"process\",kind=\"keyed\",subtask=\"1\"}",
        "weir_task_backpressured_milliseconds_per_second{pipeline=\"observed\",operator=\"source\"",
        "weir_task_state_bytes{pipeline=\"observed\",operator=\"process\"",
        "weir_snapshots_failed_total{pipeline=\"observed\"} 0",
        "weir_pipeline_restarts_total{pipeline=\"observed\"} 0",
        lag_line.as_str(),
    ] {
        assert!(text_metrics.contains(family), "{family} missing from\n{text_metrics}");
    }

    // Tail: a reader sees new output as it is written, then its stream ends.
    let tail = std::thread::scope(|scope| {
        let reader =
            scope.spawn(|| text(&server, &format!("{path}/tail?output=main&limit=3&rate=100")));
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut order_id = 1000;
        while !reader.is_finished() {
            assert!(Instant::now() < deadline, "the tail never got 3 events");
            order_id += 1;
            let order = format!(
                "{{\"order_id\":{order_id},\"customer_id\":1,\"amount\":1.00,\"event_time\":\"2026-01-15T10:05:00Z\"}}"
            );
            kafka.produce(&orders, Some(0), None, order.as_bytes());
            std::thread::sleep(Duration::from_millis(200));
        }
        reader.join().unwrap()
    });
    assert_eq!(tail.0, 200, "{}", tail.1);
    let events: Vec<serde_json::Value> = tail
        .1
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{}", tail.1);
    let value: serde_json::Value =
        serde_json::from_str(events[0]["value"].as_str().unwrap()).unwrap();
    assert_eq!(value["customer_id"], 1, "{value}");
    assert!(value["order_id"].as_u64() > Some(1000), "only output written after it began: {value}");
    let (code, body) = text(&server, &format!("{path}/tail?output=nope"));
    assert!(code == 404 && body.contains("main"), "{code} {body}");
    assert_eq!(server.call("DELETE", path, TOKEN, b"").0, 204);
}

#[test]
fn a_slow_sink_shows_as_backpressure_upstream_and_a_busy_sink() {
    let dir = tempfile::tempdir().unwrap();
    let data: &Path = &dir.path().join("data");
    let server = Server::start_with_env(data, &[], &[("WEIR_SINK_DELAY_MS", "20")]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let source = "{ type: generator, count: 100000000, keys: 100 }";
    let spec = stored_revenue_spec("slow", source, "{ type: discard }", "parallelism: 2\n");
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    // The least of `field` over the tasks of operator `operator` (0 when
    // it has none yet).
    let task = |s: &serde_json::Value, operator: usize, field: &str| -> f64 {
        let tasks = s["metrics"]["operators"][operator]["subtasks"].as_array().cloned();
        let values = tasks
            .unwrap_or_default()
            .iter()
            .map(|t| t[field].as_f64().unwrap_or(0.0))
            .collect::<Vec<_>>();
        values.iter().copied().reduce(f64::min).unwrap_or(0.0)
    };
    // Every keyed subtask spends most of each second waiting for the sink,
    // which spends most of it writing.
    let status = server.wait_for("/v1/pipelines/slow", None, Duration::from_secs(60), |s| {
        task(s, 2, "backpressured_ms_per_second") > 600.0
            && task(s, 3, "busy_ms_per_second") > 600.0
    });
    let sink = &status["metrics"]["operators"][3]["subtasks"][0];
    assert!(sink["backpressured_ms_per_second"].as_f64() < Some(100.0), "{sink}");
    assert!(sink["call_ms_per_second"].as_f64() > Some(500.0), "writing: {sink}");
    assert_eq!(server.call("DELETE", "/v1/pipelines/slow", None, b"").0, 204);
}

/// The console's colour for a task's figures (`pressure` in
/// console/src/model.js, run with Node), or `None` without Node.
fn console_pressure(task: &serde_json::Value) -> Option<String> {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../console/src/model.js");
    let script = format!(
        "import({:?}).then((m) => console.log(m.pressure(JSON.parse(process.argv[1]))))",
        format!("file://{}", model.canonicalize().unwrap().display())
    );
    let output = std::process::Command::new("node")
        .args(["-e", &script, &task.to_string()])
        .output()
        .ok()?;
    assert!(output.status.success(), "{output:?}");
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

#[test]
fn a_source_keeping_to_its_pace_reads_as_idle_not_busy() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    // Far below what even a debug build reads: the source sleeps most of
    // each second until its next events are due.
    let source = "{ type: generator, count: 100000000, keys: 100, rate: 2000 }";
    let spec = stored_revenue_spec("paced", source, "{ type: discard }", "parallelism: 1\n");
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    let path = "/v1/pipelines/paced";
    let source_task = |s: &serde_json::Value| s["metrics"]["operators"][0]["subtasks"][0].clone();
    // Rates over a second the source spent wholly at its pace.
    let status = server.wait_for(path, None, Duration::from_secs(60), |s| {
        source_task(s)["records_out_per_second"].as_f64() > Some(1000.0)
            && source_task(s)["records_out"].as_u64() > Some(4000)
    });
    let task = source_task(&status);
    let share = |field: &str| task[field].as_f64().unwrap();
    let (busy, idle, backpressured) = (
        share("busy_ms_per_second"),
        share("idle_ms_per_second"),
        share("backpressured_ms_per_second"),
    );
    println!(
        "source paced at 2000/s: {:.0} events/s, busy {busy:.1} ms/s, idle {idle:.1} ms/s, \
         backpressured {backpressured:.1} ms/s",
        share("records_out_per_second")
    );
    assert_eq!(task["records_out_per_second"].as_f64().map(|r| r > 1000.0), Some(true));
    // Wide margins, not timing: idle is most of its time and busy a small
    // part, well under the half the console draws orange.
    assert!(busy < 350.0 && idle > 1.5 * busy, "busy {busy}, idle {idle}: {task}");
    assert!(backpressured < 100.0, "{task}");
    // The console draws it green (`pressure` in console/src/model.js).
    match console_pressure(&task) {
        Some(colour) => assert_eq!(colour, "ok", "{task}"),
        None => println!("node not found: the console's colour was not checked"),
    }
    // And `weir pipeline status` shows it mostly idle.
    let printed = weir(&["pipeline", "status", "paced", "--server", &server.url()]);
    assert!(printed.status.success(), "{printed:?}");
    let text = String::from_utf8_lossy(&printed.stdout).into_owned();
    println!("{text}");
    let line = text.lines().find(|l| l.trim_start().starts_with("source[0]")).expect("source row");
    let percents: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.strip_suffix('%'))
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(percents.len(), 3, "busy, backpressured, idle: {line}");
    assert!(percents[0] < 35.0 && percents[2] > 50.0, "{line}");
    assert_eq!(server.call("DELETE", path, None, b"").0, 204);
}

#[test]
fn a_kafka_source_on_a_trickling_topic_reads_as_idle_not_busy() {
    let kafka = TestKafka::start();
    let orders = unique("trickle-orders");
    kafka.create_topic(&orders, 1);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let wasm = std::fs::read(function("revenue")).unwrap();
    assert_eq!(server.call("PUT", "/v1/functions/revenue", None, &wasm).0, 201);
    let source = format!(
        "{{ type: kafka, bootstrap_servers: {:?}, topics: [{orders}], timestamp_field: event_time }}",
        kafka.bootstrap()
    );
    let spec = stored_revenue_spec("trickle", &source, "{ type: discard }", "parallelism: 1\n");
    assert_eq!(server.call("POST", "/v1/pipelines", None, spec.as_bytes()).0, 201);
    let path = "/v1/pipelines/trickle";
    let source_task = |s: &serde_json::Value| s["metrics"]["operators"][0]["subtasks"][0].clone();
    // A record every few tens of milliseconds: most of the source's reads
    // wait for one, and many get one after waiting.
    let done = std::sync::atomic::AtomicBool::new(false);
    let status = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut id = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                id += 1;
                let order = format!(
                    "{{\"order_id\":{id},\"customer_id\":{},\"amount\":1.00,\"event_time\":\"2026-01-15T10:05:00Z\"}}",
                    id % 7
                );
                kafka.produce(&orders, Some(0), None, order.as_bytes());
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let status = server.wait_for(path, None, Duration::from_secs(60), |s| {
            source_task(s)["records_out_per_second"].as_f64() > Some(2.0)
                && source_task(s)["records_out"].as_u64() > Some(50)
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        status
    });
    let task = source_task(&status);
    let share = |field: &str| task[field].as_f64().unwrap();
    let (busy, idle) = (share("busy_ms_per_second"), share("idle_ms_per_second"));
    println!(
        "kafka source on a trickle: {:.0} records/s, busy {busy:.1} ms/s, idle {idle:.1} ms/s",
        share("records_out_per_second")
    );
    assert!(busy < 350.0 && idle > 1.5 * busy, "busy {busy}, idle {idle}: {task}");
    assert_eq!(server.call("DELETE", path, None, b"").0, 204);
}
