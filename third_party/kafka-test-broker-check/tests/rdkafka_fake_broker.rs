//! rdkafka (librdkafka) against the patched in-process FakeBroker: the
//! transactional behaviour an exactly-once Kafka sink relies on, and the
//! plain producer/consumer/admin paths its tests need.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kafka_test_broker_check::TestKafka;
use krafka::testing::ApiKey;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// A producer whose delivery reports are polled on its own thread, as
/// `commit_transaction`/`abort_transaction` require.
type TxnProducer = ThreadedProducer<DefaultProducerContext>;
use rdkafka::{Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(30);

/// A name unique within this test run, so tests can share an external broker.
fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn txn_producer(kafka: &TestKafka, transactional_id: &str) -> TxnProducer {
    let producer: TxnProducer = kafka
        .client_config()
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("transactional producer");
    producer.init_transactions(T).expect("init_transactions");
    producer
}

fn send(producer: &TxnProducer, topic: &str, partition: i32, value: &str) {
    producer
        .send(
            BaseRecord::<str, str>::to(topic)
                .partition(partition)
                .key(value)
                .payload(value),
        )
        .map_err(|(e, _)| e)
        .expect("enqueue record");
}

/// The values of `records`, in order.
fn values(records: &[(i32, i64, Option<Vec<u8>>, Vec<u8>)]) -> Vec<String> {
    records
        .iter()
        .map(|(_, _, _, v)| String::from_utf8(v.clone()).expect("utf-8 value"))
        .collect()
}

#[test]
fn committed_aborted_and_open_transactions_under_read_committed() {
    let kafka = TestKafka::start();
    let topic = unique("txn");
    kafka.create_topic(&topic, 1);
    let producer = txn_producer(&kafka, &unique("tid"));

    producer.begin_transaction().expect("begin");
    send(&producer, &topic, 0, "c1");
    send(&producer, &topic, 0, "c2");
    producer.commit_transaction(T).expect("commit");

    producer.begin_transaction().expect("begin");
    send(&producer, &topic, 0, "a1");
    producer
        .flush(T)
        .expect("flush aborted records to the broker");
    producer.abort_transaction(T).expect("abort");

    producer.begin_transaction().expect("begin");
    send(&producer, &topic, 0, "o1");
    producer
        .flush(T)
        .expect("flush open-transaction records to the broker");

    // The open transaction's record is written but not visible.
    if let Some(broker) = kafka.fake_broker() {
        assert!(broker
            .all_records(&topic)
            .expect("log")
            .iter()
            .any(|r| r.value_str() == Some("o1")));
    }
    assert_eq!(values(&kafka.read_committed(&topic)), ["c1", "c2"]);

    producer.commit_transaction(T).expect("commit");
    let records = kafka.read_committed(&topic);
    assert_eq!(values(&records), ["c1", "c2", "o1"]);
    // Offsets account for the control markers and the aborted record:
    // c1 c2 COMMIT a1 ABORT o1 COMMIT.
    let offsets: Vec<i64> = records.iter().map(|r| r.1).collect();
    assert_eq!(offsets, [0, 1, 5]);
    assert_eq!(records[0].2.as_deref(), Some(&b"c1"[..]));

    // What the WEIR-PATCH in third_party/krafka makes possible.
    print_versions(&kafka);
    if kafka.fake_broker().is_some() {
        assert_eq!(versions_used(&kafka, ApiKey::EndTxn), BTreeSet::from([1]));
    }
}

#[test]
fn offsets_sent_to_a_transaction_are_committed_only_with_it() {
    let kafka = TestKafka::start();
    let topic = unique("eos-in");
    let out = unique("eos-out");
    let group = unique("group");
    kafka.create_topic(&topic, 2);
    kafka.create_topic(&out, 1);
    let producer = txn_producer(&kafka, &unique("tid"));
    let consumer: BaseConsumer = kafka
        .client_config()
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let metadata = consumer.group_metadata().expect("group metadata");

    let offsets = |p0: i64, p1: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(p0))
            .unwrap();
        tpl.add_partition_offset(&topic, 1, Offset::Offset(p1))
            .unwrap();
        tpl
    };

    // Aborted: the offsets never become the group's.
    producer.begin_transaction().expect("begin");
    send(&producer, &out, 0, "x");
    producer
        .send_offsets_to_transaction(&offsets(5, 6), &metadata, T)
        .expect("send_offsets_to_transaction");
    assert_eq!(kafka.committed_offsets(&group, &topic, 2), [None, None]);
    producer.abort_transaction(T).expect("abort");
    assert_eq!(kafka.committed_offsets(&group, &topic, 2), [None, None]);

    // Committed: visible only once the transaction commits.
    producer.begin_transaction().expect("begin");
    send(&producer, &out, 0, "y");
    producer
        .send_offsets_to_transaction(&offsets(7, 8), &metadata, T)
        .expect("send_offsets_to_transaction");
    assert_eq!(kafka.committed_offsets(&group, &topic, 2), [None, None]);
    producer.commit_transaction(T).expect("commit");
    assert_eq!(
        kafka.committed_offsets(&group, &topic, 2),
        [Some(7), Some(8)]
    );
    // Read back through an rdkafka consumer of the group too.
    let mut query = TopicPartitionList::new();
    query.add_partition(&topic, 0);
    query.add_partition(&topic, 1);
    let committed = consumer
        .committed_offsets(query, T)
        .expect("committed_offsets");
    assert_eq!(
        committed.find_partition(&topic, 1).unwrap().offset(),
        Offset::Offset(8)
    );

    // A later aborted transaction leaves the committed offsets alone.
    producer.begin_transaction().expect("begin");
    producer
        .send_offsets_to_transaction(&offsets(9, 9), &metadata, T)
        .expect("send_offsets_to_transaction");
    producer.abort_transaction(T).expect("abort");
    assert_eq!(
        kafka.committed_offsets(&group, &topic, 2),
        [Some(7), Some(8)]
    );
    assert_eq!(values(&kafka.read_committed(&out)), ["y"]);

    print_versions(&kafka);
    if kafka.fake_broker().is_some() {
        assert_eq!(
            versions_used(&kafka, ApiKey::TxnOffsetCommit),
            BTreeSet::from([3])
        );
    }
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let kafka = TestKafka::start();
    let topic = unique("fence");
    let tid = unique("tid");
    kafka.create_topic(&topic, 1);

    let first = txn_producer(&kafka, &tid);
    first.begin_transaction().expect("begin");
    send(&first, &topic, 0, "zombie");
    first.flush(T).expect("flush");

    let second = txn_producer(&kafka, &tid);
    second.begin_transaction().expect("begin");
    send(&second, &topic, 0, "successor");
    second.commit_transaction(T).expect("commit");

    // The first producer's next transactional operation fails, fenced.
    send(&first, &topic, 0, "zombie-2");
    let err = first
        .commit_transaction(T)
        .expect_err("a fenced producer cannot commit");
    let code = err.rdkafka_error_code();
    eprintln!("fenced producer's commit_transaction: {err} ({code:?})");
    assert!(
        matches!(
            code,
            Some(
                RDKafkaErrorCode::Fenced
                    | RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
            )
        ),
        "expected a fencing error, got {err}"
    );
    if let KafkaError::Transaction(e) = &err {
        assert!(e.is_fatal(), "fencing is fatal for the old producer");
    }

    assert_eq!(values(&kafka.read_committed(&topic)), ["successor"]);
}

