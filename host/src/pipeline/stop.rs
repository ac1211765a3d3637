//! Stopping a run on a thread of its own within a bound, whatever Kafka or
//! storage do: a final checkpoint within a grace, then a cancel, then at
//! most [`CANCEL_WAIT`] more. `weir run`, `weir worker` and `weir serve`
//! stop runs this way. A run still going after that ends on its own thread;
//! a [`RunThread`] of the same pipeline started meanwhile waits for it
//! (see `turn`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::turn::Turns;
use super::{run, RunError, RunOptions};
use crate::checkpoint::SnapshotKind;
use crate::observe::{RequestError, RunHandle, RunSummary};
use crate::specification::PipelineSpec;

/// How long a cancelled run may take to end before its stopper stops
/// waiting for it.
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// How long a stop waits for a run's final checkpoint and commit unless
/// told otherwise (`--stop-grace`): well under Kubernetes' 30 s between
/// SIGTERM and SIGKILL.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(20);

/// A pipeline running on a thread of its own.
pub struct RunThread {
    /// Its handle (metrics, requests, cancel).
    pub handle: Arc<RunHandle>,
    /// The thread, ending with the run's outcome.
    pub thread: JoinHandle<Result<RunSummary, RunError>>,
    /// When it started.
    pub started: Instant,
    /// Set while it waits for an earlier run of its pipeline in this
    /// process to end.
    waiting: Arc<AtomicBool>,
}

/// How a [`RunThread::stop`] went.
#[derive(Debug, Default)]
pub struct Stopped {
    /// Why the stop was not clean (no final checkpoint, or the run did
    /// not end in time), if it was not.
    pub unclean: Option<String>,
    /// The run's summary, when it ended with one.
    pub summary: Option<RunSummary>,
}

impl RunThread {
    /// Run `spec` on a thread named `name`, with `options.handle` as its
    /// handle: once every earlier run of the pipeline in this process (on
    /// the same data directory) has ended, as a stop may leave one going.
    /// Cancelled while it waits, it ends with [`RunError::Stopped`].
    pub fn spawn(name: String, spec: PipelineSpec, options: RunOptions) -> std::io::Result<Self> {
        let handle = Arc::clone(&options.handle);
        let turn = Turns::process().queue(&options.data_dir, &spec.name);
        let waiting = Arc::new(AtomicBool::new(!turn.is_due()));
        let thread = {
            let (waiting, name) = (Arc::clone(&waiting), name.clone());
            std::thread::Builder::new().name(name.clone()).spawn(move || {
                if waiting.load(Ordering::Relaxed) {
                    tracing::info!(run = %name, "waiting: the previous run of {name} has not ended yet");
                }
                let due = turn.wait(|| options.handle.is_cancelled());
                waiting.store(false, Ordering::Relaxed);
                if !due {
                    return Err(RunError::Stopped);
                }
                // The turn goes once the run has ended, its lock released.
                let outcome = run(&spec, &options);
                drop(turn);
                outcome
            })?
        };
        Ok(RunThread { handle, thread, started: Instant::now(), waiting })
    }

    /// Whether it waits for an earlier run of its pipeline in this process
    /// to end before it starts (see [`RunThread::spawn`]).
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Stop the run `name` as [`stop_run`] does; its summary when it
    /// ended with one.
    pub fn stop(self, name: &str, grace: Option<Duration>) -> Stopped {
        self.end(name, grace.map(Final::Checkpoint))
    }

    /// Stop the run `name` drained, as [`stop_run`] does with a final
    /// checkpoint whose sinks also write their ends (see
    /// [`RunHandle::drain`]), waiting at most `grace` for it.
    pub fn drain(self, name: &str, grace: Duration) -> Stopped {
        self.end(name, Some(Final::Drain(grace)))
    }

    fn end(self, name: &str, last: Option<Final>) -> Stopped {
        let (unclean, ended) = end_run(name, &self.handle, self.thread, last);
        let mut stopped = Stopped { unclean, summary: None };
        match ended {
            None => {}
            Some(Ok(Ok(summary))) => stopped.summary = Some(summary),
            Some(Ok(Err(RunError::Stopped))) => {}
            Some(Ok(Err(error))) if self.handle.is_cancelled() => {
                tracing::debug!(run = name, %error, "the run ended after it was cancelled")
            }
            Some(Ok(Err(error))) => {
                tracing::warn!(run = name, %error, "the run ended with an error")
            }
            Some(Err(_)) => tracing::warn!(run = name, "the run panicked"),
        }
        stopped
    }
}

