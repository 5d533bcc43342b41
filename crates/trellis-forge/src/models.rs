//! Typed views of GitHub's REST answers: only the fields Trellis reads. GitHub adds fields
//! freely, so unknown ones are ignored here (our own wire formats stay closed).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct User {
    pub login: String,
    #[serde(rename = "type", default)]
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Repository {
    pub full_name: String,
    pub default_branch: String,
    pub html_url: String,
    #[serde(default)]
    pub private: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CommitRef {
    pub sha: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Branch {
    pub name: String,
    pub commit: CommitRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Label {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub state: String,
    #[serde(default)]
    pub labels: Vec<Label>,
    pub html_url: String,
    #[serde(default)]
    pub user: Option<User>,
    /// Present when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

/// One side of a pull request (`head` or `base`). `repo` is null for a deleted fork.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PullSide {
    pub label: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub sha: String,
    #[serde(default)]
    pub repo: Option<Repository>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PullRequest {
    pub number: u64,
    pub state: String,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub html_url: String,
    #[serde(default)]
    pub draft: bool,
    /// Only in the full shape (`GET /pulls/{n}`); list items ("pull request simple") carry
    /// `merged_at` alone, so read [`PullRequest::is_merged`].
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub merged_at: Option<String>,
    /// `None` while GitHub is still computing it (and absent from list items).
    #[serde(default)]
    pub mergeable: Option<bool>,
    #[serde(default)]
    pub mergeable_state: Option<String>,
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    #[serde(default)]
    pub labels: Vec<Label>,
    pub head: PullSide,
    pub base: PullSide,
    #[serde(default)]
    pub user: Option<User>,
}

/// A user's login, or "someone" when GitHub gives none (a deleted account).
pub(crate) fn login(user: Option<&User>) -> String {
    user.map_or_else(|| "someone".to_owned(), |u| u.login.clone())
}

impl PullRequest {
    pub fn is_open(&self) -> bool {
        self.state == "open"
    }

    /// Whether it was merged, in the full shape and in a list item alike.
    pub fn is_merged(&self) -> bool {
        self.merged || self.merged_at.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct IssueComment {
    pub id: u64,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user: Option<User>,
    pub html_url: String,
    #[serde(default)]
    pub created_at: Option<String>,
    /// Changes with every edit: with the id, what tells an edited comment from one already seen.
    #[serde(default)]
    pub updated_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Review {
    pub id: u64,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub body: Option<String>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub commit_id: Option<String>,
    #[serde(default)]
    pub submitted_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ReviewComment {
    pub id: u64,
    #[serde(default)]
    pub user: Option<User>,
    pub body: String,
    pub path: String,
    /// Null when the comment is outdated (its line no longer exists in the diff).
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub html_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CheckOutput {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CheckRun {
    pub id: u64,
    pub name: String,
    /// `queued`, `in_progress`, `completed` (and GitHub's newer `waiting`, `requested`,
    /// `pending`).
    pub status: String,
    #[serde(default)]
    pub conclusion: Option<String>,
    #[serde(default)]
    pub html_url: Option<String>,
    #[serde(default)]
    pub output: Option<CheckOutput>,
    #[serde(default)]
    pub details_url: Option<String>,
    /// The app that ran the check: `github-actions` for Actions jobs, whose check run id is
    /// the job id (what the job-logs API takes).
    #[serde(default)]
    pub app: Option<CheckApp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CheckApp {
    #[serde(default)]
    pub slug: Option<String>,
}

impl CheckRun {
    /// Whether GitHub Actions ran it (so its log can be downloaded by its id).
    pub fn is_actions_job(&self) -> bool {
        self.app
            .as_ref()
            .and_then(|a| a.slug.as_deref())
            .is_some_and(|slug| slug == "github-actions")
    }

    /// Completed with a conclusion that lets a merge through.
    pub fn is_green(&self) -> bool {
        self.status == "completed"
            && matches!(
                self.conclusion.as_deref(),
                Some("success" | "neutral" | "skipped")
            )
    }

    /// Completed with any other conclusion (failure, timed out, cancelled, action required…).
    pub fn is_failing(&self) -> bool {
        self.status == "completed" && !self.is_green()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CheckRuns {
    pub total_count: u64,
    pub check_runs: Vec<CheckRun>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CommitStatus {
    pub context: String,
    /// `success`, `pending`, `failure` or `error`.
    pub state: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CombinedStatus {
    pub state: String,
    #[serde(default)]
    pub statuses: Vec<CommitStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct MergeResult {
    pub sha: String,
    pub merged: bool,
    #[serde(default)]
    pub message: String,
}
