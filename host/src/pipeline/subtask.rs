//! One keyed subtask (on its own thread): take batches from every input
//! channel (one per upstream producer and input), hand them to its
//! operator and route what it emits ([`Router`]); fire processing-time
//! timers as the clock passes; advance event time to the minimum of its
//! inputs' watermarks (an idle input does not hold it back); snapshot its
//! state once barrier N came from every input (aligned: an input that
//! delivered N is not read again until the others have), ack it and
//! forward the barrier.
//!
//! Processing-time timers stop when every input has ended (`End`, which
//! sources send before their final barrier): at the end of bounded input
//! every pending one fires first; at a stop they stay in the snapshot. So
//! nothing is emitted after the final barrier, where no checkpoint would
//! commit it.

use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};

use super::error::RunError;
use super::messages::SubtaskMessage;
use super::operator::KeyedOperator;
use super::router::Router;
use crate::checkpoint::{Ack, CheckpointError};
use crate::observe::inspect::{self, StateAnswer, StateQuery};
use crate::observe::live::{task_timing, LiveCounts, Stopwatch};
use crate::runtime::Language;
use crate::specification::graph::StageInput;
use crate::state::SnapshotForm;

/// How often an idle subtask checks for due processing-time timers.
const TIMER_POLL: Duration = Duration::from_millis(50);

/// How often a subtask reports its state's size and cache counters.
const STATE_STATS_EVERY: Duration = Duration::from_secs(1);

/// What a subtask's wait returned.
enum Received {
    /// A message (or the end) of input `usize`.
    Input(usize, Result<SubtaskMessage, crossbeam_channel::RecvError>),
    /// A query of a key's state.
    Query(StateQuery),
    /// Nothing: time to look at the timers.
    Nothing,
    /// Nobody can send state queries any more.
    QueriesClosed,
}

/// One input channel and what the subtask knows of it.
pub(crate) struct Input {
    /// The channel.
    pub(crate) channel: Receiver<SubtaskMessage>,
    /// Which input of the operator it feeds.
    pub(crate) role: StageInput,
    open: bool,
    /// Barrier of the checkpoint being aligned arrived: not read until
    /// every input's has.
    blocked: bool,
    watermark: i64,
    idle: bool,
    ended: Option<bool>,
}

impl Input {
    /// `channel`, feeding input `role`.
    pub(crate) fn new(channel: Receiver<SubtaskMessage>, role: StageInput) -> Self {
        Self {
            channel,
            role,
            open: true,
            blocked: false,
            watermark: i64::MIN,
            idle: false,
            ended: None,
        }
    }
}

/// A subtask's channels and where it writes local checkpoints.
pub(crate) struct Subtask {
    /// Its stage's name and its index there, for logs.
    pub(crate) stage: String,
    /// Its index in its stage.
    pub(crate) index: usize,
    /// Its number among every subtask of the pipeline (its snapshot slot).
    pub(crate) slot: usize,
    /// Its inputs.
    pub(crate) inputs: Vec<Input>,
    /// To the checkpoint coordinator.
    pub(crate) acks: Sender<Ack>,
    /// Where its snapshots go before the coordinator uploads them.
    pub(crate) local_checkpoints: PathBuf,
    /// Its live counters.
    pub(crate) counts: Arc<LiveCounts>,
    /// Queries of a key's state, answered between batches.
    pub(crate) queries: Option<Receiver<StateQuery>>,
    /// The language of its function (how its state is encoded).
    pub(crate) language: Option<Language>,
}

