//! `--task-from URL`: a GitHub issue or pull request URL resolved into the input object the
//! `issue-review` and `pr-review` templates declare (title, body, labels, linked issues and the
//! diff scope: base/head repository, branch and revision).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::task_url::{TaskKind, TaskUrl};
use crate::{ForgeError, GitHub, RepoRef};

/// Most issues a pull request body may link that are fetched for its context.
pub const MAX_LINKED_ISSUES: usize = 10;

/// The head side of a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadScope {
    pub repository: String,
    pub branch: String,
    pub revision: String,
}

/// What a review looks at: the base (for an issue: the default branch) and, for a pull request,
/// the head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewScope {
    pub base_repository: String,
    pub base_branch: String,
    pub base_revision: String,
    pub head: Option<HeadScope>,
}

/// An issue a pull request says it closes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkedIssue {
    pub url: String,
    pub title: String,
    pub body: String,
}

/// A resolved issue or pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskContext {
    pub url: String,
    /// What the number turned out to be (an `/issues/N` URL may name a pull request).
    pub kind: TaskKind,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub linked_issues: Vec<LinkedIssue>,
    pub scope: ReviewScope,
}

impl TaskContext {
    /// The body the templates see: the text, then its labels (the templates' inputs have no
    /// label field of their own).
    fn body_with_labels(&self) -> String {
        if self.labels.is_empty() {
            self.body.clone()
        } else {
            format!(
                "{}\n\nLabels: {}",
                self.body.trim_end(),
                self.labels.join(", ")
            )
        }
    }

    fn scope_json(&self) -> Map<String, Value> {
        let mut scope = Map::new();
        scope.insert("baseRepository".into(), json!(self.scope.base_repository));
        scope.insert("baseBranch".into(), json!(self.scope.base_branch));
        scope.insert("baseRevision".into(), json!(self.scope.base_revision));
        if let Some(head) = &self.scope.head {
            scope.insert("headRepository".into(), json!(head.repository));
            scope.insert("headBranch".into(), json!(head.branch));
            scope.insert("headRevision".into(), json!(head.revision));
        }
        scope
    }

    fn with_instructions(mut input: Value, instructions: Option<&str>) -> Value {
        if let Some(text) = instructions.filter(|t| !t.trim().is_empty()) {
            input["instructions"] = json!(text);
        }
        input
    }

    /// The `issue-review` input: `{url, context: {title, body, reviewScope}, instructions?}`.
    pub fn issue_review_input(&self, instructions: Option<&str>) -> Value {
        let input = json!({
            "url": self.url,
            "context": {
                "title": self.title,
                "body": self.body_with_labels(),
                "reviewScope": self.scope_json(),
            },
        });
        Self::with_instructions(input, instructions)
    }

    /// The `pr-review` input: `{url, context: {title, body, linkedIssues, reviewScope},
    /// instructions?}`; only for a pull request.
    pub fn pr_review_input(&self, instructions: Option<&str>) -> Result<Value, ForgeError> {
        if self.kind != TaskKind::PullRequest || self.scope.head.is_none() {
            return Err(ForgeError::NotAPullRequest {
                url: self.url.clone(),
                template: "pr-review".into(),
            });
        }
        let input = json!({
            "url": self.url,
            "context": {
                "title": self.title,
                "body": self.body_with_labels(),
                "linkedIssues": self.linked_issues,
                "reviewScope": self.scope_json(),
            },
        });
        Ok(Self::with_instructions(input, instructions))
    }

    /// The input of the named template.
    pub fn input_for_template(
        &self,
        template: &str,
        instructions: Option<&str>,
    ) -> Result<Value, ForgeError> {
        match template {
            "issue-review" => Ok(self.issue_review_input(instructions)),
            "pr-review" => self.pr_review_input(instructions),
            other => Err(ForgeError::TemplateTakesNoUrl {
                template: other.to_owned(),
            }),
        }
    }
}

impl GitHub {
    /// Resolves an issue or pull request URL on this client's host into its task context.
    pub async fn resolve_task(&self, url: &str) -> Result<TaskContext, ForgeError> {
        let task = TaskUrl::parse(url)?;
        if task.host != self.web_host() {
            return Err(ForgeError::ForeignHost {
                url: url.to_owned(),
                host: task.host,
                api: self.api_url().to_owned(),
            });
        }
        let repo = &task.repository;
        if task.kind == TaskKind::Issue {
            let issue = self.issue(repo, task.number).await?;
            // An `/issues/N` URL may name a pull request; it is then resolved as one.
            if issue.pull_request.is_none() {
                let base = self.repository(repo).await?;
                let branch = self.branch(repo, &base.default_branch).await?;
                return Ok(TaskContext {
                    url: task.canonical(),
                    kind: TaskKind::Issue,
                    title: issue.title,
                    body: issue.body.unwrap_or_default(),
                    labels: issue.labels.into_iter().map(|l| l.name).collect(),
                    linked_issues: Vec::new(),
                    scope: ReviewScope {
                        base_repository: base.full_name,
                        base_branch: branch.name,
                        base_revision: branch.commit.sha,
                        head: None,
                    },
                });
            }
        }
        let pull = self.pull(repo, task.number).await?;
        let body = pull.body.clone().unwrap_or_default();
        let linked_issues = self.linked_issues(repo, task.number, &body).await?;
        let base_repository = pull
            .base
            .repo
            .as_ref()
            .map_or_else(|| repo.to_string(), |r| r.full_name.clone());
        // A deleted fork leaves `head.repo` null; its label still names the owner.
        let head_repository = pull.head.repo.as_ref().map_or_else(
            || {
                let owner = pull.head.label.split(':').next().unwrap_or_default();
                format!("{owner}/{}", repo.name())
            },
            |r| r.full_name.clone(),
        );
        Ok(TaskContext {
            url: task.canonical(),
            kind: TaskKind::PullRequest,
            title: pull.title,
            body,
            labels: pull.labels.into_iter().map(|l| l.name).collect(),
            linked_issues,
            scope: ReviewScope {
                base_repository,
                base_branch: pull.base.reference,
                base_revision: pull.base.sha,
                head: Some(HeadScope {
                    repository: head_repository,
                    branch: pull.head.reference,
                    revision: pull.head.sha,
                }),
            },
        })
    }

    /// The issues a pull request body closes (`Fixes #12`, `closes owner/repo#3`, or an issue
    /// URL on this host); references the token cannot see are left out.
    async fn linked_issues(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Vec<LinkedIssue>, ForgeError> {
        let mut linked = Vec::new();
        for (target, issue_number) in
            crate::closing::closing_references(body, repo, self.web_host())
        {
            if (target == *repo && issue_number == number) || linked.len() >= MAX_LINKED_ISSUES {
                continue;
            }
            match self.issue(&target, issue_number).await {
                Ok(issue) => linked.push(LinkedIssue {
                    url: format!("https://{}/{target}/issues/{issue_number}", self.web_host()),
                    title: issue.title,
                    body: issue.body.unwrap_or_default(),
                }),
                Err(
                    ForgeError::NotFound { .. }
                    | ForgeError::RepositoryNotFound { .. }
                    | ForgeError::Forbidden { .. },
                ) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(linked)
    }
}
