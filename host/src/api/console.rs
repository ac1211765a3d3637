//! The web console's static files, served by `weir serve` on its own port:
//!
//! ```text
//! GET /                       303 to /console/
//! GET /console                303 to /console/
//! GET /console/               index.html
//! GET /console/console.js     the bundled app (Preact, uPlot)
//! GET /console/console.css    its styles
//! ```
//!
//! The files are built from `console/` (`node console/build.mjs`) into
//! `console/dist/`, which is committed and compiled into the binary, so
//! neither building nor running `weir` needs Node.js. They hold no data:
//! the console reads everything through the `/v1` API with the token the
//! user types in, so these routes need no token (they still pass the
//! Host check of the [`guard`](super::guard)).
//!
//! Every answer carries `Cache-Control: no-cache` (with an `ETag`, so a
//! reload costs a 304) and headers that keep the page to itself: a
//! Content-Security-Policy allowing only this origin's scripts, styles and
//! connections (no inline code, no framing), `X-Content-Type-Options:
//! nosniff`, `X-Frame-Options: DENY` and `Referrer-Policy: no-referrer`.
//!
//! This module never reads a request's body, token or state, and serves
//! nothing but the three embedded files.

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest as _, Sha256};

/// Where the console's page is.
pub(crate) const CONSOLE_PATH: &str = "/console/";

/// What the page may load and do: scripts, styles and API calls of this
/// origin only; no inline code, plugins, `<base>`, form posts or framing.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; font-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
pub(crate) struct Asset {
    /// Its `Content-Type`.
    pub(crate) content_type: &'static str,
    /// Its bytes.
    pub(crate) bytes: &'static [u8],
    /// Its `ETag`, worked out when first asked for.
    etag: OnceLock<HeaderValue>,
}

impl Asset {
    const fn new(content_type: &'static str, bytes: &'static [u8]) -> Self {
        Self { content_type, bytes, etag: OnceLock::new() }
    }

    /// `"<16 hex digits of its SHA-256>"`.
    fn etag(&self) -> &HeaderValue {
        self.etag.get_or_init(|| {
            let tag = format!("\"{}\"", &hex::encode(Sha256::digest(self.bytes))[..16]);
            HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"0\""))
        })
    }
}

/// `console/dist/index.html`.
pub(crate) static INDEX_HTML: Asset =
    Asset::new("text/html; charset=utf-8", include_bytes!("../../../console/dist/index.html"));

/// `console/dist/console.js`.
pub(crate) static CONSOLE_JS: Asset = Asset::new(
    "text/javascript; charset=utf-8",
    include_bytes!("../../../console/dist/console.js"),
);

/// `console/dist/console.css`.
pub(crate) static CONSOLE_CSS: Asset =
    Asset::new("text/css; charset=utf-8", include_bytes!("../../../console/dist/console.css"));

/// The console's routes, for any router state.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { to_console() }))
        .route("/console", get(|| async { to_console() }))
        .route(CONSOLE_PATH, get(|headers: HeaderMap| async move { serve(&INDEX_HTML, &headers) }))
        .route(
            "/console/console.js",
            get(|headers: HeaderMap| async move { serve(&CONSOLE_JS, &headers) }),
        )
        .route(
            "/console/console.css",
            get(|headers: HeaderMap| async move { serve(&CONSOLE_CSS, &headers) }),
        )
}

/// `asset`, or 304 when the request's `If-None-Match` names its `ETag`.
pub(crate) fn serve(asset: &'static Asset, request: &HeaderMap) -> Response {
    let etag = asset.etag();
    let fresh = request.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.to_str().is_ok_and(|tags| {
            tags.split(',').any(|t| t.trim().as_bytes() == etag.as_bytes() || t.trim() == "*")
        })
    });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag.clone());
    protect(headers);
    response
}

/// A redirect to the console's page (a path, so it works under any host
/// name).
fn to_console() -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, CONSOLE_PATH)]).into_response();
    protect(response.headers_mut());
    response
}

