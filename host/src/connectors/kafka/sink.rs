//! The Kafka sink: at-least-once (a checkpoint completes once the broker
//! acknowledged its output) or exactly-once (one Kafka transaction per
//! checkpoint, committed when the checkpoint completes).
//!
//! # At-least-once
//!
//! Checkpoint N may complete only once every record of epochs ≤ N is
//! acknowledged, or a restore from N would skip what was lost in
//! librdkafka's queue. The sink does not flush for that (a flush stops
//! all output until the broker answered, which held each record written
//! behind a checkpoint for ~100 ms): each record's delivery report counts
//! down its epoch's records in flight, and the sink task acknowledges N
//! once [`Sink::is_durable`] says they are all delivered, writing on
//! meanwhile.
//!
//! # Exactly-once, and recovering from a crash at any instant
//!
//! librdkafka cannot resume or commit a transaction another process
//! opened, so a transaction that was pre-committed for checkpoint N but not
//! yet committed when the host died is lost: the next `init_transactions`
//! under the same transactional id aborts it. Weir therefore never relies
//! on finishing such a transaction. Instead every transaction carries
//! **evidence of what it commits, written atomically with the output**:
//! before pre-committing checkpoint N, the sink adds to the transaction
//! (`send_offsets_to_transaction`) an offset commit of the value `N` for
//! the marker group `weir-txn-<prefix>` on partition 0 of the output
//! topic. The marker becomes visible exactly when, and only if, the
//! output of checkpoint N does.
//!
//! On start-up the host first fences the pipeline's transactional ids
//! (`<prefix>-0` and `<prefix>-1`; `init_transactions` aborts what a
//! previous run left open and finishes a commit the broker had already
//! decided), then reads the marker `C`: the last snapshot whose output is
//! in Kafka. It restores **snapshot C** (a checkpoint or savepoint), not
//! simply the newest completed one. Each crash window:
//!
//! * while writing epoch N+1, or after pre-commit of N but before its
//!   metadata is written: checkpoint N is incomplete, the marker says C <
//!   N, the open transactions are aborted by the fencing; replay from C.
//! * after checkpoint N's metadata is durable, before the Kafka commit:
//!   the newest checkpoint is N but the marker still says C (the previous
//!   one; `retained` ≥ 2 keeps it, and a run keeps the checkpoint it
//!   restored until two of its own complete, so restarts killed before
//!   their first commit cannot retire it); N's transaction is aborted by the
//!   fencing; restoring C and replaying writes N's output again, once.
//! * during the commit: the broker either committed (the fencing completes
//!   it, the marker says N, restore N) or not (marker C, restore C).
//! * after the commit, before anything else is recorded: the marker says
//!   N; restore N. Nothing is written twice.
//! * a transaction the broker aborted on its own (it outlived
//!   `transaction.timeout.ms`): the commit fails, the run fails, and the
//!   restart restores C as above.
//!
//! The marker can also be lost or reset outside Weir (offsets retention
//! after a long stop, a deleted group, a renamed prefix, a recreated
//! topic): read as "nothing committed", that would silently replay or lose
//! output. So a pipeline's first run sets the marker to `0` ("nothing
//! committed yet": absent later means lost), and each snapshot's metadata
//! records the last snapshot whose commit had returned (`last_committed`);
//! a start refuses a marker that is absent while checkpoints exist, or older
//! than a recorded commit, unless told to override it (see
//! `pipeline/restore.rs`).
//!
//! A run that fails (a trapping function, a failed checkpoint, any error)
//! or ends with a transaction still open aborts it when the sink is
//! dropped: left open, it would hold back every `read_committed` reader
//! of the topic (the last stable offset) until the broker's transaction
//! timeout. A process killed outright cannot; the fencing at the next
//! start aborts its transactions. A broker outage is ridden out: flushes,
//! pre-commits and commits retry transient errors for the run's retry
//! budget (see [`super::Retry`]).
//!
//! Checkpoint N is committed with one transaction, so the marker and the
//! output are all-or-nothing. That needs at most one pre-committed
//! transaction at a time: if checkpoint N is abandoned (its timeout) after
//! the sink pre-committed it, the next pre-commit fails the run, which
//! restarts from C (Flink's default of tolerating no checkpoint failure).
//! While N waits for its commit, epoch N+1 is written by the other
//! transactional producer, so output never waits for a commit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Deserialize;

use super::exchange::{
    keyed_header, time_header, ExchangeOutput, Target, KEYED_HEADER, TIME_HEADER,
};
use super::{client_config, kafka_error, Retry, CALL_TIMEOUT};
use crate::connectors::config::{Access, ConfigError, SinkConfig, SinkMode, SinkRole};
use crate::connectors::transactional::{CommitMarker, NotExactlyOnce, TransactionalSink};
use crate::connectors::{Cancelled, ConnectorError, Sink};
use crate::formats::{Format, RecordEncoder, SchemaRegistryConfig, SinkSchema, SubjectStrategy};
use crate::names::{is_valid_name, NAME_RULE};
use crate::runtime::packed::{EventRef, PackedEvents};

/// What the sink promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// Every result at least once (after a restore, replayed results again).
    #[default]
    AtLeastOnce,
    /// Every result exactly once for `read_committed` readers.
    ExactlyOnce,
}

