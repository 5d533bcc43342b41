//! When a run records a checkpoint: before a dispatch wave that starts a writing node (a `step`,
//! or a git delivery, which commits; other verifiers only read) or enters an outermost
//! `par`/`map` group that holds one, and only while nothing else runs, so that the files and the
//! settled outcomes of the checkpoint belong to one consistent moment of the run.

use std::collections::HashMap;

use trellis_graph::{GraphNode, GraphSpec, NodeName};

/// What a checkpoint precedes: a writing node, or a group of parallel work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    Node(NodeName),
    Group(NodeName),
}

impl Before {
    /// The name of the node or group.
    pub fn name(&self) -> &NodeName {
        match self {
            Self::Node(name) | Self::Group(name) => name,
        }
    }

    /// `node` or `group`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Node(_) => "node",
            Self::Group(_) => "group",
        }
    }
}

/// The worker family of git delivery: verifiers by kind, but they commit in the workspace.
pub const DELIVERY_WORKERS: &str = "builtin.git-delivery.";

/// Whether `node` may change the workspace.
pub fn writes(node: &GraphNode) -> bool {
    match node {
        GraphNode::Step(_) => true,
        GraphNode::Verifier(verifier) => {
            verifier.exec.worker.as_str().starts_with(DELIVERY_WORKERS)
        }
        _ => false,
    }
}

/// What the policy knows about one executable node.
#[derive(Debug, Clone)]
struct Role {
    writer: bool,
    /// The outermost `par` or `map` around the node, when that group holds a writer.
    writing_group: Option<NodeName>,
}

/// The checkpoint policy of one graph.
#[derive(Debug, Clone, Default)]
pub struct CheckpointPolicy {
    roles: HashMap<NodeName, Role>,
}

impl CheckpointPolicy {
    /// Reads which executables write and which outermost parallel groups hold a writer.
    pub fn of(graph: &GraphSpec) -> Self {
        let mut policy = Self::default();
        policy.visit(&graph.root, None);
        policy
    }

    fn visit(&mut self, node: &GraphNode, group: Option<&NodeName>) {
        match node {
            GraphNode::Step(_) | GraphNode::Verifier(_) => {
                self.roles.insert(
                    node.name().clone(),
                    Role {
                        writer: writes(node),
                        writing_group: None,
                    },
                );
            }
            GraphNode::Par(_) | GraphNode::Map(_) if group.is_none() => {
                let name = node.name().clone();
                let mut writes = false;
                node.walk(&mut |inner| writes |= self::writes(inner));
                for child in node.children() {
                    self.visit(child, Some(&name));
                }
                if writes {
                    let mut members = Vec::new();
                    node.walk(&mut |inner| {
                        if let Some(exec) = inner.executable() {
                            members.push(exec.name.clone());
                        }
                    });
                    for member in members {
                        if let Some(role) = self.roles.get_mut(&member) {
                            role.writing_group = Some(name.clone());
                        }
                    }
                }
            }
            _ => {
                for child in node.children() {
                    self.visit(child, group);
                }
            }
        }
    }

    /// Whether `node` is a verifier that only reads (so it may work in a disposable copy).
    pub fn reads_only(&self, node: &NodeName) -> bool {
        self.roles.get(node).is_some_and(|role| !role.writer)
    }

    /// Whether a wave dispatching `nodes` (in dispatch order) is preceded by a checkpoint, and
    /// what it precedes. `quiet` says nothing else is running: while work is under way the
    /// workspace is between states, so no checkpoint is taken then.
    pub fn before_wave<'a>(
        &self,
        nodes: impl IntoIterator<Item = &'a NodeName>,
        quiet: bool,
    ) -> Option<Before> {
        if !quiet {
            return None;
        }
        let mut group = None;
        for node in nodes {
            let Some(role) = self.roles.get(node) else {
                continue;
            };
            if role.writer {
                return Some(Before::Node(node.clone()));
            }
            if group.is_none() {
                group = role.writing_group.clone();
            }
        }
        group.map(Before::Group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(root: serde_json::Value) -> GraphSpec {
        let document = serde_json::json!({
            "profile": "openengine.graph.full/v1",
            "initialInput": {"kind": "null"},
            "policy": {"policy": "policy.strict@1", "default": "deny"},
            "root": root,
        });
        GraphSpec::parse(&document, &trellis_graph::JsonPath::root()).expect("a graph")
    }

    fn exec(kind: &str, name: &str) -> serde_json::Value {
        let worker = match name {
            "deliver" => "builtin.git-delivery.push@1".to_owned(),
            _ => format!("command.{name}@1"),
        };
        let mut node = serde_json::json!({
            "kind": kind, "name": name, "worker": worker,
            "input": {"kind": "null"}, "output": {"kind": "null"},
            "inputBindings": [], "writeBindings": [], "attempts": 1,
        });
        if kind == "verifier" {
            node["signals"] = serde_json::json!({});
            node["diagnostic"] = serde_json::json!({"kind": "null"});
        }
        node
    }

    fn group(kind: &str, name: &str, members: Vec<serde_json::Value>) -> serde_json::Value {
        let mut node = serde_json::json!({
            "kind": kind, "name": name, "state": {"kind": "null"}, "promotedStatePaths": [],
        });
        if kind == "par" {
            node["branches"] = serde_json::Value::Array(members);
            node["join"] = serde_json::json!({"kind": "all"});
        } else {
            node["children"] = serde_json::Value::Array(members);
        }
        node
    }

    fn name(text: &str) -> NodeName {
        NodeName::new(text).unwrap()
    }

    #[test]
    fn writers_outside_groups_are_checkpointed_and_verifiers_are_not() {
        let policy = CheckpointPolicy::of(&graph(group(
            "seq",
            "root",
            vec![
                exec("step", "work"),
                exec("verifier", "review"),
                exec("verifier", "deliver"),
            ],
        )));
        assert_eq!(
            policy.before_wave([&name("deliver")], true),
            Some(Before::Node(name("deliver"))),
            "delivery commits in the workspace"
        );
        assert_eq!(
            policy.before_wave([&name("work")], true),
            Some(Before::Node(name("work")))
        );
        assert_eq!(policy.before_wave([&name("review")], true), None);
        assert!(policy.reads_only(&name("review")));
        assert!(!policy.reads_only(&name("deliver")) && !policy.reads_only(&name("work")));
        assert_eq!(
            policy.before_wave([&name("work")], false),
            None,
            "not while other work runs"
        );
    }

    #[test]
    fn an_outermost_parallel_group_with_a_writer_is_checkpointed_as_a_group() {
        let root = group(
            "seq",
            "root",
            vec![
                group(
                    "par",
                    "reviews",
                    vec![exec("verifier", "a"), exec("verifier", "b")],
                ),
                group(
                    "par",
                    "fanout",
                    vec![
                        exec("verifier", "check"),
                        group(
                            "par",
                            "inner",
                            vec![exec("step", "edit"), exec("verifier", "c")],
                        ),
                    ],
                ),
            ],
        );
        let policy = CheckpointPolicy::of(&graph(root));
        assert_eq!(policy.before_wave([&name("a"), &name("b")], true), None);
        assert_eq!(
            policy.before_wave([&name("check"), &name("edit")], true),
            Some(Before::Node(name("edit"))),
            "a wave that starts a writer names it"
        );
        assert_eq!(
            policy.before_wave([&name("c")], true),
            Some(Before::Group(name("fanout"))),
            "a verifier opening a writing group names the group"
        );
        assert_eq!(policy.before_wave([&name("unknown")], true), None);
    }
}
