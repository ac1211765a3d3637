//! One plan per worker group: the plan the group runs is recorded in
//! Kafka, and a worker of another plan is refused (see `docs/cluster.md`,
//! "One plan per group").
//!
//! **The record** is the committed offset of the worker group
//! (`weir-<name>-workers`) on partition 0 of the units topic, whose
//! metadata holds the plan's [`Fingerprint`] (JSON) and the worker that
//! recorded it. Workers never commit offsets as members (nothing is ever
//! written to the units topic), so only this module writes it: a worker
//! **outside** the group commits with generation −1, which the group
//! coordinator accepts only while the group has no member. So:
//!
//! * a worker whose plan equals the record joins;
//! * a worker of another plan records its own if no worker is in the group
//!   (none runs a unit: every unit took its final checkpoint on stop), and
//!   joins; while members are in the group the coordinator refuses the
//!   write and the worker is refused, naming both plans and what differs.
//!   Membership, not the record, decides: a crashed worker's record blocks
//!   nobody once its session has expired;
//! * on every assignment, before starting a unit, a member reads the
//!   record again ([`check`]): if two workers of different plans started
//!   while the group was empty, the last write wins (no write is accepted
//!   once either has joined), and the other one finds a record that is not
//!   its own and stops without running a unit.
//!
//! This module never decides who runs what: the group does.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
use super::ClusterPlan;
use crate::connectors::kafka::{client_config, kafka_error};
use crate::connectors::ConnectorError;

/// How long one read or write of the record may take.
const CALL: Duration = Duration::from_secs(10);

/// How long a worker of another plan waits for the group's members to go
/// before it is refused: a worker killed without leaving stays a member
/// for `session.timeout.ms` (6 s).
const MEMBERS_WAIT: Duration = Duration::from_secs(10);

/// Room in the record (Kafka's `offset.metadata.max.bytes` is 4096 by
/// default): beyond it, a record keeps only its digest and main parts.
const RECORD_MAX: usize = 3500;

/// What the record holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The plan the group runs.
    pub plan: Fingerprint,
    /// The worker that recorded it.
    pub worker: String,
}

/// Why a worker may not run its plan.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The group runs another plan and has members.
    #[error("this worker's plan {ours} differs from plan {theirs} that group {group} runs ({differs}), and the group has members ({members}): this worker takes no unit. Every worker of a pipeline must run the same spec with the same function files. To change the spec, stop every worker of the pipeline (each takes a final checkpoint of its units), then start them all with the new spec; to join the running workers, start this one with the spec they run")]
    Differs {
        /// This worker's plan (short digest).
        ours: String,
        /// The recorded one (short digest, and who recorded it).
        theirs: String,
        /// The group.
        group: String,
        /// What differs.
        differs: String,
        /// The group's members.
        members: String,
    },
    /// The record is not this worker's plan any more (another worker of
    /// another plan recorded its own while the group was empty).
    #[error("group {group} now runs plan {theirs}, not this worker's plan {ours} ({differs}): another worker recorded its plan while the group had no member; this worker runs no unit and stops. Start it with the spec the group runs, or stop every worker and start them all with one spec")]
    Replaced {
        /// This worker's plan (short digest).
        ours: String,
        /// The recorded one (short digest, and who recorded it).
        theirs: String,
        /// The group.
        group: String,
        /// What differs.
        differs: String,
    },
    /// Kafka could not be asked.
    #[error(transparent)]
    Kafka(#[from] ConnectorError),
}

/// A client of the group that never joins it: it reads and writes the
/// record from outside.
fn outsider(plan: &ClusterPlan) -> Result<BaseConsumer, ConnectorError> {
    client_config(
        &plan.bootstrap_servers,
        &[("group.id", plan.group.as_str()), ("enable.auto.commit", "false")],
        &plan.properties,
    )
    .create()
    .map_err(kafka_error("creating a reader of the recorded plan"))
}

/// The record's partition.
fn place(plan: &ClusterPlan) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    list.add_partition(&plan.units_topic, 0);
    list
}

/// The plan recorded for `plan`'s group, if any.
pub fn read(plan: &ClusterPlan) -> Result<Option<Recorded>, ConnectorError> {
    read_with(&outsider(plan)?, plan)
}

fn read_with(
    consumer: &BaseConsumer,
    plan: &ClusterPlan,
) -> Result<Option<Recorded>, ConnectorError> {
    let committed = consumer
        .committed_offsets(place(plan), CALL)
        .map_err(kafka_error(format!("reading the plan recorded for group {}", plan.group)))?;
    let Some(entry) = committed.find_partition(&plan.units_topic, 0) else { return Ok(None) };
    if !matches!(entry.offset(), Offset::Offset(_)) || entry.metadata().is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_str(entry.metadata()).unwrap_or_else(|_| Recorded {
        // Not ours to read (another Weir, or a person): a plan that differs.
        plan: Fingerprint { digest: "unreadable".into(), parts: BTreeMap::new() },
        worker: "unknown".into(),
    })))
}

/// What a write of the record did.
enum Written {
    /// `ours` is recorded.
    Recorded,
    /// Refused: the group has members.
    Members,
    /// Not yet: the units topic, just created, is not known everywhere.
    NotYet(ConnectorError),
}

