//! The checks every request passes before its token is looked at, so a web
//! page the operator visits cannot drive the API:
//!
//! * **Host** (DNS rebinding): IP literals, `localhost` and the names given
//!   with `--allow-host`; else 421 `unknown_host`. `/healthz` and
//!   `/readyz` (probes) are exempt.
//! * **Origin**: a state-changing request (`POST`, `PUT`, `PATCH`,
//!   `DELETE`) whose `Origin` is not the request's own host (nor listed
//!   with `--allow-origin`) gets 403 `foreign_origin`; so does `null`.
//! * **Content-Type**: a state-changing request with a body must say it is
//!   JSON, YAML or Wasm ([`ACCEPTED_TYPES`]); else 415
//!   `unsupported_media_type`. A plain HTML form or a "simple" cross-site
//!   `fetch` cannot send those types without the browser asking first.
//!
//! It also holds [`SurfaceConfig`], the flags of `weir serve` that decide
//! who may reach the API, and the refusal to listen openly.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use axum::http::{header, HeaderMap, Method};

use super::ApiError;

/// Who may reach the API and from where (`weir serve` flags).
#[derive(Debug, Clone, Default)]
pub struct SurfaceConfig {
    /// The tokens file (`--tokens`): `<role> sha256:<hex> [label]` lines.
    pub tokens_file: Option<PathBuf>,
    /// Serve without a token on a non-loopback address
    /// (`--insecure-no-token`).
    pub insecure_no_token: bool,
    /// Host names the API answers to besides IP literals and `localhost`
    /// (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) whose pages may change things
    /// (`--allow-origin`), besides the server's own.
    pub allow_origins: Vec<String>,
}

/// The request body types state-changing requests may carry.
pub const ACCEPTED_TYPES: [&str; 5] =
    ["application/json", "application/yaml", "application/x-yaml", "text/yaml", "application/wasm"];

/// Refuse to listen on `listen` with no token unless the operator said so.
pub fn check_listen(
    listen: SocketAddr,
    has_token: bool,
    config: &SurfaceConfig,
) -> Result<(), String> {
    if has_token || config.insecure_no_token || listen.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "weir serve would listen on {listen}, beyond this machine, with no token: anyone who \
         reaches it could deploy pipelines. Give it a token (--token or WEIR_API_TOKEN, or \
         --tokens FILE with lines from `weir token new`), listen on loopback (--listen \
         127.0.0.1:{}), or accept an open API with --insecure-no-token",
        listen.port()
    ))
}

/// The origin `text` (a URL) as browsers send it: `scheme://host[:port]`,
/// the default port left out; for `--allow-origin`.
pub fn normalize_origin(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text)
        .map_err(|e| format!("{text:?} is not an origin like https://console.example:8443: {e}"))?;
    match url.origin() {
        origin @ url::Origin::Tuple(..) => Ok(origin.ascii_serialization()),
        url::Origin::Opaque(_) => Err(format!("{text:?} has no origin (use http:// or https://)")),
    }
}

/// Check a request's host, origin and body type (see the module doc).
pub fn check(
    config: &SurfaceConfig,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let host = headers.get(header::HOST).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if path != "/healthz" && path != "/readyz" {
        if let Some(host) = host {
            check_host(host, &config.allow_hosts)?;
        }
    }
    let changes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE);
    if !changes {
        return Ok(());
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        check_origin(origin.to_str().unwrap_or("null"), host, &config.allow_origins)?;
    }
    if has_body(headers) {
        check_content_type(headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?")))?;
    }
    Ok(())
}

/// Whether the request carries a body: a `Content-Length` above 0, or a
/// `Transfer-Encoding`.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0")
}

/// `Host`: an IP literal, `localhost`, or a name given with `--allow-host`.
fn check_host(host: &str, allowed: &[String]) -> Result<(), ApiError> {
    let name = host_name(host);
    let ok = name.trim_matches(['[', ']']).parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name));
    if ok {
        return Ok(());
    }
    Err(ApiError::unknown_host(format!(
        "this server does not answer to Host {host:?} (a name that may point here by DNS \
         rebinding); it answers to IP addresses and localhost: start weir serve with \
         --allow-host {name} to add it"
    )))
}

/// The name in `host[:port]` (an IPv6 literal keeps its brackets).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// `Origin`: absent, the request's own `Host`, or one of `allowed`.
fn check_origin(origin: &str, host: Option<&str>, allowed: &[String]) -> Result<(), ApiError> {
    let parsed = normalize_origin(origin).ok();
    if let Some(parsed) = &parsed {
        if allowed.iter().any(|a| a == parsed) || same_host(parsed, host) {
            return Ok(());
        }
    }
    Err(ApiError::foreign_origin(format!(
        "a request that changes things came from a page of another site (Origin {origin}); \
         to let that site's pages use the API, start weir serve with --allow-origin {}",
        parsed.as_deref().unwrap_or("<its origin>")
    )))
}

/// Whether the normalized `origin` names the same host and port as the
/// `Host` header (whose port, when left out, is the origin scheme's
/// default).
fn same_host(origin: &str, host: Option<&str>) -> bool {
    let (Some(host), Ok(url)) = (host, url::Url::parse(origin)) else { return false };
    let Ok(from_host) = url::Url::parse(&format!("{}://{host}", url.scheme())) else {
        return false;
    };
    from_host.host() == url.host()
        && from_host.port_or_known_default() == url.port_or_known_default()
}

