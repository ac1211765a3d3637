//! `weir worker`: run a share of a pipeline on this machine, with the
//! other workers of the same spec (cluster mode, docs/cluster.md), or —
//! with `--cluster NAME` and no spec — a share of every pipeline the
//! cluster's control topic deploys; and `weir worker status`: what a
//! worker runs.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use weir_host::cluster::{self, status, Fleet, FleetConfig, Worker, WorkerConfig, WorkerStatus};
use weir_host::specification::PipelineSpec;

/// What `weir worker` takes.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WorkerArgs {
    #[command(subcommand)]
    command: Option<WorkerCommand>,
    /// The pipeline spec: the same file on every worker.
    spec: Option<PathBuf>,
    /// Local scratch (state working copies, compiled code); state that
    /// must survive lives in `checkpoint.storage`.
    #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
    data_dir: Option<PathBuf>,
    /// Address of the status routes (/healthz, /metrics, /v1/worker);
    /// port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:9100")]
    listen: SocketAddr,
    /// The URL servers reach this worker's routes at, for state lookups
    /// (default: the listen address, or this host's name when it listens
    /// on every interface).
    #[arg(long, env = "WEIR_ADVERTISE_URL")]
    advertise: Option<String>,
    /// This worker's name in reports and logs (default: the host name).
    #[arg(long, env = "WEIR_WORKER_ID")]
    worker_id: Option<String>,
    /// How long stopping a unit (SIGTERM, or a revoke) waits for its final
    /// checkpoint before it is cancelled (default 20 s); the worker exits
    /// within about this plus 5 s, non-zero when a unit could not
    /// checkpoint.
    #[arg(long, env = "WEIR_STOP_GRACE", value_parser = humantime::parse_duration)]
    stop_grace: Option<std::time::Duration>,
    /// With `--cluster NAME` (and no spec): run every pipeline the
    /// cluster's control topic deploys (`weir cluster deploy`).
    #[command(flatten)]
    cluster: super::cluster::ClusterArgs,
}

/// `weir worker` subcommands.
#[derive(clap::Subcommand)]
pub enum WorkerCommand {
    /// Print the units a worker runs, their lag and state size.
    Status {
        /// The worker's status address.
        #[arg(long, default_value = "http://127.0.0.1:9100")]
        server: String,
        /// Print its JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Run `weir worker`.
pub fn execute(args: WorkerArgs) -> anyhow::Result<()> {
    let control = args.cluster.control()?;
    match (args.command, args.spec, control) {
        (Some(WorkerCommand::Status { server, json }), _, _) => print_status(&server, json),
        (None, Some(_), Some(_)) => anyhow::bail!(
            "give either a spec (one pipeline) or --cluster NAME (every pipeline the cluster deploys), not both"
        ),
        (None, Some(spec), None) => {
            run(spec, args.data_dir, args.listen, args.worker_id, args.stop_grace)
        }
        (None, None, Some(control)) => {
            let config = FleetConfig {
                control,
                functions: args.cluster.storage()?.to_string(),
                worker_id: args.worker_id.unwrap_or_else(host_name),
                data_dir: args.data_dir.unwrap_or_else(weir_host::config::default_data_dir),
                natives: super::natives(),
                stop_grace: args.stop_grace.unwrap_or(cluster::DEFAULT_STOP_GRACE),
            };
            run_fleet(config, args.listen, args.advertise, args.cluster.cluster_token)
        }
        (None, None, None) => anyhow::bail!(
            "give the pipeline spec (weir worker pipeline.yaml), or the cluster (weir worker --cluster NAME), or ask a worker (weir worker status)"
        ),
    }
}

/// The URL others reach a worker listening on `address` at: the address
/// itself, or this host's name when it listens on every interface.
fn advertised(address: SocketAddr) -> String {
    match address.ip().is_unspecified() {
        true => format!("http://{}:{}", host_name(), address.port()),
        false => format!("http://{address}"),
    }
}

/// Run every pipeline `config`'s cluster deploys until SIGTERM or SIGINT.
fn run_fleet(
    config: FleetConfig,
    listen: SocketAddr,
    advertise: Option<String>,
    token: Option<String>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating the data directory {}", config.data_dir.display()))?;
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    let worker_id = config.worker_id.clone();
    let topic = config.control.topic().to_string();
    let fleet = Fleet::new(config)?;
    let address =
        status::serve(Arc::clone(&fleet) as Arc<dyn status::Reports>, listener, token.as_deref())?;
    fleet.advertise(advertise.unwrap_or_else(|| advertised(address)));
    eprintln!("weir worker {worker_id}: following the control topic {topic}");
    println!("weir worker {worker_id} listening on http://{address}");
    std::io::stdout().flush()?;
    let shutdown = Arc::new(AtomicBool::new(false));
    super::on_termination(Arc::clone(&shutdown))?;
    let unclean = fleet.run(&shutdown)?;
    if !unclean.is_empty() {
        anyhow::bail!("stopped without a clean end — {}", unclean.join("; "));
    }
    Ok(())
}

fn run(
    spec: PathBuf,
    data_dir: Option<PathBuf>,
    listen: SocketAddr,
    worker_id: Option<String>,
    stop_grace: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    let spec = PipelineSpec::load(&spec)?;
    let plan = cluster::plan(&spec, &cluster::plan::broker_partitions)?;
    let data_dir = data_dir.unwrap_or_else(weir_host::config::default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let worker_id = worker_id.unwrap_or_else(host_name);
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    let worker = Worker::new(WorkerConfig {
        plan,
        worker_id: worker_id.clone(),
        data_dir,
        natives: super::natives(),
        stop_grace: stop_grace.unwrap_or(cluster::DEFAULT_STOP_GRACE),
        seeds: Default::default(),
        restore: None,
    });
    let address = status::serve(Arc::clone(&worker) as Arc<dyn status::Reports>, listener, None)?;
    println!("weir worker {worker_id} listening on http://{address}");
    std::io::stdout().flush()?;
    let shutdown = Arc::new(AtomicBool::new(false));
    super::on_termination(Arc::clone(&shutdown))?;
    worker.run(&shutdown)?;
    Ok(())
}

/// The machine's name, for the default worker id.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("worker-{}", std::process::id()))
}

fn print_status(server: &str, json: bool) -> anyhow::Result<()> {
    let url = format!("{}/v1/worker", server.trim_end_matches('/'));
    let response = reqwest::blocking::get(&url).with_context(|| format!("asking {url}"))?;
    let text = response.error_for_status()?.text()?;
    if json {
        println!("{text}");
        return Ok(());
    }
    let status: WorkerStatus = serde_json::from_str(&text)?;
    println!(
        "worker {} of pipeline {} (group {}): {} of {} units",
        status.worker_id,
        status.pipeline,
        status.group,
        status.units.len(),
        status.units_total
    );
    println!(
        "{:<40} {:<7} {:<9} {:>10} {:>10} {:>8} {:>12} {:>9}",
        "UNIT", "ROLE", "STATE", "IN", "OUT", "LAG", "STATE BYTES", "RESTORED"
    );
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for unit in &status.units {
        println!(
            "{:<40} {:<7} {:<9} {:>10} {:>10} {:>8} {:>12} {:>9}",
            unit.unit,
            unit.role,
            unit.state,
            unit.records_in,
            unit.records_out,
            or_dash(unit.lag.map(|l| l.to_string())),
            or_dash(unit.state_bytes.map(|b| b.to_string())),
            or_dash(unit.restored_from.map(|c| c.to_string())),
        );
        if let Some(error) = &unit.error {
            println!("    last error: {error}");
        }
    }
    Ok(())
}
