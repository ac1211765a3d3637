//! Topics from outside a pipeline: create one and wait until the brokers
//! list its partitions ([`create_topic`]), or list them ([`list_topics`]).
//! For `weir kafka topic` and for whoever prepares the input and output
//! topics a pipeline names. It never deletes a topic nor changes one that
//! exists, and it leaves alone the topics a pipeline's workers make for
//! themselves (`crate::cluster::topics`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::types::RDKafkaErrorCode;

use super::{client_config, kafka_error, topic_partitions, CALL_TIMEOUT};
use crate::connectors::ConnectorError;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRequest {
    /// Its name.
    pub name: String,
    /// Its partitions (at least 1).
    pub partitions: i32,
    /// Copies of each partition; `None` takes the brokers'
    /// `default.replication.factor`.
    pub replication_factor: Option<i32>,
    /// Topic configs (`retention.ms`, `cleanup.policy`, …).
    pub configs: BTreeMap<String, String>,
}

/// What [`create_topic`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The topic was created; the brokers list its partitions.
    Created,
    /// The topic existed already, with `partitions` partitions: it was
    /// left as it was (whatever its partitions and configs).
    Existed {
        /// Its partitions.
        partitions: usize,
    },
}

/// A topic as the brokers' metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Its name.
    pub name: String,
    /// Its partitions.
    pub partitions: usize,
}

/// An admin client of `bootstrap_servers` (client settings
/// `properties`), and a runtime to wait on its calls.
pub(crate) fn admin_client(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
) -> Result<(AdminClient<DefaultClientContext>, tokio::runtime::Runtime), ConnectorError> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(bootstrap_servers, &[], properties)
            .create()
            .map_err(kafka_error("creating the admin client"))?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            ConnectorError::Kafka { what: "the admin client".into(), message: e.to_string() }
        })?;
    Ok((admin, runtime))
}

/// Create `request`'s topic on the brokers of `bootstrap_servers` (client
/// settings `properties`: security, …) unless it exists, and wait until
/// their metadata lists every partition, so a producer started next finds
/// them. A topic that exists is left as it is and said so, with its
/// partition count.
pub fn create_topic(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    request: &TopicRequest,
) -> Result<Created, ConnectorError> {
    let name = request.name.as_str();
    if request.partitions < 1 {
        return Err(ConnectorError::Config {
            what: format!("kafka topic {name:?}"),
            message: format!("needs at least one partition, not {}", request.partitions),
        });
    }
    let (admin, runtime) = admin_client(bootstrap_servers, properties)?;
    let replication = TopicReplication::Fixed(request.replication_factor.unwrap_or(-1));
    let mut topic = NewTopic::new(name, request.partitions, replication);
    for (key, value) in &request.configs {
        topic = topic.set(key, value);
    }
    let options = AdminOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .operation_timeout(Some(CALL_TIMEOUT));
    let results = runtime
        .block_on(admin.create_topics([&topic], &options))
        .map_err(kafka_error(format!("creating topic {name}")))?;
    let reader: BaseConsumer = client_config(bootstrap_servers, &[], properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                let partitions = topic_partitions(&reader, name)?.len();
                return Ok(Created::Existed { partitions });
            }
            Err((topic, code)) => {
                return Err(ConnectorError::Kafka {
                    what: format!("creating topic {topic}"),
                    message: code.to_string(),
                })
            }
        }
    }
    // The controller created it; the brokers' metadata may lag a moment.
    let wanted = usize::try_from(request.partitions).unwrap_or(usize::MAX);
    let deadline = Instant::now() + CALL_TIMEOUT;
    loop {
        match topic_partitions(&reader, name) {
            Ok(found) if found.len() >= wanted => return Ok(Created::Created),
            Ok(_) | Err(ConnectorError::Config { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(found) => {
                return Err(ConnectorError::Kafka {
                    what: format!("creating topic {name}"),
                    message: format!(
                        "created, but the brokers list {} of its {wanted} partitions after {CALL_TIMEOUT:?}",
                        found.len()
                    ),
                })
            }
            Err(error) => return Err(error),
        }
    }
}

/// Delete the topics `names` from the brokers of `bootstrap_servers`; one
/// that does not exist (deleted already) is no error.
pub fn delete_topics(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    names: &[&str],
) -> Result<(), ConnectorError> {
    if names.is_empty() {
        return Ok(());
    }
    let (admin, runtime) = admin_client(bootstrap_servers, properties)?;
    let options = AdminOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .operation_timeout(Some(CALL_TIMEOUT));
    let results = runtime
        .block_on(admin.delete_topics(names, &options))
        .map_err(kafka_error(format!("deleting topics {}", names.join(", "))))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
            Err((topic, code)) => {
                return Err(ConnectorError::Kafka {
                    what: format!("deleting topic {topic}"),
                    message: code.to_string(),
                })
            }
        }
    }
    Ok(())
}

/// The topics of the brokers of `bootstrap_servers`, by name, leaving out
/// Kafka's internal ones (`__consumer_offsets`, `__transaction_state`, …).
pub fn list_topics(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
) -> Result<Vec<TopicInfo>, ConnectorError> {
    let reader: BaseConsumer = client_config(bootstrap_servers, &[], properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    let metadata = reader
        .fetch_metadata(None, CALL_TIMEOUT)
        .map_err(kafka_error("reading the brokers' metadata"))?;
    let mut topics: Vec<TopicInfo> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none() && !t.name().starts_with("__"))
        .map(|t| TopicInfo { name: t.name().to_string(), partitions: t.partitions().len() })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_without_partitions_is_refused_before_anything_connects() {
        let request = TopicRequest {
            name: "orders".into(),
            partitions: 0,
            replication_factor: None,
            configs: BTreeMap::new(),
        };
        // Nothing listens on port 1: the request never got that far.
        let refused = create_topic("127.0.0.1:1", &BTreeMap::new(), &request).unwrap_err();
        assert!(refused.to_string().contains("at least one partition"), "{refused}");
    }
}
