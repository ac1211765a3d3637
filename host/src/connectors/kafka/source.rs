//! The Kafka source: every partition of the chosen topics is assigned
//! explicitly (no consumer-group rebalancing) and is one split, with its
//! own watermark. Positions are the next offset to deliver per partition
//! and live in checkpoints; a restore seeks to them. Group offsets are
//! committed at each barrier only so lag monitoring works. While the
//! broker cannot be reached, fetching goes on retrying for the run's retry
//! budget (see [`super::Retry`]) before the source fails.
//!
//! A restored position below a partition's log start (records deleted by
//! retention before they were read) is refused unless the spec says
//! `on_data_loss: skip`; so is an offset that goes out of range while
//! running.
//!
//! A record becomes an event as: Kafka key → `key`, value → `value`,
//! headers → `headers`, timestamp → `timestamp` (or the JSON field
//! `timestamp_field` of the value).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::exchange::{self, ExchangeInput, ExchangeMark, ExchangeRecord};
use super::fetch_queue::{FetchQueue, Fetched};
use super::{
    client_config, is_transient_code, kafka_error, outlasted, topic_partitions, Retry, CALL_TIMEOUT,
};
use crate::connectors::config::{Access, ConfigError, SourceConfig};
use crate::connectors::record_format::{check_format, check_reader_schema};
use crate::connectors::timestamp::{json_timestamp, parse_rfc3339_millis, BadTimestamps};
use crate::connectors::{decode, encode, ConnectorError, Polled, Source};
use crate::formats::{Format, RecordDecoder, SchemaRegistryConfig};
use crate::runtime::packed::PackedEvents;
use crate::telemetry::Throttle;
use crate::Event;

/// How long one poll waits when nothing is buffered.
const POLL_WAIT: Duration = Duration::from_millis(50);

/// The consumer's `fetch.queue.backoff.ms` unless the spec's `properties`
/// set it (see `open`).
pub const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// Where a fresh start (no checkpoint) begins reading.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KafkaStart {
    /// The oldest retained record.
    #[default]
    Earliest,
    /// Only records produced after the start.
    Latest,
    /// The group's committed offsets (earliest where it has none).
    Committed,
    /// The first record at or after this RFC 3339 time.
    Timestamp(String),
}

/// `source: { type: kafka, … }`: Kafka topics, every partition assigned
/// to the source, positions kept in checkpoints.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// `host:port,…`.
    pub bootstrap_servers: String,
    /// Topics to read (all their partitions).
    #[serde(default)]
    pub topics: Vec<String>,
    /// Or: every topic whose whole name matches this regular expression
    /// (at start).
    #[serde(default)]
    pub topic_pattern: Option<String>,
    /// Consumer group for `start: committed` and lag monitoring (default
    /// `weir-<pipeline>`).
    #[serde(default)]
    pub group_id: Option<String>,
    /// Where a fresh start begins: `earliest` (default), `latest`,
    /// `committed`, or `{ timestamp: <RFC 3339> }`.
    #[serde(default)]
    pub start: KafkaStart,
    /// Stop at the end offsets found at start (a bounded backfill).
    #[serde(default)]
    pub bounded: bool,
    /// JSON field of the value holding the event time; default the
    /// record's Kafka timestamp.
    #[serde(default)]
    pub timestamp_field: Option<String>,
    /// A record without a usable event time (not JSON, or without
    /// `timestamp_field`) or a tombstone (a null value, which every
    /// compacted topic has): `fail` (default; the error names topic,
    /// partition and offset), `drop` (counted) or `{ side-output: name }`
    /// (the record as it was, its topic, partition and offset in the
    /// headers [`SOURCE_TOPIC_HEADER`], [`SOURCE_PARTITION_HEADER`] and
    /// [`SOURCE_OFFSET_HEADER`]).
    #[serde(default)]
    pub on_bad_timestamp: BadTimestamps,
    /// What a restore does when a partition's checkpointed position is
    /// below the partition's log start (records deleted by retention before
    /// they were read): `fail` (default) or `skip` to the log start.
    #[serde(default)]
    pub on_data_loss: OnDataLoss,
    /// How record values are written: `json` (default) and `raw` are
    /// passed on as they are; `avro`, `protobuf` and `json-schema` (in the
    /// schema registry's wire format) are decoded into JSON events, their
    /// schemas read from `schema_registry` by id (see [`crate::formats`]).
    #[serde(default)]
    pub format: Format,
    /// The schema registry of a registry `format`.
    #[serde(default)]
    pub schema_registry: Option<SchemaRegistryConfig>,
    /// Avro: the reader schema (its JSON text) every record is resolved
    /// to, whatever schema it was written with — fields it lacks take the
    /// reader's defaults, fields the reader lacks are dropped.
    #[serde(default)]
    pub reader_schema: Option<String>,
    /// A record that cannot be decoded in `format` (not in the wire
    /// format, an unknown schema id, bytes that do not fit the schema):
    /// `fail` (default; the error names topic, partition, offset and
    /// schema id), `drop` (counted) or `{ side-output: name }` (the record
    /// as it was, with the headers `on_bad_timestamp`'s side output has).
    #[serde(default)]
    pub on_undecodable: BadTimestamps,
    /// librdkafka properties passed through (security, tuning); not those
    /// Weir sets itself.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// Source tasks reading the partitions, each on a thread and consumer
    /// of its own: task `i` of `n` reads every `n`-th partition from the
    /// `i`-th (at most one task per partition). Default 1.
    #[serde(default = "one_reader")]
    pub parallelism: u16,
    /// Set by a cluster plan, never in a spec: read only this partition of
    /// the topic (an ingest unit's input partition, a task's partition of
    /// an exchange topic).
    #[serde(skip)]
    pub partition: Option<i32>,
    /// Set by a cluster plan: the topic is an exchange topic, whose control
    /// records carry its producers' watermarks (see [`super::exchange`]).
    #[serde(skip)]
    pub exchange: Option<ExchangeInput>,
}

/// Header of a record sent to the `on_bad_timestamp` side output: the
/// topic it was read from.
pub const SOURCE_TOPIC_HEADER: &str = "weir-source-topic";
/// The partition it was read from (decimal text).
pub const SOURCE_PARTITION_HEADER: &str = "weir-source-partition";
/// Its offset (decimal text).
pub const SOURCE_OFFSET_HEADER: &str = "weir-source-offset";

/// What a restore does when records it should read were deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnDataLoss {
    /// Refuse to start, naming the partition and the lost offsets.
    #[default]
    Fail,
    /// Log a warning with the lost offsets and go on from the log start.
    Skip,
}

/// A Kafka source's default `parallelism`.
fn one_reader() -> u16 {
    1
}

/// The most source tasks one Kafka source may have.
const MAX_READERS: u16 = 256;

