//! A real Apache Kafka broker for the integration tests: [`TestKafka`],
//! and the Kafka helpers several areas share ([`unique`] names,
//! [`produce_orders`], [`committed_per_key`]).
//!
//! [`TestKafka::start`] uses the broker [`shared_bootstrap`] finds: the one
//! named by `WEIR_TEST_KAFKA_BOOTSTRAP` (`scripts/dev test` starts one and
//! sets it), else it starts the shared broker itself with
//! [`weir_devkit::kafka`] (its log directory under
//! `~/.cache/weir/kafka/broker`; kept running for later runs).
//! [`TestKafka::dedicated`] starts a broker of the test's own, on its own
//! log directory and ports with the broker configs the test gives, which
//! the test may kill (`kill -9`) and start again ([`TestKafka::restart`]);
//! it dies with the test, however the test ends.
//!
//! Every method blocks; the helpers use `rdkafka` (librdkafka) as clients,
//! so what they see is what Weir's sink and source see.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use weir_devkit::kafka;
use weir_devkit::process::Lifetime;

/// A record to produce: (partition, key, value).
pub type Record = (Option<i32>, Option<Vec<u8>>, Vec<u8>);

/// A record to produce as it is, for poisoned inputs: a tombstone has no
/// value, and headers are written as given.
#[derive(Debug, Clone, Default)]
pub struct RawRecord {
    /// The partition, else where the key hashes.
    pub partition: Option<i32>,
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The value; `None` writes a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// A record read back: (partition, offset, key, value).
pub type Consumed = (i32, i64, Option<Vec<u8>>, Vec<u8>);

/// Environment variable naming the shared broker's bootstrap servers.
pub const BOOTSTRAP_ENV: &str = "WEIR_TEST_KAFKA_BOOTSTRAP";

/// How long one blocking helper call may take before it panics.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A Kafka broker for a test: the shared one, or a dedicated one this
/// value owns (killed when it is dropped).
pub struct TestKafka {
    producer: OnceLock<FutureProducer>,
    bootstrap: String,
    /// The dedicated broker's directory (log dir, pid, ports).
    dedicated: Option<tempfile::TempDir>,
    runtime: tokio::runtime::Runtime,
}

/// The shared broker's bootstrap servers: `$WEIR_TEST_KAFKA_BOOTSTRAP`,
/// else the one in [`kafka::default_dir`] (started at most once per test
/// binary, and kept running). The only place the tests learn where the
/// broker is.
pub fn shared_bootstrap() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| match std::env::var(BOOTSTRAP_ENV) {
            Ok(bootstrap) if !bootstrap.trim().is_empty() => bootstrap.trim().to_owned(),
            _ => kafka::start(&kafka::default_dir(), &[], Lifetime::Detached)
                .unwrap_or_else(|e| panic!("starting the shared Kafka broker: {e:#}")),
        })
        .clone()
}

impl TestKafka {
    /// The shared broker: [`shared_bootstrap`].
    pub fn start() -> TestKafka {
        TestKafka::new(shared_bootstrap(), None)
    }

    /// A broker of this test's own, with `configs` (`name=value` broker
    /// settings, e.g. `transaction.max.timeout.ms=10000`).
    pub fn dedicated(configs: &[&str]) -> TestKafka {
        let dir = tempfile::Builder::new().prefix("weir-kafka-").tempdir().expect("broker dir");
        let bootstrap = start_dedicated(dir.path(), configs);
        TestKafka::new(bootstrap, Some(dir))
    }

    fn new(bootstrap: String, dedicated: Option<tempfile::TempDir>) -> TestKafka {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime for the Kafka clients");
        TestKafka { producer: OnceLock::new(), bootstrap, dedicated, runtime }
    }

    /// Bootstrap servers for a client, e.g. `127.0.0.1:40123`.
    pub fn bootstrap(&self) -> String {
        self.bootstrap.clone()
    }

    fn dedicated_dir(&self) -> &Path {
        self.dedicated.as_ref().expect("only a dedicated broker can be killed or restarted").path()
    }

    /// Kill the dedicated broker with SIGKILL and wait until it is gone.
    pub fn kill(&self) {
        kafka::kill(self.dedicated_dir()).unwrap_or_else(|e| panic!("killing the broker: {e:#}"));
    }

    /// Start the dedicated broker again on the same log directory and
    /// ports (after [`TestKafka::kill`]), waiting until it accepts
    /// connections.
    pub fn restart(&self, configs: &[&str]) {
        let bootstrap = start_dedicated(self.dedicated_dir(), configs);
        assert_eq!(bootstrap, self.bootstrap, "a restarted broker keeps its address");
    }

    /// Run a future on this helper's runtime, blocking the caller.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A client config with `bootstrap.servers` set.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }

    fn admin(&self) -> AdminClient<DefaultClientContext> {
        self.client_config().create().expect("admin client")
    }

