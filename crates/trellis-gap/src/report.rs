//! The `validate` command's result object and exit code, ready for the CLI to print.

use crate::issue::{Issue, render_issues};
use crate::loader::{is_gap_document, load_workflow, workflow_file_path};
use crate::validate::{ValidateOptions, validate};
use serde::Serialize;
use std::path::Path;

/// Serializes as `{"status":"verified"|"rejected","issues":[...]}` or
/// `{"status":"unparseable","error":"..."}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ValidationReport {
    /// Loaded, no error-severity issue (warnings may be present).
    Verified { issues: Vec<Issue> },
    /// Loaded, at least one error-severity issue.
    Rejected { issues: Vec<Issue> },
    /// The loader rejected the document.
    Unparseable { error: String },
}

impl ValidationReport {
    /// Loads and validates `path` (a `workflow.json` or a directory holding one).
    pub fn for_path(path: &Path, options: &ValidateOptions<'_>) -> ValidationReport {
        match load_workflow(path) {
            Err(error) => ValidationReport::Unparseable {
                error: error.to_string(),
            },
            Ok(workflow) => {
                let issues = validate(&workflow, options);
                if issues.iter().any(Issue::is_error) {
                    ValidationReport::Rejected { issues }
                } else {
                    ValidationReport::Verified { issues }
                }
            }
        }
    }

    /// 0 when verified, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            ValidationReport::Verified { .. } => 0,
            _ => 1,
        }
    }

    /// Readable text: one line per issue and a summary, or `FAIL: <error>`.
    pub fn render(&self) -> String {
        match self {
            ValidationReport::Verified { issues } | ValidationReport::Rejected { issues } => {
                render_issues(issues)
            }
            ValidationReport::Unparseable { error } => format!("FAIL: {error}\n"),
        }
    }
}

/// True when `path` (file or directory with `workflow.json`) holds a JSON document with `"version": 3`.
pub fn is_gap_path(path: &Path) -> bool {
    std::fs::read_to_string(workflow_file_path(path))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|document| is_gap_document(&document))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn report_shapes_and_exit_codes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("workflow.json");
        std::fs::write(&file, "{\"version\": 3, \"nodes\": ").unwrap();
        let report = ValidationReport::for_path(dir.path(), &ValidateOptions::default());
        assert_eq!(report.exit_code(), 1);
        let value = serde_json::to_value(&report).unwrap();
        assert_eq!(value["status"], "unparseable");
        assert!(value["error"].as_str().unwrap().starts_with("invalid JSON"));
        assert!(!is_gap_path(dir.path()));

        let doc =
            json!({"version": 3, "nodes": {"a": {"type": "noop"}}, "edges": [["START", "a"]]});
        std::fs::write(&file, doc.to_string()).unwrap();
        assert!(is_gap_path(dir.path()));
        let report = ValidationReport::for_path(&file, &ValidateOptions::default());
        let value = serde_json::to_value(&report).unwrap();
        assert_eq!(value["status"], "rejected");
        assert_eq!(
            value.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["status", "issues"]
        );
        assert_eq!(
            value["issues"][0]["message"],
            "node 'a' has no outgoing edge or conditional dispatch (W5)"
        );
        assert!(
            report
                .render()
                .ends_with("FAIL: 2 error(s), 0 warning(s)\n")
        );

        let doc = json!({"version": 3, "nodes": {"a": {"type": "noop"}, "e": {"type": "end", "status": "success"}},
                         "edges": [["START", "a"], ["a", "e"]]});
        std::fs::write(&file, doc.to_string()).unwrap();
        let report = ValidationReport::for_path(&file, &ValidateOptions::default());
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({"status": "verified", "issues": []})
        );
        assert_eq!(report.exit_code(), 0);
    }
}
