//! A pipeline as a graph: the `operators:` section of a spec, and the plan
//! every run follows — a line spec (source → key → keyed function → sink)
//! is the shorthand for the simplest graph and becomes one here.
//!
//! ```text
//! operators:
//!   orders:   { source: { type: file, path: orders.jsonl } }
//!   payments: { source: { type: file, path: payments.jsonl } }
//!   paid:     { inputs: [orders, payments], key: { wasm: k.wasm },
//!               join: { type: interval, lower: 0s, upper: 10m } }
//!   out:      { inputs: [paid], sink: { type: file, path: paid.jsonl } }
//! ```
//!
//! Nodes are sources, sinks, stateless transforms (chained into every
//! node that feeds them, so they need no exchange), and keyed stages (a
//! process, co-process or window function, or a host-provided join), each
//! with its own key function, parallelism and `uid`. An input is another
//! node's main output (`name`) or one of its side outputs (`name.output`).
//! [`Graph::of`] checks what the types cannot (unknown inputs, cycles,
//! key-less keyed inputs, parallelism) and names the node and field at
//! fault.

use std::collections::BTreeMap;

use super::node::{JoinSpec, NodeSpec};
use super::parts::{FunctionSpec, SpecError, WindowSpec};
use super::pipeline::PipelineSpec;
use crate::connectors::{SinkSpec, SourceSpec, TransactionalSink};
use crate::names::{is_valid_name, NAME_RULE};

/// Which input of a keyed stage a route feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageInput {
    /// Keyed input `0` or `1` (the second input of a co-process or join).
    Keyed(usize),
    /// A broadcast input: every subtask gets every event.
    Broadcast,
}

/// Where the events of one output go.
#[derive(Debug, Clone)]
pub enum Route {
    /// To sink node `index` of [`Graph::sinks`].
    Sink(usize),
    /// To sink node `sink`, each event with its key by `key` (a cluster
    /// exchange to the tasks of the next keyed stage).
    KeyedSink {
        /// Index into [`Graph::sinks`].
        sink: usize,
        /// The key function of the stage the sink feeds.
        key: FunctionSpec,
    },
    /// To keyed stage `stage` (keyed by `key`, unless broadcast).
    Stage {
        /// Index into [`Graph::stages`].
        stage: usize,
        /// Which of its inputs.
        input: StageInput,
        /// The key function (none for a broadcast input).
        key: Option<FunctionSpec>,
    },
    /// Through a stateless transform, chained into the producer.
    Transform {
        /// The transform node's name.
        name: String,
        /// Its function.
        function: FunctionSpec,
        /// Where its outputs go.
        outputs: Outputs,
    },
}

/// Where each output of a producer goes: its main output (`None`) and its
/// side outputs by name. Outputs nobody takes are counted and dropped.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// Routes by output.
    pub ports: BTreeMap<Option<String>, Vec<Route>>,
}

/// A source node.
#[derive(Debug, Clone)]
pub struct SourceNode {
    /// The node's name.
    pub name: String,
    /// Its connector settings.
    pub spec: SourceSpec,
    /// Where its events go.
    pub outputs: Outputs,
}

/// What a keyed stage runs.
#[derive(Debug, Clone)]
pub enum StageKind {
    /// A process function (with broadcast inputs if any).
    Process(FunctionSpec),
    /// A co-process function over two inputs.
    CoProcess(FunctionSpec),
    /// Windows with an aggregate (`aggregate`) or window process function.
    Window {
        /// The windows.
        window: WindowSpec,
        /// The function.
        function: FunctionSpec,
        /// Whether it is an aggregate (else a window process function).
        aggregate: bool,
    },
    /// A host-provided join.
    Join(JoinSpec),
}

/// A keyed stage: `parallelism` subtasks, each owning a range of key groups.
#[derive(Debug, Clone)]
pub struct StageNode {
    /// The node's name.
    pub name: String,
    /// Its identity in snapshots.
    pub uid: String,
    /// Its subtasks.
    pub parallelism: u16,
    /// What it runs.
    pub kind: StageKind,
    /// Keyed inputs it has (1 or 2), and whether it has broadcast inputs.
    pub keyed_inputs: usize,
    /// Whether it has broadcast inputs.
    pub broadcast: bool,
    /// Where its outputs go.
    pub outputs: Outputs,
}

