//! Revenue per customer per window — Flink SQL's
//! `TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' MINUTE) …
//! GROUP BY window_start, window_end, customer_id` as a Wasm aggregate.
//!
//! The host assigns each order to windows (as the pipeline spec says) and
//! keeps one accumulator per (customer, window): the total in cents. When
//! the watermark passes a window's end the function turns it into
//! `{"customer_id":1,"window_start":1768471200000,"window_end":1768471260000,"revenue":20.00}`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{function, AggregateFunction, Cents, Error, Event, KeyFunction, Window};

#[derive(Deserialize)]
struct Order<'a> {
    customer_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
}

#[derive(Serialize)]
struct WindowRevenue {
    customer_id: u64,
    window_start: i64,
    window_end: i64,
    revenue: Box<RawValue>,
}

/// The function: keyed by customer, summing cents per window.
#[derive(Default)]
pub struct WindowedRevenue;

#[function]
impl KeyFunction for WindowedRevenue {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Order>()?.customer_id.to_string().into_bytes())
    }
}

#[function]
impl AggregateFunction for WindowedRevenue {
    type Accumulator = i64;

    fn add(&mut self, total: &mut i64, event: &Event) -> Result<(), Error> {
        let order: Order = event.json()?;
        *total = Cents(*total).checked_add(Cents::parse(order.amount.get())?)?.0;
        Ok(())
    }

    fn merge(&mut self, a: i64, b: i64) -> Result<i64, Error> {
        Ok(Cents(a).checked_add(Cents(b))?.0)
    }

    fn result(&mut self, key: &[u8], window: Window, total: i64) -> Result<Vec<Event>, Error> {
        let out = WindowRevenue {
            customer_id: std::str::from_utf8(key)?.parse()?,
            window_start: window.start,
            window_end: window.end,
            revenue: Cents(total).to_json_number(),
        };
        Ok(vec![Event::from_json(&out, window.end - 1)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn sums_a_window_exactly() {
        let mut harness = Harness::<WindowedRevenue>::new();
        let order = |amount: &str| {
            Event::new(format!(r#"{{"customer_id":2,"amount":{amount}}}"#).into_bytes(), 0)
        };
        let out = harness
            .aggregate(b"2", Window { start: 0, end: 60_000 }, vec![order("0.10"), order("0.20")])
            .unwrap();
        assert_eq!(
            String::from_utf8(out[0].value.clone()).unwrap(),
            r#"{"customer_id":2,"window_start":0,"window_end":60000,"revenue":0.30}"#
        );
        assert_eq!(out[0].timestamp, 59_999);
        assert_eq!(harness.function().merge(150, 250).unwrap(), 400);
    }
}
