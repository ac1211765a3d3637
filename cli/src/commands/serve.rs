//! `weir serve`: the HTTP API on this machine's data directory.

use std::path::PathBuf;

/// What `weir serve` takes.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Serve a cluster (`--cluster NAME --bootstrap-servers … --storage …`):
    /// deploy to its workers through its control topic instead of running
    /// pipelines here.
    #[command(flatten)]
    cluster: super::cluster::ClusterArgs,
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Where functions, state and compiled code are kept.
    #[arg(long, env = weir_host::config::DATA_DIR_ENV)]
    data_dir: Option<PathBuf>,
    /// An admin token: require `Authorization: Bearer <token>` (this or
    /// one of --tokens) on every route but /healthz.
    #[arg(long, env = "WEIR_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A tokens file: `<role> sha256:<hex> [label]` lines (roles read,
    /// deploy, admin; `weir token new` prints one), read again when it
    /// changes and on SIGHUP; deleting or emptying it revokes its tokens.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Listen beyond loopback with no token: anyone who reaches the
    /// server may deploy pipelines.
    #[arg(long)]
    insecure_no_token: bool,
    /// A host name the API answers to besides IP addresses and localhost
    /// (repeatable): other `Host` headers get 421 (DNS rebinding).
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// An origin (`https://console.example`) whose web pages may change
    /// things through the API (repeatable); others get 403.
    #[arg(long, value_name = "URL", value_parser = weir_host::api::guard::normalize_origin)]
    allow_origin: Vec<String>,
    /// Largest accepted upload, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_upload_bytes: usize,
    /// The most CPU time per call a pipeline's `limits.call_timeout`
    /// may grant its functions.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    max_call_timeout: std::time::Duration,
    /// The most linear memory a pipeline's `limits.memory` may grant
    /// each function instance (`512MiB`, `1GiB`, bytes).
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    max_function_memory: usize,
    /// The most pipelines the server keeps (running or not).
    #[arg(long, default_value_t = 32)]
    max_pipelines: usize,
    /// The most keyed subtasks one pipeline may run, over all its stages.
    #[arg(long, default_value_t = 16)]
    max_parallelism: u16,
    /// The most a pipeline's `state_cache_bytes` may be (`256MiB`, bytes).
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    max_state_cache: usize,
    /// The most a pipeline's `batch_size` may be.
    #[arg(long, default_value_t = 65_536)]
    max_batch_size: usize,
    /// Largest accepted spec (a deploy's body, an upgrade's spec).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    max_spec_bytes: usize,
    /// The most tail readers (`GET …/tail`) one pipeline may have open.
    #[arg(long, default_value_t = 64)]
    max_tails_per_pipeline: usize,
    /// The most tail readers one token may have open, over all pipelines.
    #[arg(long, default_value_t = 16)]
    max_tails_per_token: usize,
    /// The most state lookups (`GET …/state`) of one pipeline waiting for
    /// their answer at once.
    #[arg(long, default_value_t = 64)]
    max_lookups_per_pipeline: usize,
    /// The most state lookups of one token waiting for their answer at once.
    #[arg(long, default_value_t = 16)]
    max_lookups_per_token: usize,
    /// A directory pipelines deployed here may read (file sources,
    /// `resources:`, Kafka certificate and key files); repeatable.
    /// Relative paths in a spec resolve inside `<data dir>/files/`.
    #[arg(long, value_name = "DIR")]
    allow_read: Vec<PathBuf>,
    /// A directory pipelines deployed here may write (file sinks,
    /// `file://` checkpoint storage) and read; repeatable. It may not hold
    /// the data directory.
    #[arg(long, value_name = "DIR")]
    allow_write: Vec<PathBuf>,
    /// Checkpoint storage pipelines may use and restore from besides
    /// their own (`s3://bucket/prefix`, `file:///mnt/ckpt`); repeatable.
    #[arg(long, value_name = "URL")]
    allow_storage: Vec<String>,
    /// The only Kafka brokers pipelines may name (`host:port,…`); default
    /// any.
    #[arg(long, value_name = "HOST:PORT,…", value_delimiter = ',')]
    allow_kafka: Option<Vec<String>>,
    /// The only schema registries pipelines may call: a spec's
    /// `schema_registry.url` must be this URL or below it; repeatable;
    /// default any.
    #[arg(long, value_name = "URL")]
    allow_schema_registry: Vec<String>,
    /// How long a shutdown (SIGTERM, Ctrl-C) waits for each running
    /// pipeline's final checkpoint before it is cancelled (default 20 s);
    /// the server then exits within about this plus 5 s, non-zero and
    /// naming the pipelines that could not checkpoint. They run again,
    /// from their last checkpoints, when the server starts again.
    #[arg(long, env = "WEIR_STOP_GRACE", value_parser = humantime::parse_duration)]
    stop_grace: Option<std::time::Duration>,
}

/// Serve until the process ends; say on stdout where.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.unwrap_or_else(weir_host::config::default_data_dir);
    let limits = weir_host::api::ServerLimits {
        max_pipelines: args.max_pipelines,
        max_parallelism: args.max_parallelism,
        max_state_cache_bytes: args.max_state_cache,
        max_batch_size: args.max_batch_size,
        max_spec_bytes: args.max_spec_bytes,
        functions: weir_host::runtime::FunctionLimits {
            call_timeout: args.max_call_timeout,
            memory_bytes: args.max_function_memory,
            fuel: None,
        },
        max_tails_per_pipeline: args.max_tails_per_pipeline,
        max_tails_per_token: args.max_tails_per_token,
        max_lookups_per_pipeline: args.max_lookups_per_pipeline,
        max_lookups_per_token: args.max_lookups_per_token,
    };
    let config = weir_host::api::ServeConfig {
        listen: args.listen,
        data_dir,
        token: args.token.filter(|t| !t.is_empty()),
        surface: weir_host::api::SurfaceConfig {
            tokens_file: args.tokens,
            insecure_no_token: args.insecure_no_token,
            allow_hosts: args.allow_host,
            allow_origins: args.allow_origin,
        },
        max_upload_bytes: args.max_upload_bytes,
        limits,
        natives: super::natives(),
        grants: weir_host::serve::grants::GrantsConfig {
            allow_read: args.allow_read,
            allow_write: args.allow_write,
            allow_storage: args.allow_storage,
            allow_kafka: args.allow_kafka,
            allow_schema_registry: args.allow_schema_registry,
        },
        stop_grace: args.stop_grace.unwrap_or(weir_host::pipeline::DEFAULT_STOP_GRACE),
        cluster: match args.cluster.control()? {
            Some(control) => Some(weir_host::api::ClusterServe {
                control,
                storage: args.cluster.storage()?.to_string(),
                token: args.cluster.cluster_token.clone().filter(|t| !t.is_empty()),
            }),
            None => None,
        },
    };
    weir_host::api::serve(config, |address| {
        use std::io::Write as _;
        println!("weir serve listening on http://{address}");
        let _ = std::io::stdout().flush();
    })?;
    Ok(())
}

/// A size argument: `512MiB`, `1GiB` or bytes.
fn parse_size(text: &str) -> Result<usize, String> {
    weir_host::units::parse_bytes(text)
        .ok_or_else(|| format!("{text:?} is not a size (like 512MiB, 1GiB)"))
}
