//! Running revenue per customer: stage one of the region top-3 graph.
//!
//! In [region-top3's pipeline](../../region-top3/pipeline.yaml) the orders
//! are keyed by customer with this function and fed to its process
//! function; its output is re-keyed by region for the top-3 window.
//!
//! Input: `{"order_id":1,"customer_id":3,"region":"apac","amount":12.50,"event_time":"2026-01-15T10:00:01Z"}`.
//! Key: the customer id. State: the customer's total in integer cents.
//! Output: one record per order, with the order's timestamp and the
//! customer's total so far:
//! `{"customer_id":3,"region":"apac","revenue":12.50,"event_time":"2026-01-15T10:00:01Z"}`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{function, Cents, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};

/// One order as read from the source.
#[derive(Deserialize)]
struct Order<'a> {
    customer_id: u64,
    region: &'a str,
    #[serde(borrow)]
    amount: &'a RawValue,
    event_time: &'a str,
}

/// One output record: the customer's revenue after an order.
#[derive(Serialize)]
struct Running<'a> {
    customer_id: u64,
    region: &'a str,
    revenue: Box<RawValue>,
    event_time: &'a str,
}

/// The function: keyed by customer, keeping each customer's total.
pub struct CustomerRevenue {
    total: ValueState<i64>,
}

impl Default for CustomerRevenue {
    fn default() -> Self {
        Self { total: ValueState::new("total") }
    }
}

#[function]
impl KeyFunction for CustomerRevenue {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        Ok(event.json::<Order>()?.customer_id.to_string().into_bytes())
    }
}

#[function]
impl ProcessFunction for CustomerRevenue {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut total = Cents(self.total.get()?.unwrap_or(0));
        for event in events {
            let order: Order = event.json()?;
            total = total.checked_add(Cents::parse(order.amount.get())?)?;
            let out = Running {
                customer_id: order.customer_id,
                region: order.region,
                revenue: total.to_json_number(),
                event_time: order.event_time,
            };
            ctx.emit(Event::from_json(&out, event.timestamp)?);
        }
        self.total.set(&total.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(customer: u64, region: &str, amount: &str, second: u32) -> Event {
        let text = format!(
            r#"{{"order_id":1,"customer_id":{customer},"region":"{region}","amount":{amount},"event_time":"2026-01-15T10:00:{second:02}Z"}}"#
        );
        Event::new(text.into_bytes(), 1_768_471_200_000 + i64::from(second) * 1000)
    }

    #[test]
    fn keys_by_customer() {
        let mut harness = Harness::<CustomerRevenue>::new();
        assert_eq!(harness.key(&order(12, "eu", "1.00", 0)).unwrap(), b"12");
        assert!(harness.key(&Event::new(br#"{"customer_id":12}"#.to_vec(), 0)).is_err());
    }

    #[test]
    fn emits_the_running_revenue_with_the_order_time() {
        let mut harness = Harness::<CustomerRevenue>::new();
        let out = harness
            .process(b"3", vec![order(3, "apac", "12.50", 1), order(3, "apac", "0.75", 9)])
            .unwrap();
        assert_eq!(
            String::from_utf8(out[1].value.clone()).unwrap(),
            r#"{"customer_id":3,"region":"apac","revenue":13.25,"event_time":"2026-01-15T10:00:09Z"}"#
        );
        assert_eq!(out[1].timestamp, 1_768_471_209_000);
        let out = harness.process(b"3", vec![order(3, "apac", "100", 30)]).unwrap();
        assert_eq!(
            String::from_utf8(out[0].value.clone()).unwrap(),
            r#"{"customer_id":3,"region":"apac","revenue":113.25,"event_time":"2026-01-15T10:00:30Z"}"#
        );
        assert_eq!(harness.value::<i64>(b"3", "total"), Some(11_325));
        assert_eq!(harness.value::<i64>(b"4", "total"), None);
    }
}
