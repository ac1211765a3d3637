//! `/functions` handlers.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

use super::{ApiError, AppState};
use crate::registry::FunctionVersion;

/// `PUT /functions/{name}`: validate and store the body as the next version
/// (201), or answer the existing version for the same bytes (200).
pub(crate) async fn upload(State(state): State<Arc<AppState>>, Path(name): Path<String>, body: Bytes) -> Result<(StatusCode, Json<FunctionVersion>), ApiError> {
    // Compiling a component takes CPU time: off the async workers.
    let stored = tokio::task::spawn_blocking(move || {
        let (version, created) = state.functions.upload(&name, &body, &state.loader)?;
        Ok::<_, ApiError>((if created { StatusCode::CREATED } else { StatusCode::OK }, version))
    })
    .await
    .map_err(|e| ApiError::internal(format!("upload task: {e}")))??;
    Ok((stored.0, Json(stored.1)))
}

/// `GET /functions`: every function with its versions.
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    let index = state.functions.list()?;
    let functions: Vec<serde_json::Value> = index.into_iter().map(|(name, versions)| serde_json::json!({ "name": name, "versions": versions })).collect();
    Ok(Json(serde_json::json!({ "functions": functions })))
}

/// `GET /functions/{name}`: one function's versions.
pub(crate) async fn get(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Result<Json<serde_json::Value>, ApiError> {
    let newest = state.functions.get(&name, None)?;
    let versions = state.functions.list()?.remove(&name).unwrap_or_default();
    Ok(Json(serde_json::json!({ "name": newest.name, "newest": newest.version, "versions": versions })))
}

/// `DELETE /functions/{name}`: remove it (204).
pub(crate) async fn delete(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    // No pipeline runs under the API yet, so nothing uses a function.
    state.functions.delete(&name, &[])?;
    Ok(StatusCode::NO_CONTENT)
}
