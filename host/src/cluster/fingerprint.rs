//! A plan's identity: a SHA-256 over what every unit runs, so that workers
//! of one pipeline can tell whether they run the same plan (see
//! `docs/cluster.md`, "One plan per group").
//!
//! The fingerprint covers the units in units-topic order (name, role, and
//! the spec each runs as planned: every node, window, watermark,
//! checkpoint and sink setting), every function by the SHA-256 of its
//! content (never its path: each machine has its own copy of the files),
//! `max_parallelism` and the Weir version. It leaves out only what says
//! how to reach Kafka — `bootstrap_servers` and client `properties` (one
//! cluster may be reached by other addresses or credentials from each
//! machine) — and where the `resources` directory is (not its contents).
//! Reordering a source's `topics` changes nothing: units are named and
//! ordered by the partitions they read.
//!
//! Besides the digest, a fingerprint keeps its **parts** (a short digest
//! per node and per function, `max_parallelism`, the units, the other
//! settings), so that two fingerprints that differ can say where.
//!
//! This module only computes; [`super::admission`] compares and records.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::plan::{graph_nodes, refused};
use super::{ClusterPlan, PlanError};
use crate::connectors::{SinkSpec, SourceSpec};
use crate::specification::{FunctionSpec, NodeSpec, PipelineSpec};

/// The Weir version, part of every fingerprint: workers of two versions
/// may disagree on formats (exchange records, checkpoints) even for one
/// spec.
const WEIR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A plan's identity, and what it is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Hex SHA-256 over the canonical form of every unit, the function
    /// contents, `max_parallelism` and the Weir version.
    pub digest: String,
    /// Its parts, by name: `weir`, `max_parallelism`, `units`, `settings`,
    /// `node <name>` (a short digest of the node as the spec gives it, its
    /// functions by content) and `function <node>.<field>` (`sha256:…`,
    /// `native:…` or `stored:<name>@<version>`).
    pub parts: BTreeMap<String, String>,
}

impl Fingerprint {
    /// The first 12 hex digits of the digest, for messages.
    pub fn short(&self) -> &str {
        &self.digest[..self.digest.len().min(12)]
    }

    /// What differs between this fingerprint (`here`) and `other` (`there`),
    /// one phrase per part; empty when only the digest says so (then the
    /// units' specs differ in a setting the parts do not name).
    pub fn differences(&self, other: &Fingerprint, here: &str, there: &str) -> Vec<String> {
        let mut names: Vec<&String> = self.parts.keys().chain(other.parts.keys()).collect();
        names.sort();
        names.dedup();
        // A node whose function differs differs too: name the function only.
        let function_differs = |node: &str| {
            names.iter().any(|name| {
                name.strip_prefix("function ").is_some_and(|f| f.starts_with(&format!("{node}.")))
                    && self.parts.get(*name) != other.parts.get(*name)
            })
        };
        let mut found = Vec::new();
        for name in &names {
            let (ours, theirs) = (self.parts.get(*name), other.parts.get(*name));
            if ours == theirs {
                continue;
            }
            if let Some(node) = name.strip_prefix("node ") {
                if ours.is_some() && theirs.is_some() && function_differs(node) {
                    continue;
                }
            }
            found.push(match (ours, theirs) {
                (Some(ours), Some(theirs)) => format!("{name}: {ours} {here}, {theirs} {there}"),
                (Some(_), None) => format!("{name}: only {here}"),
                (None, Some(_)) => format!("{name}: only {there}"),
                (None, None) => continue,
            });
        }
        found
    }
}

/// The content digest (hex SHA-256) of a function file.
pub type FunctionDigests<'a> = &'a dyn Fn(&Path) -> Result<String, PlanError>;

/// Read the function file at `path` and digest it.
pub fn file_digest(path: &Path) -> Result<String, PlanError> {
    let bytes = std::fs::read(path).map_err(|e| {
        refused(
            "wasm",
            format!("function file {}: {e} (every worker needs its own copy)", path.display()),
        )
    })?;
    Ok(crate::runtime::loader::digest(&bytes))
}

