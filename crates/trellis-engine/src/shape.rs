//! Static facts about a graph's tree that both reducers consult: every node by name, its map
//! depth, the names in its subtree, and the round count of every loop.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use trellis_graph::{GraphNode, GraphSpec, LoopNode, NodeName, StepNode};

use crate::paths::select;

/// Index of a verified graph's nodes.
pub(crate) struct Shape<'g> {
    nodes: HashMap<&'g str, NodeFacts<'g>>,
}

struct NodeFacts<'g> {
    node: &'g GraphNode,
    /// Number of maps enclosing the node (a map's own items are one deeper).
    map_depth: usize,
    /// The node and all its descendants.
    subtree: HashSet<&'g str>,
    /// For loops: the effective round count.
    rounds: u64,
}

impl<'g> Shape<'g> {
    pub(crate) fn new(graph: &'g GraphSpec, initial_input: &Value) -> Self {
        let mut shape = Shape {
            nodes: HashMap::new(),
        };
        shape.index(&graph.root, 0, initial_input);
        shape
    }

    fn index(&mut self, node: &'g GraphNode, map_depth: usize, input: &Value) -> Vec<&'g str> {
        let child_depth = map_depth + usize::from(matches!(node, GraphNode::Map(_)));
        let mut subtree = vec![node.name().as_str()];
        for child in node.children() {
            subtree.extend(self.index(child, child_depth, input));
        }
        let rounds = match node {
            GraphNode::Loop(l) => loop_rounds(l, input),
            _ => 0,
        };
        self.nodes.insert(
            node.name().as_str(),
            NodeFacts {
                node,
                map_depth,
                subtree: subtree.iter().copied().collect(),
                rounds,
            },
        );
        subtree
    }

    pub(crate) fn node(&self, name: &str) -> Option<&'g GraphNode> {
        self.nodes.get(name).map(|f| f.node)
    }

    /// The executable named `name`, with whether it is a verifier.
    pub(crate) fn executable(&self, name: &str) -> Option<(&'g StepNode, bool)> {
        match self.node(name)? {
            GraphNode::Step(s) => Some((s, false)),
            GraphNode::Verifier(v) => Some((&v.exec, true)),
            _ => None,
        }
    }

    pub(crate) fn map_depth(&self, name: &str) -> usize {
        self.nodes.get(name).map_or(0, |f| f.map_depth)
    }

    /// True when `name` is `root` or one of its descendants.
    pub(crate) fn in_subtree(&self, root: &NodeName, name: &str) -> bool {
        self.nodes
            .get(root.as_str())
            .is_some_and(|f| f.subtree.contains(name))
    }

    pub(crate) fn rounds(&self, name: &NodeName) -> u64 {
        self.nodes.get(name.as_str()).map_or(1, |f| f.rounds)
    }
}

/// A loop runs `maxIterations` rounds unless `maxIterationsInput` names a positive integer in
/// the initial input, which sets the count (as in the reference, Zeroshot 10.19.1: admission
/// verifies the graph's bounds with that count).
pub(crate) fn loop_rounds(node: &LoopNode, initial_input: &Value) -> u64 {
    node.max_iterations_input
        .as_ref()
        .and_then(|path| select(initial_input, path))
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1)
        .unwrap_or_else(|| node.max_iterations.get())
}
