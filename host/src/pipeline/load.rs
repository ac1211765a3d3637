//! Before a run: check its settings and the exactly-once requirements of
//! its sink, and load every function it names for its role (a `.wasm`
//! file, a stored function, or a native one from the run's catalogue).

use std::path::Path;

use super::error::RunError;
use super::operator::{FunctionCode, FunctionEnv, OperatorPlan};
use super::spec::{FunctionSpec, PipelineSpec};
use crate::checkpoint::CheckpointSettings;
use crate::config;
use crate::connectors::kafka::{self, KafkaSinkConfig};
use crate::registry::FunctionStore;
use crate::runtime::native::NativeCatalog;
use crate::runtime::{new_engine, EngineLimits, FunctionLoader, LoadedFunction, Role};
use crate::window::WindowConfig;

/// What a run needs before it starts.
pub(crate) struct Prepared {
    /// The checkpoint settings, if checkpointing.
    pub(crate) settings: Option<CheckpointSettings>,
    /// The sink, if it is an exactly-once Kafka sink.
    pub(crate) kafka_exactly_once: Option<KafkaSinkConfig>,
    /// The key function.
    pub(crate) key_function: FunctionCode,
    /// What the keyed stage runs.
    pub(crate) plan: OperatorPlan,
    /// What every function instance gets.
    pub(crate) env: FunctionEnv,
}

/// Check the settings and the exactly-once requirements, and load every
/// function for its role (`native:` ones from `natives`).
pub(crate) fn prepare(
    spec: &PipelineSpec,
    data_dir: &Path,
    natives: &NativeCatalog,
) -> Result<Prepared, RunError> {
    let settings = spec.checkpoint.clone();
    let kafka_exactly_once = kafka::exactly_once_sink(&spec.sink).cloned();
    if let Some(sink) = &kafka_exactly_once {
        kafka::check_exactly_once(sink, settings.as_ref(), &spec.name, data_dir)?;
    }
    let env = FunctionEnv::of(spec)?;
    // One key function instance and one per subtask, each replaced (the old
    // one freed first) after a trap.
    let instances = u32::from(spec.parallelism) + 1;
    let engine = new_engine(EngineLimits::for_functions(instances, &env.limits))
        .map_err(|e| RunError::Engine(format!("{e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(config::component_cache_dir(data_dir)))
        .map_err(|e| RunError::Engine(e.to_string()))?;
    let functions = Functions { loader: &loader, data_dir, natives };
    let key_function = functions.load(&spec.key, "key", Role::Key)?;
    let plan = functions.plan(spec)?;
    Ok(Prepared { settings, kafka_exactly_once, key_function, plan, env })
}

/// Check, without running it, that `spec` can run on this host: its
/// settings, the exactly-once requirements of its sink, and that every
/// function exists and implements its role (`native:` functions are looked
/// up in `natives`). What a deploy refuses.
pub fn check(
    spec: &PipelineSpec,
    data_dir: &Path,
    natives: &NativeCatalog,
) -> Result<(), RunError> {
    prepare(spec, data_dir, natives).map(drop)
}

/// Where a spec's functions come from.
struct Functions<'a> {
    loader: &'a FunctionLoader,
    /// Whose function store holds the stored functions.
    data_dir: &'a Path,
    natives: &'a NativeCatalog,
}

impl Functions<'_> {
    /// What the keyed stage runs.
    fn plan(&self, spec: &PipelineSpec) -> Result<OperatorPlan, RunError> {
        let window_function = match (&spec.aggregate, &spec.window_process) {
            (Some(aggregate), _) => Some((aggregate, "aggregate", Role::Aggregate)),
            (None, Some(process)) => Some((process, "window_process", Role::WindowProcess)),
            (None, None) => None,
        };
        Ok(match (&spec.process, &spec.window, window_function) {
            (Some(process), _, _) => {
                OperatorPlan::Process(self.load(process, "process", Role::Process)?)
            }
            (None, Some(window), Some((function, field, role))) => {
                let config = WindowConfig {
                    assigner: window.assigner().map_err(|e| RunError::Deploy(e.to_string()))?,
                    allowed_lateness: window
                        .allowed_lateness()
                        .map_err(|e| RunError::Deploy(e.to_string()))?,
                    late_output: window.late_output.clone(),
                    max_parallelism: spec.max_parallelism,
                };
                OperatorPlan::Window(self.load(function, field, role)?, role, config)
            }
            _ => {
                return Err(RunError::Deploy(
                    "the spec has neither a process function nor a window with an aggregate".into(),
                ))
            }
        })
    }

    /// Load the function `field` of the spec names (a file, a stored
    /// function of the data directory's store, or a native one) and check
    /// it can play `role`.
    fn load(
        &self,
        function: &FunctionSpec,
        field: &'static str,
        role: Role,
    ) -> Result<FunctionCode, RunError> {
        if let Some(name) = &function.native {
            return self.native(name, field, role);
        }
        let (label, bytes) = match (&function.wasm, &function.function) {
            (Some(path), _) => (
                path.display().to_string(),
                std::fs::read(path).map_err(|source| RunError::ReadFunction {
                    path: path.to_path_buf(),
                    source,
                })?,
            ),
            (None, Some(name)) => {
                let stored = FunctionStore::open(self.data_dir).and_then(|store| {
                    let version = store.get(name, function.version)?;
                    Ok((
                        format!("function {name} version {}", version.version),
                        store.bytes(&version)?,
                    ))
                });
                stored.map_err(|source| RunError::StoredFunction { field, source })?
            }
            (None, None) => return Err(RunError::Deploy(format!("{field}: names no function"))),
        };
        let loaded = self.loader.load(&bytes).and_then(|f| f.require(role).map(|()| f));
        let short = match (&function.wasm, &function.function) {
            (Some(path), _) => path
                .file_name()
                .map_or_else(|| label.clone(), |name| name.to_string_lossy().into_owned()),
            _ => label.replace("function ", "").replace(" version ", " v"),
        };
        loaded
            .map(|f| FunctionCode::Wasm(LoadedFunction { label: short, ..f }))
            .map_err(|source| RunError::Load { function: label, source })
    }

    /// The native function `name` of the catalogue, if it can play `role`.
    fn native(&self, name: &str, field: &str, role: Role) -> Result<FunctionCode, RunError> {
        let native = self.natives.lookup(name).ok_or_else(|| {
            let names = self.natives.names().collect::<Vec<_>>();
            RunError::Deploy(if names.is_empty() {
                format!("{field}.native: no built-in function {name:?} (this host has none)")
            } else {
                format!(
                    "{field}.native: no built-in function {name:?} (there are {})",
                    names.join(", ")
                )
            })
        })?;
        let plays = match role {
            Role::Key => native.key().is_some(),
            Role::Process => native.process().is_some(),
            Role::Aggregate => native.aggregate().is_some(),
            Role::WindowProcess | Role::Transform | Role::CoProcess | Role::BroadcastProcess => {
                false
            }
        };
        if plays {
            Ok(FunctionCode::Native(native))
        } else {
            Err(RunError::Deploy(format!(
                "{field}.native: {name} is not a {} function",
                role.world()
            )))
        }
    }
}
