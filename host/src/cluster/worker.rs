//! A worker: one member of the pipeline's consumer group, running the units
//! the group assigns it (see `docs/cluster.md`).
//!
//! The worker subscribes to the units topic (one partition per unit) with
//! the cooperative-sticky assignor and never reads a record: the group's
//! assignment of those partitions is the assignment of units. On
//! assignment a unit starts — an ordinary pipeline run that first fences
//! its transactional ids, reads its commit marker and restores that
//! snapshot from the shared storage — and only then reads its input. On
//! revocation (inside the rebalance callback, so the group waits for it)
//! a unit stops with a final checkpoint, its transaction committed, before
//! the next owner may start it; on a lost assignment likewise, the next
//! owner's fencing aborting whatever could not finish. A unit that fails is
//! started again (with a growing pause) while it stays assigned. A unit
//! assigned again while its previous run here has not ended (a stop
//! returns within its bound, leaving such a run to end on its own thread)
//! waits for that run to end, neither failing nor running twice (see
//! [`RunThread::spawn`]). SIGTERM stops every unit the same way, then
//! leaves the group.
//!
//! The worker also keeps where it stands with its group ([`GroupState`])
//! and when its loop last turned: its [`Readiness`] (a member with its
//! assignment, no unit failing repeatedly) and [`Liveness`] (the loop is
//! not wedged), served as `/readyz` and `/healthz`.
//!
//! This module never decides who runs what: the group does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::admission::{self, AdmissionError};
use super::fingerprint::{self, Fingerprint};
use super::{drained, topics, ClusterPlan, Unit};
use crate::checkpoint::CheckpointError;
use crate::connectors::kafka::{client_config, kafka_error};
use crate::connectors::{ConnectorError, SourceSpec};
use crate::observe::RunHandle;
pub use crate::pipeline::DEFAULT_STOP_GRACE;
use crate::pipeline::{RunError, RunOptions, RunThread, Seed, CANCEL_WAIT};
use crate::runtime::native::NativeCatalog;

/// Group settings: a dead worker's units move after the session timeout; a
/// revocation may take as long as stopping its units. A member hears of a
/// rebalance (a worker left, died or joined) in its next heartbeat's
/// answer, so heartbeats come often: they are what a handover waits on
/// once the leaving worker's final checkpoints are committed.
const SESSION_TIMEOUT_MS: &str = "6000";
const HEARTBEAT_MS: &str = "250";
const MAX_POLL_INTERVAL_MS: &str = "300000";

/// Pause before starting a failed unit again: doubled per failure up to
/// [`MAX_RETRY_PAUSE`]; a run that lasted [`STEADY`] resets it.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(30);
const STEADY: Duration = Duration::from_secs(60);

/// How long a unit whose storage a newer run claimed waits before it is
/// started again: two session timeouts, in which the group tells a worker
/// that was paused or cut off that it lost the unit.
const SUPERSEDED_PAUSE: Duration = Duration::from_secs(12);

/// How often lag and state sizes are measured.
const MEASURE_EVERY: Duration = Duration::from_secs(2);

/// How often a worker compares the input topics' partitions with the plan.
const INPUTS_CHECKED_EVERY: Duration = Duration::from_secs(10);

/// Failures in a row after which a unit counts as failing repeatedly (the
/// worker is then not ready) until a run of it lasts [`STEADY`].
pub const REPEATED_FAILURES: u32 = 3;

/// How long one turn of the worker's loop may take beyond a stop's bound
/// (stop grace + [`CANCEL_WAIT`]) before the worker counts as wedged: a
/// turn may wait on Kafka (the plan check of an assignment, three 10 s
/// reads; an admin call while starting, 30 s).
const STALL_ALLOWANCE: Duration = Duration::from_secs(90);

