//! The wall clock: processing time as the host reads it (state TTLs,
//! latency, timestamps of records the host writes). One place, so a test
//! or a future deterministic clock has one thing to replace.

/// Milliseconds since the Unix epoch, now.
pub fn now_millis() -> i64 {
    now_micros().div_euclid(1000)
}

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}