impl SourceConfig for KafkaSourceConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.topics.is_empty() == self.topic_pattern.is_none() {
            return Err(ConfigError::new("topics", "give either `topics` or `topic_pattern`"));
        }
        if !(1..=MAX_READERS).contains(&self.parallelism) {
            return Err(ConfigError::new(
                "parallelism",
                format!("{} source tasks: give 1 to {MAX_READERS}", self.parallelism),
            ));
        }
        check_format(self.format, self.schema_registry.as_ref())?;
        check_reader_schema(self.format, self.reader_schema.as_deref())?;
        super::check_properties(&self.properties)
    }

    fn side_outputs(&self) -> Vec<(&'static str, &str)> {
        let mut outputs = Vec::new();
        if let BadTimestamps::SideOutput(name) = &self.on_bad_timestamp {
            outputs.push(("on_bad_timestamp", name.as_str()));
        }
        if let BadTimestamps::SideOutput(name) = &self.on_undecodable {
            outputs.push(("on_undecodable", name.as_str()));
        }
        outputs
    }

    fn host_access(&self) -> Vec<Access> {
        super::host_access(&self.bootstrap_servers, &self.properties, self.schema_registry.as_ref())
    }

    fn open(&self, pipeline: &str) -> Result<Box<dyn Source>, ConnectorError> {
        Ok(Box::new(KafkaSource::open(self, pipeline)?))
    }

    fn open_readers(&self, pipeline: &str) -> Result<Vec<Box<dyn Source>>, ConnectorError> {
        let readers = KafkaSource::open_readers(self, pipeline)?;
        Ok(readers.into_iter().map(|r| Box::new(r) as Box<dyn Source>).collect())
    }

    fn max_readers(&self) -> usize {
        // A cluster plan's source reads one partition, or an exchange topic.
        if self.partition.is_some() || self.exchange.is_some() {
            1
        } else {
            usize::from(self.parallelism)
        }
    }
}

/// One assigned partition.
struct Partition {
    topic: String,
    partition: i32,
    /// Next offset to deliver.
    next: i64,
    /// Records polled but not yet delivered.
    buffered: VecDeque<Buffered>,
    /// Of those, the records that are not events (by offset, in order),
    /// told apart when they were read and handled when their turn comes.
    unusual: VecDeque<(i64, Unusual)>,
    /// Bounded: deliver up to (not including) this offset.
    end: Option<i64>,
}

/// The consumer's context: the end of each partition (its last stable
/// offset, as `read_committed` sees it) from librdkafka's statistics,
/// which it sends once a second while the source polls; no broker call.
#[derive(Default)]
struct PartitionEnds {
    ends: Mutex<HashMap<(String, i32), i64>>,
}

impl ClientContext for PartitionEnds {
    fn stats(&self, statistics: Statistics) {
        let mut ends = self.ends.lock().unwrap_or_else(PoisonError::into_inner);
        for (topic, partitions) in statistics.topics {
            for (id, partition) in partitions.partitions {
                if id >= 0 && partition.ls_offset >= 0 {
                    ends.insert((topic.clone(), id), partition.ls_offset);
                }
            }
        }
    }
}

impl ConsumerContext for PartitionEnds {}

/// Reads the assigned partitions of Kafka topics.
pub struct KafkaSource {
    /// Where the partitions' records are read (declared before the
    /// consumer, so it is dropped first).
    fetched: FetchQueue,
    consumer: BaseConsumer<PartitionEnds>,
    partitions: Vec<Partition>,
    timestamp_field: Option<String>,
    on_bad_timestamp: BadTimestamps,
    /// Decodes a registry format's records into JSON (none: values are
    /// passed on as they are).
    decoder: Option<RecordDecoder>,
    on_undecodable: BadTimestamps,
    /// Bad records bound for the `on_bad_timestamp` side output, until the
    /// task takes them.
    rejected: Vec<(String, Event)>,
    /// Bad records dropped so far (kept in the position).
    dropped: u64,
    on_data_loss: OnDataLoss,
    /// A cluster unit's source, reading the one partition its unit is
    /// named by: a checkpoint must record that partition.
    pinned: bool,
    cursor: usize,
    /// The partitions are not assigned yet: the first read assigns them at
    /// their `next` offsets (so a restore's `seek` never makes the consumer
    /// fetch from the fresh-start offsets first).
    unassigned: bool,
    /// How long fetching may fail transiently.
    retry: Retry,
    /// Since when fetching has failed transiently, if it does.
    failing_since: Option<Instant>,
    /// Its warnings, at most one line every few seconds.
    fetch_warnings: Throttle,
    /// An exchange topic: its producers and what they reported.
    exchange: Option<ExchangeReports>,
    /// How long a fetch may wait for the first record (`POLL_WAIT` unless
    /// the source task holds a batch).
    max_wait: Duration,
}

/// A record polled and not yet delivered.
struct Buffered {
    offset: i64,
    event: Event,
    /// The key an exchange record was routed by, if it carries one.
    route: Option<Vec<u8>>,
}

/// A buffered record that is not an event to deliver.
enum Unusual {
    /// An exchange topic's control record: a producer's watermark.
    Control(ExchangeMark),
    /// A record the source cannot deliver as an event: handled as the
    /// option for its kind says; why.
    Bad(BadKind, String),
}

/// Why a record is not an event, and so which option handles it.
#[derive(Clone, Copy)]
enum BadKind {
    /// No usable event time, or a tombstone: `on_bad_timestamp`.
    Timestamp,
    /// Not decodable in the source's format: `on_undecodable`.
    Undecodable,
}

impl BadKind {
    /// The source option that says what to do with such a record.
    fn option(self) -> &'static str {
        match self {
            BadKind::Timestamp => "on_bad_timestamp",
            BadKind::Undecodable => "on_undecodable",
        }
    }
}

/// What the control records of an exchange topic reported.
struct ExchangeReports {
    /// The units producing to the topic, in producer order.
    producers: Vec<String>,
    /// Watermarks reported since the last `take_watermarks`, by producer.
    marks: Vec<(usize, Option<i64>)>,
    /// Producers that ended (drained): they write nothing more.
    ended: BTreeSet<usize>,
    /// The key each event the last `next_batch` delivered was routed by,
    /// in order (none: a record without one).
    routes: Vec<Option<Vec<u8>>>,
}

impl ExchangeReports {
    /// Producers a snapshot recorded as ended (by unit) count as ended.
    fn restore_ended(&mut self, units: &[String]) {
        let ended = units.iter().filter_map(|unit| self.producers.iter().position(|p| p == unit));
        self.ended.extend(ended);
    }
}

