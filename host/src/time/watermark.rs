//! Watermarks with bounded out-of-orderness.

/// Tracks the largest timestamp seen and derives the watermark from it, as
/// Flink's `BoundedOutOfOrdernessWatermarks`: `max_timestamp − delay − 1`.
/// Events up to `delay` ms older than the newest one are still on time.
#[derive(Debug, Clone)]
pub struct BoundedOutOfOrderness {
    delay: i64,
    max_timestamp: Option<i64>,
    emitted: i64,
}

impl BoundedOutOfOrderness {
    /// A generator tolerating `delay_ms` of out-of-orderness.
    pub fn new(delay_ms: i64) -> Self {
        Self { delay: delay_ms.max(0), max_timestamp: None, emitted: i64::MIN }
    }

    /// Account for an event with `timestamp`.
    pub fn observe(&mut self, timestamp: i64) {
        self.max_timestamp = Some(self.max_timestamp.map_or(timestamp, |max| max.max(timestamp)));
    }

    /// The watermark, if it has advanced since the last call.
    pub fn advance(&mut self) -> Option<i64> {
        let watermark = self.max_timestamp?.saturating_sub(self.delay).saturating_sub(1);
        (watermark > self.emitted).then(|| {
            self.emitted = watermark;
            watermark
        })
    }
}

/// The watermark of a source with several splits (files, partitions):
/// the minimum over its active splits' bounded-out-of-orderness
/// watermarks. A split that has finished, or produced nothing for
/// `idle_timeout`, stops holding the watermark back until it produces
/// again. The result never goes back.
#[derive(Debug, Clone)]
pub struct SplitWatermarks {
    splits: Vec<SplitState>,
    idle_timeout: Option<std::time::Duration>,
    emitted: i64,
}

#[derive(Debug, Clone)]
struct SplitState {
    generator: BoundedOutOfOrderness,
    last_event: std::time::Instant,
    finished: bool,
    /// The split said it is idle ([`SplitWatermarks::announce`]).
    said_idle: bool,
}

impl SplitWatermarks {
    /// Track `splits` splits tolerating `delay_ms` of out-of-orderness each.
    pub fn new(
        splits: usize,
        delay_ms: i64,
        idle_timeout: Option<std::time::Duration>,
        now: std::time::Instant,
    ) -> Self {
        let split = SplitState {
            generator: BoundedOutOfOrderness::new(delay_ms),
            last_event: now,
            finished: false,
            said_idle: false,
        };
        Self { splits: vec![split; splits.max(1)], idle_timeout, emitted: i64::MIN }
    }

    /// Account for an event of `split` with `timestamp`, seen at `now`.
    pub fn observe(&mut self, split: usize, timestamp: i64, now: std::time::Instant) {
        if let Some(state) = self.splits.get_mut(split) {
            state.generator.observe(timestamp);
            state.last_event = now;
        }
    }

    /// `split` reports its watermark itself (a cluster task's producer):
    /// it is now `mark`, or idle (`None`) until it reports one again.
    pub fn announce(&mut self, split: usize, mark: Option<i64>, now: std::time::Instant) {
        let Some(state) = self.splits.get_mut(split) else { return };
        state.said_idle = mark.is_none();
        if let Some(mark) = mark {
            // The watermark of a split is its newest timestamp less the delay.
            let at = mark.saturating_add(state.generator.delay).saturating_add(1);
            state.generator.max_timestamp = state.generator.max_timestamp.max(Some(at));
            state.last_event = now;
        }
    }

    /// `split` will produce nothing more.
    pub fn finish(&mut self, split: usize) {
        if let Some(state) = self.splits.get_mut(split) {
            state.finished = true;
        }
    }

    /// Whether every split that has not finished has been idle at `now`
    /// (and there is one): the source holds no event time back then.
    pub fn all_idle(&self, now: std::time::Instant) -> bool {
        let timed_out = |s: &SplitState| {
            self.idle_timeout.is_some_and(|t| now.duration_since(s.last_event) >= t)
        };
        let mut unfinished = self.splits.iter().filter(|s| !s.finished).peekable();
        unfinished.peek().is_some() && unfinished.all(|s| s.said_idle || timed_out(s))
    }

    /// Each split's own watermark (its newest timestamp less the delay),
    /// if it has seen an event.
    pub fn split_watermarks(&self) -> Vec<Option<i64>> {
        self.splits.iter().map(|s| s.generator.current()).collect()
    }

