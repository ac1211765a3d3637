//! `weir pipeline …`: pipelines on a `weir serve`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use weir_host::api::{Decode, Upgrade, VersionChoice};

use super::print::{print_pipeline_list, print_state, print_status};
use super::server::ServerArgs;

/// What `weir pipeline` does.
#[derive(Subcommand)]
pub enum PipelineCommand {
    /// Deploy a spec whose functions are stored ones (`function: <name>`).
    Deploy {
        /// The pipeline spec (YAML or JSON).
        spec: PathBuf,
        /// Start from this checkpoint or savepoint (its location).
        #[arg(long)]
        restore: Option<String>,
        /// Start even though the exactly-once Kafka sink's commit marker
        /// disagrees with the snapshots (see `weir run --override-kafka-marker`).
        #[arg(long)]
        override_kafka_marker: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Every pipeline with its state.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// One pipeline: state, failure, counts, watermark, last checkpoint.
    Status {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Take a savepoint and print where it is.
    Savepoint {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop gracefully (final snapshot) and print where the snapshot is.
    Stop {
        /// The pipeline's name.
        name: String,
        /// Take a savepoint rather than a checkpoint.
        #[arg(long)]
        savepoint: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Savepoint, stop, and start again with new function versions, a new
    /// parallelism or a new spec, keeping the state.
    Upgrade {
        /// The pipeline's name.
        name: String,
        /// `NAME` (its newest version) or `NAME=VERSION`; repeatable.
        #[arg(long = "function", value_name = "NAME[=VERSION]")]
        functions: Vec<String>,
        /// New parallelism.
        #[arg(long)]
        parallelism: Option<u16>,
        /// A new spec file (same name).
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Start even though the exactly-once Kafka sink's commit marker
        /// disagrees with the snapshots (see `weir run --override-kafka-marker`).
        #[arg(long)]
        override_kafka_marker: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A key's state in a running pipeline, read without stopping it (as
    /// of the last batch the subtask owning the key finished).
    State {
        /// The pipeline's name.
        name: String,
        /// The state's name, as the function declares it.
        #[arg(long)]
        state: String,
        /// The key, as the key function returns it.
        #[arg(long)]
        key: String,
        /// The keyed operator (node name or uid); default: the only one.
        #[arg(long)]
        operator: Option<String>,
        /// How to show the stored bytes (default: as the type the function
        /// declares for the state, `json` for Python and TypeScript
        /// functions, else `bytes`; a Rust function's undeclared integer
        /// state reads as `i64` or `u64`).
        #[arg(long, value_enum)]
        decode: Option<Decode>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Print a sample of what a running pipeline writes to an output, as
    /// it is written (rate-limited), until `--limit` events or the run ends.
    Tail {
        /// The pipeline's name.
        name: String,
        /// `main`, or a sink node's or side output's name.
        #[arg(long, default_value = "main")]
        output: String,
        /// Events a second at most (up to 1000).
        #[arg(long, default_value_t = 20)]
        rate: u32,
        /// Events in all.
        #[arg(long, default_value_t = 1000)]
        limit: u64,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop and delete a pipeline (its savepoints are kept).
    Delete {
        /// The pipeline's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Run a `weir pipeline` command: call the server, print its answer.
pub fn execute(command: PipelineCommand) -> anyhow::Result<()> {
    match command {
        PipelineCommand::Deploy { spec, restore, override_kafka_marker, server } => {
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("cannot read {}", spec.display()))?;
            let client = server.client()?;
            server.print(
                &client.deploy(text, restore.as_deref(), override_kafka_marker)?,
                print_status,
            )
        }
        PipelineCommand::List { server } => {
            server.print(&server.client()?.list_pipelines()?, print_pipeline_list)
        }
        PipelineCommand::Status { name, server } => {
            server.print(&server.client()?.pipeline(&name)?, print_status)
        }
        PipelineCommand::Savepoint { name, server } => {
            server.print(&server.client()?.savepoint(&name)?, |a| println!("{}", a.location))
        }
        PipelineCommand::Stop { name, savepoint, server } => {
            server.print(&server.client()?.stop(&name, savepoint)?, |a| match a.location.as_str() {
                // A cluster's units each took a final checkpoint of their own.
                "" => println!("stopped; every unit took a final checkpoint"),
                location => println!("stopped; snapshot at {location}"),
            })
        }
        PipelineCommand::Upgrade {
            name,
            functions,
            parallelism,
            spec,
            override_kafka_marker,
            server,
        } => {
            let functions = version_choices(functions)?;
            let spec = spec
                .map(|path| {
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))
                })
                .transpose()?;
            let upgrade = Upgrade { spec, functions, parallelism, override_kafka_marker };
            server.print(&server.client()?.upgrade(&name, &upgrade)?, print_status)
        }
        PipelineCommand::State { name, state, key, operator, decode, server } => {
            let client = server.client()?;
            let view = client.state(&name, operator.as_deref(), &state, &key, decode)?;
            server.print(&view, print_state)
        }
        PipelineCommand::Tail { name, output, rate, limit, server } => {
            server.client()?.tail(&name, &output, rate, limit, |event| {
                if server.json() {
                    println!("{}", serde_json::to_string(&event).unwrap_or_default());
                } else {
                    println!(
                        "{}\t{}\t{}",
                        event.timestamp,
                        event.key.unwrap_or_default(),
                        event.value
                    );
                }
            })?;
            Ok(())
        }
        PipelineCommand::Delete { name, server } => {
            server.print(&server.client()?.delete_pipeline(&name)?, |_| println!("deleted"))
        }
    }
}

/// `--function NAME` (the newest version) or `NAME=VERSION`, by name.
fn version_choices(choices: Vec<String>) -> anyhow::Result<BTreeMap<String, VersionChoice>> {
    let mut versions = BTreeMap::new();
    for choice in choices {
        let (function, version) = match choice.split_once('=') {
            Some((function, version)) => (
                function.to_string(),
                VersionChoice::Exactly(version.parse().with_context(|| {
                    format!("--function {choice}: the version is not a number")
                })?),
            ),
            None => (choice, VersionChoice::Latest),
        };
        versions.insert(function, version);
    }
    Ok(versions)
}
