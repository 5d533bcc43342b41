//! The fake's objects rendered in GitHub's REST shapes (the fields clients read, plus a few
//! common ones so the documents look like GitHub's).

use serde_json::{Value, json};

use super::world::{CheckRun, Comment, Issue, Pull, Repo, Review, ReviewComment, Status};

/// Where links in answers point: the web host (`html_url`) and the API base (`url`).
#[derive(Debug, Clone)]
pub(crate) struct Links {
    pub web: String,
    pub api: String,
}

fn user(login: &str) -> Value {
    let kind = if login.ends_with("[bot]") {
        "Bot"
    } else {
        "User"
    };
    json!({"login": login, "id": login.len(), "type": kind})
}

impl Links {
    fn repo_api(&self, repo: &Repo) -> String {
        format!("{}/repos/{}/{}", self.api, repo.owner, repo.name)
    }

    fn repo_web(&self, repo: &Repo) -> String {
        format!("{}/{}/{}", self.web, repo.owner, repo.name)
    }

    pub fn repository(&self, repo: &Repo) -> Value {
        json!({
            "id": repo.id,
            "name": repo.name,
            "full_name": format!("{}/{}", repo.owner, repo.name),
            "owner": user(&repo.owner),
            "private": repo.private,
            "html_url": self.repo_web(repo),
            "url": self.repo_api(repo),
            "default_branch": repo.default_branch,
            "archived": false,
            "allow_merge_commit": repo.extras.allow_merge_commit,
            "allow_squash_merge": repo.extras.allow_squash_merge,
            "allow_rebase_merge": repo.extras.allow_rebase_merge,
        })
    }

    /// A repository as it appears in a pull request's `head`/`base` (`None` for a deleted fork).
    fn ref_side(&self, repo: Option<&Repo>, owner: &str, reference: &str, sha: &str) -> Value {
        json!({
            "label": format!("{owner}:{reference}"),
            "ref": reference,
            "sha": sha,
            "user": user(owner),
            "repo": repo.map(|r| self.repository(r)),
        })
    }

    pub fn issue(&self, repo: &Repo, issue: &Issue, comments: usize) -> Value {
        let mut value = json!({
            "id": issue.id,
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "state": if issue.open { "open" } else { "closed" },
            "labels": issue.labels.iter().map(|l| json!({"name": l, "color": "ededed"})).collect::<Vec<_>>(),
            "user": user(&issue.author),
            "comments": comments,
            "html_url": format!("{}/issues/{}", self.repo_web(repo), issue.number),
            "url": format!("{}/issues/{}", self.repo_api(repo), issue.number),
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
        });
        if issue.pull.is_some() {
            value["pull_request"] = json!({
                "url": format!("{}/pulls/{}", self.repo_api(repo), issue.number),
                "html_url": format!("{}/pull/{}", self.repo_web(repo), issue.number),
            });
            value["html_url"] = json!(format!("{}/pull/{}", self.repo_web(repo), issue.number));
        }
        value
    }

    /// GitHub's full pull request shape (`GET /pulls/{n}`, create, update).
    pub fn pull(
        &self,
        repo: &Repo,
        head_repo: Option<&Repo>,
        issue: &Issue,
        pull: &Pull,
        blocked: bool,
    ) -> Value {
        let mergeable_state = if pull.merged() || !issue.open {
            "unknown"
        } else if pull.draft {
            "draft"
        } else {
            match pull.mergeable {
                None => "unknown",
                Some(false) => "dirty",
                Some(true) if blocked => "blocked",
                Some(true) => "clean",
            }
        };
        let mut value = self.pull_simple(repo, head_repo, issue, pull);
        value["merged"] = json!(pull.merged());
        value["mergeable"] = if issue.open {
            json!(pull.mergeable)
        } else {
            Value::Null
        };
        value["mergeable_state"] = json!(mergeable_state);
        value
    }

