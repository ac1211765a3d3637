//! A cluster's control topic: which pipelines are deployed, at which
//! version, in which desired state (docs/cluster.md, "Control plane").
//!
//! `weir-<cluster>-control` is a compacted topic of one partition. A
//! record's key is `pipeline/<name>` with a [`Deployment`] as JSON, or
//! `function/<name>` with the versions of a function uploaded to the
//! cluster (the function store's index entry, as JSON); a tombstone (no
//! value) deletes the pipeline or function. Every change is a
//! read-check-write in one Kafka transaction of the cluster's single
//! transactional id ([`ControlTopic::transact`]): a writer that starts
//! fences the one before it, reads everything committed, decides, and
//! commits — so two servers deploying at once never both take version N+1
//! (the later one is fenced and decides again). Readers read from the start
//! (committed records only), so a worker started at any time learns
//! everything deployed, then follows.
//! The function a deployment names is stored once in object storage under
//! its SHA-256 ([`super::blobs`]), so every worker runs exactly the bytes
//! that were deployed.
//!
//! `weir-<cluster>-status`, compacted the same way, holds what each worker
//! of the cluster last reported (key `worker/<id>`, a [`WorkerReport`];
//! a tombstone when it stops): the cluster's status, read by anyone,
//! written by each worker for itself.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::topics::{self, TopicError};
use crate::connectors::kafka::{client_config, kafka_error, CALL_TIMEOUT};
use crate::connectors::ConnectorError;

/// The key prefix of a pipeline's record.
const PIPELINE_KEY: &str = "pipeline/";

/// The key prefix of a function's versions.
const FUNCTION_KEY: &str = "function/";

/// The key prefix of a worker's report.
const WORKER_KEY: &str = "worker/";

/// How often a transaction fenced by another writer (or failed) is tried.
const TRANSACT_ATTEMPTS: u32 = 10;

/// How long to wait before attempt `attempt` of a transaction: growing,
/// with jitter, so writers that fence each other stop colliding.
fn backoff(attempt: u32) -> Duration {
    let ceiling = 100u64 << attempt.min(5);
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos(),
    );
    Duration::from_millis(ceiling / 2 + jitter % (ceiling / 2 + 1))
}

/// What a worker last said about itself, in the status topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The worker.
    pub worker_id: String,
    /// When it said it (ms since the epoch, its clock).
    pub reported_at: i64,
    /// Its status (`GET /v1/worker` of a cluster worker).
    pub status: serde_json::Value,
}

/// What a pipeline should be doing, as the control topic says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Desired {
    /// Its units run on the workers.
    Running,
    /// Its units are stopped (each with a final checkpoint); its state is
    /// kept for a later start.
    Stopped,
}

/// One deployed pipeline in the control topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// The pipeline's name (the spec's `name`).
    pub pipeline: String,
    /// 1 at deploy, higher with every change: a worker runs the newest.
    pub version: u64,
    /// What it should be doing.
    pub desired: Desired,
    /// The spec (YAML or JSON text). Its functions are given by
    /// `functions`, not by the paths the text may name.
    pub spec: String,
    /// The SHA-256 (hex) of each function, by spec field (`key`,
    /// `process`, `nodes.<name>`, …), stored in the cluster's blobs.
    pub functions: BTreeMap<String, String>,
    /// The version of each stored function the spec names by name
    /// (`function:`), by spec field; empty for functions given as files.
    #[serde(default)]
    pub pins: BTreeMap<String, u32>,
    /// When version 1 was deployed (ms since the epoch; 0 if unknown).
    #[serde(default)]
    pub deployed_at: i64,
    /// The version that last changed the pipeline's layout (how its plan
    /// cuts it into units, see [`super::layout`]); 0: the first layout.
    #[serde(default)]
    pub layout: u64,
    /// The deployment of the layout before (its own `previous` empty):
    /// drained before this one's units run, its tasks' final snapshots
    /// seeding the new tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Box<Deployment>>,
    /// The checkpoint or savepoint (its location) the pipeline was deployed
    /// from: a unit with no snapshot of its own starts from it (a task its
    /// key groups' state, an ingest unit its partition's position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
}