/// The fingerprint of `plan`, each function file digested by `digests`.
pub fn fingerprint(
    plan: &ClusterPlan,
    digests: FunctionDigests<'_>,
) -> Result<Fingerprint, PlanError> {
    let mut functions = Functions { digests, known: BTreeMap::new() };
    let mut hasher = Sha256::new();
    hasher.update(format!("weir {WEIR_VERSION}\nmax_parallelism {}\n", plan.spec.max_parallelism));
    let mut names = Sha256::new();
    for unit in &plan.units {
        let canonical = canonical_spec(&unit.spec, &mut functions)?;
        hasher.update(format!("unit {} {:?}\n{canonical}\n", unit.name, unit.role));
        names.update(format!("{}\n", unit.name));
    }
    let mut parts = BTreeMap::from([
        ("weir".to_string(), WEIR_VERSION.to_string()),
        ("max_parallelism".to_string(), plan.spec.max_parallelism.to_string()),
        ("units".to_string(), format!("{} ({})", plan.units.len(), short(&names.finalize()))),
    ]);
    let mut settings = plan.spec.clone();
    settings.source = None;
    settings.key = None;
    settings.process = None;
    settings.window = None;
    settings.aggregate = None;
    settings.window_process = None;
    settings.sink = None;
    settings.side_outputs = BTreeMap::new();
    settings.operators = BTreeMap::new();
    // A part of its own.
    settings.max_parallelism = 0;
    let settings = canonical_spec(&settings, &mut functions)?;
    parts.insert("settings".to_string(), short(&Sha256::digest(settings.as_bytes())));
    for (name, node) in graph_nodes(&plan.spec)? {
        let mut node = node.clone();
        for (field, function) in node.functions_mut() {
            let identity = functions.identity(function)?;
            parts.insert(format!("function {name}.{field}"), abbreviated(&identity));
            function.wasm = Some(PathBuf::from(identity));
        }
        strip_connection(&mut node);
        parts
            .insert(format!("node {name}"), short(&Sha256::digest(format!("{node:?}").as_bytes())));
    }
    // Every unit's spec is in the digest; the parts only help to say where.
    let digest = hex::encode(hasher.finalize());
    Ok(Fingerprint { digest, parts })
}

/// Function identities, each file digested once.
struct Functions<'a> {
    digests: FunctionDigests<'a>,
    known: BTreeMap<PathBuf, String>,
}

impl Functions<'_> {
    /// `sha256:<hex>` of a function file, `native:<name>`, or
    /// `stored:<name>@<version>`.
    fn identity(&mut self, function: &FunctionSpec) -> Result<String, PlanError> {
        if let Some(path) = &function.wasm {
            if let Some(known) = self.known.get(path) {
                return Ok(known.clone());
            }
            let identity = format!("sha256:{}", (self.digests)(path)?);
            self.known.insert(path.clone(), identity.clone());
            return Ok(identity);
        }
        if let Some(native) = &function.native {
            return Ok(format!("native:{native}"));
        }
        let version = function.version.map_or("newest".to_string(), |v| v.to_string());
        Ok(format!("stored:{}@{version}", function.function.as_deref().unwrap_or("")))
    }
}

/// `spec` with each function by its identity, no Kafka connection
/// settings and no resources path, written out (`Debug`: every field, maps
/// in key order).
fn canonical_spec(spec: &PipelineSpec, functions: &mut Functions<'_>) -> Result<String, PlanError> {
    let mut spec = spec.clone();
    for (_, function) in spec.functions_mut() {
        let identity = functions.identity(function)?;
        function.wasm = Some(PathBuf::from(identity));
    }
    if spec.resources.is_some() {
        spec.resources = Some(PathBuf::from("<resources>"));
    }
    for node in spec.operators.values_mut() {
        strip_connection(node);
    }
    if let Some(SourceSpec::Kafka(config)) = &mut spec.source {
        config.bootstrap_servers.clear();
        config.properties.clear();
    }
    for sink in spec.sink.iter_mut().chain(spec.side_outputs.values_mut()) {
        if let SinkSpec::Kafka(config) = sink {
            config.bootstrap_servers.clear();
            config.properties.clear();
        }
    }
    let mut text = String::new();
    let _ = write!(text, "{spec:?}");
    Ok(text)
}

/// Clear how `node`'s Kafka source or sink reaches the broker; its
/// source's topics in name order (their order is no part of the plan).
fn strip_connection(node: &mut NodeSpec) {
    if let Some(SourceSpec::Kafka(config)) = &mut node.source {
        config.bootstrap_servers.clear();
        config.properties.clear();
        config.topics.sort();
    }
    if let Some(SinkSpec::Kafka(config)) = &mut node.sink {
        config.bootstrap_servers.clear();
        config.properties.clear();
    }
}

/// The first 8 hex digits of a digest.
fn short(digest: &[u8]) -> String {
    hex::encode(&digest[..4])
}

