//! What one `weir serve` lets its users start: how many pipelines, how
//! many keyed subtasks each, how much state cache, how large a batch and a
//! spec, and how much CPU time and memory a pipeline may grant its
//! functions. Each refusal is a 4xx naming the limit and the `weir serve`
//! flag that raises it. It never changes a spec; it only says no.

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
    fn a_graph_counts_the_subtasks_of_every_stage() {
        let graph = "name: g\nparallelism: 4\noperators:\n  src: { source: { type: generator, count: 10 } }\n  a: { inputs: [src], key: { function: f }, process: { function: f }, parallelism: 8 }\n  b: { inputs: [a], key: { function: f }, process: { function: f }, parallelism: 9 }\n  out: { inputs: [b], sink: { type: discard } }\n";
        let error = ServerLimits::default().check_spec(&PipelineSpec::parse(graph).unwrap());
        let message = ApiError::from(error.unwrap_err()).message;
        assert!(message.contains("17 keyed subtasks (a: 8, b: 9)"), "{message}");
    }
}