/// What the control topic holds: deployments and uploaded functions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControlState {
    /// Each deployed pipeline, by name.
    pub deployments: BTreeMap<String, Deployment>,
    /// Each uploaded function's versions, by name, as the function store
    /// wrote them (JSON).
    pub functions: BTreeMap<String, Vec<u8>>,
}

/// One record a transaction writes.
#[derive(Debug, Clone)]
pub enum ControlChange {
    /// Deploy (or change) a pipeline.
    Deploy(Deployment),
    /// Delete pipeline `name`.
    Undeploy(String),
    /// Set function `name`'s versions (JSON), or delete it (`None`).
    Functions(String, Option<Vec<u8>>),
}

/// Why the control topic could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Kafka failed or refused.
    #[error(transparent)]
    Kafka(#[from] ConnectorError),
    /// The topic could not be created.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// A cluster name that cannot make a topic name.
    #[error("cluster name {0:?}: use {rule}", rule = crate::names::NAME_RULE)]
    InvalidName(String),
    /// Another writer kept fencing this one.
    #[error("control topic {topic}: {message}")]
    Contended {
        /// The topic.
        topic: String,
        /// What happened.
        message: String,
    },
    /// A record that is not a deployment.
    #[error("control topic {topic} offset {offset}: {message}; a record Weir did not write? Delete it (a tombstone for its key) to go on")]
    Corrupt {
        /// The topic.
        topic: String,
        /// Where.
        offset: i64,
        /// What is wrong.
        message: String,
    },
}

/// The control topic of one cluster on one Kafka cluster.
#[derive(Debug, Clone)]
pub struct ControlTopic {
    cluster: String,
    bootstrap_servers: String,
    properties: BTreeMap<String, String>,
    topic: String,
}

impl ControlTopic {
    /// The control topic of cluster `cluster` on `bootstrap_servers`.
    pub fn new(
        cluster: &str,
        bootstrap_servers: &str,
        properties: BTreeMap<String, String>,
    ) -> Result<Self, ControlError> {
        if !crate::names::is_valid_name(cluster) {
            return Err(ControlError::InvalidName(cluster.chars().take(80).collect()));
        }
        Ok(ControlTopic {
            cluster: cluster.to_string(),
            bootstrap_servers: bootstrap_servers.to_string(),
            properties,
            topic: format!("weir-{cluster}-control"),
        })
    }

    /// The cluster's status topic (read and written the same way).
    pub fn status_topic(&self) -> ControlTopic {
        ControlTopic { topic: format!("weir-{}-status", self.cluster), ..self.clone() }
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The brokers it lives on.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap_servers
    }

    /// Create the topic if it is missing.
    pub fn ensure(&self) -> Result<(), ControlError> {
        Ok(topics::create_compacted(&self.bootstrap_servers, &self.properties, &self.topic)?)
    }

    /// Change the topic as `decide` says, given everything committed to it:
    /// one transaction of the cluster's only transactional id, so no other
    /// writer commits between the read and the write (a writer that
    /// starts meanwhile fences this one, which then reads and decides
    /// again). `decide` returns its answer and the records to write; it may
    /// run more than once.
    pub fn transact<T, E: From<ControlError>>(
        &self,
        mut decide: impl FnMut(&ControlState) -> Result<(T, Vec<ControlChange>), E>,
    ) -> Result<T, E> {
        let mut last = String::new();
        for attempt in 0..TRANSACT_ATTEMPTS {
            if attempt > 0 {
                // Writers that keep fencing each other take turns.
                std::thread::sleep(backoff(attempt));
            }
            let producer = match self.transactional_producer() {
                Ok(producer) => producer,
                Err(error) => {
                    last = error.to_string();
                    continue;
                }
            };
            let mut reader = self.reader()?;
            if let Err(error) = reader.catch_up() {
                last = error.to_string();
                continue;
            }
            let (answer, changes) = decide(&reader.state)?;
            if changes.is_empty() {
                return Ok(answer);
            }
            match self.commit(&producer, &changes) {
                Ok(()) => return Ok(answer),
                Err(error) => {
                    tracing::info!(topic = %self.topic, %error, "control change fenced or failed; deciding again");
                    last = error.to_string();
                }
            }
        }
        Err(ControlError::Contended {
            topic: self.topic.clone(),
            message: format!(
                "a change was fenced or failed {TRANSACT_ATTEMPTS} times (last: {last}); try again"
            ),
        }
        .into())
    }

