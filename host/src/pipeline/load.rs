//! Before a run: check its settings and the exactly-once requirements of
//! its sink, and load every function it names for its role (a `.wasm`
//! file, a stored function, or a native one from the run's catalogue).

use std::path::Path;

use super::error::RunError;
use super::operator::{FunctionCode, FunctionEnv, OperatorPlan};
use std::collections::HashMap;

use crate::checkpoint::CheckpointSettings;
use crate::config;
use crate::join::{JoinConfig, JoinKind};
use crate::runtime::native::NativeCatalog;
use crate::runtime::{new_engine, EngineLimits, FunctionLoader, LoadedFunction, Role};
use crate::specification::graph::{Graph, Outputs, Route, StageKind, StageNode};
use crate::specification::JoinSpec;
use crate::specification::{FunctionSpec, PipelineSpec, SpecError};
use crate::store::FunctionStore;
use crate::window::WindowConfig;

/// A pipeline checked and ready to run: its spec, parsed and lowered into
/// a graph once, its settings and the exactly-once requirements of its sink
/// checked, every function loaded for its role. A deploy builds one and the
/// run it starts reuses it ([`run_checked`](super::run_checked)).
pub struct CheckedPipeline {
    /// The spec it runs.
    pub(crate) spec: PipelineSpec,
    /// The checkpoint settings, if checkpointing.
    pub(crate) settings: Option<CheckpointSettings>,
    /// The graph.
    pub(crate) graph: Graph,
    /// What each keyed stage runs, in the order of the graph's stages.
    pub(crate) plans: Vec<OperatorPlan>,
    /// The key and transform functions of the routes, loaded.
    pub(crate) code: FunctionTable,
    /// What every function instance gets.
    pub(crate) env: FunctionEnv,
}

impl CheckedPipeline {
    /// The spec it runs.
    pub fn spec(&self) -> &PipelineSpec {
        &self.spec
    }
}

/// Loaded functions by what names them (so a function named in several
/// places is loaded once).
#[derive(Default)]
pub(crate) struct FunctionTable {
    loaded: HashMap<String, FunctionCode>,
}

impl FunctionTable {
    fn fingerprint(function: &FunctionSpec) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}",
            function.wasm, function.function, function.version, function.native
        )
    }

    /// The code of `function`, loaded before the run.
    pub(crate) fn get(&self, function: &FunctionSpec) -> Result<FunctionCode, RunError> {
        self.loaded
            .get(&Self::fingerprint(function))
            .cloned()
            .ok_or_else(|| RunError::Deploy("a function of the graph was not loaded".into()))
    }
}