/// `sink: { type: kafka, … }`: where and how the sink writes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// `host:port,…`.
    pub bootstrap_servers: String,
    /// The output topic.
    pub topic: String,
    /// `at-least-once` (default) or `exactly-once` (needs checkpoints and a
    /// `transactional_id_prefix`).
    #[serde(default)]
    pub delivery: Delivery,
    /// Exactly-once: prefix of the transactional ids, unique per pipeline
    /// and stable across restarts.
    #[serde(default)]
    pub transactional_id_prefix: Option<String>,
    /// Exactly-once: `transaction.timeout.ms` (default `15m`); must exceed
    /// checkpoint interval + timeout + 1m and fit the broker's
    /// `transaction.max.timeout.ms`.
    #[serde(default = "default_transaction_timeout", with = "humantime_serde")]
    pub transaction_timeout: Duration,
    /// The broker's `transaction.max.timeout.ms` if it cannot be asked
    /// (default: ask the broker; 15m if it does not say).
    #[serde(default, with = "humantime_serde")]
    pub broker_transaction_max_timeout: Option<Duration>,
    /// librdkafka properties passed through (security, tuning).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// How events are written: `json` (default) and `raw` as they are;
    /// `avro`, `protobuf` and `json-schema` encoded from each event's JSON
    /// against the subject's schema in `schema_registry`, in the
    /// registry's wire format (see [`crate::formats`]).
    #[serde(default)]
    pub format: Format,
    /// The schema registry of a registry `format`.
    #[serde(default)]
    pub schema_registry: Option<SchemaRegistryConfig>,
    /// The schema's text (Avro JSON, a `.proto` file, a JSON Schema),
    /// registered under the subject at start — the sink does not start
    /// when the registry refuses it as incompatible, and says why.
    /// Without it the sink writes with the subject's latest schema.
    #[serde(default)]
    pub schema: Option<String>,
    /// The subject the schema is under: `topic-name` (`<topic>-value`,
    /// the default), `record-name` or `topic-record-name`.
    #[serde(default)]
    pub subject_name_strategy: SubjectStrategy,
    /// The record's full name where the schema does not give it (the
    /// record-name strategies without `schema`; the Protobuf message to
    /// write when not the schema's first).
    #[serde(default)]
    pub record_name: Option<String>,
    /// Set by a cluster plan, never in a spec: the topic is an exchange to
    /// the tasks of a keyed stage (see [`super::exchange`]).
    #[serde(skip)]
    pub exchange: Option<ExchangeOutput>,
    /// Set by a cluster plan, never in a spec: the record a drained stop
    /// writes in its final transaction, saying the unit has ended.
    #[serde(skip)]
    pub drained: Option<Box<DrainedRecord>>,
    /// Set by a cluster plan, never in a spec: where the commit marker
    /// lives when not on the sink's topic (see [`MarkerPlace`]).
    #[serde(skip)]
    pub marker: Option<Box<MarkerPlace>>,
}

/// Where an exactly-once sink keeps its commit marker (the marker group's
/// offset on partition 0 of a topic) when its own topic is not stable: a
/// cluster ingest unit outlives the exchange topics it writes (a new
/// layout names them anew), so its marker lives on its input topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerPlace {
    /// The topic the marker is written to.
    pub topic: String,
    /// Where it was written before, read when `topic` has none yet.
    pub fallback: Option<String>,
}

/// Where an exactly-once sink writes a cluster unit's drained record in a
/// drained stop's transaction: keyed by the unit (the topic is compacted),
/// its value a [`Drained`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainedRecord {
    /// The topic (the plan's units topic).
    pub topic: String,
    /// Its partition (the unit's).
    pub partition: i32,
    /// The unit.
    pub unit: String,
}

/// What a drained record says: `unit` ended with snapshot `snapshot`, the
/// last it takes; nothing it writes comes after that snapshot's output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Drained {
    /// The unit.
    pub unit: String,
    /// Its final snapshot's id.
    pub snapshot: u64,
}

fn default_transaction_timeout() -> Duration {
    Duration::from_secs(15 * 60)
}

impl SinkConfig for KafkaSinkConfig {
    fn validate(&self, role: SinkRole) -> Result<(), ConfigError> {
        super::check_properties(&self.properties)?;
        crate::connectors::record_format::check_format(self.format, self.schema_registry.as_ref())?;
        if !self.format.uses_registry() {
            for (field, given) in [
                ("schema", self.schema.is_some()),
                ("record_name", self.record_name.is_some()),
                ("subject_name_strategy", self.subject_name_strategy != SubjectStrategy::default()),
            ] {
                if given {
                    return Err(ConfigError::new(
                        field,
                        format!("format {} has no schema: give format avro, protobuf or json-schema, or remove {field}", self.format.name()),
                    ));
                }
            }
        }
        if self.delivery != Delivery::ExactlyOnce {
            return Ok(());
        }
        if role == SinkRole::SideOutput {
            return Err(ConfigError::new(
                "delivery",
                "only the main sink can be exactly-once Kafka; side outputs to Kafka are at-least-once",
            ));
        }
        match &self.transactional_id_prefix {
            None => Err(ConfigError::new(
                "transactional_id_prefix",
                "exactly-once delivery needs a transactional_id_prefix, unique to this pipeline",
            )),
            Some(prefix) if !is_valid_name(prefix) => Err(ConfigError::new(
                "transactional_id_prefix",
                format!("{prefix:?} must be {NAME_RULE}"),
            )),
            Some(_) => Ok(()),
        }
    }

    fn host_access(&self) -> Vec<Access> {
        super::host_access(&self.bootstrap_servers, &self.properties, self.schema_registry.as_ref())
    }

    fn takes_keys(&self) -> bool {
        self.exchange.as_ref().is_some_and(|exchange| !exchange.broadcast)
    }

    fn open(&self, _mode: SinkMode) -> Result<Box<dyn Sink>, ConnectorError> {
        Ok(Box::new(KafkaSink::open(self)?))
    }

    fn transactional(&self) -> Option<&dyn TransactionalSink> {
        (self.delivery == Delivery::ExactlyOnce).then_some(self as &dyn TransactionalSink)
    }
}

