//! A native test harness: run a function's logic with `cargo test`, against
//! an in-memory host that scopes state per key like the real one.
//!
//! ```
//! # use weir_sdk::{Context, Error, Event, ProcessFunction, ValueState};
//! # struct Sum { total: ValueState<i64> }
//! # impl Default for Sum { fn default() -> Self { Self { total: ValueState::new("total") } } }
//! # impl ProcessFunction for Sum {
//! #     fn process(&mut self, _key: &[u8], events: &[Event], _ctx: &mut Context) -> Result<(), Error> {
//! #         let add: i64 = events.iter().map(|e| e.value.len() as i64).sum();
//! #         self.total.set(&(self.total.get()?.unwrap_or(0) + add))
//! #     }
//! # }
//! use weir_sdk::testing::Harness;
//!
//! let mut harness = Harness::<Sum>::new();
//! harness.process(b"k", vec![Event::new(b"abc".to_vec(), 0)]).unwrap();
//! assert_eq!(harness.value::<i64>(b"k", "total"), Some(3));
//! assert_eq!(harness.value::<i64>(b"other", "total"), None);
//! ```

use serde::de::DeserializeOwned;

use crate::__private::wit::types::{KeyedEvents, KeyedTimers};
use crate::host::native::{domain_index, with_mock};
use crate::{
    codec, function, AggregateFunction, BroadcastProcessFunction, CoProcessFunction, Error, Event,
    FiredTimer, KeyFunction, LogLevel, ProcessFunction, TimeDomain, TransformFunction, Window,
    WindowProcessFunction,
};

/// One function instance wired to this thread's in-memory host.
///
/// Creating a harness resets the in-memory host, so each test starts with
/// empty state.
pub struct Harness<F> {
    function: F,
}

impl<F: Default> Default for Harness<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Default> Harness<F> {
    /// A fresh function instance over empty state.
    pub fn new() -> Self {
        with_mock(|m| {
            *m = crate::host::native::MockHost { watermark: i64::MIN, ..Default::default() }
        });
        Self { function: F::default() }
    }

    /// The function instance, to inspect or adjust it.
    pub fn function(&mut self) -> &mut F {
        &mut self.function
    }

    /// Set the watermark that `Context::current_watermark` reports.
    pub fn set_watermark(&mut self, watermark: i64) {
        with_mock(|m| m.watermark = watermark);
    }

    /// Set the time that `Context::processing_time` reports.
    pub fn set_processing_time(&mut self, time: i64) {
        with_mock(|m| m.processing_time = time);
    }

    /// The value state `name` of `key`, decoded, if set and not expired.
    pub fn value<T: DeserializeOwned>(&self, key: &[u8], name: &str) -> Option<T> {
        let bytes = with_mock(|m| {
            let stored = m.values.get(&(name.to_string(), key.to_vec()))?;
            stored.is_live(m.processing_time).then(|| stored.value.clone())
        })?;
        Some(codec::decode(&bytes).expect("state value does not decode as the requested type"))
    }

    /// Events sent to the side output `name` so far (removing them).
    pub fn take_side_output(&mut self, name: &str) -> Vec<Event> {
        with_mock(|m| {
            let (wanted, rest) =
                std::mem::take(&mut m.side_outputs).into_iter().partition(|(n, _)| n == name);
            m.side_outputs = rest;
            wanted.into_iter().map(|(_, e)| e).collect()
        })
    }

    /// Log lines written so far.
    pub fn logs(&self) -> Vec<(LogLevel, String)> {
        with_mock(|m| m.logs.clone())
    }

    /// The broadcast map `name`'s value under `key`, decoded, if any.
    pub fn broadcast_value<K: serde::Serialize, V: DeserializeOwned>(
        &self,
        name: &str,
        key: &K,
    ) -> Option<V> {
        let key = codec::encode(key).expect("the key encodes");
        let bytes = with_mock(|m| m.broadcast.get(name)?.get(&key).cloned())?;
        Some(codec::decode(&bytes).expect("broadcast value does not decode as the requested type"))
    }

    /// Move the watermark to `watermark` and fire every event-time timer at
    /// or before it, in timestamp order (including timers registered while
    /// firing); return what the function emitted. For a
    /// [`ProcessFunction`] (and so a broadcast one) or a
    /// [`CoProcessFunction`].
    pub fn advance_watermark<M>(&mut self, watermark: i64) -> Result<Vec<Event>, Error>
    where
        F: OnTimers<M>,
    {
        self.set_watermark(watermark);
        self.fire_due(TimeDomain::EventTime, watermark)
    }

