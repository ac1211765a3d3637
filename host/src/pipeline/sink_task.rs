//! The sink task (on its own thread): write what the subtasks and the
//! source send to the main sink and the side outputs' sinks, each batch
//! under its input's epoch; at barrier N from an input, end that input's
//! epoch; once barrier N came from every input, pre-commit and ack N to
//! the coordinator; commit when the coordinator says N is complete.
//!
//! Each input is tagged with its own epoch (the id of the next checkpoint
//! it has not passed), so the sink never holds an input back to align
//! barriers: a fast input's output simply belongs to a later epoch.
//!
//! Event time of the output: each epoch's watermark is the least of the
//! watermarks its inputs had sent before their barrier (idle inputs hold
//! nothing back), given to the sinks just before the pre-commit
//! ([`Sink::watermark`]); so no output of an epoch is older than the event
//! time written with it.
//!
//! A sink may still be delivering a checkpoint's output when it
//! pre-commits (an at-least-once Kafka producer's records in flight): the
//! checkpoint is acknowledged once [`Sink::is_durable`] says it holds,
//! checked after each message and every [`DURABLE_POLL`] meanwhile, and
//! later output is written without waiting.
//!
//! Without checkpoints, output a sink buffers is released to its readers
//! ([`Sink::release`]) once the oldest of it has waited the pipeline's
//! `batch_linger`, whether or not more arrives.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::RunError;
use super::messages::SinkMessage;
use crate::checkpoint::Ack;
use crate::connectors::{open_sink, SinkMode};
use crate::connectors::{Cancelled, Sink};
use crate::observe::latency::LatencyRecorder;
use crate::observe::live::{RunHandle, Stopwatch};
use crate::specification::graph::{output_name, Graph, LINE_SINK};

/// What the sinks record in a snapshot: each sink's pre-commit state (a
/// line spec's main sink as `main`, every other sink by name).
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SinkState {
    main: serde_json::Value,
    #[serde(default)]
    side: BTreeMap<String, serde_json::Value>,
}

/// One sink of the pipeline.
pub(crate) struct NamedSink {
    /// Its node's name ([`LINE_SINK`] for a line spec's main sink).
    pub(crate) name: String,
    /// The sink.
    pub(crate) sink: Box<dyn Sink>,
    /// Whether what it writes counts as side output.
    pub(crate) side: bool,
}

/// The sink thread's sinks, inputs and channels.
pub(crate) struct SinkTask {
    /// The sinks, in the order of [`SinkMessage::Batch`]'s `sink`.
    pub(crate) sinks: Vec<NamedSink>,
    /// How many inputs send barriers: every producer (sources, subtasks).
    pub(crate) inputs: usize,
    /// Every input's epoch at the start: the id of the run's first snapshot.
    pub(crate) first_epoch: u64,
    /// Checkpointing: output becomes visible when its checkpoint completes,
    /// and nothing is flushed at the end.
    pub(crate) exactly_once: bool,
    /// The newest snapshot whose output is known to be committed when the
    /// run starts (what the Kafka commit marker said); each commit that
    /// returns moves it on, and each ack reports it (see
    /// [`SnapshotMetadata::last_committed`](crate::checkpoint::SnapshotMetadata::last_committed)).
    pub(crate) committed: Option<u64>,
    /// Without checkpoints: how long written output may wait in a sink's
    /// buffer before it is released.
    pub(crate) linger: Duration,
    /// Testing aid: pause this long after each batch.
    pub(crate) delay: Option<Duration>,
    /// Each written event's latency, if asked for.
    pub(crate) latency: Option<LatencyRecorder>,
    /// Where the counts go.
    pub(crate) handle: Arc<RunHandle>,
    /// To the checkpoint coordinator.
    pub(crate) acks: Sender<Ack>,
}

/// Open the graph's sinks, retrying transient failures for
/// `retry_budget`; with checkpoints (`exactly_once`) from the pre-commit
/// state `recovered` of the snapshot the run restores, if any.
pub(crate) fn open_sinks(
    graph: &Graph,
    exactly_once: bool,
    recovered: Option<&serde_json::Value>,
    retry_budget: Duration,
    cancelled: &Cancelled,
) -> Result<Vec<NamedSink>, RunError> {
    let recovered: Option<SinkState> = recovered
        .filter(|v| !v.is_null())
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|source| RunError::SnapshotState {
            what: "cannot decode the sink state in the snapshot",
            source,
        })?;
    let mode = |state: Option<&serde_json::Value>| {
        if exactly_once {
            SinkMode::ExactlyOnce(state.filter(|v| !v.is_null()).cloned())
        } else {
            SinkMode::Direct
        }
    };
    graph
        .sinks
        .iter()
        .map(|node| {
            let state = recovered.as_ref().and_then(|r| match node.name.as_str() {
                LINE_SINK => Some(&r.main),
                name => r.side.get(name),
            });
            let mut sink = open_sink(&node.spec, mode(state))?;
            sink.set_retry_budget(retry_budget);
            sink.set_cancelled(Arc::clone(cancelled));
            Ok(NamedSink { name: node.name.clone(), sink, side: node.side })
        })
        .collect()
}

