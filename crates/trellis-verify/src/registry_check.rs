//! The registry compatibility check (§7.3): every executable's worker must resolve to a valid
//! descriptor whose contract fits the node's declaration.

use std::collections::BTreeMap;

use trellis_graph::{
    DiagnosticCode, GraphDiagnostic, GraphNode, GraphSpec, NodeName, PathSegment, RegistryError,
    Severity, WorkerDescriptor, WorkerRef, WorkerRegistry,
};

use crate::diag::Diags;
use crate::index::Index;

/// The closed set of worker compatibility failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkerIssueKind {
    Registry,
    DescriptorContract,
    DescriptorIdentity,
    GraphProfile,
    Input,
    Output,
    VerifierContract,
    SignalField,
    SignalLabels,
    Diagnostic,
}

impl WorkerIssueKind {
    /// The UPPER_SNAKE code used by the worker compatibility vectors.
    pub fn code(self) -> &'static str {
        match self {
            Self::Registry => "REGISTRY",
            Self::DescriptorContract => "DESCRIPTOR_CONTRACT",
            Self::DescriptorIdentity => "DESCRIPTOR_IDENTITY",
            Self::GraphProfile => "GRAPH_PROFILE",
            Self::Input => "INPUT",
            Self::Output => "OUTPUT",
            Self::VerifierContract => "VERIFIER_CONTRACT",
            Self::SignalField => "SIGNAL_FIELD",
            Self::SignalLabels => "SIGNAL_LABELS",
            Self::Diagnostic => "DIAGNOSTIC",
        }
    }

    /// Shape problems are `invalid_graph_shape`; type mismatches are `schema_safety`.
    pub fn diagnostic_code(self) -> DiagnosticCode {
        match self {
            Self::Registry
            | Self::DescriptorContract
            | Self::DescriptorIdentity
            | Self::GraphProfile
            | Self::VerifierContract => DiagnosticCode::InvalidGraphShape,
            Self::Input
            | Self::Output
            | Self::SignalField
            | Self::SignalLabels
            | Self::Diagnostic => DiagnosticCode::SchemaSafety,
        }
    }
}

/// One worker incompatibility found at an executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerIssue {
    pub node: NodeName,
    pub path: Vec<PathSegment>,
    pub kind: WorkerIssueKind,
    pub message: String,
}

impl WorkerIssue {
    /// The issue as a graph diagnostic (at the executable, related to it).
    pub fn to_diagnostic(&self) -> GraphDiagnostic {
        GraphDiagnostic {
            severity: Severity::Error,
            code: self.kind.diagnostic_code(),
            message: self.message.clone(),
            path: self.path.clone(),
            related_nodes: vec![self.node.clone()],
        }
    }
}

/// A reference's descriptor with the outcome of validating it, or why it did not resolve.
type Resolution = Result<(WorkerDescriptor, Result<(), String>), RegistryError>;

/// Resolves every step and verifier (dead branches included, in pre-order) and checks each
/// descriptor against the node's declaration. Independent of the analyzer.
pub fn check_workers(spec: &GraphSpec, registry: &dyn WorkerRegistry) -> Vec<WorkerIssue> {
    let mut scratch = Diags::default();
    let index = Index::build(&spec.root, &mut scratch);
    check_indexed(spec, &index, registry)
}

/// [`check_workers`] over an index the caller already built.
pub(crate) fn check_indexed(
    spec: &GraphSpec,
    index: &Index,
    registry: &dyn WorkerRegistry,
) -> Vec<WorkerIssue> {
    let mut issues = Vec::new();
    // Registries resolve exact references deterministically and validation depends on the
    // descriptor alone, so each reference is resolved and validated once and every
    // occurrence is checked against the same answers.
    let mut resolved: BTreeMap<&WorkerRef, Resolution> = BTreeMap::new();
    for id in 0..index.len() as u32 {
        let node = index.node(id);
        let Some(exec) = node.executable() else {
            continue;
        };
        let mut issue = |kind: WorkerIssueKind, message: String| {
            issues.push(WorkerIssue {
                node: exec.name.clone(),
                path: index.path(id),
                kind,
                message,
            })
        };
        let resolution = resolved.entry(&exec.worker).or_insert_with(|| {
            registry.resolve(&exec.worker).map(|descriptor| {
                let valid = match registry.validates_descriptors() {
                    true => descriptor.validate(),
                    false => Ok(()),
                };
                (descriptor, valid)
            })
        });
        let descriptor = match resolution {
            Ok((d, Ok(()))) => &*d,
            Ok((_, Err(message))) => {
                issue(
                    WorkerIssueKind::DescriptorContract,
                    format!("invalid resolved descriptor: {message}"),
                );
                continue;
            }
            Err(e) => {
                issue(WorkerIssueKind::Registry, e.to_string());
                continue;
            }
        };
        if descriptor.worker != exec.worker {
            issue(
                WorkerIssueKind::DescriptorIdentity,
                format!(
                    "registry returned descriptor {} for requested {}",
                    descriptor.worker, exec.worker
                ),
            );
        }
        if !descriptor.graph_profiles.contains(&spec.profile) {
            issue(
                WorkerIssueKind::GraphProfile,
                format!(
                    "descriptor does not allow graph profile {}",
                    spec.profile.as_str()
                ),
            );
        }
        let contract = &descriptor.contract;
        if !exec.input.is_subtype_of(&contract.input) {
            issue(
                WorkerIssueKind::Input,
                "graph input is not a subtype of descriptor input".to_owned(),
            );
        }
        if !contract.output.is_subtype_of(&exec.output) {
            issue(
                WorkerIssueKind::Output,
                "descriptor output is not a subtype of graph output".to_owned(),
            );
        }
        match (node, &contract.verifier) {
            (GraphNode::Step(_), Some(_)) => issue(
                WorkerIssueKind::VerifierContract,
                "step node resolved to a verifier-only descriptor".to_owned(),
            ),
            (GraphNode::Verifier(_), None) => issue(
                WorkerIssueKind::VerifierContract,
                "verifier node resolved to a non-verifier descriptor".to_owned(),
            ),
            (GraphNode::Verifier(v), Some(promised)) => {
                for (field, labels) in &promised.signals {
                    match v.signals.get(field) {
                        None => issue(
                            WorkerIssueKind::SignalField,
                            format!("descriptor signal {field} is absent from graph declaration"),
                        ),
                        Some(declared) if !labels.is_subset(declared) => issue(
                            WorkerIssueKind::SignalLabels,
                            format!("descriptor labels for signal {field} exceed graph labels"),
                        ),
                        Some(_) => {}
                    }
                }
                if !promised.diagnostic.is_subtype_of(&v.diagnostic) {
                    issue(
                        WorkerIssueKind::Diagnostic,
                        "descriptor diagnostic is not a subtype of graph diagnostic".to_owned(),
                    );
                }
            }
            _ => {}
        }
    }
    issues
}