impl Subtask {
    /// Run `operator` until every input channel closes, routing its output
    /// through `router`.
    pub(crate) fn run(
        mut self,
        mut operator: KeyedOperator,
        mut router: Router<'_>,
    ) -> Result<(), RunError> {
        let _span =
            tracing::info_span!("subtask", stage = %self.stage, index = self.index).entered();
        // Every input ended (or a stop): no processing-time timer fires.
        let mut ended = false;
        let mut watermark = i64::MIN;
        let mut idle = false;
        // The checkpoint being aligned, and when its first barrier came.
        let mut aligning: Option<(u64, SnapshotForm, Instant)> = None;
        let mut stats_reported: Option<Instant> = None;
        loop {
            let readable: Vec<usize> = (0..self.inputs.len())
                .filter(|&i| self.inputs[i].open && !self.inputs[i].blocked)
                .collect();
            if readable.is_empty() && self.inputs.iter().all(|i| !i.open) {
                break;
            }
            let timers = operator.next_processing_timer().filter(|_| !ended).is_some();
            let waiting = Stopwatch::start();
            let received = self.wait(&readable, timers);
            self.counts.add_idle(waiting.elapsed());
            match received {
                Received::Input(input, Ok(message)) => match message {
                    SubtaskMessage::Events(batch) => {
                        self.counts.add_in(batch.len());
                        let StageInput::Keyed(side) = self.inputs[input].role else {
                            return Err(RunError::Deploy(
                                "keyed events on a broadcast input".into(),
                            ));
                        };
                        self.inputs[input].idle = false;
                        let _call = tracing::debug_span!("call", events = batch.len()).entered();
                        let calling = Stopwatch::start();
                        operator.on_events(side, batch)?;
                        self.counts.add_call(calling.elapsed());
                    }
                    SubtaskMessage::Broadcast(events) => {
                        self.counts.add_in(events.len());
                        let calling = Stopwatch::start();
                        operator.on_broadcast(events)?;
                        self.counts.add_call(calling.elapsed());
                    }
                    SubtaskMessage::Watermark(mark) => {
                        let slot = &mut self.inputs[input];
                        slot.watermark = slot.watermark.max(mark);
                        slot.idle = false;
                    }
                    SubtaskMessage::Idle => self.inputs[input].idle = true,
                    SubtaskMessage::Barrier(id, form) => {
                        self.inputs[input].blocked = true;
                        if aligning.is_none() {
                            aligning = Some((id, form, Instant::now()));
                        }
                    }
                    SubtaskMessage::End { drained } => self.inputs[input].ended = Some(drained),
                },
                Received::Input(input, Err(_)) => {
                    let slot = &mut self.inputs[input];
                    slot.open = false;
                    slot.ended.get_or_insert(false);
                }
                Received::Query(query) => self.answer(query, &mut operator),
                Received::QueriesClosed => self.queries = None,
                Received::Nothing => {}
            }
            // Event time: the least watermark of the inputs that are not idle.
            let active = self.inputs.iter().filter(|i| !i.idle && i.open);
            if let Some(least) = active.map(|i| i.watermark).min() {
                if least > watermark {
                    watermark = least;
                    self.counts.set_watermark(watermark);
                    let calling = Stopwatch::start();
                    operator.on_watermark(watermark)?;
                    self.counts.add_call(calling.elapsed());
                    self.forward_outputs(&mut operator, &mut router)?;
                    router.broadcast(|| SubtaskMessage::Watermark(watermark))?;
                    idle = false;
                }
            }
            let all_idle = self.inputs.iter().filter(|i| i.open).all(|i| i.idle)
                && self.inputs.iter().any(|i| i.open);
            if all_idle && !idle {
                router.broadcast(|| SubtaskMessage::Idle)?;
                idle = true;
            }
            if !ended && self.inputs.iter().all(|i| i.ended.is_some()) {
                ended = true;
                if self.inputs.iter().all(|i| i.ended == Some(true)) {
                    operator.end_processing_time()?;
                }
                self.forward_outputs(&mut operator, &mut router)?;
                router.metrics().input_done_at(Instant::now());
                let drained = self.inputs.iter().all(|i| i.ended == Some(true));
                router.broadcast(|| SubtaskMessage::End { drained })?;
            }
            if let Some((id, form, first_barrier)) = aligning {
                if self.inputs.iter().all(|i| i.blocked || !i.open) {
                    aligning = None;
                    let alignment = first_barrier.elapsed();
                    self.snapshot(id, form, alignment, ended, &mut operator, &mut router)?;
                    self.inputs.iter_mut().for_each(|i| i.blocked = false);
                }
            }
            if !ended {
                operator.on_processing_time()?;
            }
            self.forward_outputs(&mut operator, &mut router)?;
            operator.relieve()?;
            if task_timing() && stats_reported.is_none_or(|at| at.elapsed() >= STATE_STATS_EVERY) {
                stats_reported = Some(Instant::now());
                self.counts.set_state(operator.state_stats());
            }
        }
        router.flush()?;
        operator.flush()
    }

    /// Wait for a message on one of the `readable` inputs or a state query,
    /// up to [`TIMER_POLL`] when processing-time `timers` are pending, else
    /// up to [`STATE_STATS_EVERY`].
    fn wait(&self, readable: &[usize], timers: bool) -> Received {
        if readable.is_empty() {
            return Received::Nothing;
        }
        let mut select = Select::new();
        for &i in readable {
            select.recv(&self.inputs[i].channel);
        }
        if let Some(queries) = &self.queries {
            select.recv(queries);
        }
        // Wake up at least once a second to report the state's figures.
        let limit = if timers { TIMER_POLL } else { STATE_STATS_EVERY };
        let chosen = select.select_timeout(limit).ok();
        let Some(operation) = chosen else { return Received::Nothing };
        match readable.get(operation.index()) {
            Some(&input) => Received::Input(input, operation.recv(&self.inputs[input].channel)),
            None => match self.queries.as_ref().map(|q| operation.recv(q)) {
                Some(Ok(query)) => Received::Query(query),
                _ => Received::QueriesClosed,
            },
        }
    }

