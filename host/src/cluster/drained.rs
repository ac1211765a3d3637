//! Which units of a plan were drained: a drained stop's final transaction
//! writes the unit's [`Drained`] record to its partition of the units
//! topic (see `docs/cluster.md`), committed with the unit's last output,
//! so a `read_committed` read of the topic says exactly which units have
//! ended for good. A drained unit never runs again: whatever it would
//! write would come after its readers saw its end.

use std::collections::BTreeMap;

use super::ClusterPlan;
use rdkafka::consumer::BaseConsumer;

use crate::connectors::kafka::console::{read_records, ReadOptions};
use crate::connectors::kafka::Drained;
use crate::connectors::kafka::{client_config, kafka_error, topic_partitions};
use crate::connectors::ConnectorError;

/// The units of `plan` whose drained record is committed, with the id of
/// each one's final snapshot.
pub fn drained_units(plan: &ClusterPlan) -> Result<BTreeMap<String, u64>, ConnectorError> {
    let mut drained = BTreeMap::new();
    // A layout whose units topic does not exist yet never ran: nothing of
    // it drained.
    let reader: BaseConsumer = client_config(&plan.bootstrap_servers, &[], &plan.properties)
        .create()
        .map_err(kafka_error("creating a metadata reader"))?;
    match topic_partitions(&reader, &plan.units_topic) {
        Ok(_) => {}
        Err(ConnectorError::Config { .. }) => return Ok(drained),
        Err(error) => return Err(error),
    }
    let options = ReadOptions { read_committed: true, ..ReadOptions::default() };
    read_records(
        &plan.bootstrap_servers,
        &plan.properties,
        &plan.units_topic,
        options,
        |record| {
            let Some(value) = record.and_then(|r| r.value.as_deref()) else { return true };
            match serde_json::from_slice::<Drained>(value) {
                Ok(record) if plan.units.iter().any(|u| u.name == record.unit) => {
                    drained.insert(record.unit, record.snapshot);
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(topic = %plan.units_topic, %error, "ignoring an unreadable record of the units topic")
                }
            }
            true
        },
    )?;
    Ok(drained)
}

/// Whether every unit of `plan` was drained: nothing of it runs again,
/// and its exchange topics hold nothing a task has not read.
pub fn all_drained(plan: &ClusterPlan) -> Result<bool, ConnectorError> {
    Ok(undrained(plan, &drained_units(plan)?).is_empty())
}

/// The units of `plan` not among `drained` (from [`drained_units`]).
pub fn undrained<'p>(plan: &'p ClusterPlan, drained: &BTreeMap<String, u64>) -> Vec<&'p str> {
    plan.units.iter().filter(|u| !drained.contains_key(&u.name)).map(|u| u.name.as_str()).collect()
}
