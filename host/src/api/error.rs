//! API errors: a status and `{"error":{"code","message"}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::runtime::LoadError;
use crate::serve::grants::NotGranted;
use crate::serve::{ServeError, ServeErrorKind};
use crate::store::StoreError;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`invalid_name`, `not_found`, …).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid `Authorization: Bearer <token>` header is required",
        )
    }

    /// 403 `forbidden`: the token is valid but its role may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 415 `unsupported_media_type`: a request body of a type the API
    /// does not take.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
    }

    /// 403 `foreign_origin`: a state-changing request from a page of
    /// another site.
    pub fn foreign_origin(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "foreign_origin", message)
    }

    /// 421 `unknown_host`: a `Host` this server does not answer to (DNS
    /// rebinding).
    pub fn unknown_host(message: impl Into<String>) -> Self {
        Self::new(StatusCode::MISDIRECTED_REQUEST, "unknown_host", message)
    }

    /// 400: the spec (or request body) is malformed or invalid.
    pub fn invalid_spec(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_spec", message)
    }

    /// 422: the spec is well-formed but cannot run here (a missing
    /// function, a function of the wrong kind, impossible settings).
    pub fn invalid_pipeline(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_pipeline", message)
    }

    /// 422 `limit_exceeded`: the request asks for more than the server's
    /// limits allow (the message names the limit and its flag).
    pub fn limit_exceeded(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "limit_exceeded", message)
    }

    /// 413 `too_large`: the request body is larger than the server accepts.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 422 `not_granted`: the spec asks for a file, storage, broker or
    /// client property this server does not grant.
    pub fn not_granted(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "not_granted", message)
    }

    /// 409 with `code`: the request conflicts with the current state.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 502 `storage_unavailable`: the checkpoint storage a pipeline uses
    /// cannot be opened or listed (unreachable, no credentials).
    pub fn storage_unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "storage_unavailable", message)
    }

    /// 500: a savepoint or final snapshot could not be taken.
    pub fn snapshot_failed(message: String) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "snapshot_failed", message)
    }

    /// 400 `invalid_request`: a query parameter is missing or malformed.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 503 `timeout`: the pipeline did not answer in time (try again).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let message = error.to_string();
        match error {
            StoreError::InvalidName(_) => {
                Self::new(StatusCode::BAD_REQUEST, "invalid_name", message)
            }
            StoreError::Invalid(LoadError::NotWasm) => {
                Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "not_wasm", message)
            }
            StoreError::Invalid(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_function", message)
            }
            StoreError::NotFound(_) => Self::new(StatusCode::NOT_FOUND, "not_found", message),
            StoreError::InUse { .. } => Self::new(StatusCode::CONFLICT, "in_use", message),
            StoreError::Io { .. } | StoreError::Corrupt(_) => Self::internal(message),
            StoreError::Cluster(_) => Self::storage_unavailable(message),
        }
    }
}

impl From<NotGranted> for ApiError {
    fn from(error: NotGranted) -> Self {
        Self::not_granted(error.to_string())
    }
}

impl From<ServeError> for ApiError {
    fn from(error: ServeError) -> Self {
        match error {
            ServeError::Refused { kind, code, message } => {
                let status = match kind {
                    ServeErrorKind::NotFound => StatusCode::NOT_FOUND,
                    ServeErrorKind::InvalidSpec => StatusCode::BAD_REQUEST,
                    ServeErrorKind::InvalidPipeline | ServeErrorKind::LimitExceeded => {
                        StatusCode::UNPROCESSABLE_ENTITY
                    }
                    ServeErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                    ServeErrorKind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
                    ServeErrorKind::Conflict => StatusCode::CONFLICT,
                    ServeErrorKind::StorageUnavailable => StatusCode::BAD_GATEWAY,
                    ServeErrorKind::NotOnCluster => StatusCode::NOT_IMPLEMENTED,
                    ServeErrorKind::SnapshotFailed | ServeErrorKind::Internal => {
                        StatusCode::INTERNAL_SERVER_ERROR
                    }
                };
                Self::new(status, code, message)
            }
            ServeError::Store(error) => error.into(),
            ServeError::NotGranted(error) => error.into(),
        }
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code: `invalid_name`, `invalid_spec`,
    /// `invalid_pipeline`, `not_granted`, `limit_exceeded`, `not_found`, `exists`, `busy`, `not_running`,
    /// `in_use`, `not_wasm`, `invalid_function`, `unauthorized`,
    /// `forbidden`, `unsupported_media_type`, `foreign_origin`,
    /// `unknown_host`, `invalid_request`, `too_large`,
    /// `method_not_allowed`, …
    pub code: String,
    /// For people.
    pub message: String,
}

/// Give axum's own refusals — a path or query it cannot read, a body over
/// the limit, a method the route lacks — the JSON error body of every
/// other error (they come as plain text, or empty), keeping their status
/// and headers (`Allow`).
pub(crate) async fn json_refusals(response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !status.is_client_error() || json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "invalid_request",
    };
    let message = match String::from_utf8_lossy(&text).trim() {
        "" => status.canonical_reason().unwrap_or("refused").to_lowercase(),
        text => text.to_string(),
    };
    parts.headers.remove(axum::http::header::CONTENT_TYPE);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let mut answer = ApiError::new(status, code, message).into_response();
    answer.headers_mut().extend(parts.headers);
    answer
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            ErrorBody { error: ErrorDetail { code: self.code.to_string(), message: self.message } };
        (self.status, Json(body)).into_response()
    }
}
