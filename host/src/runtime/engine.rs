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
}

impl Default for EngineLimits {
    fn default() -> Self {
        Self { instances: 64, max_memory_bytes: 256 << 20 }
    }
}

/// An engine with the component model and the pooling allocator, so
/// instantiating a function reuses pre-reserved memory slots.
pub fn new_engine(limits: EngineLimits) -> wasmtime::Result<Engine> {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(limits.instances)
        .total_core_instances(limits.instances * 4)
        .total_memories(limits.instances * 2)
        .total_tables(limits.instances * 4)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_memory_size(limits.max_memory_bytes);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    Engine::new(&config)
}
