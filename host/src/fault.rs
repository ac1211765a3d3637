//! Fault injection for crash tests: `WEIR_FAULT=<point>:<n>` makes the
//! process abort (like `kill -9`: no unwinding, no flushing) the `n`-th time
//! it passes the named point. Unset, a point costs one atomic load.
//!
//! Points: `kafka-after-pre-commit`, `kafka-before-commit` (the checkpoint's
//! metadata is durable, the Kafka commit not sent), `kafka-after-commit`,
//! `kafka-after-write` (an exactly-once batch written into its transaction).
//!
//! `WEIR_FAULT=<point>:<n>:pause=<ms>` pauses the thread that passes the
//! point that many milliseconds instead (a stalled process), then goes on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the fault.
pub const FAULT_ENV: &str = "WEIR_FAULT";

/// A fault: the point, on which pass, and how long to pause (`None`: abort).
type Fault = (String, u64, Option<u64>);

static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
static PASSED: AtomicU64 = AtomicU64::new(0);

/// Abort (or pause) here if `WEIR_FAULT` names this point and this is its
/// `n`-th pass.
pub fn point(name: &str) {
    let fault = FAULT.get_or_init(|| parse(&std::env::var(FAULT_ENV).ok()?));
    if let Some((point, n, pause)) = fault {
        if point == name && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            match pause {
                None => {
                    eprintln!("fault injected at {name} (pass {n}): aborting");
                    std::process::abort();
                }
                Some(millis) => {
                    eprintln!("fault injected at {name} (pass {n}): pausing {millis} ms");
                    std::thread::sleep(std::time::Duration::from_millis(*millis));
                }
            }
        }
    }
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