#[test]
fn a_crashed_producers_open_transaction_is_aborted_by_its_successor() {
    let kafka = TestKafka::start();
    let topic = unique("crash");
    let tid = unique("tid");
    kafka.create_topic(&topic, 1);

    let crashed = txn_producer(&kafka, &tid);
    crashed.begin_transaction().expect("begin");
    send(&crashed, &topic, 0, "lost");
    crashed.flush(T).expect("flush");
    drop(crashed);
    if let Some(broker) = kafka.fake_broker() {
        assert!(
            broker.transaction_is_open(&tid),
            "dropping a producer does not end its transaction"
        );
    }
    assert_eq!(values(&kafka.read_committed(&topic)), Vec::<String>::new());

    let successor = txn_producer(&kafka, &tid);
    if let Some(broker) = kafka.fake_broker() {
        assert!(
            !broker.transaction_is_open(&tid),
            "init_transactions aborted it"
        );
    }
    assert_eq!(values(&kafka.read_committed(&topic)), Vec::<String>::new());
    successor.begin_transaction().expect("begin");
    send(&successor, &topic, 0, "kept");
    successor.commit_transaction(T).expect("commit");
    assert_eq!(values(&kafka.read_committed(&topic)), ["kept"]);
}

#[test]
fn partitions_assign_seek_and_group_commits() {
    let kafka = TestKafka::start();
    let topic = unique("parts");
    let group = unique("group");

    // Create through rdkafka's admin client (CreateTopics v4).
    let admin: AdminClient<DefaultClientContext> =
        kafka.client_config().create().expect("admin client");
    let results = kafka
        .block_on(admin.create_topics(
            [&NewTopic::new(&topic, 3, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(T)),
        ))
        .expect("CreateTopics");
    assert_eq!(results, [Ok(topic.clone())]);

    for partition in 0..3 {
        for i in 0..4 {
            let value = format!("p{partition}-{i}");
            kafka.produce(
                &topic,
                Some(partition),
                Some(value.as_bytes()),
                value.as_bytes(),
            );
        }
    }
    kafka.produce(&topic, None, None, b"anywhere");
    let all = kafka.read_committed(&topic);
    assert_eq!(all.len(), 13);
    for partition in 0..3 {
        let offsets: Vec<i64> = all
            .iter()
            .filter(|r| r.0 == partition && r.3 != b"anywhere")
            .map(|r| r.1)
            .collect();
        assert_eq!(offsets, [0, 1, 2, 3], "partition {partition}");
    }
    assert!(all.iter().any(|r| r.3 == b"p1-2" && r.0 == 1 && r.1 == 2));

    // assign() + seek to an offset.
    let consumer: BaseConsumer = kafka
        .client_config()
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&topic, 2, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let first = poll_one(&consumer);
    assert_eq!((first.0, first.1, first.2.as_str()), (2, 0, "p2-0"));
    consumer
        .seek(&topic, 2, Offset::Offset(3), T)
        .expect("seek");
    let after_seek = poll_one(&consumer);
    assert_eq!(
        (after_seek.0, after_seek.1, after_seek.2.as_str()),
        (2, 3, "p2-3")
    );

    // Assigning at an offset is the other way to start from one.
    let mut at = TopicPartitionList::new();
    at.add_partition_offset(&topic, 0, Offset::Offset(2))
        .unwrap();
    consumer.assign(&at).expect("assign at offset");
    let from_two = poll_one(&consumer);
    assert_eq!(
        (from_two.0, from_two.1, from_two.2.as_str()),
        (0, 2, "p0-2")
    );

    // commit_consumer_state commits the consumed position (offset + 1).
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit_consumer_state");
    assert_eq!(
        kafka.committed_offsets(&group, &topic, 3),
        [Some(3), None, None]
    );

    // commit() with explicit offsets.
    let mut explicit = TopicPartitionList::new();
    explicit
        .add_partition_offset(&topic, 1, Offset::Offset(4))
        .unwrap();
    explicit
        .add_partition_offset(&topic, 2, Offset::Offset(1))
        .unwrap();
    consumer
        .commit(&explicit, CommitMode::Sync)
        .expect("commit");
    assert_eq!(
        kafka.committed_offsets(&group, &topic, 3),
        [Some(3), Some(4), Some(1)]
    );
    drop(consumer);

    // Deleting through the admin client (DeleteTopics v1).
    let deleted = kafka
        .block_on(admin.delete_topics(&[&topic], &AdminOptions::new().operation_timeout(Some(T))))
        .expect("DeleteTopics");
    assert_eq!(deleted, [Ok(topic.clone())]);
    if let Some(broker) = kafka.fake_broker() {
        assert_eq!(broker.topic_id(&topic), None);
        assert_eq!(
            versions_used(&kafka, ApiKey::DeleteTopics),
            BTreeSet::from([1])
        );
    }
    print_versions(&kafka);
}

#[test]
fn subscribed_group_consumer_joins_consumes_and_commits() {
    let kafka = TestKafka::start();
    let topic = unique("sub");
    let group = unique("group");
    kafka.create_topic(&topic, 2);
    for i in 0..6 {
        let value = format!("v{i}");
        kafka.produce(&topic, Some(i % 2), None, value.as_bytes());
    }

    // A StreamConsumer must be created inside a tokio runtime.
    let consumer: StreamConsumer = kafka.block_on(async {
        kafka
            .client_config()
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", "6000")
            .create()
            .expect("consumer")
    });
    consumer.subscribe(&[&topic]).expect("subscribe");
    let mut seen = Vec::new();
    kafka.block_on(async {
        while seen.len() < 6 {
            let message = tokio::time::timeout(T, consumer.recv())
                .await
                .expect("a record within the timeout")
                .expect("recv");
            seen.push(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
        }
    });
    seen.sort();
    assert_eq!(seen, ["v0", "v1", "v2", "v3", "v4", "v5"]);
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit_consumer_state");
    assert_eq!(
        kafka.committed_offsets(&group, &topic, 2),
        [Some(3), Some(3)]
    );
    drop(consumer); // closes: leaves the group
    print_versions(&kafka);
    if let Some(broker) = kafka.fake_broker() {
        assert_eq!(
            versions_used(&kafka, ApiKey::LeaveGroup),
            BTreeSet::from([1])
        );
        let left = broker.leave_group_members();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].group_id, group);
    }
}

