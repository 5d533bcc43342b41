//! A GraphSpec run's submission: what the ledger stores to define the run (graph, input, plan,
//! workspace, source revision) and how the controller reads it back. Never secret values.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::{GraphSpec, JsonPath};
use trellis_verify::{Verification, verify_builtin};

use crate::delivery::SourceRevision;
use crate::error::RuntimeError;
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

/// A submission read back and admitted again: the parsed graph and its identity.
#[derive(Debug, Clone)]
pub struct AdmittedRun {
    pub submission: Submission,
    pub graph: GraphSpec,
    pub identity: String,
}

impl Submission {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Parses, verifies and admits the stored submission (a controller trusts nothing it did
    /// not check itself).
    pub fn admit(value: &Value, run: &str) -> Result<AdmittedRun, RuntimeError> {
        let invalid = |reason: String| RuntimeError::Submission {
            run: run.to_owned(),
            reason,
        };
        let submission: Submission =
            serde_json::from_value(value.clone()).map_err(|e| invalid(e.to_string()))?;
        let graph = GraphSpec::parse(&submission.graph, &JsonPath::root())
            .map_err(|e| invalid(format!("graph: {e}")))?;
        let identity = match verify_builtin(&graph) {
            Verification::Verified(verified) => verified.identity.to_string(),
            Verification::Rejected(diagnostics) => {
                return Err(invalid(format!(
                    "graph no longer verifies ({} diagnostics)",
                    diagnostics.len()
                )));
            }
            Verification::Internal(message) => return Err(invalid(message)),
        };
        graph
            .initial_input
            .check_value(&submission.input)
            .map_err(|e| invalid(format!("input: {e}")))?;
        submission.plan.admit(&graph)?;
        Ok(AdmittedRun {
            submission,
            graph,
            identity,
        })
    }
}