/// Stop the run `name` (its `handle`, its `thread`): with a final
/// checkpoint that commits its output when `grace` is given (waiting at
/// most that long for it), then cancelled; at once without one when
/// `grace` is `None` (as a crash would end it: the next run restores the
/// last committed checkpoint). Returns within `grace` plus
/// [`CANCEL_WAIT`], whatever the run does — a run that has not ended by
/// then is left to end on its own thread — with why the stop was not
/// clean, if it was not, and how the thread ended, if it did.
pub fn stop_run<T>(
    name: &str,
    handle: &RunHandle,
    thread: JoinHandle<T>,
    grace: Option<Duration>,
) -> (Option<String>, Option<std::thread::Result<T>>) {
    end_run(name, handle, thread, grace.map(Final::Checkpoint))
}

/// The snapshot a stop ends a run with, and how long it waits for it.
#[derive(Debug, Clone, Copy)]
enum Final {
    /// A final checkpoint.
    Checkpoint(Duration),
    /// A drained stop's final checkpoint.
    Drain(Duration),
}

/// [`stop_run`], its final snapshot `last` (none: at once).
fn end_run<T>(
    name: &str,
    handle: &RunHandle,
    thread: JoinHandle<T>,
    last: Option<Final>,
) -> (Option<String>, Option<std::thread::Result<T>>) {
    let mut unclean = None;
    let mut ended_first = false;
    if let (false, Some(last)) = (thread.is_finished(), last) {
        let requested = match last {
            Final::Checkpoint(grace) => handle.request(SnapshotKind::Checkpoint, true, grace),
            Final::Drain(grace) => handle.drain(grace),
        };
        match requested {
            Ok(location) => {
                tracing::info!(run = name, %location, "stopped with a final checkpoint")
            }
            Err(RequestError::NotListening) => {
                // Restoring: nothing to checkpoint yet.
                tracing::info!(run = name, "stopped while starting: its restore is cancelled");
            }
            // Ending on its own: judged below by how it ended.
            Err(RequestError::EndedFirst) => ended_first = true,
            Err(error) => {
                tracing::warn!(run = name, %error, "stopped without a final checkpoint: the next run restores the last committed one");
                unclean = Some(format!("{name}: no final checkpoint ({error})"));
            }
        }
    }
    handle.cancel();
    let deadline = Instant::now() + CANCEL_WAIT;
    while !thread.is_finished() {
        if Instant::now() >= deadline {
            tracing::error!(run = name, wait = ?CANCEL_WAIT, "the run did not end after it was cancelled (a call to Kafka or storage still waiting?); leaving its thread to end on its own");
            let still = format!("{name}: still running {CANCEL_WAIT:?} after it was cancelled");
            return (Some(still), None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if ended_first && handle.failed() {
        tracing::warn!(run = name, "stopped without a final checkpoint: the run failed first; the next run restores the last committed one");
        unclean = Some(format!("{name}: no final checkpoint (the run failed before it)"));
    }
    (unclean, Some(thread.join()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipeline that runs until stopped.
    fn endless() -> PipelineSpec {
        PipelineSpec::parse(
            "name: endless\noperators:\n  src: { source: { type: generator, count: 100000000, rate: 2000 } }\n  out: { inputs: [src], sink: { type: discard } }\n",
        )
        .unwrap()
    }

    /// Wait until `done` says so (the thread's end is the test's bound).
    fn until(done: impl Fn() -> bool) {
        while !done() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_run_started_while_an_earlier_run_of_its_pipeline_goes_on_waits_for_it_instead_of_failing()
    {
        let dir = tempfile::tempdir().unwrap();
        let options = || RunOptions::new(dir.path().to_path_buf());
        // The earlier run holds the pipeline's lock, as one a stop left
        // going on its thread does.
        let earlier = RunThread::spawn("earlier".into(), endless(), options()).unwrap();
        until(|| earlier.handle.listening() || earlier.thread.is_finished());
        assert!(earlier.handle.listening(), "the earlier run started");
        let next = RunThread::spawn("next".into(), endless(), options()).unwrap();
        assert!(next.waiting(), "it waits rather than fail on the lock");
        let ended = earlier.stop("earlier", None);
        assert!(ended.unclean.is_none(), "{:?}", ended.unclean);
        // Its turn comes: it runs (not failed as `already running`).
        until(|| next.handle.listening() || next.thread.is_finished());
        assert!(!next.waiting());
        assert!(next.handle.listening(), "the next run started");
        assert!(next.stop("next", None).unclean.is_none());

        // One cancelled while it waits ends without running.
        let earlier = RunThread::spawn("earlier".into(), endless(), options()).unwrap();
        let cancelled = RunThread::spawn("cancelled".into(), endless(), options()).unwrap();
        assert!(cancelled.waiting());
        cancelled.handle.cancel();
        let outcome = cancelled.thread.join().unwrap();
        assert!(matches!(outcome, Err(RunError::Stopped)), "{outcome:?}");
        assert!(earlier.stop("earlier", None).unclean.is_none());
    }
}
