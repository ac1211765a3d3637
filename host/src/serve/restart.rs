//! Restarts of failed runs under `weir serve`: how many so far, the next
//! delay under the spec's [`RestartStrategy`], and what the status reports.
//! The supervisor owns the timers and the runs; this module only counts.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::specification::restart::RestartStrategy;

/// A pipeline's restarts after failed runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RestartStatus {
    /// Restarts since it was deployed, upgraded or resumed by this server.
    pub restarts: u32,
    /// The message of the last failed run (kept after a restart).
    pub last_failure: Option<String>,
    /// While it waits to restart: when the next attempt starts, ms since
    /// the epoch (its `state` stays `running`).
    pub next_attempt_at: Option<i64>,
}

/// The restarts of one pipeline so far, and the next delay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestartTracker {
    /// Restarts since the pipeline was deployed, upgraded or resumed.
    pub total: u32,
    /// Restarts counted against `attempts`.
    counted: u32,
    /// The last delay of the backoff.
    last_delay: Option<Duration>,
}

impl RestartTracker {
    /// A run failed after running for `ran`: the delay before restarting
    /// it (counting the restart), or `None` when `strategy` allows no more.
    pub fn next(&mut self, strategy: &RestartStrategy, ran: Duration) -> Option<Duration> {
        if let RestartStrategy::ExponentialBackoff { reset_after, .. } = strategy {
            if ran >= *reset_after {
                self.counted = 0;
                self.last_delay = None;
            }
        }
        if strategy.attempts().is_some_and(|attempts| self.counted >= attempts) {
            return None;
        }
        let delay = match strategy {
            RestartStrategy::None => return None,
            RestartStrategy::FixedDelay { delay, .. } => *delay,
            RestartStrategy::ExponentialBackoff {
                initial_delay, max_delay, multiplier, ..
            } => match self.last_delay {
                None => *initial_delay,
                Some(last) => last.mul_f64(*multiplier).min(*max_delay),
            },
        };
        self.last_delay = Some(delay);
        self.counted += 1;
        self.total += 1;
        Some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specification::restart::RestartSpec;

    fn strategy(text: &str) -> Result<RestartStrategy, String> {
        let spec: RestartSpec = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        spec.strategy().map_err(|e| e.to_string())
    }

    #[test]
    fn fixed_delay_counts_every_restart() {
        let fixed = strategy("{ strategy: fixed-delay, attempts: 2, delay: 10s }").unwrap();
        let mut tracker = RestartTracker::default();
        let long = Duration::from_secs(7200);
        assert_eq!(tracker.next(&fixed, long), Some(Duration::from_secs(10)));
        assert_eq!(tracker.next(&fixed, long), Some(Duration::from_secs(10)));
        assert_eq!(tracker.next(&fixed, long), None, "attempts exhausted");
        assert_eq!(tracker.total, 2);
        let unlimited = strategy("{ strategy: fixed-delay }").unwrap();
        assert_eq!(
            unlimited,
            RestartStrategy::FixedDelay { delay: Duration::from_secs(1), attempts: None }
        );
    }

    #[test]
    fn exponential_backoff_grows_caps_and_resets() {
        let backoff = strategy(
            "{ strategy: exponential-backoff, initial_delay: 1s, max_delay: 5s, multiplier: 2, reset_after: 10m, attempts: 4 }",
        )
        .unwrap();
        let mut tracker = RestartTracker::default();
        let short = Duration::from_secs(1);
        let delays: Vec<_> = (0..5).map(|_| tracker.next(&backoff, short)).collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(delays, [secs(1), secs(2), secs(4), secs(5), None]);
        assert_eq!(tracker.next(&backoff, Duration::from_secs(600)), secs(1), "a long run resets");
        assert_eq!(tracker.total, 5);
    }

    #[test]
    fn defaults_depend_on_checkpoints() {
        assert_eq!(RestartStrategy::default_for(false), RestartStrategy::None);
        assert_eq!(RestartStrategy::default_for(true).attempts(), None);
        assert_eq!(
            strategy("{ strategy: exponential-backoff }").unwrap(),
            RestartStrategy::default_for(true)
        );
        let mut tracker = RestartTracker::default();
        assert_eq!(tracker.next(&RestartStrategy::None, Duration::ZERO), None);
    }
}
