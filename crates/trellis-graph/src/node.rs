//! The nine GraphSpec node kinds: executables (step, verifier), groups (seq, choice, par, loop,
//! map) and terminals (succeed, fail).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ident::{
    EnumSet, FailReason, FieldName, FieldPath, NodeInstructions, NodeName, PositiveInteger,
    WorkerRef, non_empty_vec,
};
use crate::json::{At, Json, Obj, ParseError, array_of, tagged, unknown_variant};
use crate::limits::MAX_COLLECTION_ITEMS;
use crate::payload::PayloadType;
use crate::selector::{DataSelector, Guard, InputBinding, Join, WriteBinding, variant};

/// A node of the graph tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GraphNode {
    Step(StepNode),
    Verifier(VerifierNode),
    Seq(SeqNode),
    Choice(ChoiceNode),
    Par(ParNode),
    Loop(LoopNode),
    Map(MapNode),
    Succeed(SucceedNode),
    Fail(FailNode),
}

/// The fields every executable (step or verifier) carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepNode {
    pub name: NodeName,
    pub worker: WorkerRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<NodeInstructions>,
    pub input: PayloadType,
    pub output: PayloadType,
    pub input_bindings: Vec<InputBinding>,
    pub write_bindings: Vec<WriteBinding>,
    /// Absent means no deadline; exported reference templates omit it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<PositiveInteger>,
    pub attempts: PositiveInteger,
}