/// A function identity with its digest cut to 12 hex digits.
fn abbreviated(identity: &str) -> String {
    match identity.strip_prefix("sha256:") {
        Some(hex) => format!("sha256:{}", &hex[..hex.len().min(12)]),
        None => identity.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::plan;
    use crate::connectors::kafka::KafkaSourceConfig;

    const OUT: &str = "{ type: kafka, bootstrap_servers: 'b:9092', topic: out, delivery: exactly-once, transactional_id_prefix: rev }";

    /// A line spec reading `topics`, with `extra` lines and the key
    /// function in file `key`.
    fn spec(topics: &str, key: &str, extra: &str) -> PipelineSpec {
        PipelineSpec::parse(&format!(
            "name: rev\nparallelism: 2\n{extra}checkpoint: {{ interval: 1s, storage: 's3://b/c' }}\nsource: {{ type: kafka, bootstrap_servers: 'b:9092', topics: {topics} }}\nkey: {{ wasm: {key} }}\nprocess: {{ wasm: p.wasm }}\nsink: {OUT}\n"
        ))
        .unwrap()
    }

    /// Each topic has two partitions.
    fn two(config: &KafkaSourceConfig) -> Result<Vec<(String, i32)>, PlanError> {
        Ok(config.topics.iter().flat_map(|t| (0..2).map(move |p| (t.clone(), p))).collect())
    }

    /// Files' "contents": `k.wasm` and its copy `copy-k.wasm` are the same
    /// function, `k2.wasm` another.
    fn contents(path: &Path) -> Result<String, PlanError> {
        let name = path.file_name().unwrap().to_str().unwrap();
        Ok(hex::encode(Sha256::digest(name.trim_start_matches("copy-").as_bytes())))
    }

    fn of(spec: &PipelineSpec) -> Fingerprint {
        fingerprint(&plan(spec, &two).unwrap(), &contents).unwrap()
    }

    #[test]
    fn the_fingerprint_ignores_topic_order_function_paths_and_broker_addresses() {
        let base = of(&spec("[a, b]", "k.wasm", ""));
        assert_eq!(base.digest.len(), 64);
        assert_eq!(base, of(&spec("[a, b]", "k.wasm", "")), "stable");
        assert_eq!(base, of(&spec("[b, a]", "k.wasm", "")), "topics reordered");
        assert_eq!(base, of(&spec("[a, b]", "copy-k.wasm", "")), "the same function elsewhere");
        let mut other_address = spec("[a, b]", "k.wasm", "");
        if let Some(SourceSpec::Kafka(config)) = &mut other_address.source {
            config.bootstrap_servers = "10.0.0.7:9092".into();
            config.properties.insert("sasl.password".into(), "secret".into());
        }
        assert_eq!(base, of(&other_address), "the broker reached another way");
    }

    #[test]
    fn the_fingerprint_changes_with_a_function_max_parallelism_or_a_node_and_says_which() {
        let base = of(&spec("[a]", "k.wasm", ""));

        let key = of(&spec("[a]", "k2.wasm", ""));
        assert_ne!(base.digest, key.digest, "another key function");
        let said = key.differences(&base, "here", "there");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("function keyed.key: sha256:"), "{said:?}");
        assert!(said[0].contains("here") && said[0].contains("there"), "{said:?}");

        let wider = of(&spec("[a]", "k.wasm", "max_parallelism: 64\n"));
        assert_ne!(base.digest, wider.digest, "another max_parallelism");
        assert_eq!(
            wider.differences(&base, "here", "there"),
            ["max_parallelism: 64 here, 128 there"]
        );

        let window = of(&spec("[a]", "k.wasm", "watermark: { max_out_of_orderness: 9s }\n"));
        assert_ne!(base.digest, window.digest, "another watermark setting");
        assert_eq!(window.differences(&base, "here", "there").len(), 1);

        let mut wider_stage = spec("[a]", "k.wasm", "");
        wider_stage.parallelism = 3;
        let more = of(&wider_stage);
        assert_ne!(base.digest, more.digest, "another parallelism");
        assert!(more.differences(&base, "here", "there").iter().any(|d| d.starts_with("units: ")));
    }

    #[test]
    fn renaming_a_node_changes_the_fingerprint_and_names_both() {
        let graph = |stage: &str| {
            let text = format!(
                "name: g\nparallelism: 2\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\noperators:\n  orders: {{ source: {{ type: kafka, bootstrap_servers: 'b:9092', topics: [a] }} }}\n  {stage}: {{ inputs: [orders], key: {{ wasm: k.wasm }}, process: {{ wasm: p.wasm }}, uid: revenue }}\n  out: {{ inputs: [{stage}], sink: {OUT} }}\n"
            );
            of(&PipelineSpec::parse(&text).unwrap())
        };
        let (before, after) = (graph("revenue"), graph("totals"));
        assert_ne!(before.digest, after.digest);
        let said = after.differences(&before, "here", "there");
        assert!(said.contains(&"node totals: only here".to_string()), "{said:?}");
        assert!(said.contains(&"node revenue: only there".to_string()), "{said:?}");
    }
}