impl SinkTask {
    /// Handle what arrives on `input` until every sender is gone.
    pub(crate) fn run(mut self, input: Receiver<SinkMessage>) -> Result<(), RunError> {
        let handle = Arc::clone(&self.handle);
        let report = &handle.metrics;
        let mut epochs = vec![self.first_epoch; self.inputs];
        let mut barriers: BTreeMap<u64, usize> = BTreeMap::new();
        // Each input's watermark (`None`: idle), and per open barrier the
        // least watermark its inputs had when they passed it.
        let mut marks: Vec<Option<i64>> = vec![Some(i64::MIN); self.inputs];
        let mut barrier_marks: BTreeMap<u64, EpochMark> = BTreeMap::new();
        // Without checkpoints: when the oldest output not yet released was
        // written.
        let mut unreleased_since: Option<Instant> = None;
        // Pre-committed checkpoints whose output is not yet durable, oldest
        // first, with their acknowledgements.
        let mut undurable: VecDeque<(u64, Ack)> = VecDeque::new();
        let mut last_written: Option<Instant> = None;
        loop {
            let waiting = Stopwatch::start();
            let release_in =
                unreleased_since.map(|since| self.linger.saturating_sub(since.elapsed()));
            let check_in = (!undurable.is_empty()).then_some(DURABLE_POLL);
            let message = match release_in.into_iter().chain(check_in).min() {
                None => input.recv().ok(),
                Some(wait) => match input.recv_timeout(wait) {
                    Ok(message) => Some(message),
                    Err(RecvTimeoutError::Timeout) => {
                        report.sink.add_idle(waiting.elapsed());
                        release_due(&mut self.sinks, self.linger, &mut unreleased_since)?;
                        self.ack_durable(&mut undurable)?;
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => None,
                },
            };
            let Some(message) = message else { break };
            report.sink.add_idle(waiting.elapsed());
            match message {
                SinkMessage::Watermark { from, mark } => marks[from] = mark,
                SinkMessage::Batch { from, sink, events } => {
                    let target = &mut self.sinks[sink];
                    report.sink.add_in(events.len());
                    let writing = Stopwatch::start();
                    target.sink.write(epochs[from], &events)?;
                    if let Some(latency) = &mut self.latency {
                        if target.sink.visible_when_written() {
                            latency.record_visible(events.timestamps());
                        } else {
                            latency.record(epochs[from], events.timestamps());
                        }
                    }
                    if let Some(delay) = self.delay {
                        std::thread::sleep(delay);
                    }
                    report.sink.add_call(writing.elapsed());
                    last_written = Some(Instant::now());
                    let counter =
                        if target.side { &report.side_written } else { &report.sink_written };
                    counter.fetch_add(events.len() as u64, Ordering::Relaxed);
                    self.handle.tail.offer(output_name(&target.name), &events);
                    if !self.exactly_once {
                        unreleased_since.get_or_insert_with(Instant::now);
                        release_due(&mut self.sinks, self.linger, &mut unreleased_since)?;
                    }
                }
                SinkMessage::Barrier { from, id } => {
                    for target in &mut self.sinks {
                        target.sink.end_of_epoch(epochs[from])?;
                    }
                    epochs[from] = id + 1;
                    barrier_marks.entry(id).or_default().add(marks[from]);
                    let arrived = barriers.entry(id).or_default();
                    *arrived += 1;
                    if *arrived == self.inputs {
                        barriers.remove(&id);
                        let mark = barrier_marks.remove(&id).unwrap_or_default();
                        let mut state = SinkState::default();
                        let drained = self.handle.drains_at(id);
                        for target in &mut self.sinks {
                            if let Some(watermark) = mark.known() {
                                target.sink.watermark(id, watermark)?;
                            }
                            if drained {
                                target.sink.drain(id)?;
                            }
                            let pre_committed = target.sink.pre_commit(id)?;
                            match target.name.as_str() {
                                LINE_SINK => state.main = pre_committed,
                                name => {
                                    state.side.insert(name.to_string(), pre_committed);
                                }
                            }
                        }
                        let state = serde_json::to_value(state).map_err(|source| {
                            RunError::SnapshotState { what: "cannot encode the sink state", source }
                        })?;
                        let committed = self.committed;
                        undurable.push_back((id, Ack::Sink { id, state, committed }));
                    }
                }
                SinkMessage::Complete(id) => {
                    for target in &mut self.sinks {
                        target.sink.commit(id)?;
                    }
                    self.committed = Some(id);
                    if let Some(latency) = &mut self.latency {
                        latency.committed(id);
                    }
                }
            }
            self.ack_durable(&mut undurable)?;
        }
        if let Some(&(newest, _)) = undurable.back() {
            // The inputs are gone: wait for the output still in flight.
            for target in &mut self.sinks {
                if !target.sink.is_durable(newest)? {
                    target.sink.flush()?;
                }
            }
            self.ack_durable(&mut undurable)?;
        }
        if !self.exactly_once {
            for target in &mut self.sinks {
                target.sink.flush()?;
            }
        }
        if let Some(latency) = &self.latency {
            report.set_latency(latency.summary());
        }
        report.set_last_written(last_written);
        Ok(())
    }

    /// Acknowledge, oldest first, each pre-committed checkpoint whose
    /// output every sink holds durable.
    fn ack_durable(&mut self, undurable: &mut VecDeque<(u64, Ack)>) -> Result<(), RunError> {
        while let Some(&(id, _)) = undurable.front() {
            for target in &mut self.sinks {
                if !target.sink.is_durable(id)? {
                    return Ok(());
                }
            }
            if let Some((_, ack)) = undurable.pop_front() {
                let _ = self.acks.send(ack);
            }
        }
        Ok(())
    }
}

/// How often the sink task asks its sinks whether a pre-committed
/// checkpoint's output is durable while no message arrives.
pub(crate) const DURABLE_POLL: Duration = Duration::from_millis(1);

/// Hand what `sinks` buffered on to their readers once the oldest of it,
/// written at `since`, has waited `linger`; then nothing is waiting.
fn release_due(
    sinks: &mut [NamedSink],
    linger: Duration,
    since: &mut Option<Instant>,
) -> Result<(), RunError> {
    if since.is_some_and(|since| since.elapsed() >= linger) {
        for target in sinks {
            target.sink.release()?;
        }
        *since = None;
    }
    Ok(())
}

/// The event time of an epoch's output: the least watermark of its
/// inputs that were not idle at their barrier.
#[derive(Debug, Clone, Copy, Default)]
struct EpochMark {
    /// The least so far, `None` while every input counted was idle.
    least: Option<i64>,
    /// Some input counted.
    counted: bool,
}

impl EpochMark {
    /// Count an input at `mark` (`None`: idle).
    fn add(&mut self, mark: Option<i64>) {
        self.counted = true;
        if let Some(mark) = mark {
            self.least = Some(self.least.map_or(mark, |least| least.min(mark)));
        }
    }