    /// Answer a query of a key's state from the operator's state as it is
    /// between two batches.
    fn answer(&self, query: StateQuery, operator: &mut KeyedOperator) {
        let answer = match operator.backend() {
            Some(backend) => inspect::read_state(backend, &query).map(|value| StateAnswer {
                value,
                language: self.language,
                subtask: self.index,
            }),
            None => Err("this operator keeps no keyed state".to_string()),
        };
        let _ = query.reply.send(answer);
    }

    /// Barrier `id` came from every input: snapshot the state, ack, and
    /// forward the barrier.
    fn snapshot(
        &self,
        id: u64,
        form: SnapshotForm,
        alignment: Duration,
        ended: bool,
        operator: &mut KeyedOperator,
        router: &mut Router<'_>,
    ) -> Result<(), RunError> {
        // Timers due by now fire before the barrier, and what was emitted
        // before it belongs before it.
        if !ended {
            operator.on_processing_time()?;
        }
        self.forward_outputs(operator, router)?;
        let dir =
            self.local_checkpoints.join(format!("chk-{id}")).join(format!("subtask-{}", self.slot));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(CheckpointError::from)?;
        }
        std::fs::create_dir_all(dir.parent().unwrap_or(&self.local_checkpoints))
            .map_err(CheckpointError::from)?;
        let started = std::time::Instant::now();
        operator.checkpoint(&dir, form)?;
        tracing::debug!(id, slot = self.slot, took = ?started.elapsed(), "subtask snapshot written");
        let _ = self.acks.send(Ack::Subtask { id, index: self.slot, dir, alignment });
        router.barrier(id, form)
    }

    /// Route what the operator emitted.
    fn forward_outputs(
        &self,
        operator: &mut KeyedOperator,
        router: &mut Router<'_>,
    ) -> Result<(), RunError> {
        let (main, side, late_dropped) = operator.take_outputs();
        self.counts.add_late_dropped(late_dropped);
        if main.is_empty() && side.is_empty() {
            return Ok(());
        }
        self.counts.add_out(main.len());
        router.emit(None, main)?;
        router.emit_side(side)?;
        router.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::mpsc;

    use crossbeam_channel::{bounded, Sender};

    use super::*;
    use crate::join::{JoinConfig, JoinKind, JoinOperator};
    use crate::observe::live::LiveMetrics;
    use crate::pipeline::operator::{FunctionEnv, RoutedBatch};
    use crate::pipeline::router::{PortsPlan, RoutePlan, RouterLinks};
    use crate::runtime::FunctionLimits;
    use crate::state::RocksDbBackend;
    use crate::Event;

    /// A subtask running an interval join (0 to 100 ms) over two inputs,
    /// its main output broadcast to `downstream`.
    struct Harness {
        left: Sender<SubtaskMessage>,
        right: Sender<SubtaskMessage>,
        acks: mpsc::Receiver<Ack>,
        downstream: Receiver<SubtaskMessage>,
        thread: std::thread::JoinHandle<Result<(), RunError>>,
        _dir: tempfile::TempDir,
    }

    impl Harness {
        /// Input channels of `capacity` messages (0: a send returns once
        /// the subtask took the message).
        fn start(capacity: usize) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let (left, left_rx) = bounded(capacity);
            let (right, right_rx) = bounded(capacity);
            let (down_tx, downstream) = bounded(256);
            let (ack_tx, acks) = mpsc::channel();
            let backend = Box::new(RocksDbBackend::open(&dir.path().join("db")).unwrap());
            let operator = KeyedOperator::Join(Box::new(
                JoinOperator::new(
                    JoinConfig {
                        kind: JoinKind::Interval { lower: 0, upper: 100 },
                        late_output: None,
                        max_parallelism: 128,
                    },
                    backend,
                )
                .unwrap(),
            ));
            let subtask = Subtask {
                stage: "joined".into(),
                index: 0,
                slot: 0,
                inputs: vec![
                    Input::new(left_rx, StageInput::Keyed(0)),
                    Input::new(right_rx, StageInput::Keyed(1)),
                ],
                acks: ack_tx,
                local_checkpoints: dir.path().join("local"),
                counts: Arc::default(),
                queries: None,
                language: None,
            };
            let plan = PortsPlan {
                ports: BTreeMap::from([(None, vec![RoutePlan::Broadcast(vec![down_tx])])]),
            };
            let thread = std::thread::spawn(move || {
                let env = FunctionEnv {
                    limits: FunctionLimits::default(),
                    interpreted_limits: FunctionLimits::default(),
                    resources: None,
                    max_parallelism: 128,
                    ttl_overrides: Default::default(),
                    dead_letter: None,
                };
                let metrics = LiveMetrics::default();
                let (sink, _sink_rx) = mpsc::sync_channel(1024);
                let counts = Arc::default();
                let links = RouterLinks { sink, from: 0, sinks: 0, metrics: &metrics, counts };
                let router = Router::new(plan, "test", &env, links)?;
                subtask.run(operator, router)
            });
            Harness { left, right, acks, downstream, thread, _dir: dir }
        }

        /// What reached the stage after it, once both inputs closed.
        fn finish(self) -> Vec<String> {
            drop((self.left, self.right));
            self.thread.join().unwrap().unwrap();
            self.downstream
                .try_iter()
                .map(|message| match message {
                    SubtaskMessage::Watermark(w) => format!("watermark {w}"),
                    SubtaskMessage::Barrier(id, _) => format!("barrier {id}"),
                    SubtaskMessage::Broadcast(events) => events
                        .iter()
                        .map(|e| String::from_utf8_lossy(&e.value).into_owned())
                        .collect::<Vec<_>>()
                        .join(" "),
                    SubtaskMessage::Idle => "idle".into(),
                    SubtaskMessage::End { drained } => format!("end {drained}"),
                    SubtaskMessage::Events(_) => "keyed events".into(),
                })
                .collect()
        }
    }

    fn event(key: &str, value: &str, timestamp: i64) -> SubtaskMessage {
        let mut batch = RoutedBatch::default();
        batch.push(
            key.as_bytes(),
            Event { key: None, value: value.as_bytes().to_vec(), timestamp, headers: vec![] },
        );
        SubtaskMessage::Events(batch)
    }

    /// Wait for the stage after it to get watermark `mark`; every watermark
    /// before it, in order.
    fn watermarks_until(h: &Harness, mark: i64) -> Vec<i64> {
        let mut seen = Vec::new();
        while seen.last() != Some(&mark) {
            match h.downstream.recv_timeout(Duration::from_secs(5)) {
                Ok(SubtaskMessage::Watermark(w)) => seen.push(w),
                Ok(_) => {}
                Err(_) => panic!("no watermark {mark} came; saw {seen:?}"),
            }
        }
        seen
    }

    #[test]
    fn event_time_is_the_least_of_the_inputs_and_an_idle_input_holds_nothing_back() {
        // Each message is taken before the next is sent: the order is ours.
        let h = Harness::start(0);
        h.left.send(SubtaskMessage::Watermark(100)).unwrap();
        h.right.send(SubtaskMessage::Watermark(50)).unwrap();
        assert_eq!(watermarks_until(&h, 50), [50], "the least of 100 and 50");
        h.right.send(SubtaskMessage::Idle).unwrap();
        assert_eq!(watermarks_until(&h, 100), [100], "the idle input holds nothing back");
        // Active again, but behind: event time does not go back, and the
        // right input holds it back again.
        h.right.send(SubtaskMessage::Watermark(70)).unwrap();
        h.left.send(SubtaskMessage::Watermark(200)).unwrap();
        h.right.send(SubtaskMessage::Watermark(150)).unwrap();
        assert_eq!(watermarks_until(&h, 150), [150]);
        // Closing the inputs (their producers gone) may let the left's 200
        // through, as the right one closes first; nothing goes back.
        let rest = h.finish();
        assert_eq!(rest.last().map(String::as_str), Some("end false"), "{rest:?}");
        assert!(rest.iter().all(|m| m == "watermark 200" || m == "end false"), "{rest:?}");
    }

    #[test]
    fn the_barrier_waits_for_every_input_and_what_follows_it_stays_after_it() {
        for _ in 0..20 {
            let h = Harness::start(64);
            // The left input passes barrier 1 first, then sends the event
            // that completes a pair; the right input's half of the pair
            // comes before its barrier 1.
            h.left.send(SubtaskMessage::Barrier(1, crate::state::SnapshotForm::Database)).unwrap();
            h.left.send(event("k", "{\"l\":1}", 10)).unwrap();
            h.right.send(event("k", "{\"r\":1}", 10)).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            h.right.send(SubtaskMessage::Barrier(1, crate::state::SnapshotForm::Database)).unwrap();
            let acks = &h.acks;
            let ack = acks.recv_timeout(Duration::from_secs(10)).expect("the subtask acks");
            assert!(matches!(ack, Ack::Subtask { id: 1, index: 0, .. }), "{ack:?}");
            let seen = h.finish();
            let barrier = seen.iter().position(|m| m == "barrier 1").expect("forwarded");
            let pair = seen.iter().position(|m| m.contains("\"left\"")).expect("joined");
            assert!(barrier < pair, "the pair needs the left event sent after barrier 1: {seen:?}");
            assert_eq!(seen.iter().filter(|m| *m == "barrier 1").count(), 1, "{seen:?}");
        }
    }
}
