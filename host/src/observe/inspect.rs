//! Reading a key's state in a running pipeline (queryable state): a query
//! goes to the subtask that owns the key's group, which answers it between
//! two batches from its own state backend (its cache included), so the
//! answer is the state as of the last batch that subtask finished — never
//! a half-applied batch, and the pipeline does not stop.
//!
//! A query never holds a lock while it waits: the stage's channel is
//! looked up under a short lock, and the wait for room in it and for the
//! answer is asynchronous (no thread is held either). How many queries may
//! wait at once is bounded by the API (`--max-lookups-per-pipeline`,
//! `--max-lookups-per-token`).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::runtime::{DeclaredState, Language, StateTypes};
use crate::state::{key_group, subtask_for_key_group, KeyedStateBackend, StateKey, StateKind};

/// How often a query looks again for room in a busy subtask's queue.
const QUEUE_RETRY: Duration = Duration::from_millis(10);

/// Entries of a map state returned at most.
pub const MAX_MAP_ENTRIES: usize = 1000;

/// A question to one subtask.
pub(crate) struct StateQuery {
    /// The state's name.
    pub(crate) name: String,
    /// The key, as the key function returned it.
    pub(crate) key: Vec<u8>,
    /// Its key group.
    pub(crate) key_group: u16,
    /// Where the answer goes (nobody may be waiting for it any more).
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<StateAnswer, String>>,
}

/// A key's state as a subtask holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateValue {
    /// No value, map or list of that name holds anything for the key.
    Absent,
    /// A value state's value.
    Value(Vec<u8>),
    /// A map state's entries (at most [`MAX_MAP_ENTRIES`]), in key order.
    Map(Vec<(Vec<u8>, Vec<u8>)>),
    /// A list state's stored form.
    List(Vec<u8>),
}

/// What a subtask answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateAnswer {
    /// The state.
    pub value: StateValue,
    /// The language of the function that wrote it (how it is encoded),
    /// if a function did.
    pub language: Option<Language>,
    /// The subtask that answered.
    pub subtask: usize,
}

/// Why a state query got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// No keyed stage has that name or uid.
    #[error("no keyed operator {0:?} in this pipeline (its keyed operators: {1})")]
    NoOperator(String, String),
    /// The run is not running (or not yet).
    #[error("the pipeline is not running")]
    NotRunning,
    /// The subtask did not answer in time (it is busy with a long call).
    #[error("subtask {0} did not answer within {1:?}")]
    Timeout(usize, Duration),
    /// The state could not be read.
    #[error("{0}")]
    Failed(String),
}

/// One stage's query channels.
struct StageQueries {
    uid: String,
    max_parallelism: u16,
    subtasks: Vec<Sender<StateQuery>>,
    /// The state types its function declares.
    types: std::sync::Arc<StateTypes>,
}

/// Where state queries of a run go: each keyed stage's subtasks.
#[derive(Default)]
pub struct StateQueries {
    stages: Mutex<BTreeMap<String, StageQueries>>,
}

impl std::fmt::Debug for StateQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateQueries").finish_non_exhaustive()
    }
}

