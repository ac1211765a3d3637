//! Records as lines of text, as Kafka's console producer and consumer move
//! them: [`produce_lines`] writes each line of a reader to a topic as one
//! record (keyed by a JSON field when asked) and waits until the brokers
//! acknowledged every one; [`read_records`] reads a topic from the start of
//! each partition, as a plain or a `read_committed` consumer sees it. For
//! `weir kafka produce` and `weir kafka consume`, and for whoever feeds a
//! pipeline's input or checks its output; nothing here runs inside a
//! pipeline, and the reader never joins a group nor commits.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::{
    client_config, flush_promptly, kafka_error, send_waiting, topic_partitions, CountsDeliveries,
    CALL_TIMEOUT,
};
use crate::connectors::ConnectorError;

/// The producer's settings: every record acknowledged by all in-sync
/// replicas, once (idempotence); keys partitioned as the Java clients do
/// (murmur2), so a key lands where `kafka-console-producer` would put it.
const PRODUCER_SETTINGS: [(&str, &str); 4] = [
    ("enable.idempotence", "true"),
    ("partitioner", "murmur2_random"),
    ("linger.ms", "5"),
    ("message.timeout.ms", "30000"),
];

/// How long a wait on a full queue lasts before the reports are served again.
const QUEUE_PAUSE: Duration = Duration::from_millis(5);

/// What [`produce_lines`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Produced {
    /// Records written (acknowledged by the brokers).
    pub records: u64,
    /// Records written per partition.
    pub per_partition: BTreeMap<i32, u64>,
}

/// Write each non-blank line of `lines` (`source` names it in errors,
/// `file:line`) to `topic` as one record, its value the line without its
/// line ending; with `key_field`, each line must be a JSON object and the
/// record's key is that field's value (a string as it is, anything else as
/// JSON text: `42`), so records with the same key land in the same
/// partition, in order. Returns once the brokers acknowledged every record.
/// The topic must exist (the brokers could otherwise create it with their
/// default partition count); a line without the field stops the writing
/// with an error naming the line, after what was sent before it is
/// acknowledged.
pub fn produce_lines(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    lines: impl BufRead,
    source: &str,
    key_field: Option<&str>,
) -> Result<Produced, ConnectorError> {
    let producer: BaseProducer<Reports> =
        client_config(bootstrap_servers, &PRODUCER_SETTINGS, properties)
            .create_with_context(Reports::default())
            .map_err(kafka_error("creating the producer"))?;
    let reader: BaseConsumer = client_config(bootstrap_servers, &[], properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    let partitions = topic_partitions(&reader, topic);
    if let Err(ConnectorError::Config { .. }) = partitions {
        return Err(ConnectorError::Config {
            what: format!("kafka topic {topic:?}"),
            message: "does not exist: create it first (weir kafka topic create)".into(),
        });
    }
    partitions?;
    let mut failure = None;
    for (index, line) in lines.lines().enumerate() {
        let location = format!("{source}:{}", index + 1);
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                failure =
                    Some(ConnectorError::Io { what: format!("reading {location}"), source: error });
                break;
            }
        };
        let value = line.strip_suffix('\r').unwrap_or(&line);
        if value.trim().is_empty() {
            continue;
        }
        let key = match key_field.map(|field| key_of(value, field)).transpose() {
            Ok(key) => key,
            Err(message) => {
                failure = Some(ConnectorError::BadRecord { location, message });
                break;
            }
        };
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(value.as_bytes());
        if let Some(key) = &key {
            record = record.key(key.as_bytes());
        }
        if let Err(error) = send_waiting(&producer, record, QUEUE_PAUSE, &|| false) {
            failure = Some(kafka_error(format!("writing {location} to {topic}"))(error));
            break;
        }
    }
    flush_promptly(&producer, CALL_TIMEOUT).map_err(kafka_error(format!(
        "waiting for the brokers to acknowledge the records of {topic}"
    )))?;
    let context = producer.context();
    if let Some(message) = context.failed.lock().ok().and_then(|mut first| first.take()) {
        return Err(ConnectorError::Kafka { what: format!("writing to {topic}"), message });
    }
    if let Some(failure) = failure {
        return Err(failure);
    }
    let per_partition = context.per_partition.lock().map(|p| p.clone()).unwrap_or_default();
    Ok(Produced { records: per_partition.values().sum(), per_partition })
}

/// The key of the JSON object `line`: its field `field`, a string as it is,
/// any other value as JSON text; why there is none otherwise.
pub fn key_of(line: &str, field: &str) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| format!("not JSON ({e}), so it has no field {field:?} to key by"))?;
    let object = value
        .as_object()
        .ok_or_else(|| format!("not a JSON object, so it has no field {field:?} to key by"))?;
    match object.get(field) {
        None | Some(serde_json::Value::Null) => Err(format!("has no field {field:?} to key by")),
        Some(serde_json::Value::String(text)) => Ok(text.clone()),
        Some(other) => Ok(other.to_string()),
    }
}

/// The producer's context: counts the acknowledged records per partition
/// and keeps the first delivery failure.
#[derive(Default)]
struct Reports {
    reports: AtomicU64,
    per_partition: Mutex<BTreeMap<i32, u64>>,
    failed: Mutex<Option<String>>,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        self.reports.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(message) => {
                if let Ok(mut counts) = self.per_partition.lock() {
                    *counts.entry(message.partition()).or_default() += 1;
                }
            }
            Err((error, _)) => {
                if let Ok(mut first) = self.failed.lock() {
                    first.get_or_insert_with(|| error.to_string());
                }
            }
        }
    }
}