/// The versions librdkafka negotiated for `api`, as the in-process broker
/// recorded them; empty against an external broker.
fn versions_used(kafka: &TestKafka, api: ApiKey) -> BTreeSet<i16> {
    kafka.fake_broker().map_or_else(BTreeSet::new, |broker| {
        broker
            .requests()
            .iter()
            .filter(|r| r.api_key == api)
            .map(|r| r.api_version)
            .collect()
    })
}

/// Print every API and version librdkafka used, for the record.
fn print_versions(kafka: &TestKafka) {
    if let Some(broker) = kafka.fake_broker() {
        let mut used: BTreeSet<(i16, String, i16)> = BTreeSet::new();
        for r in broker.requests() {
            used.insert((
                r.api_key.to_i16(),
                format!("{:?}", r.api_key),
                r.api_version,
            ));
        }
        eprintln!("APIs used (key, name, version): {used:?}");
    }
}

/// Poll until one record arrives: `(partition, offset, value)`.
fn poll_one(consumer: &BaseConsumer) -> (i32, i64, String) {
    let deadline = std::time::Instant::now() + T;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no record within {T:?}"
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                return (
                    m.partition(),
                    m.offset(),
                    String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap(),
                );
            }
            Some(Err(e)) => panic!("poll: {e}"),
        }
    }
}

