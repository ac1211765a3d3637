//! The rules an exactly-once Kafka sink must meet before a pipeline runs:
//! checkpoints on, two retained, a transaction timeout that outlives a
//! checkpoint (plus a restart) and fits the broker, and a transactional-id
//! prefix no other pipeline of this host uses. Which snapshot to restore
//! is the sink's commit marker ([`super::committed_checkpoint`]; see
//! [`super::sink`] for why).

use std::path::Path;
use std::time::Duration;

use super::{broker_transaction_max_timeout, Delivery, KafkaSinkConfig};
use crate::checkpoint::CheckpointSettings;
use crate::connectors::SinkSpec;

/// Time allowed for a restart between a checkpoint's pre-commit and its
/// commit by the restarted host, on top of the checkpoint's own time.
pub const RESTART_MARGIN: Duration = Duration::from_secs(60);

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
        "sink.transaction_timeout {} must exceed checkpoint.interval {} + checkpoint.timeout {} + restart margin {} = {}: the broker would abort transactions before their checkpoint commits them",
        human(.timeout), human(.interval), human(.checkpoint_timeout), human(&RESTART_MARGIN), human(.needed)
    )]
    TimeoutTooShort {
        /// `sink.transaction_timeout`.
        timeout: Duration,
        /// `checkpoint.interval`.
        interval: Duration,
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

/// The exactly-once Kafka sink `sink` is, if it is one.
pub fn exactly_once_sink(sink: &SinkSpec) -> Option<&KafkaSinkConfig> {
    match sink {
        SinkSpec::Kafka(config) if config.delivery == Delivery::ExactlyOnce => Some(config),
        _ => None,
    }
}

/// Refuse a configuration that cannot be exactly-once, naming the values;
/// then claim the sink's transactional-id prefix for `pipeline` on the host
/// whose data directory is `data_dir`.
pub fn check_exactly_once(
    sink: &KafkaSinkConfig,
    settings: Option<&CheckpointSettings>,
    pipeline: &str,
    data_dir: &Path,
) -> Result<(), ExactlyOnceError> {
    let settings = settings.ok_or(ExactlyOnceError::NoCheckpoints)?;
    if settings.retained < 2 {
        return Err(ExactlyOnceError::TooFewRetained(settings.retained));
    }
    let needed = settings.interval + settings.timeout + RESTART_MARGIN;
    if sink.transaction_timeout <= needed {
        return Err(ExactlyOnceError::TimeoutTooShort {
            timeout: sink.transaction_timeout,
            interval: settings.interval,
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
