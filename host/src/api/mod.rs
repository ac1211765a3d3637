//! The HTTP API (`weir serve`): functions are uploaded and pipelines
//! deployed and operated over HTTP. Every route is under `/v1/` but
//! `/healthz`, `/readyz` and `/metrics`.
//!
//! ```text
//! GET    /healthz                            ok (never needs the token)
//! GET    /readyz                             {"ready":true} while it serves requests (no token)
//! GET    /console/                           the web console's page and files (no token: no data)
//! GET    /metrics                            Prometheus text
//! GET    /v1/openapi.json                    this API, as OpenAPI 3.1
//! PUT    /v1/functions/{name}                upload a component or core module (body: the bytes)
//! GET    /v1/functions                       every function with its versions
//! GET    /v1/functions/{name}                one function's versions
//! DELETE /v1/functions/{name}                remove it (refused while a pipeline uses it)
//! POST   /v1/pipelines                       deploy a spec (body: YAML or JSON; ?restore=<snapshot>)
//! GET    /v1/pipelines                       every pipeline's status
//! GET    /v1/pipelines/{name}                state, failure, counts, watermark, last checkpoint
//! POST   /v1/pipelines/{name}/savepoints     take a savepoint
//! POST   /v1/pipelines/{name}/stop           stop gracefully ({"savepoint": true} for a savepoint)
//! POST   /v1/pipelines/{name}/upgrade        new function versions / parallelism / spec, state kept
//! GET    /v1/pipelines/{name}/checkpoints    completed checkpoints and savepoints
//! GET    /v1/pipelines/{name}/state          a key's state, read while it runs (?state=&key=&operator=&decode=)
//! GET    /v1/pipelines/{name}/tail           a sample of an output as server-sent events (?output=&rate=&limit=)
//! DELETE /v1/pipelines/{name}                stop and delete (savepoints are kept)
//! ```
//!
//! Errors are `{"error":{"code":"…","message":"…"}}` with a fitting 4xx or
//! 5xx status. Every request first passes the [`guard`] (its `Host`, the
//! `Origin` and body type of a state-changing request); then, with tokens
//! configured, every route but `/healthz` and `/readyz` needs `Authorization: Bearer
//! <token>` of a role that may do it ([`access`]). Without a token the
//! server only listens on loopback, unless told `--insecure-no-token`.
//! Request bodies are limited in size.
//! The routes and the OpenAPI document come from the same annotations
//! (`utoipa-axum`), so they cannot drift apart.

pub mod access;
mod client;
mod console;
mod error;
mod functions;
pub mod guard;
mod inspect;
mod openapi;
mod pipelines;
mod prometheus;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::{Json, Router};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use crate::serve::ServerLimits;
pub use crate::serve::{Supervisor, Upgrade, VersionChoice};
pub use client::ApiClient;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use functions::{FunctionDetails, FunctionList, FunctionVersions};
pub use guard::SurfaceConfig;
pub use inspect::{Decode, StateView};
pub use pipelines::UnitView;
pub use pipelines::{
    Counts, OperatorCountsView, PinnedFunction, PipelineList, PipelineStatus, SnapshotInfo,
    SnapshotList, SnapshotRef, SnapshotTaken, StageCountsView, StopRequest,
};

use crate::runtime::{new_engine, FunctionLoader};
use crate::store::FunctionStore;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on (loopback by default).
    pub listen: SocketAddr,
    /// The host's data directory.
    pub data_dir: PathBuf,
    /// An admin bearer token (`--token`), if set; with it or a tokens
    /// file, every route but `/healthz` requires a token.
    pub token: Option<String>,
    /// Tokens file, allowed hosts and origins, open listening.
    pub surface: SurfaceConfig,
    /// Largest accepted upload, in bytes.
    pub max_upload_bytes: usize,
    /// What deploys and upgrades may ask for: more is refused.
    pub limits: ServerLimits,
    /// The built-in functions a spec may name with `native:`.
    pub natives: crate::runtime::native::NativeCatalog,
    /// What a deployed spec may touch on the host beyond the files root
    /// (`--allow-read`, `--allow-write`, `--allow-storage`, `--allow-kafka`,
    /// `--allow-schema-registry`).
    pub grants: crate::serve::grants::GrantsConfig,
    /// How long a shutdown waits for each pipeline's final checkpoint
    /// before it is cancelled (`--stop-grace`).
    pub stop_grace: std::time::Duration,
    /// Serve a cluster's pipelines instead of running them here
    /// (`--cluster`).
    pub cluster: Option<ClusterServe>,
}

