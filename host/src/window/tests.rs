//! Session windows against Apache Flink's behaviour (`TimeWindow.intersects`,
//! `MergingWindowSet`, `WindowOperator`): orders fed one per batch, each
//! followed by the watermark a source with `max_out_of_orderness` emits.

use crate::runtime::bindings::weir::function::types::Accumulate;
use crate::runtime::native::NativeAggregateFunction;
use crate::runtime::packing::{FiredWindows, KeyList};
use crate::runtime::AggregateFunctionInstance;
use crate::state::InMemoryBackend;
use crate::time::BoundedOutOfOrderness;
use crate::Event;

use super::{WindowAssigner, WindowConfig, WindowFunction, WindowOperator};

/// 2026-01-15 10:00:00 UTC.
const T: i64 = 1_768_471_200_000;
const SECOND: i64 = 1_000;

/// Keeps the ids of a window's orders; its result names the window and
/// the ids, sorted.
struct OrderIds;

impl NativeAggregateFunction for OrderIds {
    fn add(&mut self, batch: &[Accumulate]) -> Result<Vec<Vec<u8>>, String> {
        Ok(batch
            .iter()
            .map(|entry| {
                let mut ids = entry.accumulator.clone().unwrap_or_default();
                for event in &entry.events {
                    ids.extend_from_slice(&event.value);
                    ids.push(b',');
                }
                ids
            })
            .collect())
    }

    fn merge(&mut self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, String> {
        Ok([a, b].concat())
    }

    fn results(&mut self, batch: &FiredWindows) -> Result<Vec<Event>, String> {
        Ok(batch
            .iter()
            .map(|(key, window, ids)| {
                let mut ids: Vec<&str> = std::str::from_utf8(ids)
                    .unwrap()
                    .split(',')
                    .filter(|id| !id.is_empty())
                    .collect();
                ids.sort();
                let value = format!("{} {} {}", window.start, window.end, ids.join(","));
                Event {
                    key: Some(key.to_vec()),
                    value: value.into_bytes(),
                    timestamp: window.end - 1,
                    headers: Vec::new(),
                }
            })
            .collect())
    }
}

/// A fired window: customer, start, end, its order ids.
type Fired = (String, i64, i64, String);

fn fired(customer: &str, start: i64, end: i64, ids: &str) -> Fired {
    (customer.to_string(), start, end, ids.to_string())
}

/// A session window operator (late orders to `late`) fed as a source with
/// `max_out_of_orderness: bound` feeds it.
struct Run {
    windows: WindowOperator,
    watermarks: BoundedOutOfOrderness,
}

impl Run {
    fn new(gap: i64, bound: i64, allowed_lateness: i64) -> Self {
        let config = WindowConfig {
            assigner: WindowAssigner::Session { gap },
            allowed_lateness,
            late_output: Some("late".into()),
            max_parallelism: 16,
        };
        let function = WindowFunction::Aggregate(Box::new(AggregateFunctionInstance::native(
            Box::new(OrderIds),
            "order-ids",
        )));
        let windows =
            WindowOperator::new(config, function, Box::new(InMemoryBackend::new())).unwrap();
        Self { windows, watermarks: BoundedOutOfOrderness::new(bound) }
    }

    /// Order `id` of `customer` at `time`, then the watermark after it.
    fn order(&mut self, customer: &str, id: &str, time: i64) {
        let mut keys = KeyList::default();
        keys.push(customer.as_bytes());
        let event = Event {
            key: Some(customer.as_bytes().to_vec()),
            value: id.as_bytes().to_vec(),
            timestamp: time,
            headers: Vec::new(),
        };
        self.windows.process(&keys, vec![event]).unwrap();
        self.watermarks.observe(time);
        if let Some(watermark) = self.watermarks.advance() {
            self.windows.on_watermark(watermark).unwrap();
        }
    }

    /// The end of a bounded source: event time jumps to the end of time.
    fn end(&mut self) {
        self.windows.on_watermark(i64::MAX).unwrap();
    }

    /// The windows fired since the last call, in order.
    fn fired(&mut self) -> Vec<Fired> {
        self.windows
            .outputs
            .drain(..)
            .map(|event| {
                let value = String::from_utf8(event.value).unwrap();
                let mut parts = value.splitn(3, ' ');
                let mut number = || parts.next().unwrap().parse::<i64>().unwrap();
                let (start, end) = (number(), number());
                assert_eq!(event.timestamp, end - 1);
                let ids = parts.next().unwrap().to_string();
                (String::from_utf8(event.key.unwrap()).unwrap(), start, end, ids)
            })
            .collect()
    }

    /// The ids of the orders set aside as late since the last call.
    fn late(&mut self) -> Vec<String> {
        self.windows
            .side_outputs
            .drain(..)
            .map(|(name, event)| {
                assert_eq!(name, "late");
                String::from_utf8(event.value).unwrap()
            })
            .collect()
    }

