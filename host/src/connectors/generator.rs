//! The generator source: a deterministic stream of synthetic orders, for
//! demos and benchmarks.
//!
//! Event `i` (from 0) is
//! `{"order_id":i+1,"customer_id":c,"amount":a,"event_time":t}` where `c`
//! (1..=keys) and `a` (0.01..=100.00, two decimals) come from a SplitMix64
//! stream seeded with `seed`, and `t = start_time + i * interval_ms`. The
//! same settings always give the same events.
//!
//! With [`Encoding::Binary`] the same order is a [`weir_sdk::binary::Order`]
//! instead (24 bytes: `order_id`, `customer_id`, amount in cents,
//! little-endian), for benchmarks that should measure the pipeline rather
//! than JSON parsing.
//!
//! Its position is `{"produced": n}`, the number of events already given
//! out; seeking computes the random state directly, so a resumed generator
//! continues exactly as an uninterrupted one.
//!
//! With `rate` it is a live stream instead: events come at that many a
//! second in real time (with `burst_ms`, each second's events within its
//! first `burst_ms`), each stamped with the wall-clock time it was due,
//! its ingestion time (a source thread that falls behind its schedule
//! shows as latency, not as late stamps); `start_time` and `interval_ms`
//! are then unused. A batch holds what is due, so a low rate gives small
//! batches that wait for nothing (what `weir bench --latency` measures).
//! While the source task holds events for a batch
//! ([`Source::set_max_wait`]), the generator sleeps until the batch would
//! be full or the hold ends, whichever is first, and then gives out what
//! is due: the batch the source task would cut anyway, made in one
//! wake-up rather than in naps of a few µs (at millions a second, tens of
//! thousands of wake-ups a second, each a chance to queue for a core).
//! Those sleeps are waits for input: the generator reports them
//! ([`Source::take_waited`]) and its task counts them as idle, so a paced
//! generator reads as idle as its pace leaves it, not as busy.

use std::fmt::Write as _;
use std::ops::Range;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use weir_sdk::binary::Order;

use super::config::{ConfigError, SourceConfig};
use super::{decode, encode, ConnectorError, Polled, Source};
use crate::runtime::packed::{EventRef, PackedEvents};
use crate::Event;

/// The SplitMix64 increment; the state advances by it once per random number.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Random numbers drawn per event (customer and amount).
const DRAWS_PER_EVENT: u64 = 2;

/// `source: { type: generator, … }`: deterministic synthetic orders, for
/// demos and benchmarks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorConfig {
    /// Number of events to produce.
    pub count: u64,
    /// Number of distinct customers (keys).
    #[serde(default = "default_keys")]
    pub keys: u64,
    /// Seed of the pseudo-random amounts and customers.
    #[serde(default)]
    pub seed: u64,
    /// Event time of the first event, RFC 3339 (default
    /// `2026-01-15T10:00:00Z`).
    #[serde(default = "default_start_time", with = "humantime_serde")]
    pub start_time: SystemTime,
    /// Milliseconds of event time between consecutive events.
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    /// `json` (default) or `binary` (24 bytes per order, see
    /// `weir_sdk::binary::Order`).
    #[serde(default)]
    pub encoding: Encoding,
    /// Events a second in real time, each timestamped with the wall clock
    /// (default: as fast as it is read, at `start_time + i × interval_ms`).
    #[serde(default)]
    pub rate: Option<u64>,
    /// With `rate`: each second's events within its first `burst_ms`.
    #[serde(default)]
    pub burst_ms: Option<u64>,
    /// The share of events (0 to 1) for customer 1, the others spread
    /// over all `keys` as without it: a skewed input, one key hot.
    #[serde(default)]
    pub hot_share: Option<f64>,
}

fn default_keys() -> u64 {
    100
}

fn default_start_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_768_471_200_000)
}

fn default_interval() -> u64 {
    1000
}