/// Kafka's side of the exactly-once contract: the rules of
/// [`exactly_once`](super::exactly_once), the transactional ids fenced at
/// start-up, and the commit marker (the marker group's offset on partition
/// 0 of the output topic, committed in each checkpoint's transaction).
impl TransactionalSink for KafkaSinkConfig {
    fn check_settings(
        &self,
        settings: Option<&crate::checkpoint::CheckpointSettings>,
        pipeline: &str,
        data_dir: &std::path::Path,
    ) -> Result<(), NotExactlyOnce> {
        super::check_exactly_once(self, settings, pipeline, data_dir)
            .map_err(|error| NotExactlyOnce(Box::new(error)))
    }

    fn committed(&self) -> Result<CommitMarker, ConnectorError> {
        committed_checkpoint(self)
    }

    fn set_committed(&self, id: u64) -> Result<(), ConnectorError> {
        set_commit_marker(self, id)
    }

    fn marker_name(&self) -> Result<String, ConnectorError> {
        let (group, topic) = commit_marker_location(self)?;
        Ok(format!("the Kafka commit marker (consumer group {group} on topic {topic} partition 0)"))
    }
}

impl KafkaSinkConfig {
    /// The topic whose partition 0 holds the commit marker.
    fn marker_topic(&self) -> &str {
        self.marker.as_ref().map_or(&self.topic, |m| &m.topic)
    }

    /// The two transactional ids and the marker group of exactly-once.
    fn transactional(&self) -> Result<([String; 2], String), ConnectorError> {
        let prefix =
            self.transactional_id_prefix.as_deref().ok_or_else(|| ConnectorError::Config {
                what: "sink.transactional_id_prefix".into(),
                message:
                    "exactly-once delivery needs a transactional_id_prefix, unique to this pipeline"
                        .into(),
            })?;
        Ok(([format!("{prefix}-0"), format!("{prefix}-1")], format!("weir-txn-{prefix}")))
    }

    /// The metadata of the marker consumer `group`, which transactions
    /// commit the marker for.
    fn marker_group(
        &self,
        group: &str,
    ) -> Result<rdkafka::consumer::ConsumerGroupMetadata, ConnectorError> {
        let reader: BaseConsumer =
            client_config(&self.bootstrap_servers, &[("group.id", group)], &self.properties)
                .create()
                .map_err(kafka_error("creating the marker group"))?;
        reader.group_metadata().ok_or_else(|| ConnectorError::Kafka {
            what: "the marker group".into(),
            message: "no group metadata".into(),
        })
    }

    fn producer(
        &self,
        transactional_id: Option<&str>,
    ) -> Result<BaseProducer<Deliveries>, ConnectorError> {
        let timeout = self.transaction_timeout.as_millis().to_string();
        let mut ours = PRODUCER_SETTINGS.to_vec();
        if let Some(id) = transactional_id {
            ours.push(("transactional.id", id));
            ours.push(("transaction.timeout.ms", timeout.as_str()));
        }
        client_config(&self.bootstrap_servers, &ours, &self.properties)
            .create_with_context(Deliveries::default())
            .map_err(kafka_error("creating the producer"))
    }
}

/// The librdkafka settings of every producer of the sink (a spec's
/// `properties` may change the tuning ones): idempotent, LZ4, 5 ms linger.
pub const PRODUCER_SETTINGS: [(&str, &str); 3] =
    [("enable.idempotence", "true"), ("linger.ms", "5"), ("compression.type", "lz4")];

/// How many epochs' records in flight a sink tells apart: each record's
/// delivery report names its epoch's slot, `epoch % EPOCH_SLOTS`.
const EPOCH_SLOTS: usize = 8;

/// Counts delivery reports, records in flight by epoch slot, and
/// remembers the first failed delivery, so a flush can report it.
#[derive(Default)]
struct Deliveries {
    first: Mutex<Option<String>>,
    reports: AtomicU64,
    /// Records sent and not yet reported, per epoch slot.
    in_flight: [AtomicI64; EPOCH_SLOTS],
}

impl Deliveries {
    /// The slot that counts epoch `epoch`'s records.
    fn slot(epoch: u64) -> usize {
        (epoch % EPOCH_SLOTS as u64) as usize
    }

    /// Records of `slot` sent and not yet reported.
    fn in_flight(&self, slot: usize) -> i64 {
        self.in_flight[slot].load(Ordering::Relaxed)
    }
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// The epoch slot of the record.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: usize) {
        self.reports.fetch_add(1, Ordering::Relaxed);
        self.in_flight[slot].fetch_sub(1, Ordering::Relaxed);
        if let Err((error, _)) = result {
            if let Ok(mut first) = self.first.lock() {
                first.get_or_insert_with(|| error.to_string());
            }
        }
    }
}

impl super::CountsDeliveries for Deliveries {
    fn reports(&self) -> u64 {
        self.reports.load(Ordering::Relaxed)
    }
}

/// Where an exactly-once sink's commit marker lives: `(group, topic)`; the
/// marker is the group's offset on partition 0 of the topic.
fn commit_marker_location(config: &KafkaSinkConfig) -> Result<(String, String), ConnectorError> {
    Ok((config.transactional()?.1, config.marker_topic().to_string()))
}

