//! The rules an exactly-once Kafka sink must meet before a pipeline runs:
//! checkpoints on, two retained, a transaction timeout that outlives a
//! checkpoint (plus its commit) and fits the broker, and a transactional-id
//! prefix no other pipeline of this host uses. Which snapshot to restore
//! is the sink's commit marker ([`super::committed_checkpoint`]; see
//! [`super::sink`] for why).
//!
//! How long a transaction stays open: epoch N's transaction begins when
//! checkpoint N-1's barrier has passed the sink; checkpoint N is triggered
//! `interval` after N-1, and no sooner than `min_pause` after N-1
//! completed; it completes within `timeout` (acknowledgements, upload and
//! metadata: the coordinator abandons it otherwise), and then the sink
//! commits. So the broker must allow `max(interval, min_pause) + timeout`
//! plus the commit ([`COMMIT_MARGIN`]); a transaction it aborts earlier
//! fails the run, which restarts from its checkpoint.

use std::path::Path;
use std::time::Duration;

use super::{broker_transaction_max_timeout, KafkaSinkConfig};
use crate::checkpoint::CheckpointSettings;

/// Time allowed for a checkpoint's Kafka commit once it completed (the
/// commit waits behind the output queued for the sink), and for the tail
/// of the previous checkpoint, on top of the checkpoint's own time.
pub const COMMIT_MARGIN: Duration = Duration::from_secs(60);

/// What the broker allows when it cannot be asked: Kafka's default.
const DEFAULT_BROKER_MAX: Duration = Duration::from_secs(15 * 60);

/// Why a pipeline cannot write exactly-once to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum ExactlyOnceError {
    /// The pipeline takes no checkpoints.
    #[error("sink.delivery exactly-once needs checkpoints: set checkpoint.interval in the spec or pass --checkpoint-interval")]
    NoCheckpoints,
    /// Fewer than two checkpoints are kept.
    #[error("checkpoint.retained is {0}: exactly-once Kafka output needs at least 2 (the restart may need the checkpoint before the newest)")]
    TooFewRetained(usize),
    /// The broker would abort transactions before their checkpoint commits.
    #[error(
        "sink.transaction_timeout {} must exceed {} + checkpoint.timeout {} + commit margin {} = {}: the broker would abort transactions before their checkpoint commits them; raise sink.transaction_timeout (and the broker's transaction.max.timeout.ms if needed) or shorten the checkpoint settings",
        human(.timeout), between(.interval, .min_pause), human(.checkpoint_timeout), human(&COMMIT_MARGIN), human(.needed)
    )]
    TimeoutTooShort {
        /// `sink.transaction_timeout`.
        timeout: Duration,
        /// `checkpoint.interval`.
        interval: Duration,
        /// `checkpoint.min_pause`.
        min_pause: Duration,
        /// `checkpoint.timeout`.
        checkpoint_timeout: Duration,
        /// What it must exceed.
        needed: Duration,
    },
    /// The broker would refuse the producer.
    #[error("sink.transaction_timeout {} exceeds {source_of_max} {}: the broker would refuse the producer", human(.timeout), human(.max))]
    TimeoutTooLong {
        /// `sink.transaction_timeout`.
        timeout: Duration,
        /// The broker's maximum.
        max: Duration,
        /// Where that maximum comes from.
        source_of_max: &'static str,
    },
    /// The prefix's claim could not be recorded.
    #[error("cannot record transactional_id_prefix in {dir}: {source}")]
    Claim {
        /// The directory of claims.
        dir: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another pipeline of this host uses the prefix.
    #[error("sink.transactional_id_prefix {prefix:?} is already used by pipeline {owner:?}: each pipeline needs its own")]
    PrefixTaken {
        /// The prefix.
        prefix: String,
        /// The pipeline that owns it.
        owner: String,
    },
}

