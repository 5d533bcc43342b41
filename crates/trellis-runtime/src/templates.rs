//! Built-in templates: graph documents embedded in the binary and admitted by the same verifier
//! as user graphs.

use serde_json::{Value, json};

/// One built-in template.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    pub name: &'static str,
    pub summary: &'static str,
    document: &'static str,
    push_variant: Option<&'static str>,
}

const TEMPLATES: [Template; 2] = [
    Template {
        name: "single-worker",
        summary: "One agent does the task in the workspace; the run fails if the agent fails.",
        document: include_str!("../../../templates/single-worker.json"),
        push_variant: None,
    },
    Template {
        name: "software-change",
        summary: "A worker edits the repository, acceptance and code reviewers judge it in \
                  parallel, rejections go back for repair (at most ten repairs).",
        document: include_str!("../../../templates/software-change.json"),
        push_variant: Some(include_str!("../../../templates/software-change-push.json")),
    },
];

/// Every built-in template, in listing order.
pub fn all() -> &'static [Template] {
    &TEMPLATES
}

pub fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

impl Template {
    /// The graph document text; `push` selects the variant that delivers by git push.
    pub fn document(&self, push: bool) -> Result<&'static str, String> {
        match (push, self.push_variant) {
            (false, _) => Ok(self.document),
            (true, Some(variant)) => Ok(variant),
            (true, None) => Err(format!(
                "template {} has no push delivery variant",
                self.name
            )),
        }
    }

    pub fn supports_push(&self) -> bool {
        self.push_variant.is_some()
    }

    /// The initial input built from a task description.
    pub fn input_for_task(&self, task: &str) -> Value {
        json!({ "task": task })
    }
}
