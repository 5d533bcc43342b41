//! Where a git delivery can run at the same time as a writer or another delivery: a delivery
//! commits and pushes the whole workspace, so beside a writing step (another branch of a `par`)
//! or another delivery (another item of a `map`) it would deliver a half-edited tree. A Trellis
//! admission rule under a plan; the reference (Zeroshot 10.19.1) admits such graphs.

use trellis_graph::{GraphNode, GraphSpec, NodeName};

use crate::plan_rules::{is_comment_delivery, is_delivery};

/// A git delivery and what it can overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryOverlap {
    /// The git delivery node.
    pub delivery: NodeName,
    /// The writer (a step or another git delivery) it can run beside; the delivery itself
    /// when the overlap is with its own run for another item of a map.
    pub other: NodeName,
    /// The `par` or `map` that runs both at once.
    pub group: NodeName,
}

/// Whether `node` is a git delivery (a verifier of a `builtin.git-delivery.*` worker; the
/// comment delivery does not touch the workspace).
fn is_git_delivery(node: &GraphNode) -> bool {
    matches!(node, GraphNode::Verifier(v)
        if is_delivery(&v.exec.worker) && !is_comment_delivery(&v.exec.worker))
}

/// Whether `node` may change the workspace: a step, or a git delivery.
fn is_writer(node: &GraphNode) -> bool {
    matches!(node, GraphNode::Step(_)) || is_git_delivery(node)
}

/// The executables under `node` (itself included) that satisfy `pick`, in document order.
fn under(node: &GraphNode, pick: fn(&GraphNode) -> bool) -> Vec<&GraphNode> {
    let mut found = Vec::new();
    node.walk(&mut |inner| {
        if pick(inner) {
            found.push(inner);
        }
    });
    found
}

/// The first git delivery (in document order of the groups) that can run beside a writer or
/// another delivery, or `None`.
pub fn overlapping_git_delivery(spec: &GraphSpec) -> Option<DeliveryOverlap> {
    let mut found = None;
    spec.root.walk(&mut |node| {
        if found.is_some() {
            return;
        }
        found = match node {
            GraphNode::Par(par) => par.branches.iter().enumerate().find_map(|(i, branch)| {
                let delivery = under(branch, is_git_delivery).into_iter().next()?;
                let other = par
                    .branches
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .find_map(|(_, other)| under(other, is_writer).into_iter().next())?;
                Some(DeliveryOverlap {
                    delivery: delivery.name().clone(),
                    other: other.name().clone(),
                    group: par.name.clone(),
                })
            }),
            // Items of a map run at once: a delivery in its body runs beside itself.
            GraphNode::Map(map) if map.max_items.get() > 1 => under(&map.body, is_git_delivery)
                .first()
                .map(|delivery| DeliveryOverlap {
                    delivery: delivery.name().clone(),
                    other: delivery.name().clone(),
                    group: map.name.clone(),
                }),
            _ => None,
        };
    });
    found
}
