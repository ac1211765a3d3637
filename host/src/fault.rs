//! Fault injection for crash tests: `WEIR_FAULT=<point>:<n>` makes the
//! process abort (like `kill -9`: no unwinding, no flushing) the `n`-th time
//! it passes the named point. Unset, a point costs one atomic load.
//!
//! Points: `kafka-after-pre-commit`, `kafka-before-commit` (the checkpoint's
//! metadata is durable, the Kafka commit not sent), `kafka-after-commit`,
//! `kafka-after-write` (an exactly-once batch written into its transaction);
//! for the exactly-once file sink `file-after-pre-commit` (parts synced),
//! `file-before-commit` (the checkpoint's metadata is durable, nothing
//! appended), `file-after-append` (parts appended to the visible file and
//! synced, none deleted), `file-after-delete` (after each part deleted:
//! some may remain) and `file-after-commit`.
//! For a cluster's control plane: `control-before-commit` (a change's
//! records sent in its transaction, not committed), `control-after-commit`,
//! and `function-after-blob` (an upload's component stored, its version
//! not yet recorded). For a cluster unit's drained stop: `drain-after-ends`
//! (its end and drained records sent in its final transaction, not
//! committed) and `unit-drained` (its drained stop committed, the worker
//! still in its group); for a cluster savepoint `savepoint-before-metadata`
//! (its files written, its `_metadata` not).
//! Failure points ([`fails`]) make the run fail with an error instead:
//! `source-barrier` (the `n`-th barrier the source would inject).
//!
//! `WEIR_FAULT=<point>:<n>:pause=<ms>` pauses the thread that passes the
//! point that many milliseconds instead (a stalled process), then goes on.
//!
//! `WEIR_SINK_DELAY_MS=<ms>` makes every run `weir serve` starts pause
//! that long after each batch its sink writes (a slow sink, for
//! backpressure tests; `weir run --sink-delay-ms` does the same).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the fault.
pub const FAULT_ENV: &str = "WEIR_FAULT";

/// A fault: the point, on which pass, and how long to pause (`None`: abort).
type Fault = (String, u64, Option<u64>);

static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
static PASSED: AtomicU64 = AtomicU64::new(0);

/// The sink delay `WEIR_SINK_DELAY_MS` asks for, if any.
pub fn sink_delay() -> Option<std::time::Duration> {
    let millis = std::env::var("WEIR_SINK_DELAY_MS").ok()?.parse().ok()?;
    Some(std::time::Duration::from_millis(millis))
}

/// Abort (or pause) here if `WEIR_FAULT` names this point and this is its
/// `n`-th pass.
pub fn point(name: &str) {
    match fires(name) {
        Some((n, None)) => {
            eprintln!("fault injected at {name} (pass {n}): aborting");
            std::process::abort();
        }
        Some((n, Some(millis))) => {
            eprintln!("fault injected at {name} (pass {n}): pausing {millis} ms");
            std::thread::sleep(std::time::Duration::from_millis(millis));
        }
        None => {}
    }
}

/// Whether the run should fail here (an error, not an abort): `WEIR_FAULT`
/// names this point and this is its `n`-th pass in this process, so a run
/// that `weir serve` restarts passes it again without failing.
pub fn fails(name: &str) -> bool {
    fires(name).is_some()
}

/// `(n, pause)` if `WEIR_FAULT` names this point and this is its `n`-th
/// pass.
fn fires(name: &str) -> Option<(u64, Option<u64>)> {
    let (point, n, pause) =
        FAULT.get_or_init(|| parse(&std::env::var(FAULT_ENV).ok()?)).as_ref()?;
    (point == name && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *n).then_some((*n, *pause))
}

/// `<point>[:<n>[:pause=<ms>]]`.
fn parse(text: &str) -> Option<Fault> {
    let mut parts = text.split(':');
    let point = parts.next()?.to_string();
    let n = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let pause = parts.next().and_then(|p| p.strip_prefix("pause=")?.parse().ok());
    Some((point, n, pause))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        assert_eq!(parse("kafka-after-commit"), Some(("kafka-after-commit".into(), 1, None)));
        assert_eq!(parse("kafka-after-commit:3"), Some(("kafka-after-commit".into(), 3, None)));
        assert_eq!(
            parse("kafka-after-write:2:pause=1500"),
            Some(("kafka-after-write".into(), 2, Some(1500)))
        );
    }
}
