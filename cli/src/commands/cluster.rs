//! `weir cluster`: what a cluster of `weir worker --cluster NAME` runs —
//! deploy a pipeline (its functions stored in the cluster's storage by
//! SHA-256, its spec and version written to the cluster's control topic),
//! stop, start, delete, list (docs/cluster.md, "Control plane").

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use weir_host::cluster::blobs::FunctionBlobs;
use weir_host::cluster::control::WorkerReport;
use weir_host::cluster::control::{ControlChange, ControlState};
use weir_host::cluster::fleet::{deployment_of, follow};
use weir_host::cluster::plan::broker_partitions;
use weir_host::cluster::{ControlTopic, Deployment, Desired, FleetStatus};

/// Which cluster: its name, its Kafka and its storage.
#[derive(clap::Args, Clone)]
pub struct ClusterArgs {
    /// The cluster's name: its control topic is `weir-<name>-control`.
    #[arg(long, env = "WEIR_CLUSTER", global = true)]
    pub cluster: Option<String>,
    /// The Kafka brokers of the control topic (`host:port,…`).
    #[arg(
        long,
        env = "WEIR_CLUSTER_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap_servers: String,
    /// Where the cluster keeps its functions (`s3://bucket/prefix`,
    /// `file:///dir`; credentials as for checkpoint storage).
    #[arg(long, env = "WEIR_CLUSTER_STORAGE", global = true)]
    pub storage: Option<String>,
    /// A secret the cluster's workers and servers share: a server bears
    /// it when it asks a worker for a key's state (without it, workers
    /// answer no state lookups).
    #[arg(long, env = "WEIR_CLUSTER_TOKEN", hide_env_values = true, global = true)]
    pub cluster_token: Option<String>,
}

impl ClusterArgs {
    /// The control topic, when `--cluster` is given.
    pub fn control(&self) -> anyhow::Result<Option<ControlTopic>> {
        let Some(name) = &self.cluster else { return Ok(None) };
        Ok(Some(ControlTopic::new(name, &self.bootstrap_servers, BTreeMap::new())?))
    }

    /// The storage URL, which a cluster needs.
    pub fn storage(&self) -> anyhow::Result<&str> {
        self.storage.as_deref().context(
            "give the cluster's storage: --storage s3://bucket/prefix (or WEIR_CLUSTER_STORAGE)",
        )
    }

    fn require(&self) -> anyhow::Result<ControlTopic> {
        self.control()?.context("give the cluster: --cluster NAME (or WEIR_CLUSTER)")
    }
}

