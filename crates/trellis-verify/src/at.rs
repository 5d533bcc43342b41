//! A diagnostic location below a node, kept unmaterialized until a diagnostic needs it.

use crate::diag::{Path, Step, extend};
use crate::index::Index;
use crate::nodeset::NodeId;

/// A location below a node, kept unmaterialized until a diagnostic needs it (building paths
/// eagerly dominated verification time on large graphs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    pub(crate) node: NodeId,
    steps: [Step; 4],
    len: usize,
}

impl At {
    pub(crate) fn node(node: NodeId) -> Self {
        At {
            node,
            steps: [Step::Index(0); 4],
            len: 0,
        }
    }

    /// One more step; locations are at most four steps below a node.
    pub(crate) fn with(mut self, step: Step) -> Self {
        if self.len < self.steps.len() {
            self.steps[self.len] = step;
            self.len += 1;
        }
        self
    }

    pub(crate) fn field(self, name: &'static str) -> Self {
        self.with(Step::Field(name))
    }

    pub(crate) fn index(self, i: usize) -> Self {
        self.with(Step::Index(i))
    }

    pub(crate) fn path(&self, index: &Index) -> Path {
        extend(&index.path(self.node), &self.steps[..self.len])
    }
}
