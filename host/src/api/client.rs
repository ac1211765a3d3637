//! A client of the HTTP API, for the `weir function …` and `weir pipeline …`
//! commands.

use std::time::Duration;

use super::ApiError;

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

    fn send(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> Result<serde_json::Value, ApiError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .map_err(|e| ApiError::internal(format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        let body: serde_json::Value = response.json().unwrap_or(serde_json::Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or("(no message)");
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
    pub fn upload_function(
        &self,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.put(self.url(&format!("/functions/{name}"))).body(bytes))
    }

    /// Every function with its versions.
    pub fn list_functions(&self) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(self.url("/functions")))
    }

    /// Deploy the spec `text`, optionally from the snapshot at `restore`.
    pub fn deploy(
        &self,
        text: String,
        restore: Option<&str>,
    ) -> Result<serde_json::Value, ApiError> {
        let url = match restore {
            Some(restore) => {
                reqwest::Url::parse_with_params(&self.url("/pipelines"), &[("restore", restore)])
                    .map_err(|e| ApiError::internal(format!("bad server URL: {e}")))?
            }
            None => reqwest::Url::parse(&self.url("/pipelines"))
                .map_err(|e| ApiError::internal(format!("bad server URL: {e}")))?,
        };
        self.send(self.http.post(url).header("content-type", "application/yaml").body(text))
    }

    /// Every pipeline's status.
    pub fn list_pipelines(&self) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(self.url("/pipelines")))
    }

    /// One pipeline's status.
    pub fn pipeline(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(self.url(&format!("/pipelines/{name}"))))
    }

    /// Take a savepoint.
    pub fn savepoint(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.post(self.url(&format!("/pipelines/{name}/savepoints"))))
    }

    /// Stop, with a savepoint if `savepoint`.
    pub fn stop(&self, name: &str, savepoint: bool) -> Result<serde_json::Value, ApiError> {
        self.send(
            self.http
                .post(self.url(&format!("/pipelines/{name}/stop")))
                .json(&serde_json::json!({ "savepoint": savepoint })),
        )
    }

    /// Upgrade with `upgrade` (`{"functions": {…}, "parallelism": …, "spec": …}`).
    pub fn upgrade(
        &self,
        name: &str,
        upgrade: &serde_json::Value,
    ) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.post(self.url(&format!("/pipelines/{name}/upgrade"))).json(upgrade))
    }

    /// Stop and delete.
    pub fn delete_pipeline(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.delete(self.url(&format!("/pipelines/{name}"))))
    }

    /// Completed checkpoints and savepoints.
    pub fn checkpoints(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(self.url(&format!("/pipelines/{name}/checkpoints"))))
    }
}