/// Record `ours` from outside the group (the coordinator refuses a write
/// from outside while the group has members).
fn write(
    consumer: &BaseConsumer,
    plan: &ClusterPlan,
    ours: &Fingerprint,
    worker: &str,
) -> Result<Written, ConnectorError> {
    let mut record = Recorded { plan: ours.clone(), worker: worker.to_string() };
    let mut text = serde_json::to_string(&record).unwrap_or_default();
    if text.len() > RECORD_MAX {
        record
            .plan
            .parts
            .retain(|name, _| !name.starts_with("node ") && !name.starts_with("function "));
        text = serde_json::to_string(&record).unwrap_or_default();
    }
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(&plan.units_topic, 0, Offset::Offset(0))
        .map_err(kafka_error("naming the record's partition"))?;
    if let Some(mut entry) = list.find_partition(&plan.units_topic, 0) {
        entry.set_metadata(text);
    }
    let failed = kafka_error(format!("recording the plan of group {}", plan.group));
    match consumer.commit(&list, CommitMode::Sync) {
        Ok(()) => Ok(Written::Recorded),
        Err(error @ KafkaError::ConsumerCommit(RDKafkaErrorCode::UnknownTopicOrPartition)) => {
            Ok(Written::NotYet(failed(error)))
        }
        Err(error @ KafkaError::ConsumerCommit(_)) => {
            // Refused: members in the group (the usual reason), or Kafka
            // failed; the group's membership tells which.
            if members(consumer, plan)?.is_empty() {
                Err(failed(error))
            } else {
                Ok(Written::Members)
            }
        }
        Err(error) => Err(failed(error)),
    }
}

/// The members of `plan`'s group: client id (the worker id) and host.
fn members(consumer: &BaseConsumer, plan: &ClusterPlan) -> Result<Vec<String>, ConnectorError> {
    let groups = consumer
        .fetch_group_list(Some(&plan.group), CALL)
        .map_err(kafka_error(format!("listing the members of group {}", plan.group)))?;
    Ok(groups
        .groups()
        .iter()
        .filter(|g| g.name() == plan.group)
        .flat_map(|g| g.members())
        .map(|m| format!("{} at {}", m.client_id(), m.client_host().trim_start_matches('/')))
        .collect())
}

/// `recorded`'s short digest and who recorded it.
fn theirs(recorded: Option<&Recorded>) -> String {
    match recorded {
        Some(r) => format!("{} (recorded by worker {})", r.plan.short(), r.worker),
        None => "none recorded (workers of an older weir?)".to_string(),
    }
}

/// What differs between `ours` and the recorded plan.
fn differences(ours: &Fingerprint, recorded: Option<&Recorded>) -> String {
    let Some(recorded) = recorded else { return "nothing recorded to compare".into() };
    let found = ours.differences(&recorded.plan, "here", "in the group's plan");
    if found.is_empty() {
        "the units' specs differ in a setting".to_string()
    } else {
        found.join("; ")
    }
}

/// Before joining: a worker of plan `ours` may join `plan`'s group if the
/// group runs `ours`, or if the group has no member (then `ours` is
/// recorded); while members of another plan stay (up to [`MEMBERS_WAIT`]
/// for killed ones to expire), it is refused.
pub fn admit(plan: &ClusterPlan, ours: &Fingerprint, worker: &str) -> Result<(), AdmissionError> {
    let consumer = outsider(plan)?;
    let deadline = Instant::now() + MEMBERS_WAIT;
    // A broker just started answers NotCoordinator (or times out) until
    // its group coordinator has loaded: Kafka errors are tried again until
    // the deadline.
    let again = |error: &ConnectorError| {
        tracing::info!(%error, "the group's recorded plan cannot be read or written yet; trying again");
        std::thread::sleep(Duration::from_millis(500));
    };
    loop {
        let recorded = match read_with(&consumer, plan) {
            Ok(recorded) => recorded,
            Err(error) if Instant::now() < deadline => {
                again(&error);
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if recorded.as_ref().is_some_and(|r| r.plan.digest == ours.digest) {
            tracing::info!(plan = ours.short(), group = %plan.group, "this worker's plan is the one the group runs");
            return Ok(());
        }
        let written = match write(&consumer, plan, ours, worker) {
            Ok(written) => written,
            Err(error) if Instant::now() < deadline => {
                again(&error);
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        match written {
            Written::Recorded => {
                tracing::info!(
                    plan = ours.short(),
                    previous = %theirs(recorded.as_ref()),
                    group = %plan.group,
                    "no worker in the group: this worker's plan recorded as the one the group runs"
                );
                return Ok(());
            }
            Written::NotYet(error) if Instant::now() >= deadline => return Err(error.into()),
            Written::NotYet(error) => {
                tracing::debug!(%error, "the units topic is not known yet; trying again");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Written::Members => {}
        }
        let members = members(&consumer, plan)?;
        if Instant::now() >= deadline {
            return Err(AdmissionError::Differs {
                ours: ours.short().to_string(),
                theirs: theirs(recorded.as_ref()),
                group: plan.group.clone(),
                differs: differences(ours, recorded.as_ref()),
                members: members.join(", "),
            });
        }
        tracing::info!(
            plan = ours.short(),
            recorded = %theirs(recorded.as_ref()),
            members = %members.join(", "),
            "the group runs another plan: waiting for its members to leave (a killed worker stays a member for the session timeout)"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// After joining, before starting assigned units: the group still runs
/// `ours` (no worker of another plan recorded its own while the group had
/// no member). A failed read is tried twice more.
pub fn check(plan: &ClusterPlan, ours: &Fingerprint) -> Result<(), AdmissionError> {
    let mut attempt = 0;
    let recorded = loop {
        attempt += 1;
        match read(plan) {
            Ok(recorded) => break recorded,
            Err(error) if attempt < 3 => {
                tracing::warn!(%error, "reading the recorded plan; trying again");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(error) => return Err(error.into()),
        }
    };
    if recorded.as_ref().is_some_and(|r| r.plan.digest == ours.digest) {
        return Ok(());
    }
    Err(AdmissionError::Replaced {
        ours: ours.short().to_string(),
        theirs: theirs(recorded.as_ref()),
        group: plan.group.clone(),
        differs: differences(ours, recorded.as_ref()),
    })
}