    /// The watermark at `now`, if it has advanced since the last call.
    ///
    /// When every unfinished split is idle, event time stands where it
    /// was just before the last of them went idle: what a call at that
    /// instant would have returned. So the result does not depend on how
    /// often this is called (a source whose only busy split went quiet
    /// soon after the others idled still moves event time on).
    pub fn advance(&mut self, now: std::time::Instant) -> Option<i64> {
        let idle = |s: &SplitState| {
            s.said_idle || self.idle_timeout.is_some_and(|t| now.duration_since(s.last_event) >= t)
        };
        let unfinished = || self.splits.iter().filter(|s| !s.finished);
        let holding: Vec<&SplitState> = if unfinished().any(|s| !idle(s)) {
            unfinished().filter(|s| !idle(s)).collect()
        } else {
            let last_active = unfinished().map(|s| s.last_event).max()?;
            unfinished().filter(|s| s.last_event == last_active).collect()
        };
        // A split that holds it but has seen no event yet holds it back.
        let watermark = holding.iter().map(|s| s.generator.current()).min().flatten()?;
        (watermark > self.emitted).then(|| {
            self.emitted = watermark;
            watermark
        })
    }
}

/// What a checkpoint keeps of [`SplitWatermarks`], so that a restored
/// source continues with the same watermark instead of starting over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WatermarkSnapshot {
    /// Each split's newest timestamp, if it has seen one.
    pub max_timestamps: Vec<Option<i64>>,
    /// Each split's finished flag.
    pub finished: Vec<bool>,
    /// The last watermark emitted.
    pub emitted: i64,
    /// Each split's name (a partition, a producer unit): a restore matches
    /// splits by name, so a reordering or renumbering of the splits keeps
    /// each one's state (snapshots of older versions have none: by place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

impl SplitWatermarks {
    /// The state to keep in a checkpoint, the splits named `names` (in
    /// split order; empty: unnamed).
    pub fn snapshot(&self, names: Vec<String>) -> WatermarkSnapshot {
        let names = if names.len() == self.splits.len() { names } else { Vec::new() };
        WatermarkSnapshot {
            max_timestamps: self.splits.iter().map(|s| s.generator.max_timestamp).collect(),
            finished: self.splits.iter().map(|s| s.finished).collect(),
            emitted: self.emitted,
            names,
        }
    }

    /// Continue from `snapshot`, the splits now named `names`: each split
    /// takes the state the snapshot holds under its name (when both name
    /// their splits, all apart), else the state at its place; splits it
    /// does not cover start afresh. Returns the watermark emitted before
    /// it was taken, to re-announce.
    pub fn restore(&mut self, snapshot: &WatermarkSnapshot, names: &[String]) -> Option<i64> {
        let distinct = |list: &[String]| {
            list.iter().collect::<std::collections::BTreeSet<_>>().len() == list.len()
        };
        let by_name = !snapshot.names.is_empty()
            && names.len() == self.splits.len()
            && distinct(&snapshot.names)
            && distinct(names);
        for (index, state) in self.splits.iter_mut().enumerate() {
            let saved = if by_name {
                snapshot.names.iter().position(|n| *n == names[index])
            } else {
                Some(index)
            };
            let Some(saved) = saved else { continue };
            if let (Some(max), Some(finished)) =
                (snapshot.max_timestamps.get(saved), snapshot.finished.get(saved))
            {
                state.generator.max_timestamp = *max;
                state.generator.emitted = snapshot.emitted;
                state.finished = *finished;
            }
        }
        self.emitted = snapshot.emitted;
        (snapshot.emitted > i64::MIN).then_some(snapshot.emitted)
    }
}

