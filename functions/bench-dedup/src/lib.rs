//! Benchmark workload (c) of `weir bench`: per-customer dedup with a TTL.
//! The first binary order of a customer is emitted and the customer marked
//! "seen" for one minute (a state TTL); its orders until then are dropped.
//! The host's native twin (`native: bench-dedup`) does exactly the same.

use std::time::Duration;

use weir_sdk::binary::Order;
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, Ttl, ValueState};

/// The function: remembers who was seen.
pub struct BenchDedup {
    seen: ValueState<bool>,
}

impl Default for BenchDedup {
    fn default() -> Self {
        Self { seen: ValueState::with_ttl("seen", Ttl::after_write(Duration::from_secs(60))) }
    }
}

#[function]
impl KeyFunction for BenchDedup {
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
impl ProcessFunction for BenchDedup {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        if self.seen.get()?.is_some() {
            return Ok(());
        }
        if let Some(first) = events.first() {
            ctx.emit(first);
            self.seen.set(&true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn only_the_first_order_of_a_customer_passes() {
        let order = |id: u64| {
            Event::new(Order { order_id: id, customer_id: 3, amount_cents: 1 }.encode().to_vec(), 0)
        };
        let mut harness = Harness::<BenchDedup>::new();
        assert_eq!(
            harness.process(&3u64.to_le_bytes(), vec![order(1), order(2)]).unwrap().len(),
            1
        );
        assert!(harness.process(&3u64.to_le_bytes(), vec![order(3)]).unwrap().is_empty());
    }
}
