//! The HTTP API (`weir serve`): functions are uploaded and pipelines
//! deployed and operated over HTTP.
//!
//! ```text
//! GET    /healthz                         ok (never needs the token)
//! GET    /openapi.json                    this API, as OpenAPI 3.1
//! GET    /metrics                         Prometheus text
//! PUT    /functions/{name}                upload a component or core module (body: the bytes)
//! GET    /functions                       every function with its versions
//! GET    /functions/{name}                one function's versions
//! DELETE /functions/{name}                remove it (refused while a pipeline uses it)
//! POST   /pipelines                       deploy a spec (body: YAML or JSON; ?restore=<snapshot>)
//! GET    /pipelines                       every pipeline's status
//! GET    /pipelines/{name}                state, failure, counts, watermark, last checkpoint
//! POST   /pipelines/{name}/savepoints     take a savepoint
//! POST   /pipelines/{name}/stop           stop gracefully ({"savepoint": true} for a savepoint)
//! POST   /pipelines/{name}/upgrade        new function versions / parallelism / spec, state kept
//! GET    /pipelines/{name}/checkpoints    completed checkpoints and savepoints
//! DELETE /pipelines/{name}                stop and delete (savepoints are kept)
//! ```
//!
//! Errors are `{"error":{"code":"…","message":"…"}}` with a fitting 4xx or
//! 5xx status. With a token configured, every route but `/healthz` needs
//! `Authorization: Bearer <token>`. Request bodies are limited in size.
//! The routes and the OpenAPI document come from the same annotations
//! (`utoipa-axum`), so they cannot drift apart.

mod client;
mod error;
mod functions;
mod metrics;
mod openapi;
mod pipelines;
mod supervisor;

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

pub use client::ApiClient;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use functions::{FunctionDetails, FunctionList, FunctionVersions};
pub use pipelines::{
    Counts, OperatorCountsView, PinnedFunction, PipelineList, PipelineStatus, SnapshotInfo,
    SnapshotList, SnapshotRef, SnapshotTaken, StageCountsView, StopRequest,
};
pub use supervisor::{Supervisor, Upgrade, VersionChoice};

use crate::registry::FunctionStore;
use crate::runtime::{new_engine, FunctionLoader};

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on (loopback by default).
    pub listen: SocketAddr,
    /// The host's data directory.
    pub data_dir: PathBuf,
    /// Bearer token every route but `/healthz` requires, if set.
    pub token: Option<String>,
    /// Largest accepted upload, in bytes.
    pub max_upload_bytes: usize,
    /// The most a pipeline may grant its functions (`limits:`): deploys
    /// and upgrades asking for more are refused.
    pub max_limits: crate::runtime::FunctionLimits,
    /// The built-in functions a spec may name with `native:`.
    pub natives: crate::runtime::native::NativeCatalog,
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) functions: FunctionStore,
    pub(crate) loader: FunctionLoader,
    pub(crate) supervisor: Arc<Supervisor>,
    token: Option<String>,
}

/// Serve until the process ends. `on_listening` gets the bound address
/// (useful with port 0).
pub fn serve(config: ServeConfig, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ApiError> {
    let engine = new_engine(Default::default())
        .map_err(|e| ApiError::internal(format!("wasm engine: {e:#}")))?;
    let loader =
        FunctionLoader::new(engine, Some(crate::config::component_cache_dir(&config.data_dir)))
            .map_err(|e| ApiError::internal(e.to_string()))?;
    let functions = FunctionStore::open(&config.data_dir)?;
    let supervisor = Supervisor::open(&config.data_dir, config.max_limits, config.natives.clone())?;
    let state = Arc::new(AppState { functions, loader, supervisor, token: config.token.clone() });
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
        axum::serve(listener, app).await.map_err(|e| ApiError::internal(format!("server: {e}")))
    })
}

/// The routes with their OpenAPI document: those open to anyone, and
/// those behind the token.
fn api_routes() -> (Router<Arc<AppState>>, Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    let (open, open_doc) = OpenApiRouter::new().routes(routes!(healthz)).split_for_parts();
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
        .routes(routes!(metrics::metrics))
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

/// This API as an OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, body = Object, description = "The OpenAPI document")))]
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

/// The routes, with the token check and the body limit.
fn router(state: Arc<AppState>, max_upload_bytes: usize) -> Router {
    let (open, protected, _) = api_routes();
    let protected = protected
        .layer(DefaultBodyLimit::max(max_upload_bytes))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), require_token));
    open.merge(protected)
        .fallback(|| async { ApiError::not_found("no such route") })
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

/// Refuse requests without the configured bearer token.
async fn require_token(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes())) {
            return Err(ApiError::unauthorized());
        }
    }
    Ok(next.run(request).await)
}

/// Compare without an early exit, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
