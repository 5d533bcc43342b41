//! What the registry knows of a tool besides its body: name, summary, guard tags and accepted
//! keywords, and the check of a call's keywords against them.

use super::error::ToolError;
use crate::pyfmt::py_list;
use serde_json::{Map, Value};

/// Name, summary and guard tags of a registered tool.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolDescriptor {
    pub name: String,
    pub summary: String,
    /// `perception` / `planning` / `sim_step` tags select a guard category.
    pub tags: Vec<String>,
    /// Accepted keyword names; `None` accepts anything (like `**kwargs`).
    pub params: Option<Vec<String>>,
}

impl ToolDescriptor {
    /// A descriptor accepting any keyword arguments.
    pub fn new(name: impl Into<String>) -> Self {
        ToolDescriptor {
            name: name.into(),
            summary: String::new(),
            tags: Vec::new(),
            params: None,
        }
    }

    /// Adds guard tags.
    pub fn with_tags(mut self, tags: &[&str]) -> Self {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }

    /// Restricts the accepted keyword names (extra ones raise `ToolArgumentError`).
    pub fn with_params(mut self, params: &[&str]) -> Self {
        self.params = Some(params.iter().map(|p| p.to_string()).collect());
        self
    }
}

/// Checks keyword names against the descriptor (newest reference behaviour: reject extras).
pub(crate) fn check_arguments(
    descriptor: &ToolDescriptor,
    args: &Map<String, Value>,
) -> Result<(), ToolError> {
    let Some(params) = &descriptor.params else {
        return Ok(());
    };
    let mut extra: Vec<&str> = args
        .keys()
        .map(String::as_str)
        .filter(|k| !params.iter().any(|p| p == k))
        .collect();
    if extra.is_empty() {
        return Ok(());
    }
    extra.sort_unstable();
    let accepted: Vec<&str> = params.iter().map(String::as_str).collect();
    Err(ToolError::Argument {
        tool: descriptor.name.clone(),
        message: format!(
            "tool '{}' got extraneous arguments {}; accepted: {}",
            descriptor.name,
            py_list(&extra),
            accepted.join(", ")
        ),
    })
}
