//! Group promotions (§6.8): promoted paths must exist, accept their writes, and be defined on
//! completion by the rule of the group kind.

use std::rc::Rc;

use trellis_graph::{DiagnosticCode, FieldPath, PayloadType};

use super::{Analyzer, Scope};
use crate::at::At;
use crate::flow::Effects;
use crate::nodeset::NodeId;

/// Which definedness rule a group's promotions follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// seq, loop, par all.
    Definite,
    /// choice, par any/quorum/first.
    EveryAlternative,
    /// map: an indexed body write must guarantee the path.
    Map,
}

impl<'g> Analyzer<'_, 'g> {
    /// Checks every promoted path of group `id`; `scope` is the context the group sits in.
    pub(crate) fn promote(
        &mut self,
        id: NodeId,
        promoted: &[FieldPath],
        state: &PayloadType,
        rule: Rule,
        effects: &Effects<'g>,
        scope: &Scope<'g>,
    ) {
        for (i, path) in promoted.iter().enumerate() {
            let at = At::node(id).field("promotedStatePaths").index(i);
            let Some((group_ty, required)) = state.lookup(path) else {
                self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "promoted state path does not exist in group state",
                    at.path(self.index),
                    [],
                );
                continue;
            };
            let key = Rc::new(path.clone());
            let indexed = scope
                .map
                .as_ref()
                .and_then(|m| m.overrides.get(&key))
                .cloned();
            let target = indexed
                .clone()
                .or_else(|| scope.state.lookup(path).map(|(t, _)| Rc::new(t.clone())));
            match &target {
                None => self.diags.emit(
                    DiagnosticCode::SchemaSafety,
                    "promoted state path does not exist in enclosing state",
                    at.path(self.index),
                    [],
                ),
                Some(target) => {
                    // Only writes of exactly the promoted path are checked; a write below it
                    // (`review.verdict` under a promoted `review`) is not, as the reference
                    // has it.
                    let mismatch = effects
                        .possible_writes
                        .get(&key)
                        .is_some_and(|types| types.iter().any(|t| !t.is_subtype_of(target)));
                    if mismatch {
                        self.diags.emit(
                            DiagnosticCode::SchemaSafety,
                            "promoted value is not a subtype of its enclosing state target",
                            at.path(self.index),
                            [],
                        );
                    }
                }
            }
            let guaranteed = effects
                .definite_writes
                .values()
                .any(|f| f.guaranteed.contains_key(&key));
            let pending = || {
                effects
                    .pending
                    .iter()
                    .flat_map(|(_, writes)| writes)
                    .any(|w| w.guaranteed.contains_key(&key))
            };
            let (defined, message) = match rule {
                // (a) required and not indexed, (b) a definite write, or (c) optional and a
                // pending write the group still carries guarantees it (§13.1).
                Rule::Definite | Rule::EveryAlternative => (
                    guaranteed || (required && indexed.is_none()) || (!required && pending()),
                    if rule == Rule::Definite {
                        "promoted path is not definitely defined on completion"
                    } else {
                        "promoted path is not defined by every completing alternative"
                    },
                ),
                Rule::Map => (
                    !matches!(group_ty, PayloadType::Array { .. }) || guaranteed || pending(),
                    "map promoted path has no indexed body write",
                ),
            };
            if !defined {
                self.diags.emit(
                    DiagnosticCode::UndefinedRead,
                    message,
                    at.path(self.index),
                    [],
                );
            }
        }
    }
}