/// Why a worker could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The spec cannot run on workers.
    #[error(transparent)]
    Plan(#[from] super::PlanError),
    /// The shared topics are not usable.
    #[error(transparent)]
    Topics(#[from] topics::TopicError),
    /// The group runs another plan (another spec or other functions).
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    /// The group could not be joined.
    #[error(transparent)]
    Kafka(#[from] ConnectorError),
    /// Asked to stop, some units could not checkpoint in time (Kafka or
    /// storage unreachable?): their next owner restores their last
    /// committed checkpoints.
    #[error("stopped without a final checkpoint of every unit, within the stop grace: {0}; their next owners restore their last committed checkpoints (nothing is lost or duplicated, but they re-read since then)")]
    UncleanStop(String),
    /// An input topic gained partitions while the worker ran: the plan has
    /// no unit to read them, so the worker stops rather than skip them.
    #[error("source {node}: partitions {added} appeared while the workers ran, and the plan has no unit reading them; the worker stopped (its units checkpointed) rather than leave them unread: start the workers again (every one) and the new partitions are read from their log start")]
    InputGrew {
        /// The source node.
        node: String,
        /// The new partitions, `topic/partition`, comma-separated.
        added: String,
    },
}

/// The worker monitor's state, shared with the worker's loop.
#[derive(Default)]
struct Monitor {
    /// Set when the worker stops.
    stop: AtomicBool,
    /// Why the worker must stop, when the monitor found a reason.
    failed: Mutex<Option<WorkerError>>,
}

/// What a worker needs to run.
pub struct WorkerConfig {
    /// The plan of the pipeline it shares.
    pub plan: ClusterPlan,
    /// Its id (reports, logs).
    pub worker_id: String,
    /// Its local scratch: RocksDB working copies, compiled code.
    pub data_dir: PathBuf,
    /// Native functions units may name.
    pub natives: NativeCatalog,
    /// How long a unit's stop waits for its final checkpoint
    /// ([`DEFAULT_STOP_GRACE`] unless set).
    pub stop_grace: Duration,
    /// Where tasks of a new layout take their state from on their first
    /// start, by unit (see [`super::layout::seeds`]); empty otherwise.
    pub seeds: BTreeMap<String, Seed>,
    /// The checkpoint or savepoint the pipeline was deployed from: a unit
    /// without a snapshot of its own takes its input positions from it.
    pub restore: Option<String>,
}

/// A worker's units and what it knows of them; shared by the group
/// callbacks, the supervising loop and the status routes.
pub struct Worker {
    plan: ClusterPlan,
    id: String,
    data_dir: PathBuf,
    natives: NativeCatalog,
    stop_grace: Duration,
    seeds: BTreeMap<String, Seed>,
    restore: Option<String>,
    /// Assigned units, by number (their units-topic partition).
    slots: Mutex<BTreeMap<usize, Slot>>,
    /// Where it stands with its group.
    group: Mutex<GroupState>,
    /// When it was made: [`Self::tick`] counts from here.
    born: Instant,
    /// Milliseconds after `born` of the last turn of its loop (or step
    /// of its start).
    tick: AtomicU64,
    /// Draining: its units end for good (see [`Worker::drain`]).
    draining: AtomicBool,
}

/// Where a worker stands with its group (`GET /readyz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupState {
    /// Checking the plan the group runs and the shared topics.
    #[default]
    Starting,
    /// Subscribed to the units topic, waiting for its first assignment.
    Joining,
    /// A member of the group with its assignment (empty when the group
    /// has more workers than units: then it stands by).
    Member,
    /// Its session expired (paused, cut off from the brokers): the group
    /// gave its units to other workers; it is joining again.
    Lost,
    /// The group runs another plan: the worker stops.
    Refused,
    /// Handing its units over and leaving the group.
    Stopping,
}

/// A unit that failed [`REPEATED_FAILURES`] times or more in a row and has
/// not run steadily since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingUnit {
    /// The unit.
    pub unit: String,
    /// Its failures in a row.
    pub failures: u32,
    /// Why its last run failed.
    pub error: Option<String>,
}

/// Whether a worker does its share (`GET /readyz`): a member of its
/// group, with its assignment, and no unit failing repeatedly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    /// 200 when true, 503 otherwise.
    pub ready: bool,
    /// Where it stands with its group.
    pub group: GroupState,
    /// Units assigned to it.
    pub units: usize,
    /// Why it is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its units failing repeatedly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<FailingUnit>,
}

impl Readiness {
    /// The readiness of a worker in `group` with `units` assigned, of which
    /// `failing` fail repeatedly.
    pub fn of(group: GroupState, units: usize, failing: Vec<FailingUnit>) -> Self {
        let reason = match group {
            GroupState::Starting => {
                Some("starting: checking the plan the group runs and the shared topics".into())
            }
            GroupState::Joining => Some("joining the group".into()),
            GroupState::Lost => Some("lost its group: its session expired (paused, or cut off from the brokers) and its units went to other workers; joining again".into()),
            GroupState::Refused => Some("refused: the group runs another plan; stopping".into()),
            GroupState::Stopping => Some("stopping: handing its units over".into()),
            GroupState::Member => match failing.as_slice() {
                [] => None,
                [one] => Some(format!(
                    "unit {} failing repeatedly ({} times in a row): {}",
                    one.unit,
                    one.failures,
                    one.error.as_deref().unwrap_or("no error reported")
                )),
                more => Some(format!(
                    "{} units failing repeatedly: {}",
                    more.len(),
                    more.iter().map(|u| u.unit.as_str()).collect::<Vec<_>>().join(", ")
                )),
            },
        };
        Readiness { ready: reason.is_none(), group, units, reason, failing }
    }
}

/// Whether a worker's loop turns (`GET /healthz`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Liveness {
    /// 200 when true, 503 otherwise (restart the process).
    pub alive: bool,
    /// Where it stands with its group.
    pub group: GroupState,
    /// Milliseconds since its loop last turned.
    pub since_last_turn_ms: u64,
    /// The most a turn may take.
    pub limit_ms: u64,
}

/// One assigned unit.
struct Slot {
    run: Option<RunThread>,
    /// Runs of this unit on this worker that restored a snapshot.
    restores: u64,
    /// Why its last run failed, and when to start it again.
    failed: Option<(String, Instant)>,
    failures: u32,
    stopping: bool,
    /// Drained: it has ended for good and never runs again.
    drained: bool,
    /// Its drained stop under way (why it was not clean, when it ends).
    draining: Option<std::thread::JoinHandle<Option<String>>>,
    lag: Option<i64>,
    state_bytes: Option<u64>,
}

