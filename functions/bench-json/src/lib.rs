//! Benchmark workload `sum-json` of `weir bench`: workload (a), the running
//! sum per customer, over the generator's JSON orders
//! (`{"order_id":1,"customer_id":7,"amount":12.34,"event_time":"…"}`), so
//! the cost of parsing JSON shows beside `bench-sum`'s binary orders. Only
//! the decoding differs from `bench-sum`: the key is the customer id's 8
//! bytes, the state the total in cents, one output `(customer, total)`
//! (16 bytes) per order.
//!
//! The host's native twin (`native: bench-json`) does exactly the same.

use serde::Deserialize;
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};

/// The fields of a JSON order the sum needs (the others are skipped).
#[derive(Deserialize)]
struct Order {
    customer_id: u64,
    /// In currency units, at most two decimals.
    amount: f64,
}

impl Order {
    fn parse(event: &Event) -> Result<Self, Error> {
        Ok(serde_json::from_slice(&event.value)?)
    }

    /// The amount in cents (exact for two decimals).
    fn cents(&self) -> i64 {
        (self.amount * 100.0).round() as i64
    }
}

/// The function: a running sum per customer.
pub struct BenchJson {
    total: ValueState<i64>,
}

impl Default for BenchJson {
    fn default() -> Self {
        Self { total: ValueState::new("total") }
    }
}

#[function]
impl KeyFunction for BenchJson {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let mut key = Vec::with_capacity(8);
        self.key_into(event, &mut key)?;
        Ok(key)
    }

    fn key_into(&mut self, event: &Event, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&Order::parse(event)?.customer_id.to_le_bytes());
        Ok(())
    }
}

#[function]
impl ProcessFunction for BenchJson {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut total = self.total.get()?.unwrap_or(0);
        for event in events {
            let order = Order::parse(event)?;
            total =
                total.checked_add(order.cents()).ok_or_else(|| Error::msg("total overflows"))?;
            let mut value = [0; 16];
            value[..8].copy_from_slice(&order.customer_id.to_le_bytes());
            value[8..].copy_from_slice(&total.to_le_bytes());
            ctx.emit_value(&value, event.timestamp);
        }
        self.total.set(&total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(id: u64, customer: u64, amount: &str) -> Event {
        Event::new(format!(r#"{{"order_id":{id},"customer_id":{customer},"amount":{amount},"event_time":"2026-01-01T00:00:00.000Z"}}"#).into_bytes(), id as i64)
    }

    #[test]
    fn running_totals_in_cents() {
        let mut harness = Harness::<BenchJson>::new();
        let out = harness
            .process(
                &7u64.to_le_bytes(),
                vec![order(1, 7, "2.50"), order(2, 7, "0.29"), order(3, 7, "100.00")],
            )
            .unwrap();
        let totals: Vec<i64> =
            out.iter().map(|e| i64::from_le_bytes(e.value[8..].try_into().unwrap())).collect();
        assert_eq!(totals, [250, 279, 10_279]);
        assert_eq!(out[0].value[..8], 7u64.to_le_bytes());
        assert!(
            harness.process(&7u64.to_le_bytes(), vec![Event::new(b"{".to_vec(), 0)]).is_err(),
            "malformed JSON is an error"
        );
    }
}
