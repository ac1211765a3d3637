//! A source made of several sources, each one split: read round-robin, a
//! batch at a time, so each split's event time advances on its own.
//!
//! Its position is `{"splits": [<split 0's position>, …], "next": <split
//! to read next>, "finished": [<bool>, …]}`.

use super::{decode, encode, ConnectorError, Polled, Source};
use crate::Event;

/// Several sources read as the splits of one.
pub struct SplitSource {
    splits: Vec<Box<dyn Source>>,
    finished: Vec<bool>,
    next: usize,
}

impl SplitSource {
    /// A source whose split `i` is `splits[i]`.
    pub fn new(splits: Vec<Box<dyn Source>>) -> Self {
        let finished = vec![false; splits.len()];
        Self { splits, finished, next: 0 }
    }
}

impl Source for SplitSource {
    fn next_batch(&mut self, max: usize, out: &mut Vec<Event>) -> Result<Polled, ConnectorError> {
        let Some(split) = (0..self.splits.len())
            .map(|i| (self.next + i) % self.splits.len())
            .find(|&i| !self.finished[i])
        else {
            return Ok(Polled { split: 0, split_finished: true, more: false });
        };
        self.next = (split + 1) % self.splits.len();
        let polled = self.splits[split].next_batch(max, out)?;
        if !polled.more {
            self.finished[split] = true;
        }
        Ok(Polled { split, split_finished: !polled.more, more: self.finished.iter().any(|f| !f) })
    }

    fn splits(&self) -> usize {
        self.splits.len()
    }

    fn set_max_wait(&mut self, wait: Option<std::time::Duration>) {
        self.splits.iter_mut().for_each(|s| s.set_max_wait(wait));
    }

    fn take_waited(&mut self) -> std::time::Duration {
        self.splits.iter_mut().map(|s| s.take_waited()).sum()
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.splits
            .iter()
            .try_fold((0, 0), |(done, total), s| s.progress().map(|(d, t)| (done + d, total + t)))
    }

    fn take_rejected(&mut self) -> Vec<(String, Event)> {
        self.splits.iter_mut().flat_map(|s| s.take_rejected()).collect()
    }

    fn dropped(&self) -> u64 {
        self.splits.iter().map(|s| s.dropped()).sum()
    }

    fn position(&self) -> serde_json::Value {
        let splits = self.splits.iter().map(|s| s.position()).collect();
        encode(&SplitPosition { splits, next: self.next, finished: self.finished.clone() })
    }

    fn seek(&mut self, position: &serde_json::Value) -> Result<(), ConnectorError> {
        let what = || format!("split source ({} splits)", self.splits.len());
        let SplitPosition { splits, next, finished } = decode(what, position)?;
        let n = self.splits.len();
        if splits.len() != n || finished.len() != n {
            let message = format!(
                "the position has {} splits and {} finished flags",
                splits.len(),
                finished.len()
            );
            return Err(ConnectorError::Restore { what: what(), message });
        }
        if next >= n.max(1) {
            return Err(ConnectorError::Restore {
                what: what(),
                message: format!("next split {next} does not exist"),
            });
        }
        for (split, position) in self.splits.iter_mut().zip(&splits) {
            split.seek(position)?;
        }
        self.next = next;
        self.finished = finished;
        Ok(())
    }
}

/// Where a [`SplitSource`] stands.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitPosition {
    /// Each split's own position.
    splits: Vec<serde_json::Value>,
    /// The split the round-robin reads next (if not finished).
    next: usize,
    /// Which splits have nothing more.
    finished: Vec<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::GeneratorSource;

    #[test]
    fn reads_splits_round_robin_until_all_finish() {
        let splits: Vec<Box<dyn Source>> = vec![
            Box::new(GeneratorSource::new(3, 1, 0, 0, 1)),
            Box::new(GeneratorSource::new(1, 1, 0, 0, 1)),
        ];
        let mut source = SplitSource::new(splits);
        let mut out = Vec::new();
        let mut polls = Vec::new();
        loop {
            let polled = source.next_batch(1, &mut out).unwrap();
            polls.push((polled.split, polled.split_finished));
            if !polled.more {
                break;
            }
        }
        assert_eq!(polls, vec![(0, false), (1, true), (0, false), (0, true)]);
        assert_eq!(out.len(), 4);
    }

    fn new_source() -> SplitSource {
        let splits: Vec<Box<dyn Source>> = vec![
            Box::new(GeneratorSource::new(5, 3, 1, 0, 10)),
            Box::new(GeneratorSource::new(2, 3, 2, 5, 10)),
            Box::new(GeneratorSource::new(4, 3, 3, 7, 10)),
        ];
        SplitSource::new(splits)
    }

    /// Each batch's split, with its events' values and timestamps.
    type Batches = Vec<(usize, Vec<(Vec<u8>, i64)>)>;

    /// The rest of the source, batch by batch.
    fn drain(source: &mut SplitSource) -> Batches {
        let mut batches = Vec::new();
        loop {
            let mut out = Vec::new();
            let polled = source.next_batch(2, &mut out).unwrap();
            batches.push((polled.split, out.into_iter().map(|e| (e.value, e.timestamp)).collect()));
            if !polled.more {
                return batches;
            }
        }
    }

    #[test]
    fn seeking_restores_every_split_the_cursor_and_the_finished_ones() {
        let mut source = new_source();
        let mut out = Vec::new();
        // Splits 0, 1 (which finishes), 2, 0.
        for _ in 0..4 {
            source.next_batch(2, &mut out).unwrap();
        }
        let position = source.position();
        assert_eq!(position["next"], 1);
        assert_eq!(position["finished"], serde_json::json!([false, true, false]));
        let rest = drain(&mut source);
        assert_eq!(rest.iter().map(|(split, _)| *split).collect::<Vec<_>>(), vec![2, 0]);

        let mut resumed = new_source();
        resumed.seek(&position).unwrap();
        assert_eq!(resumed.progress(), Some((8, 11)));
        assert_eq!(drain(&mut resumed), rest);
    }

    #[test]
    fn positions_that_do_not_fit_are_errors() {
        let mut source = new_source();
        let good = source.position();
        let mut short = good.clone();
        short["splits"] = serde_json::json!([good["splits"][0], good["splits"][1]]);
        let mut bad_cursor = good.clone();
        bad_cursor["next"] = serde_json::json!(3);
        let mut bad_split = good.clone();
        bad_split["splits"][2] = serde_json::json!({"produced": 99});
        for (bad, expected) in [
            (short, "split source (3 splits): cannot restore"),
            (bad_cursor, "split 3 does not exist"),
            (bad_split, "generator source: cannot restore"),
            (serde_json::json!([]), "malformed"),
        ] {
            let err = source.seek(&bad).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