/// The headers every console answer carries (see the module doc).
pub(crate) fn protect(headers: &mut HeaderMap) {
    let pairs: [(HeaderName, &'static str); 6] = [
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (HeaderName::from_static("cross-origin-resource-policy"), "same-origin"),
    ];
    for (name, value) in pairs {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(headers: &HeaderMap, name: impl header::AsHeaderName) -> &str {
        headers.get(name).map(|v| v.to_str().unwrap()).unwrap_or_default()
    }

    fn body(response: Response) -> Vec<u8> {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(bytes).unwrap().to_vec()
    }

    #[test]
    fn the_embedded_files_are_the_built_console() {
        let page = std::str::from_utf8(INDEX_HTML.bytes).unwrap();
        assert!(page.contains(r#"<script defer src="console.js"></script>"#), "{page}");
        assert!(page.contains(r#"href="console.css""#), "{page}");
        assert!(!page.contains("<script>"), "no inline script: the CSP would block it");
        assert!(CONSOLE_JS.bytes.starts_with(b"/* Weir console"));
        assert!(CONSOLE_CSS.bytes.starts_with(b"/* Weir console"));
        assert!(CONSOLE_JS.bytes.len() < 150 << 10, "the bundle grew past its budget");
    }

    #[test]
    fn files_have_their_types_and_the_protective_headers() {
        for (asset, kind) in [
            (&INDEX_HTML, "text/html"),
            (&CONSOLE_JS, "text/javascript"),
            (&CONSOLE_CSS, "text/css"),
        ] {
            let response = serve(asset, &HeaderMap::new());
            assert_eq!(response.status(), StatusCode::OK);
            let headers = response.headers().clone();
            assert!(text(&headers, header::CONTENT_TYPE).starts_with(kind), "{headers:?}");
            assert_eq!(text(&headers, header::CACHE_CONTROL), "no-cache");
            let csp = text(&headers, header::CONTENT_SECURITY_POLICY);
            assert!(csp.starts_with("default-src 'self'; script-src 'self';"), "{csp}");
            assert!(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'"));
            assert!(!csp.contains("unsafe"), "{csp}");
            assert_eq!(text(&headers, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
            assert_eq!(text(&headers, header::X_FRAME_OPTIONS), "DENY");
            assert_eq!(text(&headers, header::REFERRER_POLICY), "no-referrer");
            assert_eq!(body(response), asset.bytes);
        }
    }

    #[test]
    fn a_known_etag_answers_304_without_a_body() {
        let first = serve(&CONSOLE_JS, &HeaderMap::new());
        let tag = first.headers()[header::ETAG].clone();
        assert_ne!(tag, serve(&CONSOLE_CSS, &HeaderMap::new()).headers()[header::ETAG]);
        let mut request = HeaderMap::new();
        request.insert(header::IF_NONE_MATCH, tag.clone());
        let again = serve(&CONSOLE_JS, &request);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()[header::ETAG], tag);
        assert!(again.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        assert!(body(again).is_empty());
        request.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        assert_eq!(serve(&CONSOLE_JS, &request).status(), StatusCode::OK);
    }

    /// The routes on a real listener, read with a plain HTTP client.
    #[test]
    fn the_routes_serve_the_page_and_redirect_to_it() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, routes::<()>()).await });
        let client = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let get = |path: &str| client.get(format!("http://{address}{path}")).send().unwrap();
        for path in ["/", "/console"] {
            let answer = get(path);
            assert_eq!(answer.status().as_u16(), 303, "{path}");
            assert_eq!(text(answer.headers(), header::LOCATION), "/console/", "{path}");
        }
        for (path, kind, asset) in [
            ("/console/", "text/html", &INDEX_HTML),
            ("/console/console.js", "text/javascript", &CONSOLE_JS),
            ("/console/console.css", "text/css", &CONSOLE_CSS),
        ] {
            let answer = get(path);
            assert_eq!(answer.status().as_u16(), 200, "{path}");
            assert!(text(answer.headers(), header::CONTENT_TYPE).starts_with(kind), "{path}");
            assert_eq!(
                text(answer.headers(), header::CONTENT_SECURITY_POLICY),
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(answer.bytes().unwrap(), asset.bytes, "{path}");
        }
        assert_eq!(get("/console/other.js").status().as_u16(), 404);
    }
}
