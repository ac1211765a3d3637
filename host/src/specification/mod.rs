//! The language users write: a pipeline spec (YAML or JSON), its parts,
//! and its lowering into a graph of stages. Plain data and its checks; it
//! runs nothing and never touches the host beyond reading a spec file.
//!
//! Files, from the bottom up (each uses only those above it):
//!
//! * [`restart`]: the `restart:` section; [`cluster`]: the `cluster:`
//!   section (`weir worker`'s topics) — plain settings;
//! * [`parts`]: what nodes and the line form share (functions, windows,
//!   limits, TTLs) and [`SpecError`];
//! * [`node`]: a node of the `operators:` section as written;
//! * [`pipeline`]: [`PipelineSpec`], the whole spec as written (the line
//!   form — `source`, `key`, `process`, `sink` — or the graph form);
//! * [`graph`]: the spec lowered into one graph of sources, stages and
//!   sinks (a line spec is the graph of one stage);
//! * `check`: the one validator, [`PipelineSpec::validate`], over that
//!   graph;
//! * [`record`]: the spec a deployed pipeline's stored record runs;
//! * [`secrets`]: the spec's text as shown, credentials hidden, and a
//!   spec sent back with them hidden made whole again.

mod check;
pub mod cluster;
pub mod graph;
pub mod node;
pub mod parts;
pub mod pipeline;
pub mod record;
pub mod restart;
pub mod secrets;

pub use cluster::ClusterSettings;
pub use node::{InputSpec, JoinSpec, NodeSpec};
pub use parts::{
    FunctionSpec, LimitsSpec, OnError, Size, SpecError, TtlSpec, WatermarkSpec, WindowKind,
    WindowSpec,
};
pub use pipeline::{PipelineSpec, SinkSpec, SourceSpec};
pub use record::DeployedSpec;