impl SourceConfig for GeneratorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.keys == 0 {
            return Err(ConfigError::new("keys", "must be at least 1"));
        }
        if self.rate == Some(0) {
            return Err(ConfigError::new("rate", "must be at least 1 event a second"));
        }
        if self.hot_share.is_some_and(|share| !(0.0..=1.0).contains(&share)) {
            return Err(ConfigError::new("hot_share", "must be within 0..=1"));
        }
        match (self.rate, self.burst_ms) {
            (None, Some(_)) => Err(ConfigError::new("burst_ms", "needs a rate")),
            (_, Some(burst)) if !(1..=1000).contains(&burst) => {
                Err(ConfigError::new("burst_ms", "must be within 1..=1000"))
            }
            _ => Ok(()),
        }
    }

    fn open(&self, _pipeline: &str) -> Result<Box<dyn Source>, ConnectorError> {
        let start = self
            .start_time
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or(0);
        let source =
            GeneratorSource::new(self.count, self.keys, self.seed, start, self.interval_ms)
                .with_encoding(self.encoding)
                .with_hot_share(self.hot_share.unwrap_or(0.0));
        Ok(Box::new(match self.rate {
            Some(rate) => source.paced(Pace::new(rate, self.burst_ms)),
            None => source,
        }))
    }
}

/// How generated orders are encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// JSON text (the default).
    #[default]
    Json,
    /// 24 bytes: order id, customer id, amount in cents (little-endian).
    Binary,
}

/// Generates synthetic orders.
pub struct GeneratorSource {
    encoding: Encoding,
    count: u64,
    remaining: u64,
    next_id: u64,
    keys: u64,
    seed: u64,
    rng: u64,
    start_millis: i64,
    interval_ms: u64,
    pace: Option<Pace>,
    /// A live generator's longest sleep for more events while the source
    /// task holds some ([`Source::set_max_wait`]).
    hold: Option<Duration>,
    /// How long it slept for its pace since [`Source::take_waited`].
    waited: Duration,
    /// Events whose customer draw's top 24 bits are below this go to
    /// customer 1 (0: none; `HOT_SCALE`: all).
    hot: u64,
}

/// The scale of [`GeneratorSource`]'s `hot`: 2²⁴.
const HOT_SCALE: f64 = (1u64 << 24) as f64;

/// A live generator's schedule: how many events are due since it started,
/// and when each was due.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Events a second.
    rate: u64,
    /// Each second's events within its first this many ms (1000: evenly).
    burst_ms: u64,
    /// When it started, and the events given out since.
    started: Option<Started>,
}

/// When a [`Pace`] started, on both clocks, and what it gave out since.
#[derive(Debug, Clone, Copy)]
struct Started {
    /// The monotonic clock, which the schedule follows.
    at: Instant,
    /// The wall clock, µs since the epoch, which stamps the events.
    wall_micros: i64,
    /// Events given out since.
    given: u64,
}

impl Pace {
    /// `rate` events a second, each second's within its first `burst_ms`
    /// (evenly spread without).
    pub fn new(rate: u64, burst_ms: Option<u64>) -> Self {
        Self { rate: rate.max(1), burst_ms: burst_ms.unwrap_or(1000).clamp(1, 1000), started: None }
    }

    /// Events due `elapsed` after the start.
    fn due(&self, elapsed: Duration) -> u64 {
        let within = (elapsed.subsec_nanos() as f64 / 1e6 / self.burst_ms as f64).min(1.0);
        elapsed.as_secs() * self.rate + (within * self.rate as f64) as u64
    }

    /// How long after the start event `index` (from 0) is due: the
    /// inverse of [`Pace::due`].
    fn due_after(&self, index: u64) -> Duration {
        let (secs, nth) = (index / self.rate, index % self.rate + 1);
        let nanos = (u128::from(nth) * u128::from(self.burst_ms) * 1_000_000)
            .div_ceil(u128::from(self.rate));
        Duration::from_secs(secs) + Duration::from_nanos(nanos as u64)
    }

    /// The wall-clock time (ms since the epoch) event `index` was due: its
    /// timestamp. Stamping the schedule, not the moment the source got to
    /// it, keeps a source that falls behind from hiding its delay.
    fn stamp(&self, index: u64) -> i64 {
        let wall_micros = self.started.map_or(0, |started| started.wall_micros);
        (wall_micros + self.due_after(index).as_micros() as i64).div_euclid(1000)
    }

