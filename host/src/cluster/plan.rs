//! The cluster plan: a pipeline cut at its keyed exchanges into **units**,
//! each an ordinary pipeline run with its own checkpoints and its own
//! exactly-once Kafka sink (see `docs/cluster.md`).
//!
//! * An **ingest unit** per partition of each Kafka source: the source
//!   (that partition only), the transforms chained after it, its sinks,
//!   and per keyed stage it feeds an exchange sink that runs the stage's
//!   key function and writes each record to the partition of the task
//!   owning its key's group.
//! * A **task** per subtask of each keyed stage: its partition of each of
//!   the stage's exchange topics, the stage (parallelism 1, the key groups
//!   of that task), what is chained after it, and its sinks or exchanges
//!   to the next stages.
//!
//! The plan is pure: it reads no broker (the input partitions are given)
//! and touches nothing; [`super::topics`] creates what it names.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::connectors::kafka::exchange::{ExchangeInput, ExchangeOutput};
use crate::connectors::kafka::{
    Delivery, DrainedRecord, KafkaSinkConfig, KafkaSourceConfig, MarkerPlace,
};
use crate::connectors::{SinkSpec, SourceSpec};
use crate::names::is_valid_name;
use crate::specification::cluster::ClusterSettings;
use crate::specification::FunctionSpec;
use crate::specification::{InputSpec, NodeSpec};
use crate::specification::{PipelineSpec, SpecError};

/// Prefix of every node name a plan adds to a unit's graph.
const OURS: &str = "weir-";

/// What one worker-shared pipeline consists of.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// The pipeline's name.
    pub pipeline: String,
    /// Its units, in the order of the units topic's partitions: the first
    /// unit of each source and stage (sources, then stages, each in name
    /// order), then the second of each, and so on.
    pub units: Vec<Unit>,
    /// The exchange topics the units write and read.
    pub exchanges: Vec<ExchangeTopic>,
    /// The topic whose partitions stand for the units (one each).
    pub units_topic: String,
    /// The consumer group of the pipeline's workers.
    pub group: String,
    /// The brokers of the exchange and units topics (the first source's).
    pub bootstrap_servers: String,
    /// Client properties for them (the first source's).
    pub properties: BTreeMap<String, String>,
    /// The spec's `cluster:` settings.
    pub settings: ClusterSettings,
    /// Each Kafka source read by ingest units: its node, its config as the
    /// spec gives it, and the partitions the plan has units for (sorted) —
    /// what a worker compares the input topics with while it runs.
    pub inputs: Vec<PlannedInput>,
    /// The spec it was planned from (its identity, with the units':
    /// [`super::fingerprint`]).
    pub spec: PipelineSpec,
}

/// A Kafka source as the plan cut it into ingest units.
#[derive(Debug, Clone)]
pub struct PlannedInput {
    /// The source node.
    pub source: String,
    /// Its config, as the spec gives it.
    pub config: KafkaSourceConfig,
    /// The `(topic, partition)`s it has ingest units for, sorted.
    pub partitions: Vec<(String, i32)>,
}

/// One unit: a pipeline run some worker owns.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Its name (also its pipeline name and its checkpoints' directory).
    pub name: String,
    /// What it does.
    pub role: UnitRole,
    /// The pipeline it runs.
    pub spec: PipelineSpec,
}

/// What a unit does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitRole {
    /// Reads partition `partition` of `topic` for source node `source`.
    Ingest {
        /// The source node.
        source: String,
        /// The input topic.
        topic: String,
        /// Its partition.
        partition: i32,
    },
    /// Task `task` of keyed stage `stage`.
    Task {
        /// The stage.
        stage: String,
        /// The task (its partition of the stage's exchange topics).
        task: u16,
    },
}

impl Unit {
    /// Whether it reads an exchange topic (a task fed by other units),
    /// rather than only its input.
    pub fn reads_exchange(&self) -> bool {
        self.spec
            .operators
            .values()
            .any(|node| matches!(&node.source, Some(SourceSpec::Kafka(c)) if c.exchange.is_some()))
    }
}

impl UnitRole {
    /// `ingest` or `task`, for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            UnitRole::Ingest { .. } => "ingest",
            UnitRole::Task { .. } => "task",
        }
    }
}

/// An exchange topic: one partition per task of the stage it feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeTopic {
    /// Its name.
    pub name: String,
    /// Its partitions.
    pub partitions: u16,
}

/// Why a spec cannot run on workers.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The spec itself is wrong.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The spec is fine for one process but not for workers.
    #[error("{field}: {message}")]
    Refused {
        /// The field at fault.
        field: String,
        /// Why, and what to do.
        message: String,
    },
    /// The input topics could not be read.
    #[error("reading the input topics: {0}")]
    Input(String),
}

pub(super) fn refused(field: &str, message: impl Into<String>) -> PlanError {
    PlanError::Refused { field: field.to_string(), message: message.into() }
}

/// The partitions `(topic, partition)` a Kafka source reads.
pub type InputPartitions<'a> =
    &'a dyn Fn(&KafkaSourceConfig) -> Result<Vec<(String, i32)>, PlanError>;

/// The partitions a Kafka source reads now, asking its brokers: the
/// [`InputPartitions`] of every plan made for running it.
pub fn broker_partitions(config: &KafkaSourceConfig) -> Result<Vec<(String, i32)>, PlanError> {
    config.partitions().map_err(|e| PlanError::Input(e.to_string()))
}

