//! The fraud-rules example through the runtime API: its key function and
//! broadcast process function, loaded from the built component, replayed
//! on the example data in event-time order (rules as broadcast events,
//! transactions keyed by account, event time at each transaction's) must
//! give `expected-alerts.jsonl`, on one subtask and on three that each see
//! every rule.

use weir_host::runtime::bindings::weir::function::types::KeyedEvents;
use weir_host::runtime::{
    new_engine, EngineLimits, FunctionLoader, HostCtx, KeyFunctionInstance, LoadedFunction,
    ProcessFunctionInstance, Role,
};
use weir_host::state::{key_group, subtask_for_key_group, InMemoryBackend};
use weir_host::Event;

use crate::support::*;

fn lines(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(example_file("fraud-rules", file)).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect()
}

/// The time of day of an RFC 3339 time of the example (one day), in ms.
fn millis(time: &str) -> i64 {
    let clock = &time[11..19];
    let part = |i: usize| clock[i..i + 2].parse::<i64>().unwrap();
    ((part(0) * 60 + part(3)) * 60 + part(6)) * 1000
}

/// Rules and transactions in event-time order (a rule first on a tie):
/// (is a rule, the line).
fn timeline() -> Vec<(bool, String)> {
    let time = |line: &str| -> String {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["time"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut all: Vec<(String, u8, usize, String)> = Vec::new();
    for (i, line) in lines("rules.jsonl").into_iter().enumerate() {
        all.push((time(&line), 0, i, line));
    }
    for (i, line) in lines("transactions.jsonl").into_iter().enumerate() {
        all.push((time(&line), 1, i, line));
    }
    all.sort();
    all.into_iter().map(|(_, kind, _, line)| (kind == 0, line)).collect()
}

fn load() -> LoadedFunction {
    let engine = new_engine(EngineLimits { instances: 8, ..Default::default() }).unwrap();
    let bytes = std::fs::read(function("fraud-rules")).unwrap();
    FunctionLoader::new(engine, None).unwrap().load(&bytes).unwrap()
}

/// Run the timeline over `parallelism` subtasks; every subtask gets every
/// rule, each transaction goes to its account's subtask. The alerts, in
/// the order each subtask emitted them, merged by transaction order.
fn run(function: &LoadedFunction, parallelism: u16) -> Vec<String> {
    const MAX_PARALLELISM: u16 = 128;
    let mut key = KeyFunctionInstance::new(function, "key", HostCtx::new("key", None, 1)).unwrap();
    let mut subtasks: Vec<ProcessFunctionInstance> = (0..parallelism)
        .map(|_| {
            let ctx =
                HostCtx::new("detect", Some(Box::new(InMemoryBackend::new())), MAX_PARALLELISM);
            ProcessFunctionInstance::new(function, "detect", ctx).unwrap()
        })
        .collect();
    assert!(subtasks.iter().all(|s| s.has_broadcast() && s.inputs() == 1));
    let mut alerts = Vec::new();
    for (is_rule, line) in timeline() {
        let time = serde_json::from_str::<serde_json::Value>(&line).unwrap()["time"]
            .as_str()
            .map(millis)
            .unwrap();
        let event =
            Event { key: None, value: line.into_bytes(), timestamp: time, headers: Vec::new() };
        if is_rule {
            for subtask in &mut subtasks {
                subtask.process_broadcast(std::slice::from_ref(&event)).unwrap();
                assert!(subtask.ctx().outputs.is_empty());
            }
            continue;
        }
        let keys = key.extract_keys(std::slice::from_ref(&event)).unwrap();
        let account = keys.get(0).to_vec();
        let group = key_group(&account, MAX_PARALLELISM);
        let subtask =
            &mut subtasks[usize::from(subtask_for_key_group(group, MAX_PARALLELISM, parallelism))];
        // Event time has reached the transaction: it is checked at once.
        subtask.ctx().set_watermark(time);
        subtask.process(&[KeyedEvents { key: account, events: vec![event] }]).unwrap();
        alerts.extend(
            std::mem::take(&mut subtask.ctx().outputs)
                .into_events()
                .into_iter()
                .map(|e| String::from_utf8(e.value).unwrap()),
        );
    }
    alerts
}

#[test]
fn alerts_follow_the_broadcast_rules_on_one_subtask_and_on_three() {
    let function = load();
    function.require(Role::Key).unwrap();
    function.require(Role::BroadcastProcess).unwrap();
    assert_eq!(
        function.worlds(),
        vec!["weir:function/key-function", "weir:function/broadcast-process-function"]
    );
    let expected = lines("expected-alerts.jsonl");
    assert!(expected.len() > 40, "the example has many alerts");
    for parallelism in [1, 3] {
        assert_eq!(run(&function, parallelism), expected, "parallelism {parallelism}");
    }
}

#[test]
fn a_bad_rule_fails_the_broadcast_call_and_a_good_one_applies_at_once() {
    let function = load();
    let ctx = HostCtx::new("detect", Some(Box::new(InMemoryBackend::new())), 128);
    let mut detect = ProcessFunctionInstance::new(&function, "detect", ctx).unwrap();
    let rule = |json: &str| Event {
        key: None,
        value: json.as_bytes().to_vec(),
        timestamp: 0,
        headers: Vec::new(),
    };
    let error = detect.process_broadcast(&[rule(r#"{"rule_id":"x"}"#)]).unwrap_err().to_string();
    assert!(
        error.contains("failed while processing 1 broadcast events")
            && error.contains("has no `max_amount`"),
        "{error}"
    );
    detect.process_broadcast(&[rule(r#"{"rule_id":"x","max_amount":1}"#)]).unwrap();
    let tx = rule(r#"{"transaction_id":1,"account_id":"a","amount":2}"#);
    detect.ctx().set_watermark(0);
    detect.process(&[KeyedEvents { key: b"a".to_vec(), events: vec![tx] }]).unwrap();
    assert_eq!(detect.ctx().outputs.len(), 1);
}
