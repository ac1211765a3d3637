//! A client of the HTTP API, for the `weir function …` commands.

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
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(300)).build().map_err(|e| ApiError::internal(format!("HTTP client: {e}")))?;
        Ok(Self { base: base.trim_end_matches('/').to_string(), token, http })
    }

    fn send(&self, request: reqwest::blocking::RequestBuilder) -> Result<serde_json::Value, ApiError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().map_err(|e| ApiError::internal(format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        let body: serde_json::Value = response.json().unwrap_or(serde_json::Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or("(no message)");
        Err(ApiError { status, code: "remote", message: format!("{} {code}: {message}", status.as_u16()) })
    }

    /// Upload `bytes` as the next version of function `name`.
    pub fn upload_function(&self, name: &str, bytes: Vec<u8>) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.put(format!("{}/functions/{name}", self.base)).body(bytes))
    }

    /// Every function with its versions.
    pub fn list_functions(&self) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(format!("{}/functions", self.base)))
    }
}