    /// Sleep until `wanted` more events are due, or for `limit`,
    /// whichever is sooner (not at all before the pace started); how long
    /// it slept.
    fn wait_for(&self, wanted: u64, limit: Duration) -> Duration {
        let Some(started) = self.started else { return Duration::ZERO };
        let Some(last) = (started.given + wanted).checked_sub(1) else { return Duration::ZERO };
        let now = Instant::now();
        let full = (started.at + self.due_after(last)).saturating_duration_since(now);
        let wait = full.min(limit);
        if wait.is_zero() {
            return Duration::ZERO;
        }
        std::thread::sleep(wait);
        now.elapsed()
    }

    /// The indexes of the events of `wanted` that may be given out now (at
    /// least one when any is due), or how long to wait when none is: until
    /// the next is due, at most a millisecond.
    fn allow(&mut self, wanted: u64) -> Result<Range<u64>, Duration> {
        let now = Instant::now();
        let started = *self.started.get_or_insert_with(|| Started {
            at: now,
            wall_micros: crate::clock::now_micros(),
            given: 0,
        });
        let due = self.due(now - started.at).saturating_sub(started.given);
        if due == 0 {
            let next = Duration::from_secs_f64(1.0 / self.rate as f64);
            return Err(next.min(Duration::from_millis(1)));
        }
        let allowed = due.min(wanted);
        self.started = Some(Started { given: started.given + allowed, ..started });
        Ok(started.given..started.given + allowed)
    }
}

impl GeneratorSource {
    /// `count` orders over `keys` customers from `seed`, the first at
    /// `start_millis` (ms since the epoch).
    pub fn new(count: u64, keys: u64, seed: u64, start_millis: i64, interval_ms: u64) -> Self {
        Self {
            encoding: Encoding::Json,
            count,
            remaining: count,
            next_id: 1,
            keys: keys.max(1),
            seed,
            rng: seed,
            start_millis,
            interval_ms,
            pace: None,
            hold: None,
            waited: Duration::ZERO,
            hot: 0,
        }
    }

    /// Give customer 1 `share` (0 to 1) of the events.
    pub fn with_hot_share(mut self, share: f64) -> Self {
        self.hot = (share.clamp(0.0, 1.0) * HOT_SCALE).round() as u64;
        self
    }

    /// Make it live: events at `pace`, stamped with when each was due.
    pub fn paced(mut self, pace: Pace) -> Self {
        self.pace = Some(pace);
        self
    }

