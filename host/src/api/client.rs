//! A client of the HTTP API, for the `weir function …` and `weir pipeline …`
//! commands. It reads the same answer types the server writes.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::{
    ApiError, Decode, ErrorBody, FunctionList, PipelineList, PipelineStatus, SnapshotList,
    SnapshotTaken, StateView, StopRequest, Upgrade,
};
use crate::observe::tail::TailEvent;
use crate::store::FunctionVersion;

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
        let response = self.respond(request)?;
        let body = response.bytes().unwrap_or_default();
        let body: &[u8] = if body.is_empty() { b"null" } else { &body };
        serde_json::from_slice(body)
            .map_err(|e| ApiError::internal(format!("unreadable answer from {}: {e}", self.base)))
    }

    /// Send `request` with the token; a success response as it is, an
    /// error answer as [`ErrorBody`].
    fn respond(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::Response, ApiError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .map_err(|e| ApiError::internal(format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.bytes().unwrap_or_default();
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

    /// State `state` of `key` in keyed operator `operator` (default: the
    /// only one) of a running pipeline, shown as `decode` says.
    pub fn state(
        &self,
        name: &str,
        operator: Option<&str>,
        state: &str,
        key: &str,
        decode: Option<Decode>,
    ) -> Result<StateView, ApiError> {
        let mut query = vec![("state", state.to_string()), ("key", key.to_string())];
        query.extend(operator.map(|o| ("operator", o.to_string())));
        query.extend(decode.map(|d| ("decode", d.name().to_string())));
        self.send(
            self.http.get(self.url(&format!("/v1/pipelines/{name}/state?{}", encode(&query)))),
        )
    }

    /// Follow output `output` of a running pipeline: `on_event` gets each
    /// event of the sample until the server ends the stream (`limit`
    /// events, or the run ended).
    pub fn tail(
        &self,
        name: &str,
        output: &str,
        rate: u32,
        limit: u64,
        mut on_event: impl FnMut(TailEvent),
    ) -> Result<(), ApiError> {
        use std::io::BufRead as _;
        let query = [
            ("output", output.to_string()),
            ("rate", rate.to_string()),
            ("limit", limit.to_string()),
        ];
        let request =
            self.http.get(self.url(&format!("/v1/pipelines/{name}/tail?{}", encode(&query))));
        // A tail lasts as long as the pipeline writes, not one request's timeout.
        let response = self.respond(request.timeout(Duration::from_secs(365 * 24 * 3600)))?;
        for line in std::io::BufReader::new(response).lines() {
            let line = line.map_err(|e| ApiError::internal(format!("tail of {name}: {e}")))?;
            if let Some(data) = line.strip_prefix("data:") {
                let event = serde_json::from_str(data.trim()).map_err(|e| {
                    ApiError::internal(format!("unreadable event from {}: {e}", self.base))
                })?;
                on_event(event);
            }
        }
        Ok(())
    }

    /// Completed checkpoints and savepoints.
    pub fn checkpoints(&self, name: &str) -> Result<SnapshotList, ApiError> {
        self.send(self.http.get(self.url(&format!("/v1/pipelines/{name}/checkpoints"))))
    }
}

/// `pairs` as a URL query string.
fn encode(pairs: &[(&str, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}
