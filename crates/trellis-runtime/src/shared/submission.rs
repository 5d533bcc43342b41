//! A GraphSpec run's submission: what the ledger stores to define the run (graph, input, plan,
//! workspace and how it is handled, source revision, template, checkpoint resumed from, environment hooks). Never secret values; read back by
//! [`crate::graphspec::admission::readmit`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::delivery::SourceRevision;
use crate::plan::RuntimePlan;
use crate::shared::environment::EnvironmentSpec;

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
    /// The connection variables (names only) whose values the run's caller sent: they live
    /// in its controller's memory alone, so no other host can take the run over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caller_connections: Vec<String>,
    /// The hooks that prepare the host before the run dispatches (a team server's runs only);
    /// a resumed successor runs them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentSpec>,
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

/// How a run treats its workspace (stored with the submission; every field has a default so
/// submissions made before checkpoints existed still read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WorkspaceHandling {
    /// Record checkpoints before writing waves.
    pub checkpoints: bool,
    /// Keep the checkpoints of a run that succeeded (they are always kept for a failed run).
    pub keep_checkpoints: bool,
    /// Give each read-only verifier a disposable copy of the workspace.
    pub verifier_copies: bool,
    /// Set in worktree mode: the user's checkout the run's worktree was made from (the
    /// submission's workspace is then the worktree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_of: Option<PathBuf>,
}

impl Default for WorkspaceHandling {
    fn default() -> Self {
        Self {
            checkpoints: true,
            keep_checkpoints: false,
            verifier_copies: true,
            worktree_of: None,
        }
    }
}

impl WorkspaceHandling {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Where a successor resumed from a checkpoint starts: the predecessor's checkpoint (its files
/// were restored before the successor started) and its graph position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumePoint {
    pub run: String,
    pub number: u32,
    /// Executions of the predecessor below this one are reused; the rest run again.
    pub next_execution: u64,
    pub commit: String,
    pub tree: String,
}