/// A step whose outcome also carries closed signals and a typed diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifierNode {
    #[serde(flatten)]
    pub exec: StepNode,
    pub signals: BTreeMap<FieldName, EnumSet>,
    pub diagnostic: PayloadType,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeqNode {
    pub name: NodeName,
    pub state: PayloadType,
    pub children: Vec<GraphNode>,
    pub promoted_state_paths: Vec<FieldPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChoiceBranch {
    pub when: Guard,
    pub node: GraphNode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceNode {
    pub name: NodeName,
    pub state: PayloadType,
    pub branches: Vec<ChoiceBranch>,
    /// Serialized as `null` when absent.
    pub otherwise: Option<Box<GraphNode>>,
    pub promoted_state_paths: Vec<FieldPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParNode {
    pub name: NodeName,
    pub state: PayloadType,
    pub branches: Vec<GraphNode>,
    pub promoted_state_paths: Vec<FieldPath>,
    pub join: Join,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopNode {
    pub name: NodeName,
    pub state: PayloadType,
    pub body: Box<GraphNode>,
    pub max_iterations: PositiveInteger,
    /// A path into the initial input whose positive integer value, when present, lowers the
    /// round count below `maxIterations` (the reference's auto-research template uses it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations_input: Option<FieldPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Guard>,
    pub promoted_state_paths: Vec<FieldPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MapNode {
    pub name: NodeName,
    pub state: PayloadType,
    pub body: Box<GraphNode>,
    pub over: DataSelector,
    pub max_items: PositiveInteger,
    pub promoted_state_paths: Vec<FieldPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SucceedNode {
    pub name: NodeName,
    pub output: PayloadType,
    pub bindings: Vec<InputBinding>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailNode {
    pub name: NodeName,
    pub reason: FailReason,
}

const NODE_KINDS: [&str; 9] = [
    "step", "verifier", "seq", "choice", "par", "loop", "map", "succeed", "fail",
];
const STEP_FIELDS: [&str; 9] = [
    "name",
    "worker",
    "instructions",
    "input",
    "output",
    "inputBindings",
    "writeBindings",
    "timeoutMs",
    "attempts",
];
const VERIFIER_FIELDS: [&str; 11] = [
    "name",
    "worker",
    "instructions",
    "input",
    "output",
    "inputBindings",
    "writeBindings",
    "timeoutMs",
    "attempts",
    "signals",
    "diagnostic",
];

fn payload(obj: &Obj, key: &str) -> Result<PayloadType, ParseError> {
    PayloadType::read(obj.required(key)?, &obj.path(key))
}

fn name(obj: &Obj) -> Result<NodeName, ParseError> {
    NodeName::read(obj.required("name")?, &obj.path("name"))
}

fn promoted(obj: &Obj) -> Result<Vec<FieldPath>, ParseError> {
    array_of(
        obj.required("promotedStatePaths")?,
        &obj.path("promotedStatePaths"),
        FieldPath::read,
    )
}

fn child(obj: &Obj, key: &str) -> Result<Box<GraphNode>, ParseError> {
    Ok(Box::new(GraphNode::read(
        obj.required(key)?,
        &obj.path(key),
    )?))
}

fn step_fields(obj: &Obj) -> Result<StepNode, ParseError> {
    Ok(StepNode {
        name: name(obj)?,
        worker: WorkerRef::read(obj.required("worker")?, &obj.path("worker"))?,
        instructions: obj
            .optional("instructions")
            .map(|v| NodeInstructions::read(v, &obj.path("instructions")))
            .transpose()?,
        input: payload(obj, "input")?,
        output: payload(obj, "output")?,
        input_bindings: InputBinding::read_list(
            obj.required("inputBindings")?,
            &obj.path("inputBindings"),
        )?,
        write_bindings: WriteBinding::read_list(
            obj.required("writeBindings")?,
            &obj.path("writeBindings"),
        )?,
        timeout_ms: obj
            .optional("timeoutMs")
            .map(|v| PositiveInteger::read(v, &obj.path("timeoutMs")))
            .transpose()?,
        attempts: PositiveInteger::read(obj.required("attempts")?, &obj.path("attempts"))?,
    })
}

/// Parses an identifier-keyed map of signals.
/// A non-empty list of child nodes, exactly as [`non_empty_vec`] reads it (same checks, same
/// first error in document order); a large graph's root sequence holds most of its nodes, so a
/// long list is read in two halves at once.
fn node_list(value: &Json, at: &At) -> Result<Vec<GraphNode>, ParseError> {
    match value {
        Json::Array(items) if (1..=MAX_COLLECTION_ITEMS).contains(&items.len()) => {
            trellis_json::parallel::try_map_in_halves(items, |i, item| {
                GraphNode::read(item, &at.index(i))
            })
        }
        _ => non_empty_vec(value, at, GraphNode::read),
    }
}

pub(crate) fn read_signals(
    value: &Json,
    at: &At,
) -> Result<BTreeMap<FieldName, EnumSet>, ParseError> {
    let map = value
        .as_object()
        .ok_or_else(|| crate::json::invalid_type(value, "a map", at))?;
    let mut signals = BTreeMap::new();
    for (key, labels) in map {
        let key_at = at.key(key);
        let field = FieldName::new(key).map_err(|m| ParseError::new(m, &key_at))?;
        signals.insert(field, EnumSet::read(labels, &key_at)?);
    }
    Ok(signals)
}

impl GraphNode {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = tagged(value, at, "GraphNode")?;
        let kind = obj.tag("kind", "GraphNode")?;
        Ok(match kind {
            "step" => {
                variant(&obj, "kind", &STEP_FIELDS)?;
                Self::Step(step_fields(&obj)?)
            }
            "verifier" => {
                variant(&obj, "kind", &VERIFIER_FIELDS)?;
                Self::Verifier(VerifierNode {
                    exec: step_fields(&obj)?,
                    signals: read_signals(obj.required("signals")?, &obj.path("signals"))?,
                    diagnostic: payload(&obj, "diagnostic")?,
                })
            }
            "seq" => {
                variant(
                    &obj,
                    "kind",
                    &["name", "state", "children", "promotedStatePaths"],
                )?;
                Self::Seq(SeqNode {
                    name: name(&obj)?,
                    state: payload(&obj, "state")?,
                    children: node_list(obj.required("children")?, &obj.path("children"))?,
                    promoted_state_paths: promoted(&obj)?,
                })
            }
            "choice" => {
                variant(
                    &obj,
                    "kind",
                    &[
                        "name",
                        "state",
                        "branches",
                        "otherwise",
                        "promotedStatePaths",
                    ],
                )?;
                Self::Choice(ChoiceNode {
                    name: name(&obj)?,
                    state: payload(&obj, "state")?,
                    branches: non_empty_vec(
                        obj.required("branches")?,
                        &obj.path("branches"),
                        ChoiceBranch::read,
                    )?,
                    otherwise: obj
                        .optional("otherwise")
                        .map(|v| GraphNode::read(v, &obj.path("otherwise")).map(Box::new))
                        .transpose()?,
                    promoted_state_paths: promoted(&obj)?,
                })
            }
            "par" => {
                variant(
                    &obj,
                    "kind",
                    &["name", "state", "branches", "promotedStatePaths", "join"],
                )?;
                Self::Par(ParNode {
                    name: name(&obj)?,
                    state: payload(&obj, "state")?,
                    branches: node_list(obj.required("branches")?, &obj.path("branches"))?,
                    promoted_state_paths: promoted(&obj)?,
                    join: Join::read(obj.required("join")?, &obj.path("join"))?,
                })
            }
            "loop" => {
                variant(
                    &obj,
                    "kind",
                    &[
                        "name",
                        "state",
                        "body",
                        "maxIterations",
                        "maxIterationsInput",
                        "until",
                        "promotedStatePaths",
                    ],
                )?;
                Self::Loop(LoopNode {
                    name: name(&obj)?,
                    state: payload(&obj, "state")?,
                    body: child(&obj, "body")?,
                    max_iterations: PositiveInteger::read(
                        obj.required("maxIterations")?,
                        &obj.path("maxIterations"),
                    )?,
                    max_iterations_input: obj
                        .optional("maxIterationsInput")
                        .map(|v| FieldPath::read(v, &obj.path("maxIterationsInput")))
                        .transpose()?,
                    until: obj
                        .optional("until")
                        .map(|v| Guard::read(v, &obj.path("until")))
                        .transpose()?,
                    promoted_state_paths: promoted(&obj)?,
                })
            }
            "map" => {
                variant(
                    &obj,
                    "kind",
                    &[
                        "name",
                        "state",
                        "body",
                        "over",
                        "maxItems",
                        "promotedStatePaths",
                    ],
                )?;
                Self::Map(MapNode {
                    name: name(&obj)?,
                    state: payload(&obj, "state")?,
                    body: child(&obj, "body")?,
                    over: DataSelector::read(obj.required("over")?, &obj.path("over"))?,
                    max_items: PositiveInteger::read(
                        obj.required("maxItems")?,
                        &obj.path("maxItems"),
                    )?,
                    promoted_state_paths: promoted(&obj)?,
                })
            }
            "succeed" => {
                variant(&obj, "kind", &["name", "output", "bindings"])?;
                Self::Succeed(SucceedNode {
                    name: name(&obj)?,
                    output: payload(&obj, "output")?,
                    bindings: InputBinding::read_list(
                        obj.required("bindings")?,
                        &obj.path("bindings"),
                    )?,
                })
            }
            "fail" => {
                variant(&obj, "kind", &["name", "reason"])?;
                Self::Fail(FailNode {
                    name: name(&obj)?,
                    reason: FailReason::read(obj.required("reason")?, &obj.path("reason"))?,
                })
            }
            other => return Err(unknown_variant(other, &NODE_KINDS, &obj.path("kind"))),
        })
    }

    pub fn name(&self) -> &NodeName {
        match self {
            Self::Step(n) => &n.name,
            Self::Verifier(n) => &n.exec.name,
            Self::Seq(n) => &n.name,
            Self::Choice(n) => &n.name,
            Self::Par(n) => &n.name,
            Self::Loop(n) => &n.name,
            Self::Map(n) => &n.name,
            Self::Succeed(n) => &n.name,
            Self::Fail(n) => &n.name,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Step(_) => "step",
            Self::Verifier(_) => "verifier",
            Self::Seq(_) => "seq",
            Self::Choice(_) => "choice",
            Self::Par(_) => "par",
            Self::Loop(_) => "loop",
            Self::Map(_) => "map",
            Self::Succeed(_) => "succeed",
            Self::Fail(_) => "fail",
        }
    }

    /// The executable fields of a step or verifier.
    pub fn executable(&self) -> Option<&StepNode> {
        match self {
            Self::Step(n) => Some(n),
            Self::Verifier(n) => Some(&n.exec),
            _ => None,
        }
    }

    /// The declared state of a group node.
    pub fn group_state(&self) -> Option<&PayloadType> {
        match self {
            Self::Seq(n) => Some(&n.state),
            Self::Choice(n) => Some(&n.state),
            Self::Par(n) => Some(&n.state),
            Self::Loop(n) => Some(&n.state),
            Self::Map(n) => Some(&n.state),
            _ => None,
        }
    }

    /// The promoted state paths of a group node (empty for other kinds).
    pub fn promoted_state_paths(&self) -> &[FieldPath] {
        match self {
            Self::Seq(n) => &n.promoted_state_paths,
            Self::Choice(n) => &n.promoted_state_paths,
            Self::Par(n) => &n.promoted_state_paths,
            Self::Loop(n) => &n.promoted_state_paths,
            Self::Map(n) => &n.promoted_state_paths,
            _ => &[],
        }
    }

    /// Direct children in authored pre-order: seq children; choice branches then otherwise;
    /// par branches; loop/map body.
    pub fn children(&self) -> Vec<&GraphNode> {
        match self {
            Self::Seq(n) => n.children.iter().collect(),
            Self::Choice(n) => n
                .branches
                .iter()
                .map(|b| &b.node)
                .chain(n.otherwise.as_deref())
                .collect(),
            Self::Par(n) => n.branches.iter().collect(),
            Self::Loop(n) => vec![&*n.body],
            Self::Map(n) => vec![&*n.body],
            _ => Vec::new(),
        }
    }

    /// Calls `visit` on this node and every descendant in authored pre-order.
    pub fn walk<'a>(&'a self, visit: &mut impl FnMut(&'a GraphNode)) {
        visit(self);
        for child in self.children() {
            child.walk(visit);
        }
    }
}

impl ChoiceBranch {
    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "ChoiceBranch", &["when", "node"])?;
        Ok(Self {
            when: Guard::read(obj.required("when")?, &obj.path("when"))?,
            node: GraphNode::read(obj.required("node")?, &obj.path("node"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::GraphNode;

    fn seq_of(children: Vec<Value>) -> String {
        json!({"kind": "seq", "name": "root", "state": {"kind": "null"},
               "promotedStatePaths": [], "children": children})
        .to_string()
    }

    fn fail(i: usize) -> Value {
        json!({"kind": "fail", "name": format!("f{i}"), "reason": "stopped"})
    }

    /// Long child lists (read in two halves) give the nodes, and the first error, of a read
    /// in order; an empty list is refused as before.
    #[test]
    fn long_child_lists_read_like_one_thread() {
        let children: Vec<Value> = (0..100).map(fail).collect();
        let parsed = GraphNode::from_json_str(&seq_of(children.clone()));
        let Ok(GraphNode::Seq(seq)) = parsed else {
            panic!("a seq: {parsed:?}")
        };
        let names: Vec<&str> = seq.children.iter().map(|c| c.name().as_str()).collect();
        let expected: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        assert_eq!(names, expected);
        for bad in [[10, 80], [60, 90], [49, 50]] {
            let mut broken = children.clone();
            for i in bad {
                broken[i]["name"] = json!("");
            }
            let error = GraphNode::from_json_str(&seq_of(broken)).unwrap_err();
            assert_eq!(
                error.location.to_string(),
                format!("$.children[{}].name", bad[0])
            );
        }
        let empty = GraphNode::from_json_str(&seq_of(Vec::new())).unwrap_err();
        assert_eq!(empty.message, "non-empty collection must not be empty");
    }
}