    /// Move processing time to `time` and fire every processing-time timer
    /// at or before it; return what the function emitted.
    pub fn advance_processing_time<M>(&mut self, time: i64) -> Result<Vec<Event>, Error>
    where
        F: OnTimers<M>,
    {
        self.set_processing_time(time);
        self.fire_due(TimeDomain::ProcessingTime, time)
    }

    fn fire_due<M>(&mut self, domain: TimeDomain, up_to: i64) -> Result<Vec<Event>, Error>
    where
        F: OnTimers<M>,
    {
        let index = domain_index(domain);
        loop {
            let next = with_mock(|m| {
                let due =
                    m.timers.iter().find(|(d, ts, _)| *d == index && *ts <= up_to).cloned()?;
                m.timers.remove(&due);
                Some(due)
            });
            let Some((_, timestamp, key)) = next else { break };
            let batch = vec![KeyedTimers { key, timers: vec![FiredTimer { timestamp, domain }] }];
            let result = self.function.fire(batch);
            with_mock(|m| m.current_key = None);
            result.map_err(|e| Error::msg(e.message))?;
        }
        Ok(take_emitted())
    }

    /// The timers registered and not yet fired, as (domain, timestamp, key).
    pub fn pending_timers(&self) -> Vec<(TimeDomain, i64, Vec<u8>)> {
        with_mock(|m| {
            m.timers
                .iter()
                .map(|(d, ts, k)| {
                    (
                        if *d == 0 { TimeDomain::EventTime } else { TimeDomain::ProcessingTime },
                        *ts,
                        k.clone(),
                    )
                })
                .collect()
        })
    }
}

/// What the main output received so far (removing it).
fn take_emitted() -> Vec<Event> {
    with_mock(|m| std::mem::take(&mut m.emitted))
}

/// Functions with timers: [`ProcessFunction`] (`M` = [`Keyed`]) and
/// [`CoProcessFunction`] (`M` = [`CoKeyed`]). The harness's timer methods
/// take any; `M` is inferred.
pub trait OnTimers<M> {
    /// Deliver fired timers.
    #[doc(hidden)]
    fn fire(
        &mut self,
        batch: Vec<KeyedTimers>,
    ) -> Result<(), crate::__private::wit::types::FunctionError>;
}

/// [`OnTimers`] of a [`ProcessFunction`].
pub enum Keyed {}

/// [`OnTimers`] of a [`CoProcessFunction`].
pub enum CoKeyed {}

impl<F: ProcessFunction> OnTimers<Keyed> for F {
    fn fire(
        &mut self,
        batch: Vec<KeyedTimers>,
    ) -> Result<(), crate::__private::wit::types::FunctionError> {
        function::fire_timers(self, batch)
    }
}

impl<F: CoProcessFunction> OnTimers<CoKeyed> for F {
    fn fire(
        &mut self,
        batch: Vec<KeyedTimers>,
    ) -> Result<(), crate::__private::wit::types::FunctionError> {
        function::co_fire_timers(self, batch)
    }
}

impl<F: TransformFunction> Harness<F> {
    /// Transform `events` as one batch, as the host would, and return the
    /// outputs in order.
    pub fn transform(&mut self, events: Vec<Event>) -> Result<Vec<Event>, Error> {
        let mut packed = crate::packing::BatchPacker::default();
        events.iter().for_each(|event| packed.push_event(event));
        let out = function::transform_packed(&mut self.function, packed.into_batch())
            .map_err(|e| Error::msg(e.message))?;
        crate::packing::unpack(&out)
    }
}

impl<F: CoProcessFunction> Harness<F> {
    /// Process `events` of `key` from the first input as one batch, and
    /// return what the function emitted to the main output.
    pub fn process1(&mut self, key: &[u8], events: Vec<Event>) -> Result<Vec<Event>, Error> {
        self.co_process(0, key, events)
    }

    /// Process `events` of `key` from the second input as one batch, and
    /// return what the function emitted to the main output.
    pub fn process2(&mut self, key: &[u8], events: Vec<Event>) -> Result<Vec<Event>, Error> {
        self.co_process(1, key, events)
    }

    fn co_process(
        &mut self,
        input: u8,
        key: &[u8],
        events: Vec<Event>,
    ) -> Result<Vec<Event>, Error> {
        let batch = vec![KeyedEvents { key: key.to_vec(), events }];
        let result = function::co_process_batch(&mut self.function, input, batch);
        with_mock(|m| m.current_key = None);
        result.map_err(|e| Error::msg(e.message))?;
        Ok(take_emitted())
    }
}

