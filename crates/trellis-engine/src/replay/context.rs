//! The reference reducer's evaluation context: a scope's state, the paths written in it, and the
//! runtime facts (controls and output channels) visible at that point, cloned per scope.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use trellis_graph::{ControlSelector, ControlSource, FieldName, FieldPath, Guard, NodeName};

use crate::shape::Shape;

/// A control fact: one label of one selector domain of one node occurrence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ControlKey {
    node: NodeName,
    source: ControlSource,
    field: Option<FieldName>,
    indices: Vec<u32>,
}

/// The channels of a successful outcome, read by write bindings.
#[derive(Debug, Clone)]
pub(super) struct Channel {
    pub(super) output: Value,
    pub(super) diagnostic: Option<Value>,
    pub(super) signals: BTreeMap<FieldName, String>,
}

/// Controls and channels, keyed by node and the node's own map indices.
#[derive(Debug, Clone, Default)]
pub(super) struct Facts {
    controls: BTreeMap<ControlKey, String>,
    channels: BTreeMap<(NodeName, Vec<u32>), Channel>,
}

/// One scope's view of the run.
#[derive(Debug, Clone)]
pub(super) struct Context {
    pub(super) state: Value,
    pub(super) writes: BTreeSet<FieldPath>,
    pub(super) facts: Facts,
}

impl Context {
    pub(super) fn new(state: Value) -> Self {
        Self {
            state,
            writes: BTreeSet::new(),
            facts: Facts::default(),
        }
    }

    /// A fresh scope for `group` entered at `indices`: same state and facts, nothing written
    /// yet, and no facts left over from an earlier visit of the group's subtree.
    pub(super) fn enter(&self, shape: &Shape, group: &NodeName, indices: &[u32]) -> Self {
        let mut facts = self.facts.clone();
        facts.clear_subtree(shape, group, indices);
        Self {
            state: self.state.clone(),
            writes: BTreeSet::new(),
            facts,
        }
    }
}

impl Facts {
    pub(super) fn set_control(
        &mut self,
        node: &NodeName,
        source: ControlSource,
        field: Option<&FieldName>,
        indices: &[u32],
        label: &str,
    ) {
        let key = ControlKey {
            node: node.clone(),
            source,
            field: field.cloned(),
            indices: indices.to_vec(),
        };
        self.controls.insert(key, label.to_owned());
    }

    /// Forgets an executable occurrence's error, signals and channel before a new outcome.
    pub(super) fn reset_executable(&mut self, node: &NodeName, indices: &[u32]) {
        self.controls.retain(|k, _| {
            !(k.node == *node && k.indices == indices && k.source != ControlSource::Group)
        });
        self.channels.remove(&(node.clone(), indices.to_vec()));
    }

    pub(super) fn set_channel(&mut self, node: &NodeName, indices: &[u32], channel: Channel) {
        self.channels
            .insert((node.clone(), indices.to_vec()), channel);
    }

    pub(super) fn channel(&self, node: &NodeName, indices: &[u32]) -> Option<&Channel> {
        self.channels.get(&(node.clone(), indices.to_vec()))
    }

    pub(super) fn clear_subtree(&mut self, shape: &Shape, root: &NodeName, prefix: &[u32]) {
        let inside = |node: &NodeName, indices: &[u32]| {
            indices.starts_with(prefix) && shape.in_subtree(root, node.as_str())
        };
        self.controls.retain(|k, _| !inside(&k.node, &k.indices));
        self.channels
            .retain(|(node, indices), _| !inside(node, indices));
    }

    /// Copies `other`'s facts of `root`'s subtree under `prefix` into `self`.
    pub(super) fn adopt_subtree(
        &mut self,
        other: &Facts,
        shape: &Shape,
        root: &NodeName,
        prefix: &[u32],
    ) {
        let inside = |node: &NodeName, indices: &[u32]| {
            indices.starts_with(prefix) && shape.in_subtree(root, node.as_str())
        };
        for (k, v) in &other.controls {
            if inside(&k.node, &k.indices) {
                self.controls.insert(k.clone(), v.clone());
            }
        }
        for ((node, indices), v) in &other.channels {
            if inside(node, indices) {
                self.channels
                    .insert((node.clone(), indices.clone()), v.clone());
            }
        }
    }

    /// The labels a selector sees from `indices`: the node's own occurrence when it is no
    /// deeper in maps than the reader, else every mapped item under the reader (aggregate).
    fn labels(&self, selector: &ControlSelector, shape: &Shape, indices: &[u32]) -> Vec<&str> {
        let depth = shape.map_depth(selector.name.as_str());
        let matches = |k: &ControlKey| {
            k.node == selector.name && k.source == selector.source && k.field == selector.field
        };
        if depth <= indices.len() {
            let key = ControlKey {
                node: selector.name.clone(),
                source: selector.source,
                field: selector.field.clone(),
                indices: indices[..depth].to_vec(),
            };
            return self
                .controls
                .get(&key)
                .map(String::as_str)
                .into_iter()
                .collect();
        }
        self.controls
            .iter()
            .filter(|(k, _)| {
                matches(k) && k.indices.len() == depth && k.indices.starts_with(indices)
            })
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Evaluates a guard over the visible controls.
    pub(super) fn holds(&self, guard: &Guard, shape: &Shape, indices: &[u32]) -> bool {
        match guard {
            Guard::In { value, labels } => self
                .labels(value, shape, indices)
                .iter()
                .any(|l| labels.contains(l)),
            Guard::All { guards } => guards.iter().all(|g| self.holds(g, shape, indices)),
            Guard::Any { guards } => guards.iter().any(|g| self.holds(g, shape, indices)),
            Guard::Not { guard } => !self.holds(guard, shape, indices),
            Guard::KOfN {
                count,
                values,
                labels,
            } => {
                let hits = values
                    .iter()
                    .filter(|s| {
                        self.labels(s, shape, indices)
                            .iter()
                            .any(|l| labels.contains(l))
                    })
                    .count();
                hits as u64 >= count.get()
            }
            Guard::KOfMap {
                count,
                value,
                labels,
            } => {
                let hits = self
                    .labels(value, shape, indices)
                    .iter()
                    .filter(|l| labels.contains(l))
                    .count();
                hits as u64 >= count.get()
            }
        }
    }
}
