//! Tailing a running pipeline's output: readers subscribe to one output
//! (the main one or a side output, by sink name) and get a rate-limited
//! sample of the events the sink thread writes to it.
//!
//! It never slows the pipeline down, however many readers there are: the
//! sink thread never visits a reader. With no reader it pays one relaxed
//! atomic load per batch; with readers it copies at most
//! [`MAX_TAIL_RATE`] events a second of each tailed output into that
//! output's ring of the last [`RING_CAPACITY`] events (at most
//! [`RING_BYTES`]), once for all of them, emptied when its last reader
//! goes. Each reader pulls its own share from the ring every
//! [`POLL_INTERVAL`] (at most its rate; what it skips or misses is not
//! kept for it). A reader is only its cursor: dropping it (its client went
//! away) removes it at once, with no output needed to notice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::runtime::packed::{EventRef, PackedEvents};

/// Events of an output kept for its readers: a second at the most any
/// reader may ask for.
pub const RING_CAPACITY: usize = 1024;

/// Bytes of keys and values an output's ring keeps at most (large events
/// leave fewer than [`RING_CAPACITY`] in it).
pub const RING_BYTES: usize = 16 << 20;

/// Most events a second a reader may ask for, and an output copies for
/// all its readers together.
pub const MAX_TAIL_RATE: u32 = 1000;

/// How often a reader looks for new events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

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

impl TailEvent {
    /// Bytes of its key and value.
    fn size(&self) -> usize {
        self.value.len() + self.key.as_ref().map_or(0, String::len)
    }
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

/// The newest events written to one output, numbered.
struct Ring {
    events: VecDeque<Arc<TailEvent>>,
    /// Bytes of the events' keys and values.
    bytes: usize,
    /// The number the next event gets.
    next: u64,
    /// Events the output may still copy this second, and when it began.
    budget: u32,
    second: Instant,
}

/// One tailed output.
struct Output {
    name: String,
    /// Its readers.
    readers: AtomicUsize,
    /// `ring.next`, read without the lock.
    next: AtomicU64,
    ring: Mutex<Ring>,
}

/// What the hub and its readers share.
#[derive(Default)]
struct Shared {
    /// Every output that has (had) a reader in this run.
    outputs: RwLock<Vec<Arc<Output>>>,
    /// Readers of all outputs (read without a lock).
    readers: AtomicUsize,
    /// The run ended.
    closed: AtomicBool,
}

/// The readers of a run's outputs.
#[derive(Default)]
pub struct TailHub {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TailHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TailHub").field("readers", &self.readers()).finish()
    }
}

impl TailHub {
    /// Follow output `output` (`main`, or a side output's sink name): up
    /// to `rate` events a second (at most [`MAX_TAIL_RATE`]), `limit` in
    /// all, from what is written after now. The reader ends when the
    /// limit is reached or the run ends; dropping it unsubscribes it.
    pub fn subscribe(&self, output: &str, rate: u32, limit: u64) -> TailReader {
        let found = {
            let outputs = self.shared.outputs.read().unwrap_or_else(PoisonError::into_inner);
            outputs.iter().find(|o| o.name == output).cloned()
        };
        let output = found.unwrap_or_else(|| {
            let mut outputs = self.shared.outputs.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(output) = outputs.iter().find(|o| o.name == output) {
                return output.clone();
            }
            let ring = Ring {
                events: VecDeque::new(),
                bytes: 0,
                next: 0,
                budget: MAX_TAIL_RATE,
                second: Instant::now(),
            };
            let new = Arc::new(Output {
                name: output.to_string(),
                readers: AtomicUsize::new(0),
                next: AtomicU64::new(0),
                ring: Mutex::new(ring),
            });
            outputs.push(new.clone());
            new
        });
        output.readers.fetch_add(1, Ordering::Relaxed);
        self.shared.readers.fetch_add(1, Ordering::Relaxed);
        let rate = rate.clamp(1, MAX_TAIL_RATE);
        TailReader {
            shared: self.shared.clone(),
            cursor: output.next.load(Ordering::Acquire),
            output,
            rate,
            budget: rate,
            second: Instant::now(),
            remaining: limit,
        }
    }