impl<F: BroadcastProcessFunction> Harness<F> {
    /// Deliver broadcast `events` as one batch, as the host would (no key
    /// selected, broadcast state writable), and return what the function
    /// emitted to the main output.
    pub fn process_broadcast(&mut self, events: Vec<Event>) -> Result<Vec<Event>, Error> {
        let mut packed = crate::packing::BatchPacker::default();
        events.iter().for_each(|event| packed.push_event(event));
        with_mock(|m| {
            m.current_key = None;
            m.broadcast_writable = true;
        });
        let result = function::broadcast_packed(&mut self.function, packed.into_batch());
        with_mock(|m| m.broadcast_writable = false);
        result.map_err(|e| Error::msg(e.message))?;
        Ok(take_emitted())
    }
}

impl<F: AggregateFunction> Harness<F> {
    /// Fold `events` into a fresh accumulator for `window` of `key`, as the
    /// host would, and return the window's result.
    pub fn aggregate(
        &mut self,
        key: &[u8],
        window: Window,
        events: Vec<Event>,
    ) -> Result<Vec<Event>, Error> {
        let accumulate = crate::__private::wit::types::Accumulate { accumulator: None, events };
        let mut accumulators = function::aggregate_add(&mut self.function, vec![accumulate])
            .map_err(|e| Error::msg(e.message))?;
        let accumulator = accumulators.pop().ok_or_else(|| Error::msg("no accumulator"))?;
        let keys = crate::__private::wit::types::PackedKeys {
            bytes: key.to_vec(),
            ends: vec![key.len() as u32],
        };
        let accumulator_ends = vec![accumulator.len() as u32];
        let request = crate::__private::wit::types::WindowResults {
            keys,
            windows: vec![window],
            accumulators: accumulator,
            accumulator_ends,
        };
        let results = function::aggregate_results(&mut self.function, request)
            .map_err(|e| Error::msg(e.message))?;
        crate::packing::unpack(&results)
    }
}

impl<F: WindowProcessFunction> Harness<F> {
    /// The result of `key`'s `window` holding `events`, as the host would
    /// ask for it when the window fires.
    pub fn process_window(
        &mut self,
        key: &[u8],
        window: Window,
        events: Vec<Event>,
    ) -> Result<Vec<Event>, Error> {
        let request =
            crate::__private::wit::types::WindowEvents { key: key.to_vec(), window, events };
        function::window_process(&mut self.function, vec![request])
            .map_err(|e| Error::msg(e.message))
    }
}

impl<F: KeyFunction> Harness<F> {
    /// The key the function gives `event`.
    pub fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        self.function.key(event)
    }
}

impl<F: ProcessFunction> Harness<F> {
    /// Process `events` of `key` as one batch, as the host would, and
    /// return what the function emitted to the main output.
    pub fn process(&mut self, key: &[u8], events: Vec<Event>) -> Result<Vec<Event>, Error> {
        let batch = vec![KeyedEvents { key: key.to_vec(), events }];
        let result = function::process_batch(&mut self.function, batch);
        with_mock(|m| m.current_key = None);
        result.map_err(|e| Error::msg(e.message))?;
        Ok(take_emitted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, ValueState};

    /// Counts events of both inputs per key; a timer emits the count.
    struct Both {
        count: ValueState<u32>,
    }

    impl Default for Both {
        fn default() -> Self {
            Self { count: ValueState::new("count") }
        }
    }

    impl Both {
        fn add(&mut self, n: usize, ctx: &mut Context) -> Result<(), Error> {
            self.count.set(&(self.count.get()?.unwrap_or(0) + n as u32))?;
            ctx.register_event_time_timer(100)
        }
    }

    impl CoProcessFunction for Both {
        fn process1(&mut self, _: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
            self.add(events.len(), ctx)
        }

        fn process2(&mut self, _: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
            self.add(events.len() * 10, ctx)
        }

        fn on_timer(
            &mut self,
            key: &[u8],
            timer: FiredTimer,
            ctx: &mut Context,
        ) -> Result<(), Error> {
            let count = self.count.get()?.unwrap_or(0);
            ctx.emit(Event::new(
                format!("{}={count}", String::from_utf8_lossy(key)).into_bytes(),
                timer.timestamp,
            ));
            Ok(())
        }
    }

    #[test]
    fn co_process_inputs_share_keyed_state_and_timers() {
        let mut harness = Harness::<Both>::new();
        let e = || Event::new(Vec::new(), 0);
        harness.process1(b"a", vec![e(), e()]).unwrap();
        harness.process2(b"a", vec![e()]).unwrap();
        harness.process2(b"b", vec![e()]).unwrap();
        assert_eq!(harness.value::<u32>(b"a", "count"), Some(12));
        assert_eq!(harness.pending_timers().len(), 2);
        let fired = harness.advance_watermark(100).unwrap();
        let values: Vec<_> = fired.iter().map(|e| e.value.clone()).collect();
        assert_eq!(values, vec![b"a=12".to_vec(), b"b=10".to_vec()]);
    }
}