    /// Whether nothing at all is left in state.
    fn state_is_empty(&mut self) -> bool {
        self.windows.backend_mut().scan(b"", None, usize::MAX).unwrap().is_empty()
    }
}

#[test]
fn orders_one_gap_apart_form_one_session() {
    let mut run = Run::new(8 * SECOND, 2 * SECOND, 0);
    run.order("c1", "o1", T);
    run.order("c1", "o2", T + 8 * SECOND);
    run.end();
    // [10:00:00, 10:00:08) and [10:00:08, 10:00:16) touch: one session.
    assert_eq!(run.fired(), vec![fired("c1", T, T + 16 * SECOND, "o1,o2")]);
    assert!(run.late().is_empty());
    assert!(run.state_is_empty());
}

#[test]
fn a_late_order_touching_a_fired_session_merges_into_it_and_fires_it_again() {
    let mut run = Run::new(8 * SECOND, 2 * SECOND, 5 * SECOND);
    run.order("c1", "o1", T);
    run.order("c2", "o2", T + 12 * SECOND);
    // The watermark is at 10:00:09.999: c1's session has fired.
    assert_eq!(run.fired(), vec![fired("c1", T, T + 8 * SECOND, "o1")]);
    // [09:59:52, 10:00:00) is itself past the watermark plus lateness, but
    // touches [10:00:00, 10:00:08), which is not: they merge, and the
    // merged session, already past the watermark, fires again at once.
    run.order("c1", "o3", T - 8 * SECOND);
    assert_eq!(run.fired(), vec![fired("c1", T - 8 * SECOND, T + 8 * SECOND, "o1,o3")]);
    assert!(run.late().is_empty());
    run.end();
    assert_eq!(run.fired(), vec![fired("c2", T + 12 * SECOND, T + 20 * SECOND, "o2")]);
    assert!(run.late().is_empty());
    assert!(run.state_is_empty());
}

#[test]
fn an_order_touching_two_sessions_merges_all_three() {
    let mut run = Run::new(8 * SECOND, 30 * SECOND, 0);
    run.order("c1", "o1", T);
    run.order("c1", "o2", T + 16 * SECOND);
    // [10:00:08, 10:00:16) touches [10:00:00, 10:00:08) and
    // [10:00:16, 10:00:24): one session of all three.
    run.order("c1", "o3", T + 8 * SECOND);
    run.order("c2", "o4", T + 40 * SECOND);
    run.order("c2", "o5", T + 56 * SECOND);
    // Watermark 10:00:25.999.
    assert_eq!(run.fired(), vec![fired("c1", T, T + 24 * SECOND, "o1,o2,o3")]);
    run.order("c2", "o6", T + 48 * SECOND);
    run.end();
    assert_eq!(run.fired(), vec![fired("c2", T + 40 * SECOND, T + 64 * SECOND, "o4,o5,o6")]);
    assert!(run.late().is_empty());
    assert!(run.state_is_empty());
}

#[test]
fn a_merged_session_fires_and_is_cleaned_up_at_its_own_end() {
    let mut run = Run::new(8 * SECOND, 2 * SECOND, 5 * SECOND);
    run.order("c1", "o1", T);
    run.order("c2", "o2", T + 12 * SECOND);
    assert_eq!(run.fired(), vec![fired("c1", T, T + 8 * SECOND, "o1")]);
    // Touches the fired [10:00:00, 10:00:08) and ends after the watermark
    // (10:00:09.999): the merged [10:00:00, 10:00:16) waits for its end.
    run.order("c1", "o3", T + 8 * SECOND);
    assert_eq!(run.fired(), vec![]);
    run.order("c2", "o4", T + 18 * SECOND);
    // Watermark 10:00:15.999.
    assert_eq!(run.fired(), vec![fired("c1", T, T + 16 * SECOND, "o1,o3")]);
    // The merged session is kept until 10:00:15.999 + 5 s, not until
    // 10:00:07.999 + 5 s: at watermark 10:00:20.998 an order touching it
    // still merges into it and fires it again, with every order so far.
    run.order("c3", "o5", T + 22_999);
    run.order("c1", "o6", T - 8 * SECOND);
    assert_eq!(run.fired(), vec![fired("c1", T - 8 * SECOND, T + 16 * SECOND, "o1,o3,o6")]);
    // Watermark 10:00:20.999: the cleanup time of the session.
    run.order("c3", "o7", T + 23 * SECOND);
    run.order("c1", "o8", T - 8 * SECOND);
    assert_eq!(run.late(), vec!["o8"]);
    run.end();
    assert_eq!(
        run.fired(),
        vec![
            fired("c2", T + 12 * SECOND, T + 26 * SECOND, "o2,o4"),
            fired("c3", T + 22_999, T + 31 * SECOND, "o5,o7"),
        ]
    );
    assert!(run.late().is_empty());
    assert!(run.state_is_empty());
}
