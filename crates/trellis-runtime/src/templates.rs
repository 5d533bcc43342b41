//! Built-in templates: graph documents embedded in the binary and admitted by the same verifier
//! as user graphs.

use serde::Serialize;
use serde_json::{Value, json};

/// One built-in template.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Template {
    pub name: &'static str,
    pub summary: &'static str,
    document: &'static str,
    push_variant: Option<&'static str>,
    /// Where the input comes from: a task text, or a GitHub issue or pull request.
    source: TemplateInput,
}

/// What a template's input is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateInput {
    /// `{"task": …}` from a task text.
    Task,
    /// A GitHub issue or pull request, resolved by `trellis_forge` (`--task-from URL`).
    ForgeUrl,
}

const TEMPLATES: [Template; 5] = [
    Template {
        name: "single-worker",
        summary: "One agent does the task in the workspace; the run fails if the agent fails.",
        document: include_str!("../../../templates/single-worker.json"),
        push_variant: None,
        source: TemplateInput::Task,
    },
    Template {
        name: "software-change",
        summary: "A worker edits the repository, acceptance and code reviewers judge it in \
                  parallel, rejections go back for repair (at most ten repairs).",
        document: include_str!("../../../templates/software-change.json"),
        push_variant: Some(include_str!("../../../templates/software-change-push.json")),
        source: TemplateInput::Task,
    },
    Template {
        name: "issue-review",
        summary: "Reviews a GitHub issue against the code and posts one report comment on it.",
        document: include_str!("../../../templates/issue-review.json"),
        push_variant: None,
        source: TemplateInput::ForgeUrl,
    },
    Template {
        name: "pr-review",
        summary: "Reviews a pull request: classifies its claims, reproduces them, checks the code, \
                  posts one review comment.",
        document: include_str!("../../../templates/pr-review.json"),
        push_variant: None,
        source: TemplateInput::ForgeUrl,
    },
    Template {
        name: "auto-research",
        summary: "Research in rounds (options.iterations, default 10): three scouts propose in \
                  parallel, a researcher works, an independent reviewer judges.",
        document: include_str!("../../../templates/auto-research.json"),
        push_variant: None,
        source: TemplateInput::Task,
    },
];

pub(crate) fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

/// A built-in template as front ends list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// Whether it has a variant that delivers the accepted change by `git push`.
    pub supports_push: bool,
    /// What its input is built from.
    pub input: TemplateInput,
}

impl TemplateInfo {
    fn of(template: &Template) -> Self {
        Self {
            name: template.name,
            description: template.summary,
            supports_push: template.supports_push(),
            input: template.source,
        }
    }

    /// The graph document (GraphSpec JSON text); `push` selects the push-delivery variant.
    pub fn document(&self, push: bool) -> Option<&'static str> {
        find(self.name).and_then(|t| t.document(push))
    }
}

/// Every built-in template, in listing order.
pub fn templates() -> Vec<TemplateInfo> {
    TEMPLATES.iter().map(TemplateInfo::of).collect()
}

/// The built-in template called `name`.
pub fn template(name: &str) -> Option<TemplateInfo> {
    find(name).map(TemplateInfo::of)
}

impl Template {
    /// The graph document text; `push` selects the variant that delivers by git push (none
    /// when the template has no such variant).
    pub fn document(&self, push: bool) -> Option<&'static str> {
        match (push, self.push_variant) {
            (false, _) => Some(self.document),
            (true, variant) => variant,
        }
    }

    pub fn supports_push(&self) -> bool {
        self.push_variant.is_some()
    }

    /// Where this template's input comes from.
    pub fn input_source(&self) -> TemplateInput {
        self.source
    }

    /// The initial input built from a task description.
    pub fn input_for_task(&self, task: &str) -> Value {
        json!({ "task": task })
    }
}
