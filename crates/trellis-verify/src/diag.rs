//! Diagnostic construction: the message catalogue's shared helpers, located paths and the sink.

use trellis_graph::{DiagnosticCode, GraphDiagnostic, NodeName, PathSegment, Severity};

/// A diagnostic location under construction: a materialized node path plus relative steps.
pub(crate) type Path = Vec<PathSegment>;

/// One relative step below a node or guard path; materialized only when a diagnostic is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Field(&'static str),
    Index(usize),
}

/// Appends relative steps to a base path.
pub(crate) fn extend(base: &[PathSegment], steps: &[Step]) -> Path {
    let mut path = Vec::with_capacity(base.len() + steps.len());
    path.extend_from_slice(base);
    path.extend(steps.iter().map(|step| match step {
        Step::Field(name) => PathSegment::field(name),
        Step::Index(index) => PathSegment::index(*index),
    }));
    path
}

/// Collects diagnostics in emission order; they are sorted once at the end.
#[derive(Debug, Default)]
pub(crate) struct Diags {
    list: Vec<GraphDiagnostic>,
}

impl Diags {
    /// Records an error; `related` is sorted and de-duplicated as the contract requires.
    pub(crate) fn emit<'n>(
        &mut self,
        code: DiagnosticCode,
        message: impl Into<String>,
        path: Path,
        related: impl IntoIterator<Item = &'n NodeName>,
    ) {
        let mut related_nodes: Vec<NodeName> = related.into_iter().cloned().collect();
        related_nodes.sort();
        related_nodes.dedup();
        self.list.push(GraphDiagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            path,
            related_nodes,
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn extend(&mut self, more: Vec<GraphDiagnostic>) {
        self.list.extend(more);
    }

    /// The diagnostics in the contract's canonical order (stable sort, no de-duplication).
    pub(crate) fn into_sorted(self) -> Vec<GraphDiagnostic> {
        sorted(self.list)
    }
}

/// Sorts diagnostics with the §6.2 key; equal keys keep emission order.
pub(crate) fn sorted(mut list: Vec<GraphDiagnostic>) -> Vec<GraphDiagnostic> {
    list.sort_by(GraphDiagnostic::canonical_cmp);
    list
}

/// The message used for every assignment-space ceiling.
pub(crate) const ASSIGNMENT_CEILING: &str = "control assignment space exceeds 65536";