/// Fence the exactly-once sink's transactional ids (aborting what a dead
/// run left open), then read which snapshot's output Kafka holds: the
/// marker written atomically with it.
fn committed_checkpoint(config: &KafkaSinkConfig) -> Result<CommitMarker, ConnectorError> {
    let (ids, group) = config.transactional()?;
    let producers = [config.producer(Some(&ids[0]))?, config.producer(Some(&ids[1]))?];
    init_transactions(&producers, &ids, "fencing")?;
    for (id, producer) in ids.iter().zip(producers) {
        Fenced::keep(config, id, producer);
    }
    let consumer: BaseConsumer = client_config(
        &config.bootstrap_servers,
        &[("group.id", group.as_str()), ("enable.auto.commit", "false")],
        &config.properties,
    )
    .create()
    .map_err(kafka_error("creating the marker reader"))?;
    let fallback = config.marker.as_ref().and_then(|m| m.fallback.as_deref());
    for topic in std::iter::once(config.marker_topic()).chain(fallback) {
        let mut list = TopicPartitionList::new();
        list.add_partition(topic, 0);
        let committed = consumer
            .committed_offsets(list, CALL_TIMEOUT)
            .map_err(kafka_error(format!("reading the commit marker of group {group}")))?;
        if let Some(Offset::Offset(id)) = committed.find_partition(topic, 0).map(|e| e.offset()) {
            if id >= 0 {
                return Ok(CommitMarker::At(id as u64));
            }
        }
    }
    Ok(CommitMarker::Absent)
}

/// Transactional producers whose ids were fenced (initialised) in this
/// process and not used since, by bootstrap servers and transactional id:
/// the next user of the same id (the marker's setter, the sink) takes one
/// instead of initialising a new producer again, which cost each
/// exactly-once start about half a second. Initialising another producer
/// of the id would fence the kept one, and only these functions make
/// Weir's transactional producers.
struct Fenced;

static FENCED: Mutex<BTreeMap<(String, String), BaseProducer<Deliveries>>> =
    Mutex::new(BTreeMap::new());

impl Fenced {
    /// Keep `producer`, initialised for transactional id `id` and idle.
    fn keep(config: &KafkaSinkConfig, id: &str, producer: BaseProducer<Deliveries>) {
        let key = (config.bootstrap_servers.clone(), id.to_string());
        FENCED.lock().unwrap_or_else(PoisonError::into_inner).insert(key, producer);
    }

    /// The kept producer of `id`, if any.
    fn take(config: &KafkaSinkConfig, id: &str) -> Option<BaseProducer<Deliveries>> {
        let key = (config.bootstrap_servers.clone(), id.to_string());
        FENCED.lock().unwrap_or_else(PoisonError::into_inner).remove(&key)
    }
}