/// The cluster a server serves (`weir serve --cluster`): its pipelines run
/// on the cluster's workers, its specs and functions are kept in the
/// cluster's control topic and storage.
#[derive(Debug, Clone)]
pub struct ClusterServe {
    /// The cluster's control topic.
    pub control: crate::cluster::ControlTopic,
    /// The cluster's storage for functions (`s3://bucket/prefix`, …).
    pub storage: String,
    /// The token the cluster's workers take for state lookups
    /// (`WEIR_CLUSTER_TOKEN`), if any.
    pub token: Option<String>,
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) functions: FunctionStore,
    pub(crate) loader: FunctionLoader,
    pub(crate) pipelines: pipelines::Pipelines,
    access: Arc<access::Access>,
    surface: SurfaceConfig,
    /// Tail readers open, per pipeline and per token.
    pub(crate) tails: crate::serve::limits::ReadGate,
    /// State lookups waiting for their answer, per pipeline and per token.
    pub(crate) lookups: crate::serve::limits::ReadGate,
}

/// Serve until SIGTERM or SIGINT; then stop every running pipeline with a
/// final checkpoint within `config.stop_grace` ([`Supervisor::shutdown`];
/// a second signal ends the process at once) and return, with an error
/// naming the pipelines whose stop was not clean. `on_listening` gets the
/// bound address (useful with port 0).
pub fn serve(config: ServeConfig, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ApiError> {
    let has_token = config.token.is_some() || config.surface.tokens_file.is_some();
    guard::check_listen(config.listen, has_token, &config.surface).map_err(ApiError::internal)?;
    let access =
        access::Access::open(config.token.as_deref(), config.surface.tokens_file.as_deref())
            .map_err(|e| ApiError::internal(e.to_string()))?;
    let access = Arc::new(access);
    let engine = new_engine(Default::default())
        .map_err(|e| ApiError::internal(format!("wasm engine: {e:#}")))?;
    let loader =
        FunctionLoader::new(engine, Some(crate::config::component_cache_dir(&config.data_dir)))
            .map_err(|e| ApiError::internal(e.to_string()))?;
    let grants = crate::serve::grants::Grants::new(&config.data_dir, &config.grants)
        .map_err(|e| ApiError::internal(format!("cannot grant {e}")))?;
    let (functions, pipelines) = match &config.cluster {
        None => {
            let functions = FunctionStore::open(&config.data_dir)?;
            let (limits, natives) = (config.limits.clone(), config.natives.clone());
            let supervisor = Supervisor::open(&config.data_dir, limits, natives, grants)?;
            (functions, pipelines::Pipelines::Local(supervisor))
        }
        Some(cluster) => {
            let blobs = || {
                crate::cluster::blobs::FunctionBlobs::open(&cluster.storage)
                    .map_err(|e| ApiError::storage_unavailable(e.to_string()))
            };
            let shared =
                crate::cluster::functions::ClusterFunctions::new(cluster.control.clone(), blobs()?);
            let functions = FunctionStore::cluster(Box::new(shared));
            let served = crate::serve::ClusterPipelines::open(
                cluster.control.clone(),
                blobs()?,
                config.data_dir.clone(),
                config.limits.clone(),
                config.natives.clone(),
                grants,
                cluster.token.clone(),
            )?;
            (functions, pipelines::Pipelines::Cluster(Arc::new(served)))
        }
    };
    let stopper = match &pipelines {
        pipelines::Pipelines::Local(supervisor) => Some(Arc::clone(supervisor)),
        pipelines::Pipelines::Cluster(_) => None,
    };
    let state = Arc::new(AppState {
        functions,
        loader,
        pipelines,
        access: access.clone(),
        surface: config.surface.clone(),
        tails: config.limits.tail_gate(),
        lookups: config.limits.lookup_gate(),
    });
    let app = router(state, config.max_upload_bytes);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ApiError::internal(format!("runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| ApiError::internal(format!("cannot listen on {}: {e}", config.listen)))?;
        let address = listener.local_addr().map_err(|e| ApiError::internal(e.to_string()))?;
        on_listening(address);
        tokio::spawn(access::watch(access));
        let mut signals = Signals::new()?;
        tokio::select! {
            served = axum::serve(listener, app) => {
                served.map_err(|e| ApiError::internal(format!("server: {e}")))?
            }
            () = signals.next() => {}
        }
        tracing::info!("weir serve stopping: no new requests; stopping the pipelines");
        tokio::spawn(async move {
            signals.next().await;
            eprintln!("weir: asked to stop again; ending at once");
            std::process::exit(130);
        });
        let grace = config.stop_grace;
        // A cluster's server runs nothing: its workers go on.
        let Some(stopper) = stopper else { return Ok(()) };
        let unclean = tokio::task::spawn_blocking(move || stopper.shutdown(grace))
            .await
            .map_err(|e| ApiError::internal(format!("shutdown: {e}")))?;
        match unclean.is_empty() {
            true => Ok(()),
            false => Err(ApiError::internal(format!(
                "stopped without a clean end — {}; their next runs restore their last completed checkpoints",
                unclean.join("; ")
            ))),
        }
    })
}

/// SIGTERM and SIGINT, as one stream.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self, ApiError> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind| signal(kind).map_err(|e| ApiError::internal(format!("signals: {e}")));
        Ok(Signals {
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
        })
    }

    /// The next of either.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// The routes with their OpenAPI document: those open to anyone, and