    /// GitHub's "pull request simple" shape, what list endpoints (`GET /pulls`) answer: no
    /// `merged`, `mergeable` or `mergeable_state`; a merge shows only as `merged_at`.
    pub fn pull_simple(
        &self,
        repo: &Repo,
        head_repo: Option<&Repo>,
        issue: &Issue,
        pull: &Pull,
    ) -> Value {
        let head_owner = pull
            .head_repository
            .split_once('/')
            .map_or(repo.owner.as_str(), |(owner, _)| owner);
        json!({
            "id": issue.id,
            "number": issue.number,
            "state": if issue.open { "open" } else { "closed" },
            "title": issue.title,
            "body": issue.body,
            "user": user(&issue.author),
            "labels": issue.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
            "draft": pull.draft,
            "merge_commit_sha": pull.merge_commit_sha,
            "merged_at": pull.merged_at,
            "closed_at": if issue.open { Value::Null } else { json!(issue.updated_at) },
            "head": self.ref_side(head_repo, head_owner, &pull.head_ref, &pull.head_sha),
            "base": self.ref_side(Some(repo), &repo.owner, &pull.base_ref, &pull.base_sha),
            "html_url": format!("{}/pull/{}", self.repo_web(repo), issue.number),
            "url": format!("{}/pulls/{}", self.repo_api(repo), issue.number),
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
        })
    }

    pub fn comment(&self, repo: &Repo, comment: &Comment) -> Value {
        json!({
            "id": comment.id,
            "body": comment.body,
            "user": user(&comment.author),
            "html_url": format!("{}/issues/{}#issuecomment-{}", self.repo_web(repo), comment.number, comment.id),
            "url": format!("{}/issues/comments/{}", self.repo_api(repo), comment.id),
            "issue_url": format!("{}/issues/{}", self.repo_api(repo), comment.number),
            "created_at": comment.created_at,
            "updated_at": comment.updated_at,
        })
    }

    pub fn review(&self, repo: &Repo, review: &Review) -> Value {
        json!({
            "id": review.id,
            "user": user(&review.author),
            "body": review.body,
            "state": review.state,
            "commit_id": review.commit_id,
            "submitted_at": review.submitted_at,
            "html_url": format!("{}/pull/{}#pullrequestreview-{}", self.repo_web(repo), review.number, review.id),
        })
    }

    pub fn review_comment(&self, repo: &Repo, comment: &ReviewComment) -> Value {
        json!({
            "id": comment.id,
            "user": user(&comment.author),
            "body": comment.body,
            "path": comment.path,
            "line": comment.line,
            "side": "RIGHT",
            "commit_id": comment.commit_id,
            "created_at": comment.created_at,
            "updated_at": comment.created_at,
            "html_url": format!("{}/pull/{}#discussion_r{}", self.repo_web(repo), comment.number, comment.id),
        })
    }

    /// A check run; one with a job log is a GitHub Actions job (app `github-actions`, a
    /// `…/actions/runs/…/job/{id}` details URL), others come from a third-party CI app.
    pub fn check_run(&self, repo: &Repo, run: &CheckRun) -> Value {
        let actions = repo.extras.job_logs.contains_key(&run.id);
        let (slug, details) = if actions {
            (
                "github-actions",
                format!(
                    "{}/actions/runs/{}/job/{}",
                    self.repo_web(repo),
                    run.id + 1_000_000,
                    run.id
                ),
            )
        } else {
            (
                "fake-ci",
                format!("{}/runs/{}", self.repo_web(repo), run.id),
            )
        };
        json!({
            "app": {"slug": slug, "name": slug},
            "details_url": details,
            "id": run.id,
            "name": run.name,
            "head_sha": run.sha,
            "status": run.status,
            "conclusion": run.conclusion,
            "html_url": format!("{}/runs/{}", self.repo_web(repo), run.id),
            "output": {"title": run.name, "summary": run.summary},
        })
    }

    pub fn status(&self, status: &Status) -> Value {
        json!({
            "id": status.id,
            "context": status.context,
            "state": status.state,
            "description": status.description,
            "target_url": null,
        })
    }
}

/// GitHub's combined state: failure if any status failed or errored, pending if any is pending
/// or there are none, success otherwise.
pub(crate) fn combined_state(statuses: &[&Status]) -> &'static str {
    if statuses
        .iter()
        .any(|s| s.state == "failure" || s.state == "error")
    {
        "failure"
    } else if statuses.is_empty() || statuses.iter().any(|s| s.state == "pending") {
        "pending"
    } else {
        "success"
    }
}
