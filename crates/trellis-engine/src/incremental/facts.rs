//! The incremental reducer's runtime facts: one store for the whole run, keyed by node id and
//! the node's map indices, cleared per subtree when a group is re-entered or a branch loses.

use std::collections::BTreeMap;

use serde_json::Value;
use trellis_graph::{ControlSource, EnumLabel, FieldName, WorkerErrorCode};

use super::plan::{CGuard, CSelector, NodeId, Plan};

/// The channels of a successful outcome, read by write bindings.
pub(super) struct Channel {
    pub(super) output: Value,
    pub(super) diagnostic: Option<Value>,
    pub(super) signals: BTreeMap<FieldName, EnumLabel>,
}

/// Everything known about one occurrence of one node.
#[derive(Default)]
pub(super) struct NodeFacts {
    pub(super) error: Option<WorkerErrorCode>,
    pub(super) channel: Option<Channel>,
    /// A group's own control: (field, label), e.g. ("joined", "reached").
    pub(super) group: Option<(&'static str, &'static str)>,
}

impl NodeFacts {
    fn label(&self, source: ControlSource, field: Option<&FieldName>) -> Option<&str> {
        match (source, field) {
            (ControlSource::Error, None) => self.error.map(WorkerErrorCode::as_str),
            (ControlSource::Signal, Some(f)) => self
                .channel
                .as_ref()
                .and_then(|c| c.signals.get(f))
                .map(EnumLabel::as_str),
            (ControlSource::Group, Some(f)) => self
                .group
                .filter(|(name, _)| *name == f.as_str())
                .map(|(_, label)| label),
            _ => None,
        }
    }
}

pub(super) struct FactStore {
    per_node: Vec<BTreeMap<Vec<u32>, NodeFacts>>,
}

impl FactStore {
    pub(super) fn new(nodes: usize) -> Self {
        Self {
            per_node: (0..nodes).map(|_| BTreeMap::new()).collect(),
        }
    }

    /// Replaces an executable occurrence's facts with those of its latest outcome.
    pub(super) fn set_outcome(
        &mut self,
        node: NodeId,
        indices: &[u32],
        error: Option<WorkerErrorCode>,
        channel: Option<Channel>,
    ) {
        self.per_node[node].insert(
            indices.to_vec(),
            NodeFacts {
                error,
                channel,
                group: None,
            },
        );
    }

    pub(super) fn set_group(
        &mut self,
        node: NodeId,
        indices: &[u32],
        field: &'static str,
        label: &'static str,
    ) {
        self.per_node[node]
            .entry(indices.to_vec())
            .or_default()
            .group = Some((field, label));
    }

    pub(super) fn get(&self, node: NodeId, indices: &[u32]) -> Option<&NodeFacts> {
        self.per_node[node].get(indices)
    }

    /// Forgets every fact of `root`'s subtree whose indices start with `prefix`.
    pub(super) fn clear_subtree(&mut self, plan: &Plan, root: NodeId, prefix: &[u32]) {
        for node in root..plan.node(root).end {
            let facts = &mut self.per_node[node];
            if facts.is_empty() {
                continue;
            }
            if prefix.is_empty() {
                facts.clear();
                continue;
            }
            let doomed: Vec<Vec<u32>> = facts
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, _)| k.clone())
                .collect();
            for key in doomed {
                facts.remove(&key);
            }
        }
    }

    /// The labels a selector sees from `indices`: the node's own occurrence when it is no
    /// deeper in maps than the reader, else every mapped item under the reader (aggregate).
    fn labels<'s>(&'s self, plan: &Plan, selector: &'s CSelector, indices: &[u32]) -> Vec<&'s str> {
        let Some(node) = selector.node else {
            return Vec::new();
        };
        let depth = plan.node(node).map_depth;
        let field = selector.field.as_ref();
        if depth <= indices.len() {
            return self
                .get(node, &indices[..depth])
                .and_then(|f| f.label(selector.source, field))
                .into_iter()
                .collect();
        }
        self.per_node[node]
            .range(indices.to_vec()..)
            .take_while(|(k, _)| k.starts_with(indices))
            .filter(|(k, _)| k.len() == depth)
            .filter_map(|(_, f)| f.label(selector.source, field))
            .collect()
    }

    pub(super) fn holds(&self, plan: &Plan, guard: &CGuard, indices: &[u32]) -> bool {
        let hit = |s: &CSelector, labels: &trellis_graph::EnumSet| {
            self.labels(plan, s, indices)
                .iter()
                .any(|l| labels.contains(l))
        };
        match guard {
            CGuard::In(selector, labels) => hit(selector, labels),
            CGuard::All(guards) => guards.iter().all(|g| self.holds(plan, g, indices)),
            CGuard::Any(guards) => guards.iter().any(|g| self.holds(plan, g, indices)),
            CGuard::Not(guard) => !self.holds(plan, guard, indices),
            CGuard::KOfN(count, selectors, labels) => {
                selectors.iter().filter(|s| hit(s, labels)).count() as u64 >= *count
            }
            CGuard::KOfMap(count, selector, labels) => {
                self.labels(plan, selector, indices)
                    .iter()
                    .filter(|l| labels.contains(l))
                    .count() as u64
                    >= *count
            }
        }
    }
}