    /// How many readers follow the run's outputs now.
    pub fn readers(&self) -> usize {
        self.shared.readers.load(Ordering::Relaxed)
    }

    /// The sink thread wrote `events` to `output`: keep what this
    /// second's budget allows for its readers. Its cost does not depend
    /// on how many readers there are.
    pub(crate) fn offer(&self, output: &str, events: &PackedEvents) {
        if self.shared.readers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let outputs = self.shared.outputs.read().unwrap_or_else(PoisonError::into_inner);
        let Some(tailed) = outputs.iter().find(|o| o.name == output) else { return };
        if tailed.readers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut ring = tailed.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if now.duration_since(ring.second) >= Duration::from_secs(1) {
            ring.budget = MAX_TAIL_RATE;
            ring.second = now;
        }
        let copied = (ring.budget as usize).min(events.len());
        for event in events.iter().take(copied) {
            let event = TailEvent::from(event);
            ring.bytes += event.size();
            ring.events.push_back(Arc::new(event));
            while ring.events.len() > RING_CAPACITY || ring.bytes > RING_BYTES {
                let Some(oldest) = ring.events.pop_front() else { break };
                ring.bytes -= oldest.size();
            }
        }
        ring.budget -= copied as u32;
        ring.next += copied as u64;
        tailed.next.store(ring.next, Ordering::Release);
    }

