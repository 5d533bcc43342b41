//! Work a large graph's verification does on a second core while the analyzer runs: the
//! canonical tail, the structural bounds predicted from the index alone, and the identity
//! those bounds give. [`analyze_with_identity`] is all the verifier sees of it.
//!
//! The bounds only need the analyzer for the acyclic order's control references, and those
//! are the guard selectors the graph spells out, so a clean graph's bounds can be predicted
//! before the analysis ends. The prediction is only used when it equals the analyzer's bounds;
//! anything else falls back to hashing after the analysis.

use trellis_graph::{GraphNode, GraphSpec, Join, NodeName, StructuralBounds};
use trellis_json::parallel::beside;

use crate::canonical::{self, GraphIdentity, SpecTail};
use crate::diag::Diags;
use crate::index::Index;
use crate::nodeset::NodeId;

/// Graphs with at least this many nodes have their identity prepared on a second core (a
/// thread costs tens of microseconds; writing and hashing a graph's tail about a microsecond
/// per node).
const PARALLEL_TAIL_NODES: usize = 256;

/// The analyzer's passes and then the structural folds: the bounds of a graph clean so far
/// and, when a second core prepared it meanwhile, what is known of its identity. Without a
/// second core, for small graphs and for graphs that already have diagnostics, this is
/// [`crate::passes::analyze_passes`] followed by [`crate::passes::fold_bounds`].
pub(crate) fn analyze_with_identity(
    spec: &GraphSpec,
    index: &Index<'_>,
    diags: &mut Diags,
) -> (Option<StructuralBounds>, Option<Identity>) {
    if !diags.is_empty() || index.len() < PARALLEL_TAIL_NODES {
        let order = crate::passes::analyze_passes(spec, index, diags);
        return (crate::passes::fold_bounds(index, order, diags), None);
    }
    let (order, ahead) = beside(
        || Ahead::compute(spec, index),
        || crate::passes::analyze_passes(spec, index, diags),
    );
    match ahead {
        Some(ahead) => ahead.settle(index, order, diags),
        None => (crate::passes::fold_bounds(index, order, diags), None),
    }
}

/// What the second core prepared: either the bounds predicted from the index and the identity
/// they give (the tail is then no longer needed and freed there), or the tail alone.
pub(crate) enum Ahead {
    Predicted {
        bounds: StructuralBounds,
        identity: GraphIdentity,
    },
    Tail(SpecTail),
}

/// What is known of an admitted graph's identity before the IR exists.
pub(crate) enum Identity {
    Ready(GraphIdentity),
    Tail(SpecTail),
}

impl Identity {
    /// The identity of the IR with these bounds.
    pub(crate) fn finish(self, bounds: &StructuralBounds) -> GraphIdentity {
        match self {
            Identity::Ready(identity) => identity,
            Identity::Tail(tail) => canonical::identity_with_tail(bounds, &tail),
        }
    }
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

    /// The folds and bounds after the analyzer's passes with its acyclic `order`. A predicted
    /// result stands when the analyzer found nothing and (without loops) ordered the nodes
    /// alike: the folds are then those the prediction ran on the same index without a
    /// diagnostic. Otherwise the folds run here; without an identity the IR is hashed later.
    pub(crate) fn settle(
        self,
        index: &Index<'_>,
        order: Option<Vec<NodeId>>,
        diags: &mut Diags,
    ) -> (Option<StructuralBounds>, Option<Identity>) {
        match self {
            Ahead::Predicted { bounds, identity }
                if diags.is_empty() && order_agrees(&bounds, index, order.as_deref()) =>
            {
                (Some(bounds), Some(Identity::Ready(identity)))
            }
            Ahead::Predicted { .. } => (crate::passes::fold_bounds(index, order, diags), None),
            Ahead::Tail(tail) => (
                crate::passes::fold_bounds(index, order, diags),
                Some(Identity::Tail(tail)),
            ),
        }
    }
}

/// Whether the bounds carry the witness `order` gives: a ranking when there are loops (the
/// order is then not part of them), else that very order.
fn order_agrees(bounds: &StructuralBounds, index: &Index<'_>, order: Option<&[NodeId]>) -> bool {
    match (&bounds.termination, order) {
        (_, None) => false,
        (_, Some(_)) if !index.loops.is_empty() => true,
        (trellis_graph::TerminationWitness::Acyclic { order: predicted }, Some(order)) => {
            predicted.len() == order.len()
                && predicted
                    .iter()
                    .zip(order)
                    .all(|(name, id)| name == index.name(*id))
        }
        _ => false,
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
    crate::passes::bounds_of(index, order?, &fold)
}

#[cfg(test)]
mod tests {
    use trellis_graph::{GraphSpec, TerminationWitness};

    use super::{Ahead, predict_bounds};
    use crate::canonical::spec_tail;
    use crate::diag::Diags;
    use crate::index::Index;
    use crate::{Verification, verify_builtin};

    fn folds(index: &Index<'_>) -> crate::folds::Fold {
        crate::folds::fold_root(index, &mut Diags::default()).unwrap_or_default()
    }

    /// On the reference templates (with and without loops) the predicted bounds are the
    /// analyzer's and the identity prepared from them is the verifier's; without an order, or
    /// with another acyclic order, the prediction is not used, and a bare tail hashes like the
    /// whole IR.
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
            let order: Vec<crate::nodeset::NodeId> = match &bounds.termination {
                TerminationWitness::Acyclic { order } => order
                    .iter()
                    .filter_map(|name| index.lookup(name.as_str()))
                    .collect(),
                TerminationWitness::Bounded { .. } => Vec::new(),
            };
            let ahead = Ahead::compute(&spec, &index);
            assert!(matches!(ahead, Ahead::Predicted { .. }), "{name}");
            let settled = ahead.settle(&index, Some(order.clone()), &mut diags);
            assert_eq!(settled.0.as_ref(), Some(bounds), "{name}");
            let identity = settled.1.map(|i| i.finish(bounds));
            assert_eq!(identity.as_ref(), Some(&verified.identity), "{name}");
            // Without a tail or prediction to use, the folds run and the IR is hashed later.
            let (again, none) = Ahead::Predicted {
                bounds: bounds.clone(),
                identity: verified.identity.clone(),
            }
            .settle(&index, None, &mut diags);
            assert!(again.is_none() && none.is_none(), "{name}");
            let tail = Ahead::Tail(spec_tail(&spec));
            let (folded, identity) = tail.settle(&index, Some(order.clone()), &mut diags);
            assert_eq!(folded.as_ref(), Some(bounds), "{name}");
            let identity = identity.map(|i| i.finish(bounds));
            assert_eq!(identity, Some(verified.identity.clone()), "{name}");
            if !order.is_empty() {
                // An acyclic order other than the predicted one: the prediction is not used.
                let mut other = order.clone();
                other.reverse();
                let (refolded, none) =
                    Ahead::compute(&spec, &index).settle(&index, Some(other.clone()), &mut diags);
                assert!(none.is_none(), "{name}");
                let expected = crate::passes::bounds_of(&index, other, &folds(&index));
                assert_eq!(refolded, expected, "{name}");
            }
            assert!(diags.is_empty(), "{name}");
        }
    }
}