impl Slot {
    /// A slot whose unit runs as `run` (none: drained already).
    fn new(run: Option<RunThread>) -> Self {
        Slot {
            drained: run.is_none(),
            run,
            restores: 0,
            failed: None,
            failures: 0,
            stopping: false,
            draining: None,
            lag: None,
            state_bytes: None,
        }
    }
}

/// What a worker reports of one unit (`GET /v1/worker`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UnitStatus {
    /// The unit's name.
    pub unit: String,
    /// `ingest` or `task`.
    pub role: String,
    /// `waiting` (for its previous run on this worker to end), `starting`
    /// (fencing, restoring), `running`, `stopping` or `failed`.
    pub state: String,
    /// The checkpoint its run restored, if any.
    pub restored_from: Option<u64>,
    /// Runs of it on this worker that restored a snapshot.
    pub restores: u64,
    /// Records its source read in the current run.
    pub records_in: u64,
    /// Records it wrote in the current run.
    pub records_out: u64,
    /// Its event time, if any.
    pub watermark: Option<i64>,
    /// Records of its input partitions not yet checkpointed.
    pub lag: Option<i64>,
    /// Size of its local state.
    pub state_bytes: Option<u64>,
    /// The newest checkpoint it completed in the current run.
    pub last_checkpoint: Option<u64>,
    /// Why its last run failed.
    pub error: Option<String>,
}

/// What a worker reports (`GET /v1/worker`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The worker's id.
    pub worker_id: String,
    /// The pipeline.
    pub pipeline: String,
    /// Its consumer group.
    pub group: String,
    /// Units in the pipeline.
    pub units_total: usize,
    /// This worker's units.
    pub units: Vec<UnitStatus>,
}

impl Worker {
    /// A worker of `config`'s plan, with nothing assigned yet.
    pub fn new(config: WorkerConfig) -> Arc<Self> {
        Arc::new(Self {
            plan: config.plan,
            id: config.worker_id,
            data_dir: config.data_dir,
            natives: config.natives,
            stop_grace: config.stop_grace,
            seeds: config.seeds,
            restore: config.restore,
            slots: Mutex::new(BTreeMap::new()),
            group: Mutex::new(GroupState::Starting),
            born: Instant::now(),
            tick: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        })
    }

    /// Drain the plan's units, for a change of layout (see
    /// `docs/cluster.md`): each ingest unit stops with a drained stop (its
    /// end written to every exchange partition with its last output), and
    /// each task once it has read every producer's end; a drained unit is
    /// never started again. The worker leaves its group once every unit of
    /// the plan — its own and the others' — is drained.
    pub fn drain(&self) {
        if !self.draining.swap(true, Ordering::Relaxed) {
            tracing::info!(pipeline = %self.plan.pipeline, worker = %self.id, "draining the pipeline's units");
        }
    }

    /// Whether [`Worker::drain`] was called.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Whether the worker is a member of its group with an assignment.
    pub fn joined(&self) -> bool {
        self.group_state() == GroupState::Member
    }

