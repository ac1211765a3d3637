//! A pipeline's **layout** on a cluster: how its plan cuts it into units
//! and exchange topics (each stage's tasks, each input partition's ingest
//! unit). An upgrade that keeps the layout switches by stopping the old
//! version's units and restoring the same units in the new one. One that
//! changes it (a rescale: another parallelism, more input partitions)
//! names its tasks, exchange topics and units topic anew
//! ([`ClusterSettings::layout`](crate::specification::ClusterSettings)),
//! and switches at a drained point (see `docs/cluster.md`, "Rescaling"):
//! the old layout's units are drained — ingest units first, each task once
//! it has read every producer's end — so its exchange topics hold nothing
//! unread; then each new task takes the state of its key groups from the
//! drained tasks' final snapshots ([`Seed`]) and the ingest units restore
//! their own.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use super::control::Deployment;
use super::{ClusterPlan, UnitRole};
use crate::pipeline::{Seed, SeedFrom};
use crate::specification::PipelineSpec;
use crate::state::key_group_range;

/// Why a deployment's layout could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A spec does not parse or cannot be cut into units.
    #[error("{0}")]
    Plan(String),
    /// The layout before the current one is still being drained.
    #[error("pipeline {pipeline} is still switching from its previous layout (version {previous}): some of its units have not drained yet; change its layout again once they have (`weir pipeline status` shows them)")]
    Draining {
        /// The pipeline.
        pipeline: String,
        /// The version whose layout drains.
        previous: u64,
    },
    /// Kafka could not be read.
    #[error("reading which units are drained: {0}")]
    Kafka(String),
}

/// Set the layout `spec` is planned in (see [`ClusterSettings::layout`]).
///
/// [`ClusterSettings::layout`]: crate::specification::ClusterSettings
pub fn in_layout(spec: &mut PipelineSpec, layout: u64) {
    if layout > 0 || spec.cluster.is_some() {
        spec.cluster.get_or_insert_with(Default::default).layout = layout;
    }
}

/// What a plan's layout is: its units (name and role) and exchange topics
/// (name and partitions).
#[derive(PartialEq)]
struct Shape {
    units: Vec<(String, UnitRole)>,
    exchanges: Vec<(String, u16)>,
}

fn shape(plan: &ClusterPlan) -> Shape {
    Shape {
        units: plan.units.iter().map(|u| (u.name.clone(), u.role.clone())).collect(),
        exchanges: plan.exchanges.iter().map(|e| (e.name.clone(), e.partitions)).collect(),
    }
}

/// `next` (its version set) as it follows `current`: in `current`'s layout
/// when its plan cuts the pipeline the same way, carrying a previous
/// layout still to drain; else in a layout of its own (named by its
/// version) with `current` as the layout to drain first — refused while
/// `current`'s own previous layout has not drained. `planned` plans a
/// deployment in its layout; `drained` says whether a deployment's units
/// have all drained.
pub fn follow(
    current: &Deployment,
    mut next: Deployment,
    planned: &dyn Fn(&Deployment) -> Result<ClusterPlan, LayoutError>,
    drained: &dyn Fn(&Deployment) -> Result<bool, LayoutError>,
) -> Result<Deployment, LayoutError> {
    let as_now = Deployment { layout: current.layout, ..next.clone() };
    let same = shape(&planned(current)?) == shape(&planned(&as_now)?);
    if same {
        next.layout = current.layout;
        next.previous.clone_from(&current.previous);
        return Ok(next);
    }
    if let Some(previous) = &current.previous {
        if !drained(previous)? {
            return Err(LayoutError::Draining {
                pipeline: current.pipeline.clone(),
                previous: previous.version,
            });
        }
    }
    next.layout = next.version;
    next.previous = Some(before(current));
    Ok(next)
}

/// `current` as the layout a new one drains first: with its own previous
/// layout (drained already, but what its tasks take their state from if
/// they never ran), and no further.
pub fn before(current: &Deployment) -> Box<Deployment> {
    let previous =
        current.previous.as_ref().map(|p| Box::new(Deployment { previous: None, ..(**p).clone() }));
    Box::new(Deployment { previous, ..current.clone() })
}