impl StageNode {
    /// The function instance role names use: `process`, `window`, `join`.
    pub fn role(&self) -> &'static str {
        match self.kind {
            StageKind::Process(_) => "process",
            StageKind::CoProcess(_) => "co_process",
            StageKind::Window { .. } => "window",
            StageKind::Join(_) => "join",
        }
    }
}

/// A sink node.
#[derive(Debug, Clone)]
pub struct SinkNode {
    /// The node's name (`""` for a line spec's main sink).
    pub name: String,
    /// Its connector settings.
    pub spec: SinkSpec,
    /// Whether what it writes counts as side output (a line spec's side
    /// outputs) rather than output.
    pub side: bool,
}

/// The plan of a run: sources, keyed stages in topological order, sinks.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Source nodes, by name.
    pub sources: Vec<SourceNode>,
    /// Keyed stages, each after every stage that feeds it.
    pub stages: Vec<StageNode>,
    /// Sink nodes.
    pub sinks: Vec<SinkNode>,
}

/// The name of a line spec's main sink node.
pub const LINE_SINK: &str = "";

/// The name metrics and tail readers know sink node `sink` by: `main` for
/// a line spec's main sink, else its own.
pub fn output_name(sink: &str) -> &str {
    if sink == LINE_SINK {
        "main"
    } else {
        sink
    }
}

impl PipelineSpec {
    /// The graph the spec describes (a line spec is the simplest one).
    pub fn graph(&self) -> Result<Graph, SpecError> {
        Graph::of(self)
    }
}

impl Graph {
    /// The sinks that commit their output in transactions tied to
    /// checkpoints (the exactly-once contract); a valid graph has at most one.
    pub fn transactional_sinks(&self) -> impl Iterator<Item = &dyn TransactionalSink> {
        self.sinks.iter().filter_map(|s| s.spec.config().transactional())
    }

    /// The graph `spec` describes (its `operators:`, or its line fields).
    pub fn of(spec: &PipelineSpec) -> Result<Self, SpecError> {
        if spec.operators.is_empty() {
            Self::of_line(spec)
        } else {
            Builder { spec, nodes: &spec.operators }.build()
        }
    }

    /// A line spec as a graph: source → keyed stage → sink, with every side
    /// output a sink fed by both.
    fn of_line(spec: &PipelineSpec) -> Result<Self, SpecError> {
        let missing = |field: &str| SpecError::field(field, "missing field (or give `operators:`)");
        let source = spec.source.clone().ok_or_else(|| missing("source"))?;
        let key = spec.key.clone().ok_or_else(|| missing("key"))?;
        let sink = spec.sink.clone().ok_or_else(|| missing("sink"))?;
        let kind = match (&spec.process, &spec.window, &spec.aggregate, &spec.window_process) {
            (Some(process), ..) => StageKind::Process(process.clone()),
            (None, Some(window), Some(f), _) => {
                StageKind::Window { window: window.clone(), function: f.clone(), aggregate: true }
            }
            (None, Some(window), None, Some(f)) => {
                StageKind::Window { window: window.clone(), function: f.clone(), aggregate: false }
            }
            _ => return Err(missing("process")),
        };
        let mut sinks = vec![SinkNode { name: LINE_SINK.into(), spec: sink, side: false }];
        let mut side_routes = BTreeMap::new();
        for (name, spec) in &spec.side_outputs {
            side_routes.insert(Some(name.clone()), vec![Route::Sink(sinks.len())]);
            sinks.push(SinkNode { name: name.clone(), spec: spec.clone(), side: true });
        }
        let mut stage_outputs = Outputs { ports: side_routes.clone() };
        stage_outputs.ports.insert(None, vec![Route::Sink(0)]);
        let mut source_outputs = Outputs { ports: side_routes };
        source_outputs.ports.insert(
            None,
            vec![Route::Stage { stage: 0, input: StageInput::Keyed(0), key: Some(key) }],
        );
        Ok(Graph {
            sources: vec![SourceNode {
                name: "source".into(),
                spec: source,
                outputs: source_outputs,
            }],
            stages: vec![StageNode {
                name: spec.operator_uid(),
                uid: spec.operator_uid(),
                parallelism: spec.parallelism,
                kind,
                keyed_inputs: 1,
                broadcast: false,
                outputs: stage_outputs,
            }],
            sinks,
        })
    }

