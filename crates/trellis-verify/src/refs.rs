//! Pass 6, the reference graph (§6.11): unknown names, cycles, and the acyclic order (ties
//! broken by authored pre-order).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use trellis_graph::{DiagnosticCode, NodeName};

use crate::diag::Diags;
use crate::index::Index;
use crate::nodeset::NodeId;

/// Reports unknown references and cycles; returns the order of all node names when acyclic.
pub(crate) fn order<'g>(
    index: &Index<'g>,
    references: impl IntoIterator<Item = (NodeId, &'g NodeName)>,
    diags: &mut Diags,
) -> Option<Vec<NodeName>> {
    let mut depends: BTreeMap<NodeId, BTreeSet<NodeId>> = BTreeMap::new();
    let mut blocked: BTreeSet<NodeId> = BTreeSet::new();
    let mut unknown: BTreeSet<(NodeId, &'g NodeName)> = BTreeSet::new();
    for (referrer, target) in references {
        let referrer = index.entry(referrer).canon;
        match index.lookup(target.as_str()) {
            Some(t) if t == referrer => {}
            Some(t) => {
                depends.entry(referrer).or_default().insert(t);
            }
            None => {
                blocked.insert(referrer);
                unknown.insert((referrer, target));
            }
        }
    }
    for (referrer, target) in &unknown {
        diags.emit(
            DiagnosticCode::UndefinedRead,
            format!("reference names unknown node {target}"),
            index.path(*referrer),
            [*target],
        );
    }
    let nodes: Vec<NodeId> = (0..index.len() as NodeId)
        .filter(|id| index.entry(*id).canon == *id)
        .collect();
    let mut waiting: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut users: BTreeMap<NodeId, Vec<NodeId>> = BTreeMap::new();
    for (referrer, deps) in &depends {
        waiting.insert(*referrer, deps.len());
        for dep in deps {
            users.entry(*dep).or_default().push(*referrer);
        }
    }
    let mut ready: BinaryHeap<Reverse<NodeId>> = nodes
        .iter()
        .copied()
        .filter(|n| waiting.get(n).copied().unwrap_or(0) == 0 && !blocked.contains(n))
        .map(Reverse)
        .collect();
    let mut ordered = Vec::with_capacity(nodes.len());
    let mut done: BTreeSet<NodeId> = BTreeSet::new();
    while let Some(Reverse(next)) = ready.pop() {
        ordered.push(index.name(next).clone());
        done.insert(next);
        for user in users.get(&next).into_iter().flatten() {
            if let Some(count) = waiting.get_mut(user) {
                *count -= 1;
                if *count == 0 && !blocked.contains(user) {
                    ready.push(Reverse(*user));
                }
            }
        }
    }
    if ordered.len() == nodes.len() {
        return Some(ordered);
    }
    let mut remaining: Vec<&NodeName> = nodes
        .iter()
        .filter(|n| !done.contains(n))
        .map(|n| index.name(*n))
        .collect();
    remaining.sort();
    if let Some(first) = remaining
        .first()
        .and_then(|name| index.lookup(name.as_str()))
    {
        diags.emit(
            DiagnosticCode::CyclicReference,
            "node-output/control references contain a cycle",
            index.path(first),
            remaining.iter().copied(),
        );
    }
    None
}
