//! Benchmark workload (d) of `weir bench`: stateless filter and map. Binary
//! orders of at least 10.00 become `(customer, amount × 2)` (16 bytes);
//! others are dropped. The host's native twin (`native: bench-filter`)
//! does exactly the same.

use weir_sdk::binary::Order;
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction};

/// The function: no state.
#[derive(Default)]
pub struct BenchFilter;

#[function]
impl KeyFunction for BenchFilter {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let mut key = Vec::with_capacity(8);
        self.key_into(event, &mut key)?;
        Ok(key)
    }

    fn key_into(&mut self, event: &Event, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&Order::decode(&event.value)?.customer_id.to_le_bytes());
        Ok(())
    }
}

#[function]
impl ProcessFunction for BenchFilter {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        for event in events {
            let order = Order::decode(&event.value)?;
            if order.amount_cents >= 1_000 {
                let mut value = [0; 16];
                value[..8].copy_from_slice(&order.customer_id.to_le_bytes());
                value[8..].copy_from_slice(&(order.amount_cents * 2).to_le_bytes());
                ctx.emit_value(&value, event.timestamp);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn keeps_large_orders_doubled() {
        let order = |cents: i64| {
            Event::new(
                Order { order_id: 1, customer_id: 4, amount_cents: cents }.encode().to_vec(),
                0,
            )
        };
        let out = Harness::<BenchFilter>::new()
            .process(&4u64.to_le_bytes(), vec![order(999), order(1000)])
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].value[8..], 2000i64.to_le_bytes());
    }
}
