//! Work a large graph's verification does on a second core while the analyzer runs: the
//! canonical tail, the structural bounds predicted from the index alone, and the identity
//! those bounds give.
//!
//! The bounds only need the analyzer for the acyclic order's control references, and those
//! are the guard selectors the graph spells out, so a clean graph's bounds can be predicted
//! before the analysis ends. The prediction is only used when it equals the analyzer's bounds;
//! anything else falls back to hashing after the analysis.

use trellis_graph::{GraphNode, GraphSpec, Join, NodeName, StructuralBounds};

use crate::canonical::{self, GraphIdentity, SpecTail};
use crate::diag::Diags;
use crate::index::Index;
use crate::nodeset::NodeId;

/// What the second core prepared: either the identity for the predicted bounds (the tail is
/// then no longer needed and freed there), or the tail alone.
pub(crate) enum Ahead {
    Predicted {
        bounds: StructuralBounds,
        identity: GraphIdentity,
    },
    Tail(SpecTail),
}

impl Ahead {
    /// Writes the tail, predicts the bounds and, when that succeeds, hashes head and tail.
    pub(crate) fn compute(spec: &GraphSpec, index: &Index<'_>) -> Self {
        let tail = canonical::spec_tail(spec);
        match predict_bounds(index) {
            Some(bounds) => {
                let identity = canonical::identity_with_tail(&bounds, &tail);
                Ahead::Predicted { bounds, identity }
            }
            None => Ahead::Tail(tail),
        }
    }

    /// The identity of the IR with the analyzer's `bounds`, when this work already gives it.
    pub(crate) fn identity_for(&self, bounds: &StructuralBounds) -> Option<GraphIdentity> {
        match self {
            Ahead::Predicted {
                bounds: predicted,
                identity,
            } if predicted == bounds => Some(identity.clone()),
            Ahead::Tail(tail) => Some(canonical::identity_with_tail(bounds, tail)),
            Ahead::Predicted { .. } => None,
        }
    }
}

/// The control references the analyzer records for a graph it analyses completely: the
/// selectors of every choice branch guard and of every first-join guard, per occurrence.
fn spelled_control_references<'a, 'g>(
    index: &'a Index<'g>,
) -> impl Iterator<Item = (NodeId, &'g NodeName)> + 'a {
    (0..index.len() as NodeId).flat_map(move |id| {
        let guards: Vec<&'g trellis_graph::Guard> = match index.node(id) {
            GraphNode::Choice(choice) => choice.branches.iter().map(|b| &b.when).collect(),
            GraphNode::Par(par) => match &par.join {
                Join::First { when } => vec![when],
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        guards
            .into_iter()
            .flat_map(|g| g.selectors())
            .map(move |selector| (id, &selector.name))
    })
}

/// The bounds the analyzer computes for a clean graph, from the index alone; `None` when the
/// folds or the reference graph report anything (the analyzer then reports it too).
fn predict_bounds(index: &Index<'_>) -> Option<StructuralBounds> {
    let mut scratch = Diags::default();
    let fold = crate::folds::fold_root(index, &mut scratch)?;
    // With loops the witness is their ranking, so the order is not needed.
    let order = if index.loops.is_empty() {
        let references = index
            .write_references
            .iter()
            .copied()
            .chain(spelled_control_references(index));
        crate::refs::order(index, references, &mut scratch)
    } else {
        Some(Vec::new())
    };
    if !scratch.is_empty() {
        return None;
    }
    crate::bounds_of(index, order?, &fold)
}

#[cfg(test)]
mod tests {
    use trellis_graph::{GraphSpec, PositiveInteger};

    use super::{Ahead, predict_bounds};
    use crate::canonical::spec_tail;
    use crate::diag::Diags;
    use crate::index::Index;
    use crate::{Verification, verify_builtin};

    /// On the reference templates (with and without loops) the predicted bounds are the
    /// analyzer's, and the identity prepared from them is the verifier's; other bounds get
    /// no identity from the prediction, and a bare tail hashes like the whole IR.
    #[test]
    fn predicted_bounds_and_identity_match_the_analyzer() {
        let Some(dir) = crate::tests_support_templates() else {
            return;
        };
        for name in [
            "single-worker",
            "software-change",
            "auto-research",
            "pr-review",
        ] {
            let text = std::fs::read_to_string(dir.join(format!("{name}.json")))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let spec = GraphSpec::from_json_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let Verification::Verified(verified) = verify_builtin(&spec) else {
                panic!("{name} verifies");
            };
            let mut diags = Diags::default();
            let index = Index::build(&spec.root, &mut diags);
            assert!(diags.is_empty(), "{name}");
            let bounds = &verified.ir.bounds;
            assert_eq!(predict_bounds(&index).as_ref(), Some(bounds), "{name}");
            let ahead = Ahead::compute(&spec, &index);
            assert!(matches!(ahead, Ahead::Predicted { .. }), "{name}");
            assert_eq!(ahead.identity_for(bounds), Some(verified.identity.clone()));
            let mut other = bounds.clone();
            other.peak_concurrency = PositiveInteger::new(other.peak_concurrency.get() + 1)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(ahead.identity_for(&other), None, "{name}");
            let tail = Ahead::Tail(spec_tail(&spec));
            assert_eq!(tail.identity_for(bounds), Some(verified.identity), "{name}");
        }
    }
}