/// those behind the token.
fn api_routes() -> (Router<Arc<AppState>>, Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    let (open, open_doc) =
        OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).split_for_parts();
    let (protected, mut document) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(openapi_document))
        .routes(routes!(functions::list))
        .routes(routes!(functions::get, functions::upload, functions::delete))
        .routes(routes!(pipelines::list, pipelines::deploy))
        .routes(routes!(pipelines::get, pipelines::delete))
        .routes(routes!(pipelines::savepoint))
        .routes(routes!(pipelines::stop))
        .routes(routes!(pipelines::upgrade))
        .routes(routes!(pipelines::checkpoints))
        .routes(routes!(inspect::state))
        .routes(routes!(inspect::tail))
        .routes(routes!(prometheus::metrics))
        .split_for_parts();
    openapi::describe_protected(&mut document);
    document.merge(open_doc);
    (open, protected, document)
}

/// Whether the server is up; never needs the token.
#[utoipa::path(get, path = "/healthz", tag = "operations", security(()), responses((status = 200, body = String, description = "`ok`")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Whether the server takes requests, for a load balancer or Kubernetes'
/// readiness probe; never needs the token. A server on one machine has no
/// group to lose: it is ready while it answers (it stops listening when
/// told to stop). A cluster's server is ready while it can read the
/// cluster's control and status topics (503 with the reason otherwise).
#[utoipa::path(get, path = "/readyz", tag = "operations", security(()), responses((status = 200, body = Object, description = "`{\"ready\":true}`"), (status = 503, body = Object, description = "`{\"ready\":false,\"reason\":…}`: a cluster's server that cannot read its control topic")))]
async fn readyz(
    State(state): State<Arc<AppState>>,
) -> (axum::http::StatusCode, Json<serde_json::Value>) {
    use axum::http::StatusCode;
    let pipelines::Pipelines::Cluster(cluster) = &state.pipelines else {
        return (StatusCode::OK, Json(serde_json::json!({ "ready": true })));
    };
    let cluster = Arc::clone(cluster);
    match blocking(move || Ok(cluster.list()?)).await {
        Ok(_) => (StatusCode::OK, Json(serde_json::json!({ "ready": true }))),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "ready": false, "reason": error.message })),
        ),
    }
}

/// This API as an OpenAPI 3.1 document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "operations", responses((status = 200, body = Object, description = "The OpenAPI document")))]
async fn openapi_document() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(openapi())
}

/// The OpenAPI document of the API (built once).
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    DOCUMENT.get_or_init(|| api_routes().2)
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "Weir", description = "Upload functions, deploy and operate pipelines."),
    modifiers(&BearerToken),
    security(("bearer" = [])),
    tags((name = "functions", description = "WebAssembly functions, versioned by name"),
         (name = "pipelines", description = "Deployed pipelines"),
         (name = "operations", description = "Health, metrics, this document"))
)]
struct ApiDoc;

/// Declares the optional bearer token.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi.components.get_or_insert_with(Default::default).add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The routes, with the guard, the token check and the body limit.
fn router(state: Arc<AppState>, max_upload_bytes: usize) -> Router {
    let (open, protected, _) = api_routes();
    let protected = protected
        .layer(DefaultBodyLimit::max(max_upload_bytes))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authorize));
    // The console's static files need no token: they hold no data.
    open.merge(console::routes())
        .merge(protected)
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard_request))
        .with_state(state)
        .layer(axum::middleware::map_response(error::json_refusals))
}

/// Run blocking work (files, compiling, waiting for a pipeline) off the
/// async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("request task: {e}")))?
}

/// Refuse requests of a foreign host or origin, or with a body of the
/// wrong type ([`guard`]).
async fn guard_request(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    guard::check(&state.surface, request.method(), request.uri().path(), request.headers())?;
    Ok(next.run(request).await)
}

/// Refuse requests without a token of the role they need, when tokens are
/// configured; hand the handlers the caller's role.
async fn authorize(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let needed = access::needed_role(request.method(), request.uri().path(), request.uri().query());
    let authorization = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default());
    let role = state.access.authorize(authorization, needed)?;
    let bearer = state.access.bearer(authorization);
    request.extensions_mut().insert(access::Caller(role));
    request.extensions_mut().insert(bearer);
    Ok(next.run(request).await)
}
