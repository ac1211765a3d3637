//! Per-customer running revenue.
//!
//! Input: JSON orders `{"order_id", "customer_id", "amount", "event_time"}`.
//! Key: the customer id. State: the customer's total in integer cents
//! (`total`, declared as an `i64`, so a state lookup shows the number).
//! Output: one record per order with the customer's new total:
//! `{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}`.
//!
//! Amounts are parsed from their decimal text into cents ([`Cents`]),
//! never through floating point, so totals do not drift.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weir_sdk::{
    declare_states, function, Cents, Context, Error, Event, KeyFunction, ProcessFunction,
    ValueState,
};

/// One order as read from the source.
#[derive(Deserialize)]
struct Order<'a> {
    order_id: u64,
    customer_id: u64,
    #[serde(borrow)]
    amount: &'a RawValue,
}

/// One output record: the order and the customer's total after it.
#[derive(Serialize)]
struct RunningTotal {
    order_id: u64,
    customer_id: u64,
    amount: Box<RawValue>,
    total: Box<RawValue>,
}

// The total's type, for the host: a state lookup shows it as a number
// (cents), not as its bytes.
declare_states! {
    value "total": i64,
}

/// The function: keyed by customer, keeping each customer's total.
pub struct Revenue {
    total: ValueState<i64>,
}

impl Default for Revenue {
    fn default() -> Self {
        Self { total: ValueState::new("total") }
    }
}

#[function]
impl KeyFunction for Revenue {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let order: Order = serde_json::from_slice(&event.value)?;
        Ok(order.customer_id.to_string().into_bytes())
    }
}

#[function]
impl ProcessFunction for Revenue {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut total = Cents(self.total.get()?.unwrap_or(0));
        for event in events {
            let order: Order = serde_json::from_slice(&event.value)?;
            let amount = Cents::parse(order.amount.get())?;
            total = total.checked_add(amount)?;
            let out = RunningTotal {
                order_id: order.order_id,
                customer_id: order.customer_id,
                amount: amount.to_json_number(),
                total: total.to_json_number(),
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

    fn order(id: u64, customer: u64, amount: &str) -> Event {
        let text = format!(
            r#"{{"order_id":{id},"customer_id":{customer},"amount":{amount},"event_time":"2026-01-15T10:00:05Z"}}"#
        );
        Event::new(text.into_bytes(), 0)
    }

    #[test]
    fn keys_by_customer() {
        let mut harness = Harness::<Revenue>::new();
        assert_eq!(harness.key(&order(110, 1, "20.00")).unwrap(), b"1");
        assert!(harness.key(&Event::new(b"{}".to_vec(), 0)).is_err());
    }

    #[test]
    fn keeps_a_running_total_per_customer() {
        let mut harness = Harness::<Revenue>::new();
        let out =
            harness.process(b"2", vec![order(111, 2, "15.50"), order(113, 2, "12.50")]).unwrap();
        let totals: Vec<serde_json::Value> = out.iter().map(|e| e.json().unwrap()).collect();
        assert_eq!(totals[0]["total"].to_string(), "15.5");
        assert_eq!(totals[1]["total"].to_string(), "28.0");
        harness.process(b"1", vec![order(110, 1, "20.00")]).unwrap();
        harness.process(b"2", vec![order(151, 2, "20.00")]).unwrap();
        assert_eq!(harness.value::<i64>(b"2", "total"), Some(4800));
        assert_eq!(harness.value::<i64>(b"1", "total"), Some(2000));
    }

    #[test]
    fn outputs_two_decimals() {
        let mut harness = Harness::<Revenue>::new();
        let out =
            harness.process(b"3", vec![order(112, 3, "7.25"), order(150, 3, "9.75")]).unwrap();
        assert_eq!(
            String::from_utf8(out[1].value.clone()).unwrap(),
            r#"{"order_id":150,"customer_id":3,"amount":9.75,"total":17.00}"#
        );
    }
}