    /// What to tell the sinks: `Some(Some(w))` event time `w`,
    /// `Some(None)` every input idle, `None` nothing known yet.
    fn known(&self) -> Option<Option<i64>> {
        match self.least {
            Some(i64::MIN) => None,
            Some(least) => Some(Some(least)),
            None if self.counted => Some(None),
            None => None,
        }
    }
}

#[cfg(test)]
mod epoch_mark_tests {
    use super::EpochMark;

    #[test]
    fn an_epochs_event_time_is_the_least_of_its_inputs_that_are_not_idle() {
        let mark = |inputs: &[Option<i64>]| {
            let mut mark = EpochMark::default();
            inputs.iter().for_each(|m| mark.add(*m));
            mark.known()
        };
        assert_eq!(mark(&[Some(30), Some(10), None]), Some(Some(10)));
        assert_eq!(mark(&[None, None]), Some(None), "every input idle: say so");
        assert_eq!(mark(&[Some(i64::MIN), Some(10)]), None, "an input with no event time yet");
        assert_eq!(mark(&[]), None);
    }
}

#[cfg(test)]
mod tests {
    //! The sink task driven through its channel, over sinks that behave
    //! like a transactional one: what is written stays pending until a
    //! commit (or, without checkpoints, a flush) makes it visible.

