//! The graph examples: `functions/orders-payments` (two sources, an
//! interval join) and `functions/region-top3` (two keyed stages, re-keyed
//! between them), run from their own `pipeline.yaml` at parallelism 1 and
//! 3 per keyed stage and compared line by line with their `expected.jsonl`
//! (written by each example's `expected.py`, independently of the host).
//!
//! Also [`interval_join_expected`]: the output of an interval join of any
//! two files, computed here without the host's code, for tests of their own.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use serde_yaml::Value as Yaml;

use crate::support::*;

/// Parallelism of each keyed stage, by operator name.
pub(crate) type Stages<'a> = &'a [(&'a str, u32)];

/// Copy example `example`'s `pipeline.yaml` and `inputs` into a temporary
/// directory, with its functions taken from the built ones, the top-level
/// parallelism set to `parallelism` and each keyed operator of `stages`
/// given its own; run it with `weir run` and return the lines of sink file
/// `sink`.
pub(crate) fn run_example(
    example: &str,
    inputs: &[&str],
    sink: &str,
    parallelism: u32,
    stages: Stages<'_>,
) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for input in inputs {
        std::fs::copy(example_file(example, input), dir.path().join(input)).unwrap();
    }
    let text = std::fs::read_to_string(example_file(example, "pipeline.yaml")).unwrap();
    let mut spec: Yaml = serde_yaml::from_str(&text).unwrap();
    spec["parallelism"] = parallelism.into();
    let operators = spec["operators"].as_mapping_mut().expect("a graph spec has operators");
    for (name, node) in operators.iter_mut() {
        let node = node.as_mapping_mut().unwrap();
        for role in ["key", "process", "aggregate", "window_process", "co_process", "transform"] {
            if let Some(named) = node.get_mut(role) {
                let wasm = named["wasm"].as_str().expect("the examples name .wasm files");
                let stem = Path::new(wasm).file_stem().unwrap().to_str().unwrap().to_string();
                named["wasm"] = function(&stem).to_str().unwrap().into();
            }
        }
        if let Some((_, p)) = stages.iter().find(|(stage, _)| name.as_str() == Some(stage)) {
            assert!(node.contains_key("key"), "{name:?} is a keyed stage");
            node.insert("parallelism".into(), (*p).into());
        }
    }
    let path = dir.path().join("pipeline.yaml");
    std::fs::write(&path, serde_yaml::to_string(&spec).unwrap()).unwrap();
    run_ok(&path, &dir.path().join("data"), &["--fresh"]);
    std::fs::read_to_string(dir.path().join(sink)).unwrap().lines().map(String::from).collect()
}

/// `lines` sorted by `key` of each line's JSON (the expected files' order).
pub(crate) fn sorted_by<K: Ord>(mut lines: Vec<String>, key: impl Fn(&Value) -> K) -> Vec<String> {
    lines.sort_by_cached_key(|line| {
        key(&serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
    });
    lines
}

/// The lines of `example`'s `expected.jsonl`.
pub(crate) fn expected(example: &str) -> Vec<String> {
    std::fs::read_to_string(example_file(example, "expected.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The order of `orders-payments/expected.jsonl`: order id, then payment id.
fn by_order_then_payment(record: &Value) -> (u64, String) {
    (
        record["left"]["order_id"].as_u64().unwrap(),
        record["right"]["payment_id"].as_str().unwrap().to_string(),
    )
}

/// The order of `region-top3/expected.jsonl`: window start, then region.
fn by_window_then_region(record: &Value) -> (i64, String) {
    (record["window_start"].as_i64().unwrap(), record["region"].as_str().unwrap().to_string())
}

#[test]
fn orders_join_their_payments_exactly_at_parallelism_one_and_three() {
    let expected = expected("orders-payments");
    assert_eq!(expected.len(), 275);
    for parallelism in [1, 3] {
        let output = run_example(
            "orders-payments",
            &["orders.jsonl", "payments.jsonl"],
            "paid.jsonl",
            parallelism,
            &[("paid", parallelism)],
        );
        assert_eq!(sorted_by(output, by_order_then_payment), expected, "parallelism {parallelism}");
    }
}

#[test]
fn the_top_three_per_region_are_exact_at_parallelism_one_and_three_per_stage() {
    let expected = expected("region-top3");
    assert_eq!(expected.len(), 32);
    for (revenue, top3) in [(1, 1), (3, 3), (1, 3), (3, 1)] {
        let output = run_example(
            "region-top3",
            &["orders-with-region.jsonl"],
            "top3.jsonl",
            1,
            &[("revenue", revenue), ("top3", top3)],
        );
        assert_eq!(
            sorted_by(output, by_window_then_region),
            expected,
            "revenue at parallelism {revenue}, top3 at {top3}"
        );
    }
}

#[test]
fn fraud_alerts_follow_the_broadcast_rules_as_they_change_at_parallelism_one_and_three() {
    let mut expected =
        std::fs::read_to_string(example_file("fraud-rules", "expected-alerts.jsonl"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>();
    expected.sort();
    assert_eq!(expected.len(), 80);
    for parallelism in [1, 3] {
        let mut output = run_example(
            "fraud-rules",
            &["transactions.jsonl", "rules.jsonl"],
            "alerts.jsonl",
            parallelism,
            &[("detect", parallelism)],
        );
        output.sort();
        assert_eq!(output, expected, "parallelism {parallelism}");
    }
}

#[test]
fn the_two_stages_chained_through_a_file_give_the_expected_top_three() {
    // The region-top3 functions as two one-line pipelines, the first's
    // output file the second's input: what the graph must equal.
    let dir = tempfile::tempdir().unwrap();
    let (revenue, top3) = (function("customer-revenue"), function("region-top3"));
    let input = example_file("region-top3", "orders-with-region.jsonl");
    let stage = |name: &str, parallelism: u32, input: &Path, keyed: String, output: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nparallelism: {parallelism}\nbatch_size: 1\n\
                 watermark: {{ max_out_of_orderness: 5s }}\n\
                 source: {{ type: file, path: {input:?}, timestamp_field: event_time }}\n\
                 {keyed}sink: {{ type: file, path: {output} }}\n"
            ),
        )
        .unwrap();
        run_ok(&path, &dir.path().join("data"), &["--fresh"]);
    };
    // Parallelism 1 keeps the first stage's output in event-time order.
    stage(
        "revenue",
        1,
        &input,
        format!("key: {{ wasm: {revenue:?} }}\nprocess: {{ wasm: {revenue:?} }}\n"),
        "revenue.jsonl",
    );
    stage(
        "top3",
        3,
        &dir.path().join("revenue.jsonl"),
        format!(
            "key: {{ wasm: {top3:?} }}\nwindow: {{ type: tumbling, size: 1m }}\n\
             aggregate: {{ wasm: {top3:?} }}\n"
        ),
        "top3.jsonl",
    );
    let output = std::fs::read_to_string(dir.path().join("top3.jsonl")).unwrap();
    assert_eq!(
        sorted_by(output.lines().map(String::from).collect(), by_window_then_region),
        expected("region-top3")
    );
}

#[test]
fn the_join_helper_agrees_with_the_example_s_expected_py() {
    // Two independent models of the join: expected.py replays it on many
    // interleavings of the sources; the helper reasons per pair.
    let read = |file| std::fs::read_to_string(example_file("orders-payments", file)).unwrap();
    let lines = interval_join_expected(
        &read("orders.jsonl"),
        &read("payments.jsonl"),
        &IntervalJoin::orders_payments(),
    )
    .unwrap();
    assert_eq!(sorted_by(lines, by_order_then_payment), expected("orders-payments"));
}

#[test]
fn the_join_helper_refuses_data_whose_result_depends_on_interleaving() {
    let order = |id, time| {
        format!(
            "{{\"order_id\":{id},\"customer_id\":1,\"amount\":1.00,\"event_time\":\"2026-01-15T10:{time}Z\"}}\n"
        )
    };
    let payment = |id, time| {
        format!(
            "{{\"payment_id\":\"p{id}\",\"order_id\":{id},\"amount\":1.00,\"event_time\":\"2026-01-15T10:{time}Z\"}}\n"
        )
    };
    let join = IntervalJoin::orders_payments();
    // In order on both sides: one match, whatever the interleaving.
    let orders = order(1, "00:00") + &order(2, "30:00");
    let payments = payment(1, "05:00") + &payment(2, "31:00");
    assert_eq!(interval_join_expected(&orders, &payments, &join).unwrap().len(), 2);
    // Both sides of order 1 late in their own file: never a match.
    let orders = order(2, "30:00") + &order(1, "00:00");
    let payments = payment(2, "31:00") + &payment(1, "05:00");
    let lines = interval_join_expected(&orders, &payments, &join).unwrap();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("\"order_id\":2"));
    // Only the payment late: it matches if the orders source lags behind.
    let orders = order(1, "00:00") + &order(2, "30:00");
    let payments = payment(2, "31:00") + &payment(1, "05:00");
    let error = interval_join_expected(&orders, &payments, &join).unwrap_err();
    assert!(error.contains("\"payment_id\":\"p1\""), "{error}");
}

/// An interval join as a spec declares it, and what it reads.
pub struct IntervalJoin {
    /// `join.lower` in ms: a right event at least this after the left one.
    pub lower: i64,
    /// `join.upper` in ms: a right event at most this after the left one.
    pub upper: i64,
    /// `watermark.max_out_of_orderness` in ms.
    pub out_of_orderness: i64,
    /// The JSON field both sides are keyed by (what the key function reads).
    pub key_field: &'static str,
    /// The sources' `timestamp_field` (RFC 3339 text or epoch ms).
    pub timestamp_field: &'static str,
}

impl IntervalJoin {
    /// The `functions/orders-payments` join: order id, 0 s to 10 min, 5 s.
    pub fn orders_payments() -> Self {
        Self {
            lower: 0,
            upper: 600_000,
            out_of_orderness: 5_000,
            key_field: "order_id",
            timestamp_field: "event_time",
        }
    }
}

/// The output lines (sorted as text) of an interval join of `left` and
/// `right` (JSON lines, each file one source with its own watermark), or an
/// error naming a pair whose fate depends on how the sources interleave.
///
/// The model, independent of the host's code: a source's watermark after
/// each event is the newest timestamp it has read − out-of-orderness −
/// 1 ms (a watermark after every event: `batch_size: 1`); a finished
/// source stops holding event time back; the join's watermark `W` is the
/// minimum of its inputs'. A left event at `t` is dropped as late when
/// `t + upper < W` on arrival, a right one when `t − lower < W`; state is
/// forgotten under the same conditions. So a pair with `l + lower ≤ r ≤
/// l + upper` (both bounds inclusive) is emitted iff `min(l + upper, r −
/// lower) ≥ W` when its second event arrives. `W` then lies between the
/// watermarks the two events' own sources had before them (each side's
/// events arrive in file order; the other side may lag or be done): the
/// pair is certain above the higher, impossible below the lower, and in
/// between depends on interleaving (an error). Each output line is
/// `{"left":<left line>,"right":<right line>}`, the lines verbatim.
///
/// Checkpoints: with restarts (kill -9), a restored run may start its
/// watermarks afresh, so use data in which no pair is near late (every
/// event within the out-of-orderness of its file's newest) to compare a
/// run with failures against this.
pub fn interval_join_expected(
    left: &str,
    right: &str,
    join: &IntervalJoin,
) -> Result<Vec<String>, String> {
    let left = events(left, join);
    let right = events(right, join);
    let mut by_key: BTreeMap<String, Vec<&Event>> = BTreeMap::new();
    for event in &right {
        by_key.entry(event.key.clone()).or_default().push(event);
    }
    let mut lines = Vec::new();
    for l in &left {
        for r in by_key.get(&l.key).into_iter().flatten() {
            if r.time < l.time + join.lower || r.time > l.time + join.upper {
                continue;
            }
            let threshold = (l.time + join.upper).min(r.time - join.lower);
            let (low, high) = (l.watermark.min(r.watermark), l.watermark.max(r.watermark));
            if threshold >= high {
                lines.push(format!("{{\"left\":{},\"right\":{}}}", l.line, r.line));
            } else if threshold >= low {
                return Err(format!(
                    "whether {} joins {} depends on how the two sources interleave: \
                     one of them is late in its own file",
                    l.line, r.line
                ));
            }
        }
    }
    lines.sort();
    Ok(lines)
}

/// One input line of a join.
struct Event {
    line: String,
    key: String,
    time: i64,
    /// The watermark of its source just before it (`i64::MIN`: none yet).
    watermark: i64,
}

/// The events of a JSON-lines file, with the watermark each one meets.
fn events(text: &str, join: &IntervalJoin) -> Vec<Event> {
    let mut newest = None::<i64>;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let time = match &value[join.timestamp_field] {
            Value::String(text) => humantime::parse_rfc3339(text)
                .unwrap_or_else(|e| panic!("{line}: {e}"))
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64,
            other => other.as_i64().unwrap_or_else(|| panic!("{line}: no timestamp")),
        };
        let watermark = newest.map_or(i64::MIN, |n| n - join.out_of_orderness - 1);
        out.push(Event {
            line: line.to_string(),
            key: value[join.key_field].to_string(),
            time,
            watermark,
        });
        newest = Some(newest.map_or(time, |n| n.max(time)));
    }
    out
}
