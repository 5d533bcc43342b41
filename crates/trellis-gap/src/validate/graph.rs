//! The edge graph of a workflow or subgraph: forward adjacency and reachability (shared by the
//! subgraph rules and the executor's loop re-entry).

use crate::model::ConditionalEdge;
use indexmap::{IndexMap, IndexSet};

/// Forward adjacency over static edges plus every conditional mapping edge.
pub(crate) fn adjacency<'a>(
    edges: &'a [(String, String)],
    conditional: &'a IndexMap<String, ConditionalEdge>,
) -> IndexMap<&'a str, Vec<&'a str>> {
    let mut adj: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for (src, dst) in edges {
        adj.entry(src.as_str()).or_default().push(dst.as_str());
    }
    for (src, ce) in conditional {
        for target in ce.mapping.values() {
            adj.entry(src.as_str()).or_default().push(target.as_str());
        }
    }
    adj
}

/// Every name reachable from `start` (excluding `start` itself unless revisited).
pub(crate) fn reachable_from<'a>(
    adj: &IndexMap<&'a str, Vec<&'a str>>,
    start: &'a str,
) -> IndexSet<&'a str> {
    let mut seen = IndexSet::new();
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for &next in adj.get(node).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(next) {
                stack.push(next);
            }
        }
    }
    seen
}
