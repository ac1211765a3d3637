//! The one validator of a spec: [`PipelineSpec::validate`] checks what
//! the types cannot across the whole spec (names, functions, parallelism,
//! side outputs declared, …) on the graph the spec lowers to, and asks
//! each section's owner for the rest: connectors check their own settings
//! ([`crate::connectors::registry`]), checkpoint settings theirs.

use super::graph::StageKind;
use std::time::Duration;

use super::parts::{OnError, SpecError};
use super::pipeline::PipelineSpec;
use crate::connectors::SinkRole;
use crate::names::{is_valid_name, NAME_RULE};

impl PipelineSpec {
    /// Check what the types cannot.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !is_valid_name(&self.name) {
            return Err(SpecError::field("name", format!("{:?} must be {NAME_RULE}", self.name)));
        }
        for (field, function) in self.functions() {
            match (&function.wasm, &function.function, &function.native) {
                (_, None, _) if function.version.is_some() => return Err(SpecError::field(&format!("{field}.version"), "a version goes with `function`")),
                (Some(_), None, None) | (None, None, Some(_)) => {}
                (None, Some(name), None) if !is_valid_name(name) => return Err(SpecError::field(&format!("{field}.function"), format!("{name:?} is not a function name ({NAME_RULE})"))),
                (None, Some(_), None) => {}
                _ => return Err(SpecError::field(&field, "give one of `wasm` (a file), `function` (a stored function's name) or `native` (a built-in)")),
            }
        }
        if let Some((name, spec)) = self.state_ttl.iter().find(|(_, spec)| spec.to_ttl().is_none())
        {
            return Err(SpecError::field(
                &format!("state_ttl.{name}.ttl"),
                format!("{} is less than 1ms", humantime::format_duration(spec.ttl)),
            ));
        }
        if self.operators.is_empty() {
            self.validate_line()?;
        } else {
            let line = [
                ("source", self.source.is_some()),
                ("key", self.key.is_some()),
                ("process", self.process.is_some()),
                ("window", self.window.is_some()),
                ("aggregate", self.aggregate.is_some()),
                ("window_process", self.window_process.is_some()),
                ("sink", self.sink.is_some()),
                ("side_outputs", !self.side_outputs.is_empty()),
            ];
            if let Some((field, _)) = line.iter().find(|(_, present)| *present) {
                return Err(SpecError::field(field, "a spec with `operators:` says it there (a node with `source:`, `sink:`, `process:`, …)"));
            }
            let graph = self.graph()?;
            if let (OnError::DeadLetter(_), Some(stage)) = (
                &self.on_error,
                graph.stages.iter().find(|s| !matches!(s.kind, StageKind::Process(_))),
            ) {
                return Err(SpecError::field(
                    "on_error",
                    format!(
                        "dead-letter works with process functions; {:?} is not one",
                        stage.name
                    ),
                ));
            }
            let exactly_once = graph.transactional_sinks().count();
            if exactly_once > 1 {
                return Err(SpecError::field(
                    "operators",
                    "at most one sink can be an exactly-once Kafka sink",
                ));
            }
        }
        if let Some(watermark) = self.watermark.as_ref().filter(|w| w.delay_ms().is_none()) {
            return Err(SpecError::field(
                "watermark.max_out_of_orderness",
                format!("{:?} is too long", watermark.max_out_of_orderness),
            ));
        }
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint
                .validate()
                .map_err(|e| SpecError::field(&format!("checkpoint.{}", e.field), e.message))?;
        }
        let ingest_interval = self.cluster.as_ref().and_then(|c| c.ingest_interval);
        if ingest_interval.is_some_and(|i| i < crate::checkpoint::MIN_INTERVAL) {
            return Err(SpecError::field("cluster.ingest_interval", "must be at least 10ms"));
        }
        self.limits.to_limits()?;
        self.restart_strategy()?;
        if !(1..=32768).contains(&self.max_parallelism) {
            return Err(SpecError::field("max_parallelism", "must be between 1 and 32768"));
        }
        if self.parallelism == 0 || self.parallelism > self.max_parallelism {
            return Err(SpecError::field(
                "parallelism",
                format!("must be between 1 and max_parallelism ({})", self.max_parallelism),
            ));
        }
        if !(1..=1_000_000).contains(&self.batch_size) {
            return Err(SpecError::field("batch_size", "must be between 1 and 1000000"));
        }
        if self.batch_linger > Duration::from_secs(1) {
            return Err(SpecError::field("batch_linger", "must be at most 1s"));
        }
        Ok(())
    }

    /// The checks of a line spec (source → key → keyed function → sink).
    fn validate_line(&self) -> Result<(), SpecError> {
        let missing = |field: &str| {
            SpecError::field(field, "missing field (a line spec needs source, key, process or window, and sink; a graph gives `operators:`)")
        };
        let (Some(source), Some(_), Some(sink)) = (&self.source, &self.key, &self.sink) else {
            let field = [("source", self.source.is_none()), ("key", self.key.is_none())]
                .into_iter()
                .find(|(_, absent)| *absent)
                .map_or("sink", |(field, _)| field);
            return Err(missing(field));
        };
        let window_function = match (&self.aggregate, &self.window_process) {
            (Some(_), Some(_)) => {
                return Err(SpecError::field(
                    "window_process",
                    "give either `aggregate` or `window_process`, not both",
                ))
            }
            (aggregate, process) => aggregate.as_ref().or(process.as_ref()),
        };
        match (&self.process, &self.window, window_function) {
            (Some(_), None, None) => {}
            (None, Some(window), Some(_)) => {
                window.assigner()?;
                window.allowed_lateness()?;
                if let Some(name) =
                    window.late_output.as_ref().filter(|n| !self.side_outputs.contains_key(*n))
                {
                    return Err(SpecError::field(
                        "window.late_output",
                        format!("side output {name:?} is not declared in side_outputs"),
                    ));
                }
            }
            (None, None, None) => {
                return Err(SpecError::field(
                    "process",
                    "give a process function, or a window and an aggregate function",
                ))
            }
            (Some(_), _, _) => return Err(SpecError::field(
                "process",
                "a pipeline has either a process function or a window with an aggregate, not both",
            )),
            (None, None, Some(_)) => {
                return Err(SpecError::field("window", "an aggregate function needs a window"))
            }
            (None, Some(_), None) => {
                return Err(SpecError::field(
                    "aggregate",
                    "a window needs an aggregate (or window_process) function",
                ))
            }
        }
        let source = source.config();
        source.validate().map_err(|e| SpecError::connector("source", e))?;
        for (field, name) in source.side_outputs() {
            if !self.side_outputs.contains_key(name) {
                return Err(SpecError::field(
                    &format!("source.{field}"),
                    format!("side output {name:?} is not declared in side_outputs"),
                ));
            }
        }
        sink.config().validate(SinkRole::Main).map_err(|e| SpecError::connector("sink", e))?;
        for (name, sink) in &self.side_outputs {
            sink.config()
                .validate(SinkRole::SideOutput)
                .map_err(|e| SpecError::connector(&format!("side_outputs.{name}"), e))?;
        }
        if let Some(bad) = self.side_outputs.keys().find(|name| !is_valid_name(name)) {
            return Err(SpecError::field("side_outputs", format!("{bad:?} must be {NAME_RULE}")));
        }
        if let OnError::DeadLetter(name) = &self.on_error {
            if !self.side_outputs.contains_key(name) {
                return Err(SpecError::field(
                    "on_error.dead-letter",
                    format!("side output {name:?} is not declared in side_outputs"),
                ));
            }
            if self.process.is_none() {
                return Err(SpecError::field(
                    "on_error",
                    "dead-letter works with a process function; window pipelines use `fail`",
                ));
            }
        }
        if !is_valid_name(&self.operator_uid()) {
            return Err(SpecError::field(
                "uid",
                format!("{:?} must be {NAME_RULE}", self.operator_uid()),
            ));
        }
        Ok(())
    }
}
