//! Seeing inside a running pipeline: what the execution layer records and
//! what the API, the CLI and `/metrics` read. Nothing here runs a
//! pipeline; the runner feeds these types and readers sample them.
//!
//! * [`summary`]: the counts a run reports when it ends;
//! * [`latency`]: how long outputs took from source to sink;
//! * [`sampling`]: rates, busy / idle / backpressured time and the
//!   per-operator view of the last seconds ([`sampling::MetricsView`]);
//! * [`inspect`]: reading a key's state while the pipeline runs;
//! * [`lookup`]: that state decoded and shown for people;
//! * [`postcard`]: a declared state's bytes as JSON, by its declared type;
//! * [`tail`]: a bounded sample of what an output writes;
//! * [`live`]: the counters and requests shared with a running pipeline
//!   ([`RunHandle`]);
//! * [`process`]: process-wide measurements (CPU time, peak RSS).

pub mod inspect;
pub mod latency;
pub mod live;
pub mod lookup;
pub mod postcard;
pub mod process;
pub mod sampling;
pub mod summary;
pub mod tail;

pub use live::{LiveCounts, LiveMetrics, RequestError, RunHandle};
pub use summary::{OperatorCounts, RunSummary};
