//! Tailing a running pipeline's output: readers subscribe to one output
//! (the main one or a side output, by sink name) and get a rate-limited
//! sample of the events the sink thread writes to it.
//!
//! It never slows the pipeline down: with no reader the sink pays one
//! relaxed atomic load per batch; with readers it copies at most each
//! reader's budget of events into a bounded channel without waiting, and
//! a reader whose channel is full (it stopped reading) is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{Receiver, Sender};

use crate::runtime::packed::{EventRef, PackedEvents};

/// Events a reader's channel holds before the reader counts as stalled.
const READER_BUFFER: usize = 256;

/// Most events a second a reader may ask for.
pub const MAX_TAIL_RATE: u32 = 1000;

/// One event as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TailEvent {
    /// Its event time, in milliseconds since the epoch.
    pub timestamp: i64,
    /// Its key, if it has one (as text, lossily).
    pub key: Option<String>,
    /// Its value (as text, lossily).
    pub value: String,
}

impl From<EventRef<'_>> for TailEvent {
    fn from(event: EventRef<'_>) -> Self {
        Self {
            timestamp: event.timestamp,
            key: event.key.map(|k| String::from_utf8_lossy(k).into_owned()),
            value: String::from_utf8_lossy(event.value).into_owned(),
        }
    }
}

/// A reader: its output, its channel and its budget.
struct Reader {
    output: String,
    events: Sender<TailEvent>,
    /// Events a second.
    rate: u32,
    /// Events it may still get in the current second, and when that began.
    budget: u32,
    second: Instant,
    /// Events it may still get in all.
    remaining: u64,
}

/// The readers of a run's outputs.
#[derive(Default)]
pub struct TailHub {
    readers: Mutex<Vec<Reader>>,
    /// How many readers there are (read without the lock).
    count: AtomicUsize,
}

impl std::fmt::Debug for TailHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TailHub").field("readers", &self.count.load(Ordering::Relaxed)).finish()
    }
}

impl TailHub {
    /// Follow output `output` (`main`, or a side output's sink name): up
    /// to `rate` events a second (at most [`MAX_TAIL_RATE`]), `limit` in
    /// all. The channel closes when the limit is reached, the reader
    /// stalls, or the run ends.
    pub fn subscribe(&self, output: &str, rate: u32, limit: u64) -> Receiver<TailEvent> {
        let (events, receiver) = tokio::sync::mpsc::channel(READER_BUFFER);
        let rate = rate.clamp(1, MAX_TAIL_RATE);
        let reader = Reader {
            output: output.to_string(),
            events,
            rate,
            budget: rate,
            second: Instant::now(),
            remaining: limit,
        };
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        readers.push(reader);
        self.count.store(readers.len(), Ordering::Relaxed);
        receiver
    }

    /// The sink thread wrote `events` to `output`: give readers their share.
    pub(crate) fn offer(&self, output: &str, events: &PackedEvents) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        readers.retain_mut(|reader| reader.output != output || reader.take(events, now));
        self.count.store(readers.len(), Ordering::Relaxed);
    }

    /// Drop every reader (the run ended).
    pub(crate) fn close(&self) {
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        readers.clear();
        self.count.store(0, Ordering::Relaxed);
    }
}

impl Reader {
    /// Send what the budget allows of `events`; whether to keep the reader.
    fn take(&mut self, events: &PackedEvents, now: Instant) -> bool {
        if now.duration_since(self.second) >= Duration::from_secs(1) {
            self.budget = self.rate;
            self.second = now;
        }
        let allowed = (self.budget as u64).min(self.remaining) as usize;
        for event in events.iter().take(allowed) {
            match self.events.try_send(TailEvent::from(event)) {
                Ok(()) => {
                    self.budget -= 1;
                    self.remaining -= 1;
                }
                // Stalled or gone: dropped.
                Err(TrySendError::Full(_) | TrySendError::Closed(_)) => return false,
            }
        }
        self.remaining > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: usize) -> PackedEvents {
        let events: Vec<crate::Event> = (0..n)
            .map(|i| crate::Event {
                key: Some(b"c1".to_vec()),
                value: format!("{{\"n\":{i}}}").into_bytes(),
                timestamp: i as i64,
                headers: vec![],
            })
            .collect();
        PackedEvents::of(&events)
    }

    /// What `receiver` holds now.
    fn drain(receiver: &mut Receiver<TailEvent>) -> Vec<TailEvent> {
        std::iter::from_fn(|| receiver.try_recv().ok()).collect()
    }

    #[test]
    fn a_reader_gets_its_rate_of_its_output_and_ends_at_its_limit() {
        let hub = TailHub::default();
        let mut main = hub.subscribe("main", 5, 7);
        hub.offer("late", &events(10));
        assert!(main.try_recv().is_err(), "another output");
        hub.offer("main", &events(10));
        let got = drain(&mut main);
        assert_eq!(got.len(), 5, "five a second");
        assert_eq!(
            got[0],
            TailEvent { timestamp: 0, key: Some("c1".into()), value: "{\"n\":0}".into() }
        );
        hub.offer("main", &events(10));
        assert_eq!(drain(&mut main).len(), 0, "the second's budget is spent");
        // A second later: two more reach the limit of 7, and the reader ends.
        hub.readers.lock().unwrap()[0].second -= Duration::from_secs(1);
        hub.offer("main", &events(10));
        assert_eq!(drain(&mut main).len(), 2);
        assert_eq!(hub.count.load(Ordering::Relaxed), 0);
        assert_eq!(main.blocking_recv(), None, "the channel closed");
    }

    #[test]
    fn a_stalled_reader_is_dropped_without_holding_the_sink() {
        let hub = TailHub::default();
        let mut stalled = hub.subscribe("main", MAX_TAIL_RATE, u64::MAX);
        for _ in 0..READER_BUFFER {
            hub.offer("main", &events(1));
        }
        assert_eq!(hub.count.load(Ordering::Relaxed), 1, "its buffer is just full");
        hub.offer("main", &events(1));
        assert_eq!(hub.count.load(Ordering::Relaxed), 0, "dropped instead of waited for");
        assert_eq!(drain(&mut stalled).len(), READER_BUFFER);
        assert_eq!(stalled.blocking_recv(), None);
    }
}
