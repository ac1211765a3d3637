//! Serving pipelines: the lifecycle of deployed pipelines under
//! `weir serve` — deploy, start, restart after a failure, savepoint,
//! upgrade, stop, delete — with the server's limits and the grants that
//! say what a spec may touch on the host. It speaks [`ServeError`], never
//! HTTP: `api/` turns calls into routes and errors into statuses.
//!
//! * [`grants`]: the files, directories and Kafka properties a served spec
//!   may use; [`limits`]: the server's caps on what a spec may ask for;
//! * [`restart`]: counting restarts and their delays;
//! * `error`: [`ServeError`], why a lifecycle step was refused;
//! * [`supervisor`]: the deployed pipelines, their runs and their records;
//! * [`cluster`]: a cluster's pipelines, deployed through its control topic
//!   (`weir serve --cluster`).

pub mod cluster;
mod error;
pub mod grants;
pub mod limits;
pub mod restart;
pub mod supervisor;

pub use cluster::{ClusterPipelines, ClusterUnit, ClusterView};
pub use error::{ServeError, ServeErrorKind};
pub use limits::ServerLimits;
pub use supervisor::{PipelineView, Supervisor, Upgrade, VersionChoice};
