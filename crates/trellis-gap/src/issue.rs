//! Validation issue type (reference shape) and its human-readable rendering.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad an issue is: errors block execution, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    /// `error` / `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One validation finding; serializes exactly as `{"severity","node_id","field","message"}`.
///
/// `node_id` carries the location (e.g. `subgraphs.sg.nodes.step`); `field` is always null in
/// the reference validator; the rule id ends the message, e.g. `" (S5)"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub severity: Severity,
    pub node_id: String,
    pub field: Option<String>,
    pub message: String,
}

impl Issue {
    /// An error-severity issue at `location`.
    pub fn error(location: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            severity: Severity::Error,
            node_id: location.into(),
            field: None,
            message: message.into(),
        }
    }

    /// A warning-severity issue at `location`.
    pub fn warning(location: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            severity: Severity::Warning,
            ..Issue::error(location, message)
        }
    }

    /// True for error severity.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The trailing rule id (`W4`, `S11`, `SK2`, …) when the message carries one.
    pub fn rule(&self) -> Option<&str> {
        let inner = self.message.strip_suffix(')')?;
        let start = inner.rfind(" (")?;
        let rule = &inner[start + 2..];
        let digits = rule
            .strip_prefix("SK")
            .or_else(|| rule.strip_prefix(['W', 'S']))?;
        let valid = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        valid.then_some(rule)
    }
}

impl fmt::Display for Issue {
    /// `[<severity>] <node_id>[.<field>]: <message>`, as the reference prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.severity.as_str(), self.node_id)?;
        if let Some(field) = &self.field {
            write!(f, ".{field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Renders issues one per line plus a summary line (`OK: …` or `FAIL: …`), for terminals.
pub fn render_issues(issues: &[Issue]) -> String {
    let mut out = String::new();
    for issue in issues {
        out.push_str(&issue.to_string());
        out.push('\n');
    }
    let errors = issues.iter().filter(|i| i.is_error()).count();
    let warnings = issues.len() - errors;
    if errors > 0 {
        out.push_str(&format!("FAIL: {errors} error(s), {warnings} warning(s)\n"));
    } else {
        out.push_str(&format!("OK: 0 errors, {warnings} warning(s)\n"));
    }
    out
}

/// The reference's `GraphValidationError` text: first five issues, then a count of the rest.
pub fn graph_validation_message(errors: &[Issue]) -> String {
    let shown: Vec<String> = errors.iter().take(5).map(Issue::to_string).collect();
    let mut text = format!(
        "Graph validation failed ({} issues): {}",
        errors.len(),
        shown.join("; ")
    );
    if errors.len() > 5 {
        text.push_str(&format!(" ... and {} more", errors.len() - 5));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_in_reference_shape() {
        let issue = Issue::error("workflow.edges", "no edge from START (W2)");
        let json = serde_json::to_string(&issue).unwrap();
        assert_eq!(
            json,
            r#"{"severity":"error","node_id":"workflow.edges","field":null,"message":"no edge from START (W2)"}"#
        );
        assert_eq!(issue.rule(), Some("W2"));
        assert_eq!(
            issue.to_string(),
            "[error] workflow.edges: no edge from START (W2)"
        );
    }

    #[test]
    fn rendering_summarises_counts() {
        let text = render_issues(&[Issue::warning("x", "w")]);
        assert!(text.ends_with("OK: 0 errors, 1 warning(s)\n"));
        assert_eq!(Issue::warning("x", "workflow has no end node").rule(), None);
    }
}
