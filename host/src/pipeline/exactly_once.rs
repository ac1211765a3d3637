//! Deploy-time checks for an exactly-once Kafka sink, and which snapshot
//! its commit marker says to restore (see `connectors::kafka` for why).

use std::path::Path;
use std::time::Duration;

use super::runner::RunError;
use super::spec::{CheckpointSettings, PipelineSpec};
use crate::connectors::kafka::{self, Delivery, KafkaSinkConfig, RESTART_MARGIN};

/// What the broker allows when it cannot be asked: Kafka's default.
const DEFAULT_BROKER_MAX: Duration = Duration::from_secs(15 * 60);

/// The exactly-once Kafka sink of `spec`, if it has one.
pub(crate) fn exactly_once_sink(spec: &PipelineSpec) -> Result<Option<KafkaSinkConfig>, RunError> {
    let config = spec.sink.kafka_config().map_err(|e| RunError::Deploy(e.to_string()))?;
    Ok(config.filter(|c| c.delivery == Delivery::ExactlyOnce))
}

/// Refuse a configuration that cannot be exactly-once, naming the values.
pub(crate) fn check(
    spec: &PipelineSpec,
    sink: &KafkaSinkConfig,
    settings: Option<&CheckpointSettings>,
    data_dir: &Path,
) -> Result<(), RunError> {
    let deploy = |message: String| Err(RunError::Deploy(message));
    let Some(settings) = settings else {
        return deploy("sink.delivery exactly-once needs checkpoints: set checkpoint.interval in the spec or pass --checkpoint-interval".into());
    };
    if settings.retained < 2 {
        return deploy(format!("checkpoint.retained is {}: exactly-once Kafka output needs at least 2 (the restart may need the checkpoint before the newest)", settings.retained));
    }
    let needed = settings.interval + settings.timeout + RESTART_MARGIN;
    if sink.transaction_timeout <= needed {
        return deploy(format!(
            "sink.transaction_timeout {} must exceed checkpoint.interval {} + checkpoint.timeout {} + restart margin {} = {}: the broker would abort transactions before their checkpoint commits them",
            human(sink.transaction_timeout),
            human(settings.interval),
            human(settings.timeout),
            human(RESTART_MARGIN),
            human(needed)
        ));
    }
    let configured = match &spec.sink {
        super::spec::SinkSpec::Kafka { broker_transaction_max_timeout: Some(text), .. } => {
            Some(humantime::parse_duration(text).map_err(|_| {
                RunError::Deploy(format!(
                    "sink.broker_transaction_max_timeout {text:?} is not a duration"
                ))
            })?)
        }
        _ => None,
    };
    let (broker_max, source) = match configured {
        Some(max) => (max, "sink.broker_transaction_max_timeout"),
        None => {
            match kafka::broker_transaction_max_timeout(&sink.bootstrap_servers, &sink.properties) {
                Some(max) => (max, "the broker's transaction.max.timeout.ms"),
                None => (
                    DEFAULT_BROKER_MAX,
                    "Kafka's default transaction.max.timeout.ms (the broker did not say)",
                ),
            }
        }
    };
    if sink.transaction_timeout > broker_max {
        return deploy(format!(
            "sink.transaction_timeout {} exceeds {source} {}: the broker would refuse the producer",
            human(sink.transaction_timeout),
            human(broker_max)
        ));
    }
    claim_prefix(data_dir, sink.transactional_id_prefix.as_deref().unwrap_or_default(), &spec.name)
}

/// Record that `pipeline` owns transactional-id `prefix` on this host;
/// refuse when another pipeline does.
fn claim_prefix(data_dir: &Path, prefix: &str, pipeline: &str) -> Result<(), RunError> {
    let dir = data_dir.join("kafka-transactional-ids");
    let io = |e: std::io::Error| {
        RunError::Deploy(format!("cannot record transactional_id_prefix in {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let file = dir.join(prefix);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&file) {
        Ok(mut out) => std::io::Write::write_all(&mut out, pipeline.as_bytes()).map_err(io),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let owner = std::fs::read_to_string(&file).map_err(io)?;
            if owner.trim() == pipeline {
                Ok(())
            } else {
                Err(RunError::Deploy(format!("sink.transactional_id_prefix {prefix:?} is already used by pipeline {:?}: each pipeline needs its own", owner.trim())))
            }
        }
        Err(e) => Err(io(e)),
    }
}

fn human(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
