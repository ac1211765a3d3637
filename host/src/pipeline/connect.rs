//! Opening the spec's source and sinks: the factories of the connectors a
//! spec names.

use super::error::RunError;
use super::spec::{PipelineSpec, SinkSpec, SourceSpec};
use crate::connectors::kafka::{KafkaSink, KafkaSource, KafkaSourceConfig};
use crate::connectors::{
    DiscardSink, FileSink, FileSource, GeneratorSource, Sink, Source, SplitSource, StdoutSink,
};

/// Open the source `spec` reads.
pub(crate) fn open_source(spec: &PipelineSpec) -> Result<Box<dyn Source>, RunError> {
    Ok(match &spec.source {
        SourceSpec::File { path, paths, timestamp_field, on_bad_timestamp } => {
            let open = |path: &std::path::PathBuf| -> Result<Box<dyn Source>, RunError> {
                Ok(Box::new(
                    FileSource::open(path, timestamp_field.clone())?
                        .with_bad_timestamps(on_bad_timestamp.clone()),
                ))
            };
            match path {
                Some(path) => open(path)?,
                None => {
                    Box::new(SplitSource::new(paths.iter().map(open).collect::<Result<_, _>>()?))
                }
            }
        }
        SourceSpec::Generator { count, keys, seed, start_time, interval_ms, encoding } => {
            let start = crate::connectors::parse_rfc3339_millis(start_time).unwrap_or(0);
            Box::new(
                GeneratorSource::new(*count, *keys, *seed, start, *interval_ms)
                    .with_encoding(*encoding),
            )
        }
        SourceSpec::Kafka {
            bootstrap_servers,
            topics,
            topic_pattern,
            group_id,
            start,
            bounded,
            timestamp_field,
            properties,
        } => Box::new(KafkaSource::open(&KafkaSourceConfig {
            bootstrap_servers: bootstrap_servers.clone(),
            topics: topics.clone(),
            topic_pattern: topic_pattern.clone(),
            group_id: group_id.clone().unwrap_or_else(|| format!("weir-{}", spec.name)),
            start: start.clone(),
            bounded: *bounded,
            timestamp_field: timestamp_field.clone(),
            properties: properties.clone(),
        })?),
    })
}

/// How a sink makes output visible.
#[derive(Debug, Clone)]
pub(crate) enum SinkMode {
    /// As it is written (no checkpointing).
    Direct,
    /// When the checkpoint covering it completes; recovering the pending
    /// output recorded in the snapshot's state, if restoring.
    ExactlyOnce(Option<serde_json::Value>),
}

/// Open the sink `spec` describes; its output becomes visible as `mode`
/// says.
pub(crate) fn open_sink(spec: &SinkSpec, mode: SinkMode) -> Result<Box<dyn Sink>, RunError> {
    Ok(match (spec, mode) {
        (SinkSpec::File { path }, SinkMode::Direct) => Box::new(FileSink::create(path)?),
        (SinkSpec::File { path }, SinkMode::ExactlyOnce(state)) => {
            Box::new(FileSink::exactly_once(path, state.as_ref())?)
        }
        (SinkSpec::Stdout {}, _) => Box::new(StdoutSink::new()),
        (SinkSpec::Discard {}, _) => Box::new(DiscardSink),
        (kafka @ SinkSpec::Kafka { .. }, _) => {
            let config = kafka
                .kafka_config()
                .map_err(|e| RunError::Deploy(e.to_string()))?
                .ok_or_else(|| RunError::Deploy("not a Kafka sink".into()))?;
            Box::new(KafkaSink::open(&config)?)
        }
    })
}
