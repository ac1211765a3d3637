//! A cluster pipeline's savepoint: what its units' final snapshots of a
//! drained layout hold, put together as one savepoint of the pipeline in
//! the format one machine writes (see `docs/cluster.md`, "Savepoints").
//!
//! Every unit of a drained layout ended with a savepoint of its own
//! (canonical, self-contained) and nothing is in flight between them. The
//! pipeline's savepoint takes each task's state file as a file of its
//! stage (the stage's parallelism is the number of tasks; each file names
//! its key groups, so it restores at any parallelism) and each ingest
//! unit's source position as a reader of its source (`<source>#<k>`: one
//! machine merges the readers' positions). It is written under the
//! pipeline's own name in the checkpoint storage, `_metadata` last, so it
//! is whole or absent; `weir run --restore` takes it as a savepoint of
//! any other pipeline.

use std::collections::BTreeMap;

use super::{ClusterPlan, UnitRole};
use crate::checkpoint::{
    CanonicalFile, CheckpointError, CheckpointStorage, OperatorSnapshot, SnapshotKind,
    SnapshotMetadata, StateFiles,
};

/// Write the savepoint `id` of `plan`'s pipeline from the final snapshots
/// of its drained units (`drained`: each unit's snapshot id) into the
/// checkpoint storage at `url`; where it is.
pub fn assemble(
    plan: &ClusterPlan,
    drained: &BTreeMap<String, u64>,
    url: &str,
    id: u64,
) -> Result<String, CheckpointError> {
    let started = std::time::Instant::now();
    let target = CheckpointStorage::open(url, &plan.pipeline)?;
    let dir = target.savepoint_dir(id);
    let mut sources = serde_json::Map::new();
    let mut readers: BTreeMap<&str, usize> = BTreeMap::new();
    let mut stages: BTreeMap<String, (u16, Vec<CanonicalFile>)> = BTreeMap::new();
    let mut size_bytes = 0;
    for unit in &plan.units {
        let snapshot = drained.get(&unit.name).ok_or_else(|| {
            CheckpointError::Corrupt(format!(
                "unit {} has not drained: the savepoint would miss its state",
                unit.name
            ))
        })?;
        let storage = CheckpointStorage::open(url, &unit.name)?;
        let metadata = storage
            .completed_of(SnapshotKind::Savepoint)?
            .into_iter()
            .find(|m| m.id == *snapshot)
            .ok_or_else(|| {
                CheckpointError::Corrupt(format!(
                    "unit {} ended with savepoint {snapshot}, which its storage does not hold",
                    unit.name
                ))
            })?;
        match &unit.role {
            UnitRole::Ingest { source, .. } => {
                let k = readers.entry(source.as_str()).or_default();
                sources.insert(format!("{source}#{k}"), metadata.source.clone());
                *k += 1;
            }
            UnitRole::Task { task, .. } => {
                let from =
                    storage.files_dir(&storage.savepoint_dir(metadata.id), metadata.generation);
                for operator in metadata.operator_states() {
                    let StateFiles::Canonical { files } = &operator.state else {
                        return Err(CheckpointError::Corrupt(format!(
                            "unit {}'s final savepoint {snapshot} is not in the canonical format",
                            unit.name
                        )));
                    };
                    let (tasks, merged) = stages.entry(operator.uid.clone()).or_default();
                    *tasks += 1;
                    for file in files {
                        let bytes = storage.get_file(&from, &file.name)?;
                        let name =
                            format!("{}/task-{task}-{}", operator.uid, file.name.replace('/', "-"));
                        size_bytes += bytes.len() as u64;
                        target.put(&dir, &name, bytes)?;
                        merged.push(CanonicalFile { name, ..file.clone() });
                    }
                }
            }
        }
    }
    let mut operators = Vec::new();
    let mut first_slot = 0;
    for (uid, (parallelism, files)) in stages {
        operators.push(OperatorSnapshot {
            uid,
            parallelism,
            first_slot,
            state: StateFiles::Canonical { files },
        });
        first_slot += usize::from(parallelism);
    }
    let (first, operators) = OperatorSnapshot::recorded(operators);
    let metadata = SnapshotMetadata {
        id,
        kind: SnapshotKind::Savepoint,
        pipeline: plan.pipeline.clone(),
        completed_at: crate::clock::now_millis(),
        operator_uid: first.uid,
        max_parallelism: plan.spec.max_parallelism,
        parallelism: first.parallelism,
        state: first.state,
        operators,
        source: serde_json::Value::Object(sources),
        sink: serde_json::Value::Null,
        last_committed: None,
        size_bytes,
        incremental_bytes: size_bytes,
        duration_ms: crate::units::millis(started.elapsed()),
        alignment_ms: 0,
        generation: 0,
    };
    crate::fault::point("savepoint-before-metadata");
    target.commit(&metadata)?;
    Ok(target.describe(&dir))
}
