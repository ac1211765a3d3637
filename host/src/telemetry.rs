//! Where the host's `tracing` output goes: log lines on stderr (filtered by
//! `WEIR_LOG`, default `warn`), and — only when an OTLP endpoint is
//! configured — spans exported with OpenTelemetry over OTLP/HTTP
//! (protobuf), for Jaeger, Tempo, an OpenTelemetry Collector and the like.
//!
//! Export is off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the exporter reads the
//! standard `OTEL_*` variables (headers, timeout, batch schedule). Spans are
//! exported as `WEIR_OTLP` filters them (default `info`: runs, checkpoints
//! and savepoints, restores, rebalances; `debug` adds one span per call
//! into a function, per batch). The service is `weir`.
//!
//! Spans go out in batches from the exporter's own thread, so a slow or
//! absent collector never holds up a pipeline (a full queue drops spans).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// The variables that turn the export on.
const ENDPOINT_VARIABLES: [&str; 2] =
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"];

/// The process's telemetry; dropping it sends the spans still queued.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Install the process's `tracing` subscriber: log lines to stderr, and
    /// the OTLP export if configured. A misconfigured export is reported
    /// on stderr and left off; it never stops the process.
    pub fn init() -> Self {
        let log = || EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| "warn".into());
        let provider = match configured() {
            false => None,
            true => match exporter() {
                Ok(provider) => Some(provider),
                Err(error) => {
                    eprintln!("warning: OpenTelemetry export is off: {error}");
                    None
                }
            },
        };
        let Some(provider) = provider else {
            // No export: log lines only, filtered once for the process.
            tracing_subscriber::fmt().with_env_filter(log()).with_writer(std::io::stderr).init();
            return Self { provider: None };
        };
        let lines =
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(log());
        let filter = EnvFilter::try_from_env("WEIR_OTLP").unwrap_or_else(|_| "info".into());
        let spans =
            tracing_opentelemetry::layer().with_tracer(provider.tracer("weir")).with_filter(filter);
        tracing_subscriber::registry().with(lines).with(spans).init();
        Self { provider: Some(provider) }
    }

    /// Whether spans are being exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(error) = provider.shutdown() {
                eprintln!("warning: OpenTelemetry export: {error}");
            }
        }
    }
}

/// Whether an OTLP endpoint is set.
fn configured() -> bool {
    ENDPOINT_VARIABLES.iter().any(|v| std::env::var(v).is_ok_and(|e| !e.trim().is_empty()))
}

/// An OTLP/HTTP span exporter, batched, for service `weir`.
fn exporter() -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| e.to_string())?;
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("weir").build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}