/// Check, without running it, that `spec` can run on this host — its
/// settings, the exactly-once requirements of its sink, and that every
/// function exists and implements its role (`native:` ones are looked up in
/// `natives`) — and keep what that loaded for the run. What a deploy
/// refuses.
pub fn prepare(
    spec: PipelineSpec,
    data_dir: &Path,
    natives: &NativeCatalog,
) -> Result<CheckedPipeline, RunError> {
    let settings = spec.checkpoint.clone();
    let graph = spec.graph().map_err(|e| RunError::Deploy(e.to_string()))?;
    if let Some(sink) = graph.transactional_sinks().next() {
        sink.check_settings(settings.as_ref(), &spec.name, data_dir)?;
    }
    let env = FunctionEnv::of(&spec)?;
    // Every instance of the run, each replaced (the old one freed first)
    // after a trap.
    let instances = u32::try_from(instances(&graph)).unwrap_or(u32::MAX);
    // Sized for the larger memory of interpreted functions (compiled ones
    // get as much or less: the spec's `limits.memory` sets both).
    let engine = new_engine(EngineLimits::for_functions(instances, &env.interpreted_limits))
        .map_err(|e| RunError::Engine(format!("{e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(config::component_cache_dir(data_dir)))
        .map_err(|e| RunError::Engine(e.to_string()))?;
    let functions = Functions { loader: &loader, data_dir, natives };
    let mut code = FunctionTable::default();
    let mut plans = Vec::new();
    for stage in &graph.stages {
        plans.push(functions.plan(&spec, stage)?);
    }
    for source in &graph.sources {
        functions.load_routes(&source.outputs, &mut code)?;
    }
    for stage in &graph.stages {
        functions.load_routes(&stage.outputs, &mut code)?;
    }
    Ok(CheckedPipeline { spec, settings, graph, plans, code, env })
}

/// Function instances a run of `graph` makes: each producer's key and
/// transform functions (each reader of a source's), and each subtask's own.
fn instances(graph: &Graph) -> usize {
    fn of(outputs: &Outputs) -> usize {
        outputs
            .ports
            .values()
            .flatten()
            .map(|route| match route {
                Route::Sink(_) => 0,
                Route::KeyedSink { .. } => 1,
                Route::Stage { key, .. } => usize::from(key.is_some()),
                Route::Transform { outputs, .. } => 1 + of(outputs),
            })
            .sum()
    }
    let sources: usize =
        graph.sources.iter().map(|s| s.spec.config().max_readers() * of(&s.outputs)).sum();
    let stages: usize =
        graph.stages.iter().map(|s| usize::from(s.parallelism) * (1 + of(&s.outputs))).sum();
    sources + stages
}

/// Where a spec's functions come from.
struct Functions<'a> {
    loader: &'a FunctionLoader,
    /// Whose function store holds the stored functions.
    data_dir: &'a Path,
    natives: &'a NativeCatalog,
}

impl Functions<'_> {
    /// What keyed stage `stage` runs.
    fn plan(&self, spec: &PipelineSpec, stage: &StageNode) -> Result<OperatorPlan, RunError> {
        let deploy = |e: SpecError| RunError::Deploy(e.to_string());
        Ok(match &stage.kind {
            StageKind::Process(process) => {
                let role = if stage.broadcast { Role::BroadcastProcess } else { Role::Process };
                OperatorPlan::Process(self.load(process, "process", role)?)
            }
            StageKind::CoProcess(function) => {
                OperatorPlan::Process(self.load(function, "co_process", Role::CoProcess)?)
            }
            StageKind::Window { window, function, aggregate } => {
                let (field, role) = if *aggregate {
                    ("aggregate", Role::Aggregate)
                } else {
                    ("window_process", Role::WindowProcess)
                };
                let config = WindowConfig {
                    assigner: window.assigner().map_err(deploy)?,
                    allowed_lateness: window.allowed_lateness().map_err(deploy)?,
                    late_output: window.late_output.clone(),
                    max_parallelism: spec.max_parallelism,
                };
                OperatorPlan::Window(self.load(function, field, role)?, role, config)
            }
            StageKind::Join(JoinSpec::Interval { lower, upper, late_output }) => {
                OperatorPlan::Join(JoinConfig {
                    kind: JoinKind::Interval { lower: *lower, upper: *upper },
                    late_output: late_output.clone(),
                    max_parallelism: spec.max_parallelism,
                })
            }
            StageKind::Join(JoinSpec::Window { window }) => OperatorPlan::Join(JoinConfig {
                kind: JoinKind::Window { assigner: window.assigner().map_err(deploy)? },
                late_output: window.late_output.clone(),
                max_parallelism: spec.max_parallelism,
            }),
        })
    }

    /// Load the key and transform functions of `outputs` into `code`.
    fn load_routes(&self, outputs: &Outputs, code: &mut FunctionTable) -> Result<(), RunError> {
        for route in outputs.ports.values().flatten() {
            let (function, field, role) = match route {
                Route::Sink(_) | Route::Stage { key: None, .. } => continue,
                Route::Stage { key: Some(key), .. } | Route::KeyedSink { key, .. } => {
                    (key, "key", Role::Key)
                }
                Route::Transform { function, outputs, .. } => {
                    self.load_routes(outputs, code)?;
                    (function, "transform", Role::Transform)
                }
            };
            let fingerprint = FunctionTable::fingerprint(function);
            if let std::collections::hash_map::Entry::Vacant(entry) = code.loaded.entry(fingerprint)
            {
                entry.insert(self.load(function, field, role)?);
            }
        }
        Ok(())
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