impl StateQueries {
    /// Channels for the `parallelism` subtasks of stage `name` (snapshot
    /// identity `uid`), whose function declares the state types `types`;
    /// each subtask reads its receiver.
    pub(crate) fn open_stage(
        &self,
        name: &str,
        uid: &str,
        parallelism: usize,
        max_parallelism: u16,
        types: std::sync::Arc<StateTypes>,
    ) -> Vec<Receiver<StateQuery>> {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..parallelism).map(|_| crossbeam_channel::bounded(16)).unzip();
        let stage =
            StageQueries { uid: uid.to_string(), max_parallelism, subtasks: senders, types };
        self.stages.lock().unwrap_or_else(PoisonError::into_inner).insert(name.to_string(), stage);
        receivers
    }

    /// The name of the run's keyed stage if it has exactly one.
    pub fn only_stage(&self) -> Option<String> {
        let stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner);
        (stages.len() == 1).then(|| stages.keys().next().cloned()).flatten()
    }

    /// The type keyed operator `operator` (its node name or uid) declares
    /// for its state `name`, if it does.
    pub fn declared(&self, operator: &str, name: &str) -> Option<DeclaredState> {
        let stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner);
        let stage = stages.get(operator).or_else(|| stages.values().find(|s| s.uid == operator))?;
        stage.types.get(name).cloned()
    }

    /// Forget every stage (the run ended).
    pub(crate) fn close(&self) {
        self.stages.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// State `name` of `key` in keyed operator `operator` (its node name
    /// or uid), waiting up to `timeout` for the owning subtask. No lock is
    /// held and no thread is blocked while it waits.
    pub async fn query(
        &self,
        operator: &str,
        name: &str,
        key: &[u8],
        timeout: Duration,
    ) -> Result<StateAnswer, QueryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let (subtask, channel, group) = {
            let stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner);
            if stages.is_empty() {
                return Err(QueryError::NotRunning);
            }
            let stage = stages
                .get(operator)
                .or_else(|| stages.values().find(|s| s.uid == operator))
                .ok_or_else(|| {
                    let names: Vec<&str> = stages.keys().map(String::as_str).collect();
                    QueryError::NoOperator(operator.to_string(), names.join(", "))
                })?;
            let group = key_group(key, stage.max_parallelism);
            let parallelism = u16::try_from(stage.subtasks.len()).unwrap_or(u16::MAX);
            let subtask =
                usize::from(subtask_for_key_group(group, stage.max_parallelism, parallelism));
            (subtask, stage.subtasks[subtask].clone(), group)
        };
        let mut query =
            StateQuery { name: name.to_string(), key: key.to_vec(), key_group: group, reply };
        // The subtask's queue is full while it is busy: wait for room
        // without holding anything but this query.
        loop {
            match channel.try_send(query) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return Err(QueryError::NotRunning),
                Err(TrySendError::Full(back)) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(QueryError::Timeout(subtask, timeout));
                    }
                    query = back;
                    tokio::time::sleep(QUEUE_RETRY).await;
                }
            }
        }
        drop(channel);
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(answer)) => answer.map_err(QueryError::Failed),
            Ok(Err(_)) => Err(QueryError::NotRunning),
            Err(_) => Err(QueryError::Timeout(subtask, timeout)),
        }
    }
}

