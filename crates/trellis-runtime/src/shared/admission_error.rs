//! Why admission refused a run: one closed error with a stable code per variant.

use std::path::PathBuf;

use trellis_graph::GraphDiagnostic;

use crate::plan::PlanError;
use crate::plan::admission::{AdmissionRefusal, GraphAdmissionError};
use crate::shared::templates::{self, DeliveryMode};

/// What admission says when no plan was given and no agent CLI is installed to default to.
pub(crate) const NO_AGENT_CLI: &str = "no runtime plan was given and no agent CLI is on PATH. \
Trellis runs agent steps through Claude Code, Codex, the GitHub Copilot CLI or pi: install one \
and sign in (`npm install -g @anthropic-ai/claude-code` then `claude`, or `npm install -g \
@openai/codex` then `codex login`), and run again; Trellis uses the first of claude, codex, \
copilot, pi it finds. To run without any model, bind every step to a command instead: \
--uniform-runtime-config FILE with {\"kind\":\"command\",\"command\":[\"./worker\"]}, or an \
exact plan with --runtime-config FILE (see README, \"Running without a model\").";

/// Why admission refused. Each variant has a stable [`AdmissionError::code`]; messages never
/// carry secret values (plans only name variables).
#[derive(Debug, Clone, thiserror::Error)]
pub enum AdmissionError {
    #[error("cannot read {what} {}: {reason}", path.display())]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{what} {} {}; the limit is 16 MiB", path.display(), size_of(bytes))]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        /// The file's length (`None`: a device or pipe that gave more than the limit).
        bytes: Option<u64>,
    },
    #[error("{what}{}: {error}", shown_path(path))]
    Unparseable {
        what: &'static str,
        path: Option<PathBuf>,
        error: String,
    },
    #[error("{shown}: {error}")]
    InvalidGraph { shown: String, error: String },
    #[error("{shown} rejected: {} diagnostic(s)", diagnostics.len())]
    Rejected {
        shown: String,
        diagnostics: Vec<GraphDiagnostic>,
    },
    #[error("internal verifier error: {0}")]
    VerifierInternal(String),
    #[error("this graph needs an initial input")]
    InputRequired,
    #[error("initial input does not match GraphSpec.initialInput: {0}")]
    InputMismatch(String),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The graph cannot run under its plan (graph-contract §13.9).
    #[error(transparent)]
    Refused(#[from] AdmissionRefusal),
    #[error("{NO_AGENT_CLI}")]
    NoAgentCli,
    #[error(
        "node {node} declares the connection variable {variable}, which is not set in the environment"
    )]
    MissingConnection { node: String, variable: String },
    #[error("workspace {}: {reason}", path.display())]
    Workspace { path: PathBuf, reason: String },
    #[error("unknown template {0:?}; `trellis template list` shows them")]
    UnknownTemplate(String),
    #[error("template {0} needs a task (or an input document)")]
    TemplateNeedsTask(String),
    #[error(
        "template {0} reviews a GitHub issue or pull request, not a task: give it an input document"
    )]
    TaskNotAccepted(String),
    #[error("template {template} cannot deliver by {delivery}; it offers {offered}")]
    NoDeliveryVariant {
        template: String,
        delivery: DeliveryMode,
        offered: String,
    },
    #[error("{0}")]
    TaskFrom(String),
    #[error("{0}")]
    Preparation(String),
    #[error("{} is a GaP workflow, not a GraphSpec graph", path.display())]
    GapWorkflow { path: PathBuf },
    #[error("GaP workflow {} is rejected", path.display())]
    GapRejected { path: PathBuf, report: String },
    #[error("{0}")]
    GapOptions(String),
    #[error("the stored submission of run {run} cannot be read: {reason}")]
    StoredSubmission { run: String, reason: String },
}

impl AdmissionError {
    pub(crate) fn no_variant(template: &str, delivery: Option<DeliveryMode>) -> AdmissionError {
        let offered = templates::find(template)
            .map(|t| {
                t.deliveries()
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        AdmissionError::NoDeliveryVariant {
            template: template.to_owned(),
            delivery: delivery.unwrap_or(DeliveryMode::None),
            offered,
        }
    }
}

fn size_of(bytes: &Option<u64>) -> String {
    match bytes {
        Some(bytes) => format!("is {bytes} bytes"),
        None => "gave more than 16 MiB (it is not a regular file)".to_owned(),
    }
}

fn shown_path(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" {}", p.display()))
        .unwrap_or_default()
}

impl AdmissionError {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "admission.unreadable",
            Self::TooLarge { .. } => "admission.too_large",
            Self::Unparseable { .. } => "admission.unparseable",
            Self::InvalidGraph { .. } => "admission.invalid_graph",
            Self::Rejected { .. } => "admission.graph_rejected",
            Self::VerifierInternal(_) => "admission.verifier_internal",
            Self::InputRequired => "admission.input_required",
            Self::InputMismatch(_) => "admission.input_mismatch",
            Self::Plan(_) | Self::Refused(AdmissionRefusal::Plan(_)) => "admission.plan",
            Self::Refused(AdmissionRefusal::Graph(GraphAdmissionError::DeliveryOverlap(_))) => {
                "admission.delivery_overlap"
            }
            Self::Refused(AdmissionRefusal::Graph(_)) => "admission.graph_under_plan",
            Self::NoAgentCli => "admission.no_agent_cli",
            Self::MissingConnection { .. } => "admission.missing_connection",
            Self::Workspace { .. } => "admission.workspace",
            Self::UnknownTemplate(_) => "admission.unknown_template",
            Self::TemplateNeedsTask(_) => "admission.template_needs_task",
            Self::TaskNotAccepted(_) => "admission.task_not_accepted",
            Self::NoDeliveryVariant { .. } => "admission.no_delivery_variant",
            Self::TaskFrom(_) => "admission.task_from",
            Self::Preparation(_) => "admission.preparation",
            Self::GapWorkflow { .. } => "admission.gap_workflow",
            Self::GapRejected { .. } => "admission.gap_rejected",
            Self::GapOptions(_) => "admission.gap_options",
            Self::StoredSubmission { .. } => "admission.stored_submission",
        }
    }
}