/// The position: next offset per `topic/partition`, and how many bad
/// records were dropped before it.
#[derive(Serialize, Deserialize)]
struct Position {
    offsets: BTreeMap<String, i64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    dropped: u64,
    /// An exchange topic's producers that ended, by unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ended: Vec<String>,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl KafkaSource {
    /// Connect, find the partitions and their fresh-start offsets; `seek`
    /// (a restore) replaces those before the first read assigns them. The
    /// group is `group_id`, or `weir-<pipeline>`. Reads every partition,
    /// whatever the config's `parallelism`.
    pub fn open(config: &KafkaSourceConfig, pipeline: &str) -> Result<Self, ConnectorError> {
        let consumer = Self::consumer(config, pipeline)?;
        let partitions = Self::partitions(&consumer, config)?;
        Self::reading(config, consumer, partitions)
    }

    /// The readers of `config.parallelism` source tasks: the partitions
    /// dealt out in turn, at most one reader per partition, each with a
    /// consumer of its own (in the same group). A cluster plan's source
    /// (one partition, or an exchange topic) is one reader.
    pub fn open_readers(
        config: &KafkaSourceConfig,
        pipeline: &str,
    ) -> Result<Vec<Self>, ConnectorError> {
        let consumer = Self::consumer(config, pipeline)?;
        let partitions = Self::partitions(&consumer, config)?;
        let readers = config.max_readers().clamp(1, partitions.len().max(1));
        let mut parts: Vec<Vec<Partition>> = (0..readers).map(|_| Vec::new()).collect();
        for (i, partition) in partitions.into_iter().enumerate() {
            parts[i % readers].push(partition);
        }
        // The first reader keeps the consumer that listed the partitions.
        let consumers = std::iter::once(Ok(consumer))
            .chain(std::iter::repeat_with(|| Self::consumer(config, pipeline)));
        parts
            .into_iter()
            .zip(consumers)
            .map(|(part, consumer)| Self::reading(config, consumer?, part))
            .collect()
    }