/// `Content-Type`: one of [`ACCEPTED_TYPES`], parameters allowed.
fn check_content_type(value: Option<&str>) -> Result<(), ApiError> {
    let essence =
        value.map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
    if essence.as_deref().is_some_and(|e| ACCEPTED_TYPES.contains(&e)) {
        return Ok(());
    }
    Err(ApiError::unsupported_media_type(format!(
        "a request body of type {} is not taken: send it with Content-Type {} (a spec as JSON or \
         YAML, a function as Wasm)",
        value.map_or("(none)".to_string(), |v| format!("{v:?}")),
        ACCEPTED_TYPES.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn code(result: Result<(), ApiError>) -> Option<(u16, &'static str)> {
        result.err().map(|e| (e.status.as_u16(), e.code))
    }

    #[test]
    fn hosts_are_ip_literals_localhost_or_allowed_names() {
        let allowed = vec!["weir.internal".to_string()];
        for host in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[fe80::1]",
            "localhost:8080",
            "LOCALHOST",
            "weir.internal:80",
            "Weir.Internal",
        ] {
            assert_eq!(code(check_host(host, &allowed)), None, "{host}");
        }
        for host in
            ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io"]
        {
            assert_eq!(code(check_host(host, &allowed)), Some((421, "unknown_host")), "{host}");
        }
        let message = check_host("evil.example:8080", &[]).unwrap_err().message;
        assert!(message.contains("--allow-host evil.example"), "{message}");
    }

    #[test]
    fn origins_must_be_the_host_itself_or_allowed() {
        let allowed = vec![normalize_origin("https://console.example:443/").unwrap()];
        assert_eq!(allowed, ["https://console.example"]);
        let host = Some("127.0.0.1:8080");
        assert_eq!(code(check_origin("http://127.0.0.1:8080", host, &allowed)), None);
        assert_eq!(code(check_origin("http://localhost", Some("localhost:80"), &[])), None);
        assert_eq!(code(check_origin("https://console.example", host, &allowed)), None);
        for origin in ["http://evil.example", "http://127.0.0.1:9090", "null", "garbage"] {
            assert_eq!(
                code(check_origin(origin, host, &allowed)),
                Some((403, "foreign_origin")),
                "{origin}"
            );
        }
        let message = check_origin("http://evil.example", host, &[]).unwrap_err().message;
        assert!(message.contains("--allow-origin http://evil.example"), "{message}");
        assert!(normalize_origin("not a url").is_err());
    }

    #[test]
    fn bodies_must_be_json_yaml_or_wasm() {
        for ok in [
            "application/json",
            "application/yaml; charset=utf-8",
            "TEXT/YAML",
            "application/wasm",
            "application/x-yaml",
        ] {
            assert_eq!(code(check_content_type(Some(ok))), None, "{ok}");
        }
        for refused in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
        ] {
            assert_eq!(
                code(check_content_type(refused)),
                Some((415, "unsupported_media_type")),
                "{refused:?}"
            );
        }
        let message = check_content_type(Some("text/plain")).unwrap_err().message;
        assert!(message.contains("application/json, application/yaml"), "{message}");
    }

    #[test]
    fn only_state_changing_requests_with_bodies_are_checked_for_type_and_origin() {
        let config = SurfaceConfig::default();
        let cross = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
            ("content-length", "5"),
        ]);
        assert_eq!(code(check(&config, &Method::GET, "/v1/pipelines", &cross)), None);
        assert_eq!(
            code(check(&config, &Method::POST, "/v1/pipelines", &cross)),
            Some((403, "foreign_origin"))
        );
        let plain = headers(&[
            ("host", "127.0.0.1:8080"),
            ("content-type", "text/plain"),
            ("content-length", "5"),
        ]);
        assert_eq!(
            code(check(&config, &Method::POST, "/v1/pipelines", &plain)),
            Some((415, "unsupported_media_type"))
        );
        let empty = headers(&[("host", "127.0.0.1:8080"), ("content-length", "0")]);
        assert_eq!(code(check(&config, &Method::POST, "/v1/pipelines/p/stop", &empty)), None);
        let chunked = headers(&[("host", "localhost"), ("transfer-encoding", "chunked")]);
        assert_eq!(code(check(&config, &Method::PUT, "/v1/functions/f", &chunked)).unwrap().0, 415);
        let rebound = headers(&[("host", "evil.example")]);
        assert_eq!(code(check(&config, &Method::GET, "/metrics", &rebound)).unwrap().0, 421);
        assert_eq!(code(check(&config, &Method::GET, "/healthz", &rebound)), None);
        assert_eq!(code(check(&config, &Method::GET, "/readyz", &rebound)), None, "probes");
    }

    #[test]
    fn listening_openly_needs_a_token_or_the_flag() {
        let open: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let config = SurfaceConfig::default();
        let message = check_listen(open, false, &config).unwrap_err();
        assert!(message.contains("--insecure-no-token"), "{message}");
        assert!(check_listen(open, true, &config).is_ok());
        assert!(check_listen("127.0.0.1:0".parse().unwrap(), false, &config).is_ok());
        assert!(check_listen("[::1]:0".parse().unwrap(), false, &config).is_ok());
        assert!(check_listen("[::]:0".parse().unwrap(), false, &config).is_err());
        let insecure = SurfaceConfig { insecure_no_token: true, ..SurfaceConfig::default() };
        assert!(check_listen(open, false, &insecure).is_ok());
    }
}