/// Refuse a configuration that cannot be exactly-once, naming the values;
/// then claim the sink's transactional-id prefix for `pipeline` on the host
/// whose data directory is `data_dir`.
pub(super) fn check_exactly_once(
    sink: &KafkaSinkConfig,
    settings: Option<&CheckpointSettings>,
    pipeline: &str,
    data_dir: &Path,
) -> Result<(), ExactlyOnceError> {
    let settings = settings.ok_or(ExactlyOnceError::NoCheckpoints)?;
    if settings.retained < 2 {
        return Err(ExactlyOnceError::TooFewRetained(settings.retained));
    }
    let needed = longest_transaction(settings);
    if sink.transaction_timeout <= needed {
        return Err(ExactlyOnceError::TimeoutTooShort {
            timeout: sink.transaction_timeout,
            interval: settings.interval,
            min_pause: settings.min_pause,
            checkpoint_timeout: settings.timeout,
            needed,
        });
    }
    let (max, source_of_max) = match sink.broker_transaction_max_timeout {
        Some(max) => (max, "sink.broker_transaction_max_timeout"),
        None => match broker_transaction_max_timeout(&sink.bootstrap_servers, &sink.properties) {
            Some(max) => (max, "the broker's transaction.max.timeout.ms"),
            None => (
                DEFAULT_BROKER_MAX,
                "Kafka's default transaction.max.timeout.ms (the broker did not say)",
            ),
        },
    };
    if sink.transaction_timeout > max {
        return Err(ExactlyOnceError::TimeoutTooLong {
            timeout: sink.transaction_timeout,
            max,
            source_of_max,
        });
    }
    claim_prefix(data_dir, sink.transactional_id_prefix.as_deref().unwrap_or_default(), pipeline)
}

/// How long a transaction may have to stay open under `settings` (see the
/// module doc): from the start of epoch N to N's commit.
fn longest_transaction(settings: &CheckpointSettings) -> Duration {
    settings.interval.max(settings.min_pause) + settings.timeout + COMMIT_MARGIN
}

/// Record that `pipeline` owns transactional-id `prefix` on this host;
/// refuse when another pipeline does.
fn claim_prefix(data_dir: &Path, prefix: &str, pipeline: &str) -> Result<(), ExactlyOnceError> {
    let dir = crate::config::kafka_transactional_ids_dir(data_dir);
    let io = |source| ExactlyOnceError::Claim { dir: dir.display().to_string(), source };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let file = dir.join(prefix);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&file) {
        Ok(mut out) => std::io::Write::write_all(&mut out, pipeline.as_bytes()).map_err(io),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let owner = std::fs::read_to_string(&file).map_err(io)?;
            if owner.trim() == pipeline {
                Ok(())
            } else {
                Err(ExactlyOnceError::PrefixTaken {
                    prefix: prefix.to_string(),
                    owner: owner.trim().to_string(),
                })
            }
        }
        Err(e) => Err(io(e)),
    }
}

fn human(duration: &Duration) -> String {
    humantime::format_duration(*duration).to_string()
}

/// The time between checkpoints as the check counts it, naming the setting.
fn between(interval: &Duration, min_pause: &Duration) -> String {
    if min_pause > interval {
        format!(
            "checkpoint.min_pause {} (longer than checkpoint.interval {})",
            human(min_pause),
            human(interval)
        )
    } else {
        format!("checkpoint.interval {}", human(interval))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exactly-once sink whose broker allows an hour (nothing asked).
    fn sink(transaction_timeout: &str) -> KafkaSinkConfig {
        serde_yaml::from_str(&format!(
            "{{ bootstrap_servers: '127.0.0.1:1', topic: out, delivery: exactly-once, transactional_id_prefix: p, transaction_timeout: {transaction_timeout}, broker_transaction_max_timeout: 1h }}"
        ))
        .unwrap()
    }

    fn settings(yaml: &str) -> CheckpointSettings {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn check(transaction_timeout: &str, checkpoint: &str) -> Result<(), ExactlyOnceError> {
        let dir = tempfile::tempdir().unwrap();
        check_exactly_once(&sink(transaction_timeout), Some(&settings(checkpoint)), "p", dir.path())
    }

    #[test]
    fn the_transaction_timeout_covers_interval_checkpoint_and_commit() {
        let checkpoint = "{ interval: 10s, timeout: 1m }";
        // 10s + 1m + the 1m commit margin.
        check("2m11s", checkpoint).unwrap();
        let refused = check("2m10s", checkpoint).unwrap_err().to_string();
        assert!(
            refused.contains("transaction_timeout 2m 10s")
                && refused.contains("checkpoint.interval 10s")
                && refused.contains("checkpoint.timeout 1m"),
            "{refused}"
        );
    }

    #[test]
    fn a_min_pause_longer_than_the_interval_counts_instead_of_it() {
        // The next checkpoint starts no sooner than 5m after the previous
        // one completed, so a transaction may stay open 5m + 1m + 1m.
        let checkpoint = "{ interval: 10s, min_pause: 5m, timeout: 1m }";
        let refused = check("7m", checkpoint).unwrap_err().to_string();
        assert!(
            refused.contains("checkpoint.min_pause 5m (longer than checkpoint.interval 10s)")
                && refused.contains("= 7m:"),
            "{refused}"
        );
        check("7m1s", checkpoint).unwrap();
        // A shorter pause than the interval changes nothing.
        check("2m11s", "{ interval: 10s, min_pause: 5s, timeout: 1m }").unwrap();
    }
}
