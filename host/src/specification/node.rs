//! The nodes of a spec's `operators:` section as written: a source, a
//! sink, a transform, a keyed function or a join, and its inputs.

use serde::{Deserialize, Deserializer};

use super::parts::{FunctionSpec, WindowSpec};
use crate::connectors::{SinkSpec, SourceSpec};

/// One node of the `operators:` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// The nodes (or `node.side-output`s) whose events this one takes.
    #[serde(default)]
    pub inputs: Vec<InputSpec>,
    /// Inputs delivered to every subtask of a keyed `process` stage, for its
    /// broadcast state.
    #[serde(default)]
    pub broadcast: Vec<InputSpec>,
    /// The key function of a keyed stage's inputs (an input may name its own).
    #[serde(default)]
    pub key: Option<FunctionSpec>,
    /// Subtasks of a keyed stage (default: the pipeline's `parallelism`).
    #[serde(default)]
    pub parallelism: Option<u16>,
    /// A keyed stage's identity in snapshots (default: the node's name).
    #[serde(default)]
    pub uid: Option<String>,
    /// Where events come from (a source node has no inputs).
    #[serde(default)]
    pub source: Option<SourceSpec>,
    /// Where events go.
    #[serde(default)]
    pub sink: Option<SinkSpec>,
    /// A stateless map / filter / flat-map function.
    #[serde(default)]
    pub transform: Option<FunctionSpec>,
    /// A keyed process function.
    #[serde(default)]
    pub process: Option<FunctionSpec>,
    /// A keyed co-process function over exactly two inputs.
    #[serde(default)]
    pub co_process: Option<FunctionSpec>,
    /// Event-time windows (with `aggregate` or `window_process`).
    #[serde(default)]
    pub window: Option<WindowSpec>,
    /// The window aggregate function.
    #[serde(default)]
    pub aggregate: Option<FunctionSpec>,
    /// The window process function.
    #[serde(default)]
    pub window_process: Option<FunctionSpec>,
    /// A host-provided join of exactly two inputs.
    #[serde(default)]
    pub join: Option<JoinSpec>,
}

impl NodeSpec {
    /// The functions the node names, with their fields (`key`,
    /// `inputs.1.key`, `process`, …).
    pub fn functions(&self) -> Vec<(String, &FunctionSpec)> {
        let inputs = self.inputs.iter().enumerate();
        let keys =
            inputs.filter_map(|(i, input)| Some((format!("inputs.{i}.key"), input.key.as_ref()?)));
        let own = [
            ("key", self.key.as_ref()),
            ("transform", self.transform.as_ref()),
            ("process", self.process.as_ref()),
            ("co_process", self.co_process.as_ref()),
            ("aggregate", self.aggregate.as_ref()),
            ("window_process", self.window_process.as_ref()),
        ];
        own.into_iter().filter_map(|(field, f)| Some((field.to_string(), f?))).chain(keys).collect()
    }

    /// The functions the node names, to change (resolve, pin).
    pub fn functions_mut(&mut self) -> Vec<(String, &mut FunctionSpec)> {
        let inputs = self.inputs.iter_mut().enumerate();
        let keys =
            inputs.filter_map(|(i, input)| Some((format!("inputs.{i}.key"), input.key.as_mut()?)));
        let own = [
            ("key", self.key.as_mut()),
            ("transform", self.transform.as_mut()),
            ("process", self.process.as_mut()),
            ("co_process", self.co_process.as_mut()),
            ("aggregate", self.aggregate.as_mut()),
            ("window_process", self.window_process.as_mut()),
        ];
        own.into_iter().filter_map(|(field, f)| Some((field.to_string(), f?))).chain(keys).collect()
    }
}

/// An input of a node: `name`, `name.side-output`, or
/// `{ from: name, key: { … } }` to give this input its own key function.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// The node it comes from.
    pub from: String,
    /// The side output of that node, or `None` for its main output.
    pub output: Option<String>,
    /// This input's own key function.
    pub key: Option<FunctionSpec>,
}

impl<'de> Deserialize<'de> for InputSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// How an input may be written.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Name(String),
            Full {
                from: String,
                #[serde(default)]
                key: Option<FunctionSpec>,
            },
        }
        let (reference, key) = match Written::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "an input is `node`, `node.side-output` or `{ from: node, key: { … } }`",
            )
        })? {
            Written::Name(name) => (name, None),
            Written::Full { from, key } => (from, key),
        };
        let (from, output) = match reference.split_once('.') {
            Some((from, output)) => (from.to_string(), Some(output.to_string())),
            None => (reference, None),
        };
        Ok(InputSpec { from, output, key })
    }
}

impl std::fmt::Display for InputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.output {
            Some(output) => write!(f, "{}.{output}", self.from),
            None => write!(f, "{}", self.from),
        }
    }
}

/// A host-provided join of two keyed inputs.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum JoinSpec {
    /// Each event of the first input joins the second input's events of
    /// the same key with a timestamp in `[t + lower, t + upper]`.
    Interval {
        /// Lower bound, e.g. `0s` or `-5s`.
        #[serde(deserialize_with = "signed_millis")]
        lower: i64,
        /// Upper bound, e.g. `10m`.
        #[serde(deserialize_with = "signed_millis")]
        upper: i64,
        /// Side output for events too late to join; default: dropped, counted.
        #[serde(default)]
        late_output: Option<String>,
    },
    /// The events of both inputs with the same key in the same window
    /// join pairwise when the window closes.
    Window {
        /// The windows.
        window: WindowSpec,
    },
}

/// A duration with an optional sign (`-5s`), in milliseconds.
fn signed_millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let text = String::deserialize(deserializer)?;
    let (sign, body) = match text.trim().strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.trim()),
    };
    humantime::parse_duration(body)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .map(|ms| sign * ms)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a duration like 10m or -5s"))
        })
}