    /// Every stage's uid, with its parallelism.
    pub fn stage_layouts(&self) -> Vec<(String, u16)> {
        self.stages.iter().map(|s| (s.uid.clone(), s.parallelism)).collect()
    }

    /// The graph as the metrics show it: node names (a line spec's main
    /// sink as `main`; each source with one task, which the run corrects
    /// once its readers are open), and an edge from each producer to each node its
    /// outputs reach (through chained transforms, which are not nodes of
    /// their own there).
    pub fn topology(&self) -> crate::observe::sampling::Topology {
        let sink_name = |sink: &SinkNode| output_name(&sink.name).to_string();
        let mut edges = Vec::new();
        let producers = self
            .sources
            .iter()
            .map(|s| (&s.name, &s.outputs))
            .chain(self.stages.iter().map(|s| (&s.name, &s.outputs)));
        for (from, outputs) in producers {
            let mut pending = vec![outputs];
            while let Some(outputs) = pending.pop() {
                for route in outputs.ports.values().flatten() {
                    let to = match route {
                        Route::Sink(sink) | Route::KeyedSink { sink, .. } => {
                            self.sinks.get(*sink).map(sink_name)
                        }
                        Route::Stage { stage, .. } => {
                            self.stages.get(*stage).map(|s| s.name.clone())
                        }
                        Route::Transform { outputs, .. } => {
                            pending.push(outputs);
                            None
                        }
                    };
                    if let Some(edge) = to.map(|to| (from.clone(), to)) {
                        if !edges.contains(&edge) {
                            edges.push(edge);
                        }
                    }
                }
            }
        }
        crate::observe::sampling::Topology {
            sources: self.sources.iter().map(|s| (s.name.clone(), 1)).collect(),
            stages: self
                .stages
                .iter()
                .map(|s| (s.name.clone(), usize::from(s.parallelism)))
                .collect(),
            sinks: self.sinks.iter().map(|s| (sink_name(s), s.side)).collect(),
            edges,
        }
    }

    /// Total keyed subtasks over every stage.
    pub fn subtasks(&self) -> usize {
        self.stages.iter().map(|s| usize::from(s.parallelism)).sum()
    }
}

/// What a node is, once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Source,
    Sink,
    Transform,
    Keyed,
}

/// Whether `node` is a keyed stage of exactly two distinct inputs (a
/// co-process function or a join); other stages take the union of theirs.
fn two_inputs(node: &NodeSpec) -> bool {
    node.co_process.is_some() || node.join.is_some()
}

/// Builds a [`Graph`] from `operators:`.
struct Builder<'a> {
    spec: &'a PipelineSpec,
    nodes: &'a BTreeMap<String, NodeSpec>,
}

