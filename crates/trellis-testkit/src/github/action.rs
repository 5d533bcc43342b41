//! The scripted changes a test makes to the fake GitHub (also its JSON control format).

use std::path::PathBuf;

use serde::Deserialize;

/// A change a test makes to the fake's state (also accepted as JSON by the control endpoint and
/// the seed file of `trellis-fake-github`).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase", deny_unknown_fields)]
pub enum Action {
    /// Creates a repository `owner/name`. With `gitDir`, branches the fake does not know are
    /// read from that (bare) git repository, so pushes made by a test are visible.
    #[serde(rename_all = "camelCase")]
    AddRepository {
        repository: String,
        #[serde(default = "main_branch")]
        default_branch: String,
        #[serde(default)]
        private: bool,
        #[serde(default)]
        git_dir: Option<PathBuf>,
    },
    /// Points a branch at a commit.
    SetBranch {
        repository: String,
        branch: String,
        sha: String,
    },
    /// Opens an issue; answers `{"number": N}`.
    AddIssue {
        repository: String,
        title: String,
        #[serde(default)]
        body: String,
        #[serde(default)]
        labels: Vec<String>,
        #[serde(default = "default_author")]
        author: String,
    },
    /// Opens a pull request from `head` into `base`; answers `{"number": N}`. `headRepository`
    /// names a fork (default: the repository itself).
    #[serde(rename_all = "camelCase")]
    AddPull {
        repository: String,
        title: String,
        #[serde(default)]
        body: String,
        head: String,
        base: String,
        #[serde(default)]
        head_repository: Option<String>,
        #[serde(default)]
        head_sha: Option<String>,
        #[serde(default)]
        labels: Vec<String>,
        #[serde(default)]
        draft: bool,
        #[serde(default = "default_author")]
        author: String,
    },
    /// Adds a conversation comment to an issue or pull request; answers `{"id": N}`.
    AddIssueComment {
        repository: String,
        number: u64,
        body: String,
        #[serde(default = "default_author")]
        author: String,
    },
    /// Submits a review (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`); answers
    /// `{"id": N}`.
    AddReview {
        repository: String,
        number: u64,
        state: String,
        #[serde(default)]
        body: String,
        #[serde(default = "default_author")]
        author: String,
    },
    /// Adds an inline review comment on a file line; answers `{"id": N}`.
    AddReviewComment {
        repository: String,
        number: u64,
        path: String,
        line: u64,
        body: String,
        #[serde(default = "default_author")]
        author: String,
    },
    /// Creates or replaces the check run `name` on a commit (`sha`, or the head of pull request
    /// `pull`). `status` is `queued`, `in_progress` or `completed`; `conclusion` is GitHub's.
    SetCheckRun {
        repository: String,
        #[serde(default)]
        sha: Option<String>,
        #[serde(default)]
        pull: Option<u64>,
        name: String,
        status: String,
        #[serde(default)]
        conclusion: Option<String>,
        #[serde(default)]
        summary: String,
    },
    /// Creates or replaces the commit status `context` (`success`, `pending`, `failure`, `error`).
    SetStatus {
        repository: String,
        #[serde(default)]
        sha: Option<String>,
        #[serde(default)]
        pull: Option<u64>,
        context: String,
        state: String,
        #[serde(default)]
        description: String,
    },
    /// Answers the next `count` API calls (with `method` and `pathSuffix`: the next matching
    /// ones) with `status` instead of serving them; with `rateLimited`, as GitHub does when the
    /// rate limit is exhausted (403 with `x-ratelimit-remaining: 0`); with `retryAfter`, as a
    /// secondary rate limit (a `Retry-After` header, in seconds). With `applied`, each call is
    /// served first and then answered `status`: GitHub made the change, the caller heard an
    /// error.
    #[serde(rename_all = "camelCase")]
    FailNext {
        status: u16,
        #[serde(default = "one")]
        count: u32,
        #[serde(default)]
        rate_limited: bool,
        #[serde(default)]
        retry_after: Option<u64>,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_suffix: Option<String>,
        #[serde(default)]
        applied: bool,
    },
    /// Holds the answer to the next `count` matching calls for `millis` — long enough, a test
    /// chooses, for the client to time out. With `applied` the call is served first (the
    /// change took effect), otherwise it is answered 504 after the hold.
    #[serde(rename_all = "camelCase")]
    StallNext {
        millis: u64,
        #[serde(default = "one")]
        count: u32,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_suffix: Option<String>,
        #[serde(default)]
        applied: bool,
    },
    /// Drops every injected fault not yet spent (the outage is over).
    ClearFaults {},
    /// Names checks a repository's CI runs on every commit: a commit without a run of one of
    /// these names reports it `queued` (as GitHub does once CI picked the push up), so a test
    /// completes it with `setCheckRun` when it wants.
    RequireChecks {
        repository: String,
        names: Vec<String>,
    },
    /// Serves every call whose method and path suffix match, then holds its answer for
    /// `millis` (0 removes the hold): the call took effect, its caller has not heard yet — the
    /// window a kill-point test kills in.
    #[serde(rename_all = "camelCase")]
    HoldAnswers {
        method: String,
        path_suffix: String,
        millis: u64,
    },
    /// Sets whether a pull request can be merged (`null`: GitHub is still computing it).
    SetMergeable {
        repository: String,
        number: u64,
        mergeable: Option<bool>,
    },
    /// Sets the repository's allowed merge methods (`allow_merge_commit`… of
    /// `GET /repos/{o}/{r}`; all true by default).
    #[serde(rename_all = "camelCase")]
    SetMergeMethods {
        repository: String,
        #[serde(default = "yes")]
        allow_merge_commit: bool,
        #[serde(default = "yes")]
        allow_squash_merge: bool,
        #[serde(default = "yes")]
        allow_rebase_merge: bool,
    },
    /// Replaces the active ruleset rules of `branch`: GitHub's rule objects (`{"type":
    /// "required_status_checks", "parameters": {…}}`, `pull_request`, `required_linear_history`,
    /// `merge_queue`…), served by `GET /rules/branches/{branch}` and enforced by the merge.
    SetBranchRules {
        repository: String,
        branch: String,
        rules: Vec<serde_json::Value>,
    },
    /// Sets (or with `remove`, removes) classic branch protection of `branch`; `readable:
    /// false` makes `GET …/protection` answer 403 as for a token without admin permission.
    #[serde(rename_all = "camelCase")]
    SetBranchProtection {
        repository: String,
        branch: String,
        #[serde(default)]
        required_checks: Vec<String>,
        #[serde(default)]
        strict: bool,
        #[serde(default)]
        required_approvals: u64,
        #[serde(default)]
        linear_history: bool,
        #[serde(default = "yes")]
        readable: bool,
        #[serde(default)]
        remove: bool,
    },
    /// Makes the check run `name` (on `sha` or the head of `pull`; set it first) a GitHub
    /// Actions job with this log: `GET /actions/jobs/{id}/logs` answers 302 to a plain-text
    /// download of it, or `status` (403, 404, 410) instead.
    SetJobLog {
        repository: String,
        #[serde(default)]
        sha: Option<String>,
        #[serde(default)]
        pull: Option<u64>,
        name: String,
        log: String,
        #[serde(default)]
        status: Option<u16>,
    },
    /// The merge queue merges a queued pull request; answers `{"sha": …}`.
    CompleteMergeQueue { repository: String, number: u64 },
    /// The merge queue removes a queued pull request (at its current head) for `reason`.
    RemoveFromMergeQueue {
        repository: String,
        number: u64,
        reason: String,
    },
    /// A person edits a conversation comment (its `updated_at` moves).
    EditIssueComment {
        repository: String,
        id: u64,
        body: String,
    },
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

fn main_branch() -> String {
    "main".into()
}

fn default_author() -> String {
    "octocat".into()
}
