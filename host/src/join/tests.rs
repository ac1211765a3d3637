//! The joins against hand-computed outputs and a brute-force model.

use std::collections::HashMap;

use super::*;
use crate::state::{InMemoryBackend, RocksDbBackend};

/// One step of a run: events of a side (key, value, timestamp), or a
/// watermark.
#[derive(Clone, Debug)]
enum Step {
    Events(usize, Vec<(&'static str, String, i64)>),
    Watermark(i64),
}

fn left(events: &[(&'static str, &str, i64)]) -> Step {
    Step::Events(0, events.iter().map(|&(k, v, t)| (k, v.to_string(), t)).collect())
}

fn right(events: &[(&'static str, &str, i64)]) -> Step {
    Step::Events(1, events.iter().map(|&(k, v, t)| (k, v.to_string(), t)).collect())
}

fn interval(lower: i64, upper: i64) -> JoinKind {
    JoinKind::Interval { lower, upper }
}

fn operator(
    kind: JoinKind,
    late: Option<&str>,
    backend: Box<dyn KeyedStateBackend>,
) -> JoinOperator {
    let config = JoinConfig { kind, late_output: late.map(str::to_string), max_parallelism: 16 };
    JoinOperator::new(config, backend).unwrap()
}

fn memory(kind: JoinKind, late: Option<&str>) -> JoinOperator {
    operator(kind, late, Box::new(InMemoryBackend::new()))
}

/// Run `steps`; the outputs as (value, timestamp).
fn run(join: &mut JoinOperator, steps: &[Step]) -> Vec<(String, i64)> {
    for step in steps {
        match step {
            Step::Events(side, events) => {
                let mut keys = KeyList::default();
                let batch = events
                    .iter()
                    .map(|(key, value, timestamp)| {
                        keys.push(key.as_bytes());
                        Event {
                            key: Some(key.as_bytes().to_vec()),
                            value: value.clone().into_bytes(),
                            timestamp: *timestamp,
                            headers: vec![("h".into(), b"x".to_vec())],
                        }
                    })
                    .collect();
                join.process(*side, &keys, batch).unwrap();
            }
            Step::Watermark(watermark) => join.on_watermark(*watermark).unwrap(),
        }
    }
    join.outputs
        .drain(..)
        .map(|e| {
            assert_eq!((e.key, e.headers.len()), (None, 0));
            (String::from_utf8(e.value).unwrap(), e.timestamp)
        })
        .collect()
}

fn pair(l: &str, r: &str, timestamp: i64) -> (String, i64) {
    (format!(r#"{{"left":{l},"right":{r}}}"#), timestamp)
}

/// Every stored entry.
fn entries(backend: &mut dyn KeyedStateBackend) -> Vec<(Vec<u8>, Vec<u8>)> {
    backend.scan(b"", None, usize::MAX).unwrap()
}

#[test]
fn interval_join_pairs_out_of_order_events_with_a_negative_lower_bound() {
    let mut join = memory(interval(-5, 10), None);
    let steps = [
        right(&[("k", r#"{"r":1}"#, 12), ("k", r#"{"r":2}"#, 3)]),
        left(&[("k", "first", 5), ("j", "other key", 5)]),
        left(&[("k", r#"{"l":0}"#, -2)]),
        right(&[("k", "r3", 0)]),
        Step::Watermark(i64::MAX),
    ];
    assert_eq!(
        run(&mut join, &steps),
        vec![
            // "first" at 5 meets the right side at [0, 15], in time order.
            pair(r#""first""#, r#"{"r":2}"#, 5),
            pair(r#""first""#, r#"{"r":1}"#, 12),
            // At -2: [-7, 8].
            pair(r#"{"l":0}"#, r#"{"r":2}"#, 3),
            // r3 at 0 meets lefts at [-10, 5], in time order.
            pair(r#"{"l":0}"#, r#""r3""#, 0),
            pair(r#""first""#, r#""r3""#, 5),
        ]
    );
    assert_eq!(join.dropped_late, 0);
    assert!(entries(join.backend_mut()).is_empty(), "nothing is left after the last watermark");
}

#[test]
fn interval_join_sets_late_events_aside_and_misses_no_pair_of_accepted_ones() {
    for late in [Some("late"), None] {
        let mut join = memory(interval(0, 10), late);
        let steps = [
            Step::Watermark(100),
            // Late: every partner time is at or behind the watermark.
            left(&[("k", "l90", 90), ("k", "l91", 91)]),
            right(&[("k", "r100", 100), ("k", "r101", 101)]),
        ];
        assert_eq!(run(&mut join, &steps), vec![pair(r#""l91""#, r#""r101""#, 101)]);
        match late {
            Some(name) => {
                let aside: Vec<_> = join
                    .side_outputs
                    .iter()
                    .map(|(n, e)| (n.as_str(), e.value.clone(), e.timestamp, e.headers.len()))
                    .collect();
                assert_eq!(
                    aside,
                    vec![(name, b"l90".to_vec(), 90, 1), (name, b"r100".to_vec(), 100, 1)],
                    "late events go out whole"
                );
                assert_eq!(join.dropped_late, 0);
            }
            None => assert_eq!((join.side_outputs.len(), join.dropped_late), (0, 2)),
        }
    }
    // A left event is kept until no right event accepted later can match
    // it: here until the watermark reaches 95 + 10 (Flink's cleanup at 95
    // would miss the pair).
    let mut join = memory(interval(-10, 0), None);
    let steps = [
        Step::Watermark(90),
        left(&[("k", "l95", 95)]),
        Step::Watermark(100),
        right(&[("k", "r95", 95)]),
    ];
    assert_eq!(run(&mut join, &steps), vec![pair(r#""l95""#, r#""r95""#, 95)]);
}

#[test]
fn interval_join_state_shrinks_as_the_watermark_passes() {
    let mut join = memory(interval(0, 10), None);
    let events: Vec<_> = (0..50).map(|i| ("k", "v", i * 10)).collect();
    run(&mut join, &[left(&events), right(&events)]);
    let all = entries(join.backend_mut()).len();
    run(&mut join, &[Step::Watermark(250)]);
    let some = entries(join.backend_mut()).len();
    assert!(some < all && some > 0, "{some} of {all} entries left at 250");
    run(&mut join, &[Step::Watermark(i64::MAX)]);
    assert!(entries(join.backend_mut()).is_empty());
}

/// A deterministic stream of both sides' events, up to `jitter` out of
/// order, with bounded-out-of-orderness watermarks (so some events are
/// late).
fn scrambled(count: usize, jitter: i64, delay: i64) -> Vec<Step> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut steps, mut max) = (Vec::new(), i64::MIN);
    for i in 0..count {
        let side = next(2) as usize;
        let key = ["a", "b", "c"][next(3) as usize];
        let timestamp = i as i64 * 3 + next(2 * jitter as u64 + 1) as i64 - jitter;
        max = max.max(timestamp);
        let value = if i % 4 == 0 { format!("{side}-{i}") } else { format!(r#"{{"n":{i}}}"#) };
        steps.push(Step::Events(side, vec![(key, value, timestamp)]));
        if next(4) == 0 {
            steps.push(Step::Watermark(max - delay - 1));
        }
    }
    steps.push(Step::Watermark(i64::MAX));
    steps
}

/// The interval join by brute force: every pair of accepted events.
fn interval_model(steps: &[Step], lower: i64, upper: i64) -> (Vec<(String, i64)>, u64) {
    let (mut accepted, mut watermark, mut late) = (vec![Vec::new(), Vec::new()], i64::MIN, 0);
    for step in steps {
        match step {
            Step::Watermark(w) => watermark = watermark.max(*w),
            Step::Events(side, events) => {
                for (key, value, t) in events {
                    let latest = if *side == 0 { t + upper } else { t - lower };
                    if latest <= watermark {
                        late += 1;
                    } else {
                        let mut embedded = Vec::new();
                        embed_json(&mut embedded, value.as_bytes());
                        accepted[*side].push((*key, String::from_utf8(embedded).unwrap(), *t));
                    }
                }
            }
        }
    }
    let mut pairs = Vec::new();
    for (lk, lv, lt) in &accepted[0] {
        for (rk, rv, rt) in &accepted[1] {
            if lk == rk && (lt + lower..=lt + upper).contains(rt) {
                pairs.push(pair(lv, rv, *lt.max(rt)));
            }
        }
    }
    pairs.sort();
    (pairs, late)
}

#[test]
fn interval_join_emits_exactly_the_pairs_of_accepted_events() {
    let steps = scrambled(600, 12, 5);
    let mut total_late = 0;
    for (lower, upper) in [(0, 10), (-5, 5), (-10, -3), (3, 8), (0, 0), (-40, 40)] {
        let mut join = memory(interval(lower, upper), None);
        let mut out = run(&mut join, &steps);
        out.sort();
        let (expected, late) = interval_model(&steps, lower, upper);
        assert!(!expected.is_empty(), "({lower}, {upper})");
        total_late += late;
        assert_eq!(out, expected, "bounds ({lower}, {upper})");
        assert_eq!(join.dropped_late, late, "bounds ({lower}, {upper})");
        assert!(entries(join.backend_mut()).is_empty());
    }
    assert!(total_late > 20, "the data has late events");
}

fn tumbling(size: i64) -> JoinKind {
    JoinKind::Window { assigner: WindowAssigner::Tumbling { size, offset: 0 } }
}

#[test]
fn tumbling_window_join_emits_each_windows_cross_product_left_major() {
    let mut join = memory(tumbling(10), Some("late"));
    let fired = run(
        &mut join,
        &[
            left(&[("k", "a1", 1), ("k", "a2", 5), ("k", "d", 12), ("only-left", "x", 3)]),
            right(&[("k", "b", 3), ("k", "c", 9), ("k", "e", 15), ("only-right", "y", 3)]),
            left(&[("k", "a3", 0)]),
            Step::Watermark(9),
        ],
    );
    let (a1, a2, a3, b, c) = (r#""a1""#, r#""a2""#, r#""a3""#, r#""b""#, r#""c""#);
    assert_eq!(
        fired,
        vec![
            pair(a1, b, 9),
            pair(a1, c, 9),
            pair(a2, b, 9),
            pair(a2, c, 9),
            pair(a3, b, 9),
            pair(a3, c, 9),
        ]
    );
    let rest = run(&mut join, &[right(&[("k", "late", 8)]), Step::Watermark(i64::MAX)]);
    assert_eq!(rest, vec![pair(r#""d""#, r#""e""#, 19)]);
    assert_eq!(join.side_outputs.len(), 1, "the event at 8 came after its window fired");
    assert!(entries(join.backend_mut()).is_empty());
}

#[test]
fn sliding_window_join_pairs_events_in_every_window_they_share() {
    let assigner = WindowAssigner::Sliding { size: 10, slide: 5, offset: 0 };
    let mut join = memory(JoinKind::Window { assigner }, None);
    let out = run(
        &mut join,
        &[
            // x: [5, 15) and [0, 10); y: [10, 20) and [5, 15); z: [0, 10) and [-5, 5).
            left(&[("k", "x", 7)]),
            right(&[("k", "y", 12), ("k", "z", 2)]),
            Step::Watermark(i64::MAX),
        ],
    );
    assert_eq!(out, vec![pair(r#""x""#, r#""z""#, 9), pair(r#""x""#, r#""y""#, 14)]);
    assert!(entries(join.backend_mut()).is_empty());
}

#[test]
fn session_window_join_merges_sessions_over_both_sides() {
    let session = JoinKind::Window { assigner: WindowAssigner::Session { gap: 5 } };
    let mut join = memory(session, None);
    let out = run(
        &mut join,
        &[
            left(&[("k", "a", 0)]),
            right(&[("k", "b", 8), ("k", "d", 30)]),
            // c at 4 bridges [0, 5) and [8, 13) into [0, 13); f grows it to [0, 17).
            left(&[("k", "c", 4), ("k", "e", 32), ("j", "alone", 1)]),
            right(&[("k", "f", 12), ("j", "other", 40)]),
            Step::Watermark(20),
        ],
    );
    let (a, b, c, f) = (r#""a""#, r#""b""#, r#""c""#, r#""f""#);
    assert_eq!(out, vec![pair(a, b, 16), pair(a, f, 16), pair(c, b, 16), pair(c, f, 16)]);
    let out = run(
        &mut join,
        &[
            // Would have joined [0, 17), which has fired: late.
            right(&[("k", "g", 10)]),
            // Merges [30, 37) (d and e) with [26, 31).
            right(&[("k", "h", 26)]),
            Step::Watermark(i64::MAX),
        ],
    );
    assert_eq!(out, vec![pair(r#""e""#, r#""d""#, 36), pair(r#""e""#, r#""h""#, 36)]);
    assert_eq!(join.dropped_late, 1);
    assert!(entries(join.backend_mut()).is_empty());
}

#[test]
fn session_window_join_merges_sessions_one_gap_apart_as_flink_does() {
    let session = JoinKind::Window { assigner: WindowAssigner::Session { gap: 8 } };
    let mut join = memory(session, Some("late"));
    let out = run(
        &mut join,
        &[
            // [0, 8) and [8, 16) touch: one session [0, 16) (as the window
            // operator's and Flink's); [17, 25) is a millisecond apart.
            left(&[("k", "a", 0)]),
            right(&[("k", "b", 8), ("k", "c", 17)]),
            left(&[("k", "d", 25)]),
            Step::Watermark(15),
        ],
    );
    let (a, b, c, d) = (r#""a""#, r#""b""#, r#""c""#, r#""d""#);
    assert_eq!(out, vec![pair(a, b, 15)]);
    let out = run(
        &mut join,
        &[
            // Its window [-8, 0) touches [0, 16), which has fired: late.
            left(&[("k", "late", -8)]),
            Step::Watermark(i64::MAX),
        ],
    );
    // c's [17, 25) and d's [25, 33) touch too.
    assert_eq!(out, vec![pair(d, c, 32)]);
    assert_eq!(join.side_outputs.len(), 1);
    assert!(entries(join.backend_mut()).is_empty());
}

/// Every entry of `backend`, copied into a new in-memory backend (what a
/// restore from a snapshot gives).
fn copy(backend: &mut dyn KeyedStateBackend) -> Box<dyn KeyedStateBackend> {
    let mut copy = InMemoryBackend::new();
    for (key, value) in entries(backend) {
        copy.put(&key, &value).unwrap();
    }
    Box::new(copy)
}

fn kinds() -> Vec<JoinKind> {
    vec![
        interval(-5, 10),
        interval(2, 30),
        tumbling(20),
        JoinKind::Window { assigner: WindowAssigner::Sliding { size: 30, slide: 10, offset: 0 } },
        JoinKind::Window { assigner: WindowAssigner::Session { gap: 4 } },
    ]
}

#[test]
fn a_restored_join_continues_exactly() {
    let steps = scrambled(500, 10, 4);
    let mut total_late = 0;
    for kind in kinds() {
        let mut whole = memory(kind, Some("late"));
        let expected = run(&mut whole, &steps);
        assert!(expected.len() > 10, "{kind:?}: {}", expected.len());
        total_late += whole.side_outputs.len();
        // Stop after a watermark half-way; restart from the state's copy,
        // the sources replaying that watermark first.
        let split = (steps.len() / 2..).find(|&i| matches!(steps[i], Step::Watermark(_))).unwrap();
        let mut first = memory(kind, Some("late"));
        let mut out = run(&mut first, &steps[..split + 1]);
        let mut second = operator(kind, Some("late"), copy(first.backend_mut()));
        out.extend(run(&mut second, &steps[split..]));
        assert_eq!(out, expected, "{kind:?}");
        let late = first.side_outputs.len() + second.side_outputs.len();
        assert_eq!(late, whole.side_outputs.len(), "{kind:?}");
    }
    assert!(total_late > 20, "the data has late events");
}

#[test]
fn joins_on_rocksdb_match_the_in_memory_run_and_survive_reopening() {
    let steps = scrambled(400, 10, 4);
    let split = (steps.len() / 2..).find(|&i| matches!(steps[i], Step::Watermark(_))).unwrap();
    for kind in kinds() {
        let expected = run(&mut memory(kind, None), &steps);
        let dir = tempfile::tempdir().unwrap();
        let open = || Box::new(RocksDbBackend::open(dir.path()).unwrap());
        let mut first = operator(kind, None, open());
        let mut out = run(&mut first, &steps[..split + 1]);
        first.backend_mut().flush().unwrap();
        drop(first);
        let mut second = operator(kind, None, open());
        out.extend(run(&mut second, &steps[split..]));
        assert_eq!(out, expected, "{kind:?}");
        assert!(entries(second.backend_mut()).is_empty(), "{kind:?}");
    }
}

#[test]
fn window_joins_pair_exactly_the_events_of_shared_windows() {
    // Tumbling windows by brute force over the accepted events.
    let steps = scrambled(600, 12, 5);
    let size = 20;
    let mut join = memory(tumbling(size), None);
    let mut out = run(&mut join, &steps);
    out.sort();
    let mut watermark = i64::MIN;
    let mut windows: HashMap<(&str, i64), [Vec<String>; 2]> = HashMap::new();
    for step in &steps {
        match step {
            Step::Watermark(w) => watermark = watermark.max(*w),
            Step::Events(side, events) => {
                for (key, value, t) in events {
                    let start = t.div_euclid(size) * size;
                    if start + size - 1 > watermark {
                        let mut embedded = Vec::new();
                        embed_json(&mut embedded, value.as_bytes());
                        windows.entry((*key, start)).or_default()[*side]
                            .push(String::from_utf8(embedded).unwrap());
                    }
                }
            }
        }
    }
    let mut expected = Vec::new();
    for ((_, start), [lefts, rights]) in &windows {
        for l in lefts {
            for r in rights {
                expected.push(pair(l, r, start + size - 1));
            }
        }
    }
    expected.sort();
    assert!(expected.len() > 100);
    assert_eq!(out, expected);
}

#[test]
fn misuse_is_an_error_naming_the_way_out() {
    let config = JoinConfig { kind: interval(5, 1), late_output: None, max_parallelism: 8 };
    let error = JoinOperator::new(config, Box::new(InMemoryBackend::new())).err().unwrap();
    assert!(error.to_string().contains("lower ≤ upper"), "{error}");
    let mut join = memory(interval(0, 1), None);
    let error = join.process(2, &KeyList::default(), Vec::new()).unwrap_err();
    assert!(matches!(error, JoinError::Side(2)));
}