    use std::sync::mpsc::{channel, TryRecvError};
    use std::sync::Mutex;

    use super::*;
    use crate::connectors::ConnectorError;
    use crate::runtime::packed::PackedEvents;
    use crate::Event;

    /// A call a sink received.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Call {
        Write(u64, Vec<String>),
        EndOfEpoch(u64),
        PreCommit(u64),
        Commit(u64),
        Flush,
        Release,
    }

    /// What one recording sink saw and what a reader of it would see.
    #[derive(Debug, Default)]
    struct Output {
        calls: Vec<Call>,
        /// Written, not yet visible: by epoch.
        pending: BTreeMap<u64, Vec<String>>,
        /// Visible, in the order it became so: (epoch, value).
        visible: Vec<(u64, String)>,
    }

    impl Output {
        /// Make the pending epochs up to `last` visible.
        fn publish(&mut self, last: u64) {
            let later = self.pending.split_off(&(last.saturating_add(1)));
            for (epoch, values) in std::mem::replace(&mut self.pending, later) {
                self.visible.extend(values.into_iter().map(|v| (epoch, v)));
            }
        }

        fn visible_in(&self, epoch: u64) -> Vec<&str> {
            self.visible.iter().filter(|(e, _)| *e == epoch).map(|(_, v)| v.as_str()).collect()
        }
    }

    #[derive(Clone, Default)]
    struct Recording(Arc<Mutex<Output>>);

