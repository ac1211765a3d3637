//! Benchmark workloads (a) and (b) of `weir bench`, over binary orders
//! (`weir_sdk::binary::Order`, what the generator makes with
//! `encoding: binary`): keyed by customer (its id's 8 bytes),
//!
//! * (a) as a process function: each customer's running total in cents,
//!   one output `(customer, total)` (16 bytes) per order;
//! * (b) as an aggregate: the total per customer per window,
//!   `(customer, total)` at the window's end.
//!
//! It also takes its own outputs, for the second stage of the `two-stage`
//! workload: a 16-byte `(customer, total)` pair is keyed by its region,
//! `customer % 64` (8 bytes), with the total as its amount, so the same
//! process function keeps a running sum of the totals per region and emits
//! `(region, sum)`. Inputs are told apart by their length (24 or 16).
//!
//! The host's native twin (`native: bench-sum`) does exactly the same.

use weir_sdk::binary::Order;
use weir_sdk::{
    function, AggregateFunction, Context, Error, Event, KeyFunction, ProcessFunction, ValueState,
    Window,
};

/// Regions a `(customer, total)` pair is re-keyed into: `customer % REGIONS`.
pub const REGIONS: u64 = 64;

/// Bytes of a `(customer, total)` pair.
const PAIR_BYTES: usize = 16;

/// The key and the amount of an input: `(customer, amount_cents)` of an
/// order (24 bytes), `(customer % REGIONS, total)` of a pair (16 bytes).
#[inline]
fn decode(value: &[u8]) -> Result<(u64, i64), Error> {
    if value.len() == PAIR_BYTES {
        let half = |i: usize| -> [u8; 8] { value[i..i + 8].try_into().unwrap_or_default() };
        return Ok((u64::from_le_bytes(half(0)) % REGIONS, i64::from_le_bytes(half(8))));
    }
    let order = Order::decode(value).map_err(|_| {
        Error::msg(format!(
            "an order (24 bytes) or a (customer, total) pair (16 bytes), not {} bytes",
            value.len()
        ))
    })?;
    Ok((order.customer_id, order.amount_cents))
}

/// `(a, b)` as 16 bytes.
fn pair(a: u64, b: i64) -> [u8; 16] {
    let mut value = [0; 16];
    value[..8].copy_from_slice(&a.to_le_bytes());
    value[8..].copy_from_slice(&b.to_le_bytes());
    value
}

/// The function: running and windowed sums (per customer, or per region of
/// `(customer, total)` pairs).
pub struct BenchSum {
    total: ValueState<i64>,
}

impl Default for BenchSum {
    fn default() -> Self {
        Self { total: ValueState::new("total") }
    }
}

#[function]
impl KeyFunction for BenchSum {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let mut key = Vec::with_capacity(8);
        self.key_into(event, &mut key)?;
        Ok(key)
    }

    fn key_into(&mut self, event: &Event, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&decode(&event.value)?.0.to_le_bytes());
        Ok(())
    }
}

#[function]
impl ProcessFunction for BenchSum {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let mut total = self.total.get()?.unwrap_or(0);
        for event in events {
            let (key, amount) = decode(&event.value)?;
            total = total.checked_add(amount).ok_or_else(|| Error::msg("total overflows"))?;
            ctx.emit_value(&pair(key, total), event.timestamp);
        }
        self.total.set(&total)
    }
}

#[function]
impl AggregateFunction for BenchSum {
    type Accumulator = i64;

    fn add(&mut self, total: &mut i64, event: &Event) -> Result<(), Error> {
        *total = total
            .checked_add(decode(&event.value)?.1)
            .ok_or_else(|| Error::msg("total overflows"))?;
        Ok(())
    }

    fn merge(&mut self, a: i64, b: i64) -> Result<i64, Error> {
        a.checked_add(b).ok_or_else(|| Error::msg("total overflows"))
    }

    fn result(&mut self, key: &[u8], window: Window, total: i64) -> Result<Vec<Event>, Error> {
        let customer =
            u64::from_le_bytes(key.try_into().map_err(|_| Error::msg("a key is 8 bytes"))?);
        Ok(vec![Event::new(pair(customer, total).to_vec(), window.end - 1)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    fn order(id: u64, customer: u64, cents: i64) -> Event {
        Event::new(
            Order { order_id: id, customer_id: customer, amount_cents: cents }.encode().to_vec(),
            id as i64,
        )
    }

    #[test]
    fn running_and_windowed_totals() {
        let mut harness = Harness::<BenchSum>::new();
        let out =
            harness.process(&7u64.to_le_bytes(), vec![order(1, 7, 250), order(2, 7, 100)]).unwrap();
        assert_eq!(
            out.iter().map(|e| e.value.clone()).collect::<Vec<_>>(),
            vec![pair(7, 250), pair(7, 350)]
        );
        let out = harness
            .aggregate(
                &7u64.to_le_bytes(),
                Window { start: 0, end: 60_000 },
                vec![order(1, 7, 5), order(2, 7, 6)],
            )
            .unwrap();
        assert_eq!(out[0].value, pair(7, 11));
    }

    #[test]
    fn pairs_are_summed_per_region() {
        let mut harness = Harness::<BenchSum>::new();
        let first = Event::new(pair(70, 250).to_vec(), 1);
        let second = Event::new(pair(6, 100).to_vec(), 2);
        assert_eq!(harness.key(&first).unwrap(), 6u64.to_le_bytes());
        assert_eq!(harness.key(&second).unwrap(), 6u64.to_le_bytes());
        let out = harness.process(&6u64.to_le_bytes(), vec![first, second]).unwrap();
        assert_eq!(
            out.iter().map(|e| e.value.clone()).collect::<Vec<_>>(),
            vec![pair(6, 250), pair(6, 350)]
        );
        let odd = Event::new(vec![0; 20], 3);
        assert!(harness.key(&odd).unwrap_err().to_string().contains("not 20 bytes"));
    }
}