    /// A consumer as the source sets it.
    fn consumer(
        config: &KafkaSourceConfig,
        pipeline: &str,
    ) -> Result<BaseConsumer<PartitionEnds>, ConnectorError> {
        let group_id = config.group_id.clone().unwrap_or_else(|| format!("weir-{pipeline}"));
        // Every assignment is at an offset Weir chose; one that turns out of
        // range while running (retention deleted records not yet read) fails
        // the run, and its restore applies `on_data_loss`, unless skipping.
        let reset = match config.on_data_loss {
            OnDataLoss::Fail => "error",
            OnDataLoss::Skip => "earliest",
        };
        let ours = [
            ("group.id", group_id.as_str()),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", reset),
            // The partitions' ends, for the consumer lag metrics.
            ("statistics.interval.ms", "1000"),
            // Once its queue holds `queued.min.messages`, librdkafka waits
            // this long before fetching a partition again (1 s by default):
            // a brief stall of the pipeline then became a second of latency,
            // and the fetches could not keep up with a fast pipeline.
            ("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS),
        ];
        client_config(&config.bootstrap_servers, &ours, &config.properties)
            .create_with_context(PartitionEnds::default())
            .map_err(kafka_error("creating the consumer"))
    }

    /// Every partition `config` reads, in order of topic and partition;
    /// bounded, with the end it reads to.
    fn partitions(
        consumer: &BaseConsumer<PartitionEnds>,
        config: &KafkaSourceConfig,
    ) -> Result<Vec<Partition>, ConnectorError> {
        let topics = resolve_topics(consumer, config)?;
        let mut partitions = Vec::new();
        for topic in &topics {
            let mut ids = topic_partitions(consumer, topic)?;
            if let Some(only) = config.partition {
                if !ids.contains(&only) {
                    return Err(ConnectorError::Config {
                        what: format!("kafka source topic {topic:?}"),
                        message: format!("has no partition {only} (it has {})", ids.len()),
                    });
                }
                ids = vec![only];
            }
            for partition in ids {
                let end = if config.bounded {
                    let (_, high) = consumer
                        .fetch_watermarks(topic, partition, CALL_TIMEOUT)
                        .map_err(kafka_error(format!("reading the end of {topic}/{partition}")))?;
                    Some(high)
                } else {
                    None
                };
                partitions.push(Partition {
                    topic: topic.clone(),
                    partition,
                    next: 0,
                    buffered: VecDeque::new(),
                    unusual: VecDeque::new(),
                    end,
                });
            }
        }
        Ok(partitions)
    }

    /// A source reading `partitions` through `consumer`, from their
    /// fresh-start offsets.
    fn reading(
        config: &KafkaSourceConfig,
        consumer: BaseConsumer<PartitionEnds>,
        partitions: Vec<Partition>,
    ) -> Result<Self, ConnectorError> {
        let mut source = Self {
            fetched: FetchQueue::new(&consumer),
            consumer,
            partitions,
            timestamp_field: config.timestamp_field.clone(),
            on_bad_timestamp: config.on_bad_timestamp.clone(),
            decoder: RecordDecoder::new(
                config.format,
                config.schema_registry.as_ref(),
                config.reader_schema.as_deref(),
            )
            .map_err(|message| ConnectorError::Config {
                what: format!("kafka source format {}", config.format.name()),
                message,
            })?,
            on_undecodable: config.on_undecodable.clone(),
            rejected: Vec::new(),
            dropped: 0,
            on_data_loss: config.on_data_loss,
            pinned: config.partition.is_some() || config.exchange.is_some(),
            cursor: 0,
            unassigned: true,
            retry: Retry::default(),
            failing_since: None,
            fetch_warnings: Throttle::default(),
            exchange: config.exchange.as_ref().map(|e| ExchangeReports {
                producers: e.producers.clone(),
                marks: Vec::new(),
                ended: BTreeSet::new(),
                routes: Vec::new(),
            }),
            max_wait: POLL_WAIT,
        };
        let offsets = source.fresh_offsets(&config.start)?;
        for (p, offset) in source.partitions.iter_mut().zip(offsets) {
            p.next = offset;
        }
        Ok(source)
    }

    /// The offsets a fresh start begins at, resolved to numbers.
    fn fresh_offsets(&self, start: &KafkaStart) -> Result<Vec<i64>, ConnectorError> {
        let mut list = TopicPartitionList::new();
        for p in &self.partitions {
            list.add_partition(&p.topic, p.partition);
        }
        let resolved = match start {
            KafkaStart::Earliest | KafkaStart::Latest => None,
            KafkaStart::Committed => Some(
                self.consumer
                    .committed_offsets(list, CALL_TIMEOUT)
                    .map_err(kafka_error("reading the group's committed offsets"))?,
            ),
            KafkaStart::Timestamp(text) => {
                let millis = parse_rfc3339_millis(text).ok_or_else(|| ConnectorError::Config {
                    what: "kafka source start.timestamp".into(),
                    message: format!("{text:?} is not an RFC 3339 time"),
                })?;
                Some(
                    self.consumer
                        .offsets_for_timestamp(millis, CALL_TIMEOUT)
                        .map_err(kafka_error("finding offsets by timestamp"))?,
                )
            }
        };
        self.partitions
            .iter()
            .map(|p| {
                let (low, high) =
                    self.consumer.fetch_watermarks(&p.topic, p.partition, CALL_TIMEOUT).map_err(
                        kafka_error(format!("reading the offsets of {}/{}", p.topic, p.partition)),
                    )?;
                let found = resolved
                    .as_ref()
                    .and_then(|list| list.find_partition(&p.topic, p.partition))
                    .map(|e| e.offset());
                Ok(match (start, found) {
                    (KafkaStart::Latest, _) => high,
                    (_, Some(Offset::Offset(offset))) => offset.clamp(low, high),
                    (KafkaStart::Timestamp(_), Some(Offset::End)) => high,
                    _ => low,
                })
            })
            .collect()
    }

    /// Assign every partition at `offsets` (one per partition, in order).
    fn assign(&mut self, offsets: &[i64]) -> Result<(), ConnectorError> {
        self.unassigned = false;
        let mut list = TopicPartitionList::new();
        for (p, &offset) in self.partitions.iter_mut().zip(offsets) {
            p.next = offset;
            p.buffered.clear();
            p.unusual.clear();
            list.add_partition_offset(&p.topic, p.partition, Offset::Offset(offset))
                .map_err(kafka_error("building the assignment"))?;
        }
        // Stopping a partition's fetcher drops its routing: route again.
        for p in &self.partitions {
            self.fetched.route(&self.consumer, &p.topic, p.partition)?;
        }
        tracing::debug!(?offsets, "kafka source assigned");
        self.consumer.assign(&list).map_err(kafka_error("assigning partitions"))
    }

    /// Read what was fetched into the partitions' buffers, waiting up to
    /// `max_wait` for the first record; how many records were read.
    fn fill(&mut self, max: usize) -> Result<usize, ConnectorError> {
        // The consumer's own queue: statistics, commit results, client
        // errors (records only if one was fetched before its partition was
        // routed, which every assignment is preceded by).
        let mut read = 0;
        while let Some(result) = self.consumer.poll(Duration::ZERO) {
            match result {
                Ok(message) => accept(
                    Fetched::of(&message),
                    &mut self.partitions,
                    Reading {
                        timestamp_field: self.timestamp_field.as_deref(),
                        decoder: self.decoder.as_ref(),
                        producers: self.exchange.as_ref().map(|e| e.producers.as_slice()),
                    },
                )?,
                Err(error) => return self.ride_out(error).map(|()| read),
            }
            read += 1;
        }
        let mut failed = None;
        let partitions = &mut self.partitions;
        let reading = Reading {
            timestamp_field: self.timestamp_field.as_deref(),
            decoder: self.decoder.as_ref(),
            producers: self.exchange.as_ref().map(|e| e.producers.as_slice()),
        };
        // A fetch error is ridden out after the records read with it.
        let taken = read
            + self.fetched.read(self.max_wait, max, |record| match record {
                Ok(record) => accept(record, partitions, reading),
                Err(error) => {
                    failed.get_or_insert(error);
                    Ok(())
                }
            })?;
        match failed {
            Some(error) => self.ride_out(error).map(|()| taken),
            None => {
                if taken > 0 {
                    self.failing_since = None;
                }
                Ok(taken)
            }
        }
    }

    /// A fetch failed: a transient error (the broker unreachable) is
    /// logged and fetching goes on, librdkafka reconnecting, until errors
    /// have lasted the retry budget with the broker still unreachable.
    fn ride_out(&mut self, error: rdkafka::error::KafkaError) -> Result<(), ConnectorError> {
        let transient = matches!(error, rdkafka::error::KafkaError::MessageConsumption(code) if is_transient_code(code));
        if !transient {
            return Err(kafka_error("reading")(error));
        }
        let now = Instant::now();
        let since = *self.failing_since.get_or_insert(now);
        if now.duration_since(since) < self.retry.budget() {
            if let Some(repeats) = self.fetch_warnings.pass(now) {
                tracing::warn!(%error, failing_for = ?now.duration_since(since), repeats, "kafka source cannot fetch; retrying (repeats: held back since the last line)");
            }
            return Ok(());
        }
        // Errors since `since`, but fetching may have recovered in between
        // without a record to show it (an idle topic): ask the broker.
        if self.consumer.fetch_metadata(None, CALL_TIMEOUT.min(self.retry.budget())).is_ok() {
            self.failing_since = Some(now);
            return Ok(());
        }
        Err(outlasted("reading".into(), &error, now.duration_since(since)))
    }

    fn finished(&self, index: usize) -> bool {
        let p = &self.partitions[index];
        p.end.is_some_and(|end| p.next >= end && p.buffered.is_empty())
    }

    /// A bounded partition whose remaining offsets are all control records
    /// (transaction markers) never delivers them: take the consumer's
    /// position as the next offset once nothing is buffered.
    fn skip_control_records(&mut self) -> Result<(), ConnectorError> {
        if !self
            .partitions
            .iter()
            .any(|p| p.end.is_some_and(|end| p.next < end) && p.buffered.is_empty())
        {
            return Ok(());
        }
        let positions = self.consumer.position().map_err(kafka_error("reading positions"))?;
        for p in self.partitions.iter_mut().filter(|p| p.buffered.is_empty()) {
            if let Some(Offset::Offset(position)) =
                positions.find_partition(&p.topic, p.partition).map(|e| e.offset())
            {
                p.next = p.next.max(position);
            }
        }
        Ok(())
    }
}

/// How a source reads its records: where their event time is, how their
/// values are decoded, and an exchange topic's producers.
#[derive(Clone, Copy)]
struct Reading<'a> {
    timestamp_field: Option<&'a str>,
    decoder: Option<&'a RecordDecoder>,
    producers: Option<&'a [String]>,
}

