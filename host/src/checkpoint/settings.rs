//! Checkpoint settings: how often checkpoints are taken, how long one may
//! take, how many are kept and where they go. The spec's `checkpoint:`
//! section deserializes straight into [`CheckpointSettings`] (durations
//! parsed then); [`CheckpointSettings::validate`] checks the ranges.

use std::time::Duration;

use serde::Deserialize;

/// A checkpoint setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("checkpoint.{field}: {message}")]
pub struct SettingsError {
    /// The setting (`interval`, `retained`, …).
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Checkpointing settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    /// Time between checkpoint triggers, e.g. `2s`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Least time between the end of one checkpoint and the start of the
    /// next, e.g. `500ms` (default 0).
    #[serde(default, with = "humantime_serde")]
    pub min_pause: Duration,
    /// A checkpoint not complete after this long is abandoned (default `10m`).
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Completed checkpoints kept (default 3).
    #[serde(default = "default_retained")]
    pub retained: usize,
    /// One checkpoint in this many is full (RocksDB's checkpoint plus a
    /// changelog of the cached entries it has not seen); the others store
    /// only the state changed since the one before, as a changelog a
    /// restore replays (default 10; 1: every one is full).
    #[serde(default = "default_materialize_every")]
    pub materialize_every: usize,
    /// Where checkpoints and savepoints go: an `object_store` URL
    /// (`file:///abs/dir`, `s3://bucket/prefix`, `memory://`); default
    /// `<data dir>/checkpoints`.
    #[serde(default)]
    pub storage: Option<String>,
}

/// The shortest checkpoint interval a spec may ask for (of ingest units
/// too: `cluster.ingest_interval`).
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

fn default_timeout() -> Duration {
    Duration::from_secs(600)
}

fn default_retained() -> usize {
    3
}

fn default_materialize_every() -> usize {
    10
}

impl CheckpointSettings {
    /// Settings with only an interval, the rest default (what
    /// `--checkpoint-interval` gives).
    pub fn every(interval: Duration) -> Self {
        Self {
            interval,
            min_pause: Duration::ZERO,
            timeout: default_timeout(),
            retained: default_retained(),
            materialize_every: default_materialize_every(),
            storage: None,
        }
    }

    /// How long connectors retry transient failures (a broker outage)
    /// before failing the run: the checkpoint timeout (a checkpoint not
    /// done by then is abandoned anyway), or its default without
    /// checkpoints.
    pub fn retry_budget(settings: Option<&Self>) -> Duration {
        settings.map_or_else(default_timeout, |s| s.timeout)
    }

    /// Check what the types cannot, naming the setting at fault.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let bad = |field, message: &str| Err(SettingsError { field, message: message.into() });
        if self.interval < MIN_INTERVAL {
            return bad("interval", "must be at least 10ms");
        }
        if self.timeout.is_zero() {
            return bad("timeout", "must be more than 0");
        }
        if self.retained == 0 {
            return bad("retained", "must be at least 1");
        }
        if self.materialize_every == 0 {
            return bad("materialize_every", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_ranges() {
        let settings: CheckpointSettings = serde_yaml::from_str("interval: 2s").unwrap();
        assert_eq!(settings, CheckpointSettings::every(Duration::from_secs(2)));
        settings.validate().unwrap();
        let short = CheckpointSettings::every(Duration::from_millis(5));
        assert!(short.validate().unwrap_err().to_string().contains("checkpoint.interval"));
        assert!(serde_yaml::from_str::<CheckpointSettings>("interval: soon").is_err());
    }
}
