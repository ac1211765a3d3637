//! The HTTP API (`weir serve`): functions are uploaded, listed and deleted
//! over HTTP (pipelines follow).
//!
//! ```text
//! GET    /healthz                 ok (never needs the token)
//! PUT    /functions/{name}        upload a component or core module (body: the bytes)
//! GET    /functions               every function with its versions
//! GET    /functions/{name}        one function's versions
//! DELETE /functions/{name}        remove it (refused while a pipeline uses it)
//! ```
//!
//! Errors are `{"error":{"code":"…","message":"…"}}` with a fitting 4xx or
//! 5xx status. With a token configured, every route but `/healthz` needs
//! `Authorization: Bearer <token>`. Uploads are limited in size.

mod client;
mod error;
mod functions;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

pub use client::ApiClient;
pub use error::ApiError;

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
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) functions: FunctionStore,
    pub(crate) loader: FunctionLoader,
    token: Option<String>,
}

/// Serve until the process ends. `on_listening` gets the bound address
/// (useful with port 0).
pub fn serve(config: ServeConfig, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ApiError> {
    let engine = new_engine(Default::default()).map_err(|e| ApiError::internal(format!("wasm engine: {e:#}")))?;
    let loader = FunctionLoader::new(engine, Some(crate::config::component_cache_dir(&config.data_dir))).map_err(|e| ApiError::internal(e.to_string()))?;
    let functions = FunctionStore::open(&config.data_dir)?;
    let state = Arc::new(AppState { functions, loader, token: config.token.clone() });
    let app = router(state, config.max_upload_bytes);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| ApiError::internal(format!("runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(|e| ApiError::internal(format!("cannot listen on {}: {e}", config.listen)))?;
        let address = listener.local_addr().map_err(|e| ApiError::internal(e.to_string()))?;
        on_listening(address);
        axum::serve(listener, app).await.map_err(|e| ApiError::internal(format!("server: {e}")))
    })
}

/// The routes, with the token check and the upload limit.
fn router(state: Arc<AppState>, max_upload_bytes: usize) -> Router {
    let protected = Router::new()
        .route("/functions", get(functions::list))
        .route("/functions/{name}", get(functions::get).put(functions::upload).delete(functions::delete))
        .layer(DefaultBodyLimit::max(max_upload_bytes))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(protected)
        .fallback(|| async { ApiError::not_found("no such route") })
        .with_state(state)
}

/// Refuse requests without the configured bearer token.
async fn require_token(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Result<Response, ApiError> {
    if let Some(token) = &state.token {
        let given = request.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
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