/// Where each task of `new` takes its state from on its first start: the
/// drained tasks of the same stage in `old` whose key groups overlap its
/// own, each with its final snapshot (`drained`, by unit).
pub fn seeds(
    new: &ClusterPlan,
    old: &ClusterPlan,
    drained: &BTreeMap<String, u64>,
) -> BTreeMap<String, Seed> {
    let max = new.spec.max_parallelism;
    task_seeds(new, |stage, ours| {
        let before = tasks(old, stage);
        let from: Vec<(String, u64)> = old
            .units
            .iter()
            .filter_map(|old_unit| match &old_unit.role {
                UnitRole::Task { stage: s, task } if s == stage => {
                    let theirs = key_group_range(*task, max, before);
                    let overlap = theirs.start() <= ours.end() && ours.start() <= theirs.end();
                    let id = drained.get(&old_unit.name)?;
                    overlap.then(|| (old_unit.name.clone(), *id))
                }
                _ => None,
            })
            .collect();
        (before > 0).then_some(SeedFrom::Units(from))
    })
}

/// Where each task of `plan` takes its state from on its first start when
/// the pipeline was deployed from the checkpoint or savepoint at `location`:
/// that snapshot, its key groups.
pub fn snapshot_seeds(plan: &ClusterPlan, location: &str) -> BTreeMap<String, Seed> {
    task_seeds(plan, |_, _| Some(SeedFrom::Snapshot(location.to_string())))
}

/// A seed for each task of `plan` whose stage and key groups `from` names
/// snapshots for.
fn task_seeds(
    plan: &ClusterPlan,
    from: impl Fn(&str, &RangeInclusive<u16>) -> Option<SeedFrom>,
) -> BTreeMap<String, Seed> {
    let max = plan.spec.max_parallelism;
    let mut seeds = BTreeMap::new();
    for unit in &plan.units {
        let UnitRole::Task { stage, task } = &unit.role else { continue };
        let key_groups = key_group_range(*task, max, tasks(plan, stage));
        let Some(from) = from(stage, &key_groups) else { continue };
        let uid = unit
            .spec
            .operators
            .get(stage)
            .and_then(|node| node.uid.clone())
            .unwrap_or_else(|| stage.to_string());
        seeds.insert(unit.name.clone(), Seed { stage: uid, key_groups, from });
    }
    seeds
}

/// The number of tasks of stage `stage` in `plan`.
fn tasks(plan: &ClusterPlan, stage: &str) -> u16 {
    let count = plan
        .units
        .iter()
        .filter(|u| matches!(&u.role, UnitRole::Task { stage: s, .. } if s == stage))
        .count();
    u16::try_from(count).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::kafka::KafkaSourceConfig;

    fn planned(parallelism: u16, layout: u64) -> ClusterPlan {
        let text = format!("name: rev\nparallelism: {parallelism}\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\nsource: {{ type: kafka, bootstrap_servers: 'b:1', topics: [orders] }}\nkey: {{ wasm: k.wasm }}\nprocess: {{ wasm: p.wasm }}\nsink: {{ type: kafka, bootstrap_servers: 'b:1', topic: out, delivery: exactly-once, transactional_id_prefix: rev }}\n");
        let mut spec = PipelineSpec::parse(&text).unwrap();
        in_layout(&mut spec, layout);
        let six = |config: &KafkaSourceConfig| {
            Ok((0..6).map(|p| (config.topics[0].clone(), p)).collect())
        };
        super::super::plan(&spec, &six).unwrap()
    }

    #[test]
    fn each_new_task_takes_its_key_groups_from_the_old_tasks_holding_them() {
        let (six, three) = (planned(6, 0), planned(3, 2));
        let drained: BTreeMap<String, u64> =
            six.units.iter().enumerate().map(|(i, u)| (u.name.clone(), i as u64 + 10)).collect();
        let seeds = seeds(&three, &six, &drained);
        assert_eq!(seeds.len(), 3, "one per new task: {seeds:?}");
        let first = &seeds["rev-keyed-0-r2"];
        assert_eq!(first.key_groups, 0..=42);
        let SeedFrom::Units(units) = &first.from else { panic!("{first:?}") };
        let from: Vec<&str> = units.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(from, ["rev-keyed-0", "rev-keyed-1"], "{first:?}");
        assert!(units.iter().all(|(u, id)| drained[u] == *id));
        assert_eq!(
            first.stage,
            three.units.iter().find(|u| u.name == "rev-keyed-0-r2").unwrap().spec.operators
                ["keyed"]
                .uid
                .clone()
                .unwrap()
        );
        // Every key group of the old tasks is taken by exactly one new task.
        let covered: u32 =
            seeds.values().map(|s| u32::from(s.key_groups.end() - s.key_groups.start()) + 1).sum();
        assert_eq!(covered, 128);
        // The ingest units keep their names (and their own checkpoints).
        assert!(three.units.iter().any(|u| u.name == "rev-source-0"));
        assert!(three.units_topic.ends_with("-r2") && three.exchanges[0].name.ends_with("-r2"));
    }
}
