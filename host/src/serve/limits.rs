//! What one `weir serve` lets its users start: how many pipelines, how
//! many keyed subtasks each, how much state cache, how large a batch and a
//! spec, and how much CPU time and memory a pipeline may grant its
//! functions. Each refusal is a 4xx naming the limit and the `weir serve`
//! flag that raises it. It never changes a spec; it only says no.
//!
//! It also bounds what readers hold open at once ([`ReadGate`]): tail
//! readers and state lookups waiting for their answer, per pipeline and
//! per token, refused beyond that with 429 naming the limit.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use crate::runtime::{FunctionLimits, Language};
use crate::specification::graph::Graph;
use crate::specification::PipelineSpec;
use crate::specification::Size;
use crate::units::format_bytes;

use super::ServeError;

/// The operator's limits on what deploys and upgrades may start.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Pipelines the server keeps (running or not).
    pub max_pipelines: usize,
    /// Keyed subtasks (threads, each with its Wasm instance and RocksDB)
    /// one pipeline may run, over all its stages.
    pub max_parallelism: u16,
    /// A pipeline's `state_cache_bytes`.
    pub max_state_cache_bytes: usize,
    /// A pipeline's `batch_size`.
    pub max_batch_size: usize,
    /// Bytes of a spec (a deploy's body, an upgrade's `spec`), apart from
    /// the upload limit for functions.
    pub max_spec_bytes: usize,
    /// The most a pipeline's `limits:` may grant its functions.
    pub functions: FunctionLimits,
    /// Tail readers one pipeline may have open at once.
    pub max_tails_per_pipeline: usize,
    /// Tail readers one token may have open at once (over all pipelines).
    pub max_tails_per_token: usize,
    /// State lookups of one pipeline that may wait for their answer at once.
    pub max_lookups_per_pipeline: usize,
    /// State lookups of one token that may wait for their answer at once.
    pub max_lookups_per_token: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_pipelines: 32,
            max_parallelism: 16,
            max_state_cache_bytes: 1 << 30,
            max_batch_size: 65_536,
            max_spec_bytes: 256 << 10,
            functions: FunctionLimits {
                call_timeout: std::time::Duration::from_secs(10),
                memory_bytes: 1 << 30,
                fuel: None,
            },
            max_tails_per_pipeline: 64,
            max_tails_per_token: 16,
            max_lookups_per_pipeline: 64,
            max_lookups_per_token: 16,
        }
    }
}

impl ServerLimits {
    /// Refuse a spec text longer than `max_spec_bytes`.
    pub fn check_spec_size(&self, text: &str) -> Result<(), ServeError> {
        if text.len() > self.max_spec_bytes {
            return Err(ServeError::too_large(format!(
                "the spec is {}; this server accepts specs of at most {} (weir serve --max-spec-bytes)",
                format_bytes(text.len() as u64),
                format_bytes(self.max_spec_bytes as u64)
            )));
        }
        Ok(())
    }

    /// Refuse a new pipeline when the server already keeps `existing`.
    pub fn check_new_pipeline(&self, existing: usize) -> Result<(), ServeError> {
        if existing >= self.max_pipelines {
            return Err(exceeded(format!(
                "this server keeps at most {} pipelines and has {existing}: delete one first (weir serve --max-pipelines)",
                self.max_pipelines
            )));
        }
        Ok(())
    }

    /// Make the defaults of the limits `spec` leaves unset no more than
    /// this server grants: the defaults of interpreted functions (1 s,
    /// 256 MiB) are above a server started with lower maxima, which then
    /// apply to every function of the pipeline instead.
    pub fn cap_defaults(&self, spec: &mut PipelineSpec) {
        let interpreted = FunctionLimits::defaults_for(Language::Python);
        let max = &self.functions;
        if spec.limits.call_timeout.is_none() && max.call_timeout < interpreted.call_timeout {
            spec.limits.call_timeout = Some(max.call_timeout);
        }
        if spec.limits.memory.is_none() && max.memory_bytes < interpreted.memory_bytes {
            spec.limits.memory = Some(Size(max.memory_bytes));
        }
    }

