//! Kafka: a source reading assigned partitions at positions kept in
//! checkpoints, and a sink writing at-least-once or exactly-once (Kafka
//! transactions committed when a checkpoint completes), with their settings
//! (`type: kafka`). See [`sink`](self::sink) for how exactly-once survives
//! a crash at any instant, and [`exactly_once`](self::exactly_once) for
//! what it needs before a pipeline runs. User `properties` are checked by
//! [`properties`](self::properties) before anything connects. Outside
//! pipelines, [`admin`] creates and lists topics and [`console`] writes
//! lines of text to a topic and reads one (`weir kafka`).
//!
//! A broker outage longer than one call's timeout ([`CALL_TIMEOUT`]) does
//! not fail a run at once: the sink's flushes, pre-commits and commits and
//! the source's fetches retry transient errors (the broker unreachable, a
//! call timed out) for the run's retry budget, the checkpoint timeout (see
//! [`Retry`]). A transaction the broker aborted (its timeout, fencing) is
//! no transient error: the run fails and restarts from its checkpoint.

pub mod admin;
pub mod console;
mod exactly_once;
pub mod exchange;
mod fetch_queue;
mod properties;
mod sink;
mod source;

use exactly_once::check_exactly_once;
pub use exactly_once::{ExactlyOnceError, COMMIT_MARGIN};
pub use properties::{check_properties, served_property, ServedProperty};
pub use sink::{
    Delivery, Drained, DrainedRecord, KafkaSink, KafkaSinkConfig, MarkerPlace, PRODUCER_SETTINGS,
};
pub use source::{KafkaSource, KafkaSourceConfig, KafkaStart, OnDataLoss, FETCH_QUEUE_BACKOFF_MS};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer as _};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use super::config::Access;
use super::secrets::{is_secret_property, REDACTED};
use super::ConnectorError;

/// What a Kafka client with these settings touches on the host: its
/// brokers and its properties.
fn host_access(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    registry: Option<&crate::formats::SchemaRegistryConfig>,
) -> Vec<Access> {
    let mut accesses = vec![
        Access::KafkaBrokers {
            field: "bootstrap_servers".into(),
            servers: bootstrap_servers.to_string(),
        },
        Access::KafkaProperties { field: "properties".into(), properties: properties.clone() },
    ];
    accesses.extend(super::record_format::registry_access(registry));
    accesses
}

/// How long a metadata, offset or transaction call to the broker may take.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a failing call is retried when it returns at once.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// How long one attempt of a call that a cancelled run gives up lasts at
/// most: how soon the run's cancellation is seen while a broker does not
/// answer.
const CANCELLABLE_ATTEMPT: Duration = Duration::from_secs(5);

/// How long transient Kafka errors are retried before the run fails: the
/// checkpoint timeout (a checkpoint not done by then is abandoned anyway),
/// or until the run is cancelled (a worker that lost its units must not
/// wait minutes on a broker that does not answer).
#[derive(Clone)]
pub(crate) struct Retry {
    budget: Duration,
    cancelled: Option<crate::connectors::Cancelled>,
}

impl Default for Retry {
    /// One call's timeout, until the pipeline sets its budget.
    fn default() -> Self {
        Self { budget: CALL_TIMEOUT, cancelled: None }
    }
}

impl std::fmt::Debug for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retry")
            .field("budget", &self.budget)
            .field("cancellable", &self.cancelled.is_some())
            .finish()
    }
}

impl Retry {
    /// Retry for `budget`.
    pub(crate) fn for_up_to(budget: Duration) -> Self {
        Self { budget, cancelled: None }
    }

    /// The same budget, given up as soon as `cancelled` says so.
    pub(crate) fn cancelled_by(self, cancelled: crate::connectors::Cancelled) -> Self {
        Self { cancelled: Some(cancelled), ..self }
    }

    /// The budget.
    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }

    /// Whether the run this retries for was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.as_ref().is_some_and(|cancelled| cancelled())
    }

    /// Call `call` with a timeout (at most [`CALL_TIMEOUT`]) until it
    /// succeeds, fails for good, or fails transiently past the budget;
    /// errors name `what` (and how long it was retried).
    fn call<T>(
        &self,
        what: impl Fn() -> String,
        mut call: impl FnMut(Duration) -> Result<T, KafkaError>,
    ) -> Result<T, ConnectorError> {
        let started = Instant::now();
        let deadline = started + self.budget;
        let mut failures = 0u32;
        let longest = match self.cancelled {
            Some(_) => CANCELLABLE_ATTEMPT,
            None => CALL_TIMEOUT,
        };
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt_started = Instant::now();
            match call(longest.min(remaining).max(RETRY_PAUSE)) {
                Ok(value) => {
                    if failures > 0 {
                        tracing::info!(what = %what(), after = ?started.elapsed(), "kafka call succeeded after transient failures");
                    }
                    return Ok(value);
                }
                Err(error) if is_transient(&error) && self.is_cancelled() => {
                    return Err(ConnectorError::Kafka {
                        what: what(),
                        message: format!("{error} (the run was cancelled while the broker did not answer; not retried)"),
                    })
                }
                Err(error) if is_transient(&error) && Instant::now() < deadline => {
                    failures += 1;
                    tracing::warn!(what = %what(), %error, retrying_for = ?deadline.saturating_duration_since(Instant::now()), "kafka call failed transiently; retrying");
                    if attempt_started.elapsed() < RETRY_PAUSE {
                        std::thread::sleep(RETRY_PAUSE.min(remaining));
                    }
                }
                Err(error) if is_transient(&error) => {
                    return Err(outlasted(what(), &error, started.elapsed()))
                }
                Err(error) => return Err(kafka_error(what())(error)),
            }
        }
    }
}