impl CountsDeliveries for Reports {
    fn reports(&self) -> u64 {
        self.reports.load(Ordering::Relaxed)
    }
}

/// How [`read_records`] reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read as `isolation.level=read_committed`: only records of committed
    /// transactions (what an exactly-once sink's readers must do), up to
    /// the last stable offset.
    pub read_committed: bool,
    /// Stop after this many records.
    pub max: Option<u64>,
    /// Keep reading past the end of the partitions, waiting for more
    /// (until `max`, or until the process is stopped).
    pub follow: bool,
    /// Start at each partition's end (only records written from now on)
    /// instead of its start.
    pub from_end: bool,
}

/// A record read by [`read_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if any.
    pub key: Option<Vec<u8>>,
    /// Its value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Its timestamp (ms since the epoch), if it has one.
    pub timestamp: Option<i64>,
}

/// Read `topic` from the start (or end) of every partition, handing each
/// record to `each` (partition by partition as they arrive: records of one
/// partition in order), until every partition's end as it is when reached
/// (unless `options.follow`), `options.max` records, or `each` returns
/// false; returns how many were read. `each` is also called with `None`
/// when a wait for records found none (about every 100 ms), so a reader
/// following a quiet topic can still end.
/// The reader never joins a group nor commits a position. Brokers that do
/// not answer for [`CALL_TIMEOUT`] end the reading with an error (unless
/// following).
pub fn read_records(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    options: ReadOptions,
    mut each: impl FnMut(Option<&ReadRecord>) -> bool,
) -> Result<u64, ConnectorError> {
    let isolation = if options.read_committed { "read_committed" } else { "read_uncommitted" };
    // assign() needs a group id; nothing joins or commits with it.
    let group = format!("weir-console-{}", std::process::id());
    // A reading to the end learns each partition's end from a fetch that
    // found nothing more: let the broker answer it at once, not after its
    // 500 ms wait (a worker reads its units topic so at every assignment).
    let wait = if options.follow { "500" } else { "10" };
    let ours = [
        ("group.id", group.as_str()),
        ("isolation.level", isolation),
        ("enable.partition.eof", "true"),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", "earliest"),
        ("fetch.wait.max.ms", wait),
    ];
    let consumer: BaseConsumer<EndsExpected> = client_config(bootstrap_servers, &ours, properties)
        .create_with_context(EndsExpected)
        .map_err(kafka_error("creating the consumer"))?;
    let partitions = topic_partitions(&consumer, topic)?;
    let start = if options.from_end { Offset::End } else { Offset::Beginning };
    let mut assignment = TopicPartitionList::new();
    for &partition in &partitions {
        assignment
            .add_partition_offset(topic, partition, start)
            .map_err(kafka_error(format!("reading {topic}/{partition}")))?;
    }
    consumer.assign(&assignment).map_err(kafka_error(format!("reading {topic}")))?;
    let mut pending: BTreeSet<i32> = partitions.into_iter().collect();
    let mut read = 0u64;
    let mut heard = Instant::now();
    loop {
        if options.max.is_some_and(|max| read >= max) || (!options.follow && pending.is_empty()) {
            return Ok(read);
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                heard = Instant::now();
                read += 1;
                let go_on = each(Some(&ReadRecord {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec),
                    timestamp: message.timestamp().to_millis(),
                }));
                if !go_on {
                    return Ok(read);
                }
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                heard = Instant::now();
                pending.remove(&partition);
            }
            Some(Err(error)) if options.follow => {
                tracing::warn!(%error, topic, "reading; still trying");
            }
            Some(Err(error)) => return Err(kafka_error(format!("reading {topic}"))(error)),
            None if !options.follow && heard.elapsed() > CALL_TIMEOUT => {
                return Err(ConnectorError::Kafka {
                    what: format!("reading {topic}"),
                    message: format!(
                        "partitions {pending:?} did not reach their end: no answer from the brokers for {CALL_TIMEOUT:?}"
                    ),
                })
            }
            None => {
                if !each(None) {
                    return Ok(read);
                }
            }
        }
    }
}

/// The reader's context: reaching a partition's end is what it waits for
/// (`enable.partition.eof`), not an error to log as librdkafka's default
/// does; other client errors are logged as warnings.
struct EndsExpected;

impl ClientContext for EndsExpected {
    fn error(&self, error: KafkaError, reason: &str) {
        let end = matches!(
            error,
            KafkaError::PartitionEOF(_) | KafkaError::Global(RDKafkaErrorCode::PartitionEOF)
        );
        if !end {
            tracing::warn!(%error, reason, "kafka client");
        }
    }
}

impl ConsumerContext for EndsExpected {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_keyed_by_the_field_asked_for() {
        let order = r#"{"order_id":110,"customer_id":1,"region":"eu","amount":20.0}"#;
        assert_eq!(key_of(order, "customer_id").unwrap(), "1");
        assert_eq!(key_of(order, "region").unwrap(), "eu");
        assert_eq!(key_of(r#"{"k":{"a":1}}"#, "k").unwrap(), r#"{"a":1}"#);
        let missing = key_of(order, "customer").unwrap_err();
        assert!(missing.contains("no field \"customer\""), "{missing}");
        assert!(key_of(r#"{"customer_id":null}"#, "customer_id").is_err());
        assert!(key_of("[1,2]", "customer_id").unwrap_err().contains("not a JSON object"));
        assert!(key_of("customer 1", "customer_id").unwrap_err().contains("not JSON"));
    }
}