    /// Refuse a spec (as it would run: pins and parallelism applied) that
    /// asks for more than the limits allow.
    pub fn check_spec(&self, spec: &PipelineSpec) -> Result<(), ServeError> {
        let functions =
            spec.limits.to_limits().map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let max = &self.functions;
        if functions.call_timeout > max.call_timeout {
            let (asked, allowed) = (
                humantime::format_duration(functions.call_timeout),
                humantime::format_duration(max.call_timeout),
            );
            return Err(exceeded(format!("limits.call_timeout: {asked} is more than this server grants ({allowed}; weir serve --max-call-timeout)")));
        }
        if functions.memory_bytes > max.memory_bytes {
            let (asked, allowed) = (
                format_bytes(functions.memory_bytes as u64),
                format_bytes(max.memory_bytes as u64),
            );
            return Err(exceeded(format!("limits.memory: {asked} is more than this server grants ({allowed}; weir serve --max-function-memory)")));
        }
        if spec.batch_size > self.max_batch_size {
            return Err(exceeded(format!(
                "batch_size: {} is more than this server allows ({}; weir serve --max-batch-size)",
                spec.batch_size, self.max_batch_size
            )));
        }
        if spec.state_cache_bytes > self.max_state_cache_bytes {
            return Err(exceeded(format!(
                "state_cache_bytes: {} is more than this server allows ({}; weir serve --max-state-cache)",
                format_bytes(spec.state_cache_bytes as u64),
                format_bytes(self.max_state_cache_bytes as u64)
            )));
        }
        let graph = Graph::of(spec).map_err(|e| ServeError::invalid_spec(e.to_string()))?;
        let subtasks = graph.subtasks();
        if subtasks > usize::from(self.max_parallelism) {
            let stages = graph.stage_layouts();
            let detail = match stages.as_slice() {
                [_] => String::new(),
                _ => {
                    let each: Vec<String> =
                        stages.iter().map(|(uid, p)| format!("{uid}: {p}")).collect();
                    format!(" ({})", each.join(", "))
                }
            };
            return Err(exceeded(format!(
                "parallelism: the pipeline would run {subtasks} keyed subtasks{detail}; this server allows at most {} per pipeline (weir serve --max-parallelism)",
                self.max_parallelism
            )));
        }
        Ok(())
    }
}

impl ServerLimits {
    /// The gate of tail readers (`--max-tails-per-pipeline`,
    /// `--max-tails-per-token`).
    pub fn tail_gate(&self) -> ReadGate {
        ReadGate::new(
            "tail readers open",
            (self.max_tails_per_pipeline, "--max-tails-per-pipeline"),
            (self.max_tails_per_token, "--max-tails-per-token"),
        )
    }

    /// The gate of state lookups waiting for their answer
    /// (`--max-lookups-per-pipeline`, `--max-lookups-per-token`).
    pub fn lookup_gate(&self) -> ReadGate {
        ReadGate::new(
            "state lookups waiting",
            (self.max_lookups_per_pipeline, "--max-lookups-per-pipeline"),
            (self.max_lookups_per_token, "--max-lookups-per-token"),
        )
    }
}

/// How many reads of one kind (tail readers, pending state lookups) are
/// held open, per pipeline and per token, and the most allowed of each.
/// A slot is taken without waiting (or refused with 429 naming the limit)
/// and given back when its [`ReadSlot`] is dropped — when the read ends,
/// however it ends (its client gone included). The lock is held only to
/// count, never across a wait.
#[derive(Clone)]
pub struct ReadGate {
    inner: Arc<GateInner>,
}

struct GateInner {
    /// What is counted, for messages: `tail readers open`.
    what: &'static str,
    per_pipeline: (usize, &'static str),
    per_token: (usize, &'static str),
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    pipelines: HashMap<String, usize>,
    tokens: HashMap<String, usize>,
}

impl std::fmt::Debug for ReadGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGate").field("what", &self.inner.what).finish_non_exhaustive()
    }
}

/// One read's place in a [`ReadGate`], given back when dropped.
#[derive(Debug)]
pub struct ReadSlot {
    gate: ReadGate,
    pipeline: String,
    token: Option<String>,
}

