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
    /// How often an ingest unit commits what it read to the repartition
    /// topics (its checkpoint interval). Tasks read those records only
    /// once they are committed, so this is the exchange's share of the
    /// latency; an ingest unit holds no state, so its checkpoints are
    /// small. Default: half of `checkpoint.interval`, at least 100 ms
    /// (and never longer than it).
    #[serde(default, with = "humantime_serde")]
    pub ingest_interval: Option<Duration>,
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
            ingest_interval: None,
            layout: 0,
        }
    }
}

impl ClusterSettings {
    /// The checkpoint interval of ingest units, for a pipeline whose
    /// `checkpoint.interval` is `interval`: `ingest_interval`, or half of
    /// `interval` but at least 100 ms (and never longer than `interval`).
    pub fn ingest_interval(&self, interval: Duration) -> Duration {
        self.ingest_interval
            .unwrap_or_else(|| (interval / 2).max(MIN_INGEST_INTERVAL).min(interval))
    }
}

/// The shortest default ingest interval: below it commits cost more than
/// the latency they save.
const MIN_INGEST_INTERVAL: Duration = Duration::from_millis(100);

fn default_retention() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specification::PipelineSpec;

    fn spec(cluster: &str) -> Result<PipelineSpec, String> {
        let text = format!("name: p\ncheckpoint: {{ interval: 2s }}\nsource: {{ type: generator, count: 1 }}\nkey: {{ wasm: p.wasm }}\nprocess: {{ wasm: p.wasm }}\nsink: {{ type: stdout }}\n{cluster}");
        PipelineSpec::parse(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_ingest_interval_defaults_to_half_and_can_be_set() {
        let defaults = ClusterSettings::default();
        assert_eq!(defaults.ingest_interval(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(defaults.ingest_interval(Duration::from_secs(60)), Duration::from_secs(30));
        let set = spec("cluster: { ingest_interval: 300ms }").unwrap().cluster.unwrap();
        assert_eq!(set.ingest_interval(Duration::from_secs(2)), Duration::from_millis(300));
        let error = spec("cluster: { ingest_interval: 1ms }").unwrap_err();
        assert!(error.contains("cluster.ingest_interval") && error.contains("10ms"), "{error}");
    }
}