    /// Where the worker stands with its group.
    pub fn group_state(&self) -> GroupState {
        *self.group.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_group_state(&self, state: GroupState) {
        *self.group.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    /// Note that the worker's loop (or its start) made progress.
    fn tick(&self) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.tick.store(now, Ordering::Relaxed);
    }

    /// Whether the worker's loop turns: its last turn is more recent than
    /// the longest a turn may take (a revocation's stop, stop grace +
    /// [`CANCEL_WAIT`], plus [`STALL_ALLOWANCE`] for calls to Kafka).
    pub fn liveness(&self) -> Liveness {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        let since = now.saturating_sub(self.tick.load(Ordering::Relaxed));
        let limit = self.stop_grace + CANCEL_WAIT + STALL_ALLOWANCE;
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        Liveness {
            alive: since <= limit_ms,
            group: self.group_state(),
            since_last_turn_ms: since,
            limit_ms,
        }
    }

    /// Whether the worker does its share: a member of its group with its
    /// assignment, and no unit that failed [`REPEATED_FAILURES`] times in
    /// a row without a steady run since ([`Readiness::of`]), nor one
    /// waiting for its previous run here to end.
    pub fn readiness(&self) -> Readiness {
        let group = self.group_state();
        let slots = self.slots();
        let failing = slots
            .iter()
            .filter(|(_, slot)| slot.failures >= REPEATED_FAILURES && !slot.stopping)
            .filter(|(_, slot)| {
                !slot
                    .run
                    .as_ref()
                    .is_some_and(|run| !run.thread.is_finished() && run.started.elapsed() >= STEADY)
            })
            .map(|(number, slot)| FailingUnit {
                unit: self.plan.units[*number].name.clone(),
                failures: slot.failures,
                error: slot.failed.as_ref().map(|(error, _)| error.clone()),
            })
            .collect();
        let mut readiness = Readiness::of(group, slots.len(), failing);
        let waiting =
            slots.iter().find(|(_, slot)| slot.run.as_ref().is_some_and(RunThread::waiting));
        if let (true, Some((number, _))) = (readiness.ready, waiting) {
            readiness.ready = false;
            readiness.reason = Some(waiting_reason(&self.plan.units[*number].name));
        }
        readiness
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Join the group and run what it assigns until `shutdown` is set;
    /// then stop every unit (final checkpoints) and leave.
    pub fn run(self: &Arc<Self>, shutdown: &AtomicBool) -> Result<(), WorkerError> {
        // One plan per group: refused before anything is created or joined.
        self.tick();
        let ours = fingerprint::fingerprint(&self.plan, &fingerprint::file_digest)?;
        self.tick();
        topics::create_units_topic(&self.plan)?;
        self.tick();
        admission::admit(&self.plan, &ours, &self.id)?;
        self.tick();
        topics::ensure(&self.plan)?;
        self.tick();
        let context =
            Membership { worker: Arc::clone(self), plan: ours, refused: Mutex::new(None) };
        let group = self.plan.group.as_str();
        let ours = [
            ("group.id", group),
            ("client.id", self.id.as_str()),
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("session.timeout.ms", SESSION_TIMEOUT_MS),
            ("heartbeat.interval.ms", HEARTBEAT_MS),
            ("max.poll.interval.ms", MAX_POLL_INTERVAL_MS),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "latest"),
        ];
        let consumer: BaseConsumer<Membership> =
            client_config(&self.plan.bootstrap_servers, &ours, &self.plan.properties)
                .create_with_context(context)
                .map_err(kafka_error("creating the group member"))?;
        consumer
            .subscribe(&[&self.plan.units_topic])
            .map_err(kafka_error(format!("joining group {group}")))?;
        tracing::info!(worker = %self.id, group, "worker joining the group");
        self.set_group_state(GroupState::Joining);
        let lag_reader = LagReader::new(&self.plan)?;
        // Lag, state sizes and the input partitions are asked of Kafka on
        // a thread of their own: with the broker gone those calls wait for
        // their timeouts, and the loop below must see a stop at once.
        let monitor = Arc::new(Monitor::default());
        {
            let (worker, monitor) = (Arc::clone(self), Arc::clone(&monitor));
            std::thread::Builder::new()
                .name("worker monitor".into())
                .spawn(move || worker.monitor(&lag_reader, &monitor))
                .map_err(|e| ConnectorError::Kafka {
                    what: "starting the worker's monitor".into(),
                    message: e.to_string(),
                })?;
        }
        let mut outcome = Ok(());
        let mut drain_checked = Instant::now();
        while !shutdown.load(Ordering::Relaxed) {
            self.tick();
            if let Some(Err(error)) = consumer.poll(Duration::from_millis(200)) {
                tracing::warn!(%error, "group member");
            }
            self.supervise();
            if self.draining() && drain_checked.elapsed() >= MEASURE_EVERY {
                drain_checked = Instant::now();
                if self.drained_everywhere() {
                    tracing::info!(pipeline = %self.plan.pipeline, "every unit drained: leaving the group");
                    break;
                }
            }
            let refused =
                consumer.context().refused.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(error) = refused {
                tracing::error!(%error, "worker stopping");
                outcome = Err(error.into());
                break;
            }
            if let Some(error) =
                monitor.failed.lock().unwrap_or_else(PoisonError::into_inner).take()
            {
                tracing::error!(%error, "worker stopping");
                outcome = Err(error);
                break;
            }
        }
        monitor.stop.store(true, Ordering::Relaxed);
        self.tick();
        if self.group_state() != GroupState::Refused {
            self.set_group_state(GroupState::Stopping);
        }
        tracing::info!(worker = %self.id, "worker stopping: handing its units over");
        let all: Vec<usize> = self.slots().keys().copied().collect();
        let unclean = self.stop_units(&all, false);
        // Leaving the group waits for the coordinator: bounded too.
        let leaving = std::thread::spawn(move || {
            consumer.unsubscribe();
            drop(consumer);
        });
        let deadline = Instant::now() + CANCEL_WAIT;
        while !leaving.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !leaving.is_finished() {
            tracing::warn!("could not leave the group in time (broker unreachable?): the group notices after session.timeout.ms");
        }
        match (outcome, unclean.is_empty()) {
            (Ok(()), false) => Err(WorkerError::UncleanStop(unclean.join("; "))),
            (outcome, _) => outcome,
        }
    }

    /// Measure the units every [`MEASURE_EVERY`] and compare the input
    /// topics with the plan every [`INPUTS_CHECKED_EVERY`], until told to
    /// stop or the inputs changed (said in `monitor.failed`).
    fn monitor(&self, lag_reader: &LagReader, monitor: &Monitor) {
        let mut inputs_checked = Instant::now();
        while !monitor.stop.load(Ordering::Relaxed) {
            self.measure(lag_reader);
            if inputs_checked.elapsed() >= INPUTS_CHECKED_EVERY {
                inputs_checked = Instant::now();
                if let Err(error) = self.check_inputs() {
                    *monitor.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                    return;
                }
            }
            std::thread::sleep(MEASURE_EVERY);
        }
    }

    /// Compare each source's partitions now with those the plan has units
    /// for: one the plan lacks is an error (a broker that cannot be asked
    /// is not: the units' own sources report that).
    fn check_inputs(&self) -> Result<(), WorkerError> {
        for input in &self.plan.inputs {
            let now = match input.config.partitions() {
                Ok(now) => now,
                Err(error) => {
                    tracing::debug!(source = %input.source, %error, "input partitions not checked");
                    continue;
                }
            };
            let added = new_partitions(&input.partitions, &now);
            if !added.is_empty() {
                return Err(WorkerError::InputGrew { node: input.source.clone(), added });
            }
        }
        Ok(())
    }

    /// Start the units numbered `units` (just assigned), unless the worker
    /// is stopping: an assignment served while it leaves its group (its
    /// consumer closing) comes after its units were stopped, and a unit
    /// started then would run on, unstopped, beside the next worker of the
    /// unit in this process or another.
    /// `drained` is one read of the units topic for the whole assignment.
    fn start_units(&self, units: &[usize], drained: Result<BTreeMap<String, u64>, String>) {
        if self.group_state() == GroupState::Stopping {
            tracing::info!(?units, "units assigned while leaving the group: not started");
            return;
        }
        let mut slots = self.slots();
        for &number in units {
            let Some(unit) = self.plan.units.get(number) else {
                tracing::warn!(number, "assigned a partition of the units topic beyond the plan");
                continue;
            };
            if slots.contains_key(&number) {
                // Already running here (an assignment repeated).
                continue;
            }
            let slot = match &drained {
                Ok(drained) if drained.contains_key(&unit.name) => {
                    tracing::info!(unit = %unit.name, "unit assigned: drained already, not started");
                    Slot::new(None)
                }
                Ok(_) => {
                    tracing::info!(unit = %unit.name, "unit assigned: starting (restoring its state first)");
                    Slot::new(Some(self.spawn(unit)))
                }
                Err(error) => {
                    let why = format!("cannot tell whether it was drained: {error}");
                    tracing::warn!(unit = %unit.name, %why, "unit assigned: started once the units topic can be read");
                    let failed = Some((why, Instant::now() + RETRY_PAUSE));
                    Slot { failed, drained: false, ..Slot::new(None) }
                }
            };
            slots.insert(number, slot);
        }
    }

    /// Whether this worker's units are drained, and every other unit of
    /// the plan too (until then it stays in the group: a unit of a worker
    /// that dies meanwhile comes to it, to be drained).
    fn drained_everywhere(&self) -> bool {
        if !self.slots().values().all(|slot| slot.drained) {
            return false;
        }
        match drained::all_drained(&self.plan) {
            Ok(all) => all,
            Err(error) => {
                tracing::warn!(%error, "cannot read which units are drained; trying again");
                false
            }
        }
    }

    /// Start `unit` again (`None`: it was drained meanwhile), or why not.
    fn respawn(&self, unit: &Unit) -> Result<Option<RunThread>, String> {
        let drained = drained::drained_units(&self.plan)
            .map_err(|e| format!("cannot tell whether it was drained: {e}"))?;
        Ok((!drained.contains_key(&unit.name)).then(|| self.spawn(unit)))
    }

    /// Run `unit` on a thread of its own.
    fn spawn(&self, unit: &Unit) -> RunThread {
        let mut options = RunOptions::new(self.data_dir.clone()).with_natives(self.natives.clone());
        options.seeds = self.seeds.get(&unit.name).cloned().into_iter().collect();
        if !unit.reads_exchange() {
            // A unit reading the input takes its position from the snapshot
            // deployed from; a task's exchange topics are new.
            options.positions_from.clone_from(&self.restore);
        }
        RunThread::spawn(format!("unit {}", unit.name), unit.spec.clone(), options)
            .expect("a thread for the unit")
    }

    /// Stop the units numbered `units` (revoked, lost, or the worker
    /// stopping), all at once: each with a final checkpoint that commits
    /// its output unless `lost` (then at once, without one: another worker
    /// may own it already), within the stop grace (see [`stop`]). Why
    /// stops were not clean.
    fn stop_units(&self, units: &[usize], lost: bool) -> Vec<String> {
        let runs: Vec<(String, RunThread)> = {
            let mut slots = self.slots();
            units
                .iter()
                .filter_map(|number| {
                    let slot = slots.get_mut(number)?;
                    slot.stopping = true;
                    let run = slot.run.take()?;
                    Some((self.plan.units[*number].name.clone(), run))
                })
                .collect()
        };
        let grace = (!lost).then_some(self.stop_grace);
        let unclean: Vec<String> = std::thread::scope(|scope| {
            let stops: Vec<_> = runs
                .into_iter()
                .map(|(name, run)| scope.spawn(move || run.stop(&name, grace).unclean))
                .collect();
            stops.into_iter().filter_map(|stop| stop.join().ok().flatten()).collect()
        });
        let mut slots = self.slots();
        for number in units {
            slots.remove(number);
        }
        unclean
    }

    /// Start again the units whose run ended while still assigned; when
    /// draining, drain the units ready for it.
    fn supervise(&self) {
        let draining = self.draining();
        let mut slots = self.slots();
        for (number, slot) in slots.iter_mut() {
            let unit = &self.plan.units[*number];
            if slot.stopping || slot.drained {
                continue;
            }
            if let Some(done) = slot.draining.take_if(|d| d.is_finished()) {
                match done.join() {
                    Ok(None) => {
                        tracing::info!(unit = %unit.name, "unit drained");
                        slot.drained = true;
                        crate::fault::point("unit-drained");
                        continue;
                    }
                    Ok(Some(why)) => slot.failed = Some((why, Instant::now() + RETRY_PAUSE)),
                    Err(_) => {
                        slot.failed = Some(("its drain panicked".into(), Instant::now()));
                    }
                }
            }
            if slot.draining.is_some() {
                continue;
            }
            // A unit reading its input itself drains at once; a task once it
            // has read every producer's end.
            let ready_to_drain = |run: &RunThread| {
                run.handle.listening()
                    && (!unit.reads_exchange() || run.handle.metrics.sources_ended())
            };
            if let Some(run) = slot.run.take_if(|run| draining && ready_to_drain(run)) {
                let (name, grace) = (unit.name.clone(), self.stop_grace);
                tracing::info!(unit = %name, "draining the unit");
                let thread = std::thread::Builder::new()
                    .name(format!("drain {name}"))
                    .spawn(move || run.drain(&name, grace).unclean);
                match thread {
                    Ok(thread) => slot.draining = Some(thread),
                    Err(error) => slot.failed = Some((error.to_string(), Instant::now())),
                }
                continue;
            }
            if let Some(run) = slot.run.take_if(|run| run.thread.is_finished()) {
                let lasted = run.started.elapsed();
                if run.handle.metrics.restored_from().is_some() {
                    slot.restores += 1;
                }
                let (error, superseded) = match run.thread.join() {
                    Ok(Ok(_)) => ("the run ended (its source said it was done)".to_string(), false),
                    Ok(Err(error)) => {
                        let superseded = matches!(
                            error,
                            RunError::Checkpoint(CheckpointError::Superseded { .. })
                        );
                        (error.to_string(), superseded)
                    }
                    Err(_) => ("the run panicked".to_string(), false),
                };
                if lasted >= STEADY {
                    slot.failures = 0;
                }
                // A newer run owns the unit's storage: most likely this
                // worker was paused and lost the unit; give the group time
                // to say so before claiming it back.
                let pause = if superseded {
                    SUPERSEDED_PAUSE
                } else {
                    RETRY_PAUSE.saturating_mul(1 << slot.failures.min(6)).min(MAX_RETRY_PAUSE)
                };
                slot.failures += 1;
                tracing::warn!(unit = %unit.name, %error, ?pause, "unit failed; starting it again");
                slot.failed = Some((error, Instant::now() + pause));
            }
            if slot.run.is_none()
                && slot.failed.as_ref().is_some_and(|(_, at)| Instant::now() >= *at)
            {
                match self.respawn(unit) {
                    Ok(Some(run)) => slot.run = Some(run),
                    Ok(None) => slot.drained = true,
                    Err(why) => slot.failed = Some((why, Instant::now() + RETRY_PAUSE)),
                }
            }
        }
    }

    /// Measure each unit's lag and state size.
    fn measure(&self, lag: &LagReader) {
        let numbers: Vec<usize> = self.slots().keys().copied().collect();
        let mut measured = Vec::new();
        for number in numbers {
            let unit = &self.plan.units[number];
            let dirs = [
                crate::config::pipeline_state_dir(&self.data_dir, &unit.name),
                crate::config::pipeline_operators_dir(&self.data_dir, &unit.name),
            ];
            let state = dirs.iter().filter_map(|dir| dir_size(dir)).reduce(|a, b| a + b);
            measured.push((number, lag.lag(unit), state));
        }
        let mut slots = self.slots();
        for (number, lag, state) in measured {
            if let Some(slot) = slots.get_mut(&number) {
                slot.lag = lag;
                slot.state_bytes = state;
            }
        }
    }

    /// The live handle of unit `unit` of `pipeline`, while it runs here
    /// (for a state lookup).
    pub fn unit_handle(&self, pipeline: &str, unit: &str) -> Option<Arc<RunHandle>> {
        if self.plan.pipeline != pipeline {
            return None;
        }
        let number = self.plan.units.iter().position(|u| u.name == unit)?;
        let slots = self.slots();
        let run = slots.get(&number)?.run.as_ref()?;
        run.handle.listening().then(|| Arc::clone(&run.handle))
    }

    /// What the worker runs now.
    pub fn status(&self) -> WorkerStatus {
        let slots = self.slots();
        let units = slots
            .iter()
            .map(|(number, slot)| {
                let unit = &self.plan.units[*number];
                let metrics = slot.run.as_ref().map(|run| &run.handle.metrics);
                let current_restore = metrics.and_then(|m| m.restored_from()).map(|(_, id)| id);
                let state = match (slot.stopping, &slot.run) {
                    (true, _) => "stopping",
                    _ if slot.drained => "drained",
                    _ if slot.draining.is_some() => "draining",
                    (false, Some(run)) if run.waiting() => "waiting",
                    (false, Some(run)) if run.handle.listening() => "running",
                    (false, Some(_)) => "starting",
                    (false, None) => "failed",
                };
                UnitStatus {
                    unit: unit.name.clone(),
                    role: unit.role.kind().to_string(),
                    state: state.to_string(),
                    restored_from: current_restore,
                    restores: slot.restores + u64::from(current_restore.is_some()),
                    records_in: metrics.map_or(0, |m| m.source_records()),
                    records_out: metrics.map_or(0, |m| m.sink_written.load(Ordering::Relaxed)),
                    watermark: metrics.and_then(|m| m.watermark()),
                    lag: slot.lag,
                    state_bytes: slot.state_bytes,
                    last_checkpoint: metrics.and_then(|m| m.last_snapshot().0).map(|s| s.id),
                    error: slot.failed.as_ref().map(|(error, _)| error.clone()),
                }
            })
            .collect();
        WorkerStatus {
            worker_id: self.id.clone(),
            pipeline: self.plan.pipeline.clone(),
            group: self.plan.group.clone(),
            units_total: self.plan.units.len(),
            units,
        }
    }

    /// The unit numbers among `list`'s partitions of the units topic.
    fn numbers(&self, list: &TopicPartitionList) -> Vec<usize> {
        list.elements()
            .iter()
            .filter(|e| e.topic() == self.plan.units_topic)
            .filter_map(|e| usize::try_from(e.partition()).ok())
            .collect()
    }
}

/// Why a worker is not ready while `unit` waits for its previous run here
/// to end (a stop returns within its bound and leaves a run that has not
/// ended to end on its own thread, holding the unit's lock).
fn waiting_reason(unit: &str) -> String {
    format!("waiting: the previous run of unit {unit} has not ended yet")
}

/// The partitions of `now` not in `planned`, as `topic/partition`,
/// comma-separated (empty when there are none).
fn new_partitions(planned: &[(String, i32)], now: &[(String, i32)]) -> String {
    let added: Vec<String> = now
        .iter()
        .filter(|p| !planned.contains(p))
        .map(|(topic, partition)| format!("{topic}/{partition}"))
        .collect();
    added.join(", ")
}

/// Total size of the files under `dir`, if it exists.
fn dir_size(dir: &Path) -> Option<u64> {
    let mut total = 0;
    let mut pending = vec![std::fs::read_dir(dir).ok()?];
    while let Some(entries) = pending.pop() {
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => pending.extend(std::fs::read_dir(entry.path()).ok()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    Some(total)
}

/// Reads how far behind the end of their input partitions units are: the
/// end offset less the position each unit's source commits at its
/// barriers (group `weir-<pipeline>`, for monitoring only).
struct LagReader {
    consumer: BaseConsumer,
}

impl LagReader {
    fn new(plan: &ClusterPlan) -> Result<Self, ConnectorError> {
        let group = format!("weir-{}", plan.pipeline);
        let consumer = client_config(
            &plan.bootstrap_servers,
            &[("group.id", group.as_str()), ("enable.auto.commit", "false")],
            &plan.properties,
        )
        .create()
        .map_err(kafka_error("creating the lag reader"))?;
        Ok(Self { consumer })
    }

    /// The lag of `unit` over its input partitions, if the broker answers.
    fn lag(&self, unit: &Unit) -> Option<i64> {
        let mut list = TopicPartitionList::new();
        for node in unit.spec.operators.values() {
            if let Some(SourceSpec::Kafka(config)) = &node.source {
                list.add_partition(config.topics.first()?, config.partition?);
            }
        }
        let timeout = Duration::from_secs(5);
        let committed = self.consumer.committed_offsets(list.clone(), timeout).ok()?;
        let mut lag = 0;
        for entry in list.elements() {
            let (low, high) =
                self.consumer.fetch_watermarks(entry.topic(), entry.partition(), timeout).ok()?;
            let at = match committed.find_partition(entry.topic(), entry.partition())?.offset() {
                Offset::Offset(at) => at,
                _ => low,
            };
            lag += (high - at).max(0);
        }
        Some(lag)
    }
}

/// The group callbacks of a worker.
struct Membership {
    worker: Arc<Worker>,
    /// The worker's plan, checked against the recorded one on assignment.
    plan: Fingerprint,
    /// Set when the group runs another plan: the worker stops.
    refused: Mutex<Option<AdmissionError>>,
}

impl ClientContext for Membership {}

impl ConsumerContext for Membership {
    /// Revocation: stop the revoked units (final checkpoints committed)
    /// before the group may give them to another worker.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let units = self.worker.numbers(list);
            let lost = consumer.assignment_lost();
            let _span = tracing::info_span!("rebalance", revoked = ?units, lost).entered();
            if lost {
                // The session expired (paused, cut off): another worker may
                // run them already; a checkpoint now could clash with its.
                if self.worker.group_state() != GroupState::Stopping {
                    self.worker.set_group_state(GroupState::Lost);
                }
                tracing::warn!(?units, "units lost: stopping them at once, without a checkpoint");
            } else {
                tracing::info!(?units, "units revoked: stopping them");
            }
            self.worker.stop_units(&units, lost);
            self.worker.tick();
        }
    }

    /// Assignment: start the assigned units (each restores first).
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                let units = self.worker.numbers(list);
                let _span = tracing::info_span!("rebalance", assigned = ?units).entered();
                tracing::info!(?units, "units assigned");
                let refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner).is_some();
                if refused {
                    return;
                }
                if self.worker.group_state() == GroupState::Stopping {
                    // Served while leaving the group: nothing starts (see
                    // `start_units`), and no plan check is needed.
                    tracing::info!(?units, "units assigned while leaving the group: not started");
                    return;
                }
                // The plan check and the read of which units drained are
                // two round trips to the broker: made at once, as a moved
                // unit waits on both before its restore begins.
                let plan = &self.worker.plan;
                let (checked, drained) = std::thread::scope(|scope| {
                    let drained = scope.spawn(|| drained::drained_units(plan));
                    let checked = admission::check(plan, &self.plan);
                    let drained = drained.join().unwrap_or_else(|_| {
                        Err(ConnectorError::Kafka {
                            what: "reading which units drained".into(),
                            message: "the reading thread panicked".into(),
                        })
                    });
                    (checked, drained.map_err(|e| e.to_string()))
                });
                if let Err(error) = checked {
                    // Another plan was recorded while the group was empty:
                    // none of these units may run this plan.
                    tracing::error!(%error, "units not started");
                    self.worker.set_group_state(GroupState::Refused);
                    *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                    return;
                }
                self.worker.start_units(&units, drained);
                self.worker.set_group_state(GroupState::Member);
                self.worker.tick();
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_ready_only_as_a_member_without_units_failing_repeatedly() {
        let ready = Readiness::of(GroupState::Member, 4, vec![]);
        assert!(ready.ready);
        assert_eq!(ready.reason, None);
        // A member with nothing assigned (more workers than units) stands
        // by, ready to take units over.
        assert!(Readiness::of(GroupState::Member, 0, vec![]).ready);
        for (state, says) in [
            (GroupState::Starting, "starting"),
            (GroupState::Joining, "joining the group"),
            (GroupState::Lost, "lost its group"),
            (GroupState::Refused, "another plan"),
            (GroupState::Stopping, "stopping"),
        ] {
            let readiness = Readiness::of(state, 0, vec![]);
            assert!(!readiness.ready, "{state:?}");
            let reason = readiness.reason.unwrap();
            assert!(reason.contains(says), "{state:?}: {reason}");
        }
        let failing = FailingUnit {
            unit: "revenue-keyed-3".into(),
            failures: 3,
            error: Some("checkpoint storage unreachable".into()),
        };
        let readiness = Readiness::of(GroupState::Member, 4, vec![failing.clone()]);
        assert!(!readiness.ready);
        assert_eq!(
            readiness.reason.as_deref(),
            Some("unit revenue-keyed-3 failing repeatedly (3 times in a row): checkpoint storage unreachable")
        );
        let other = FailingUnit { unit: "revenue-source-1".into(), ..failing.clone() };
        let readiness = Readiness::of(GroupState::Member, 4, vec![failing, other]);
        assert_eq!(
            readiness.reason.as_deref(),
            Some("2 units failing repeatedly: revenue-keyed-3, revenue-source-1")
        );
        // What /readyz answers: the state by name, the reason when not ready.
        let json = serde_json::to_value(Readiness::of(GroupState::Lost, 0, vec![])).unwrap();
        assert_eq!(json["ready"], false);
        assert_eq!(json["group"], "lost");
        assert!(json.get("failing").is_none());
    }

