//! The spec a deployed pipeline's record runs: the text the user sent with
//! what deploys and upgrades decided on top of it. The record itself is the
//! registry's ([`PipelineRecord`]); reading it as a spec is the pipeline's.

use std::path::Path;

use super::parts::SpecError;
use super::pipeline::PipelineSpec;
use crate::store::PipelineRecord;

/// A deployed pipeline's record read as the spec it runs.
pub trait DeployedSpec {
    /// The spec this record runs: the deployed text with the pinned
    /// versions and parallelism applied, relative paths resolved inside
    /// the files root of `data_dir` ([`crate::config::files_dir`]),
    /// validated again.
    fn spec(&self, data_dir: &Path) -> Result<PipelineSpec, SpecError>;

    /// [`spec`](Self::spec) from the deployed text already parsed into
    /// `parsed` (so a deploy parses it once).
    fn apply(&self, parsed: PipelineSpec, data_dir: &Path) -> Result<PipelineSpec, SpecError>;

    /// Whether the pipeline uses the stored function `name`.
    fn uses_function(&self, name: &str) -> bool;
}

impl DeployedSpec for PipelineRecord {
    fn spec(&self, data_dir: &Path) -> Result<PipelineSpec, SpecError> {
        self.apply(PipelineSpec::parse(&self.spec)?, data_dir)
    }

    fn apply(&self, mut spec: PipelineSpec, data_dir: &Path) -> Result<PipelineSpec, SpecError> {
        for (field, function) in spec.functions_mut() {
            if let Some(version) = self.pins.get(&field) {
                function.version = Some(*version);
            }
        }
        if let Some(parallelism) = self.parallelism {
            spec.parallelism = parallelism;
        }
        spec.resolve_paths(&crate::config::files_dir(data_dir));
        spec.validate()?;
        Ok(spec)
    }

    fn uses_function(&self, name: &str) -> bool {
        PipelineSpec::parse(&self.spec).is_ok_and(|spec| {
            spec.functions().iter().any(|(_, f)| f.function.as_deref() == Some(name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{test_record as record, PipelineStore};

    #[test]
    fn records_apply_pins() {
        let dir = tempfile::tempdir().unwrap();
        PipelineStore::open(dir.path()).unwrap().put(&record("orders")).unwrap();
        let reopened = PipelineStore::open(dir.path()).unwrap().list().unwrap();
        let spec = reopened["orders"].spec(dir.path()).unwrap();
        assert_eq!(
            (
                spec.key.as_ref().unwrap().version,
                spec.process.as_ref().unwrap().version,
                spec.parallelism
            ),
            (Some(1), Some(2), 3)
        );
        assert!(reopened["orders"].uses_function("revenue"));
        assert!(!reopened["orders"].uses_function("other"));
    }
}
