//! What the host keeps for its users between runs: uploaded functions and
//! the pipelines deployed through the HTTP API. Both live in the data
//! directory, reached only through `cap-std` directory handles under names
//! the stores check or make themselves, and are written atomically.

mod functions;
mod pipelines;

pub use functions::{Decide, FunctionStore, FunctionVersion, SharedFunctions, StoreError};
pub use pipelines::{PipelineRecord, PipelineState, PipelineStore, RestorePoint};

/// A record of a pipeline using function `revenue`, for other modules' tests.
#[cfg(test)]
pub(crate) use pipelines::tests::record as test_record;

use cap_std::fs::Dir;

/// Write `bytes` to `name` in `dir` atomically: a synced temporary file
/// renamed over it (a crash leaves the old file or the new one).
fn write_atomically(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = format!(".{name}.tmp");
    let mut file = dir.create(&tmp)?;
    crate::files::write_in_pieces(&mut file, bytes).and_then(|()| file.sync_all())?;
    dir.rename(&tmp, dir, name)
}
