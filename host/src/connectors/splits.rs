//! A source made of several sources, each one split: read round-robin, a
//! batch at a time, so each split's event time advances on its own.

use super::{ConnectorError, Polled, Source};
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
        let Some(split) = (0..self.splits.len()).map(|i| (self.next + i) % self.splits.len()).find(|&i| !self.finished[i]) else {
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

    fn progress(&self) -> Option<(u64, u64)> {
        self.splits.iter().try_fold((0, 0), |(done, total), s| s.progress().map(|(d, t)| (done + d, total + t)))
    }

    fn take_rejected(&mut self) -> Vec<(String, Event)> {
        self.splits.iter_mut().flat_map(|s| s.take_rejected()).collect()
    }

    fn dropped(&self) -> u64 {
        self.splits.iter().map(|s| s.dropped()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::GeneratorSource;

    #[test]
    fn reads_splits_round_robin_until_all_finish() {
        let splits: Vec<Box<dyn Source>> = vec![Box::new(GeneratorSource::new(3, 1, 0, 0, 1)), Box::new(GeneratorSource::new(1, 1, 0, 0, 1))];
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
}
