//! In-memory data model of a loaded GaP v3 workflow (key order preserved as written).

use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Virtual entry node name.
pub const START: &str = "START";
/// Virtual exit node name.
pub const END: &str = "END";
/// Reserved pseudo-node holding a scope's bound inputs.
pub const IN: &str = "in";
/// Reserved input name for the live observation stream.
pub const OBSERVATION_STREAM: &str = "observation_stream";

/// The six node kinds of GaP v3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeType {
    Tool,
    Script,
    Router,
    Subgraph,
    End,
    Noop,
}

impl NodeType {
    /// Parses the `type` string of a node.
    pub fn parse(text: &str) -> Option<NodeType> {
        Some(match text {
            "tool" => NodeType::Tool,
            "script" => NodeType::Script,
            "router" => NodeType::Router,
            "subgraph" => NodeType::Subgraph,
            "end" => NodeType::End,
            "noop" => NodeType::Noop,
            _ => return None,
        })
    }

    /// The `type` string as written in `workflow.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Tool => "tool",
            NodeType::Script => "script",
            NodeType::Router => "router",
            NodeType::Subgraph => "subgraph",
            NodeType::End => "end",
            NodeType::Noop => "noop",
        }
    }

    /// Names of the valid types, in the reference's order.
    pub const ALL: [&'static str; 6] = ["tool", "script", "router", "subgraph", "end", "noop"];
}

/// A `{"$ref": "node.field..."}` data-flow reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub path: String,
}

impl Ref {
    /// The dot-separated parts of the path.
    pub fn parts(&self) -> Vec<&str> {
        self.path.split('.').collect()
    }

    /// The first path segment (the node or `in`).
    pub fn head(&self) -> &str {
        self.path.split('.').next().unwrap_or("")
    }
}

/// A node input: a reference, a list resolved element-wise, or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    Ref(Ref),
    List(Vec<InputValue>),
    Literal(Value),
}

/// Final status of an `end` node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndStatus {
    Success,
    Failure,
}

impl EndStatus {
    /// The status string (`success` / `failure`).
    pub fn as_str(self) -> &'static str {
        match self {
            EndStatus::Success => "success",
            EndStatus::Failure => "failure",
        }
    }
}

/// A recovery tool call of an `end` node (inputs are literal, never `$ref`-parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub inputs: Map<String, Value>,
}

/// One node declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub node_type: NodeType,
    pub inputs: IndexMap<String, InputValue>,
    pub streaming: bool,
    /// Raw `script` value: the loader only checks presence, like the reference.
    pub script: Option<Value>,
    /// Raw `tool` value: the loader only checks presence, like the reference.
    pub tool: Option<Value>,
    pub subgraph_ref: Option<String>,
    pub status: Option<EndStatus>,
    pub recovery: Vec<ToolCall>,
}

impl NodeDef {
    /// The tool name when it is a string.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool.as_ref().and_then(Value::as_str)
    }

    /// The script path when it is a string.
    pub fn script_path(&self) -> Option<&str> {
        self.script.as_ref().and_then(Value::as_str)
    }
}

/// Conditional dispatch of one source node.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionalEdge {
    pub router_field: Option<String>,
    pub mapping: IndexMap<String, String>,
}

/// How a subgraph's exit value is computed and which values count as success.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitDecl {
    pub router_field: Option<String>,
    pub success_values: Vec<String>,
}

/// A named subgraph definition.
#[derive(Debug, Clone, PartialEq)]
pub struct SubgraphDef {
    pub skill: String,
    pub inputs: IndexMap<String, String>,
    pub outputs: IndexMap<String, Ref>,
    pub nodes: IndexMap<String, NodeDef>,
    pub edges: Vec<(String, String)>,
    pub conditional_edges: IndexMap<String, ConditionalEdge>,
    pub exit: ExitDecl,
    pub on_error: Option<String>,
}

/// A loaded workflow; `workflow_dir` is where script paths resolve.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub version: Value,
    pub meta: Map<String, Value>,
    pub nodes: IndexMap<String, NodeDef>,
    pub edges: Vec<(String, String)>,
    pub conditional_edges: IndexMap<String, ConditionalEdge>,
    pub subgraphs: IndexMap<String, SubgraphDef>,
    pub workflow_dir: PathBuf,
}