impl BoundedOutOfOrderness {
    /// The watermark now (without recording it as emitted).
    fn current(&self) -> Option<i64> {
        Some(self.max_timestamp?.saturating_sub(self.delay).saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_restored_tracker_continues_where_the_snapshot_was_taken() {
        let start = Instant::now();
        let mut before = SplitWatermarks::new(2, 5, None, start);
        before.observe(0, 100, start);
        before.observe(1, 60, start);
        assert_eq!(before.advance(start), Some(54));
        let snapshot = before.snapshot(Vec::new());
        let mut after = SplitWatermarks::new(2, 5, None, start);
        assert_eq!(after.restore(&snapshot, &[]), Some(54));
        assert_eq!(after.advance(start), None, "nothing new");
        after.observe(1, 90, start);
        before.observe(1, 90, start);
        assert_eq!(after.advance(start), before.advance(start));
    }

    #[test]
    fn a_restore_matches_splits_by_name_whatever_their_order() {
        let start = Instant::now();
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut before = SplitWatermarks::new(2, 0, None, start);
        before.announce(0, Some(1_000), start);
        before.announce(1, Some(9_000), start);
        let snapshot = before.snapshot(names(&["p-source-0", "p-source-1"]));
        // A producer added before them: p-source-1 is now split 2.
        let mut after = SplitWatermarks::new(3, 0, None, start);
        after.restore(&snapshot, &names(&["p-source-0", "p-new", "p-source-1"]));
        assert_eq!(after.split_watermarks()[2], before.split_watermarks()[1]);
        assert_eq!(after.split_watermarks()[0], before.split_watermarks()[0]);
        assert_eq!(after.split_watermarks()[1], None, "the new producer starts afresh");
    }

    #[test]
    fn announced_watermarks_hold_event_time_until_every_producer_has_spoken() {
        // Three producers of a cluster task, none idle by time alone.
        let start = Instant::now();
        let mut watermarks = SplitWatermarks::new(3, 5_000, None, start);
        watermarks.announce(0, Some(1_000), start);
        watermarks.announce(2, Some(3_000), start);
        assert_eq!(watermarks.advance(start), None, "producer 1 has said nothing: it holds back");
        watermarks.announce(1, Some(2_000), start);
        assert_eq!(watermarks.advance(start), Some(1_000));
        // A producer saying it is idle holds nothing back until it speaks.
        watermarks.announce(0, None, start);
        assert_eq!(watermarks.advance(start), Some(2_000));
        assert!(!watermarks.all_idle(start));
        watermarks.announce(1, None, start);
        watermarks.announce(2, None, start);
        assert!(watermarks.all_idle(start), "every producer said so");
        watermarks.announce(0, Some(2_500), start);
        assert!(!watermarks.all_idle(start));
        assert_eq!(watermarks.advance(start), Some(2_500));
        // Nothing goes back, and an older announcement changes nothing.
        watermarks.announce(0, Some(100), start);
        assert_eq!(watermarks.advance(start), None);
    }

    #[test]
    fn the_slowest_active_split_holds_the_watermark() {
        let start = Instant::now();
        let mut watermarks = SplitWatermarks::new(2, 0, None, start);
        watermarks.observe(0, 100, start);
        assert_eq!(watermarks.advance(start), None, "split 1 has seen nothing yet");
        watermarks.observe(1, 50, start);
        assert_eq!(watermarks.advance(start), Some(49));
        watermarks.observe(0, 200, start);
        assert_eq!(watermarks.advance(start), None, "split 1 still at 50");
        watermarks.finish(1);
        assert_eq!(watermarks.advance(start), Some(199), "a finished split no longer counts");
    }

    #[test]
    fn an_idle_split_is_excluded_until_it_produces_again() {
        let start = Instant::now();
        let mut watermarks = SplitWatermarks::new(2, 0, Some(Duration::from_secs(10)), start);
        watermarks.observe(0, 1_000, start);
        watermarks.observe(1, 10, start);
        assert_eq!(watermarks.advance(start), Some(9));
        let later = start + Duration::from_secs(11);
        watermarks.observe(0, 2_000, later);
        assert_eq!(
            watermarks.advance(later),
            Some(1_999),
            "split 1 went quiet for longer than the timeout"
        );
        watermarks.observe(1, 20, later);
        assert_eq!(
            watermarks.advance(later),
            None,
            "it rejoins, holding the watermark (which never goes back)"
        );
        watermarks.observe(1, 3_000, later);
        watermarks.observe(0, 4_000, later);
        assert_eq!(watermarks.advance(later), Some(2_999));
    }

    #[test]
    fn event_time_moves_on_when_the_busy_split_goes_quiet_after_the_idle_one() {
        // Split 0 gets every event before split 1 has been quiet for the
        // timeout; the first call after that finds both idle. The result
        // is what a call in between would have returned.
        let start = Instant::now();
        let mut watermarks =
            SplitWatermarks::new(2, 1_000, Some(Duration::from_millis(300)), start);
        let busy = start + Duration::from_millis(50);
        watermarks.observe(0, 180_000, busy);
        assert_eq!(watermarks.advance(busy), None, "split 1 has seen nothing and is not idle yet");
        let both_idle = start + Duration::from_secs(2);
        assert_eq!(watermarks.advance(both_idle), Some(178_999));
        assert_eq!(watermarks.advance(both_idle + Duration::from_secs(1)), None, "nothing new");
        let mut never = SplitWatermarks::new(2, 1_000, Some(Duration::from_millis(300)), start);
        assert_eq!(never.advance(both_idle), None, "no split has seen an event");
    }

    #[test]
    fn lags_the_newest_timestamp_and_never_goes_back() {
        let mut generator = BoundedOutOfOrderness::new(5_000);
        assert_eq!(generator.advance(), None, "no events, no watermark");
        generator.observe(10_000);
        assert_eq!(generator.advance(), Some(4_999));
        generator.observe(7_000);
        assert_eq!(generator.advance(), None, "an older event does not move it");
        generator.observe(12_000);
        assert_eq!(generator.advance(), Some(6_999));
        assert_eq!(generator.advance(), None);
    }
}