    /// Encode orders as `encoding`.
    pub fn with_encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(GAMMA);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl GeneratorSource {
    /// Make up to `max` events (what is due, when paced), each handed to
    /// `out` while it is borrowed: [`Source::next_packed`] copies it into
    /// its buffers, [`Source::next_batch`] makes an [`Event`] of it.
    fn generate(&mut self, max: usize, mut out: impl FnMut(EventRef<'_>)) -> Polled {
        let mut n = self.remaining.min(max as u64);
        let mut scheduled = None;
        if let Some(pace) = self.pace.as_mut().filter(|_| n > 0) {
            if let Some(hold) = self.hold {
                self.waited += pace.wait_for(n, hold);
            }
            match pace.allow(n) {
                Ok(allowed) => {
                    n = allowed.end - allowed.start;
                    scheduled = Some(allowed.start);
                }
                Err(wait) => {
                    let asleep = Instant::now();
                    std::thread::sleep(wait);
                    self.waited += asleep.elapsed();
                    return Polled::single(true);
                }
            }
        }
        let mut text = String::new();
        for i in 0..n {
            let id = self.next_id;
            let draw = self.next_random();
            let customer = if draw >> 40 < self.hot { 1 } else { draw % self.keys + 1 };
            let cents = self.next_random() % 10_000 + 1;
            let timestamp = match (&self.pace, scheduled) {
                (Some(pace), Some(first)) => pace.stamp(first + i),
                _ => self
                    .start_millis
                    .saturating_add(((id - 1).saturating_mul(self.interval_ms)) as i64),
            };
            self.next_id += 1;
            let event = |value| EventRef { key: None, value, timestamp, headers: &[] };
            if self.encoding == Encoding::Binary {
                let order =
                    Order { order_id: id, customer_id: customer, amount_cents: cents as i64 };
                out(event(&order.encode()));
                continue;
            }
            let time = UNIX_EPOCH + Duration::from_millis(timestamp.max(0) as u64);
            text.clear();
            let _ = write!(
                text,
                r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":"{}"}}"#,
                cents / 100,
                cents % 100,
                humantime::format_rfc3339_millis(time)
            );
            out(event(text.as_bytes()));
        }
        self.remaining -= n;
        Polled::single(self.remaining > 0)
    }
}

impl Source for GeneratorSource {
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        Ok(self.generate(max, |event| out.push(event.to_event())))
    }

    fn next_packed(
        &mut self,
        max: usize,
        out: &mut PackedEvents,
    ) -> Result<Polled, ConnectorError> {
        Ok(self.generate(max, |event| out.push(event)))
    }

    fn set_max_wait(&mut self, wait: Option<Duration>) {
        self.hold = wait;
    }

    /// Its sleeps until its next events were due: a paced generator is
    /// idle while it keeps to its pace.
    fn take_waited(&mut self) -> Duration {
        std::mem::take(&mut self.waited)
    }

    fn progress(&self) -> Option<(u64, u64)> {
        Some((self.count - self.remaining, self.count))
    }

    fn position(&self) -> serde_json::Value {
        encode(&GeneratorPosition { produced: self.next_id - 1 })
    }

    fn seek(&mut self, position: &serde_json::Value) -> Result<(), ConnectorError> {
        let what = || "generator source".to_string();
        let GeneratorPosition { produced } = decode(what, position)?;
        if produced > self.count {
            return Err(ConnectorError::Restore {
                what: what(),
                message: format!("position {produced} is beyond its {} events", self.count),
            });
        }
        self.next_id = produced + 1;
        self.remaining = self.count - produced;
        self.rng =
            self.seed.wrapping_add(GAMMA.wrapping_mul(produced.wrapping_mul(DRAWS_PER_EVENT)));
        Ok(())
    }
}

/// Where a [`GeneratorSource`] stands.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GeneratorPosition {
    /// Events already given out.
    produced: u64,
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
        assert_eq!(
            a.iter().map(|e| &e.value).collect::<Vec<_>>(),
            generate(7).iter().map(|e| &e.value).collect::<Vec<_>>()
        );
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

    #[test]
    fn packed_batches_hold_the_events_of_event_batches() {
        use crate::runtime::packing::tests::shape;
        for encoding in [Encoding::Json, Encoding::Binary] {
            let new = || GeneratorSource::new(9, 4, 5, 0, 10).with_encoding(encoding);
            let (mut events, mut packed) = (new(), new());
            let mut out = PackedEvents::default();
            // Packed batches go on where an event batch left off, and the
            // other way round: one stream, whichever way it is read.
            let mut expected = Vec::new();
            while events.next_batch(2, &mut expected).unwrap().more {}
            assert_eq!(packed.next_packed(3, &mut out).unwrap(), Polled::single(true));
            let mut rest = Vec::new();
            packed.next_batch(2, &mut rest).unwrap();
            while packed.next_packed(4, &mut out).unwrap().more {}
            let mut got = out.to_events();
            got.splice(3..3, rest);
            assert_eq!(shape(&got), shape(&expected), "{encoding:?}");
        }
    }

    fn drain(source: &mut GeneratorSource, max: usize) -> Vec<(Vec<u8>, i64)> {
        let mut out = Vec::new();
        while source.next_batch(max, &mut out).unwrap().more {}
        out.into_iter().map(|e| (e.value, e.timestamp)).collect()
    }

