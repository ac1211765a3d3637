//! A real Confluent-compatible schema registry for the format tests:
//! [`shared_url`] is `$WEIR_TEST_SCHEMA_REGISTRY` (`scripts/dev test`
//! starts Apicurio Registry and sets it; any Confluent-compatible
//! registry's base URL will do), else the Apicurio Registry
//! [`weir_devkit::schema_registry`] runs (started at most once per test
//! binary, kept running). Subjects are set to a compatibility rule with
//! [`set_compatibility`], since Apicurio's default is `NONE`.

use std::sync::OnceLock;

use weir_devkit::process::Lifetime;

/// Environment variable naming the shared registry's base URL.
pub const URL_ENV: &str = "WEIR_TEST_SCHEMA_REGISTRY";

/// The shared registry's base URL. The only place the tests learn where
/// the registry is.
pub fn shared_url() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| match std::env::var(URL_ENV) {
            Ok(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_owned(),
            _ => weir_devkit::schema_registry::start(Lifetime::Detached)
                .unwrap_or_else(|e| panic!("starting the shared schema registry: {e:#}")),
        })
        .clone()
}

/// Hold `subject` to `rule` (`BACKWARD`, `FULL`, …) from now on.
pub fn set_compatibility(subject: &str, rule: &str) {
    let url = format!("{}/config/{subject}", shared_url());
    let answer = reqwest::blocking::Client::new()
        .put(&url)
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .body(format!(r#"{{"compatibility":"{rule}"}}"#))
        .send()
        .unwrap_or_else(|e| panic!("PUT {url}: {e}"));
    assert!(answer.status().is_success(), "PUT {url}: {}", answer.status());
}
