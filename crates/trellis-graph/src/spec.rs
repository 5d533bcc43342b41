//! The GraphSpec document, the compiled IR with its structural bounds, and graph diagnostics.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ident::{FieldName, FieldPath, NodeName, PolicyRef, PositiveInteger, non_empty_vec};
use crate::json::Json;
use crate::json::{At, Obj, ParseError, tagged, unknown_variant};
use crate::node::GraphNode;
use crate::payload::PayloadType;
use crate::selector::variant;

/// The contract a graph document claims to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum GraphProfile {
    #[serde(rename = "openengine.graph.full/v1")]
    Full,
    #[serde(rename = "openengine.graph.single-worker/v1")]
    SingleWorker,
}

impl GraphProfile {
    pub const FULL: &'static str = "openengine.graph.full/v1";
    pub const SINGLE_WORKER: &'static str = "openengine.graph.single-worker/v1";

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        match value.as_str() {
            Some(Self::FULL) => Ok(Self::Full),
            Some(Self::SINGLE_WORKER) => Ok(Self::SingleWorker),
            Some(other) => Err(unknown_variant(
                other,
                &[Self::FULL, Self::SINGLE_WORKER],
                at,
            )),
            None => Err(crate::json::invalid_type(value, "a graph profile", at)),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => Self::FULL,
            Self::SingleWorker => Self::SINGLE_WORKER,
        }
    }
}

/// The capability policy a graph runs under; `default` is always `deny`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyBinding {
    pub policy: PolicyRef,
    pub default: PolicyDefault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDefault {
    Deny,
}

impl PolicyBinding {
    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "PolicyBinding", &["policy", "default"])?;
        let policy = PolicyRef::read(obj.required("policy")?, &obj.path("policy"))?;
        match obj.string("default")? {
            "deny" => Ok(Self {
                policy,
                default: PolicyDefault::Deny,
            }),
            other => Err(unknown_variant(other, &["deny"], &obj.path("default"))),
        }
    }
}

/// A typed agent-workflow graph, as authored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphSpec {
    pub profile: GraphProfile,
    pub initial_input: PayloadType,
    pub policy: PolicyBinding,
    pub root: GraphNode,
}

const SPEC_FIELDS: [&str; 4] = ["profile", "initialInput", "policy", "root"];

impl GraphSpec {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "GraphSpec", &SPEC_FIELDS)?;
        Self::parse_fields(&obj)
    }

    fn parse_fields(obj: &Obj) -> Result<Self, ParseError> {
        Ok(Self {
            profile: GraphProfile::read(obj.required("profile")?, &obj.path("profile"))?,
            initial_input: PayloadType::read(
                obj.required("initialInput")?,
                &obj.path("initialInput"),
            )?,
            policy: PolicyBinding::read(obj.required("policy")?, &obj.path("policy"))?,
            root: GraphNode::read(obj.required("root")?, &obj.path("root"))?,
        })
    }

    pub fn to_value(&self) -> Value {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// How termination is witnessed: an acyclic order of all nodes, or a ranking of loops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TerminationWitness {
    Acyclic {
        order: Vec<NodeName>,
    },
    #[serde(rename_all = "camelCase")]
    Bounded {
        ranking: Vec<FieldPath>,
        max_iterations: PositiveInteger,
    },
}

impl TerminationWitness {
    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = tagged(value, at, "TerminationWitness")?;
        match obj.tag("kind", "TerminationWitness")? {
            "acyclic" => {
                variant(&obj, "kind", &["order"])?;
                Ok(Self::Acyclic {
                    order: non_empty_vec(
                        obj.required("order")?,
                        &obj.path("order"),
                        NodeName::read,
                    )?,
                })
            }
            "bounded" => {
                variant(&obj, "kind", &["ranking", "maxIterations"])?;
                Ok(Self::Bounded {
                    ranking: non_empty_vec(
                        obj.required("ranking")?,
                        &obj.path("ranking"),
                        FieldPath::read,
                    )?,
                    max_iterations: PositiveInteger::read(
                        obj.required("maxIterations")?,
                        &obj.path("maxIterations"),
                    )?,
                })
            }
            other => Err(unknown_variant(
                other,
                &["acyclic", "bounded"],
                &obj.path("kind"),
            )),
        }
    }
}

/// Static bounds proven by the verifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StructuralBounds {
    pub termination: TerminationWitness,
    pub max_node_executions: PositiveInteger,
    pub peak_concurrency: PositiveInteger,
    pub attempts_per_node: BTreeMap<NodeName, PositiveInteger>,
}