    #[test]
    fn a_hot_share_gives_customer_one_that_share_of_the_events() {
        let customers = |share: f64| -> Vec<u64> {
            let mut source = GeneratorSource::new(10_000, 1000, 3, 0, 1)
                .with_encoding(Encoding::Binary)
                .with_hot_share(share);
            let mut out = Vec::new();
            while source.next_batch(4096, &mut out).unwrap().more {}
            out.iter().map(|e| Order::decode(&e.value).unwrap().customer_id).collect()
        };
        let ones = |share: f64| customers(share).iter().filter(|&&c| c == 1).count();
        let half = ones(0.5);
        assert!((4800..=5300).contains(&half), "{half} of 10000 for customer 1");
        assert!(ones(0.0) < 50, "without it customer 1 is one of 1000");
        assert_eq!(ones(1.0), 10_000);
        // The other events keep their customers: the draws are the same.
        let (plain, hot) = (customers(0.0), customers(0.5));
        let kept = plain.iter().zip(&hot).filter(|(p, h)| p == h).count();
        assert!(kept >= 4700, "{kept}");
    }

    #[test]
    fn seeking_to_a_position_continues_like_an_uninterrupted_run() {
        let new = || GeneratorSource::new(10, 4, 99, 1_768_471_200_000, 500);
        let mut source = new();
        let mut head = Vec::new();
        source.next_batch(3, &mut head).unwrap();
        source.next_batch(3, &mut head).unwrap();
        let position = source.position();
        assert_eq!(position, serde_json::json!({"produced": 6}));
        let rest = drain(&mut source, 3);
        assert_eq!(rest.len(), 4);

        let mut resumed = new();
        resumed.seek(&position).unwrap();
        assert_eq!(resumed.progress(), Some((6, 10)));
        assert_eq!(drain(&mut resumed, 2), rest);

        // Seeking back to the start replays everything.
        resumed.seek(&serde_json::json!({"produced": 0})).unwrap();
        assert_eq!(drain(&mut resumed, 4), drain(&mut new(), 4));
    }

    #[test]
    fn a_pace_spreads_each_second_evenly_or_within_its_burst() {
        let ms = Duration::from_millis;
        let even = Pace::new(1000, None);
        assert_eq!(
            [0, 1, 250, 999, 1000, 2500].map(|t| even.due(ms(t))),
            [0, 1, 250, 999, 1000, 2500]
        );
        let bursty = Pace::new(1000, Some(100));
        assert_eq!(
            [0, 50, 100, 500, 1050, 1999].map(|t| bursty.due(ms(t))),
            [0, 500, 1000, 1000, 1500, 2000]
        );
    }

    #[test]
    fn each_event_is_due_when_the_pace_first_counts_it() {
        for pace in [Pace::new(1000, None), Pace::new(1000, Some(100)), Pace::new(3, None)] {
            for index in [0, 1, 2, 499, 998, 999, 1000, 2501] {
                let at = pace.due_after(index);
                assert!(pace.due(at) > index, "{pace:?}: {index} is due at {at:?}");
                let before = at - Duration::from_nanos(1);
                assert!(pace.due(before) <= index, "{pace:?}: {index} is due before {at:?}");
            }
        }
    }

    #[test]
    fn a_source_that_falls_behind_stamps_when_events_were_due_not_when_it_made_them() {
        let mut source = GeneratorSource::new(1000, 4, 1, 0, 1).paced(Pace::new(1000, None));
        let mut out = Vec::new();
        while out.is_empty() {
            source.next_batch(4096, &mut out).unwrap();
        }
        let started = out[0].timestamp;
        std::thread::sleep(Duration::from_millis(60));
        out.clear();
        source.next_batch(4096, &mut out).unwrap();
        // ~60 events were due while the source slept, one a millisecond.
        assert!(out.len() >= 50, "{} events", out.len());
        let stamps: Vec<i64> = out.iter().map(|e| e.timestamp - started).collect();
        assert!(stamps[0] <= 2, "{stamps:?}");
        assert!(stamps.windows(2).all(|w| w[1] - w[0] <= 1), "{stamps:?}");
        assert!(stamps[stamps.len() - 1] >= 49, "{stamps:?}");
    }

