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

#[cfg(test)]
mod tests {
    use super::*;

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