    #[test]
    fn units_assigned_while_the_worker_leaves_its_group_are_not_started() {
        let text = "name: rev\nparallelism: 2\ncheckpoint: { interval: 1s, storage: 's3://b/c' }\nsource: { type: kafka, bootstrap_servers: '127.0.0.1:1', topics: [orders] }\nkey: { wasm: k.wasm }\nprocess: { wasm: p.wasm }\nsink: { type: kafka, bootstrap_servers: '127.0.0.1:1', topic: out, delivery: exactly-once, transactional_id_prefix: rev }\n";
        let spec = crate::specification::PipelineSpec::parse(text).unwrap();
        let two = |config: &crate::connectors::kafka::KafkaSourceConfig| {
            Ok((0..2).map(|p| (config.topics[0].clone(), p)).collect())
        };
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker::new(WorkerConfig {
            plan: super::super::plan(&spec, &two).unwrap(),
            worker_id: "w1".into(),
            data_dir: dir.path().to_path_buf(),
            natives: NativeCatalog::default(),
            stop_grace: DEFAULT_STOP_GRACE,
            seeds: BTreeMap::new(),
            restore: None,
        });
        // Its units stopped, its consumer closing: an assignment served
        // now (the group's last round before it left) starts nothing.
        worker.set_group_state(GroupState::Stopping);
        worker.start_units(&[0, 1], Ok(BTreeMap::new()));
        assert!(worker.slots().is_empty(), "no unit started while leaving");
        assert_eq!(worker.status().units.len(), 0);
    }

    #[test]
    fn partitions_the_plan_lacks_are_named() {
        let planned = vec![("a".to_string(), 0), ("a".to_string(), 1)];
        assert_eq!(new_partitions(&planned, &planned), "");
        let now = vec![
            ("a".to_string(), 1),
            ("a".to_string(), 0),
            ("a".to_string(), 2),
            ("b".to_string(), 0),
        ];
        assert_eq!(new_partitions(&planned, &now), "a/2, b/0");
    }
}