    impl Recording {
        fn get(&self) -> std::sync::MutexGuard<'_, Output> {
            self.0.lock().unwrap()
        }
    }

    impl Sink for Recording {
        fn write(&mut self, epoch: u64, events: &PackedEvents) -> Result<(), ConnectorError> {
            let values: Vec<String> =
                events.iter().map(|e| String::from_utf8(e.value.to_vec()).unwrap()).collect();
            let mut out = self.get();
            out.calls.push(Call::Write(epoch, values.clone()));
            out.pending.entry(epoch).or_default().extend(values);
            Ok(())
        }

        fn flush(&mut self) -> Result<(), ConnectorError> {
            let mut out = self.get();
            out.calls.push(Call::Flush);
            out.publish(u64::MAX);
            Ok(())
        }

        fn release(&mut self) -> Result<(), ConnectorError> {
            let mut out = self.get();
            out.calls.push(Call::Release);
            out.publish(u64::MAX);
            Ok(())
        }

        fn end_of_epoch(&mut self, epoch: u64) -> Result<(), ConnectorError> {
            self.get().calls.push(Call::EndOfEpoch(epoch));
            Ok(())
        }

        fn pre_commit(&mut self, checkpoint: u64) -> Result<serde_json::Value, ConnectorError> {
            self.get().calls.push(Call::PreCommit(checkpoint));
            Ok(serde_json::json!({ "pre_committed": checkpoint }))
        }

        fn commit(&mut self, checkpoint: u64) -> Result<(), ConnectorError> {
            let mut out = self.get();
            out.calls.push(Call::Commit(checkpoint));
            out.publish(checkpoint);
            Ok(())
        }
    }

    fn event(value: &str) -> Event {
        Event { key: None, value: value.as_bytes().to_vec(), timestamp: 0, headers: vec![] }
    }

    fn events(values: &[&str]) -> PackedEvents {
        PackedEvents::of(&values.iter().map(|v| event(v)).collect::<Vec<_>>())
    }

    fn batch(from: usize, values: &[&str]) -> SinkMessage {
        SinkMessage::Batch { from, sink: 0, events: events(values) }
    }

    fn late(from: usize, values: &[&str]) -> SinkMessage {
        SinkMessage::Batch { from, sink: 1, events: events(values) }
    }

    fn visible(epoch: u64, values: &[&str]) -> Vec<(u64, String)> {
        values.iter().map(|v| (epoch, v.to_string())).collect()
    }

    fn barrier(from: usize, id: u64) -> SinkMessage {
        SinkMessage::Barrier { from, id }
    }

    /// A sink task over a recording main sink and a recording side output
    /// `late`, run over `messages`: (main, late, acks, counters).
    struct Run {
        main: Recording,
        late: Recording,
        acks: Vec<Ack>,
        handle: Arc<RunHandle>,
    }

    fn run(inputs: usize, exactly_once: bool, messages: Vec<SinkMessage>) -> Run {
        let (main, late) = (Recording::default(), Recording::default());
        let (ack_tx, ack_rx) = channel();
        let handle = RunHandle::new();
        let task = SinkTask {
            sinks: vec![
                NamedSink { name: LINE_SINK.into(), sink: Box::new(main.clone()), side: false },
                NamedSink { name: "late".into(), sink: Box::new(late.clone()), side: true },
            ],
            inputs,
            first_epoch: if exactly_once { 1 } else { 0 },
            exactly_once,
            committed: None,
            linger: Duration::from_secs(3600),
            delay: None,
            latency: None,
            handle: handle.clone(),
            acks: ack_tx,
        };
        let (tx, rx) = channel();
        messages.into_iter().for_each(|m| tx.send(m).unwrap());
        drop(tx);
        task.run(rx).unwrap();
        let acks = ack_rx.try_iter().collect();
        assert!(matches!(ack_rx.try_recv(), Err(TryRecvError::Disconnected)));
        Run { main, late, acks, handle }
    }

    fn sink_acks(acks: &[Ack]) -> Vec<(u64, serde_json::Value)> {
        acks.iter()
            .map(|ack| match ack {
                Ack::Sink { id, state, .. } => (*id, state.clone()),
                other => panic!("the sink sent {other:?}"),
            })
            .collect()
    }

    #[test]
    fn output_is_committed_in_the_epoch_of_its_input() {
        // Two subtasks (inputs 0, 1) and the source (input 2). Subtask 0
        // passes barrier 1 early; what it sends next belongs to epoch 2
        // even though subtask 1 is still in epoch 1.
        let run = run(
            3,
            true,
            vec![
                batch(0, &["a"]),
                barrier(0, 1),
                batch(0, &["b"]),
                batch(1, &["c"]),
                barrier(2, 1),
                barrier(1, 1),
                batch(1, &["d"]),
                SinkMessage::Complete(1),
                batch(0, &["e"]),
            ],
        );
        let main = run.main.get();
        assert_eq!(main.visible_in(1), ["a", "c"]);
        assert!(main.visible_in(2).is_empty(), "epoch 2 is not committed");
        assert_eq!(main.pending, BTreeMap::from([(2, vec!["b".into(), "d".into(), "e".into()])]));
        // Every input ended epoch 1 at its own barrier; nothing flushed at
        // the end: checkpoint 2 never completed.
        assert_eq!(main.calls.iter().filter(|c| **c == Call::EndOfEpoch(1)).count(), 3);
        assert!(!main.calls.contains(&Call::Flush));
        assert_eq!(run.handle.metrics.sink_written.load(Ordering::Relaxed), 5);
        // One ack, after the last input's barrier, with both sinks' state.
        assert_eq!(
            sink_acks(&run.acks),
            [(
                1,
                serde_json::json!({
                    "main": { "pre_committed": 1 },
                    "side": { "late": { "pre_committed": 1 } },
                })
            )]
        );
    }

    #[test]
    fn pre_commits_once_every_input_passed_the_barrier_in_any_interleaving() {
        // Each input sends: x1, barrier 1, x2, barrier 2, x3. Every
        // interleaving of the two inputs gives the same committed epochs.
        let script = |from: usize| {
            let name = |n: u32| format!("{from}-{n}");
            vec![
                batch(from, &[&name(1)]),
                barrier(from, 1),
                batch(from, &[&name(2)]),
                barrier(from, 2),
                batch(from, &[&name(3)]),
            ]
        };
        let steps = 5;
        let mut interleavings = 0;
        for mask in 0u32..(1 << (2 * steps)) {
            if mask.count_ones() != steps {
                continue;
            }
            interleavings += 1;
            let (mut first, mut second) = (script(0).into_iter(), script(1).into_iter());
            let mut messages: Vec<SinkMessage> = (0..2 * steps)
                .map(|i| if mask & (1 << i) == 0 { first.next() } else { second.next() })
                .map(Option::unwrap)
                .collect();
            messages.extend([SinkMessage::Complete(1), SinkMessage::Complete(2)]);
            let run = run(2, true, messages);
            let main = run.main.get();
            assert_eq!(main.visible_in(1), sorted_by_arrival(&main, ["0-1", "1-1"]));
            assert_eq!(main.visible_in(2), sorted_by_arrival(&main, ["0-2", "1-2"]));
            let pending: Vec<&String> = main.pending.values().flatten().collect();
            assert_eq!(main.pending.keys().collect::<Vec<_>>(), [&3u64]);
            assert_eq!(pending.len(), 2);
            // Pre-commit N right after the second input ended epoch N,
            // never before.
            for n in [1, 2] {
                let ended: Vec<usize> = (0..main.calls.len())
                    .filter(|i| main.calls[*i] == Call::EndOfEpoch(n))
                    .collect();
                let pre_commit = main.calls.iter().position(|c| *c == Call::PreCommit(n));
                assert_eq!(ended.len(), 2, "mask {mask:b}");
                assert_eq!(pre_commit, Some(ended[1] + 1), "mask {mask:b}: {:?}", main.calls);
            }
            let acked: Vec<u64> = sink_acks(&run.acks).into_iter().map(|(id, _)| id).collect();
            assert_eq!(acked, [1, 2], "mask {mask:b}");
        }
        assert_eq!(interleavings, 252);
    }

    /// `values` in the order the sink received them.
    fn sorted_by_arrival<'a>(output: &Output, values: [&'a str; 2]) -> Vec<&'a str> {
        let position = |value: &str| {
            output.calls.iter().position(|c| matches!(c, Call::Write(_, v) if v == &[value]))
        };
        let mut values = values.to_vec();
        values.sort_by_key(|v| position(v));
        values
    }

    #[test]
    fn a_checkpoint_commits_only_on_complete() {
        let run = run(1, true, vec![batch(0, &["a"]), barrier(0, 1), batch(0, &["b"])]);
        let main = run.main.get();
        // Pre-committed and acked, but the coordinator never said complete:
        // nothing is visible, and the end of the input flushes nothing.
        assert_eq!(sink_acks(&run.acks).len(), 1);
        assert!(main.visible.is_empty());
        assert_eq!(main.calls.last(), Some(&Call::Write(2, vec!["b".into()])));
    }

    #[test]
    fn without_checkpoints_output_is_released_once_it_waited_the_linger() {
        let main = Recording::default();
        let (ack_tx, _acks) = channel();
        let task = SinkTask {
            sinks: vec![NamedSink {
                name: LINE_SINK.into(),
                sink: Box::new(main.clone()),
                side: false,
            }],
            inputs: 1,
            first_epoch: 0,
            exactly_once: false,
            committed: None,
            linger: Duration::from_millis(5),
            delay: None,
            latency: None,
            handle: RunHandle::new(),
            acks: ack_tx,
        };
        let (tx, rx) = channel();
        let thread = std::thread::spawn(move || task.run(rx));
        tx.send(batch(0, &["a"])).unwrap();
        // Nothing else arrives and the input stays open: the output is
        // released all the same, not held until more comes or the end.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !main.get().calls.contains(&Call::Release) {
            assert!(Instant::now() < deadline, "never released: {:?}", main.get().calls);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(main.get().visible, visible(0, &["a"]));
        drop(tx);
        thread.join().unwrap().unwrap();
        assert_eq!(
            main.get().calls,
            [Call::Write(0, vec!["a".into()]), Call::Release, Call::Flush],
            "one release, then the flush at the end"
        );
    }

    #[test]
    fn without_checkpoints_the_output_is_flushed_at_the_end() {
        let run =
            run(2, false, vec![batch(0, &["a", "b"]), batch(1, &["c"]), late(1, &["l", "m"])]);
        let main = run.main.get();
        assert_eq!(main.visible, visible(0, &["a", "b", "c"]));
        assert_eq!(main.calls.last(), Some(&Call::Flush));
        assert_eq!(run.late.get().visible, visible(0, &["l", "m"]));
        assert!(run.acks.is_empty());
    }

    #[test]
    fn side_outputs_are_written_in_their_inputs_epochs() {
        let run = run(
            2,
            true,
            vec![
                batch(0, &["a"]),
                late(0, &["x"]),
                barrier(0, 1),
                // The source's dead letters go to its own input, still in epoch 1.
                late(1, &["z"]),
                barrier(1, 1),
                late(0, &["w"]),
                SinkMessage::Complete(1),
            ],
        );
        assert_eq!(run.main.get().visible_in(1), ["a"]);
        let late = run.late.get();
        assert_eq!(late.visible_in(1), ["x", "z"]);
        assert_eq!(late.pending, BTreeMap::from([(2, vec!["w".into()])]));
        assert!(late.calls.contains(&Call::EndOfEpoch(1)));
        let metrics = &run.handle.metrics;
        assert_eq!(metrics.side_written.load(Ordering::Relaxed), 3);
        assert_eq!(metrics.sink_written.load(Ordering::Relaxed), 1);
    }
}
