//! A Kafka broker for synchronous integration tests: [`TestKafka`]. Weir's
//! integration tests include this file as their `kafka_support` module.
//!
//! [`TestKafka::start`] runs krafka's in-process `FakeBroker` (the vendored,
//! patched copy in `third_party/krafka`, feature `test-broker`) on a tokio
//! runtime of its own, listening on `127.0.0.1:<free port>`. When the
//! environment variable `WEIR_TEST_KAFKA_BOOTSTRAP` is set, it starts nothing
//! and points at that external broker instead, so the same tests can run
//! against a real Kafka.
//!
//! Every method blocks; the helpers use `rdkafka` (librdkafka) as clients, so
//! what they see is what an rdkafka-based sink or source would see. This
//! module owns test plumbing only: it must never be linked into a production
//! binary.
//!
//! ```no_run
//! use kafka_test_broker_check::TestKafka;
//!
//! let kafka = TestKafka::start();
//! kafka.create_topic("in", 3);
//! kafka.produce("in", Some(1), Some(b"k"), b"v");
//! let records = kafka.read_committed("in");
//! assert_eq!(records, vec![(1, 0, Some(b"k".to_vec()), b"v".to_vec())]);
//! ```

#![deny(missing_docs)]

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use krafka::testing::FakeBroker;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// A record to produce: (partition, key, value).
pub type Record = (Option<i32>, Option<Vec<u8>>, Vec<u8>);

/// A record read back: (partition, offset, key, value).
pub type Consumed = (i32, i64, Option<Vec<u8>>, Vec<u8>);

/// Environment variable naming an external broker's bootstrap servers.
pub const BOOTSTRAP_ENV: &str = "WEIR_TEST_KAFKA_BOOTSTRAP";

/// How long one blocking helper call may take before it panics.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A Kafka broker for a test: in-process, or external via
/// [`BOOTSTRAP_ENV`].
///
/// Dropping it stops the in-process broker (its listener and every
/// connection) and its runtime.
pub struct TestKafka {
    // Field order is drop order: the broker's tasks are aborted before the
    // runtime that runs them shuts down.
    broker: Option<FakeBroker>,
    producer: OnceLock<FutureProducer>,
    bootstrap: String,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for TestKafka {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKafka")
            .field("bootstrap", &self.bootstrap)
            .field("in_process", &self.broker.is_some())
            .finish_non_exhaustive()
    }
}

impl TestKafka {
    /// Start an in-process broker on `127.0.0.1:<free port>`, or use the
    /// external one named by `WEIR_TEST_KAFKA_BOOTSTRAP`.
    ///
    /// # Panics
    /// If the runtime or the listener cannot be started.
    pub fn start() -> TestKafka {
        // One worker thread serves the broker's accept loop and connections;
        // the test thread only enters the runtime through `block_on`.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-kafka")
            .enable_all()
            .build()
            .expect("tokio runtime for the test broker");
        match std::env::var(BOOTSTRAP_ENV) {
            Ok(bootstrap) if !bootstrap.trim().is_empty() => TestKafka {
                broker: None,
                producer: OnceLock::new(),
                bootstrap: bootstrap.trim().to_owned(),
                runtime,
            },
            _ => {
                let broker =
                    runtime.block_on(FakeBroker::start()).expect("start the in-process FakeBroker");
                let bootstrap = broker.bootstrap_servers();
                TestKafka { broker: Some(broker), producer: OnceLock::new(), bootstrap, runtime }
            }
        }
    }

    /// Bootstrap servers for a client, e.g. `127.0.0.1:40123`.
    pub fn bootstrap(&self) -> String {
        self.bootstrap.clone()
    }

    /// The in-process broker, for assertions on its state; `None` when an
    /// external broker is used.
    pub fn fake_broker(&self) -> Option<&FakeBroker> {
        self.broker.as_ref()
    }

    /// Run a future on this broker's runtime, blocking the caller.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A client config with `bootstrap.servers` set.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }

    /// Create `name` with `partitions` partitions (replication factor 1).
    /// An already existing topic is left as it is.
    ///
    /// # Panics
    /// If the topic cannot be created.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        if let Some(broker) = &self.broker {
            broker.create_topic(name, partitions);
            return;
        }
        let admin: AdminClient<DefaultClientContext> =
            self.client_config().create().expect("admin client");
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let results = self.block_on(admin.create_topics([&topic], &options)).expect("CreateTopics");
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

    /// Produce one record, not transactionally, and wait until the broker
    /// has acknowledged it. `partition: None` lets the partitioner choose.
    ///
    /// # Panics
    /// If the record is not acknowledged.
    pub fn produce(&self, topic: &str, partition: Option<i32>, key: Option<&[u8]>, value: &[u8]) {
        let producer = self.producer.get_or_init(|| {
            self.client_config()
                .set("enable.idempotence", "true")
                .set("message.timeout.ms", "30000")
                .create()
                .expect("producer")
        });
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).payload(value);
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        if let Some(key) = key {
            record = record.key(key);
        }
        self.block_on(producer.send(record, TIMEOUT))
            .unwrap_or_else(|(e, _)| panic!("producing to {topic}: {e}"));
    }

    /// Produce `records` (partition, key, value), not transactionally, and
    /// wait until the broker has acknowledged all of them.
    ///
    /// # Panics
    /// If a record is not acknowledged.
    pub fn produce_many(&self, topic: &str, records: &[Record]) {
        let producer = self.producer.get_or_init(|| {
            self.client_config()
                .set("enable.idempotence", "true")
                .set("message.timeout.ms", "30000")
                .create()
                .expect("producer")
        });
        let sends: Vec<_> = records
            .iter()
            .map(|(partition, key, value)| {
                let mut record = FutureRecord::<[u8], [u8]>::to(topic).payload(&value[..]);
                if let Some(partition) = partition {
                    record = record.partition(*partition);
                }
                if let Some(key) = key {
                    record = record.key(&key[..]);
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

    /// Commit `offsets` (one per partition, from 0) of `topic` for `group`.
    ///
    /// # Panics
    /// If the commit fails.
    pub fn commit_offsets(&self, group: &str, topic: &str, offsets: &[i64]) {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut list = TopicPartitionList::new();
        for (partition, offset) in offsets.iter().enumerate() {
            list.add_partition_offset(topic, partition as i32, Offset::Offset(*offset))
                .expect("offset");
        }
        consumer.commit(&list, rdkafka::consumer::CommitMode::Sync).expect("commit offsets");
    }

    /// Every record of `topic` that a `read_committed` consumer sees now, from
    /// the beginning of each partition up to its end (the last stable
    /// offset), as `(partition, offset, key, value)` sorted by partition and
    /// offset.
    ///
    /// # Panics
    /// If the topic does not exist or a partition's end is not reached
    /// within 30 s.
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
    ///
    /// # Panics
    /// If the group coordinator cannot be asked.
    pub fn committed_offsets(&self, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
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