impl Builder<'_> {
    fn build(self) -> Result<Graph, SpecError> {
        let spec = self.spec;
        let mut kinds = BTreeMap::new();
        for (name, node) in self.nodes {
            if !is_valid_name(name) {
                return Err(SpecError::field("operators", format!("{name:?} must be {NAME_RULE}")));
            }
            kinds.insert(name.as_str(), self.check_node(name, node)?);
        }
        // Inputs name nodes that exist and can feed this one.
        for (name, node) in self.nodes {
            let all = node.inputs.iter().map(|i| ("inputs", i));
            for (field, input) in all.chain(node.broadcast.iter().map(|i| ("broadcast", i))) {
                let at = format!("operators.{name}.{field}");
                match kinds.get(input.from.as_str()) {
                    None => {
                        return Err(SpecError::field(
                            &at,
                            format!("no operator is called {:?}", input.from),
                        ))
                    }
                    Some(Kind::Sink) => {
                        return Err(SpecError::field(
                            &at,
                            format!("{:?} is a sink: it has no output", input.from),
                        ))
                    }
                    Some(_) => {}
                }
                if let Some(output) = input.output.as_ref().filter(|o| !is_valid_name(o)) {
                    return Err(SpecError::field(&at, format!("{output:?} must be {NAME_RULE}")));
                }
            }
        }
        let order = self.topological_order()?;
        let keyed: Vec<&str> = order.iter().copied().filter(|n| kinds[n] == Kind::Keyed).collect();
        let sink_names: Vec<&str> =
            self.nodes.keys().map(String::as_str).filter(|n| kinds[n] == Kind::Sink).collect();
        if sink_names.is_empty() {
            return Err(SpecError::field("operators", "no sink: give a node with `sink:`"));
        }
        let mut graph = Graph { sources: Vec::new(), stages: Vec::new(), sinks: Vec::new() };
        for name in &sink_names {
            let sink = self.nodes[*name].sink.clone().expect("a sink node");
            graph.sinks.push(SinkNode { name: name.to_string(), spec: sink, side: false });
        }
        for name in &keyed {
            let node = &self.nodes[*name];
            let uid = node.uid.clone().unwrap_or_else(|| name.to_string());
            let kind = match node {
                NodeSpec { process: Some(f), .. } => StageKind::Process(f.clone()),
                NodeSpec { co_process: Some(f), .. } => StageKind::CoProcess(f.clone()),
                NodeSpec { join: Some(join), .. } => StageKind::Join(join.clone()),
                NodeSpec { window: Some(window), aggregate, window_process, .. } => {
                    StageKind::Window {
                        window: window.clone(),
                        function: aggregate.clone().or(window_process.clone()).expect("checked"),
                        aggregate: aggregate.is_some(),
                    }
                }
                _ => unreachable!("checked to be keyed"),
            };
            graph.stages.push(StageNode {
                name: name.to_string(),
                uid,
                parallelism: node.parallelism.unwrap_or(spec.parallelism),
                kind,
                keyed_inputs: if two_inputs(node) { 2 } else { 1 },
                broadcast: !node.broadcast.is_empty(),
                outputs: Outputs::default(),
            });
        }
        let mut uids = BTreeMap::new();
        for stage in &graph.stages {
            if let Some(other) = uids.insert(stage.uid.clone(), stage.name.clone()) {
                return Err(SpecError::field(
                    &format!("operators.{}.uid", stage.name),
                    format!(
                        "{:?} is also the uid of {other:?}; every keyed stage needs its own",
                        stage.uid
                    ),
                ));
            }
        }
        for stage in 0..graph.stages.len() {
            let outputs = self.outputs_of(&graph.stages[stage].name.clone(), &graph, &kinds)?;
            graph.stages[stage].outputs = outputs;
        }
        for name in order.iter().filter(|n| kinds[*n] == Kind::Source) {
            let outputs = self.outputs_of(name, &graph, &kinds)?;
            let source = self.nodes[*name].source.clone().expect("a source node");
            graph.sources.push(SourceNode { name: name.to_string(), spec: source, outputs });
        }
        Ok(graph)
    }

    /// Check one node on its own: exactly one kind, and the fields that kind takes.
    fn check_node(&self, name: &str, node: &NodeSpec) -> Result<Kind, SpecError> {
        let at = |field: &str| format!("operators.{name}.{field}");
        let kinds = [
            ("source", node.source.is_some()),
            ("sink", node.sink.is_some()),
            ("transform", node.transform.is_some()),
            ("process", node.process.is_some()),
            ("co_process", node.co_process.is_some()),
            ("window", node.window.is_some()),
            ("join", node.join.is_some()),
        ];
        let given: Vec<&str> = kinds.iter().filter(|(_, on)| *on).map(|(k, _)| *k).collect();
        let kind = match given.as_slice() {
            [one] => *one,
            [] => return Err(SpecError::field(&format!("operators.{name}"), "give one of source, sink, transform, process, co_process, window (with aggregate or window_process) or join")),
            [a, b, ..] => return Err(SpecError::field(&at(b), format!("a node is one thing: it already has `{a}`"))),
        };
        if kind != "window" && (node.aggregate.is_some() || node.window_process.is_some()) {
            return Err(SpecError::field(&at("aggregate"), "goes with `window`"));
        }
        let keyed = matches!(kind, "process" | "co_process" | "window" | "join");
        // A cluster exchange: a sink that sends each record by its key.
        let keyed_sink = node.sink.as_ref().is_some_and(|sink| sink.config().takes_keys());
        if keyed_sink && node.key.is_none() {
            return Err(SpecError::field(&at("key"), "missing: this sink sends records by key"));
        }
        if !keyed {
            for (field, present) in [
                ("key", node.key.is_some() && !keyed_sink),
                ("parallelism", node.parallelism.is_some()),
                ("uid", node.uid.is_some()),
                ("broadcast", !node.broadcast.is_empty()),
            ] {
                if present {
                    return Err(SpecError::field(
                        &at(field),
                        format!("only keyed stages have it, not a {kind}"),
                    ));
                }
            }
            if node.inputs.iter().any(|i| i.key.is_some()) {
                return Err(SpecError::field(
                    &at("inputs"),
                    format!("a {kind} is not keyed: its inputs take no key"),
                ));
            }
        }
        match kind {
            "source" if !node.inputs.is_empty() => {
                return Err(SpecError::field(&at("inputs"), "a source has no inputs"))
            }
            "source" => {}
            _ if node.inputs.is_empty() => {
                return Err(SpecError::field(
                    &at("inputs"),
                    "missing: name the nodes it takes events from",
                ))
            }
            _ => {}
        }
        if !node.broadcast.is_empty() && kind != "process" {
            return Err(SpecError::field(
                &at("broadcast"),
                "only a `process` stage takes broadcast inputs",
            ));
        }
        if let Some(input) = node.broadcast.iter().find(|i| i.key.is_some()) {
            return Err(SpecError::field(
                &at("broadcast"),
                format!("{input} is broadcast to every subtask: it takes no key"),
            ));
        }
        if matches!(kind, "co_process" | "join") && node.inputs.len() != 2 {
            return Err(SpecError::field(
                &at("inputs"),
                format!("a {kind} takes exactly two inputs, not {}", node.inputs.len()),
            ));
        }
        if keyed {
            if let Some(input) = node.inputs.iter().find(|i| i.key.is_none() && node.key.is_none())
            {
                return Err(SpecError::field(&at("key"), format!("input {input} has no key function: give `key:` (or `{{ from: {input}, key: … }}`)")));
            }
            if let Some(uid) = node.uid.as_ref().filter(|uid| !is_valid_name(uid)) {
                return Err(SpecError::field(&at("uid"), format!("{uid:?} must be {NAME_RULE}")));
            }
            let parallelism = node.parallelism.unwrap_or(self.spec.parallelism);
            if parallelism == 0 || parallelism > self.spec.max_parallelism {
                return Err(SpecError::field(
                    &at("parallelism"),
                    format!(
                        "{parallelism} must be between 1 and max_parallelism ({})",
                        self.spec.max_parallelism
                    ),
                ));
            }
        }
        if kind == "window" {
            let window = node.window.as_ref().expect("a window");
            let under = |e: SpecError| e.under(&format!("operators.{name}"));
            window.assigner().map_err(under)?;
            window.allowed_lateness().map_err(under)?;
            match (&node.aggregate, &node.window_process) {
                (Some(_), Some(_)) => {
                    return Err(SpecError::field(
                        &at("window_process"),
                        "give either `aggregate` or `window_process`, not both",
                    ))
                }
                (None, None) => {
                    return Err(SpecError::field(
                        &at("aggregate"),
                        "a window needs an aggregate (or window_process) function",
                    ))
                }
                _ => {}
            }
        }
        if let Some(JoinSpec::Window { window }) = &node.join {
            if window.allowed_lateness.is_some() {
                return Err(SpecError::field(
                    &at("join.window.allowed_lateness"),
                    "a window join fires each window once: it takes no allowed lateness",
                ));
            }
            window.assigner().map_err(|e| e.under(&format!("operators.{name}.join")))?;
        }
        if let Some(JoinSpec::Interval { lower, upper, .. }) = &node.join {
            if lower > upper {
                return Err(SpecError::field(&at("join.lower"), "must not be above `upper`"));
            }
        }
        if let Some(source) = &node.source {
            source.config().validate().map_err(|e| SpecError::connector(&at("source"), e))?;
        }
        if let Some(sink) = &node.sink {
            sink.config()
                .validate(crate::connectors::SinkRole::Main)
                .map_err(|e| SpecError::connector(&at("sink"), e))?;
        }
        Ok(match kind {
            "source" => Kind::Source,
            "sink" => Kind::Sink,
            "transform" => Kind::Transform,
            _ => Kind::Keyed,
        })
    }

    /// Node names in an order where every node comes after its inputs; a
    /// cycle is an error naming a node on it.
    fn topological_order(&self) -> Result<Vec<&str>, SpecError> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Visiting,
            Done,
        }
        fn visit<'a>(
            name: &'a str,
            nodes: &'a BTreeMap<String, NodeSpec>,
            marks: &mut BTreeMap<&'a str, Mark>,
            order: &mut Vec<&'a str>,
        ) -> Result<(), SpecError> {
            match marks.get(name) {
                Some(Mark::Done) => return Ok(()),
                Some(Mark::Visiting) => {
                    return Err(SpecError::field(
                        &format!("operators.{name}.inputs"),
                        "the operators form a cycle through this one; a pipeline is acyclic",
                    ))
                }
                None => {}
            }
            marks.insert(name, Mark::Visiting);
            let node = &nodes[name];
            for input in node.inputs.iter().chain(&node.broadcast) {
                let (from, _) = nodes.get_key_value(&input.from).expect("checked");
                visit(from, nodes, marks, order)?;
            }
            marks.insert(name, Mark::Done);
            order.push(name);
            Ok(())
        }
        let mut marks = BTreeMap::new();
        let mut order = Vec::new();
        for name in self.nodes.keys() {
            visit(name, self.nodes, &mut marks, &mut order)?;
        }
        Ok(order)
    }

    /// Where the outputs of node `producer` go: every node that names it
    /// as an input, transforms expanded in place.
    fn outputs_of(
        &self,
        producer: &str,
        graph: &Graph,
        kinds: &BTreeMap<&str, Kind>,
    ) -> Result<Outputs, SpecError> {
        let mut outputs = Outputs::default();
        for (name, node) in self.nodes {
            let inputs = node.inputs.iter().enumerate().map(|(i, input)| (Some(i), input));
            for (index, input) in inputs.chain(node.broadcast.iter().map(|i| (None, i))) {
                if input.from != producer {
                    continue;
                }
                let route = match kinds[name.as_str()] {
                    Kind::Sink => {
                        let sink =
                            graph.sinks.iter().position(|s| &s.name == name).expect("a sink");
                        match &node.key {
                            Some(key) => Route::KeyedSink { sink, key: key.clone() },
                            None => Route::Sink(sink),
                        }
                    }
                    Kind::Transform => Route::Transform {
                        name: name.clone(),
                        function: node.transform.clone().expect("a transform"),
                        outputs: self.outputs_of(name, graph, kinds)?,
                    },
                    Kind::Keyed => Route::Stage {
                        stage: graph.stages.iter().position(|s| &s.name == name).expect("a stage"),
                        // A one-input stage takes the union of its inputs.
                        input: match index {
                            None => StageInput::Broadcast,
                            Some(i) if two_inputs(node) => StageInput::Keyed(i),
                            Some(_) => StageInput::Keyed(0),
                        },
                        key: match index {
                            Some(_) => input.key.clone().or(node.key.clone()),
                            None => None,
                        },
                    },
                    Kind::Source => unreachable!("a source has no inputs"),
                };
                outputs.ports.entry(input.output.clone()).or_default().push(route);
            }
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(operators: &str) -> Result<Graph, SpecError> {
        let text = format!("name: g\nparallelism: 2\noperators:\n{operators}");
        PipelineSpec::parse(&text).and_then(|spec| Graph::of(&spec))
    }

    fn error(operators: &str) -> String {
        graph(operators).unwrap_err().to_string()
    }

    const JOIN: &str = "
  orders: { source: { type: generator, count: 10 } }
  payments: { source: { type: generator, count: 10 } }
  paid:
    inputs: [orders, { from: payments, key: { wasm: p.wasm } }]
    key: { wasm: o.wasm }
    join: { type: interval, lower: -5s, upper: 10m }
    parallelism: 3
  clean: { inputs: [paid], transform: { wasm: t.wasm } }
  out: { inputs: [clean, paid.late], sink: { type: stdout } }
";

    #[test]
    fn a_join_graph_is_planned_with_its_keys_chains_and_sinks() {
        let g = graph(JOIN).unwrap();
        assert_eq!(
            g.sources.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["orders", "payments"]
        );
        let paid = &g.stages[0];
        assert_eq!((paid.uid.as_str(), paid.parallelism, paid.keyed_inputs), ("paid", 3, 2));
        assert!(matches!(
            paid.kind,
            StageKind::Join(JoinSpec::Interval { lower: -5000, upper: 600_000, .. })
        ));
        let key_of = |source: usize| match &g.sources[source].outputs.ports[&None][0] {
            Route::Stage { stage: 0, input: StageInput::Keyed(i), key: Some(key) } => {
                (*i, key.wasm.clone().unwrap())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(key_of(0), (0, "o.wasm".into()));
        assert_eq!(key_of(1), (1, "p.wasm".into()));
        match &paid.outputs.ports[&None][0] {
            Route::Transform { name, outputs, .. } => {
                assert_eq!(name, "clean");
                assert!(matches!(outputs.ports[&None][..], [Route::Sink(0)]));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(paid.outputs.ports[&Some("late".into())][..], [Route::Sink(0)]));
    }

    #[test]
    fn faults_are_named_by_operator_and_field() {
        let cases = [
            ("  a: { source: { type: generator, count: 1 } }\n  b: { inputs: [nowhere], sink: { type: stdout } }\n", "operators.b.inputs", "nowhere"),
            ("  a: { source: { type: generator, count: 1 } }\n  j: { inputs: [a, a], join: { type: interval, lower: 0s, upper: 1s } }\n  s: { inputs: [j], sink: { type: stdout } }\n", "operators.j.key", "no key function"),
            ("  a: { source: { type: generator, count: 1 } }\n  j: { inputs: [a], key: { wasm: k.wasm }, join: { type: interval, lower: 0s, upper: 1s } }\n  s: { inputs: [j], sink: { type: stdout } }\n", "operators.j.inputs", "exactly two"),
            ("  a: { source: { type: generator, count: 1 } }\n  p: { inputs: [a, q], key: { wasm: k.wasm }, process: { wasm: f.wasm } }\n  q: { inputs: [p], key: { wasm: k.wasm }, process: { wasm: f.wasm } }\n  s: { inputs: [q], sink: { type: stdout } }\n", "inputs", "cycle"),
            ("  a: { source: { type: generator, count: 1 } }\n  p: { inputs: [a], key: { wasm: k.wasm }, process: { wasm: f.wasm }, parallelism: 500 }\n  s: { inputs: [p], sink: { type: stdout } }\n", "operators.p.parallelism", "max_parallelism"),
            ("  a: { source: { type: generator, count: 1 } }\n  p: { inputs: [a], key: { wasm: k.wasm }, process: { wasm: f.wasm }, sink: { type: stdout } }\n", "operators.p.process", "one thing"),
            ("  a: { source: { type: generator, count: 1 } }\n  t: { inputs: [a], key: { wasm: k.wasm }, transform: { wasm: t.wasm } }\n  s: { inputs: [t], sink: { type: stdout } }\n", "operators.t.key", "keyed"),
            ("  a: { source: { type: generator, count: 1 } }\n  s: { inputs: [a.x], sink: { type: stdout } }\n  b: { inputs: [s], sink: { type: stdout } }\n", "operators.b.inputs", "sink"),
            ("  a: { source: { type: generator, count: 1 } }\n  p: { inputs: [a], key: { wasm: k.wasm }, window: { type: tumbling, size: 1m } }\n  s: { inputs: [p], sink: { type: stdout } }\n", "operators.p.aggregate", "aggregate"),
        ];
        for (operators, field, words) in cases {
            let message = error(operators);
            assert!(message.contains(field) && message.contains(words), "{message}");
        }
    }

    #[test]
    fn a_one_input_stage_takes_the_union_of_its_inputs() {
        let g = graph(
            "  a: { source: { type: generator, count: 1 } }\n  b: { source: { type: generator, count: 1 } }\n  p: { inputs: [a, b], key: { wasm: k.wasm }, process: { wasm: f.wasm } }\n  s: { inputs: [p], sink: { type: stdout } }\n",
        )
        .unwrap();
        assert_eq!(g.stages[0].keyed_inputs, 1);
        for source in &g.sources {
            assert!(matches!(
                source.outputs.ports[&None][..],
                [Route::Stage { input: StageInput::Keyed(0), .. }]
            ));
        }
    }

    #[test]
    fn a_line_spec_is_the_simplest_graph() {
        let spec = PipelineSpec::parse(
            "name: l\nsource: { type: generator, count: 1 }\nkey: { wasm: k.wasm }\nprocess: { wasm: p.wasm }\nsink: { type: stdout }\nside_outputs: { late: { type: stdout } }\n",
        )
        .unwrap();
        let g = Graph::of(&spec).unwrap();
        assert_eq!((g.sources.len(), g.stages.len(), g.sinks.len()), (1, 1, 2));
        assert_eq!(g.stages[0].uid, "process");
        assert!(matches!(g.stages[0].outputs.ports[&None][..], [Route::Sink(0)]));
        assert!(matches!(g.sources[0].outputs.ports[&Some("late".into())][..], [Route::Sink(1)]));
    }
}
