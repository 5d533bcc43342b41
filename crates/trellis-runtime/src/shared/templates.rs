//! Built-in templates: graph documents embedded in the binary and admitted by the same verifier
//! as user graphs.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One built-in template.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Template {
    pub name: &'static str,
    pub summary: &'static str,
    /// The graph of the template's default delivery.
    document: &'static str,
    default_delivery: DeliveryMode,
    /// Graphs of the other deliveries it offers.
    variants: &'static [(DeliveryMode, &'static str)],
    /// Where the input comes from: a task text, or a GitHub issue or pull request.
    source: TemplateInput,
    /// Agent nodes that keep one session across their rounds (`sessionScope: node_instance`)
    /// unless the plan states a scope: the reference's template bindings.
    session_nodes: &'static [&'static str],
}

/// How a run hands over its result (`--delivery`; `--push`, `--pr`, `--ship` are short for
/// `push`, `pull_request`, `merge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// The change stays in the workspace.
    None,
    /// The run branch is pushed.
    Push,
    /// The run branch is pushed and delivered as a pull request; its review feedback and
    /// failing checks go back to the worker until it is clean.
    PullRequest,
    /// As `pull_request`, then merged once mergeable and green.
    Merge,
    /// One report comment is posted on the reviewed issue or pull request.
    Comment,
}

impl DeliveryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Push => "push",
            Self::PullRequest => "pull_request",
            Self::Merge => "merge",
            Self::Comment => "comment",
        }
    }

    /// Reads `none|push|pull_request|merge|comment` (`pr` and `ship` too).
    pub fn parse(text: &str) -> Option<DeliveryMode> {
        Some(match text.trim() {
            "none" | "local" => Self::None,
            "push" => Self::Push,
            "pull_request" | "pr" => Self::PullRequest,
            "merge" | "ship" => Self::Merge,
            "comment" => Self::Comment,
            _ => return None,
        })
    }
}

impl std::fmt::Display for DeliveryMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The delivery a template run asks for: its mode (`None`: the template's default) and
/// whether pull-request review feedback is routed back (`--no-pr-feedback` turns it off;
/// failing checks are always routed back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TemplateDelivery {
    pub mode: Option<DeliveryMode>,
    pub ignore_pr_feedback: bool,
}

impl TemplateDelivery {
    pub fn mode(mode: DeliveryMode) -> Self {
        Self {
            mode: Some(mode),
            ignore_pr_feedback: false,
        }
    }
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
        document: include_str!("../../../../templates/single-worker.json"),
        default_delivery: DeliveryMode::None,
        variants: &[],
        source: TemplateInput::Task,
        session_nodes: &[],
    },
    Template {
        name: "software-change",
        summary: "A worker edits the repository, acceptance and code reviewers judge it in \
                  parallel, rejections go back for repair (at most ten repairs).",
        document: include_str!("../../../../templates/software-change.json"),
        default_delivery: DeliveryMode::None,
        variants: &[
            (
                DeliveryMode::Push,
                include_str!("../../../../templates/software-change-push.json"),
            ),
            (
                DeliveryMode::PullRequest,
                include_str!("../../../../templates/software-change-pr.json"),
            ),
            (
                DeliveryMode::Merge,
                include_str!("../../../../templates/software-change-merge.json"),
            ),
        ],
        source: TemplateInput::Task,
        session_nodes: &["worker"],
    },
    Template {
        name: "issue-review",
        summary: "Reviews a GitHub issue against the code and posts one report comment on it.",
        document: include_str!("../../../../templates/issue-review.json"),
        default_delivery: DeliveryMode::Comment,
        variants: &[(
            DeliveryMode::None,
            include_str!("../../../../templates/issue-review-none.json"),
        )],
        source: TemplateInput::ForgeUrl,
        session_nodes: &[],
    },
    Template {
        name: "pr-review",
        summary: "Reviews a pull request: classifies its claims, reproduces them, checks the code, \
                  posts one review comment.",
        document: include_str!("../../../../templates/pr-review.json"),
        default_delivery: DeliveryMode::Comment,
        variants: &[],
        source: TemplateInput::ForgeUrl,
        session_nodes: &[],
    },
    Template {
        name: "auto-research",
        summary: "Research in iterations over .trellis/research (options.iterations, default \
                  10): a planner, three scouts, staging, the experiment and three independent \
                  judges each time; then finalizers, a disposition audit and the archive.",
        document: include_str!("../../../../templates/auto-research.json"),
        default_delivery: DeliveryMode::None,
        variants: &[(
            DeliveryMode::Push,
            include_str!("../../../../templates/auto-research-push.json"),
        )],
        source: TemplateInput::Task,
        // The judges and the recorders start fresh every iteration: their verdicts must not
        // lean on what they said before.
        session_nodes: &["planner", "research_scout", "staging", "experiment"],
    },
];

pub(crate) fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

/// A built-in template as front ends list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// Whether it has a variant that delivers the accepted change by `git push`.
    pub supports_push: bool,
    /// The deliveries it offers, its default first.
    pub deliveries: Vec<DeliveryMode>,
    /// What its input is built from.
    pub input: TemplateInput,
}

impl TemplateInfo {
    fn of(template: &Template) -> Self {
        Self {
            name: template.name,
            description: template.summary,
            supports_push: template.supports_push(),
            deliveries: template.deliveries(),
            input: template.source,
        }
    }

    /// The graph document (GraphSpec JSON text); `push` selects the push-delivery variant.
    pub fn document(&self, push: bool) -> Option<&'static str> {
        let mode = push.then_some(DeliveryMode::Push);
        find(self.name).and_then(|t| t.document_for(mode))
    }

    /// The graph document of a delivery (`None`: the template's default).
    pub fn document_for(&self, delivery: Option<DeliveryMode>) -> Option<&'static str> {
        find(self.name).and_then(|t| t.document_for(delivery))
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
    /// The graph document text of a delivery (`None`: the default one); none when the
    /// template does not offer it.
    pub fn document_for(&self, delivery: Option<DeliveryMode>) -> Option<&'static str> {
        match delivery {
            None => Some(self.document),
            Some(mode) if mode == self.default_delivery => Some(self.document),
            Some(mode) => self
                .variants
                .iter()
                .find(|(m, _)| *m == mode)
                .map(|(_, text)| *text),
        }
    }

    pub fn supports_push(&self) -> bool {
        self.document_for(Some(DeliveryMode::Push)).is_some()
    }

    /// The deliveries offered, the default first.
    pub fn deliveries(&self) -> Vec<DeliveryMode> {
        std::iter::once(self.default_delivery)
            .chain(self.variants.iter().map(|(m, _)| *m))
            .collect()
    }

    /// The agent nodes that keep their session across rounds unless the plan says otherwise.
    pub fn session_nodes(&self) -> &'static [&'static str] {
        self.session_nodes
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