    /// The run ended: readers get what is left for them, then end.
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// One reader of one output: where it is, its rate and what it may still
/// get. Dropping it unsubscribes it.
pub struct TailReader {
    shared: Arc<Shared>,
    output: Arc<Output>,
    /// The number of the next event it may get.
    cursor: u64,
    /// Events a second.
    rate: u32,
    /// Events it may still get in the current second, and when that began.
    budget: u32,
    second: Instant,
    /// Events it may still get in all.
    remaining: u64,
}

impl std::fmt::Debug for TailReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TailReader")
            .field("output", &self.output.name)
            .field("rate", &self.rate)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl TailReader {
    /// What is due now: of the events written since it last looked, the
    /// first its budget allows (the rest are skipped); `None` once it has
    /// ended (its limit reached, or the run ended and nothing is left).
    pub fn take(&mut self, now: Instant) -> Option<Vec<TailEvent>> {
        if self.remaining == 0 {
            return None;
        }
        // Read before `next`: events written before the close are seen.
        let closed = self.shared.closed.load(Ordering::Acquire);
        let next = self.output.next.load(Ordering::Acquire);
        if next == self.cursor {
            return (!closed).then(Vec::new);
        }
        if now.duration_since(self.second) >= Duration::from_secs(1) {
            self.budget = self.rate;
            self.second = now;
        }
        let allowed = u64::from(self.budget).min(self.remaining) as usize;
        if allowed == 0 {
            self.cursor = next;
            return Some(Vec::new());
        }
        let ring = self.output.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let first = ring.next - ring.events.len() as u64;
        let from = (self.cursor.max(first) - first) as usize;
        let events: Vec<TailEvent> =
            ring.events.range(from..).take(allowed).map(|e| TailEvent::clone(e)).collect();
        self.cursor = ring.next;
        drop(ring);
        self.budget -= events.len() as u32;
        self.remaining -= events.len() as u64;
        Some(events)
    }

    /// Wait for the next events due to this reader (looking every
    /// [`POLL_INTERVAL`]); `None` once it has ended.
    pub async fn next_events(&mut self) -> Option<Vec<TailEvent>> {
        loop {
            let events = self.take(Instant::now())?;
            if !events.is_empty() {
                return Some(events);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

impl Drop for TailReader {
    fn drop(&mut self) {
        if self.output.readers.fetch_sub(1, Ordering::Relaxed) == 1 {
            // The last reader: what the ring holds is for nobody now.
            let mut ring = self.output.ring.lock().unwrap_or_else(PoisonError::into_inner);
            ring.events.clear();
            ring.bytes = 0;
        }
        self.shared.readers.fetch_sub(1, Ordering::Relaxed);
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

    #[test]
    fn a_reader_gets_its_rate_of_its_output_and_ends_at_its_limit() {
        let hub = TailHub::default();
        hub.offer("main", &events(3));
        let mut main = hub.subscribe("main", 5, 7);
        let now = Instant::now();
        assert_eq!(main.take(now), Some(vec![]), "only what is written after it began");
        hub.offer("late", &events(10));
        assert_eq!(main.take(now), Some(vec![]), "another output");
        hub.offer("main", &events(10));
        let got = main.take(now).unwrap();
        assert_eq!(got.len(), 5, "five a second");
        assert_eq!(
            got[0],
            TailEvent { timestamp: 0, key: Some("c1".into()), value: "{\"n\":0}".into() }
        );
        hub.offer("main", &events(10));
        assert_eq!(main.take(now), Some(vec![]), "the second's budget is spent");
        // A second later: two more reach the limit of 7, and the reader ends.
        hub.offer("main", &events(10));
        let later = now + Duration::from_secs(1);
        let got = main.take(later).unwrap();
        assert_eq!(got.iter().map(|e| e.timestamp).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(main.take(later), None);
    }

    #[test]
    fn a_reader_that_stops_reading_costs_nothing_and_dropping_it_unsubscribes_it_at_once() {
        let hub = TailHub::default();
        let stalled = hub.subscribe("main", MAX_TAIL_RATE, u64::MAX);
        let quiet = hub.subscribe("side", MAX_TAIL_RATE, u64::MAX);
        let output = stalled.output.clone();
        for _ in 0..10 {
            hub.offer("main", &events(RING_CAPACITY));
            // The next second.
            output.ring.lock().unwrap().second -= Duration::from_secs(1);
        }
        assert_eq!(output.ring.lock().unwrap().events.len(), RING_CAPACITY, "the ring is bounded");
        assert_eq!(hub.readers(), 2);
        drop(quiet);
        assert_eq!(hub.readers(), 1, "gone without any output written to it");
        drop(stalled);
        assert_eq!(hub.readers(), 0);
        assert!(output.ring.lock().unwrap().events.is_empty(), "nothing kept for nobody");
        // Large events: the ring is bounded in bytes too.
        let _reader = hub.subscribe("main", 1, 1);
        let big =
            crate::Event { key: None, value: vec![b'x'; 1 << 20], timestamp: 0, headers: vec![] };
        hub.offer("main", &PackedEvents::of(&vec![big; 100]));
        let ring = output.ring.lock().unwrap();
        assert_eq!((ring.events.len(), ring.bytes), (16, 16 << 20));
    }

    #[test]
    fn the_sink_copies_once_for_all_readers_and_at_most_the_shared_rate() {
        let hub = TailHub::default();
        let mut readers: Vec<TailReader> =
            (0..1000).map(|_| hub.subscribe("main", MAX_TAIL_RATE, u64::MAX)).collect();
        hub.offer("main", &events(5000));
        let output = readers[0].output.clone();
        assert_eq!(output.next.load(Ordering::Relaxed), u64::from(MAX_TAIL_RATE));
        assert_eq!(output.ring.lock().unwrap().events.len(), MAX_TAIL_RATE as usize);
        let now = Instant::now();
        for reader in &mut readers {
            assert_eq!(reader.take(now).map(|e| e.len()), Some(MAX_TAIL_RATE as usize));
        }
    }

    #[test]
    fn readers_end_with_the_run_after_what_was_written_for_them() {
        let hub = TailHub::default();
        let mut reader = hub.subscribe("main", 100, 1000);
        hub.offer("main", &events(3));
        hub.close();
        let now = Instant::now();
        assert_eq!(reader.take(now).map(|e| e.len()), Some(3));
        assert_eq!(reader.take(now), None);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        assert_eq!(runtime.block_on(reader.next_events()), None);
    }
}
