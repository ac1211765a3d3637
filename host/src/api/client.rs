//! A client of the HTTP API, for the `weir function …` and `weir pipeline …`
//! commands. It reads the same answer types the server writes.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::{
    ApiError, ErrorBody, FunctionList, PipelineList, PipelineStatus, SnapshotList, SnapshotTaken,
    StopRequest, Upgrade,
};
use crate::registry::FunctionVersion;

/// Talks to a `weir serve`.
pub struct ApiClient {
    base: String,
    token: Option<String>,
    http: reqwest::blocking::Client,
}

impl ApiClient {
    /// A client of the server at `base` (`http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Result<Self, ApiError> {
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| ApiError::internal(format!("HTTP client: {e}")))?;
        Ok(Self { base: base.trim_end_matches('/').to_string(), token, http })
    }

    /// Send `request`; read a success answer as `T` (an empty body as
    /// JSON `null`), an error answer as [`ErrorBody`].
    fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> Result<T, ApiError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .map_err(|e| ApiError::internal(format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        let body = response.bytes().unwrap_or_default();
        if status.is_success() {
            let body: &[u8] = if body.is_empty() { b"null" } else { &body };
            return serde_json::from_slice(body).map_err(|e| {
                ApiError::internal(format!("unreadable answer from {}: {e}", self.base))
            });
        }
        let error = serde_json::from_slice::<ErrorBody>(&body).ok().map(|body| body.error);
        let code = error.as_ref().map_or("error", |e| e.code.as_str());
        let message = error.as_ref().map_or("(no message)", |e| e.message.as_str());
        Err(ApiError {
            status,
            code: "remote",
            message: format!("{} {code}: {message}", status.as_u16()),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Upload `bytes` as the next version of function `name`.
    pub fn upload_function(&self, name: &str, bytes: Vec<u8>) -> Result<FunctionVersion, ApiError> {
        let url = self.url(&format!("/v1/functions/{name}"));
        self.send(self.http.put(url).header("content-type", "application/wasm").body(bytes))
    }

    /// Every function with its versions.
    pub fn list_functions(&self) -> Result<FunctionList, ApiError> {
        self.send(self.http.get(self.url("/v1/functions")))
    }

    /// Deploy the spec `text`, optionally from the snapshot at `restore`
    /// (overriding a disagreeing Kafka commit marker if
    /// `override_kafka_marker`).
    pub fn deploy(
        &self,
        text: String,
        restore: Option<&str>,
        override_kafka_marker: bool,
    ) -> Result<PipelineStatus, ApiError> {
        let mut params: Vec<(&str, &str)> = Vec::new();
        if let Some(restore) = restore {
            params.push(("restore", restore));
        }
        if override_kafka_marker {
            params.push(("override_kafka_marker", "true"));
        }
        let url = if params.is_empty() {
            reqwest::Url::parse(&self.url("/v1/pipelines"))
        } else {
            reqwest::Url::parse_with_params(&self.url("/v1/pipelines"), &params)
        }
        .map_err(|e| ApiError::internal(format!("bad server URL: {e}")))?;
        self.send(self.http.post(url).header("content-type", "application/yaml").body(text))
    }

    /// Every pipeline's status.
    pub fn list_pipelines(&self) -> Result<PipelineList, ApiError> {
        self.send(self.http.get(self.url("/v1/pipelines")))
    }

    /// One pipeline's status.
    pub fn pipeline(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        self.send(self.http.get(self.url(&format!("/v1/pipelines/{name}"))))
    }

    /// Take a savepoint.
    pub fn savepoint(&self, name: &str) -> Result<SnapshotTaken, ApiError> {
        self.send(self.http.post(self.url(&format!("/v1/pipelines/{name}/savepoints"))))
    }

    /// Stop, with a savepoint if `savepoint`.
    pub fn stop(&self, name: &str, savepoint: bool) -> Result<SnapshotTaken, ApiError> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/pipelines/{name}/stop")))
                .json(&StopRequest { savepoint }),
        )
    }

    /// New function versions, parallelism or spec, state kept.
    pub fn upgrade(&self, name: &str, upgrade: &Upgrade) -> Result<PipelineStatus, ApiError> {
        self.send(self.http.post(self.url(&format!("/v1/pipelines/{name}/upgrade"))).json(upgrade))
    }

    /// Stop and delete.
    pub fn delete_pipeline(&self, name: &str) -> Result<(), ApiError> {
        self.send(self.http.delete(self.url(&format!("/v1/pipelines/{name}"))))
    }

    /// Completed checkpoints and savepoints.
    pub fn checkpoints(&self, name: &str) -> Result<SnapshotList, ApiError> {
        self.send(self.http.get(self.url(&format!("/v1/pipelines/{name}/checkpoints"))))
    }
}