/// The error of a broker outage that lasted (`lasted`) past the retry
/// budget, naming the setting to raise.
fn outlasted(what: String, error: &KafkaError, lasted: Duration) -> ConnectorError {
    let lasted = humantime::format_duration(Duration::from_secs(lasted.as_secs()));
    ConnectorError::Kafka {
        what,
        message: format!(
            "{error} (the broker has been unreachable for {lasted}; the retry budget is checkpoint.timeout: raise it to ride out longer broker outages)"
        ),
    }
}

/// Whether a failed call may succeed if made again: the broker could not
/// be reached or did not answer in time. A transaction that must be
/// aborted, a fenced producer, a failed delivery are not.
fn is_transient(error: &KafkaError) -> bool {
    match error {
        KafkaError::Transaction(error) => {
            error.is_retriable() && !error.is_fatal() && !error.txn_requires_abort()
        }
        other => other.rdkafka_error_code().is_some_and(is_transient_code),
    }
}

/// Error codes of a broker that is down, restarting or moving leadership.
pub(crate) fn is_transient_code(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::Resolve
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::RequestTimedOut
            | C::NetworkException
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::BrokerNotAvailable
            | C::CoordinatorLoadInProgress
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::ConcurrentTransactions
    )
}

/// A client configuration: the bootstrap servers, Weir's own settings, then
/// the user's `properties` (security, tuning; [`check_properties`] keeps
/// them off Weir's own settings).
pub(crate) fn client_config(
    bootstrap_servers: &str,
    ours: &[(&str, &str)],
    properties: &BTreeMap<String, String>,
) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap_servers);
    for (key, value) in ours {
        config.set(*key, *value);
    }
    for (key, value) in properties {
        config.set(key, value);
    }
    config
}

/// A producer's context that counts the delivery reports it was handed,
/// so the thread that sends can serve them itself ([`serve_deliveries`]).
pub trait CountsDeliveries: rdkafka::producer::ProducerContext {
    /// Delivery reports handed to the context so far.
    fn reports(&self) -> u64;
}

/// Serve every delivery report waiting on `producer`; how many there were.
///
/// Weir's producers are `BaseProducer`s served by the thread that sends,
/// not `ThreadedProducer`s with a polling thread of their own: librdkafka
/// frees each record's copy when its report is served, so the memory goes
/// back to the thread that allocated it, and no third thread competes for
/// the cores.
pub fn serve_deliveries<C: CountsDeliveries>(producer: &BaseProducer<C>) -> u64 {
    let start = producer.context().reports();
    loop {
        let before = producer.context().reports();
        producer.poll(Duration::ZERO);
        if producer.context().reports() == before {
            return before - start;
        }
    }
}

/// How long [`flush_promptly`] serves reports between its checks.
const FLUSH_POLL: Duration = Duration::from_millis(2);

/// Wait up to `timeout` until everything `producer` sent is delivered,
/// serving the delivery reports as they come.
///
/// rdkafka's `BaseProducer::flush` polls for 100 ms at a time between its
/// checks (its `poll` waits out the whole timeout even when reports
/// arrive), so every flush that had to wait at all took 100–300 ms: that
/// stalled an exactly-once sink at each barrier. This one checks the
/// producer's queue every [`FLUSH_POLL`]; it asks librdkafka to flush only
/// once, to send what lingers (each such call wakes every broker thread,
/// which dozens of a worker's sinks flushing at once could not afford).
pub fn flush_promptly<C: CountsDeliveries>(
    producer: &BaseProducer<C>,
    timeout: Duration,
) -> Result<(), KafkaError> {
    let deadline = Instant::now() + timeout;
    if producer.flush(Duration::ZERO).is_ok() {
        return Ok(());
    }
    loop {
        serve_deliveries(producer);
        if producer.in_flight_count() == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
        }
        producer.poll(FLUSH_POLL);
    }
}

/// Send `record`; while librdkafka's queue is full, serve the delivery
/// reports that free it, waiting `pause` at a time while there are none —
/// until `cancelled` says the run was cancelled (then
/// [`KafkaError::Canceled`]): a broker that takes nothing (down, or a
/// worker that lost its units) would otherwise hold the caller until the
/// queued records time out, minutes later.
pub fn send_waiting<K, P, C>(
    producer: &BaseProducer<C>,
    mut record: rdkafka::producer::BaseRecord<'_, K, P, C::DeliveryOpaque>,
    pause: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<(), KafkaError>
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
    C: CountsDeliveries,
{
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                if serve_deliveries(producer) == 0 {
                    if cancelled() {
                        return Err(KafkaError::Canceled);
                    }
                    std::thread::sleep(pause);
                }
            }
            Err((error, _)) => return Err(error),
        }
    }
}

