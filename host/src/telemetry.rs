//! Where the host's `tracing` output goes: log lines on stderr (filtered by
//! `WEIR_LOG`, default `warn`), and — only when an OTLP endpoint is
//! configured — spans exported with OpenTelemetry over OTLP/HTTP
//! (protobuf), for Jaeger, Tempo, an OpenTelemetry Collector and the like.
//!
//! Export is off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the exporter reads the
//! standard `OTEL_*` variables (headers, timeout, batch schedule). Spans are
//! exported as `WEIR_OTLP` lets them through (default `info`: runs,
//! checkpoints and savepoints, restores, rebalances; `debug` adds one span
//! per call into a function, per batch), or `WEIR_LOG` where it is the
//! more verbose. While exporting, both are target filters
//! (`warn,weir_host::pipeline=info`). The service is `weir`.
//!
//! Spans go out in batches from the exporter's own thread, so a slow or
//! absent collector never holds up a pipeline (a full queue drops spans).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

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
            let log = EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| "warn".into());
            tracing_subscriber::fmt()
                .with_env_filter(log)
                .with_writer(std::io::stderr)
                .with_ansi(colours())
                .init();
            return Self { provider: None };
        };
        // Exporting: one process-wide filter lets through what either the
        // log lines or the export want, and the log lines pick theirs in
        // `on_event`. tracing-subscriber's per-layer filters are not used:
        // they dropped log lines (its thread-local filter state).
        let lines = targets("WEIR_LOG", "warn");
        let spans = targets("WEIR_OTLP", "info");
        let either = union(&lines, &spans);
        let lines = LinesOnly {
            layer: tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(colours()),
            filter: lines,
        };
        let spans = tracing_opentelemetry::layer().with_tracer(provider.tracer("weir"));
        tracing_subscriber::registry().with(either).with(lines).with(spans).init();
        Self { provider: Some(provider) }
    }

    /// Whether spans are being exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

/// The target filter in `variable` (`target=level` pairs and a default
/// level, as `RUST_LOG` without span or field filters), else `default`.
fn targets(variable: &str, default: &str) -> Targets {
    let default = || default.parse().expect("a valid default filter");
    match std::env::var(variable) {
        Err(_) => default(),
        Ok(value) => value.parse().unwrap_or_else(|error| {
            eprintln!(
                "warning: {variable}={value:?} is not a target filter ({error}); using the default"
            );
            default()
        }),
    }
}

/// The most verbose level `filter` lets through for `target`.
fn level_for(filter: &Targets, target: &str) -> LevelFilter {
    [Level::TRACE, Level::DEBUG, Level::INFO, Level::WARN, Level::ERROR]
        .into_iter()
        .find(|level| filter.would_enable(target, level))
        .map_or(LevelFilter::OFF, LevelFilter::from_level)
}

/// The filter letting through exactly what `a` or `b` lets through: for
/// each target either names, the more verbose of their levels there (the
/// most specific target matching an event decides, and no target of `a`
/// or `b` is more specific than the union's).
fn union(a: &Targets, b: &Targets) -> Targets {
    let default = a.default_level().max(b.default_level()).unwrap_or(LevelFilter::OFF);
    let targets: Vec<(String, LevelFilter)> = a
        .iter()
        .chain(b.iter())
        .map(|(target, _)| (target.to_string(), level_for(a, target).max(level_for(b, target))))
        .collect();
    Targets::new().with_default(default).with_targets(targets)
}

/// A layer that sees every span but only the events its `filter` lets
/// through: the log lines under a process-wide filter that also lets
/// through what the export wants.
struct LinesOnly<L> {
    layer: L,
    filter: Targets,
}

impl<S, L> Layer<S> for LinesOnly<L>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
{
    fn on_layer(&mut self, subscriber: &mut S) {
        self.layer.on_layer(subscriber);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.layer.on_new_span(attrs, id, ctx);
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.layer.on_record(span, values, ctx);
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.layer.on_follows_from(span, follows, ctx);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if self.filter.would_enable(metadata.target(), metadata.level()) {
            self.layer.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.layer.on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.layer.on_exit(id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.layer.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.layer.on_id_change(old, new, ctx);
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

/// Colour log lines only on a terminal: a log file gets plain text.
fn colours() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(text: &str) -> Targets {
        text.parse().unwrap()
    }

    #[test]
    fn the_union_lets_through_what_either_filter_does_and_nothing_else() {
        let a = filter("warn,weir_host::pipeline::restore=info");
        let b = filter("error,weir_host=debug,weir_host::router=warn");
        let either = union(&a, &b);
        let targets = [
            "rdkafka",
            "weir_host",
            "weir_host::pipeline",
            "weir_host::pipeline::restore",
            "weir_host::router",
            "weir_host::routerless",
        ];
        for target in targets {
            for level in [Level::TRACE, Level::DEBUG, Level::INFO, Level::WARN, Level::ERROR] {
                let expected = a.would_enable(target, &level) || b.would_enable(target, &level);
                assert_eq!(either.would_enable(target, &level), expected, "{target} at {level}");
            }
        }
    }

    #[test]
    fn the_level_for_a_target_is_its_most_verbose_enabled_one() {
        let a = filter("warn,weir_host=debug");
        assert_eq!(level_for(&a, "weir_host::sink"), LevelFilter::DEBUG);
        assert_eq!(level_for(&a, "rdkafka"), LevelFilter::WARN);
        assert_eq!(level_for(&filter("weir_host=info"), "rdkafka"), LevelFilter::OFF);
    }
}

/// A warning that may repeat many times a second (a fetch failing while a
/// broker is down), logged at most once per [`Throttle::EVERY`] with how
/// many were held back since.
#[derive(Debug, Default)]
pub struct Throttle {
    last: Option<std::time::Instant>,
    held: u64,
}

impl Throttle {
    /// The least time between two lines.
    pub const EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    /// Whether to log at `now`; if so, how many were held back before it.
    pub fn pass(&mut self, now: std::time::Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < Self::EVERY => {
                self.held += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

#[cfg(test)]
mod throttle_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn repeats_within_the_interval_are_held_back_and_counted() {
        let mut throttle = Throttle::default();
        let start = Instant::now();
        assert_eq!(throttle.pass(start), Some(0));
        for i in 1..=25 {
            assert_eq!(throttle.pass(start + Duration::from_millis(40 * i)), None);
        }
        assert_eq!(throttle.pass(start + Throttle::EVERY), Some(25), "one line with the count");
        assert_eq!(throttle.pass(start + Throttle::EVERY + Duration::from_millis(1)), None);
    }
}
