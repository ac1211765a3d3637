//! The `weir` command line: the argument types, one module per command
//! group, and the text printed for people. Each command parses nothing
//! itself (clap did) and leaves the work to the library.
//!
//! * `run`, `bench`, `snapshots` (`savepoint`, `stop`) and `checkpoints`
//!   work on a pipeline in this process or on its data directory;
//! * `serve` starts the HTTP API; `function` and `pipeline` are its
//!   clients (`server` says which server);
//! * `token` makes API tokens for `serve`'s tokens file;
//! * `worker` runs a share of a pipeline in cluster mode, `cluster`
//!   deploys to a cluster's control topic;
//! * `kafka` creates and lists topics, writes a file to a topic and reads
//!   one (no Kafka download needed);
//! * `wasm` (`inspect`, `componentize`) works on `.wasm` files;
//! * `schema types` writes the types of a schema's events;
//! * `project` (`init`, `build`) makes and builds function projects;
//! * `print` holds the tables and summaries.

#[cfg(feature = "bench")]
pub mod bench;
pub mod checkpoints;
pub mod cluster;
pub mod function;
pub mod kafka;
pub mod pipeline;
pub mod print;
pub mod project;
pub mod run;
pub mod schema;
pub mod serve;
pub mod server;
pub mod snapshots;
pub mod token;
pub mod wasm;
pub mod worker;

use clap::{Parser, Subcommand};

/// Weir: a stream processor whose functions are WebAssembly components.
#[derive(Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run a pipeline spec in this process until its sources are exhausted
    /// (or `weir stop` asks it to stop).
    Run(run::RunArgs),
    /// Measure the standard workloads, Wasm against the same logic native
    /// (see docs/benchmarks.md). Build with `--release`.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
    /// Take a savepoint of a running pipeline (started by `weir run` with
    /// the same data directory) and print where it is.
    Savepoint(snapshots::SavepointArgs),
    /// Stop a running pipeline gracefully: in-flight records are processed,
    /// a final snapshot is taken, and `weir run` exits.
    Stop(snapshots::StopArgs),
    /// Serve the HTTP API: functions, pipelines, metrics (see docs/api.md).
    Serve(serve::ServeArgs),
    /// Functions on a `weir serve`: upload, list.
    Function {
        #[command(subcommand)]
        command: function::FunctionCommand,
    },
    /// Pipelines on a `weir serve`: deploy, list, status, savepoint, stop,
    /// upgrade, delete.
    Pipeline {
        #[command(subcommand)]
        command: pipeline::PipelineCommand,
    },
    /// API tokens for `weir serve --tokens FILE`: new.
    Token {
        #[command(subcommand)]
        command: token::TokenCommand,
    },
    /// Run a share of a pipeline with the other workers of the same spec
    /// (cluster mode: Kafka in and out, state in shared storage; see
    /// docs/cluster.md), or ask a worker what it runs (`status`).
    Worker(worker::WorkerArgs),
    /// What a cluster of `weir worker --cluster NAME` runs: deploy, stop,
    /// start, delete, list (docs/cluster.md, "Control plane").
    Cluster(cluster::ClusterCommandArgs),
    /// Kafka without Kafka's tools: create and list topics, write a file
    /// of JSON lines to a topic keyed by a field, read a topic (as a
    /// `read_committed` reader of an exactly-once sink must).
    Kafka {
        #[command(subcommand)]
        command: kafka::KafkaCommand,
    },
    /// Schemas of registry formats: the types of their events in Rust,
    /// Python or TypeScript.
    Schema {
        #[command(subcommand)]
        command: schema::SchemaCommand,
    },
    /// Inspect a pipeline's checkpoints and savepoints.
    Checkpoints {
        #[command(subcommand)]
        command: checkpoints::CheckpointsCommand,
    },
    /// Start a function project (Rust, Python or TypeScript) in a new
    /// directory: a sample function with a test, a pipeline, the SDK.
    Init(project::InitArgs),
    /// Build the function project in a directory (default: this one) into a
    /// component, `build/<name>.wasm`.
    Build(project::BuildArgs),
    /// Check a `.wasm` file and print which Weir worlds it implements.
    Inspect(wasm::InspectArgs),
    /// Turn a core module carrying a component type into a component.
    Componentize(wasm::ComponentizeArgs),
}

/// The built-in functions a spec may name with `native:`: the benchmarks'
/// native twins.
#[cfg(feature = "bench")]
pub fn natives() -> weir_host::runtime::native::NativeCatalog {
    weir_bench::native::catalog()
}

/// The built-in functions a spec may name with `native:`: none in a build
/// without the `bench` feature.
#[cfg(not(feature = "bench"))]
pub fn natives() -> weir_host::runtime::native::NativeCatalog {
    weir_host::runtime::native::NativeCatalog::default()
}

/// Set `flag` on SIGTERM or SIGINT (the command then stops within its
/// grace); a second one ends the process at once (status 130).
pub fn on_termination(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering;
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (mut term, mut int) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    std::thread::Builder::new().name("signals".into()).spawn(move || loop {
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        if flag.swap(true, Ordering::Relaxed) {
            eprintln!("weir: asked to stop again; ending at once");
            std::process::exit(130);
        }
    })?;
    Ok(())
}
