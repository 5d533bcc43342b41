//! Pass 6, the reference graph (§6.11): unknown names, cycles, and the acyclic order (ties
//! broken by authored pre-order).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use trellis_graph::{DiagnosticCode, NodeName};

use crate::diag::Diags;
use crate::index::Index;
use crate::nodeset::NodeId;

/// Reports unknown references and cycles; returns the order of all nodes (canonical ids) when
/// acyclic. Ids rather than names: with loops the order is not part of the bounds, so copying
/// every name would be wasted.
pub(crate) fn order<'g>(
    index: &Index<'g>,
    references: impl IntoIterator<Item = (NodeId, &'g NodeName)>,
    diags: &mut Diags,
) -> Option<Vec<NodeId>> {
    // Node ids are dense (0..index.len()), so per-node facts live in vectors indexed by id.
    let count = index.len();
    let references = references.into_iter();
    let mut depends: Vec<(NodeId, NodeId)> = Vec::with_capacity(references.size_hint().0);
    let mut blocked = vec![false; count];
    let mut unknown: BTreeSet<(NodeId, &'g NodeName)> = BTreeSet::new();
    for (referrer, target) in references {
        let referrer = index.entry(referrer).canon;
        match index.lookup(target.as_str()) {
            Some(t) if t == referrer => {}
            Some(t) => depends.push((referrer, t)),
            None => {
                blocked[referrer as usize] = true;
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
    let nodes: Vec<NodeId> = (0..count as NodeId)
        .filter(|id| index.entry(*id).canon == *id)
        .collect();
    // Distinct (referrer, dependency) pairs, referrers ascending: each dependency's users are
    // then listed in ascending order.
    depends.sort_unstable();
    depends.dedup();
    let mut waiting = vec![0usize; count];
    let mut users: Vec<Vec<NodeId>> = vec![Vec::new(); count];
    for (referrer, dep) in &depends {
        waiting[*referrer as usize] += 1;
        users[*dep as usize].push(*referrer);
    }
    // Kahn's algorithm, smallest ready id first. Nodes ready from the start are taken in
    // ascending order straight from `initial`; only nodes freed later go through the heap.
    let initial: Vec<NodeId> = nodes
        .iter()
        .copied()
        .filter(|n| waiting[*n as usize] == 0 && !blocked[*n as usize])
        .collect();
    let mut initial = initial.into_iter().peekable();
    let mut freed: BinaryHeap<Reverse<NodeId>> = BinaryHeap::new();
    let mut ordered = Vec::with_capacity(nodes.len());
    let mut done = vec![false; count];
    loop {
        let next = match (initial.peek(), freed.peek()) {
            (Some(a), Some(Reverse(b))) if b < a => freed.pop().map(|Reverse(b)| b),
            (Some(_), _) => initial.next(),
            (None, _) => freed.pop().map(|Reverse(b)| b),
        };
        let Some(next) = next else {
            break;
        };
        ordered.push(next);
        done[next as usize] = true;
        for user in &users[next as usize] {
            let waits = &mut waiting[*user as usize];
            *waits -= 1;
            if *waits == 0 && !blocked[*user as usize] {
                freed.push(Reverse(*user));
            }
        }
    }
    if ordered.len() == nodes.len() {
        return Some(ordered);
    }
    let mut remaining: Vec<&NodeName> = nodes
        .iter()
        .filter(|n| !done[**n as usize])
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
