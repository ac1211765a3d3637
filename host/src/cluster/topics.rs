//! The topics a pipeline's workers share, created by whichever worker
//! starts first and checked by every other: the exchange topics (one
//! partition per task of the stage they feed; records kept for
//! `cluster.repartition_retention`) and the units topic (one partition per
//! unit, never written: its assignment is the units' assignment). A topic
//! that exists with another partition count means the pipeline's shape
//! changed under workers or topics that kept the old one: refused, naming
//! the way out.

use std::collections::BTreeMap;

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::BaseConsumer;
use rdkafka::types::RDKafkaErrorCode;

use super::ClusterPlan;
use crate::connectors::kafka::admin::admin_client;
use crate::connectors::kafka::{client_config, kafka_error, topic_partitions, CALL_TIMEOUT};
use crate::connectors::ConnectorError;

/// Why the shared topics are not usable.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// The broker could not be asked or refused.
    #[error(transparent)]
    Kafka(#[from] ConnectorError),
    /// A topic exists with another shape.
    #[error("topic {topic} has {found} partitions, the plan needs {wanted} ({why}): stop every worker of the pipeline, then delete the topic — or run the pipeline with its old shape")]
    Shape {
        /// The topic.
        topic: String,
        /// Its partitions.
        found: usize,
        /// What the plan needs.
        wanted: usize,
        /// What those partitions stand for.
        why: &'static str,
    },
}

/// Create the plan's units topic if it is missing, and nothing else: the
/// plan the group runs is recorded on it ([`super::admission`]) before a
/// worker creates or changes anything else.
pub fn create_units_topic(plan: &ClusterPlan) -> Result<(), TopicError> {
    let (admin, runtime) = admin(&plan.bootstrap_servers, &plan.properties)?;
    create(replication(plan), &admin, &runtime, &[units_topic(plan)])
}

/// Create the compacted, one-partition topic `name` on `bootstrap_servers`
/// if it is missing (a cluster's control or status topic,
/// [`super::control`]).
pub fn create_compacted(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    name: &str,
) -> Result<(), TopicError> {
    let (admin, runtime) = admin(bootstrap_servers, properties)?;
    let wanted = Wanted {
        name: name.to_string(),
        partitions: 1,
        // Small segments: compaction (which skips the active segment)
        // keeps a reader's catch-up short.
        configs: vec![("cleanup.policy", "compact"), ("segment.ms", "600000")],
        why: "the cluster's control records",
    };
    create(-1, &admin, &runtime, &[wanted])
}

/// Create the plan's exchange and units topics where missing; check the
/// partition count of those that exist.
pub fn ensure(plan: &ClusterPlan) -> Result<(), TopicError> {
    let retention = plan.settings.repartition_retention.as_millis().to_string();
    let mut wanted: Vec<Wanted> = plan
        .exchanges
        .iter()
        .map(|t| Wanted {
            name: t.name.clone(),
            partitions: usize::from(t.partitions),
            configs: vec![
                ("cleanup.policy", "delete"),
                ("retention.ms", retention.as_str()),
                // Retention counts from when records were written (their
                // event time travels in a header).
                ("message.timestamp.type", "LogAppendTime"),
            ],
            why: "the tasks of the stage it feeds",
        })
        .collect();
    wanted.push(units_topic(plan));
    let (admin, runtime) = admin(&plan.bootstrap_servers, &plan.properties)?;
    create(replication(plan), &admin, &runtime, &wanted)?;
    let options = AdminOptions::new().request_timeout(Some(CALL_TIMEOUT));
    let reader: BaseConsumer = client_config(&plan.bootstrap_servers, &[], &plan.properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    for w in &wanted {
        let count = topic_partitions(&reader, &w.name)?.len();
        if count < w.partitions && w.name == plan.units_topic {
            // Units were added (an input topic grew): the units topic
            // grows with them; each partition stands for one unit.
            let total = w.partitions;
            let grow = [NewPartitions::new(&w.name, total)];
            let results = runtime
                .block_on(admin.create_partitions(&grow, &options))
                .map_err(kafka_error(format!("adding partitions to {}", w.name)))?;
            for result in results {
                if let Err((topic, code)) = result {
                    return Err(ConnectorError::Kafka {
                        what: format!("adding partitions to {topic}"),
                        message: code.to_string(),
                    }
                    .into());
                }
            }
            tracing::info!(topic = %w.name, from = count, to = total, "units topic grown: the plan has new units");
            continue;
        }
        if count != w.partitions {
            return Err(TopicError::Shape {
                topic: w.name.clone(),
                found: count,
                wanted: w.partitions,
                why: w.why,
            });
        }
    }
    Ok(())
}

/// The units topic as the plan needs it.
fn units_topic(plan: &ClusterPlan) -> Wanted<'static> {
    Wanted {
        name: plan.units_topic.clone(),
        partitions: plan.units.len(),
        configs: Vec::new(),
        why: "the pipeline's units",
    }
}

/// The replication factor of the plan's topics (`-1`: the broker's default).
fn replication(plan: &ClusterPlan) -> i32 {
    plan.settings.replication_factor.map_or(-1, i32::from)
}

/// An admin client of `bootstrap_servers`, and a runtime to wait on it.
fn admin(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
) -> Result<(AdminClient<DefaultClientContext>, tokio::runtime::Runtime), TopicError> {
    Ok(admin_client(bootstrap_servers, properties)?)
}

/// Create the topics of `wanted` that do not exist, replicated
/// `replication` times (`-1`: the broker's default).
fn create(
    replication: i32,
    admin: &AdminClient<DefaultClientContext>,
    runtime: &tokio::runtime::Runtime,
    wanted: &[Wanted<'_>],
) -> Result<(), TopicError> {
    let topics: Vec<NewTopic<'_>> = wanted
        .iter()
        .map(|w| {
            let partitions = i32::try_from(w.partitions).unwrap_or(i32::MAX);
            let mut topic =
                NewTopic::new(&w.name, partitions, TopicReplication::Fixed(replication));
            for (key, value) in &w.configs {
                topic = topic.set(key, value);
            }
            topic
        })
        .collect();
    let options = AdminOptions::new().request_timeout(Some(CALL_TIMEOUT));
    let results = runtime
        .block_on(admin.create_topics(&topics, &options))
        .map_err(kafka_error("creating topics"))?;
    for result in results {
        match result {
            Ok(topic) => tracing::info!(topic, "topic created"),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(ConnectorError::Kafka {
                    what: format!("creating topic {topic}"),
                    message: code.to_string(),
                }
                .into())
            }
        }
    }
    Ok(())
}

/// A topic the plan needs.
struct Wanted<'a> {
    name: String,
    partitions: usize,
    configs: Vec<(&'static str, &'a str)>,
    /// What its partitions stand for.
    why: &'static str,
}
