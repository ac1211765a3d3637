//! The `cluster:` section of a spec: how `weir worker` sets up the topics
//! a pipeline's workers share. Plain data, below everything that uses it.

use std::time::Duration;

use serde::Deserialize;

/// `cluster:` — settings of the pipeline when run by `weir worker`s.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClusterSettings {
    /// Replication factor of the topics the workers create (exchange
    /// topics and the units topic); default the broker's.
    #[serde(default)]
    pub replication_factor: Option<i16>,
    /// How long an exchange topic keeps records (default `7d`): a task
    /// must read them within it, or it refuses to start (data lost).
    #[serde(default = "default_retention", with = "humantime_serde")]
    pub repartition_retention: Duration,
    /// The input topics are already partitioned by the pipeline's key
    /// (every key in one partition, as a producer keying records by it
    /// does): task `t` reads input partition `t` directly, with no ingest
    /// units and no repartition topic. Needs as many tasks as partitions.
    #[serde(default)]
    pub input_partitioned_by_key: bool,
    /// Set by a cluster's control topic, never in a spec: the version of
    /// the deployment that last changed the pipeline's layout (a stage's
    /// parallelism, the input's partitions), which names its tasks,
    /// exchange topics and units topic anew; 0 for the first layout.
    #[serde(skip)]
    pub layout: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            replication_factor: None,
            repartition_retention: default_retention(),
            input_partitioned_by_key: false,
            layout: 0,
        }
    }
}

fn default_retention() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}
