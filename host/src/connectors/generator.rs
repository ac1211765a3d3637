//! The generator source: a deterministic stream of synthetic orders, for
//! demos and benchmarks.
//!
//! Event `i` (from 0) is
//! `{"order_id":i+1,"customer_id":c,"amount":a,"event_time":t}` where `c`
//! (1..=keys) and `a` (0.01..=100.00, two decimals) come from a SplitMix64
//! stream seeded with `seed`, and `t = start_time + i * interval_ms`. The
//! same settings always give the same events.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use super::{ConnectorError, Polled, Source};
use crate::Event;

/// Generates synthetic orders.
pub struct GeneratorSource {
    count: u64,
    remaining: u64,
    next_id: u64,
    keys: u64,
    rng: u64,
    start_millis: i64,
    interval_ms: u64,
}

impl GeneratorSource {
    /// `count` orders over `keys` customers from `seed`, the first at
    /// `start_millis` (ms since the epoch).
    pub fn new(count: u64, keys: u64, seed: u64, start_millis: i64, interval_ms: u64) -> Self {
        Self { count, remaining: count, next_id: 1, keys: keys.max(1), rng: seed, start_millis, interval_ms }
    }

    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Source for GeneratorSource {
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        let n = self.remaining.min(max as u64);
        for _ in 0..n {
            let id = self.next_id;
            let customer = self.next_random() % self.keys + 1;
            let cents = self.next_random() % 10_000 + 1;
            let timestamp = self.start_millis.saturating_add(((id - 1).saturating_mul(self.interval_ms)) as i64);
            let time = UNIX_EPOCH + Duration::from_millis(timestamp.max(0) as u64);
            let mut value = String::with_capacity(112);
            let _ = write!(
                value,
                r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":"{}"}}"#,
                cents / 100,
                cents % 100,
                humantime::format_rfc3339_millis(time)
            );
            out.push(Event { key: None, value: value.into_bytes(), timestamp, headers: Vec::new() });
            self.next_id += 1;
        }
        self.remaining -= n;
        Ok(Polled::single(self.remaining > 0))
    }

    fn progress(&self) -> Option<(u64, u64)> {
        Some((self.count - self.remaining, self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(seed: u64) -> Vec<Event> {
        let mut source = GeneratorSource::new(5, 3, seed, 1_768_471_200_000, 1000);
        let mut out = Vec::new();
        while source.next_batch(2, &mut out).unwrap().more {}
        out
    }

    #[test]
    fn is_deterministic_and_well_formed() {
        let a = generate(7);
        assert_eq!(a.len(), 5);
        assert_eq!(a.iter().map(|e| &e.value).collect::<Vec<_>>(), generate(7).iter().map(|e| &e.value).collect::<Vec<_>>());
        assert_ne!(a[0].value, generate(8)[0].value);
        for (i, event) in a.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_slice(&event.value).unwrap();
            assert_eq!(v["order_id"], i as u64 + 1);
            assert!((1..=3).contains(&v["customer_id"].as_u64().unwrap()));
            assert_eq!(event.timestamp, 1_768_471_200_000 + i as i64 * 1000);
        }
        let first: serde_json::Value = serde_json::from_slice(&a[0].value).unwrap();
        assert_eq!(first["event_time"], "2026-01-15T10:00:00.000Z");
    }
}
