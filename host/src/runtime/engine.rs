//! The one wasmtime engine a host process uses.

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Sizes of the pooling allocator: how many function instances may live at
/// once and how much linear memory each may use.
#[derive(Clone, Copy, Debug)]
pub struct EngineLimits {
    /// Component instances alive at the same time.
    pub instances: u32,
    /// Largest linear memory of one instance, in bytes.
    pub max_memory_bytes: usize,
    /// Count fuel, so stores can be given a fuel budget per call.
    pub fuel: bool,
}

impl Default for EngineLimits {
    fn default() -> Self {
        Self { instances: 64, max_memory_bytes: super::limits::DEFAULT_MEMORY_BYTES, fuel: false }
    }
}

impl EngineLimits {
    /// What a pipeline with `instances` function instances under `limits`
    /// needs.
    pub fn for_functions(instances: u32, limits: &super::FunctionLimits) -> Self {
        Self { instances, max_memory_bytes: limits.memory_bytes, fuel: limits.fuel.is_some() }
    }
}

/// An engine with the component model, the pooling allocator (so
/// instantiating a function reuses pre-reserved memory slots) and epoch
/// interruption, with its epoch ticker running (see [`super::limits`]).
pub fn new_engine(limits: EngineLimits) -> wasmtime::Result<Engine> {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(limits.instances)
        .total_core_instances(limits.instances * 64)
        .total_memories(limits.instances * 2)
        .total_tables(limits.instances * 64)
        .max_memories_per_component(4)
        .max_tables_per_component(64)
        .max_memory_size(limits.max_memory_bytes);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(limits.fuel)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    if std::env::var_os("WEIR_PERF_MAP").is_some() {
        // For `perf record`: name compiled functions in /tmp/perf-<pid>.map.
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let engine = Engine::new(&config)?;
    super::limits::start_epoch_ticker(&engine)?;
    Ok(engine)
}
