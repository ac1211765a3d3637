//! Which `weir serve` the client commands (`function`, `pipeline`) talk
//! to, and how its answers are printed.

use serde::Serialize;
use weir_host::api::ApiClient;

/// Which server the client commands talk to.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// The server's URL.
    #[arg(long, env = "WEIR_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// Its bearer token.
    #[arg(long, env = "WEIR_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the server's JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl ServerArgs {
    /// A client of the server.
    pub fn client(&self) -> anyhow::Result<ApiClient> {
        Ok(ApiClient::new(&self.server, self.token.clone())?)
    }

    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }

    /// Print `answer`: its JSON with `--json` (through a JSON value, so
    /// keys come sorted as they always have), else `show` it for people.
    pub fn print<T: Serialize>(&self, answer: &T, show: impl FnOnce(&T)) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_value(answer)?);
        } else {
            show(answer);
        }
        Ok(())
    }
}
