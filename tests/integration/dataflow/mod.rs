//! What one pipeline (source, key, process or window, sink) computes, run
//! with `weir run` on files: the example functions of `functions/` —
//! revenue, minute-revenue, windowed-revenue, customer-profile,
//! fraud-detector, fraud-rules — against their exact expected output, and
//! the window operator against Apache Flink's, firing by firing
//! (`flink_windows`, skipped without Maven).
//! Keyed state and its TTL, event time, watermarks and timers, windows
//! and lateness, list and map state and side outputs, broadcast state,
//! and the same results at any parallelism. No external service (but
//! Maven and Java for `flink_windows`); nothing here is killed (that is `recovery`).
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! dataflow::`.

mod customer_profile;
mod flink_windows;
mod fraud_detector;
mod fraud_rules;
mod minute_revenue;
mod parallel;
mod revenue;
mod windows;