    /// A producer of the cluster's control transactional id, initialized
    /// (which fences any earlier one and ends its open transaction).
    fn transactional_producer(&self) -> Result<BaseProducer, ControlError> {
        let id = format!("{}-writer", self.topic);
        let producer: BaseProducer = client_config(
            &self.bootstrap_servers,
            &[
                ("transactional.id", id.as_str()),
                ("enable.idempotence", "true"),
                // A writer that died mid-change holds back nothing for long.
                ("transaction.timeout.ms", "10000"),
            ],
            &self.properties,
        )
        .create()
        .map_err(kafka_error(format!("creating a writer of {}", self.topic)))?;
        producer
            .init_transactions(CALL_TIMEOUT)
            .map_err(kafka_error(format!("starting a writer of {}", self.topic)))?;
        Ok(producer)
    }

    /// Write `changes` in one transaction of `producer`.
    fn commit(
        &self,
        producer: &BaseProducer,
        changes: &[ControlChange],
    ) -> Result<(), ControlError> {
        let failed = || kafka_error(format!("writing to {}", self.topic));
        producer.begin_transaction().map_err(failed())?;
        for change in changes {
            let (key, value) = match change {
                ControlChange::Deploy(d) => {
                    (format!("{PIPELINE_KEY}{}", d.pipeline), Some(self.encode(d)?))
                }
                ControlChange::Undeploy(name) => (format!("{PIPELINE_KEY}{name}"), None),
                ControlChange::Functions(name, value) => {
                    (format!("{FUNCTION_KEY}{name}"), value.clone())
                }
            };
            let mut record = BaseRecord::<str, [u8]>::to(&self.topic).key(&key);
            if let Some(value) = &value {
                record = record.payload(value);
            }
            producer.send(record).map_err(|(error, _)| error).map_err(failed())?;
        }
        // Delivered before the commit (a crash here leaves an open
        // transaction on the broker, which readers must not wait for).
        producer.flush(CALL_TIMEOUT).map_err(failed())?;
        crate::fault::point("control-before-commit");
        producer.commit_transaction(CALL_TIMEOUT).map_err(failed())?;
        crate::fault::point("control-after-commit");
        Ok(())
    }

    fn encode(&self, value: &impl Serialize) -> Result<Vec<u8>, ControlError> {
        serde_json::to_vec(value).map_err(|e| ControlError::Corrupt {
            topic: self.topic.clone(),
            offset: -1,
            message: e.to_string(),
        })
    }

    /// A writer of records to the topic (kept for repeated writes).
    pub fn writer(&self) -> Result<ControlWriter, ControlError> {
        let producer: BaseProducer = client_config(
            &self.bootstrap_servers,
            &[("enable.idempotence", "true")],
            &self.properties,
        )
        .create()
        .map_err(kafka_error(format!("creating a producer of {}", self.topic)))?;
        Ok(ControlWriter { producer, topic: self.clone() })
    }

    /// A reader of the topic from its start.
    pub fn reader(&self) -> Result<ControlReader, ControlError> {
        // Partitions are assigned, not subscribed: the group id is only a
        // name the client needs; nothing is joined or committed under it.
        let group = format!("{}-reader", self.topic);
        let ours = [
            ("group.id", group.as_str()),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "false"),
        ];
        let consumer: BaseConsumer =
            client_config(&self.bootstrap_servers, &ours, &self.properties)
                .create()
                .map_err(kafka_error("creating the control topic's reader"))?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&self.topic, 0, Offset::Beginning)
            .map_err(kafka_error(format!("reading {}", self.topic)))?;
        consumer.assign(&assignment).map_err(kafka_error(format!("reading {}", self.topic)))?;
        Ok(ControlReader {
            consumer,
            topic: self.topic.clone(),
            state: ControlState::default(),
            reports: BTreeMap::new(),
        })
    }

    /// Everything deployed and uploaded now: the topic read to its end.
    pub fn read_state(&self) -> Result<ControlState, ControlError> {
        let mut reader = self.reader()?;
        reader.catch_up()?;
        Ok(reader.state)
    }

    /// Everything deployed now: the topic read to its end.
    pub fn read_all(&self) -> Result<BTreeMap<String, Deployment>, ControlError> {
        Ok(self.read_state()?.deployments)
    }

    /// What each worker last reported: the status topic read to its end.
    pub fn read_reports(&self) -> Result<BTreeMap<String, WorkerReport>, ControlError> {
        let mut reader = self.status_topic().reader()?;
        reader.catch_up()?;
        Ok(reader.reports)
    }
}