impl StructuralBounds {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "StructuralBounds",
            &[
                "termination",
                "maxNodeExecutions",
                "peakConcurrency",
                "attemptsPerNode",
            ],
        )?;
        let mut attempts = BTreeMap::new();
        let attempts_at = obj.path("attemptsPerNode");
        for (key, count) in obj.object("attemptsPerNode")? {
            let key_at = attempts_at.key(key);
            let node = NodeName::new(key).map_err(|m| ParseError::new(m, &key_at))?;
            attempts.insert(node, PositiveInteger::read(count, &key_at)?);
        }
        Ok(Self {
            termination: TerminationWitness::read(
                obj.required("termination")?,
                &obj.path("termination"),
            )?,
            max_node_executions: PositiveInteger::read(
                obj.required("maxNodeExecutions")?,
                &obj.path("maxNodeExecutions"),
            )?,
            peak_concurrency: PositiveInteger::read(
                obj.required("peakConcurrency")?,
                &obj.path("peakConcurrency"),
            )?,
            attempts_per_node: attempts,
        })
    }
}

/// A verified graph: the authored graph re-serialized plus its bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompiledGraphIr {
    pub profile: GraphProfile,
    pub initial_input: PayloadType,
    pub policy: PolicyBinding,
    pub root: GraphNode,
    pub bounds: StructuralBounds,
}

impl CompiledGraphIr {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "CompiledGraphIr",
            &["profile", "initialInput", "policy", "root", "bounds"],
        )?;
        let spec = GraphSpec::parse_fields(&obj)?;
        Ok(Self {
            profile: spec.profile,
            initial_input: spec.initial_input,
            policy: spec.policy,
            root: spec.root,
            bounds: StructuralBounds::read(obj.required("bounds")?, &obj.path("bounds"))?,
        })
    }

    pub fn from_spec(spec: GraphSpec, bounds: StructuralBounds) -> Self {
        Self {
            profile: spec.profile,
            initial_input: spec.initial_input,
            policy: spec.policy,
            root: spec.root,
            bounds,
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

crate::json::wire_entry_points!(GraphSpec, CompiledGraphIr, GraphNode);

/// How bad a diagnostic is; the verifier only emits `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// The closed catalogue of diagnostic codes, declared in rank order (used for sorting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticCode {
    SchemaSafety,
    Reachability,
    ChoiceExhaustiveness,
    LoopExitSatisfiability,
    MissingBound,
    WriteConflict,
    CeilingExceeded,
    CyclicReference,
    UndefinedRead,
    InvalidGraphShape,
}

impl DiagnosticCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SchemaSafety => "schema_safety",
            Self::Reachability => "reachability",
            Self::ChoiceExhaustiveness => "choice_exhaustiveness",
            Self::LoopExitSatisfiability => "loop_exit_satisfiability",
            Self::MissingBound => "missing_bound",
            Self::WriteConflict => "write_conflict",
            Self::CeilingExceeded => "ceiling_exceeded",
            Self::CyclicReference => "cyclic_reference",
            Self::UndefinedRead => "undefined_read",
            Self::InvalidGraphShape => "invalid_graph_shape",
        }
    }
}

/// One step of a diagnostic's location inside the graph document.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PathSegment {
    Field { name: FieldName },
    Index { index: u32 },
    Node { name: NodeName },
}

impl PathSegment {
    pub fn field(name: &'static str) -> Self {
        Self::Field {
            name: FieldName::from_static(name),
        }
    }

    pub fn index(index: usize) -> Self {
        Self::Index {
            index: u32::try_from(index).unwrap_or(u32::MAX),
        }
    }

    pub fn node(name: &NodeName) -> Self {
        Self::Node { name: name.clone() }
    }

    fn sort_key(&self) -> (u8, &str, u32) {
        match self {
            Self::Field { name } => (0, name.as_str(), 0),
            Self::Index { index } => (1, "", *index),
            Self::Node { name } => (2, name.as_str(), 0),
        }
    }
}

/// A verifier finding: what is wrong, where, and which nodes it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GraphDiagnostic {
    pub severity: Severity,
    pub code: DiagnosticCode,
    pub message: String,
    pub path: Vec<PathSegment>,
    pub related_nodes: Vec<NodeName>,
}

impl GraphDiagnostic {
    /// The canonical ordering: path (shorter prefix first), code rank, message, related nodes.
    pub fn canonical_cmp(&self, other: &Self) -> Ordering {
        let paths = self
            .path
            .iter()
            .map(PathSegment::sort_key)
            .cmp(other.path.iter().map(PathSegment::sort_key));
        paths
            .then(self.code.cmp(&other.code))
            .then_with(|| self.message.as_bytes().cmp(other.message.as_bytes()))
            .then_with(|| self.related_nodes.cmp(&other.related_nodes))
    }
}

crate::json::value_entry_point!(GraphProfile, StructuralBounds);