/// What `weir cluster` takes.
#[derive(clap::Args)]
pub struct ClusterCommandArgs {
    #[command(subcommand)]
    command: ClusterCommand,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `weir cluster` subcommands.
#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Deploy a pipeline spec (or a new version of it): its `wasm:`
    /// functions are stored in the cluster, the workers run it.
    Deploy {
        /// The spec; relative function paths are read from its directory.
        spec: PathBuf,
    },
    /// Stop a pipeline on every worker (each unit with a final checkpoint).
    Stop {
        /// The pipeline.
        name: String,
    },
    /// Start a stopped pipeline again (from its checkpoints).
    Start {
        /// The pipeline.
        name: String,
    },
    /// Delete a pipeline from the cluster (its workers stop it; its
    /// checkpoints stay in storage).
    Delete {
        /// The pipeline.
        name: String,
    },
    /// What each worker runs: its pipelines, their versions and units (the
    /// owner, state, records, lag, event time and last checkpoint of each),
    /// and what it waits to run and why.
    Status {
        /// Print the workers' reports as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the deployed pipelines.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Run `weir cluster`.
pub fn execute(args: ClusterCommandArgs) -> anyhow::Result<()> {
    let control = args.cluster.require()?;
    control.ensure()?;
    match args.command {
        ClusterCommand::Deploy { spec } => {
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("reading {}", spec.display()))?;
            let base = spec.parent().map(PathBuf::from).unwrap_or_default();
            let blobs = FunctionBlobs::open(args.cluster.storage()?)?;
            let deployment =
                deployment_of(&text, &base, &blobs, &broker_partitions, 1, Desired::Running)?;
            // Where the plans of a change of layout fetch the functions.
            let scratch = tempfile::tempdir().context("creating a scratch directory")?;
            let deployment = control.transact(|state| {
                let earlier = state.deployments.get(&deployment.pipeline);
                let next = Deployment {
                    version: earlier.map_or(1, |e| e.version + 1),
                    deployed_at: earlier
                        .map_or_else(weir_host::clock::now_millis, |e| e.deployed_at),
                    restore: earlier.and_then(|e| e.restore.clone()),
                    ..deployment.clone()
                };
                // A new layout (a rescale) drains the current one first.
                let next = follow(earlier, next, &blobs, scratch.path())?;
                anyhow::Ok((next.clone(), vec![ControlChange::Deploy(next)]))
            })?;
            println!(
                "deployed {} version {} to {}",
                deployment.pipeline,
                deployment.version,
                control.topic()
            );
        }
        ClusterCommand::Stop { name } => change(&control, &name, Desired::Stopped)?,
        ClusterCommand::Start { name } => change(&control, &name, Desired::Running)?,
        ClusterCommand::Delete { name } => {
            control.transact(|state| {
                existing(state, &name)?;
                anyhow::Ok(((), vec![ControlChange::Undeploy(name.clone())]))
            })?;
            println!("deleted {name} from {}", control.topic());
        }
        ClusterCommand::Status { json } => {
            let deployed = control.read_all()?;
            let reports = control.read_reports()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else {
                print_status(&reports, &deployed);
            }
        }
        ClusterCommand::List { json } => {
            let deployed = control.read_all()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&deployed)?);
            } else {
                println!("{:<32} {:>8} {:<8} functions", "pipeline", "version", "desired");
                for d in deployed.values() {
                    let desired = match d.desired {
                        Desired::Running => "running",
                        Desired::Stopped => "stopped",
                    };
                    let functions: Vec<String> =
                        d.functions.iter().map(|(f, sha)| format!("{f}={}", &sha[..12])).collect();
                    println!(
                        "{:<32} {:>8} {:<8} {}",
                        d.pipeline,
                        d.version,
                        desired,
                        functions.join(" ")
                    );
                }
            }
        }
    }
    Ok(())
}

/// Pipeline `name` as deployed in `state`.
fn existing<'a>(state: &'a ControlState, name: &str) -> anyhow::Result<&'a Deployment> {
    state.deployments.get(name).with_context(|| format!("no pipeline {name} is deployed"))
}

/// Write pipeline `name` again as its next version, `desired`.
fn change(control: &ControlTopic, name: &str, desired: Desired) -> anyhow::Result<()> {
    let next = control.transact(|state| {
        let deployment = existing(state, name)?;
        let next = Deployment { version: deployment.version + 1, desired, ..deployment.clone() };
        anyhow::Ok((next.clone(), vec![ControlChange::Deploy(next)]))
    })?;
    println!(
        "{} version {} is now {:?} in {}",
        next.pipeline,
        next.version,
        desired,
        control.topic()
    );
    Ok(())
}

/// The workers' reports as a table, unit by unit.
fn print_status(reports: &BTreeMap<String, WorkerReport>, deployed: &BTreeMap<String, Deployment>) {
    let now = weir_host::clock::now_millis();
    print!("{:<24} ", "pipeline");
    super::print::print_unit_header("");
    let mut units = 0;
    for (worker, report) in reports {
        let age = now - report.reported_at;
        let Ok(status) = serde_json::from_value::<FleetStatus>(report.status.clone()) else {
            println!("{worker}: a report this weir cannot read");
            continue;
        };
        for pipeline in &status.pipelines {
            for unit in &pipeline.worker.units {
                units += 1;
                let column = format!("{:<24} ", pipeline.worker.pipeline);
                super::print::print_unit(&column, worker, pipeline.version, unit);
            }
        }
        for (pipeline, why) in &status.waiting {
            println!("{pipeline:<24} {worker:<12} waiting: {why}");
        }
        if age > weir_host::serve::cluster::STALE_REPORT.as_millis() as i64 {
            println!("{worker}: last report {} s ago — stopped or cut off?", age / 1000);
        }
    }
    let running = deployed.values().filter(|d| d.desired == Desired::Running).count();
    println!(
        "{} worker(s), {units} unit(s) running, {running} of {} pipeline(s) deployed as running",
        reports.len(),
        deployed.len()
    );
}
