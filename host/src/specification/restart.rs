//! Restart strategies: how `weir serve` restarts a pipeline whose run
//! failed, as the spec's `restart:` section says (as Flink's). This module
//! owns the section's type and its checks: plain data; `serve::restart`
//! counts the restarts and works out the delays.
//! `weir run` never restarts: it reports the failure and exits.
//!
//! ```yaml
//! restart: { strategy: fixed-delay, attempts: 3, delay: 10s }
//! restart: { strategy: exponential-backoff, initial_delay: 1s, max_delay: 1m,
//!            multiplier: 2, reset_after: 10m, attempts: 20 }
//! restart: { strategy: none }
//! ```
//!
//! Without the section, a pipeline with checkpoints restarts with
//! exponential backoff (1s, then ×1.5 per restart up to 1m, reset by a run
//! of 1h; attempts unlimited: Flink's default); one without checkpoints is
//! not restarted (it would start over from nothing).

use std::time::Duration;

use serde::Deserialize;

/// The strategy's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StrategyKind {
    /// A failed pipeline stays failed.
    None,
    /// The same delay before every restart.
    FixedDelay,
    /// A delay growing by `multiplier` per restart, up to `max_delay`.
    ExponentialBackoff,
}

/// The spec's `restart:` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartSpec {
    /// `none`, `fixed-delay` or `exponential-backoff`.
    pub strategy: StrategyKind,
    /// Restarts before the pipeline is left failed (default: unlimited).
    /// Exponential backoff counts those since its last reset.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Fixed delay: the wait before each restart (default `1s`).
    #[serde(default, with = "humantime_serde")]
    pub delay: Option<Duration>,
    /// Exponential backoff: the first wait (default `1s`).
    #[serde(default, with = "humantime_serde")]
    pub initial_delay: Option<Duration>,
    /// Exponential backoff: the longest wait (default `1m`).
    #[serde(default, with = "humantime_serde")]
    pub max_delay: Option<Duration>,
    /// Exponential backoff: each wait is the previous one times this
    /// (default 1.5).
    #[serde(default)]
    pub multiplier: Option<f64>,
    /// Exponential backoff: a run that lasted this long before failing
    /// starts the backoff (and the attempts) afresh (default `1h`).
    #[serde(default, with = "humantime_serde")]
    pub reset_after: Option<Duration>,
}

/// A restart setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("restart.{field}: {message}")]
pub struct RestartError {
    /// The setting (`delay`, `attempts`, …).
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// How a failed pipeline is restarted, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// Never.
    None,
    /// After `delay`, at most `attempts` times.
    FixedDelay {
        /// The wait before each restart.
        delay: Duration,
        /// Restarts allowed (`None`: unlimited).
        attempts: Option<u32>,
    },
    /// After a growing delay.
    ExponentialBackoff {
        /// The first wait.
        initial_delay: Duration,
        /// The longest wait.
        max_delay: Duration,
        /// Growth per restart.
        multiplier: f64,
        /// A run this long resets the backoff and the attempts.
        reset_after: Duration,
        /// Restarts allowed since the last reset (`None`: unlimited).
        attempts: Option<u32>,
    },
}

/// The longest wait a setting may ask for.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// The default backoff's first wait.
const INITIAL_DELAY: Duration = Duration::from_secs(1);
/// The default backoff's longest wait.
const MAX_DELAY: Duration = Duration::from_secs(60);
/// The default backoff's growth per restart.
const MULTIPLIER: f64 = 1.5;
/// The default run length that resets the backoff.
const RESET_AFTER: Duration = Duration::from_secs(3600);

impl RestartStrategy {
    /// The default: exponential backoff with checkpoints, none without.
    pub fn default_for(checkpointed: bool) -> Self {
        if !checkpointed {
            return Self::None;
        }
        Self::ExponentialBackoff {
            initial_delay: INITIAL_DELAY,
            max_delay: MAX_DELAY,
            multiplier: MULTIPLIER,
            reset_after: RESET_AFTER,
            attempts: None,
        }
    }

    /// The restart attempts allowed (`None`: unlimited; 0 for `none`).
    pub fn attempts(&self) -> Option<u32> {
        match self {
            Self::None => Some(0),
            Self::FixedDelay { attempts, .. } | Self::ExponentialBackoff { attempts, .. } => {
                *attempts
            }
        }
    }
}