impl ReadGate {
    /// At most `per_pipeline.0` reads per pipeline and `per_token.0` per
    /// token, each named by its flag in refusals.
    pub fn new(
        what: &'static str,
        per_pipeline: (usize, &'static str),
        per_token: (usize, &'static str),
    ) -> Self {
        let held = Mutex::new(Held::default());
        Self { inner: Arc::new(GateInner { what, per_pipeline, per_token, held }) }
    }

    /// A slot for a read of `pipeline` by the bearer of `token` (an
    /// identity of the token, never the token; `None` without tokens
    /// configured, when only the per-pipeline limit applies), or 429
    /// naming the limit it would pass.
    pub fn try_acquire(&self, pipeline: &str, token: Option<&str>) -> Result<ReadSlot, ServeError> {
        let inner = &self.inner;
        let mut held = inner.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (most, flag) = inner.per_pipeline;
        let of_pipeline = held.pipelines.get(pipeline).copied().unwrap_or(0);
        if of_pipeline >= most {
            return Err(ServeError::too_many_requests(format!(
                "pipeline {pipeline:?} has {of_pipeline} {}; this server allows at most {most} per pipeline (weir serve {flag}): try again later",
                inner.what
            )));
        }
        if let Some(token) = token {
            let (most, flag) = inner.per_token;
            let of_token = held.tokens.get(token).copied().unwrap_or(0);
            if of_token >= most {
                return Err(ServeError::too_many_requests(format!(
                    "this token has {of_token} {}; this server allows at most {most} per token (weir serve {flag}): close one or try again later",
                    inner.what
                )));
            }
            *held.tokens.entry(token.to_string()).or_default() += 1;
        }
        *held.pipelines.entry(pipeline.to_string()).or_default() += 1;
        Ok(ReadSlot {
            gate: self.clone(),
            pipeline: pipeline.to_string(),
            token: token.map(str::to_string),
        })
    }

    /// How many reads each pipeline holds now (pipelines holding none are
    /// left out).
    pub fn held(&self) -> BTreeMap<String, usize> {
        let held = self.inner.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.pipelines.iter().map(|(name, n)| (name.clone(), *n)).collect()
    }
}

impl Drop for ReadSlot {
    fn drop(&mut self) {
        let mut held = self.gate.inner.held.lock().unwrap_or_else(PoisonError::into_inner);
        let Held { pipelines, tokens } = &mut *held;
        give_back(pipelines, &self.pipeline);
        if let Some(token) = &self.token {
            give_back(tokens, token);
        }
    }
}

/// One fewer held under `name`; none is forgotten.
fn give_back(counts: &mut HashMap<String, usize>, name: &str) {
    if let Some(count) = counts.get_mut(name) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(name);
        }
    }
}