/// Writes records to a control or status topic, each waited for.
pub struct ControlWriter {
    producer: BaseProducer,
    topic: ControlTopic,
}

impl ControlWriter {
    /// Write `value` under `key` (`None`: a tombstone).
    fn put(&self, key: &str, value: Option<&[u8]>) -> Result<(), ControlError> {
        let topic = &self.topic.topic;
        let mut record = BaseRecord::<str, [u8]>::to(topic).key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        self.producer
            .send(record)
            .map_err(|(error, _)| error)
            .map_err(kafka_error(format!("writing {key} to {topic}")))?;
        self.producer
            .flush(CALL_TIMEOUT)
            .map_err(kafka_error(format!("writing {key} to {topic}")))?;
        Ok(())
    }

    /// Write `report` as its worker's (to the status topic this writes).
    pub fn report(&self, report: &WorkerReport) -> Result<(), ControlError> {
        let value = self.topic.encode(report)?;
        self.put(&format!("{WORKER_KEY}{}", report.worker_id), Some(&value))
    }

    /// Take worker `id`'s report back (it stops).
    pub fn retract(&self, id: &str) -> Result<(), ControlError> {
        self.put(&format!("{WORKER_KEY}{id}"), None)
    }
}

/// Follows a control topic: the deployments as of what it has read.
pub struct ControlReader {
    consumer: BaseConsumer,
    topic: String,
    state: ControlState,
    reports: BTreeMap<String, WorkerReport>,
}

impl ControlReader {
    /// The deployments read so far, by pipeline.
    pub fn deployments(&self) -> &BTreeMap<String, Deployment> {
        &self.state.deployments
    }

    /// Everything read so far from a control topic.
    pub fn state(&self) -> &ControlState {
        &self.state
    }

    /// The workers' reports read so far from a status topic, by worker.
    pub fn reports(&self) -> &BTreeMap<String, WorkerReport> {
        &self.reports
    }

    /// Read what arrived within `wait`; whether anything changed.
    pub fn poll(&mut self, wait: Duration) -> Result<bool, ControlError> {
        let mut changed = false;
        let mut wait = wait;
        while let Some(message) = self.consumer.poll(wait) {
            let message = message.map_err(kafka_error(format!("reading {}", self.topic)))?;
            let (key, value, offset) = (message.key(), message.payload(), message.offset());
            let key = key.and_then(|k| std::str::from_utf8(k).ok()).unwrap_or_default();
            if let Some(worker) = key.strip_prefix(WORKER_KEY) {
                apply_report(&mut self.reports, &self.topic, worker, value, offset)?;
                continue;
            }
            changed |= apply(&mut self.state, &self.topic, key, value, offset)?;
            wait = Duration::ZERO;
        }
        Ok(changed)
    }