/// Buffer `record` as an event of its partition, unless it is before
/// what is already buffered (a stale fetch) or of no partition read; tell
/// now whether it is an event: an exchange topic's (of `producers`)
/// records by [`exchange::classify`], other topics' by their value (a
/// tombstone is not an event, a registry format's is decoded into JSON)
/// and event time (`timestamp_field` of the JSON, else the Kafka
/// timestamp).
fn accept(
    record: Fetched<'_>,
    partitions: &mut [Partition],
    reading: Reading<'_>,
) -> Result<(), ConnectorError> {
    let Some(partition) =
        partitions.iter_mut().find(|p| p.partition == record.partition && p.topic == record.topic)
    else {
        return Ok(());
    };
    let (topic, id, offset, payload) =
        (record.topic, record.partition, record.offset, record.payload);
    let mut undecodable = None;
    let value = match (payload, reading.decoder) {
        (Some(raw), Some(decoder)) => {
            let mut json = Vec::with_capacity(raw.len() * 2);
            match decoder.decode(raw, &mut json) {
                Ok(()) => json,
                Err(reason) => {
                    undecodable = Some(reason);
                    raw.to_vec()
                }
            }
        }
        (payload, _) => payload.unwrap_or_default().to_vec(),
    };
    let mut event = Event {
        key: record.key.map(<[u8]>::to_vec),
        value,
        timestamp: record.timestamp.unwrap_or(0),
        headers: record.headers,
    };
    let mut route = None;
    let unusual = match (reading.producers, payload, reading.timestamp_field) {
        (Some(producers), _, _) => {
            let location = || format!("{topic}/{id}@{offset}");
            match exchange::classify(&mut event, producers, location)? {
                ExchangeRecord::Data(key) => {
                    route = key;
                    None
                }
                ExchangeRecord::Control(mark) => Some(Unusual::Control(mark)),
            }
        }
        (None, None, _) => {
            Some(Unusual::Bad(BadKind::Timestamp, "a tombstone (null value)".into()))
        }
        (None, Some(_), _) if undecodable.is_some() => {
            undecodable.map(|reason| Unusual::Bad(BadKind::Undecodable, reason))
        }
        (None, Some(_), Some(field)) => match json_timestamp(&event.value, field) {
            Ok(timestamp) => {
                event.timestamp = timestamp;
                None
            }
            Err(reason) => Some(Unusual::Bad(BadKind::Timestamp, reason)),
        },
        (None, Some(_), None) => None,
    };
    // Records before the position (a stale fetch) are not ours to deliver.
    let expected = partition.buffered.back().map_or(partition.next, |b| b.offset + 1);
    if offset >= expected {
        if let Some(unusual) = unusual {
            partition.unusual.push_back((offset, unusual));
        }
        partition.buffered.push_back(Buffered { offset, event, route });
    }
    Ok(())
}

/// Where a record the source cannot deliver as an event goes, as one of
/// its options (`policy`, named `option`) says.
struct Rejecting<'a> {
    policy: &'a BadTimestamps,
    option: &'static str,
    dropped: &'a mut u64,
    rejected: &'a mut Vec<(String, Event)>,
}

impl Rejecting<'_> {
    /// Fail, drop or side-output `event` (at `offset` of `partition`, bad
    /// for `reason`); its partition's position passes it.
    fn reject(
        self,
        partition: &mut Partition,
        offset: i64,
        mut event: Event,
        reason: &str,
    ) -> Result<(), ConnectorError> {
        let (topic, id) = (&partition.topic, partition.partition);
        let option = self.option;
        match self.policy {
            BadTimestamps::Fail => {
                return Err(ConnectorError::BadRecord {
                    location: format!("{topic}/{id}@{offset}"),
                    message: format!("{reason} ({option}: fail; `drop` or `{{ side-output: NAME }}` on the source lets the pipeline go past such records)"),
                })
            }
            BadTimestamps::Drop => *self.dropped += 1,
            BadTimestamps::SideOutput(name) => {
                event.timestamp = i64::MIN;
                event.headers.extend([
                    (SOURCE_TOPIC_HEADER.to_owned(), topic.as_bytes().to_vec()),
                    (SOURCE_PARTITION_HEADER.to_owned(), id.to_string().into_bytes()),
                    (SOURCE_OFFSET_HEADER.to_owned(), offset.to_string().into_bytes()),
                ]);
                self.rejected.push((name.clone(), event));
            }
        }
        partition.next = offset + 1;
        Ok(())
    }
}

impl KafkaSourceConfig {
    /// Every `(topic, partition)` the source reads (its topics, or those
    /// its pattern matches now), asking the broker.
    pub fn partitions(&self) -> Result<Vec<(String, i32)>, ConnectorError> {
        let consumer: BaseConsumer = client_config(&self.bootstrap_servers, &[], &self.properties)
            .create()
            .map_err(kafka_error("creating a metadata reader"))?;
        let mut all = Vec::new();
        for topic in resolve_topics(&consumer, self)? {
            let ids = topic_partitions(&consumer, &topic)?;
            all.extend(ids.into_iter().map(|id| (topic.clone(), id)));
        }
        Ok(all)
    }
}

fn resolve_topics<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    config: &KafkaSourceConfig,
) -> Result<Vec<String>, ConnectorError> {
    let Some(pattern) = &config.topic_pattern else { return Ok(config.topics.clone()) };
    let regex = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
        ConnectorError::Config { what: "kafka source topic_pattern".into(), message: e.to_string() }
    })?;
    let metadata =
        consumer.fetch_metadata(None, CALL_TIMEOUT).map_err(kafka_error("listing topics"))?;
    let mut topics: Vec<String> = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|name| regex.is_match(name))
        .collect();
    topics.sort();
    if topics.is_empty() {
        return Err(ConnectorError::Config {
            what: "kafka source topic_pattern".into(),
            message: format!("{pattern:?} matches no topic"),
        });
    }
    Ok(topics)
}