    /// Create `name` with `partitions` partitions (replication factor 1).
    /// An already existing topic is left as it is.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results =
            self.block_on(self.admin().create_topics([&topic], &options)).expect("CreateTopics");
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => panic!("creating topic {topic}: {code}"),
            }
        }
        // Wait until the new topic's partitions are in the metadata.
        let consumer: BaseConsumer = self.client_config().create().expect("consumer");
        let deadline = Instant::now() + TIMEOUT;
        while self.partitions_of(&consumer, name).len() < partitions as usize {
            assert!(Instant::now() < deadline, "topic {name} never appeared");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Grow `topic` to `total` partitions, and wait until they are in the
    /// metadata.
    pub fn add_partitions(&self, topic: &str, total: usize) {
        let grow = [rdkafka::admin::NewPartitions::new(topic, total)];
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results = self
            .block_on(self.admin().create_partitions(&grow, &options))
            .expect("CreatePartitions");
        for result in results {
            if let Err((topic, code)) = result {
                panic!("adding partitions to {topic}: {code}");
            }
        }
        let consumer: BaseConsumer = self.client_config().create().expect("consumer");
        let deadline = Instant::now() + TIMEOUT;
        while self.partitions_of(&consumer, topic).len() < total {
            assert!(Instant::now() < deadline, "topic {topic} never grew");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Delete consumer group `group` (e.g. the one holding a sink's commit
    /// marker).
    pub fn delete_group(&self, group: &str) {
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results =
            self.block_on(self.admin().delete_groups(&[group], &options)).expect("DeleteGroups");
        for result in results {
            if let Err((group, code)) = result {
                panic!("deleting group {group}: {code}");
            }
        }
    }

    /// Delete the records of `topic`'s `partition` below `offset`, as
    /// retention would (the partition's log start moves to `offset`).
    pub fn delete_records_before(&self, topic: &str, partition: i32, offset: i64) {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(topic, partition, Offset::Offset(offset)).expect("offset");
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let result =
            self.block_on(self.admin().delete_records(&list, &options)).expect("DeleteRecords");
        for element in result.elements() {
            if let Err(e) = element.error() {
                panic!("deleting records of {topic}/{partition}: {e}");
            }
        }
    }

    fn producer(&self) -> &FutureProducer {
        self.producer.get_or_init(|| {
            self.client_config()
                .set("enable.idempotence", "true")
                .set("message.timeout.ms", "30000")
                .set("linger.ms", "5")
                .create()
                .expect("producer")
        })
    }

    /// Produce one record, not transactionally, and wait until the broker
    /// has acknowledged it. `partition: None` lets the partitioner choose.
    pub fn produce(&self, topic: &str, partition: Option<i32>, key: Option<&[u8]>, value: &[u8]) {
        self.produce_many(topic, &[(partition, key.map(<[u8]>::to_vec), value.to_vec())]);
    }

    /// Produce `records` (partition, key, value), not transactionally, and
    /// wait until the broker has acknowledged all of them.
    pub fn produce_many(&self, topic: &str, records: &[Record]) {
        let raw: Vec<RawRecord> = records
            .iter()
            .map(|(partition, key, value)| RawRecord {
                partition: *partition,
                key: key.clone(),
                value: Some(value.clone()),
                headers: Vec::new(),
            })
            .collect();
        self.produce_raw(topic, &raw);
    }

    /// Produce `records` as they are (tombstones, headers), not
    /// transactionally, waiting until the broker has acknowledged all.
    pub fn produce_raw(&self, topic: &str, records: &[RawRecord]) {
        let producer = self.producer();
        let sends: Vec<_> = records
            .iter()
            .map(|raw| {
                let mut record = FutureRecord::<[u8], [u8]>::to(topic);
                if let Some(value) = &raw.value {
                    record = record.payload(&value[..]);
                }
                if let Some(partition) = raw.partition {
                    record = record.partition(partition);
                }
                if let Some(key) = &raw.key {
                    record = record.key(&key[..]);
                }
                if !raw.headers.is_empty() {
                    let mut headers = rdkafka::message::OwnedHeaders::new();
                    for (name, value) in &raw.headers {
                        headers = headers
                            .insert(rdkafka::message::Header { key: name, value: Some(value) });
                    }
                    record = record.headers(headers);
                }
                self.runtime
                    .block_on(async { producer.send_result(record).map_err(|(e, _)| e) })
                    .unwrap_or_else(|e| panic!("producing to {topic}: {e}"))
            })
            .collect();
        for send in sends {
            self.block_on(send)
                .expect("delivery future")
                .unwrap_or_else(|(e, _)| panic!("producing to {topic}: {e}"));
        }
    }

    /// A consumer of `group` that commits only when told to.
    fn group_consumer(&self, group: &str) -> BaseConsumer {
        self.client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer")
    }

    /// Commit `offsets` (one per partition, from 0) of `topic` for `group`.
    pub fn commit_offsets(&self, group: &str, topic: &str, offsets: &[i64]) {
        let consumer = self.group_consumer(group);
        let mut list = TopicPartitionList::new();
        for (partition, offset) in offsets.iter().enumerate() {
            list.add_partition_offset(topic, partition as i32, Offset::Offset(*offset))
                .expect("offset");
        }
        consumer.commit(&list, rdkafka::consumer::CommitMode::Sync).expect("commit offsets");
    }

    /// Every record of `topic` that a `read_committed` consumer sees now,
    /// from the beginning of each partition up to its end (the last stable
    /// offset), as `(partition, offset, key, value)` sorted by partition
    /// and offset.
    pub fn read_committed(&self, topic: &str) -> Vec<Consumed> {
        let consumer: BaseConsumer = self
            .client_config()
            // assign() needs a group id; nothing joins or commits with it.
            .set("group.id", format!("test-kafka-reader-{}", std::process::id()))
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "true")
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("consumer");
        let partitions = self.partitions_of(&consumer, topic);
        assert!(!partitions.is_empty(), "topic {topic} has no partitions");
        let mut assignment = TopicPartitionList::new();
        for &partition in &partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .expect("partition offset");
        }
        consumer.assign(&assignment).expect("assign");

        let mut pending: BTreeSet<i32> = partitions.into_iter().collect();
        let mut records = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while !pending.is_empty() {
            assert!(
                Instant::now() < deadline,
                "read_committed({topic}): partitions {pending:?} never reached their end"
            );
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Ok(message)) => records.push((
                    message.partition(),
                    message.offset(),
                    message.key().map(<[u8]>::to_vec),
                    message.payload().unwrap_or_default().to_vec(),
                )),
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    pending.remove(&partition);
                }
                Some(Err(e)) => panic!("read_committed({topic}): {e}"),
            }
        }
        records.sort_by_key(|(partition, offset, _, _)| (*partition, *offset));
        records
    }

    /// The offsets `group` has committed for partitions `0..partitions` of
    /// `topic`; `None` where nothing is committed.
    pub fn committed_offsets(&self, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
        let consumer = self.group_consumer(group);
        let mut query = TopicPartitionList::new();
        for partition in 0..partitions {
            query.add_partition(topic, partition);
        }
        let committed = consumer.committed_offsets(query, TIMEOUT).expect("OffsetFetch");
        (0..partitions)
            .map(|partition| match committed.find_partition(topic, partition).map(|e| e.offset()) {
                Some(Offset::Offset(offset)) => Some(offset),
                _ => None,
            })
            .collect()
    }

    /// Partition ids of `topic` as the broker's metadata lists them.
    /// Whether the brokers list topic `name`.
    pub fn has_topic(&self, name: &str) -> bool {
        let consumer: BaseConsumer = self.client_config().create().expect("consumer");
        !self.partitions_of(&consumer, name).is_empty()
    }

    fn partitions_of(&self, consumer: &BaseConsumer, topic: &str) -> Vec<i32> {
        let metadata = consumer.fetch_metadata(Some(topic), TIMEOUT).expect("Metadata");
        metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect()
    }
}