    /// Read up to the topic's end as of now.
    pub fn catch_up(&mut self) -> Result<(), ControlError> {
        let (start, end) = self
            .consumer
            .fetch_watermarks(&self.topic, 0, CALL_TIMEOUT)
            .map_err(kafka_error(format!("reading the end of {}", self.topic)))?;
        if end <= start {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + CALL_TIMEOUT;
        loop {
            let position = self
                .consumer
                .position()
                .ok()
                .and_then(|list| list.find_partition(&self.topic, 0)?.offset().to_raw())
                .unwrap_or(0);
            if position >= end {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(ConnectorError::Kafka {
                    what: format!("reading {} to its end (offset {end})", self.topic),
                    message: format!("still at offset {position} after {CALL_TIMEOUT:?}"),
                }
                .into());
            }
            self.poll(Duration::from_millis(200))?;
        }
    }
}

/// Apply worker `worker`'s report (or its tombstone) at `offset` of
/// `topic` to `reports`.
fn apply_report(
    reports: &mut BTreeMap<String, WorkerReport>,
    topic: &str,
    worker: &str,
    value: Option<&[u8]>,
    offset: i64,
) -> Result<(), ControlError> {
    let Some(value) = value else {
        reports.remove(worker);
        return Ok(());
    };
    let report: WorkerReport = serde_json::from_slice(value).map_err(|e| {
        ControlError::Corrupt { topic: topic.to_string(), offset, message: e.to_string() }
    })?;
    reports.insert(worker.to_string(), report);
    Ok(())
}

/// Apply the record at `offset` of `topic` to `state`; whether it changed
/// a deployment.
fn apply(
    state: &mut ControlState,
    topic: &str,
    key: &str,
    value: Option<&[u8]>,
    offset: i64,
) -> Result<bool, ControlError> {
    let corrupt =
        |message: String| ControlError::Corrupt { topic: topic.to_string(), offset, message };
    if let Some(name) = key.strip_prefix(FUNCTION_KEY) {
        match value {
            Some(value) => state.functions.insert(name.to_string(), value.to_vec()),
            None => state.functions.remove(name),
        };
        return Ok(false);
    }
    let deployments = &mut state.deployments;
    let Some(name) = key.strip_prefix(PIPELINE_KEY) else {
        return Err(corrupt(format!("key {key:?} is neither pipeline/<name> nor function/<name>")));
    };
    let Some(value) = value else {
        return Ok(deployments.remove(name).is_some());
    };
    let deployment: Deployment =
        serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
    if deployment.pipeline != name {
        return Err(corrupt(format!("the record of {name:?} deploys {:?}", deployment.pipeline)));
    }
    let changed = deployments.get(name) != Some(&deployment);
    deployments.insert(name.to_string(), deployment);
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_deploy_change_and_delete_and_strangers_are_refused() {
        let mut state = ControlState::default();
        let orders = Deployment {
            pipeline: "orders".into(),
            version: 1,
            desired: Desired::Running,
            spec: "name: orders".into(),
            functions: BTreeMap::from([("key".into(), "ab".repeat(32))]),
            pins: BTreeMap::new(),
            deployed_at: 0,
            layout: 0,
            previous: None,
            restore: None,
        };
        let json = serde_json::to_vec(&orders).unwrap();
        let key = "pipeline/orders";
        assert!(apply(&mut state, "t", key, Some(&json), 0).unwrap());
        assert!(!apply(&mut state, "t", key, Some(&json), 1).unwrap(), "the same again");
        assert_eq!(state.deployments["orders"], orders);
        let error = apply(&mut state, "t", "pipeline/other", Some(&json), 2);
        assert!(matches!(error, Err(ControlError::Corrupt { offset: 2, .. })), "{error:?}");
        let error = apply(&mut state, "t", "junk", Some(b"{}"), 3);
        assert!(error.unwrap_err().to_string().contains("offset 3"));
        assert!(!apply(&mut state, "t", "function/revenue", Some(b"[]"), 4).unwrap());
        assert_eq!(state.functions["revenue"], b"[]");
        assert!(apply(&mut state, "t", key, None, 5).unwrap(), "a tombstone deletes");
        assert!(state.deployments.is_empty());
        apply(&mut state, "t", "function/revenue", None, 6).unwrap();
        assert!(state.functions.is_empty());
        // A record written before pins and deploy times were.
        let older =
            br#"{"pipeline":"orders","version":2,"desired":"running","spec":"","functions":{}}"#;
        apply(&mut state, "t", key, Some(older), 7).unwrap();
        assert_eq!(state.deployments["orders"].version, 2);
        assert!(ControlTopic::new("Bad Name", "b:1", BTreeMap::new()).is_err());
        let topic = ControlTopic::new("prod", "b:1", BTreeMap::new()).unwrap();
        assert_eq!(topic.topic(), "weir-prod-control");
    }
}
