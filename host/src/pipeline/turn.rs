//! One run of a pipeline at a time in this process, in the order they were
//! started. A stop returns within its bound even when the run has not ended
//! (see `stop`): that run then ends on its own thread, still holding the
//! pipeline's lock. A run of the same pipeline on the same data directory
//! started meanwhile (a unit assigned again, a pipeline started again)
//! waits here for it to end, instead of failing on the lock as if another
//! process ran the pipeline: [`Turn`]. This module never decides whether a
//! run starts, only when.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::config;

/// How often a waiting run checks whether it was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// The runs of each pipeline in a process that have not ended, in the order
/// they were started, by the pipeline's lock file; one per process
/// ([`Turns::process`]), others in tests.
#[derive(Default)]
pub(crate) struct Turns {
    queues: Mutex<(u64, BTreeMap<PathBuf, VecDeque<u64>>)>,
    ended: Condvar,
}

/// A run's place among the runs of its pipeline in this process; its turn
/// comes when every run started before it has ended. Dropped when the run
/// ends (however it ends), which lets the next one go.
pub(crate) struct Turn {
    turns: &'static Turns,
    key: PathBuf,
    id: u64,
}

impl Turns {
    /// This process's runs.
    pub(crate) fn process() -> &'static Turns {
        static PROCESS: std::sync::OnceLock<Turns> = std::sync::OnceLock::new();
        PROCESS.get_or_init(Turns::default)
    }

    fn queues(&self) -> MutexGuard<'_, (u64, BTreeMap<PathBuf, VecDeque<u64>>)> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue a run of `pipeline` on `data_dir` behind those of it in this
    /// process that have not ended.
    pub(crate) fn queue(&'static self, data_dir: &Path, pipeline: &str) -> Turn {
        let key = config::pipeline_lock_path(data_dir, pipeline);
        let mut queues = self.queues();
        queues.0 += 1;
        let id = queues.0;
        queues.1.entry(key.clone()).or_default().push_back(id);
        Turn { turns: self, key, id }
    }
}

impl Turn {
    /// Whether every run of the pipeline started before this one has ended.
    pub(crate) fn is_due(&self) -> bool {
        let queues = self.turns.queues();
        queues.1.get(&self.key).and_then(VecDeque::front) == Some(&self.id)
    }

    /// Wait until every earlier run of the pipeline in this process has
    /// ended (true), or until `cancelled` says this run was cancelled
    /// meanwhile (false).
    pub(crate) fn wait(&self, cancelled: impl Fn() -> bool) -> bool {
        let mut queues = self.turns.queues();
        loop {
            if queues.1.get(&self.key).and_then(VecDeque::front) == Some(&self.id) {
                return true;
            }
            if cancelled() {
                return false;
            }
            queues = self
                .turns
                .ended
                .wait_timeout(queues, CANCEL_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut queues = self.turns.queues();
        if let Some(queue) = queues.1.get_mut(&self.key) {
            queue.retain(|id| *id != self.id);
            if queue.is_empty() {
                queues.1.remove(&self.key);
            }
        }
        drop(queues);
        self.turns.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn turns() -> &'static Turns {
        Box::leak(Box::default())
    }

    #[test]
    fn a_run_is_due_once_the_runs_of_its_pipeline_started_before_it_have_ended() {
        let turns = turns();
        let dir = Path::new("/data");
        let first = turns.queue(dir, "orders");
        let second = turns.queue(dir, "orders");
        let third = turns.queue(dir, "orders");
        // Another pipeline, or the same one on another data directory,
        // does not wait.
        assert!(turns.queue(dir, "payments").is_due());
        assert!(turns.queue(Path::new("/other"), "orders").is_due());
        assert!(first.is_due());
        assert!(!second.is_due() && !third.is_due());
        drop(first);
        assert!(second.is_due());
        assert!(!third.is_due(), "the second has not ended");
        // Cancelled while waiting: it stops waiting, its turn not come.
        assert!(!third.wait(|| true));
        drop(second);
        assert!(third.wait(|| false));
        drop(third);
        assert!(turns.queue(dir, "orders").is_due(), "nothing left queued");
    }

    #[test]
    fn a_waiting_run_goes_when_the_earlier_one_ends() {
        let turns = turns();
        let earlier = turns.queue(Path::new("/data"), "orders");
        let next = turns.queue(Path::new("/data"), "orders");
        let ended = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| {
                let due = next.wait(|| false);
                (due, ended.load(Ordering::SeqCst))
            });
            ended.store(true, Ordering::SeqCst);
            drop(earlier);
            assert_eq!(waiting.join().unwrap(), (true, true), "its turn, after the earlier one");
        });
    }
}
