//! How to run a pipeline: the options a caller (the CLI, the API's
//! supervisor, the benchmarks) gives [`run`](super::run).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::observe::live::RunHandle;
use crate::runtime::native::NativeCatalog;

/// Reports how far a bounded source has got: `(done, total)` in the
/// source's own unit (events or bytes).
pub type ProgressFn = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// How to run a pipeline.
#[derive(Clone)]
pub struct RunOptions {
    /// The host's data directory (state, compiled-code cache).
    pub data_dir: PathBuf,
    /// Start from empty state even if the spec does not say `fresh: true`.
    pub fresh: bool,
    /// Called after each source batch, for a progress display.
    pub progress: Option<ProgressFn>,
    /// Testing aid: pause this long after each batch the sink writes.
    pub sink_delay: Option<Duration>,
    /// Record each written event's end-to-end latency (see
    /// [`latency`](crate::observe::latency)), reported in the run's summary.
    pub record_latency: bool,
    /// With `record_latency`: leave out events stamped within this long of
    /// the run's start.
    pub latency_warm_up: Duration,
    /// With `record_latency`: log the percentiles so far this often
    /// (`None`: only in the summary at the end).
    pub latency_log_every: Option<Duration>,
    /// Start from this snapshot. Without it a checkpointed pipeline resumes
    /// from its newest completed checkpoint, if any.
    pub restore: Option<RestoreFrom>,
    /// Start even though an exactly-once sink's commit marker
    /// disagrees with the stored snapshots (absent, older than a commit
    /// they record, or not the snapshot given in `restore`): restore the
    /// snapshot given in `restore`, else the newest one the snapshots
    /// record as committed (else start empty), and set the marker to it
    /// (what [`OVERRIDE`](crate::connectors::transactional::OVERRIDE) asks).
    /// Results after that snapshot may be written again (or, restoring a
    /// snapshot newer than the marker, lost).
    pub override_commit_marker: bool,
    /// The run's live counters and in-process control (savepoint, stop).
    pub handle: Arc<RunHandle>,
    /// The native functions a spec may name with `native:` (none unless
    /// given: see [`RunOptions::with_natives`]).
    pub natives: NativeCatalog,
    /// Run by `weir serve` (a process refused the pipeline's lock is told
    /// to stop it through the API, not with `weir stop`).
    pub served: bool,
    /// Where stages take their state from when the run has no snapshot of
    /// its own to restore (a cluster task of a new layout).
    pub seeds: Vec<super::seed::Seed>,
    /// Where the sources take their positions from when the run has no
    /// snapshot of its own to restore (a checkpoint or savepoint location:
    /// a cluster unit of a pipeline deployed from one).
    pub positions_from: Option<String>,
}

/// Which snapshot a run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The pipeline's newest completed checkpoint (an error if none).
    Latest,
    /// A checkpoint or savepoint directory: local path or URL.
    Path(String),
}

impl RunOptions {
    /// Options with everything else off.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            fresh: false,
            progress: None,
            sink_delay: None,
            record_latency: false,
            latency_warm_up: Duration::ZERO,
            latency_log_every: None,
            restore: None,
            override_commit_marker: false,
            handle: RunHandle::new(),
            natives: NativeCatalog::default(),
            served: false,
            seeds: Vec::new(),
            positions_from: None,
        }
    }

    /// These options, resolving `native:` functions in `natives`.
    pub fn with_natives(mut self, natives: NativeCatalog) -> Self {
        self.natives = natives;
        self
    }
}
