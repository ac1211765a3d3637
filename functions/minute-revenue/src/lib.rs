//! Revenue per customer per event-time minute, built by hand from keyed
//! state and event-time timers.
//!
//! Input: the revenue example's JSON orders. Key: the customer id. State:
//! a map from minute start (ms) to the minute's total in cents. Each order
//! adds to its minute and registers an event-time timer at the minute's
//! last millisecond; when the watermark passes it, the function emits
//! `{"customer_id":1,"minute_start":1768471200000,"revenue":20.00}` and
//! forgets the minute. An order for a minute already emitted is late: it
//! goes to the `late-orders` side output instead.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    function, Cents, Context, Error, Event, FiredTimer, KeyFunction, MapState, ProcessFunction,
};

/// One minute of event time, in milliseconds.
pub const MINUTE: i64 = 60_000;

/// The side output for orders whose minute was already emitted.
pub const LATE_ORDERS: &str = "late-orders";

#[derive(Deserialize)]
struct Order<'a> {
    customer_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
}

#[derive(Serialize)]
struct MinuteRevenue {
    customer_id: u64,
    minute_start: i64,
    revenue: Box<RawValue>,
}

/// The function: per customer, the totals of minutes not yet emitted.
pub struct MinuteRevenueFn {
    minutes: MapState<i64, i64>,
}

impl Default for MinuteRevenueFn {
    fn default() -> Self {
        Self { minutes: MapState::new("open-minutes") }
    }
}

#[function]
impl KeyFunction for MinuteRevenueFn {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Order>()?.customer_id.to_string().into_bytes())
    }
}

#[function]
impl ProcessFunction for MinuteRevenueFn {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        for event in events {
            let order: Order = event.json()?;
            let start = event.timestamp.div_euclid(MINUTE) * MINUTE;
            let last_ms = start + MINUTE - 1;
            if last_ms <= ctx.current_watermark() {
                ctx.emit_to(LATE_ORDERS, event);
                continue;
            }
            let total = Cents(self.minutes.get(&start)?.unwrap_or(0))
                .checked_add(Cents::parse(order.amount.get())?)?;
            self.minutes.put(&start, &total.0)?;
            ctx.register_event_time_timer(last_ms)?;
        }
        Ok(())
    }

    fn on_timer(&mut self, key: &[u8], timer: FiredTimer, ctx: &mut Context) -> Result<(), Error> {
        let start = timer.timestamp + 1 - MINUTE;
        let Some(total) = self.minutes.get(&start)? else { return Ok(()) };
        self.minutes.remove(&start)?;
        let customer_id = std::str::from_utf8(key)?.parse()?;
        let out = MinuteRevenue {
            customer_id,
            minute_start: start,
            revenue: Cents(total).to_json_number(),
        };
        ctx.emit(Event::from_json(&out, timer.timestamp)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(customer: u64, amount: &str, ms: i64) -> Event {
        Event::new(format!(r#"{{"customer_id":{customer},"amount":{amount}}}"#).into_bytes(), ms)
    }

    fn revenue(out: &[Event]) -> Vec<(i64, String)> {
        out.iter()
            .map(|e| {
                let v: serde_json::Value = e.json().unwrap();
                (v["minute_start"].as_i64().unwrap(), v["revenue"].to_string())
            })
            .collect()
    }

    #[test]
    fn emits_each_minute_once_the_watermark_passes_it() {
        let mut harness = Harness::<MinuteRevenueFn>::new();
        harness
            .process(
                b"1",
                vec![order(1, "1.50", 5_000), order(1, "2.50", 59_999), order(1, "4.00", 60_000)],
            )
            .unwrap();
        assert!(harness.advance_watermark(59_998).unwrap().is_empty());
        assert_eq!(revenue(&harness.advance_watermark(59_999).unwrap()), vec![(0, "4.0".into())]);
        assert_eq!(
            revenue(&harness.advance_watermark(i64::MAX).unwrap()),
            vec![(60_000, "4.0".into())]
        );
        assert!(harness.pending_timers().is_empty());
    }

    #[test]
    fn orders_for_an_emitted_minute_are_late() {
        let mut harness = Harness::<MinuteRevenueFn>::new();
        harness.process(b"1", vec![order(1, "1.00", 1_000)]).unwrap();
        harness.advance_watermark(70_000).unwrap();
        assert!(harness.process(b"1", vec![order(1, "9.00", 2_000)]).unwrap().is_empty());
        assert_eq!(harness.take_side_output(LATE_ORDERS).len(), 1);
        assert!(
            harness.advance_watermark(i64::MAX).unwrap().is_empty(),
            "the late order changed nothing"
        );
    }
}
