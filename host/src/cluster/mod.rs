//! Cluster mode: one pipeline run by several `weir worker` processes,
//! coordinated by Kafka alone (see `docs/cluster.md`).
//!
//! * [`plan`]: the pipeline cut into units (ingest units and tasks), each
//!   an ordinary pipeline run;
//! * [`fingerprint`]: a plan's identity (units, function contents,
//!   `max_parallelism`);
//! * [`admission`]: the plan the worker group runs, recorded in Kafka; a
//!   worker of another plan refused;
//! * `topics`: the exchange and units topics, created or checked;
//! * `worker`: membership in the pipeline's consumer group, and the units
//!   the group gives this worker, started, stopped and drained;
//! * [`drained`]: which units a drained stop ended for good, and
//!   [`layout`]: when an upgrade changes how the plan cuts the pipeline
//!   (a rescale), and where the new tasks take their state from;
//!   [`savepoint`]: a drained layout's unit snapshots as one savepoint;
//! * `status`: what a worker reports (`/readyz`, `/healthz`, `/metrics`,
//!   `/v1/worker`);
//! * [`control`]: a cluster's control topic (what is deployed), [`blobs`]:
//!   its functions in object storage by SHA-256, [`functions`]: the
//!   function store its servers share, and [`fleet`]: a worker of every
//!   pipeline the control topic deploys (`weir worker --cluster`).
//!
//! Nothing here coordinates workers itself: Kafka's group protocol assigns
//! units, Kafka transactions fence zombies, object storage holds state.

pub mod admission;
pub mod blobs;
pub mod control;
pub mod drained;
pub mod fingerprint;
pub mod fleet;
pub mod functions;
pub mod layout;
pub mod plan;
pub mod savepoint;
pub mod status;
pub mod topics;
pub mod worker;

pub use crate::specification::ClusterSettings;
pub use control::{ControlTopic, Deployment, Desired};
pub use fleet::{Fleet, FleetConfig, FleetError, FleetStatus};
pub use plan::{plan, ClusterPlan, ExchangeTopic, PlanError, Unit, UnitRole};
pub use worker::{Worker, WorkerConfig, WorkerError, WorkerStatus, DEFAULT_STOP_GRACE};
