//! A real S3-compatible server for the `s3://` checkpoint tests: [`TestS3`].
//!
//! [`TestS3::start`] uses the server [`shared_endpoint`] finds: the one
//! named by `WEIR_TEST_S3_ENDPOINT` (`scripts/dev test` starts one and sets
//! it), else it starts the shared one itself with [`weir_devkit::s3`]
//! (moto on a free loopback port; kept running for later runs). Buckets are created with a plain HTTP `PUT`;
//! objects are listed and read with `object_store`'s S3 client, signed
//! with the same test credentials the `weir` processes get.

use std::sync::OnceLock;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_devkit::process::Lifetime;

/// Environment variable naming the shared server's endpoint.
pub const ENDPOINT_ENV: &str = "WEIR_TEST_S3_ENDPOINT";

/// Credentials and region for the server (moto accepts any).
const ACCESS_KEY_ID: &str = "weir-test";
const SECRET_ACCESS_KEY: &str = "weir-test-secret";
const REGION: &str = "us-east-1";

/// The shared server's endpoint: `$WEIR_TEST_S3_ENDPOINT`, else the one
/// [`weir_devkit::s3`] runs (started at most once per test binary). The
/// only place the tests learn where the S3 server is.
pub fn shared_endpoint() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| match std::env::var(ENDPOINT_ENV) {
            Ok(endpoint) if !endpoint.trim().is_empty() => endpoint.trim().to_owned(),
            _ => weir_devkit::s3::start(Lifetime::Detached)
                .unwrap_or_else(|e| panic!("starting the shared S3 server: {e:#}")),
        })
        .clone()
}

/// An S3-compatible server for a test.
pub struct TestS3 {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    client: reqwest::blocking::Client,
    runtime: tokio::runtime::Runtime,
}

impl TestS3 {
    /// The shared server: [`shared_endpoint`].
    pub fn start() -> TestS3 {
        let endpoint = shared_endpoint();
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime for the S3 client");
        TestS3 { endpoint: endpoint.trim_end_matches('/').to_owned(), client, runtime }
    }

    /// Create a bucket with a name no other test uses, starting `prefix`.
    pub fn create_bucket(&self, prefix: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let bucket = format!("{prefix}-{}-{nanos}", std::process::id());
        let response =
            self.client.put(format!("{}/{bucket}", self.endpoint)).send().expect("PUT bucket");
        assert!(response.status().is_success(), "creating bucket {bucket}: {response:?}");
        bucket
    }

    /// The keys of every object in `bucket` under `prefix`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let store = self.store(bucket);
        let prefix = object_store::path::Path::from(prefix);
        let listed: Vec<_> =
            self.runtime.block_on(store.list(Some(&prefix)).try_collect()).expect("list objects");
        let mut keys: Vec<String> = listed.into_iter().map(|o| o.location.to_string()).collect();
        keys.sort();
        keys
    }

    /// The bytes of object `key` in `bucket`.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let store = self.store(bucket);
        let path = object_store::path::Path::from(key);
        self.runtime
            .block_on(async { store.get(&path).await?.bytes().await })
            .unwrap_or_else(|e| panic!("GET {key}: {e}"))
            .to_vec()
    }

    /// A client of `bucket`, signing as the `weir` processes do.
    fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id(ACCESS_KEY_ID)
            .with_secret_access_key(SECRET_ACCESS_KEY)
            .with_region(REGION)
            .build()
            .expect("S3 client")
    }

    /// The environment a `weir` process needs to use this server for
    /// `s3://` storage, as docs/checkpoints.md documents it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
        ]
    }
}
