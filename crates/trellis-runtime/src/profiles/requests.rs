//! The requests and answers of the run API's profile operations (`Runtime::save_profile`,
//! `delete_profile`).

use serde::Serialize;

use crate::graphspec::admission::AdmissionSummary;
use crate::profiles::document::ProfileDefinition;
use crate::profiles::store::ExpectedRevision;

/// A profile to save: its name, its definition and the revision the caller expects to replace.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveProfile {
    pub name: String,
    pub definition: ProfileDefinition,
    pub expected: ExpectedRevision,
}

/// A saved profile: its new revision and what admission said of it (the `run --validate-only`
/// report, and notices such as the agent CLI a plan-less profile was checked with).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedProfile {
    pub name: String,
    pub revision: u64,
    /// The revision replaced (none: the profile is new).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_revision: Option<u64>,
    pub identity: String,
    pub admission: AdmissionSummary,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// A deleted profile and the revision it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedProfile {
    pub name: String,
    pub revision: u64,
}