impl RestartSpec {
    /// The strategy, defaults applied; the error names the setting at fault.
    pub fn strategy(&self) -> Result<RestartStrategy, RestartError> {
        let bad = |field, message: &str| RestartError { field, message: message.into() };
        let only = |field: &'static str, present: bool, strategy: &str| {
            if present {
                Err(bad(field, &format!("only strategy {strategy} has it")))
            } else {
                Ok(())
            }
        };
        let exponential = self.strategy == StrategyKind::ExponentialBackoff;
        only(
            "delay",
            self.delay.is_some() && self.strategy != StrategyKind::FixedDelay,
            "fixed-delay",
        )?;
        for (field, present) in [
            ("initial_delay", self.initial_delay.is_some()),
            ("max_delay", self.max_delay.is_some()),
            ("multiplier", self.multiplier.is_some()),
            ("reset_after", self.reset_after.is_some()),
        ] {
            only(field, present && !exponential, "exponential-backoff")?;
        }
        if self.attempts == Some(0) {
            return Err(bad(
                "attempts",
                "must be at least 1 (for no restarts, give `strategy: none`)",
            ));
        }
        let within = |field: &'static str, duration: Duration, least: Duration| {
            if duration < least || duration > LONGEST {
                let least = humantime::format_duration(least);
                Err(bad(field, &format!("must be between {least} and 24h")))
            } else {
                Ok(duration)
            }
        };
        Ok(match self.strategy {
            StrategyKind::None => {
                only("attempts", self.attempts.is_some(), "fixed-delay or exponential-backoff")?;
                RestartStrategy::None
            }
            StrategyKind::FixedDelay => RestartStrategy::FixedDelay {
                delay: within(
                    "delay",
                    self.delay.unwrap_or(Duration::from_secs(1)),
                    Duration::ZERO,
                )?,
                attempts: self.attempts,
            },
            StrategyKind::ExponentialBackoff => {
                let ms = Duration::from_millis(1);
                let initial_delay =
                    within("initial_delay", self.initial_delay.unwrap_or(INITIAL_DELAY), ms)?;
                let max_delay = within("max_delay", self.max_delay.unwrap_or(MAX_DELAY), ms)?;
                if max_delay < initial_delay {
                    return Err(bad("max_delay", "must be at least initial_delay"));
                }
                let multiplier = self.multiplier.unwrap_or(MULTIPLIER);
                if !(1.0..=100.0).contains(&multiplier) {
                    return Err(bad("multiplier", "must be between 1 and 100"));
                }
                RestartStrategy::ExponentialBackoff {
                    initial_delay,
                    max_delay,
                    multiplier,
                    reset_after: within(
                        "reset_after",
                        self.reset_after.unwrap_or(RESET_AFTER),
                        ms,
                    )?,
                    attempts: self.attempts,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(text: &str) -> Result<RestartStrategy, String> {
        let spec: RestartSpec = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        spec.strategy().map_err(|e| e.to_string())
    }

    #[test]
    fn bad_settings_are_named() {
        let error = |text| strategy(text).unwrap_err();
        assert!(error("{ strategy: sometimes }").contains("sometimes"));
        assert!(error("{ strategy: none, delay: 1s }").contains("restart.delay"));
        assert!(error("{ strategy: none, attempts: 3 }").contains("restart.attempts"));
        assert!(error("{ strategy: fixed-delay, multiplier: 2 }").contains("restart.multiplier"));
        assert!(error("{ strategy: fixed-delay, attempts: 0 }").contains("restart.attempts"));
        assert!(error("{ strategy: fixed-delay, delay: 2d }").contains("restart.delay"));
        assert!(error("{ strategy: exponential-backoff, multiplier: 0.5 }")
            .contains("restart.multiplier"));
        assert!(error("{ strategy: exponential-backoff, initial_delay: 2m, max_delay: 1m }")
            .contains("restart.max_delay"));
        assert!(error("{ strategy: exponential-backoff, reset_after: 0s }")
            .contains("restart.reset_after"));
        assert!(error("{ strategy: fixed-delay, colour: red }").contains("colour"));
    }
}