/// 422 `limit_exceeded`.
fn exceeded(message: String) -> ServeError {
    ServeError::limit_exceeded(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    // The statuses the API answers these refusals with.
    use crate::api::ApiError;

    fn spec(extra: &str) -> PipelineSpec {
        PipelineSpec::parse(&format!(
            "name: p\nsource: {{ type: generator, count: 10 }}\nkey: {{ function: f }}\nprocess: {{ function: f }}\nsink: {{ type: discard }}\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn interpreted_defaults_never_exceed_what_the_server_grants() {
        let tight = ServerLimits {
            functions: FunctionLimits {
                call_timeout: std::time::Duration::from_millis(300),
                memory_bytes: 128 << 20,
                fuel: None,
            },
            ..ServerLimits::default()
        };
        let mut unset = spec("");
        tight.cap_defaults(&mut unset);
        let python = unset.limits.to_limits_for(Language::Python).unwrap();
        assert_eq!((python.call_timeout.as_millis(), python.memory_bytes), (300, 128 << 20));
        // What a spec sets (already checked against the maxima) stays.
        let mut set = spec("limits: { call_timeout: 50ms, memory: 32MiB }\n");
        tight.cap_defaults(&mut set);
        let python = set.limits.to_limits_for(Language::Python).unwrap();
        assert_eq!((python.call_timeout.as_millis(), python.memory_bytes), (50, 32 << 20));
        // The default server grants more than any default.
        let mut roomy = spec("");
        ServerLimits::default().cap_defaults(&mut roomy);
        assert!(roomy.limits.call_timeout.is_none() && roomy.limits.memory.is_none());
    }

    fn refusal(limits: &ServerLimits, extra: &str) -> String {
        let error = ApiError::from(limits.check_spec(&spec(extra)).unwrap_err());
        assert_eq!((error.status.as_u16(), error.code), (422, "limit_exceeded"), "{error}");
        error.message
    }

    #[test]
    fn specs_within_the_limits_pass() {
        ServerLimits::default().check_spec(&spec("parallelism: 16\nbatch_size: 65536\n")).unwrap();
    }

    #[test]
    fn each_limit_is_named_with_its_flag() {
        let limits = ServerLimits::default();
        let message = refusal(&limits, "parallelism: 17\nmax_parallelism: 128\n");
        assert!(message.contains("17 keyed subtasks") && message.contains("--max-parallelism"));
        assert!(refusal(&limits, "batch_size: 65537\n").contains("--max-batch-size"));
        assert!(refusal(&limits, "state_cache_bytes: 2000000000\n").contains("--max-state-cache"));
        assert!(refusal(&limits, "limits: { call_timeout: 11s }\n").contains("--max-call-timeout"));
        assert!(refusal(&limits, "limits: { memory: 2GiB }\n").contains("--max-function-memory"));
        let error = ApiError::from(limits.check_new_pipeline(32).unwrap_err());
        assert!(error.message.contains("--max-pipelines"), "{error}");
        limits.check_new_pipeline(31).unwrap();
        let error =
            ApiError::from(limits.check_spec_size(&"#".repeat((256 << 10) + 1)).unwrap_err());
        assert_eq!(error.status.as_u16(), 413);
        assert!(error.message.contains("--max-spec-bytes"), "{error}");
    }

    #[test]
    fn reads_past_a_limit_get_429_naming_it_and_slots_come_back_when_dropped() {
        let limits = ServerLimits {
            max_tails_per_pipeline: 3,
            max_tails_per_token: 2,
            ..ServerLimits::default()
        };
        let gate = limits.tail_gate();
        let refused = |result: Result<ReadSlot, ServeError>| {
            let error = ApiError::from(result.unwrap_err());
            assert_eq!((error.status.as_u16(), error.code), (429, "too_many_requests"), "{error}");
            error.message
        };
        let a1 = gate.try_acquire("p", Some("a")).unwrap();
        let _a2 = gate.try_acquire("p", Some("a")).unwrap();
        let message = refused(gate.try_acquire("q", Some("a")));
        assert!(
            message.contains("at most 2 per token (weir serve --max-tails-per-token)"),
            "{message}"
        );
        let _b1 = gate.try_acquire("p", Some("b")).unwrap();
        let message = refused(gate.try_acquire("p", Some("b")));
        assert!(message.contains("\"p\" has 3 tail readers open"), "{message}");
        assert!(message.contains("--max-tails-per-pipeline"), "{message}");
        let _anonymous = gate.try_acquire("q", None).unwrap();
        assert_eq!(gate.held(), BTreeMap::from([("p".to_string(), 3), ("q".to_string(), 1)]));
        drop(a1);
        let _b2 = gate.try_acquire("p", Some("b")).unwrap();
        let lookups = limits.lookup_gate();
        let held: Vec<ReadSlot> =
            (0..16).map(|_| lookups.try_acquire("p", Some("a")).unwrap()).collect();
        let message = refused(lookups.try_acquire("p", Some("a")));
        assert!(
            message.contains("16 state lookups waiting")
                && message.contains("--max-lookups-per-token"),
            "{message}"
        );
        drop(held);
        assert!(lookups.held().is_empty(), "every slot given back");
    }

    #[test]
    fn a_graph_counts_the_subtasks_of_every_stage() {
        let graph = "name: g\nparallelism: 4\noperators:\n  src: { source: { type: generator, count: 10 } }\n  a: { inputs: [src], key: { function: f }, process: { function: f }, parallelism: 8 }\n  b: { inputs: [a], key: { function: f }, process: { function: f }, parallelism: 9 }\n  out: { inputs: [b], sink: { type: discard } }\n";
        let error = ServerLimits::default().check_spec(&PipelineSpec::parse(graph).unwrap());
        let message = ApiError::from(error.unwrap_err()).message;
        assert!(message.contains("17 keyed subtasks (a: 8, b: 9)"), "{message}");
    }
}