/// Documents what the in-process broker does not do (skipped against an
/// external broker): it serves no DescribeConfigs, and it never expires a
/// transaction that outlives its `transaction.timeout.ms` — a real broker
/// aborts it. It does reject a timeout above `transaction.max.timeout.ms`
/// (15 minutes unless a test changes `ClusterState::transaction_max_timeout_ms`).
#[test]
fn limits_of_the_fake_broker() {
    let kafka = TestKafka::start();
    let Some(broker) = kafka.fake_broker() else {
        return;
    };
    let topic = unique("limits");
    kafka.create_topic(&topic, 1);

    let admin: AdminClient<DefaultClientContext> =
        kafka.client_config().create().expect("admin client");
    let described = kafka.block_on(admin.describe_configs(
        [&rdkafka::admin::ResourceSpecifier::Broker(0)],
        &AdminOptions::new().request_timeout(Some(Duration::from_secs(5))),
    ));
    eprintln!("DescribeConfigs(broker 0): {described:?}");
    let served = matches!(&described, Ok(results) if results.iter().all(Result::is_ok));
    assert!(
        !served,
        "DescribeConfigs is not advertised by the FakeBroker"
    );

    // A transaction timeout above the broker maximum is refused.
    let too_long: TxnProducer = kafka
        .client_config()
        .set("transactional.id", unique("tid"))
        .set("transaction.timeout.ms", "900001")
        .create()
        .expect("producer");
    let err = too_long
        .init_transactions(T)
        .expect_err("timeout above the maximum");
    eprintln!("transaction.timeout.ms=900001: {err}");

    // A transaction older than its timeout is still open and still commits.
    let tid = unique("tid");
    let producer: TxnProducer = kafka
        .client_config()
        .set("transactional.id", &tid)
        .set("transaction.timeout.ms", "1000")
        .set("message.timeout.ms", "1000")
        .create()
        .expect("producer");
    producer.init_transactions(T).expect("init_transactions");
    producer.begin_transaction().expect("begin");
    send(&producer, &topic, 0, "late");
    producer.flush(T).expect("flush");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        broker.transaction_is_open(&tid),
        "not expired by the broker"
    );
    producer
        .commit_transaction(T)
        .expect("commit after the timeout");
    assert_eq!(values(&kafka.read_committed(&topic)), ["late"]);
}
