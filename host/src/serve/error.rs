//! Why a lifecycle step was refused: a kind the API turns into an HTTP
//! status, a stable machine-readable code and a message for people.

use super::grants::NotGranted;
use crate::store::StoreError;

/// What kind of refusal it is; each maps to one HTTP status in `api/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeErrorKind {
    /// No such pipeline (404).
    NotFound,
    /// The spec or request is malformed or invalid (400).
    InvalidSpec,
    /// The spec is well-formed but cannot run here (422).
    InvalidPipeline,
    /// More than the server's limits allow (422).
    LimitExceeded,
    /// A request body larger than the server takes (413).
    TooLarge,
    /// Too many reads held open at once: tail readers or state lookups
    /// waiting for their answer (429).
    TooManyRequests,
    /// It conflicts with the pipeline's current state (409).
    Conflict,
    /// The checkpoint storage cannot be opened or listed (502).
    StorageUnavailable,
    /// A savepoint or final snapshot could not be taken (500).
    SnapshotFailed,
    /// Not (yet) something a cluster's server does (501).
    NotOnCluster,
    /// Anything else (500).
    Internal,
}

/// A refused or failed lifecycle step.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Refused by the lifecycle itself.
    #[error("{message}")]
    Refused {
        /// What kind of refusal.
        kind: ServeErrorKind,
        /// A stable machine-readable code (`not_found`, `busy`, …).
        code: &'static str,
        /// What went wrong, for people.
        message: String,
    },
    /// The function or pipeline store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The spec asks for something this server does not grant.
    #[error(transparent)]
    NotGranted(#[from] NotGranted),
}

impl From<crate::cluster::control::ControlError> for ServeError {
    fn from(error: crate::cluster::control::ControlError) -> Self {
        Self::storage_unavailable(format!("the cluster's control topic: {error}"))
    }
}

impl ServeError {
    fn refused(kind: ServeErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        Self::Refused { kind, code, message: message.into() }
    }

    /// Something a cluster's server does not do (yet): `what`, and what to
    /// do instead.
    pub fn not_on_cluster(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::NotOnCluster, "not_on_cluster", message)
    }

    /// No such pipeline.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::NotFound, "not_found", message)
    }

    /// The spec is malformed or invalid.
    pub fn invalid_spec(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::InvalidSpec, "invalid_spec", message)
    }

    /// The spec cannot run here (a missing function, impossible settings).
    pub fn invalid_pipeline(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::InvalidPipeline, "invalid_pipeline", message)
    }

    /// The request asks for more than the server's limits allow.
    pub fn limit_exceeded(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::LimitExceeded, "limit_exceeded", message)
    }

    /// The request body is larger than the server accepts.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::TooLarge, "too_large", message)
    }

    /// Too many reads held open at once (the message names the limit).
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::TooManyRequests, "too_many_requests", message)
    }

    /// The request conflicts with the current state; `code` says how.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::Conflict, code, message)
    }

    /// The checkpoint storage cannot be opened or listed.
    pub fn storage_unavailable(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::StorageUnavailable, "storage_unavailable", message)
    }

    /// A savepoint or final snapshot could not be taken.
    pub fn snapshot_failed(message: String) -> Self {
        Self::refused(ServeErrorKind::SnapshotFailed, "snapshot_failed", message)
    }

    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Refused { code, .. } => code,
            Self::Store(_) => "store",
            Self::NotGranted(_) => "not_granted",
        }
    }

    /// Anything else.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::refused(ServeErrorKind::Internal, "internal", message)
    }
}