/// `init_transactions` on both producers at once: after a crash the broker
/// first aborts what each id left open, and librdkafka retries each id
/// every 500 ms meanwhile, so doing them one after the other doubled the
/// time a restart waits.
fn init_transactions(
    producers: &[BaseProducer<Deliveries>; 2],
    ids: &[String; 2],
    doing: &str,
) -> Result<(), ConnectorError> {
    std::thread::scope(|scope| {
        let calls = producers
            .iter()
            .zip(ids)
            .map(|(producer, id)| {
                scope.spawn(move || {
                    producer
                        .init_transactions(CALL_TIMEOUT)
                        .map_err(kafka_error(format!("{doing} transactional id {id}")))
                })
            })
            .collect::<Vec<_>>();
        calls.into_iter().try_for_each(|call| {
            call.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// The commit marker's value `id` as an offset commit: partition 0 of the
/// output `topic`.
fn marker_offsets(topic: &str, id: u64) -> Result<TopicPartitionList, ConnectorError> {
    let mut marker = TopicPartitionList::new();
    marker
        .add_partition_offset(topic, 0, Offset::Offset(id as i64))
        .map_err(kafka_error("building the commit marker"))?;
    Ok(marker)
}

/// Set the commit marker to `id` (`0`: nothing committed yet) in a
/// transaction of its own, committed at once. Used when a pipeline first
/// starts, so that a marker found absent later means it was lost, and
/// when a start accepts a marker that disagrees with the checkpoints.
fn set_commit_marker(config: &KafkaSinkConfig, id: u64) -> Result<(), ConnectorError> {
    let (ids, group) = config.transactional()?;
    let producer = match Fenced::take(config, &ids[0]) {
        Some(producer) => producer,
        None => {
            let producer = config.producer(Some(&ids[0]))?;
            producer
                .init_transactions(CALL_TIMEOUT)
                .map_err(kafka_error(format!("initialising transactional id {}", ids[0])))?;
            producer
        }
    };
    let metadata = config.marker_group(&group)?;
    let marker = marker_offsets(config.marker_topic(), id)?;
    let what = format!("setting the commit marker of group {group} to {id}");
    producer.begin_transaction().map_err(kafka_error(what.clone()))?;
    producer
        .send_offsets_to_transaction(&marker, &metadata, CALL_TIMEOUT)
        .map_err(kafka_error(what.clone()))?;
    producer.commit_transaction(CALL_TIMEOUT).map_err(kafka_error(what))?;
    tracing::info!(group, id, "commit marker set");
    Fenced::keep(config, &ids[0], producer);
    Ok(())
}

/// How long the sink waits for the broker to abort a transaction when the
/// sink is dropped (the fencing at the next start aborts it otherwise).
const ABORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes events to a Kafka topic.
pub struct KafkaSink {
    topic: String,
    /// Encodes a registry format's records, with its reused buffer.
    encoding: Option<Encoding>,
    mode: Mode,
    retry: Retry,
    /// An exchange topic: where each record goes, and its partitions.
    exchange: Option<(ExchangeOutput, i32)>,
    /// What a drained stop writes besides an exchange's ends.
    drained: Option<Box<DrainedRecord>>,
    /// Where the commit marker is written.
    marker_topic: String,
}

enum Mode {
    AtLeastOnce(AtLeastOnce),
    ExactlyOnce(Transactions),
}

impl Mode {
    /// The open producer of `epoch` (the at-least-once one, its slot
    /// claimed, or epoch's transactional one).
    fn producer_for(
        &mut self,
        epoch: u64,
        topic: &str,
        retry: &Retry,
    ) -> Result<&BaseProducer<Deliveries>, ConnectorError> {
        match self {
            Mode::AtLeastOnce(once) => {
                once.claim(epoch, topic, retry)?;
                Ok(&once.producer)
            }
            Mode::ExactlyOnce(transactions) => transactions.for_epoch(epoch),
        }
    }
}

/// The at-least-once producer, and which epoch each slot of its records
/// in flight counts.
struct AtLeastOnce {
    producer: BaseProducer<Deliveries>,
    /// The epoch whose records each slot counts (`None`: free).
    slots: [Option<u64>; EPOCH_SLOTS],
}

impl AtLeastOnce {
    /// Make `epoch`'s slot count its records. A slot still counting an
    /// older epoch's records (more epochs in flight than slots) is freed by
    /// flushing everything first.
    fn claim(&mut self, epoch: u64, topic: &str, retry: &Retry) -> Result<(), ConnectorError> {
        let slot = Deliveries::slot(epoch);
        match self.slots[slot] {
            Some(held) if held == epoch => return Ok(()),
            Some(_) if self.producer.context().in_flight(slot) > 0 => {
                flush(&self.producer, topic, retry)?;
                self.slots = [None; EPOCH_SLOTS];
            }
            _ => {}
        }
        self.slots[slot] = Some(epoch);
        Ok(())
    }

    /// Whether the broker acknowledged every record of epochs ≤
    /// `checkpoint` (serving the delivery reports waiting first); a failed
    /// delivery is an error.
    fn delivered_through(&mut self, checkpoint: u64, topic: &str) -> Result<bool, ConnectorError> {
        super::serve_deliveries(&self.producer);
        delivery_failure(&self.producer, topic)?;
        let context = self.producer.context();
        let mut delivered = true;
        for (slot, epoch) in self.slots.iter_mut().enumerate() {
            match *epoch {
                Some(_) if context.in_flight(slot) == 0 => *epoch = None,
                Some(held) if held <= checkpoint => delivered = false,
                _ => {}
            }
        }
        Ok(delivered)
    }
}

/// The exactly-once machinery: two transactional producers (their
/// delivery reports served by the sink's thread), epoch `e` written by
/// producer `e % 2`.
struct Transactions {
    producers: [BaseProducer<Deliveries>; 2],
    /// The epoch whose transaction each producer has open.
    open: [Option<u64>; 2],
    /// The transaction pre-committed for a checkpoint: (checkpoint, producer).
    sealed: Option<(u64, usize)>,
    marker_group: rdkafka::consumer::ConsumerGroupMetadata,
}

impl KafkaSink {
    /// Connect; for exactly-once, fence the transactional ids first.
    pub fn open(config: &KafkaSinkConfig) -> Result<Self, ConnectorError> {
        // The schema first: a sink the registry refuses starts nothing.
        let encoding = Encoding::open(config)?;
        let mode = match config.delivery {
            Delivery::AtLeastOnce => Mode::AtLeastOnce(AtLeastOnce {
                producer: config.producer(None)?,
                slots: [None; EPOCH_SLOTS],
            }),
            Delivery::ExactlyOnce => {
                let (ids, group) = config.transactional()?;
                let producers = match (Fenced::take(config, &ids[0]), Fenced::take(config, &ids[1]))
                {
                    (Some(first), Some(second)) => [first, second],
                    _ => {
                        let producers =
                            [config.producer(Some(&ids[0]))?, config.producer(Some(&ids[1]))?];
                        init_transactions(&producers, &ids, "initialising")?;
                        producers
                    }
                };
                let marker_group = config.marker_group(&group)?;
                Mode::ExactlyOnce(Transactions {
                    producers,
                    open: [None, None],
                    sealed: None,
                    marker_group,
                })
            }
        };
        let exchange = match &config.exchange {
            Some(exchange) => Some((exchange.clone(), partition_count(config)?)),
            None => None,
        };
        Ok(Self {
            topic: config.topic.clone(),
            encoding,
            mode,
            retry: Retry::default(),
            exchange,
            drained: config.drained.clone(),
            marker_topic: config.marker_topic().to_string(),
        })
    }
}

/// How many partitions the sink's topic has (an exchange topic: as many as
/// the tasks it feeds, or the plan and the topic disagree).
fn partition_count(config: &KafkaSinkConfig) -> Result<i32, ConnectorError> {
    let reader: BaseConsumer = client_config(&config.bootstrap_servers, &[], &config.properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    let topic = &config.topic;
    let partitions = super::topic_partitions(&reader, topic)?.len();
    let tasks = config.exchange.as_ref().map_or(0, |e| usize::from(e.tasks));
    if partitions != tasks {
        return Err(ConnectorError::Config {
            what: format!("exchange topic {topic}"),
            message: format!("has {partitions} partitions, the stage it feeds {tasks} tasks: delete the topic (after stopping every worker) or give the stage its old parallelism"),
        });
    }
    Ok(partitions as i32)
}

/// A sink's encoder of a registry format, and the buffer each record is
/// encoded into.
struct Encoding {
    encoder: RecordEncoder,
    buffer: Vec<u8>,
}

impl Encoding {
    /// The encoder of `config`'s format (none for JSON and raw), its
    /// schema registered or looked up now.
    fn open(config: &KafkaSinkConfig) -> Result<Option<Self>, ConnectorError> {
        let Some(registry) =
            config.schema_registry.as_ref().filter(|_| config.format.uses_registry())
        else {
            return Ok(None);
        };
        let sink = SinkSchema {
            format: config.format,
            registry,
            topic: &config.topic,
            schema: config.schema.as_deref(),
            strategy: config.subject_name_strategy,
            record: config.record_name.as_deref(),
        };
        let encoder = RecordEncoder::open(&sink).map_err(|message| ConnectorError::Config {
            what: format!("kafka sink {} format {}", config.topic, config.format.name()),
            message,
        })?;
        tracing::info!(
            topic = config.topic,
            format = config.format.name(),
            schema_id = encoder.schema_id(),
            "kafka sink writes with the registered schema"
        );
        Ok(Some(Self { encoder, buffer: Vec::new() }))
    }

    /// `event` with its value encoded (into the buffer).
    fn encode<'a>(
        &'a mut self,
        topic: &str,
        event: EventRef<'a>,
    ) -> Result<EventRef<'a>, ConnectorError> {
        if let Err(reason) = self.encoder.encode(event.value, &mut self.buffer) {
            let shown =
                String::from_utf8_lossy(&event.value[..event.value.len().min(200)]).into_owned();
            return Err(ConnectorError::BadRecord {
                location: format!("output to {topic}"),
                message: format!(
                    "an event does not fit the sink's schema ({reason}); the event: {shown}"
                ),
            });
        }
        Ok(EventRef { value: &self.buffer, ..event })
    }
}

/// Send every event of `epoch`, waiting for queue space when librdkafka's
/// buffer is full (encoding each first when the sink has a registry
/// format).
fn produce(
    producer: &BaseProducer<Deliveries>,
    topic: &str,
    epoch: u64,
    events: &PackedEvents,
    exchange: Option<&(ExchangeOutput, i32)>,
    mut encoding: Option<&mut Encoding>,
    cancelled: &dyn Fn() -> bool,
) -> Result<(), ConnectorError> {
    // The value of the header an exchange record ends with, reused.
    let mut stamp = Vec::new();
    let routes = events.routes();
    for (index, event) in events.iter().enumerate() {
        let Some((exchange, partitions)) = exchange else {
            let to = Destination { topic, epoch, partition: None, stamp: None };
            let event = match encoding.as_deref_mut() {
                Some(encoding) => encoding.encode(topic, event)?,
                None => event,
            };
            send(producer, to, event, event.headers, cancelled)?;
            continue;
        };
        let routed = exchange.target(event, routes.map(|keys| keys.get(index)))?;
        let name = match routed.key {
            Some(key) => {
                keyed_header(event.timestamp, key, &mut stamp);
                KEYED_HEADER
            }
            None => {
                stamp.clear();
                stamp.extend_from_slice(&time_header(event.timestamp));
                TIME_HEADER
            }
        };
        let to = |partition| Destination {
            topic,
            epoch,
            partition: Some(partition),
            stamp: Some((name, stamp.as_slice())),
        };
        match routed.target {
            Target::Partition(partition) => {
                send(producer, to(partition), event, routed.headers, cancelled)?
            }
            Target::All => {
                for partition in 0..*partitions {
                    send(producer, to(partition), event, routed.headers, cancelled)?;
                }
            }
        }
    }
    super::serve_deliveries(producer);
    Ok(())
}

/// Where one record goes.
#[derive(Clone, Copy)]
struct Destination<'a> {
    topic: &'a str,
    /// The epoch whose records in flight count it.
    epoch: u64,
    /// The partition, else where the key hashes.
    partition: Option<i32>,
    /// A header the sink adds last (an exchange topic's event time and
    /// key, see [`super::exchange`]).
    stamp: Option<(&'a str, &'a [u8])>,
}

/// Send one record, waiting for queue space when librdkafka's buffer is
/// full; it counts as in flight until its delivery report.
fn send(
    producer: &BaseProducer<Deliveries>,
    to: Destination<'_>,
    event: EventRef<'_>,
    headers: &[(String, Vec<u8>)],
    cancelled: &dyn Fn() -> bool,
) -> Result<(), ConnectorError> {
    let Destination { topic, epoch, partition, stamp } = to;
    let slot = Deliveries::slot(epoch);
    let mut record: BaseRecord<'_, [u8], [u8], usize> =
        BaseRecord::with_opaque_to(topic, slot).payload(event.value);
    // librdkafka allocates a header list even when empty: only when needed.
    if !headers.is_empty() || stamp.is_some() {
        let mut owned = OwnedHeaders::new_with_capacity(headers.len() + 1);
        for (key, value) in headers {
            owned = owned.insert(Header { key, value: Some(value) });
        }
        if let Some((key, value)) = stamp {
            owned = owned.insert(Header { key, value: Some(value) });
        }
        record = record.headers(owned);
    }
    if let Some(key) = event.key {
        record = record.key(key);
    }
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    if event.timestamp > 0 {
        record = record.timestamp(event.timestamp);
    }
    let in_flight = &producer.context().in_flight[slot];
    in_flight.fetch_add(1, Ordering::Relaxed);
    super::send_waiting(producer, record, Duration::from_millis(5), cancelled).map_err(|error| {
        in_flight.fetch_sub(1, Ordering::Relaxed);
        let message = match error {
            rdkafka::error::KafkaError::Canceled => "the run was cancelled while the producer's queue was full (the broker took no records)".to_string(),
            error => error.to_string(),
        };
        failed(producer, format!("producing to {topic}"), message)
    })
}

/// Wait until everything sent is acknowledged (through a broker outage
/// within `retry`'s budget); report a failed delivery.
fn flush(
    producer: &BaseProducer<Deliveries>,
    topic: &str,
    retry: &Retry,
) -> Result<(), ConnectorError> {
    retry
        .call(|| format!("flushing {topic}"), |timeout| super::flush_promptly(producer, timeout))?;
    delivery_failure(producer, topic)
}

/// The first failed delivery reported since the last call, as an error.
fn delivery_failure(
    producer: &BaseProducer<Deliveries>,
    topic: &str,
) -> Result<(), ConnectorError> {
    match producer.context().first.lock().ok().and_then(|mut e| e.take()) {
        Some(message) => Err(failed(producer, format!("delivering to {topic}"), message)),
        None => Ok(()),
    }
}

/// A producer's failure, with librdkafka's reason when the producer can no
/// longer be used (its transaction aborted by the broker, or fenced).
fn failed(producer: &BaseProducer<Deliveries>, what: String, message: String) -> ConnectorError {
    let message = match producer.client().fatal_error() {
        Some((_, reason)) => format!(
            "{message}: {reason} (the broker aborted this run's transaction because it outlived sink.transaction_timeout, or a newer process with the same transactional_id_prefix fenced it; a restart restores the last committed checkpoint)"
        ),
        None => message,
    };
    ConnectorError::Kafka { what, message }
}

impl Transactions {
    /// The producer for `epoch`, with its transaction begun.
    fn for_epoch(&mut self, epoch: u64) -> Result<&BaseProducer<Deliveries>, ConnectorError> {
        let slot = (epoch % 2) as usize;
        match self.open[slot] {
            Some(open) if open == epoch => {}
            Some(open) => {
                return Err(ConnectorError::Kafka {
                    what: "exactly-once sink".into(),
                    message: format!(
                        "epoch {epoch} needs the producer still holding epoch {open}'s transaction"
                    ),
                })
            }
            None => {
                tracing::debug!(epoch, slot, "kafka sink begins a transaction");
                self.producers[slot]
                    .begin_transaction()
                    .map_err(kafka_error(format!("beginning the transaction of epoch {epoch}")))?;
                self.open[slot] = Some(epoch);
            }
        }
        Ok(&self.producers[slot])
    }
}

impl Sink for KafkaSink {
    fn write(&mut self, epoch: u64, events: &PackedEvents) -> Result<(), ConnectorError> {
        if events.is_empty() {
            return Ok(());
        }
        let retry = &self.retry;
        let producer = self.mode.producer_for(epoch, &self.topic, retry)?;
        let cancelled = || retry.is_cancelled();
        let encoding = self.encoding.as_mut();
        produce(
            producer,
            &self.topic,
            epoch,
            events,
            self.exchange.as_ref(),
            encoding,
            &cancelled,
        )?;
        if matches!(self.mode, Mode::ExactlyOnce(_)) {
            crate::fault::point("kafka-after-write");
        }
        Ok(())
    }

    /// An exchange topic gets the epoch's event time in a control record to
    /// every partition, in the epoch's transaction.
    fn watermark(&mut self, epoch: u64, watermark: Option<i64>) -> Result<(), ConnectorError> {
        let Some((exchange, partitions)) = &self.exchange else { return Ok(()) };
        let record = exchange.control_record(watermark);
        let topic = &self.topic;
        let producer = self.mode.producer_for(epoch, topic, &self.retry)?;
        for partition in 0..*partitions {
            let to = Destination { topic, epoch, partition: Some(partition), stamp: None };
            send(producer, to, (&record).into(), &record.headers, &|| self.retry.is_cancelled())?;
        }
        Ok(())
    }

    /// A drained stop: an exchange topic gets this producer's end in a
    /// control record to every partition, and the drained record is
    /// written, both in the final checkpoint's transaction — so they are
    /// visible exactly when its output is, and never before the last of it.
    fn drain(&mut self, epoch: u64) -> Result<(), ConnectorError> {
        if !matches!(self.mode, Mode::ExactlyOnce(_)) {
            return Ok(());
        }
        let topic = &self.topic;
        let producer = self.mode.producer_for(epoch, topic, &self.retry)?;
        if let Some((exchange, partitions)) = &self.exchange {
            let record = exchange.end_record();
            for partition in 0..*partitions {
                let to = Destination { topic, epoch, partition: Some(partition), stamp: None };
                send(producer, to, (&record).into(), &record.headers, &|| {
                    self.retry.is_cancelled()
                })?;
            }
        }
        if let Some(drained) = &self.drained {
            let value = Drained { unit: drained.unit.clone(), snapshot: epoch };
            let record = crate::Event {
                key: Some(drained.unit.as_bytes().to_vec()),
                value: serde_json::to_vec(&value).unwrap_or_default(),
                timestamp: crate::clock::now_millis(),
                headers: Vec::new(),
            };
            let to = Destination {
                topic: &drained.topic,
                epoch,
                partition: Some(drained.partition),
                stamp: None,
            };
            send(producer, to, (&record).into(), &record.headers, &|| self.retry.is_cancelled())?;
        }
        crate::fault::point("drain-after-ends");
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ConnectorError> {
        match &self.mode {
            Mode::AtLeastOnce(once) => flush(&once.producer, &self.topic, &self.retry),
            // Only a completed checkpoint makes exactly-once output visible.
            Mode::ExactlyOnce(_) => Ok(()),
        }
    }

    /// Epoch `e + 1` goes through the other producer: without delivering
    /// `e`'s queued records first, the broker could append some of them
    /// after the input's next records, and a key's results would be out of
    /// order in the topic (nothing lost or doubled, but reordered).
    fn end_of_epoch(&mut self, epoch: u64) -> Result<(), ConnectorError> {
        let Mode::ExactlyOnce(transactions) = &self.mode else { return Ok(()) };
        let slot = (epoch % 2) as usize;
        if transactions.open[slot] == Some(epoch) {
            flush(&transactions.producers[slot], &self.topic, &self.retry)?;
        }
        Ok(())
    }

    fn visible_when_written(&self) -> bool {
        matches!(self.mode, Mode::AtLeastOnce(_))
    }

    fn pre_commit(&mut self, checkpoint: u64) -> Result<serde_json::Value, ConnectorError> {
        let transactions = match &mut self.mode {
            // Delivered in the background: see `is_durable`.
            Mode::AtLeastOnce(_) => return Ok(serde_json::Value::Null),
            Mode::ExactlyOnce(transactions) => transactions,
        };
        if let Some((pending, _)) = transactions.sealed {
            return Err(ConnectorError::Kafka {
                what: "exactly-once sink".into(),
                message: format!("checkpoint {pending} was pre-committed but never completed; restarting from the last committed checkpoint"),
            });
        }
        if let Some(stale) = transactions.open.iter().flatten().find(|&&epoch| epoch < checkpoint) {
            return Err(ConnectorError::Kafka {
                what: "exactly-once sink".into(),
                message: format!("epoch {stale} is still open at checkpoint {checkpoint}"),
            });
        }
        // The marker goes into checkpoint N's transaction (begun here if the
        // epoch wrote nothing): it is visible exactly when the output is.
        transactions.for_epoch(checkpoint)?;
        let producer = &transactions.producers[(checkpoint % 2) as usize];
        let marker = marker_offsets(&self.marker_topic, checkpoint)?;
        let group = &transactions.marker_group;
        self.retry.call(
            || format!("adding the marker of checkpoint {checkpoint}"),
            |timeout| producer.send_offsets_to_transaction(&marker, group, timeout),
        )?;
        flush(producer, &self.topic, &self.retry)?;
        transactions.sealed = Some((checkpoint, (checkpoint % 2) as usize));
        tracing::debug!(checkpoint, "kafka sink pre-committed");
        crate::fault::point("kafka-after-pre-commit");
        Ok(serde_json::json!({ "checkpoint": checkpoint }))
    }

    /// At-least-once: whether the broker acknowledged every record of
    /// epochs ≤ `checkpoint`; exactly-once: the pre-commit flushed them.
    fn is_durable(&mut self, checkpoint: u64) -> Result<bool, ConnectorError> {
        match &mut self.mode {
            Mode::AtLeastOnce(once) => once.delivered_through(checkpoint, &self.topic),
            Mode::ExactlyOnce(_) => Ok(true),
        }
    }

    fn commit(&mut self, checkpoint: u64) -> Result<(), ConnectorError> {
        let transactions = match &mut self.mode {
            Mode::AtLeastOnce(_) => {
                crate::fault::point("kafka-at-least-once-complete");
                return Ok(());
            }
            Mode::ExactlyOnce(transactions) => transactions,
        };
        let Some((sealed, slot)) = transactions.sealed.filter(|(sealed, _)| *sealed <= checkpoint)
        else {
            return Ok(());
        };
        crate::fault::point("kafka-before-commit");
        let producer = &transactions.producers[slot];
        self.retry.call(
            || format!("committing checkpoint {sealed}"),
            |timeout| producer.commit_transaction(timeout),
        )?;
        tracing::debug!(checkpoint = sealed, "kafka sink committed");
        crate::fault::point("kafka-after-commit");
        transactions.open[slot] = None;
        transactions.sealed = None;
        Ok(())
    }

    fn set_retry_budget(&mut self, budget: Duration) {
        self.retry = Retry { budget, ..self.retry.clone() };
    }

    fn set_cancelled(&mut self, cancelled: Cancelled) {
        self.retry = self.retry.clone().cancelled_by(cancelled);
    }
}

/// Abort `producer`'s open transaction. The abort waits until every
/// record it purges is reported, and only a poll serves those reports:
/// this thread serves them while another one waits for the abort.
fn abort_serving(producer: &BaseProducer<Deliveries>) -> rdkafka::error::KafkaResult<()> {
    std::thread::scope(|scope| {
        let abort = scope.spawn(|| producer.abort_transaction(ABORT_TIMEOUT));
        while !abort.is_finished() {
            producer.poll(Duration::from_millis(10));
        }
        abort.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Drop for Transactions {
    /// Abort the transactions still open: their output can never be
    /// committed (no process can resume them), and left open they hold
    /// back every `read_committed` reader until the broker times them out.
    fn drop(&mut self) {
        for (slot, epoch) in self.open.iter().enumerate() {
            let Some(epoch) = epoch else { continue };
            match abort_serving(&self.producers[slot]) {
                Ok(()) => tracing::info!(epoch, "kafka sink aborted the open transaction"),
                Err(error) => {
                    tracing::warn!(epoch, %error, "cannot abort the open transaction; the fencing at the next start aborts it")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_stops_waiting_once_the_run_is_cancelled() {
        // No broker: what is queued stays queued, and a queue of one
        // record is full after the first.
        let producer: BaseProducer<Deliveries> = client_config(
            "127.0.0.1:1",
            &[("queue.buffering.max.messages", "1")],
            &BTreeMap::new(),
        )
        .create_with_context(Deliveries::default())
        .unwrap();
        let event = EventRef { key: None, value: b"order", timestamp: 0, headers: &[] };
        let to = Destination { topic: "orders", epoch: 0, partition: Some(0), stamp: None };
        send(&producer, to, event, &[], &|| false).unwrap();
        assert_eq!(producer.context().in_flight(0), 1);
        let error = send(&producer, to, event, &[], &|| true).unwrap_err().to_string();
        assert!(
            error.contains("the run was cancelled while the producer's queue was full"),
            "{error}"
        );
        assert_eq!(producer.context().in_flight(0), 1, "the refused record is not counted");
    }
}