    #[test]
    fn while_a_batch_is_held_a_paced_generator_sleeps_until_it_is_full_or_the_hold_ends() {
        // One event a millisecond.
        let mut source = GeneratorSource::new(100_000, 4, 1, 0, 1).paced(Pace::new(1000, None));
        let mut out = Vec::new();
        while out.is_empty() {
            source.next_batch(4096, &mut out).unwrap();
        }
        // The source task holds what came and may wait 20 ms for more:
        // one call sleeps the hold out and gives what came due meanwhile,
        // rather than the one event due at once.
        source.set_max_wait(Some(Duration::from_millis(20)));
        source.take_waited();
        let asked = Instant::now();
        out.clear();
        source.next_batch(4096, &mut out).unwrap();
        let waited = asked.elapsed();
        assert!(waited >= Duration::from_millis(20), "returned after {waited:?}");
        assert!(out.len() >= 15, "{} events after {waited:?}", out.len());
        // That sleep was a wait for input, reported once.
        let slept = source.take_waited();
        assert!(slept >= Duration::from_millis(20) && slept <= waited, "{slept:?} of {waited:?}");
        assert_eq!(source.take_waited(), Duration::ZERO);
        // Once the batch would be full it does not wait the hold out.
        source.set_max_wait(Some(Duration::from_secs(30)));
        out.clear();
        let asked = Instant::now();
        source.next_batch(5, &mut out).unwrap();
        assert_eq!(out.len(), 5);
        assert!(asked.elapsed() < Duration::from_secs(10), "waited {:?}", asked.elapsed());
        // Not holding anything, it gives what is due at once.
        source.set_max_wait(None);
        out.clear();
        while out.is_empty() {
            source.next_batch(4096, &mut out).unwrap();
        }
        assert!(out.len() < 15, "{} events", out.len());
    }

    #[test]
    fn a_paced_generator_reports_its_sleeps_as_waits_and_an_unpaced_one_none() {
        // 200 events a second: most of each call's time is the wait.
        let mut source = GeneratorSource::new(20, 4, 1, 0, 1).paced(Pace::new(200, None));
        let started = Instant::now();
        let mut out = Vec::new();
        let mut waited = Duration::ZERO;
        while source.next_batch(4096, &mut out).unwrap().more {
            waited += source.take_waited();
        }
        waited += source.take_waited();
        let elapsed = started.elapsed();
        assert_eq!(out.len(), 20);
        // 20 events at 200/s take ~100 ms, nearly all of it asleep.
        assert!(waited * 2 > elapsed, "waited {waited:?} of {elapsed:?}");
        assert!(waited <= elapsed, "waited {waited:?} of {elapsed:?}");
        let mut unpaced = GeneratorSource::new(1000, 4, 1, 0, 1);
        while unpaced.next_batch(100, &mut out).unwrap().more {}
        assert_eq!(unpaced.take_waited(), Duration::ZERO);
    }

    #[test]
    fn a_paced_generator_is_never_ahead_of_its_schedule_and_stamps_the_wall_clock() {
        let (rate, count) = (2000, 300);
        let mut source = GeneratorSource::new(count, 4, 1, 0, 1).paced(Pace::new(rate, None));
        let started = Instant::now();
        let first_millis = crate::clock::now_millis();
        let mut out = Vec::new();
        let mut polls = 0;
        while source.next_batch(4096, &mut out).unwrap().more {
            polls += 1;
            // Never more than is due since the start.
            let due = started.elapsed().as_secs_f64() * rate as f64;
            assert!(out.len() as f64 <= due + 1.0, "{} given, {due} due", out.len());
        }
        assert_eq!(out.len() as u64, count);
        assert!(polls > 1, "a live stream comes in more than one batch");
        let last_millis = crate::clock::now_millis();
        assert!(out.iter().all(|e| (first_millis..=last_millis).contains(&e.timestamp)));
        assert!(out.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    }

    #[test]
    fn positions_that_do_not_fit_are_errors() {
        let mut source = GeneratorSource::new(10, 4, 99, 0, 1);
        for bad in [
            serde_json::json!({"produced": 11}),
            serde_json::json!(3),
            serde_json::json!({"offset": 1}),
        ] {
            let err = source.seek(&bad).unwrap_err().to_string();
            assert!(err.starts_with("generator source: cannot restore"), "{err}");
        }
        // The source is unchanged by a failed seek.
        assert_eq!(source.progress(), Some((0, 10)));
    }
}
