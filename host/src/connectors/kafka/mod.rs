//! Kafka: a source reading assigned partitions at positions kept in
//! checkpoints, and a sink writing at-least-once or exactly-once (Kafka
//! transactions committed when a checkpoint completes), with their settings
//! (`type: kafka`). See [`sink`](self::sink) for how exactly-once survives
//! a crash at any instant, and [`exactly_once`](self::exactly_once) for
//! what it needs before a pipeline runs. User `properties` are checked by
//! [`properties`](self::properties) before anything connects.

mod exactly_once;
mod properties;
mod sink;
mod source;

pub use exactly_once::{check_exactly_once, exactly_once_sink, ExactlyOnceError, RESTART_MARGIN};
pub use properties::check_properties;
pub use sink::{
    commit_marker_location, committed_checkpoint, set_commit_marker, CommitMarker, Delivery,
    KafkaSink, KafkaSinkConfig,
};
pub use source::{KafkaSource, KafkaSourceConfig, KafkaStart, OnDataLoss};

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;

use super::ConnectorError;

/// How long a metadata, offset or transaction call to the broker may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A client configuration: the bootstrap servers, Weir's own settings, then
/// the user's `properties` (security, tuning; [`check_properties`] keeps
/// them off Weir's own settings).
fn client_config(
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

/// A Kafka failure, naming what was being done.
fn kafka_error(
    what: impl Into<String>,
) -> impl FnOnce(rdkafka::error::KafkaError) -> ConnectorError {
    let what = what.into();
    move |error| ConnectorError::Kafka { what, message: error.to_string() }
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
