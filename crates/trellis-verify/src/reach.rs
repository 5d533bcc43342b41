//! Pass 5, terminal coverage (§6.10): children after a non-falling sequence child are
//! unreachable, and the root must not fall through.

use trellis_graph::{DiagnosticCode, GraphNode, PathSegment};

use crate::analyze::Analysis;
use crate::diag::Diags;
use crate::index::Index;
use crate::nodeset::NodeId;

pub(crate) fn check(index: &Index, analysis: &Analysis, diags: &mut Diags) {
    if index.len() == 0 {
        return;
    }
    // Nodes never analysed count as falling through.
    let falls = |id: NodeId| analysis.falls[id as usize].unwrap_or(true);
    let mut stack = vec![0 as NodeId];
    while let Some(id) = stack.pop() {
        let entry = index.entry(id);
        let mut visit: Vec<NodeId> = Vec::new();
        match entry.node {
            GraphNode::Seq(_) => {
                let mut blocked = false;
                for child in &entry.children {
                    if blocked {
                        diags.emit(
                            DiagnosticCode::Reachability,
                            "node is unreachable after an unconditional terminal",
                            index.path(*child),
                            [index.name(*child), entry.node.name()],
                        );
                    }
                    if !falls(*child) {
                        blocked = true;
                    }
                    visit.push(*child);
                }
            }
            GraphNode::Choice(_) => {
                let flags = analysis.alternatives.get(&id);
                for (i, child) in entry.children.iter().enumerate() {
                    if flags.is_none_or(|f| f.get(i).copied().unwrap_or(true)) {
                        visit.push(*child);
                    }
                }
            }
            _ => visit.extend(entry.children.iter().copied()),
        }
        stack.extend(visit.into_iter().rev());
    }
    if falls(0) {
        diags.emit(
            DiagnosticCode::Reachability,
            "normal-success path falls through without explicit succeed or fail terminal",
            vec![PathSegment::field("root")],
            [index.name(0)],
        );
    }
}
