//! A GraphSpec run's submission: what the ledger stores to define the run (graph, input, plan,
//! workspace, source revision, template). Never secret values; read back by
//! [`crate::graphspec::admission::readmit`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoints::workspace::{ResumePoint, WorkspaceHandling};
use crate::delivery::SourceRevision;
use crate::plan::RuntimePlan;

/// Everything that defines a GraphSpec run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Submission {
    pub graph: Value,
    pub input: Value,
    pub plan: RuntimePlan,
    pub workspace: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<StoredSource>,
    /// The built-in template the graph came from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Checkpoints, verifier copies, worktree mode.
    #[serde(default, skip_serializing_if = "WorkspaceHandling::is_default")]
    pub handling: WorkspaceHandling,
    /// A successor resumed from a checkpoint: where it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_checkpoint: Option<ResumePoint>,
}

/// The git position the run started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoredSource {
    pub branch: String,
    pub revision: String,
}

impl From<&SourceRevision> for StoredSource {
    fn from(source: &SourceRevision) -> Self {
        Self {
            branch: source.branch.clone(),
            revision: source.revision.clone(),
        }
    }
}

impl StoredSource {
    pub fn revision(&self) -> SourceRevision {
        SourceRevision {
            branch: self.branch.clone(),
            revision: self.revision.clone(),
        }
    }
}

impl Submission {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