/// Cut `spec` into units; `partitions` says which partitions each Kafka
/// source reads.
pub fn plan(
    spec: &PipelineSpec,
    partitions: InputPartitions<'_>,
) -> Result<ClusterPlan, PlanError> {
    spec.validate()?;
    let checkpoint = spec.checkpoint.as_ref().ok_or_else(|| {
        refused(
            "checkpoint",
            "cluster mode needs checkpoints: set checkpoint.interval and checkpoint.storage",
        )
    })?;
    if checkpoint.storage.is_none() {
        return Err(refused(
            "checkpoint.storage",
            "missing: every worker must reach every unit's checkpoints (s3://bucket/prefix, or a file:// directory all workers mount)",
        ));
    }
    let graph = Operators::of(spec)?;
    let first = graph.first_source()?;
    let mut planner = Planner {
        spec,
        graph: &graph,
        bootstrap: first.bootstrap_servers.clone(),
        properties: first.properties.clone(),
        units: Vec::new(),
        producers: BTreeMap::new(),
        direct: BTreeMap::new(),
    };
    let settings = spec.cluster.clone().unwrap_or_default();
    // Producers of each exchange, in unit order, before any unit is built.
    let mut roots: Vec<(String, Vec<(String, UnitRole)>)> = Vec::new();
    let mut inputs = Vec::new();
    for (name, config) in graph.sources() {
        let mut found = partitions(config)?;
        if found.is_empty() {
            return Err(refused(&graph.at(name, "source"), "reads no partition"));
        }
        if settings.input_partitioned_by_key {
            let topic = graph.direct_input(name, &found)?;
            planner.direct.insert(name.clone(), (config.clone(), topic));
            continue;
        }
        // In (topic, partition) order, whatever the order of `topics`.
        found.sort();
        found.dedup();
        let one_topic = config.topic_pattern.is_none() && config.topics.len() == 1;
        let roles = found
            .iter()
            .map(|(topic, partition)| {
                let unit = ingest_unit_name(&spec.name, name, one_topic, topic, *partition)?;
                let role = UnitRole::Ingest {
                    source: name.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                Ok((unit, role))
            })
            .collect::<Result<_, PlanError>>()?;
        roots.push((name.clone(), roles));
        inputs.push(PlannedInput {
            source: name.clone(),
            config: config.clone(),
            partitions: found,
        });
    }
    for (name, parallelism) in graph.stages() {
        let roles = (0..parallelism)
            .map(|task| {
                Ok((
                    unit_name(&spec.name, &name, &layered(&task.to_string(), settings.layout))?,
                    UnitRole::Task { stage: name.clone(), task },
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        roots.push((name.clone(), roles));
    }
    for (root, roles) in &roots {
        for (unit, _) in roles {
            for edge in graph.exchanges_from(root) {
                planner.producers.entry(edge).or_default().push(unit.clone());
            }
        }
    }
    let mut numbered = Vec::new();
    for (root, roles) in roots {
        for (index, (name, role)) in roles.into_iter().enumerate() {
            let unit_spec = planner.unit(&name, &root, &role)?;
            unit_spec.validate().map_err(|e| refused(&format!("unit {name}"), e.to_string()))?;
            numbered.push((index, Unit { name, role, spec: unit_spec }));
        }
    }
    // Unit i of every root, then unit i + 1 …: the assignor hands out
    // ranges of the units topic, and this way each range mixes ingest
    // units and the tasks of every stage.
    numbered.sort_by_key(|(index, _)| *index);
    planner.units = numbered.into_iter().map(|(_, unit)| unit).collect();
    let units_topic = layered(&format!("weir-{}-units", spec.name), settings.layout);
    for (partition, unit) in planner.units.iter_mut().enumerate() {
        // A drained stop says so in the unit's partition of the units topic.
        let transactional =
            unit.spec.operators.values_mut().find_map(|node| match &mut node.sink {
                Some(SinkSpec::Kafka(c)) if c.delivery == Delivery::ExactlyOnce => Some(c),
                _ => None,
            });
        if let Some(config) = transactional {
            config.drained = Some(Box::new(DrainedRecord {
                topic: units_topic.clone(),
                partition: i32::try_from(partition).unwrap_or(i32::MAX),
                unit: unit.name.clone(),
            }));
            // An ingest unit outlives the layout's exchange topics: its
            // commit marker lives on its input (where it was before, read
            // when that holds none yet).
            if let UnitRole::Ingest { topic, .. } = &unit.role {
                let reads_here = inputs.iter().any(|i| {
                    i.config.bootstrap_servers == config.bootstrap_servers
                        && i.partitions.iter().any(|(t, _)| t == topic)
                });
                if reads_here {
                    let first = config.topic.strip_suffix(&layered("", settings.layout));
                    config.marker = Some(Box::new(MarkerPlace {
                        topic: topic.clone(),
                        fallback: Some(first.unwrap_or(&config.topic).to_string()),
                    }));
                }
            }
        }
    }
    let mut exchanges = Vec::new();
    for (stage, parallelism) in graph.stages() {
        for port in graph.ports(&stage) {
            if !planner.direct.contains_key(&graph.input(&stage, port).from) {
                let name = exchange_topic(&spec.name, &stage, port, settings.layout);
                exchanges.push(ExchangeTopic { name, partitions: parallelism });
            }
        }
    }
    Ok(ClusterPlan {
        pipeline: spec.name.clone(),
        units: planner.units,
        exchanges,
        units_topic,
        group: format!("weir-{}-workers", spec.name),
        bootstrap_servers: planner.bootstrap,
        properties: planner.properties,
        settings,
        inputs,
        spec: spec.clone(),
    })
}

/// The nodes of `spec` as a graph (a line spec as the graph of its
/// `source`, `keyed` and `sink` nodes), by name.
pub(super) fn graph_nodes(spec: &PipelineSpec) -> Result<BTreeMap<String, NodeSpec>, PlanError> {
    Ok(Operators::of(spec)?.nodes)
}

/// The name of the ingest unit reading `partition` of `topic` for source
/// `source`: named by what it reads, never by a position in a list, so
/// that reordering the source's topics or adding partitions leaves every
/// unit its own checkpoints. A source of one topic names the partition
/// (`<pipeline>-<source>-<partition>`); a source of several topics, or of
/// a pattern, also a digest of the topic's name (topic names may hold
/// characters unit names may not): `<pipeline>-<source>-t<8 hex>-<partition>`.
fn ingest_unit_name(
    pipeline: &str,
    source: &str,
    one_topic: bool,
    topic: &str,
    partition: i32,
) -> Result<String, PlanError> {
    if one_topic {
        return unit_name(pipeline, source, &partition.to_string());
    }
    let digest = Sha256::digest(topic.as_bytes());
    let token = hex::encode(&digest[..4]);
    unit_name(pipeline, source, &format!("t{token}-{partition}"))
}

/// The name of unit `which` of root node `root`.
fn unit_name(pipeline: &str, root: &str, which: &str) -> Result<String, PlanError> {
    let name = format!("{pipeline}-{root}-{which}");
    // Room for the `weir-` of its transactional ids.
    if !is_valid_name(&name) || name.len() + OURS.len() > 63 {
        return Err(refused(
            "name",
            format!("unit name {name:?} is too long: shorten the pipeline's or the node's name (at most 57 characters together)"),
        ));
    }
    Ok(name)
}

/// The exchange topic of input `port` of stage `stage` in layout `layout`.
fn exchange_topic(pipeline: &str, stage: &str, port: Port, layout: u64) -> String {
    layered(&format!("weir-{pipeline}-{stage}-{}", port.suffix()), layout)
}

/// `name` as layout `layout` names it: itself in the first layout, with
/// `-r<layout>` after it in later ones (see [`ClusterSettings::layout`]).
fn layered(name: &str, layout: u64) -> String {
    match layout {
        0 => name.to_string(),
        layout => format!("{name}-r{layout}"),
    }
}

/// An input of a keyed stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Port {
    /// Its keyed input `j` (of `inputs:`).
    Keyed(usize),
    /// Its broadcast input `j` (of `broadcast:`).
    Broadcast(usize),
}

impl Port {
    /// How its exchange topic and nodes are told apart: `j`, or `b<j>`.
    fn suffix(self) -> String {
        match self {
            Port::Keyed(j) => j.to_string(),
            Port::Broadcast(j) => format!("b{j}"),
        }
    }
}

/// An input of a stage: (stage, port).
type Edge = (String, Port);

/// The spec as a graph of nodes (a line spec as the graph it stands for).
struct Operators {
    nodes: BTreeMap<String, NodeSpec>,
    /// A line spec (its fields have no `operators.` path).
    line: bool,
    /// The pipeline's default parallelism.
    parallelism: u16,
}

/// Node names of a line spec's graph.
const LINE_SOURCE: &str = "source";
const LINE_STAGE: &str = "keyed";
const LINE_SINK: &str = "sink";

impl Operators {
    fn of(spec: &PipelineSpec) -> Result<Self, PlanError> {
        if !spec.operators.is_empty() {
            let nodes = spec.operators.clone();
            return Ok(Self { nodes, line: false, parallelism: spec.parallelism });
        }
        if !spec.side_outputs.is_empty() {
            return Err(refused(
                "side_outputs",
                "not in cluster mode for a line spec: write the pipeline as a graph (operators:) with a Kafka sink node per side output",
            ));
        }
        let stage = NodeSpec {
            inputs: vec![input(LINE_SOURCE)],
            key: spec.key.clone(),
            process: spec.process.clone(),
            window: spec.window.clone(),
            aggregate: spec.aggregate.clone(),
            window_process: spec.window_process.clone(),
            uid: Some(spec.operator_uid()),
            ..NodeSpec::default()
        };
        let nodes = BTreeMap::from([
            (
                LINE_SOURCE.to_string(),
                NodeSpec { source: spec.source.clone(), ..Default::default() },
            ),
            (LINE_STAGE.to_string(), stage),
            (
                LINE_SINK.to_string(),
                NodeSpec {
                    inputs: vec![input(LINE_STAGE)],
                    sink: spec.sink.clone(),
                    ..Default::default()
                },
            ),
        ]);
        Ok(Self { nodes, line: true, parallelism: spec.parallelism })
    }

    /// Where a field of node `name` is in the spec.
    fn at(&self, name: &str, field: &str) -> String {
        match (self.line, field) {
            (true, "") => name.to_string(),
            (true, field) => field.to_string(),
            (false, "") => format!("operators.{name}"),
            (false, field) => format!("operators.{name}.{field}"),
        }
    }

    fn is_stage(node: &NodeSpec) -> bool {
        node.process.is_some()
            || node.co_process.is_some()
            || node.window.is_some()
            || node.join.is_some()
    }

    /// The Kafka sources, by node name; any other source is refused.
    fn sources(&self) -> Vec<(&String, &KafkaSourceConfig)> {
        self.nodes
            .iter()
            .filter_map(|(name, node)| match &node.source {
                Some(SourceSpec::Kafka(config)) => Some((name, config)),
                _ => None,
            })
            .collect()
    }

    fn first_source(&self) -> Result<&KafkaSourceConfig, PlanError> {
        for (name, node) in &self.nodes {
            match &node.source {
                Some(SourceSpec::Kafka(config)) if config.bounded => {
                    return Err(refused(&self.at(name, "source.bounded"), "a bounded source runs in one process (weir run or weir serve), not on workers"));
                }
                Some(SourceSpec::Kafka(_)) | None => {}
                Some(_) => {
                    return Err(refused(&self.at(name, "source"), "cluster mode reads Kafka sources only: a file or generator source runs in one process (weir run or weir serve)"));
                }
            }
            if let Some(sink) = &node.sink {
                if !matches!(sink, SinkSpec::Kafka(_)) {
                    return Err(refused(&self.at(name, "sink"), "cluster mode writes to Kafka only: a file, stdout or discard sink would be split over the workers' machines"));
                }
            }
        }
        let mut sources = self.sources().into_iter();
        let (_, first) = sources.next().ok_or_else(|| refused("source", "missing"))?;
        Ok(first)
    }

    /// Keyed stages in the spec's order with their parallelism.
    fn stages(&self) -> Vec<(String, u16)> {
        self.nodes
            .iter()
            .filter(|(_, node)| Self::is_stage(node))
            .map(|(name, node)| (name.clone(), node.parallelism.unwrap_or(self.parallelism)))
            .collect()
    }

    /// With `input_partitioned_by_key`: check that the tasks can read
    /// source `source` directly (task `t` its partition `t`, so each
    /// stage it feeds has as many tasks as it has partitions, and nothing
    /// else is chained to it); its topic.
    fn direct_input(
        &self,
        source: &str,
        partitions: &[(String, i32)],
    ) -> Result<String, PlanError> {
        let field = self.at(source, "source");
        let why = |message: String| {
            refused(&field, format!("cluster.input_partitioned_by_key: {message}; or drop the setting to repartition it"))
        };
        let topic = partitions[0].0.clone();
        let in_order =
            partitions.iter().enumerate().all(|(i, (t, p))| *t == topic && *p == i as i32);
        if !in_order {
            return Err(why("the source must read one topic".into()));
        }
        if self.chain(source).len() > 1 {
            return Err(why(
                "a transform or sink after the source needs the repartition step".into()
            ));
        }
        for (stage, port) in self.exchanges_from(source) {
            let parallelism = self.nodes[&stage].parallelism.unwrap_or(self.parallelism);
            if !matches!(port, Port::Keyed(_)) || self.input(&stage, port).output.is_some() {
                return Err(why(format!("{stage} takes it as a broadcast or side output")));
            }
            if usize::from(parallelism) != partitions.len() {
                return Err(why(format!(
                    "topic {topic} has {} partitions but stage {stage} {parallelism} tasks: they must match",
                    partitions.len()
                )));
            }
        }
        Ok(topic)
    }

    /// The inputs of `stage`: keyed, then broadcast.
    fn ports(&self, stage: &str) -> Vec<Port> {
        let Some(node) = self.nodes.get(stage) else { return Vec::new() };
        let keyed = (0..node.inputs.len()).map(Port::Keyed);
        keyed.chain((0..node.broadcast.len()).map(Port::Broadcast)).collect()
    }

    /// Input `port` of `stage`.
    fn input(&self, stage: &str, port: Port) -> &InputSpec {
        let node = &self.nodes[stage];
        match port {
            Port::Keyed(j) => &node.inputs[j],
            Port::Broadcast(j) => &node.broadcast[j],
        }
    }

    /// The nodes chained to `root`: itself and every transform or sink it
    /// reaches without crossing an exchange.
    fn chain(&self, root: &str) -> BTreeSet<String> {
        let mut chain = BTreeSet::from([root.to_string()]);
        loop {
            let more: Vec<String> = self
                .nodes
                .iter()
                .filter(|(name, node)| {
                    !chain.contains(*name)
                        && (node.transform.is_some() || node.sink.is_some())
                        && node.inputs.iter().any(|i| chain.contains(&i.from))
                })
                .map(|(name, _)| name.clone())
                .collect();
            if more.is_empty() {
                return chain;
            }
            chain.extend(more);
        }
    }

    /// The stage inputs fed from `root`'s chain.
    fn exchanges_from(&self, root: &str) -> Vec<Edge> {
        let chain = self.chain(root);
        let mut edges = Vec::new();
        for (name, node) in &self.nodes {
            if !Self::is_stage(node) {
                continue;
            }
            for port in self.ports(name) {
                if chain.contains(&self.input(name, port).from) {
                    edges.push((name.clone(), port));
                }
            }
        }
        edges
    }
}

fn input(from: &str) -> InputSpec {
    InputSpec { from: from.to_string(), output: None, key: None }
}

/// Builds the units' specs.
struct Planner<'a> {
    spec: &'a PipelineSpec,
    graph: &'a Operators,
    bootstrap: String,
    properties: BTreeMap<String, String>,
    units: Vec<Unit>,
    /// The units writing each exchange, in order (a producer's number).
    producers: BTreeMap<Edge, Vec<String>>,
    /// Sources the tasks read directly (`input_partitioned_by_key`), and
    /// their topic.
    direct: BTreeMap<String, (KafkaSourceConfig, String)>,
}

impl Planner<'_> {
    /// The layout the plan names things in.
    fn layout(&self) -> u64 {
        self.spec.cluster.as_ref().map_or(0, |c| c.layout)
    }

    /// The spec of unit `name` of root node `root`.
    fn unit(&self, name: &str, root: &str, role: &UnitRole) -> Result<PipelineSpec, PlanError> {
        let graph = self.graph;
        let mut nodes = BTreeMap::new();
        let chain = graph.chain(root);
        for member in &chain {
            if member.starts_with(OURS) {
                return Err(refused(
                    &graph.at(member, ""),
                    format!("node names starting with {OURS:?} are reserved in cluster mode"),
                ));
            }
            let mut node = graph.nodes[member].clone();
            if member != root {
                node.inputs.retain(|i| chain.contains(&i.from));
            }
            if let Some(SinkSpec::Kafka(config)) = &mut node.sink {
                if config.delivery == Delivery::ExactlyOnce {
                    let prefix = config.transactional_id_prefix.clone().unwrap_or_default();
                    config.transactional_id_prefix =
                        Some(format!("{prefix}-{}", suffix(name, &self.spec.name)));
                }
            }
            nodes.insert(member.clone(), node);
        }
        match role {
            UnitRole::Ingest { topic, partition, .. } => {
                let node = nodes.get_mut(root).expect("the root");
                let Some(SourceSpec::Kafka(config)) = &mut node.source else {
                    return Err(refused(&graph.at(root, "source"), "not a Kafka source"));
                };
                config.topics = vec![topic.clone()];
                config.topic_pattern = None;
                config.partition = Some(*partition);
                config.group_id.get_or_insert_with(|| format!("weir-{}", self.spec.name));
            }
            UnitRole::Task { stage, task } => {
                let node = nodes.get_mut(stage).expect("the stage");
                let keyed = std::mem::take(&mut node.inputs);
                let broadcast = std::mem::take(&mut node.broadcast);
                node.parallelism = Some(1);
                node.uid.get_or_insert_with(|| stage.clone());
                let mut sources = Vec::new();
                let ports = (keyed.into_iter().enumerate().map(|(j, i)| (Port::Keyed(j), i)))
                    .chain(broadcast.into_iter().enumerate().map(|(j, i)| (Port::Broadcast(j), i)));
                for (port, input) in ports {
                    let source = format!("{OURS}in-{}", port.suffix());
                    let producers =
                        self.producers.get(&(stage.clone(), port)).cloned().unwrap_or_default();
                    let topic = exchange_topic(&self.spec.name, stage, port, self.layout());
                    let rewired = InputSpec { from: source.clone(), output: None, key: input.key };
                    match port {
                        Port::Keyed(_) => node.inputs.push(rewired),
                        Port::Broadcast(_) => node.broadcast.push(rewired),
                    }
                    let config = match self.direct.get(&input.from) {
                        Some((config, topic)) => {
                            let mut config = config.clone();
                            config.topics = vec![topic.clone()];
                            config.topic_pattern = None;
                            config.partition = Some(i32::from(*task));
                            config
                                .group_id
                                .get_or_insert_with(|| format!("weir-{}", self.spec.name));
                            config
                        }
                        None => self.exchange_source(&topic, *task, producers)?,
                    };
                    sources.push((source, config));
                }
                for (source, config) in sources {
                    let node =
                        NodeSpec { source: Some(SourceSpec::Kafka(config)), ..Default::default() };
                    nodes.insert(source, node);
                }
            }
        }
        for (stage, port) in graph.exchanges_from(root) {
            let input = graph.input(&stage, port);
            let key: Option<FunctionSpec> = match port {
                Port::Keyed(_) => input.key.clone().or(graph.nodes[&stage].key.clone()),
                Port::Broadcast(_) => None,
            };
            let producer = self.producers[&(stage.clone(), port)]
                .iter()
                .position(|unit| unit == name)
                .expect("a producer of its own exchange");
            let sink = self.exchange_sink(name, &stage, port, producer)?;
            nodes.insert(
                format!("{OURS}to-{stage}-{}", port.suffix()),
                NodeSpec {
                    inputs: vec![InputSpec {
                        from: input.from.clone(),
                        output: input.output.clone(),
                        key: None,
                    }],
                    key,
                    sink: Some(SinkSpec::Kafka(sink)),
                    ..Default::default()
                },
            );
        }
        let exactly_once = nodes
            .values()
            .filter(|n| matches!(&n.sink, Some(SinkSpec::Kafka(c)) if c.delivery == Delivery::ExactlyOnce))
            .count();
        if exactly_once != 1 {
            return Err(refused(
                &graph.at(root, ""),
                format!("in cluster mode each source and keyed stage writes exactly-once to one Kafka topic (the next keyed stage, or an output topic with delivery: exactly-once); {root} writes to {exactly_once}"),
            ));
        }
        let mut spec = self.spec.clone();
        spec.name = name.to_string();
        spec.fresh = false;
        spec.parallelism = 1;
        spec.source = None;
        spec.key = None;
        spec.process = None;
        spec.window = None;
        spec.aggregate = None;
        spec.window_process = None;
        spec.sink = None;
        spec.side_outputs = BTreeMap::new();
        spec.restart = None;
        spec.operators = nodes;
        if let (UnitRole::Ingest { .. }, Some(checkpoint)) = (role, spec.checkpoint.as_mut()) {
            let settings = self.spec.cluster.clone().unwrap_or_default();
            checkpoint.interval = settings.ingest_interval(checkpoint.interval);
        }
        let reads_exchange = spec
            .operators
            .values()
            .any(|node| matches!(&node.source, Some(SourceSpec::Kafka(c)) if c.exchange.is_some()));
        if let (true, Some(watermark)) = (reads_exchange, spec.watermark.as_mut()) {
            // A producer is idle only when it says so: one that is down
            // holds event time back until its unit runs again.
            watermark.idle_timeout = None;
        }
        Ok(spec)
    }

    /// The exchange source of a task: partition `task` of `topic`.
    fn exchange_source(
        &self,
        topic: &str,
        task: u16,
        producers: Vec<String>,
    ) -> Result<KafkaSourceConfig, PlanError> {
        let mut config: KafkaSourceConfig = serde_json::from_value(serde_json::json!({
            "bootstrap_servers": self.bootstrap,
            "topics": [topic],
            // Lag monitoring: every unit's input positions in one group.
            "group_id": format!("weir-{}", self.spec.name),
            "properties": self.properties,
        }))
        .map_err(|e| refused("source", e.to_string()))?;
        config.partition = Some(i32::from(task));
        config.exchange = Some(ExchangeInput { producers });
        Ok(config)
    }

    /// The exchange sink of unit `unit` into input `input` of `stage`.
    fn exchange_sink(
        &self,
        unit: &str,
        stage: &str,
        port: Port,
        producer: usize,
    ) -> Result<KafkaSinkConfig, PlanError> {
        let topic = exchange_topic(&self.spec.name, stage, port, self.layout());
        let mut config: KafkaSinkConfig = serde_json::from_value(serde_json::json!({
            "bootstrap_servers": self.bootstrap,
            "topic": topic,
            "delivery": "exactly-once",
            "transactional_id_prefix": format!("{OURS}{unit}"),
            "properties": self.properties,
        }))
        .map_err(|e| refused("sink", e.to_string()))?;
        let tasks = self.graph.nodes[stage].parallelism.unwrap_or(self.graph.parallelism);
        config.exchange = Some(ExchangeOutput {
            tasks,
            max_parallelism: self.spec.max_parallelism,
            producer,
            unit: unit.to_string(),
            broadcast: matches!(port, Port::Broadcast(_)),
        });
        Ok(config)
    }
}

/// What tells a unit's transactional ids apart from its siblings': the
/// unit's name without the pipeline's.
fn suffix<'a>(unit: &'a str, pipeline: &str) -> &'a str {
    unit.strip_prefix(pipeline).map_or(unit, |rest| rest.trim_start_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KAFKA: &str = "{ type: kafka, bootstrap_servers: 'b:9092', topics: [orders] }";
    const OUT: &str = "{ type: kafka, bootstrap_servers: 'b:9092', topic: out, delivery: exactly-once, transactional_id_prefix: rev }";

    fn spec(text: &str) -> PipelineSpec {
        PipelineSpec::parse(text).unwrap()
    }

    /// The input topic has three partitions.
    fn three(config: &KafkaSourceConfig) -> Result<Vec<(String, i32)>, PlanError> {
        Ok((0..3).map(|p| (config.topics[0].clone(), p)).collect())
    }

    fn line() -> PipelineSpec {
        spec(&format!(
            "name: rev\nparallelism: 2\nwatermark: {{ max_out_of_orderness: 1s, idle_timeout: 5s }}\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\nsource: {KAFKA}\nkey: {{ wasm: k.wasm }}\nprocess: {{ wasm: p.wasm }}\nsink: {OUT}\n"
        ))
    }

    fn unit<'p>(plan: &'p ClusterPlan, name: &str) -> &'p Unit {
        plan.units.iter().find(|u| u.name == name).unwrap_or_else(|| panic!("no unit {name}"))
    }

    fn kafka_sink(node: &NodeSpec) -> &KafkaSinkConfig {
        match &node.sink {
            Some(SinkSpec::Kafka(config)) => config,
            other => panic!("not a kafka sink: {other:?}"),
        }
    }

    fn kafka_source(node: &NodeSpec) -> &KafkaSourceConfig {
        match &node.source {
            Some(SourceSpec::Kafka(config)) => config,
            other => panic!("not a kafka source: {other:?}"),
        }
    }

    /// Units `<prefix>-0` … `<prefix>-<n - 1>`.
    fn units(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    /// Each ingest unit's name and the partition it reads.
    fn ingest_units(plan: &ClusterPlan) -> BTreeMap<String, (String, i32)> {
        plan.units
            .iter()
            .filter_map(|u| match &u.role {
                UnitRole::Ingest { topic, partition, .. } => {
                    Some((u.name.clone(), (topic.clone(), *partition)))
                }
                UnitRole::Task { .. } => None,
            })
            .collect()
    }

    #[test]
    fn an_ingest_unit_is_named_by_what_it_reads_whatever_the_order_of_the_topics() {
        let of = |topics: &str| {
            let text = line_with_topics(topics);
            // The broker lists each topic's partitions; topic `a` has two.
            let found = |config: &KafkaSourceConfig| -> Result<Vec<(String, i32)>, PlanError> {
                Ok(config
                    .topics
                    .iter()
                    .flat_map(|t| (0..if t == "a" { 2 } else { 1 }).map(move |p| (t.clone(), p)))
                    .collect())
            };
            ingest_units(&plan(&text, &found).unwrap())
        };
        let ab = of("[a, b]");
        assert_eq!(ab, of("[b, a]"), "reordering the topics renames nothing");
        assert_eq!(ab.len(), 3);
        for (name, (topic, partition)) in &ab {
            assert!(name.ends_with(&format!("-{partition}")), "{name} reads {topic}/{partition}");
        }
        // The same topic's partitions share the digest; two topics differ.
        let names: Vec<&String> = ab.keys().collect();
        let digest = |name: &str| name.rsplit_once('-').unwrap().0.to_owned();
        let digests: BTreeSet<String> = names.iter().map(|n| digest(n)).collect();
        assert_eq!(digests.len(), 2, "{names:?}");

        // One topic: the partition's number, as before; a partition added
        // to the topic adds a unit and leaves the others their names.
        let three = ingest_units(&plan(&line(), &three).unwrap());
        let four = |config: &KafkaSourceConfig| -> Result<Vec<(String, i32)>, PlanError> {
            // Listed out of order, as a broker may.
            Ok([3, 0, 2, 1].iter().map(|p| (config.topics[0].clone(), *p)).collect())
        };
        let four = ingest_units(&plan(&line(), &four).unwrap());
        assert_eq!(four.len(), 4);
        assert!(three.iter().all(|(name, read)| four.get(name) == Some(read)), "{four:?}");
        assert_eq!(four["rev-source-3"], ("orders".to_string(), 3));
    }

    fn line_with_topics(topics: &str) -> PipelineSpec {
        spec(&format!(
            "name: rev\nparallelism: 2\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\nsource: {{ type: kafka, bootstrap_servers: 'b:9092', topics: {topics} }}\nkey: {{ wasm: k.wasm }}\nprocess: {{ wasm: p.wasm }}\nsink: {OUT}\n"
        ))
    }

    #[test]
    fn a_line_spec_becomes_an_ingest_unit_per_partition_and_a_task_per_subtask() {
        let plan = plan(&line(), &three).unwrap();
        let names: Vec<&str> = plan.units.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(
            names,
            ["rev-source-0", "rev-keyed-0", "rev-source-1", "rev-keyed-1", "rev-source-2"],
            "unit i of every root, then unit i + 1: each range of the units topic mixes both"
        );
        assert_eq!(
            plan.exchanges,
            [ExchangeTopic { name: "weir-rev-keyed-0".into(), partitions: 2 }]
        );
        assert_eq!(
            (plan.units_topic.as_str(), plan.group.as_str()),
            ("weir-rev-units", "weir-rev-workers")
        );

        // Ingest unit 1: partition 1 only, keyed by the stage's key function
        // into the exchange, as producer 1 of 3.
        let ingest = &unit(&plan, "rev-source-1").spec;
        let source = kafka_source(&ingest.operators["source"]);
        assert_eq!((source.partition, source.group_id.as_deref()), (Some(1), Some("weir-rev")));
        let exchange = &ingest.operators["weir-to-keyed-0"];
        assert_eq!(
            exchange.key.as_ref().and_then(|k| k.wasm.as_ref()).unwrap().to_str(),
            Some("k.wasm")
        );
        let sink = kafka_sink(exchange);
        assert_eq!(sink.topic, "weir-rev-keyed-0");
        assert_eq!(sink.transactional_id_prefix.as_deref(), Some("weir-rev-source-1"));
        let output = sink.exchange.as_ref().unwrap();
        assert_eq!((output.tasks, output.producer, output.broadcast), (2, 1, false));
        assert_eq!(
            ingest.watermark.as_ref().unwrap().idle_timeout,
            Some(std::time::Duration::from_secs(5))
        );

        // Task 1: partition 1 of the exchange (3 producers), the stage at
        // parallelism 1 with its uid, the user's sink under its own prefix.
        let task = &unit(&plan, "rev-keyed-1").spec;
        let input = kafka_source(&task.operators["weir-in-0"]);
        assert_eq!(input.partition, Some(1));
        assert_eq!(input.exchange, Some(ExchangeInput { producers: units("rev-source", 3) }));
        let stage = &task.operators["keyed"];
        assert_eq!((stage.parallelism, stage.uid.as_deref()), (Some(1), Some("process")));
        assert_eq!(stage.inputs[0].from, "weir-in-0");
        let out = kafka_sink(&task.operators["sink"]);
        assert_eq!(out.transactional_id_prefix.as_deref(), Some("rev-keyed-1"));
        assert!(out.exchange.is_none());
        assert_eq!(
            task.watermark.as_ref().unwrap().idle_timeout,
            None,
            "only a producer saying so is idle"
        );
        assert_eq!(
            unit(&plan, "rev-keyed-1").role,
            UnitRole::Task { stage: "keyed".into(), task: 1 }
        );
    }

    #[test]
    fn a_two_stage_graph_re_keys_through_a_second_exchange() {
        let plan = plan(
            &spec(&format!(
                "name: top\nparallelism: 2\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\noperators:\n  orders: {{ source: {KAFKA} }}\n  revenue: {{ inputs: [orders], key: {{ wasm: k.wasm }}, process: {{ wasm: p.wasm }} }}\n  top3: {{ inputs: [revenue], parallelism: 3, key: {{ wasm: r.wasm }}, window: {{ type: tumbling, size: 1m }}, aggregate: {{ wasm: r.wasm }} }}\n  out: {{ inputs: [top3], sink: {OUT} }}\n"
            )),
            &three,
        )
        .unwrap();
        let names: Vec<&str> = plan.units.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "top-orders-0",
                "top-revenue-0",
                "top-top3-0",
                "top-orders-1",
                "top-revenue-1",
                "top-top3-1",
                "top-orders-2",
                "top-top3-2"
            ]
        );
        let topics: Vec<(&str, u16)> =
            plan.exchanges.iter().map(|t| (t.name.as_str(), t.partitions)).collect();
        assert_eq!(topics, [("weir-top-revenue-0", 2), ("weir-top-top3-0", 3)]);
        // A revenue task keys its output by region for top3 (2 producers).
        let revenue = &unit(&plan, "top-revenue-1").spec;
        let to_top3 = &revenue.operators["weir-to-top3-0"];
        assert_eq!(to_top3.inputs[0].from, "revenue");
        assert_eq!(
            to_top3.key.as_ref().and_then(|k| k.wasm.as_ref()).unwrap().to_str(),
            Some("r.wasm")
        );
        assert_eq!(kafka_sink(to_top3).exchange.as_ref().unwrap().producer, 1);
        assert!(!revenue.operators.contains_key("out"));
        let top3 = &unit(&plan, "top-top3-2").spec;
        assert_eq!(
            kafka_source(&top3.operators["weir-in-0"]).exchange,
            Some(ExchangeInput { producers: units("top-revenue", 2) })
        );
        assert_eq!(
            kafka_sink(&top3.operators["out"]).transactional_id_prefix.as_deref(),
            Some("rev-top3-2")
        );
        for unit in &plan.units {
            unit.spec.validate().unwrap();
        }
    }

    #[test]
    fn a_broadcast_input_reaches_every_task_through_its_own_exchange() {
        let rules = "{ type: kafka, bootstrap_servers: 'b:9092', topics: [rules] }";
        let plan = plan(
            &spec(&format!(
                "name: f\nparallelism: 2\ncheckpoint: {{ interval: 1s, storage: 's3://b/c' }}\noperators:\n  tx: {{ source: {KAFKA} }}\n  rules: {{ source: {rules} }}\n  detect: {{ inputs: [tx], broadcast: [rules], key: {{ wasm: k.wasm }}, process: {{ wasm: p.wasm }} }}\n  alerts: {{ inputs: [detect], sink: {OUT} }}\n"
            )),
            &three,
        )
        .unwrap();
        let topics: Vec<&str> = plan.exchanges.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(topics, ["weir-f-detect-0", "weir-f-detect-b0"]);
        let rules = plan.units.iter().find(|u| u.name == "f-rules-2").unwrap();
        let to_detect = &rules.spec.operators["weir-to-detect-b0"];
        assert!(to_detect.key.is_none(), "broadcast records need no key");
        let output = kafka_sink(to_detect).exchange.clone().unwrap();
        assert!(output.broadcast && output.producer == 2, "{output:?}");
        let task = plan.units.iter().find(|u| u.name == "f-detect-1").unwrap();
        let detect = &task.spec.operators["detect"];
        assert_eq!(detect.broadcast[0].from, "weir-in-b0");
        assert_eq!(detect.inputs[0].from, "weir-in-0");
        let input = kafka_source(&task.spec.operators["weir-in-b0"]);
        assert_eq!(
            (input.partition, input.exchange.clone()),
            (Some(1), Some(ExchangeInput { producers: units("f-rules", 3) }))
        );
    }

    #[test]
    fn ingest_units_commit_more_often_than_the_tasks() {
        use std::time::Duration;
        let interval_of = |spec: &PipelineSpec, name: &str| {
            let planned = plan(spec, &three).unwrap();
            unit(&planned, name).spec.checkpoint.as_ref().unwrap().interval
        };
        let mut spec = line();
        assert_eq!(interval_of(&spec, "rev-source-0"), Duration::from_millis(500), "half");
        assert_eq!(interval_of(&spec, "rev-keyed-0"), Duration::from_secs(1), "the spec's");
        spec.checkpoint.as_mut().unwrap().interval = Duration::from_millis(150);
        assert_eq!(interval_of(&spec, "rev-source-0"), Duration::from_millis(100), "at least");
        spec.checkpoint.as_mut().unwrap().interval = Duration::from_millis(50);
        assert_eq!(interval_of(&spec, "rev-source-0"), Duration::from_millis(50), "at most");
        let ingest_interval = Some(Duration::from_millis(500));
        spec.cluster = Some(ClusterSettings { ingest_interval, ..Default::default() });
        assert_eq!(interval_of(&spec, "rev-source-2"), Duration::from_millis(500), "as set");
        assert_eq!(interval_of(&spec, "rev-keyed-1"), Duration::from_millis(50));
    }

    #[test]
    fn an_input_partitioned_by_key_is_read_by_the_tasks_directly() {
        let mut keyed = line();
        keyed.parallelism = 3;
        keyed.cluster =
            Some(ClusterSettings { input_partitioned_by_key: true, ..Default::default() });
        let planned = plan(&keyed, &three).unwrap();
        let names: Vec<&str> = planned.units.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["rev-keyed-0", "rev-keyed-1", "rev-keyed-2"], "no ingest units");
        assert!(planned.exchanges.is_empty(), "no repartition topic");
        let task = &planned.units[2].spec;
        let input = kafka_source(&task.operators["weir-in-0"]);
        assert_eq!(
            (input.topics.as_slice(), input.partition, input.exchange.is_none()),
            (&["orders".to_string()][..], Some(2), true)
        );
        assert_eq!(
            task.watermark.as_ref().unwrap().idle_timeout,
            Some(std::time::Duration::from_secs(5)),
            "its own partition's idleness"
        );
        keyed.parallelism = 2;
        let error = plan(&keyed, &three).unwrap_err().to_string();
        assert!(error.contains("3 partitions but stage keyed 2 tasks"), "{error}");
    }

    #[test]
    fn what_cannot_run_on_workers_is_refused_with_the_reason() {
        let refused = |text: String| plan(&spec(&text), &three).unwrap_err().to_string();
        let base = line();
        let yaml = |source: &str, sink: &str, checkpoint: &str| {
            format!("name: rev\n{checkpoint}source: {source}\nkey: {{ wasm: k.wasm }}\nprocess: {{ wasm: p.wasm }}\nsink: {sink}\n")
        };
        let storage = "checkpoint: { interval: 1s, storage: 's3://b/c' }\n";
        let error = refused(yaml("{ type: file, path: in.jsonl }", OUT, storage));
        assert!(error.contains("Kafka sources only"), "{error}");
        let error = refused(yaml(KAFKA, "{ type: stdout }", storage));
        assert!(error.contains("writes to Kafka only"), "{error}");
        let error = refused(yaml(KAFKA, OUT, "checkpoint: { interval: 1s }\n"));
        assert!(error.contains("checkpoint.storage"), "{error}");
        let at_least_once = "{ type: kafka, bootstrap_servers: 'b:9092', topic: out }";
        let error = refused(yaml(KAFKA, at_least_once, storage));
        assert!(error.contains("exactly-once to one Kafka topic"), "{error}");
        let bounded =
            "{ type: kafka, bootstrap_servers: 'b:9092', topics: [orders], bounded: true }";
        let error = refused(yaml(bounded, OUT, storage));
        assert!(error.contains("bounded"), "{error}");
        assert_eq!(base.name, "rev");
    }
}
