//! `/v1/functions` handlers, and the answer types they share with
//! [`ApiClient`](super::ApiClient).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{blocking, ApiError, AppState, ErrorBody};
use crate::store::FunctionVersion;

/// Every stored function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionList {
    /// By name.
    pub functions: Vec<FunctionVersions>,
}

/// A function's versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionVersions {
    /// The function's name.
    pub name: String,
    /// Oldest first.
    pub versions: Vec<FunctionVersion>,
}

/// One function: its newest version and all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionDetails {
    /// The function's name.
    pub name: String,
    /// Its newest version.
    pub newest: u32,
    /// Oldest first.
    pub versions: Vec<FunctionVersion>,
}

/// Upload a function: a component, or a core module carrying a component
/// type (componentized). It is validated and compiled before it is stored
/// as the next version; the same bytes as the newest version answer that
/// version (200) instead.
#[utoipa::path(put, path = "/v1/functions/{name}", tag = "functions", params(("name" = String, Path, description = "`[a-z0-9-]{1,63}`")),
    request_body(content = Vec<u8>, content_type = "application/wasm"),
    responses((status = 201, body = FunctionVersion, description = "Stored as a new version"),
              (status = 200, body = FunctionVersion, description = "The newest version has these bytes already"),
              (status = 400, body = ErrorBody, description = "Invalid name"),
              (status = 413, description = "Larger than the upload limit"),
              (status = 415, body = ErrorBody, description = "`not_wasm`: not WebAssembly; `unsupported_media_type`: sent as another type than application/wasm, JSON or YAML"),
              (status = 422, body = ErrorBody, description = "Not a usable Weir function (truncated, wrong imports, …)")))]
pub(crate) async fn upload(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<FunctionVersion>), ApiError> {
    blocking(move || {
        let (version, created) = state.functions.upload(&name, &body, &state.loader)?;
        Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(version)))
    })
    .await
}

/// Every function with its versions.
#[utoipa::path(get, path = "/v1/functions", tag = "functions", responses((status = 200, body = FunctionList)))]
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<FunctionList>, ApiError> {
    let index = state.functions.list()?;
    let functions =
        index.into_iter().map(|(name, versions)| FunctionVersions { name, versions }).collect();
    Ok(Json(FunctionList { functions }))
}

/// One function's versions.
#[utoipa::path(get, path = "/v1/functions/{name}", tag = "functions", params(("name" = String, Path, description = "The function")),
    responses((status = 200, body = FunctionDetails), (status = 400, body = ErrorBody, description = "Invalid name"), (status = 404, body = ErrorBody)))]
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Json<FunctionDetails>, ApiError> {
    let newest = state.functions.get(&name, None)?;
    let versions = state.functions.list()?.remove(&name).unwrap_or_default();
    Ok(Json(FunctionDetails { name: newest.name, newest: newest.version, versions }))
}

/// Delete a function and its versions; refused while a deployed pipeline
/// uses it.
#[utoipa::path(delete, path = "/v1/functions/{name}", tag = "functions", params(("name" = String, Path, description = "The function")),
    responses((status = 204, description = "Deleted"), (status = 400, body = ErrorBody, description = "Invalid name"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "A pipeline uses it")))]
pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    blocking(move || {
        let users = state.pipelines.users_of(&name)?;
        state.functions.delete(&name, &users)?;
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}