impl Drop for TestKafka {
    fn drop(&mut self) {
        if let Some(dir) = &self.dedicated {
            if kafka::running(dir.path()) {
                let _ = kafka::kill(dir.path());
            }
        }
    }
}

/// A unique name per test run, so tests can share an external broker.
pub fn unique(name: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// `count` orders over `customers` customers on `partitions` partitions
/// of `topic` (a customer's orders all on one partition, as keyed records
/// are), a second apart from 2026-01-15T10:00:00Z.
pub fn produce_orders(
    kafka: &TestKafka,
    topic: &str,
    partitions: i32,
    count: u64,
    customers: u64,
    first_id: u64,
) {
    let records: Vec<Record> = (first_id..first_id + count)
        .map(|id| {
            let customer = id * 7 % customers + 1;
            let value = format!(
                r#"{{"order_id":{id},"customer_id":{customer},"amount":{}.{:02},"event_time":{}}}"#,
                id % 50 + 1,
                id % 100,
                1_768_471_200_000 + id as i64 * 1000
            );
            (
                Some((customer % partitions as u64) as i32),
                Some(customer.to_string().into_bytes()),
                value.into_bytes(),
            )
        })
        .collect();
    kafka.produce_many(topic, &records);
}

/// Each customer's committed output values, in topic order.
pub fn committed_per_key(kafka: &TestKafka, topic: &str) -> BTreeMap<u64, Vec<String>> {
    let mut keys: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (_, _, _, value) in kafka.read_committed(topic) {
        let text = String::from_utf8(value).unwrap();
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        keys.entry(record["customer_id"].as_u64().unwrap()).or_default().push(text);
    }
    keys
}

/// Start (or start again) the dedicated broker of `dir` with `configs`,
/// owned by the calling test's thread: it dies when the test ends.
fn start_dedicated(dir: &Path, configs: &[&str]) -> String {
    let configs: Vec<String> = configs.iter().map(|c| c.to_string()).collect();
    kafka::start(dir, &configs, Lifetime::Owned)
        .unwrap_or_else(|e| panic!("starting a dedicated Kafka broker: {e:#}"))
}