/// The partitions of `topic`, in order; a topic that does not exist is an
/// error naming it.
pub(crate) fn topic_partitions<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
) -> Result<Vec<i32>, ConnectorError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), CALL_TIMEOUT)
        .map_err(kafka_error(format!("reading the metadata of topic {topic}")))?;
    let found = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .filter(|t| t.error().is_none() && !t.partitions().is_empty());
    let found = found.ok_or_else(|| ConnectorError::Config {
        what: format!("kafka topic {topic:?}"),
        message: "does not exist".into(),
    })?;
    let mut ids: Vec<i32> = found.partitions().iter().map(|p| p.id()).collect();
    ids.sort_unstable();
    Ok(ids)
}

/// A Kafka failure, naming what was being done.
pub(crate) fn kafka_error(
    what: impl Into<String>,
) -> impl FnOnce(rdkafka::error::KafkaError) -> ConnectorError {
    let what = what.into();
    move |error| ConnectorError::Kafka { what, message: describe(&error) }
}

/// What `error` says, without the value of a secret property: a refused
/// client setting is quoted with its value, and this error reaches a
/// pipeline's status and the logs.
fn describe(error: &KafkaError) -> String {
    match error {
        KafkaError::ClientConfig(_, description, key, value) if is_secret_property(key) => {
            let description = match value.is_empty() {
                true => description.clone(),
                false => description.replace(value.as_str(), REDACTED),
            };
            format!("Client config error: {description} {key} {REDACTED}")
        }
        other => other.to_string(),
    }
}

/// The broker's `transaction.max.timeout.ms`, if it answers a
/// DescribeConfigs request (not every Kafka-protocol broker does).
pub fn broker_transaction_max_timeout(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
) -> Option<Duration> {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> =
        client_config(bootstrap_servers, &[], properties).create().ok()?;
    let metadata = admin.inner().fetch_metadata(None, CALL_TIMEOUT).ok()?;
    let broker = metadata.brokers().first()?.id();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    let options = AdminOptions::new().request_timeout(Some(CALL_TIMEOUT));
    let results = runtime
        .block_on(admin.describe_configs(&[ResourceSpecifier::Broker(broker)], &options))
        .ok()?;
    let resource = results.into_iter().next()?.ok()?;
    let millis: u64 = resource.get("transaction.max.timeout.ms")?.value.as_deref()?.parse().ok()?;
    Some(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_run_stops_retrying_a_broker_that_does_not_answer() {
        let timed_out = || KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut);
        let budget = Duration::from_secs(600);
        let cancelled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&cancelled);
        let retry = Retry::for_up_to(budget).cancelled_by(std::sync::Arc::new(move || {
            flag.load(std::sync::atomic::Ordering::Relaxed)
        }));
        let mut timeouts = Vec::new();
        let error = retry
            .call(
                || "flushing orders".to_string(),
                |timeout| {
                    timeouts.push(timeout);
                    // The run is cancelled while the first attempt waits.
                    cancelled.store(true, std::sync::atomic::Ordering::Relaxed);
                    Err::<(), _>(timed_out())
                },
            )
            .unwrap_err()
            .to_string();
        assert_eq!(timeouts, [CANCELLABLE_ATTEMPT], "one short attempt, not retried");
        assert!(
            error.contains("flushing orders") && error.contains("the run was cancelled"),
            "{error}"
        );
        // Without a hook the attempts are as long as a call may take.
        let mut attempts = 0;
        let done = Retry::for_up_to(budget).call(
            || "flushing orders".to_string(),
            |timeout| {
                attempts += 1;
                assert_eq!(timeout, CALL_TIMEOUT);
                if attempts < 2 {
                    Err(timed_out())
                } else {
                    Ok(())
                }
            },
        );
        assert!(done.is_ok());
    }

    #[test]
    fn a_refused_secret_setting_is_not_quoted() {
        // librdkafka refuses a Java client's property; the error used to
        // quote its value, which then reached the pipeline's status.
        let properties = BTreeMap::from([
            ("ssl.truststore.password".to_string(), "hunter2-secret".to_string()),
            ("client.id".to_string(), "weir-test".to_string()),
        ]);
        let refused = client_config("127.0.0.1:1", &[], &properties)
            .create::<BaseConsumer>()
            .map(|_| ())
            .map_err(kafka_error("creating the consumer"))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("ssl.truststore.password"), "{refused}");
        assert!(!refused.contains("hunter2"), "{refused}");
        assert!(refused.contains(REDACTED), "{refused}");

        // Other settings are quoted as they were.
        let properties = BTreeMap::from([("no.such.tuning".to_string(), "42".to_string())]);
        let refused = client_config("127.0.0.1:1", &[], &properties)
            .create::<BaseConsumer>()
            .map(|_| ())
            .map_err(kafka_error("creating the consumer"))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("no.such.tuning 42"), "{refused}");
    }
}