/// Read `query`'s state from `backend`: its value state, else its map
/// state, else its list state (values with their time-to-live header
/// removed; an expired value is absent).
pub(crate) fn read_state(
    backend: &mut dyn KeyedStateBackend,
    query: &StateQuery,
) -> Result<StateValue, String> {
    let now = crate::clock::now_millis();
    let key = |kind| StateKey::new(query.key_group, &query.name, kind, &query.key, b"").encode();
    let live = |stored: &[u8]| -> Result<Option<Vec<u8>>, String> {
        Ok(crate::state::ttl::decode(stored, now).map_err(|e| e.to_string())?.map(<[u8]>::to_vec))
    };
    if query.name.is_empty() || query.name.len() > crate::state::MAX_STATE_NAME_LEN {
        return Err(format!("a state name has 1 to {} bytes", crate::state::MAX_STATE_NAME_LEN));
    }
    if let Some(stored) = backend.get(&key(StateKind::Value)).map_err(|e| e.to_string())? {
        if let Some(value) = live(&stored)? {
            return Ok(StateValue::Value(value));
        }
    }
    let entries = backend
        .scan(&key(StateKind::Map), None, MAX_MAP_ENTRIES)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|(k, v)| live(&v).transpose().map(|v| v.map(|v| (k, v))))
        .collect::<Result<Vec<_>, _>>()?;
    if !entries.is_empty() {
        return Ok(StateValue::Map(entries));
    }
    if let Some(stored) = backend.get(&key(StateKind::List)).map_err(|e| e.to_string())? {
        if let Some(value) = live(&stored)? {
            return Ok(StateValue::List(value));
        }
    }
    Ok(StateValue::Absent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::InMemoryBackend;

    fn stored(value: &[u8]) -> Vec<u8> {
        crate::state::ttl::encode(value, None)
    }

    #[test]
    fn a_value_then_a_map_then_a_list_of_the_name_is_read_and_absence_is_said() {
        let mut backend = InMemoryBackend::default();
        let group = key_group(b"c1", 128);
        let at = |kind, name| StateKey::new(group, name, kind, b"c1", b"").encode();
        backend.put(&at(StateKind::Value, "total"), &stored(b"5000")).unwrap();
        let mut entry = at(StateKind::Map, "seen");
        entry.extend_from_slice(b"a");
        backend.put(&entry, &stored(b"1")).unwrap();
        let (reply, _) = tokio::sync::oneshot::channel();
        let mut query =
            StateQuery { name: "total".into(), key: b"c1".to_vec(), key_group: group, reply };
        assert_eq!(read_state(&mut backend, &query), Ok(StateValue::Value(b"5000".to_vec())));
        query.name = "seen".into();
        assert_eq!(
            read_state(&mut backend, &query),
            Ok(StateValue::Map(vec![(b"a".to_vec(), b"1".to_vec())]))
        );
        query.name = "other".into();
        assert_eq!(read_state(&mut backend, &query), Ok(StateValue::Absent));
        query.key = b"c2".to_vec();
        query.name = "total".into();
        assert_eq!(read_state(&mut backend, &query), Ok(StateValue::Absent), "another key");
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    #[test]
    fn a_query_goes_to_the_subtask_owning_the_key_group_and_unknown_operators_are_named() {
        let runtime = runtime();
        let queries = StateQueries::default();
        assert_eq!(
            runtime.block_on(queries.query("process", "total", b"c1", Duration::from_millis(10))),
            Err(QueryError::NotRunning)
        );
        let receivers = queries.open_stage("process", "revenue", 2, 128, Default::default());
        let owner = usize::from(subtask_for_key_group(key_group(b"c1", 128), 128, 2));
        let answering = receivers[owner].clone();
        let thread = std::thread::spawn(move || {
            let query = answering.recv().unwrap();
            assert_eq!((query.name.as_str(), query.key.as_slice()), ("total", &b"c1"[..]));
            let answer = StateAnswer { value: StateValue::Absent, language: None, subtask: owner };
            query.reply.send(Ok(answer)).unwrap();
        });
        let answer = runtime
            .block_on(queries.query("revenue", "total", b"c1", Duration::from_secs(5)))
            .unwrap();
        assert_eq!(answer.subtask, owner, "found by uid too");
        thread.join().unwrap();
        let error = runtime
            .block_on(queries.query("nope", "total", b"c1", Duration::from_millis(10)))
            .unwrap_err();
        let types = StateTypes::parse(br#"{"state":"total","kind":"value","type":"i64"}"#);
        queries.open_stage("window", "win", 1, 128, std::sync::Arc::new(types));
        let declared = queries.declared("win", "total").map(|d| d.value);
        assert_eq!(declared, Some(crate::runtime::Shape::I64), "by uid");
        assert_eq!(queries.declared("window", "other"), None);
        assert_eq!(queries.declared("process", "total"), None, "another stage's function");
        assert!(error.to_string().contains("its keyed operators: process"), "{error}");
    }

    #[test]
    fn waiting_queries_hold_no_lock_and_no_thread_and_end_with_the_subtask() {
        let queries = std::sync::Arc::new(StateQueries::default());
        // A busy subtask: it reads no query.
        let receivers = queries.open_stage("process", "revenue", 1, 128, Default::default());
        let runtime = runtime();
        runtime.block_on(async {
            // 100 queries on one thread: 16 queued, the rest waiting for room.
            let waiting: Vec<_> = (0..100)
                .map(|_| {
                    let queries = queries.clone();
                    tokio::spawn(async move {
                        queries.query("process", "total", b"c1", Duration::from_secs(60)).await
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(receivers[0].len(), 16);
            assert!(waiting.iter().all(|w| !w.is_finished()));
            // Nothing is locked meanwhile: the run can end.
            assert_eq!(queries.only_stage().as_deref(), Some("process"));
            queries.close();
            drop(receivers);
            for query in waiting {
                assert_eq!(query.await.unwrap(), Err(QueryError::NotRunning));
            }
        });
    }
}
