//! Fault injection for crash tests: `WEIR_FAULT=<point>:<n>` makes the
//! process abort (like `kill -9`: no unwinding, no flushing) the `n`-th time
//! it passes the named point. Unset, a point costs one atomic load.
//!
//! Points: `kafka-after-pre-commit`, `kafka-before-commit` (the checkpoint's
//! metadata is durable, the Kafka commit not sent), `kafka-after-commit`;
//! for the exactly-once file sink `file-after-pre-commit` (parts synced),
//! `file-before-commit` (the checkpoint's metadata is durable, nothing
//! appended), `file-after-append` (parts appended to the visible file and
//! synced, none deleted), `file-after-delete` (after each part deleted:
//! some may remain) and `file-after-commit`.
//! Failure points ([`fails`]) make the run fail with an error instead:
//! `source-barrier` (the `n`-th barrier the source would inject).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the fault.
pub const FAULT_ENV: &str = "WEIR_FAULT";

static FAULT: OnceLock<Option<(String, u64)>> = OnceLock::new();
static PASSED: AtomicU64 = AtomicU64::new(0);

/// Abort here if `WEIR_FAULT` names this point and this is its `n`-th pass.
pub fn point(name: &str) {
    if fires(name) {
        eprintln!("fault injected at {name}: aborting");
        std::process::abort();
    }
}

/// Whether the run should fail here (an error, not an abort): `WEIR_FAULT`
/// names this point and this is its `n`-th pass in this process, so a run
/// that `weir serve` restarts passes it again without failing.
pub fn fails(name: &str) -> bool {
    fires(name)
}

/// Whether `WEIR_FAULT` names this point and this is its `n`-th pass.
fn fires(name: &str) -> bool {
    let fault = FAULT.get_or_init(|| {
        let text = std::env::var(FAULT_ENV).ok()?;
        let (point, n) = text.rsplit_once(':').unwrap_or((text.as_str(), "1"));
        Some((point.to_string(), n.parse().unwrap_or(1)))
    });
    fault
        .as_ref()
        .is_some_and(|(point, n)| point == name && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *n)
}
