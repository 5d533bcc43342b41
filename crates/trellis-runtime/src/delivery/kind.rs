//! What a delivery node does (read from its worker reference), which nodes of a graph deliver,
//! and the token variable a delivery binding names.

use std::collections::BTreeMap;

use trellis_agents::DeliveryBinding;
use trellis_graph::{GraphNode, GraphSpec, NodeName, WorkerRef};

/// What a delivery node does, read from its worker reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeliveryKind {
    Push,
    /// `pr@1` reports `opened`; `pr@2` waits for checks and reports feedback.
    PullRequest {
        version: u8,
    },
    Merge {
        version: u8,
    },
    Comment,
}

impl DeliveryKind {
    pub(crate) fn of(worker: &str) -> Option<DeliveryKind> {
        Some(match worker {
            "builtin.git-delivery.push@1" => Self::Push,
            "builtin.git-delivery.pr@1" => Self::PullRequest { version: 1 },
            "builtin.git-delivery.pr@2" => Self::PullRequest { version: 2 },
            "builtin.git-delivery.merge@1" => Self::Merge { version: 1 },
            "builtin.git-delivery.merge@2" => Self::Merge { version: 2 },
            "builtin.git-delivery.merge@3" => Self::Merge { version: 3 },
            "builtin.comment-delivery.post@1" => Self::Comment,
            _ => return None,
        })
    }

    /// Whether this delivery talks to the forge (and so needs its token).
    pub(crate) fn uses_forge(self) -> bool {
        !matches!(self, Self::Push)
    }

    /// Whether this delivery pushes the run branch (and so needs a clean, attached branch).
    pub(crate) fn pushes(self) -> bool {
        !matches!(self, Self::Comment)
    }
}

/// The worker of every delivery node of `graph`.
pub(crate) fn delivery_workers(graph: &GraphSpec) -> BTreeMap<NodeName, WorkerRef> {
    let mut workers = BTreeMap::new();
    graph.root.walk(&mut |node: &GraphNode| {
        if let Some(exec) = node.executable()
            && DeliveryKind::of(exec.worker.as_str()).is_some()
        {
            workers.insert(exec.name.clone(), exec.worker.clone());
        }
    });
    workers
}

/// The token variable a delivery binding declares for GitHub (`GH_TOKEN` by default).
pub(crate) fn token_variable(binding: &DeliveryBinding) -> String {
    binding
        .connections
        .get("github")
        .and_then(|names| names.first())
        .cloned()
        .unwrap_or_else(|| "GH_TOKEN".to_owned())
}