impl Source for KafkaSource {
    /// An exchange topic's events keep the keys they were routed by
    /// ([`PackedEvents::push_routed`]).
    fn next_packed(
        &mut self,
        max: usize,
        out: &mut PackedEvents,
    ) -> Result<Polled, ConnectorError> {
        let mut events = Vec::new();
        let polled = self.next_batch(max, &mut events)?;
        match self.exchange.as_mut().map(|reports| std::mem::take(&mut reports.routes)) {
            Some(routes) if routes.len() == events.len() => {
                for (event, route) in events.iter().zip(&routes) {
                    match route {
                        Some(key) => out.push_routed(event.into(), key),
                        None => out.push(event.into()),
                    }
                }
            }
            _ => out.push_all(&events),
        }
        Ok(polled)
    }

    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        if let Some(reports) = &mut self.exchange {
            reports.routes.clear();
        }
        if self.unassigned {
            let offsets: Vec<i64> = self.partitions.iter().map(|p| p.next).collect();
            self.assign(&offsets)?;
        }
        if self.partitions.iter().all(|p| p.buffered.is_empty()) {
            // The position is a call into librdkafka's main thread: only
            // once the fetched records are all read.
            if self.fill(max)? == 0 {
                self.skip_control_records()?;
            }
        }
        let count = self.partitions.len();
        let more = |source: &Self| (0..count).any(|i| !source.finished(i));
        // Round-robin over partitions with buffered records.
        for step in 0..count {
            let index = (self.cursor + step) % count;
            if self.partitions[index].buffered.is_empty() {
                continue;
            }
            self.cursor = (index + 1) % count;
            let partition = &mut self.partitions[index];
            // `out` may hold events already: `max` counts what is added.
            let full = out.len() + max;
            while out.len() < full {
                let Some(Buffered { offset, event, route }) = partition.buffered.pop_front() else {
                    break;
                };
                if partition.end.is_some_and(|end| offset >= end) {
                    partition.buffered.clear();
                    partition.unusual.clear();
                    break;
                }
                let unusual = match partition.unusual.front() {
                    Some((at, _)) if *at == offset => partition.unusual.pop_front().map(|(_, u)| u),
                    _ => None,
                };
                match unusual {
                    None => {
                        partition.next = offset + 1;
                        out.push(event);
                        if let Some(reports) = &mut self.exchange {
                            reports.routes.push(route);
                        }
                    }
                    Some(Unusual::Control(mark)) => {
                        partition.next = offset + 1;
                        if let Some(reports) = &mut self.exchange {
                            // Events before the mark are delivered before it applies.
                            let watermark = mark.watermark.filter(|_| !mark.idle);
                            // An ended producer holds event time back no more.
                            if mark.end {
                                reports.ended.insert(mark.producer);
                            }
                            if !reports.ended.contains(&mark.producer) || mark.end {
                                reports.marks.push((mark.producer, watermark));
                            }
                        }
                        break;
                    }
                    Some(Unusual::Bad(kind, reason)) => {
                        let policy = match kind {
                            BadKind::Timestamp => &self.on_bad_timestamp,
                            BadKind::Undecodable => &self.on_undecodable,
                        };
                        let rejecting = Rejecting {
                            policy,
                            option: kind.option(),
                            dropped: &mut self.dropped,
                            rejected: &mut self.rejected,
                        };
                        rejecting.reject(partition, offset, event, &reason)?;
                    }
                }
            }
            tracing::trace!(
                split = index,
                next = self.partitions[index].next,
                events = out.len(),
                "kafka source batch"
            );
            return Ok(Polled {
                split: index,
                split_finished: self.finished(index),
                more: more(self),
            });
        }
        // Nothing buffered: report finished partitions one call at a time.
        let split = (0..count).find(|&i| self.finished(i)).unwrap_or(0);
        Ok(Polled { split, split_finished: self.finished(split), more: more(self) })
    }

    fn splits(&self) -> usize {
        match &self.exchange {
            Some(reports) => reports.producers.len(),
            None => self.partitions.len(),
        }
    }

    fn split_names(&self) -> Vec<String> {
        match &self.exchange {
            Some(reports) => reports.producers.clone(),
            None => {
                self.partitions.iter().map(|p| format!("{}/{}", p.topic, p.partition)).collect()
            }
        }
    }

    fn lag(&self) -> Vec<Option<i64>> {
        let ends = self.consumer.context().ends.lock().unwrap_or_else(PoisonError::into_inner);
        self.partitions
            .iter()
            .map(|p| {
                let end = ends.get(&(p.topic.clone(), p.partition))?;
                Some((end - p.next).max(0))
            })
            .collect()
    }

    fn set_max_wait(&mut self, wait: Option<Duration>) {
        self.max_wait = wait.map_or(POLL_WAIT, |wait| wait.min(POLL_WAIT));
    }

    /// Its fetches' waits for a first record: a source on empty
    /// partitions is idle, however few records trickle in.
    fn take_waited(&mut self) -> Duration {
        self.fetched.take_waited()
    }

    fn reports_watermarks(&self) -> bool {
        self.exchange.is_some()
    }

    fn take_watermarks(&mut self, out: &mut Vec<(usize, Option<i64>)>) {
        if let Some(reports) = &mut self.exchange {
            out.append(&mut reports.marks);
        }
    }

    fn inputs_ended(&self) -> bool {
        self.exchange.as_ref().is_some_and(|r| r.ended.len() == r.producers.len())
    }

    fn position(&self) -> serde_json::Value {
        let ended = self.exchange.as_ref().map_or_else(Vec::new, |r| {
            r.ended.iter().filter_map(|&i| r.producers.get(i).cloned()).collect()
        });
        encode(&Position {
            offsets: self
                .partitions
                .iter()
                .map(|p| (format!("{}/{}", p.topic, p.partition), p.next))
                .collect(),
            dropped: self.dropped,
            ended,
        })
    }

    fn take_rejected(&mut self) -> Vec<(String, Event)> {
        std::mem::take(&mut self.rejected)
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn seek(&mut self, position: &serde_json::Value) -> Result<(), ConnectorError> {
        self.seek_merged(std::slice::from_ref(position))
    }

    fn seek_merged(&mut self, positions: &[serde_json::Value]) -> Result<(), ConnectorError> {
        // Each reader recorded its own partitions: together, every one.
        let mut recorded = BTreeMap::new();
        let mut dropped = 0;
        for position in positions {
            let position: Position = decode(|| "kafka source".to_string(), position)?;
            recorded.extend(position.offsets);
            dropped += position.dropped;
            if let Some(reports) = &mut self.exchange {
                reports.restore_ended(&position.ended);
            }
        }
        self.dropped = dropped;
        if self.pinned && !recorded.is_empty() {
            let own: Vec<String> =
                self.partitions.iter().map(|p| format!("{}/{}", p.topic, p.partition)).collect();
            if !own.iter().any(|key| recorded.contains_key(key)) {
                let theirs: Vec<&String> = recorded.keys().collect();
                return Err(ConnectorError::Restore {
                    what: format!("kafka source {}", own.join(", ")),
                    message: format!(
                        "the unit's checkpoint records the position of {theirs:?}, not of the partition the unit reads: the checkpoint belongs to another unit (units of an older Weir were named by their place in the source's topic list, and the list changed). Restoring it would re-read or skip records: run the workers with the old topic list, or delete this unit's checkpoints (its directory under the checkpoint storage) to read the partition from the source's `start`"
                    ),
                });
            }
        }
        let mut offsets = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            let (low, high) =
                self.consumer.fetch_watermarks(&p.topic, p.partition, CALL_TIMEOUT).map_err(
                    kafka_error(format!("reading the offsets of {}/{}", p.topic, p.partition)),
                )?;
            // A partition added since the checkpoint starts at its beginning.
            let Some(&offset) = recorded.get(&format!("{}/{}", p.topic, p.partition)) else {
                offsets.push(low);
                continue;
            };
            let (topic, partition) = (&p.topic, p.partition);
            if offset > high {
                return Err(ConnectorError::Restore {
                    what: format!("kafka source topic {topic} partition {partition}"),
                    message: format!(
                        "the checkpoint resumes at offset {offset}, but the partition ends at {high}: was the topic deleted and created again? Restore an older snapshot, or start over (--fresh)"
                    ),
                });
            }
            if offset >= low {
                offsets.push(offset);
                continue;
            }
            match self.on_data_loss {
                OnDataLoss::Fail => {
                    return Err(ConnectorError::Restore {
                        what: format!("kafka source topic {topic} partition {partition}"),
                        message: format!(
                            "the checkpoint resumes at offset {offset}, but the partition's log now starts at {low}: records {offset}..{low} were deleted (retention?) before the pipeline read them; to accept the loss and go on from the log start, set `on_data_loss: skip` on the source"
                        ),
                    })
                }
                OnDataLoss::Skip => {
                    tracing::warn!(
                        topic = %topic,
                        partition,
                        lost = %format!("{offset}..{low}"),
                        "records deleted before they were read are skipped (on_data_loss: skip)"
                    );
                    offsets.push(low);
                }
            }
        }
        self.assign(&offsets)
    }

    fn set_retry_budget(&mut self, budget: Duration) {
        self.retry = Retry::for_up_to(budget);
    }

    fn on_barrier(&mut self, position: &serde_json::Value) {
        let Ok(position) = serde_json::from_value::<Position>(position.clone()) else { return };
        let mut list = TopicPartitionList::new();
        for p in &self.partitions {
            if let Some(&offset) = position.offsets.get(&format!("{}/{}", p.topic, p.partition)) {
                let _ = list.add_partition_offset(&p.topic, p.partition, Offset::Offset(offset));
            }
        }
        if let Err(error) = self.consumer.commit(&list, CommitMode::Async) {
            tracing::debug!(%error, "cannot commit group offsets (used for lag monitoring only)");
        }
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode;

    use super::*;

    /// A source whose broker is not there (nothing listens on port 1).
    fn unreachable(budget: Duration) -> KafkaSource {
        let consumer = client_config("127.0.0.1:1", &[("group.id", "test")], &BTreeMap::new())
            .create_with_context(PartitionEnds::default())
            .unwrap();
        KafkaSource {
            fetched: FetchQueue::new(&consumer),
            consumer,
            partitions: Vec::new(),
            timestamp_field: None,
            on_bad_timestamp: BadTimestamps::Fail,
            decoder: None,
            on_undecodable: BadTimestamps::Fail,
            rejected: Vec::new(),
            dropped: 0,
            cursor: 0,
            unassigned: true,
            retry: Retry::for_up_to(budget),
            failing_since: None,
            fetch_warnings: Throttle::default(),
            on_data_loss: OnDataLoss::Fail,
            pinned: false,
            exchange: None,
            max_wait: POLL_WAIT,
        }
    }

    /// `unreachable`'s source reading partition 0 of topic `t` from what
    /// [`accept`] buffers (no broker call: the partition counts as
    /// assigned).
    fn buffering(policy: BadTimestamps, exchange: Option<usize>) -> KafkaSource {
        let mut source = unreachable(Duration::from_secs(60));
        source.unassigned = false;
        source.on_bad_timestamp = policy;
        source.exchange = exchange.map(|producers| ExchangeReports {
            producers: (0..producers).map(|i| format!("p-{i}")).collect(),
            marks: Vec::new(),
            ended: BTreeSet::new(),
            routes: Vec::new(),
        });
        source.partitions.push(Partition {
            topic: "t".into(),
            partition: 0,
            next: 0,
            buffered: VecDeque::new(),
            unusual: VecDeque::new(),
            end: None,
        });
        source
    }

    /// A record to feed: its value (`None`: a tombstone) and headers.
    type Fed<'a> = (Option<&'a [u8]>, Vec<(String, Vec<u8>)>);

    /// Buffer `records` at offsets 0, 1, …
    fn feed(source: &mut KafkaSource, records: &[Fed<'_>]) {
        let producers = source.exchange.as_ref().map(|e| e.producers.clone());
        let field = source.timestamp_field.clone();
        for (offset, (payload, headers)) in records.iter().enumerate() {
            let record = Fetched {
                topic: "t",
                partition: 0,
                offset: offset as i64,
                key: Some(b"k"),
                payload: *payload,
                timestamp: Some(1),
                headers: headers.clone(),
            };
            let reading = Reading {
                timestamp_field: field.as_deref(),
                decoder: source.decoder.as_ref(),
                producers: producers.as_deref(),
            };
            accept(record, &mut source.partitions, reading).unwrap();
        }
    }

    /// Good, not JSON, good, without the field, tombstone, good.
    fn poisoned(policy: BadTimestamps) -> KafkaSource {
        let mut source = buffering(policy, None);
        source.timestamp_field = Some("t".into());
        let records: [Option<&[u8]>; 6] = [
            Some(br#"{"t":10}"#),
            Some(b"not json"),
            Some(br#"{"t":20}"#),
            Some(br#"{"x":1}"#),
            None,
            Some(br#"{"t":30}"#),
        ];
        feed(&mut source, &records.map(|payload| (payload, Vec::new())));
        source
    }

    fn times(events: &[Event]) -> Vec<i64> {
        events.iter().map(|e| e.timestamp).collect()
    }

    #[test]
    fn a_bad_record_fails_the_run_by_default_naming_topic_partition_and_offset() {
        let mut source = poisoned(BadTimestamps::Fail);
        let mut out = Vec::new();
        let error = source.next_batch(100, &mut out).unwrap_err().to_string();
        assert!(error.contains("t/0@1") && error.contains("not a JSON object"), "{error}");
        assert_eq!(times(&out), [10], "what came before it is delivered");
        assert_eq!(source.partitions[0].next, 1, "the position stays before the bad record");
    }

    #[test]
    fn bad_records_and_tombstones_are_dropped_and_counted_in_the_position() {
        let mut source = poisoned(BadTimestamps::Drop);
        let mut out = Vec::new();
        source.next_batch(100, &mut out).unwrap();
        assert_eq!(times(&out), [10, 20, 30]);
        assert_eq!(source.dropped(), 3);
        let position = source.position();
        assert_eq!(position["offsets"]["t/0"], 6);
        let recorded: Position = serde_json::from_value(position).unwrap();
        assert_eq!(recorded.dropped, 3, "a restore counts on from the checkpoint's count");
    }

    #[test]
    fn bad_records_go_to_the_side_output_as_they_were_with_where_they_came_from() {
        let mut source = poisoned(BadTimestamps::SideOutput("bad".into()));
        let mut out = Vec::new();
        source.next_batch(100, &mut out).unwrap();
        assert_eq!(times(&out), [10, 20, 30]);
        let rejected = source.take_rejected();
        let offsets: Vec<&[u8]> = rejected
            .iter()
            .map(|(name, event)| {
                assert_eq!(name, "bad");
                assert_eq!(event.timestamp, i64::MIN);
                assert_eq!(event.headers[0], (SOURCE_TOPIC_HEADER.to_owned(), b"t".to_vec()));
                assert_eq!(event.headers[1], (SOURCE_PARTITION_HEADER.to_owned(), b"0".to_vec()));
                event.headers[2].1.as_slice()
            })
            .collect();
        assert_eq!(offsets, [&b"1"[..], b"3", b"4"]);
        assert_eq!(rejected[0].1.value, b"not json");
        assert!(rejected[2].1.value.is_empty(), "the tombstone");
        assert_eq!(source.dropped(), 0);
    }

    #[test]
    fn exchange_records_come_packed_with_the_keys_they_were_routed_by() {
        use super::super::exchange::{keyed_header, time_header, KEYED_HEADER, TIME_HEADER};
        let keyed = |key: &[u8], time: i64| {
            let mut value = Vec::new();
            keyed_header(time, key, &mut value);
            vec![("h".to_owned(), b"1".to_vec()), (KEYED_HEADER.to_owned(), value)]
        };
        let mut source = buffering(BadTimestamps::Fail, Some(1));
        feed(&mut source, &[(Some(b"a"), keyed(b"c1", 10)), (Some(b"b"), keyed(b"", 11))]);
        let mut out = PackedEvents::default();
        source.next_packed(100, &mut out).unwrap();
        let routes: Vec<&[u8]> = out.routes().expect("every event keyed").iter().collect();
        assert_eq!(routes, [&b"c1"[..], b""]);
        let events = out.to_events();
        assert_eq!(times(&events), [10, 11]);
        assert_eq!(events[0].headers, [("h".to_owned(), b"1".to_vec())], "Weir's header gone");
        assert_eq!(events[0].key.as_deref(), Some(&b"k"[..]), "the record's own key kept");

        // A record of an older version (event time only) among them: the
        // batch is keyed by the function, as before.
        let mut source = buffering(BadTimestamps::Fail, Some(1));
        let old = vec![(TIME_HEADER.to_owned(), time_header(12).to_vec())];
        feed(&mut source, &[(Some(b"a"), keyed(b"c1", 10)), (Some(b"c"), old)]);
        let mut out = PackedEvents::default();
        source.next_packed(100, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.routes().is_none());
    }

    #[test]
    fn forged_watermark_headers_on_exchange_data_are_data_and_real_marks_apply_in_order() {
        use super::super::exchange::{time_header, ExchangeOutput, TIME_HEADER, WATERMARK_HEADER};
        let data = |forged: &[u8], time: i64| {
            vec![
                (WATERMARK_HEADER.to_owned(), forged.to_vec()),
                (TIME_HEADER.to_owned(), time_header(time).to_vec()),
            ]
        };
        let output = ExchangeOutput {
            tasks: 1,
            max_parallelism: 128,
            producer: 1,
            unit: "p-1".into(),
            broadcast: false,
        };
        let control = output.control_record(Some(15)).headers;
        let mut source = buffering(BadTimestamps::Fail, Some(2));
        feed(
            &mut source,
            &[
                (Some(b"a"), data(br#"{"producer":99}"#, 10)),
                (Some(b"b"), data(br#"{"producer":0,"watermark":9000000000000000}"#, 11)),
                (Some(b""), control),
                (Some(b"c"), data(b"not json", 20)),
            ],
        );
        let mut out = Vec::new();
        source.next_batch(100, &mut out).unwrap();
        assert_eq!(times(&out), [10, 11], "up to the control record");
        let mut marks = Vec::new();
        source.take_watermarks(&mut marks);
        assert_eq!(marks, [(1, Some(15))], "only the mark the exchange sink wrote");
        out.clear();
        source.next_batch(100, &mut out).unwrap();
        assert_eq!(times(&out), [20]);
        assert_eq!(out[0].headers, [(WATERMARK_HEADER.to_owned(), b"not json".to_vec())]);
    }

    #[test]
    fn a_task_knows_its_producers_ended_and_remembers_it_in_its_position() {
        use super::super::exchange::{time_header, ExchangeOutput, TIME_HEADER};
        let producer = |producer: usize| ExchangeOutput {
            tasks: 1,
            max_parallelism: 128,
            producer,
            unit: format!("p-{producer}"),
            broadcast: false,
        };
        let data = vec![(TIME_HEADER.to_owned(), time_header(5).to_vec())];
        let mut source = buffering(BadTimestamps::Fail, Some(2));
        feed(
            &mut source,
            &[
                (Some(b"a"), data.clone()),
                (Some(b""), producer(0).end_record().headers),
                (Some(b"b"), data),
            ],
        );
        let mut out = Vec::new();
        while source.next_batch(100, &mut out).unwrap().more && out.len() < 2 {}
        assert!(!source.inputs_ended(), "producer 1 has not ended");
        let mut marks = Vec::new();
        source.take_watermarks(&mut marks);
        assert_eq!(marks, [(0, None)], "an ended producer is idle");
        let position = source.position();
        assert_eq!(position["ended"], serde_json::json!(["p-0"]));

        // Restored, it still knows; the other's end completes the drain.
        let mut restored = buffering(BadTimestamps::Fail, Some(2));
        let recorded: Position = serde_json::from_value(position).unwrap();
        restored.exchange.as_mut().unwrap().restore_ended(&recorded.ended);
        assert!(!restored.inputs_ended());
        feed(&mut restored, &[(Some(b""), producer(1).end_record().headers)]);
        restored.next_batch(100, &mut Vec::new()).unwrap();
        assert!(restored.inputs_ended(), "every producer ended");
    }

    #[test]
    fn a_unit_refuses_a_checkpoint_of_another_partition() {
        let mut source = buffering(BadTimestamps::Fail, None);
        source.pinned = true;
        let theirs = serde_json::json!({ "offsets": { "other/3": 5 } });
        let error = source.seek(&theirs).unwrap_err().to_string();
        assert!(error.contains("other/3") && error.contains("t/0"), "{error}");
    }

    fn down() -> KafkaError {
        KafkaError::MessageConsumption(RDKafkaErrorCode::AllBrokersDown)
    }

    #[test]
    fn fetch_errors_of_a_broker_outage_are_ridden_out_for_the_retry_budget() {
        let mut source = unreachable(Duration::from_secs(3600));
        for _ in 0..3 {
            source.ride_out(down()).unwrap();
        }
        // Past the budget, the broker still unreachable: the source fails,
        // naming the setting to raise.
        let mut source = unreachable(Duration::from_millis(1));
        source.ride_out(down()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let error = source.ride_out(down()).unwrap_err().to_string();
        assert!(error.contains("unreachable") && error.contains("checkpoint.timeout"), "{error}");
        // Not an outage: at once.
        let mut source = unreachable(Duration::from_secs(3600));
        let other = KafkaError::MessageConsumption(RDKafkaErrorCode::OffsetOutOfRange);
        assert!(source.ride_out(other).is_err());
    }
}
