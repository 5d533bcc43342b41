//! Reading repositories, branches, issues and pull requests, and the idempotent
//! find-or-create of the one pull request a head branch delivers through.

use reqwest::Method;
use serde_json::{Value, json};

use crate::body::with_owned_section;
use crate::client::Op;
use crate::models::{Branch, Issue, PullRequest, Repository};
use crate::{ForgeError, GitHub, RepoRef};

/// The pull request a delivery wants for its head branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestDraft {
    /// The head branch, in the repository itself (forks are not delivered to).
    pub head: String,
    /// The branch to merge into.
    pub base: String,
    pub title: String,
    /// What goes inside the body section Trellis owns ([`crate::BODY_BEGIN`] …
    /// [`crate::BODY_END`]); the rest of the body belongs to people.
    pub body: String,
    pub draft: bool,
}

/// What [`GitHub::find_or_create_pull`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullAction {
    /// No open pull request had this head: one was opened.
    Created,
    /// The open pull request for this head got the draft's title, body or base.
    Updated,
    /// The open pull request already matched the draft.
    Unchanged,
}

/// The pull request a head branch delivers through, and what was done to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOutcome {
    pub pull: PullRequest,
    pub action: PullAction,
}

/// Fields to change on a pull request (`None` keeps the current value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullUpdate {
    pub title: Option<String>,
    pub body: Option<String>,
    pub base: Option<String>,
}

fn pull_resource(number: u64) -> Option<String> {
    Some(format!("pull request #{number}"))
}

impl GitHub {
    /// The repository (its default branch, visibility, web URL).
    pub async fn repository(&self, repo: &RepoRef) -> Result<Repository, ForgeError> {
        let op = Op {
            repo,
            action: "read the repository",
            resource: None,
        };
        self.call(Method::GET, &repo.api_path(), &[], None, &op)
            .await
    }

    /// A branch and the commit it points at.
    pub async fn branch(&self, repo: &RepoRef, name: &str) -> Result<Branch, ForgeError> {
        let op = Op {
            repo,
            action: "read a branch",
            resource: Some(format!("branch {name}")),
        };
        let path = format!("{}/branches/{}", repo.api_path(), encode_path(name));
        self.call(Method::GET, &path, &[], None, &op).await
    }

    /// An issue (pull requests are issues too; their `pull_request` field is set).
    pub async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let op = Op {
            repo,
            action: "read an issue",
            resource: Some(format!("issue #{number}")),
        };
        let path = format!("{}/issues/{number}", repo.api_path());
        self.call(Method::GET, &path, &[], None, &op).await
    }

    pub async fn pull(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        let op = Op {
            repo,
            action: "read a pull request",
            resource: pull_resource(number),
        };
        let path = format!("{}/pulls/{number}", repo.api_path());
        self.call(Method::GET, &path, &[], None, &op).await
    }

    /// The open pull request whose head is `branch` of this repository, if there is one.
    pub async fn find_open_pull(
        &self,
        repo: &RepoRef,
        branch: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Op {
            repo,
            action: "list pull requests",
            resource: None,
        };
        let query = [
            ("state", "open".to_owned()),
            ("head", format!("{}:{branch}", repo.owner())),
        ];
        let path = format!("{}/pulls", repo.api_path());
        let pulls: Vec<PullRequest> = self.call_all(&path, &query, &op).await?;
        // GitHub filters by head already; checking again guards against a server that ignores
        // the filter (and against case differences in the owner).
        Ok(pulls
            .into_iter()
            .find(|p| p.is_open() && p.head.reference == branch))
    }

    /// The merged pull request whose head is `branch` of this repository at commit `sha`, if
    /// there is one: what a merge delivery finds when it is retried or resumed after GitHub
    /// merged (the pull request is closed then, so [`GitHub::find_open_pull`] misses it).
    pub async fn find_merged_pull(
        &self,
        repo: &RepoRef,
        branch: &str,
        sha: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Op {
            repo,
            action: "list pull requests",
            resource: None,
        };
        let query = [
            ("state", "closed".to_owned()),
            ("head", format!("{}:{branch}", repo.owner())),
        ];
        let path = format!("{}/pulls", repo.api_path());
        let pulls: Vec<PullRequest> = self.call_all(&path, &query, &op).await?;
        Ok(pulls
            .into_iter()
            .find(|p| p.is_merged() && p.head.reference == branch && p.head.sha == sha))
    }

    /// The one open pull request for `draft.head`: found by head branch when it exists (then
    /// brought to the draft's title and base, and its Trellis body section to the draft's
    /// body — text outside the section markers is kept byte for byte), opened otherwise. A retried or resumed
    /// delivery therefore never opens a second one; a concurrent opener that wins the race is
    /// found through GitHub's "already exists" refusal.
    pub async fn find_or_create_pull(
        &self,
        repo: &RepoRef,
        draft: &PullRequestDraft,
    ) -> Result<PullOutcome, ForgeError> {
        if let Some(existing) = self.find_open_pull(repo, &draft.head).await? {
            return self.bring_to_draft(repo, existing, draft).await;
        }
        let op = Op {
            repo,
            action: "open a pull request",
            resource: Some(format!("branch {} or {}", draft.head, draft.base)),
        };
        let body = json!({
            "title": draft.title,
            "head": draft.head,
            "base": draft.base,
            "body": with_owned_section(None, &draft.body),
            "draft": draft.draft,
        });
        let path = format!("{}/pulls", repo.api_path());
        match self.call(Method::POST, &path, &[], Some(&body), &op).await {
            Ok(pull) => Ok(PullOutcome {
                pull,
                action: PullAction::Created,
            }),
            Err(refusal @ ForgeError::Refused { status: 422, .. }) => {
                match self.find_open_pull(repo, &draft.head).await? {
                    Some(existing) => self.bring_to_draft(repo, existing, draft).await,
                    None => Err(refusal),
                }
            }
            Err(error) => Err(error),
        }
    }

    async fn bring_to_draft(
        &self,
        repo: &RepoRef,
        existing: PullRequest,
        draft: &PullRequestDraft,
    ) -> Result<PullOutcome, ForgeError> {
        let body = with_owned_section(existing.body.as_deref(), &draft.body);
        let update = PullUpdate {
            title: (existing.title != draft.title).then(|| draft.title.clone()),
            body: (existing.body.as_deref().unwrap_or_default() != body).then_some(body),
            base: (existing.base.reference != draft.base).then(|| draft.base.clone()),
        };
        if update == PullUpdate::default() {
            return Ok(PullOutcome {
                pull: existing,
                action: PullAction::Unchanged,
            });
        }
        let pull = self.update_pull(repo, existing.number, &update).await?;
        Ok(PullOutcome {
            pull,
            action: PullAction::Updated,
        })
    }

    /// Changes a pull request's title, body or base.
    pub async fn update_pull(
        &self,
        repo: &RepoRef,
        number: u64,
        update: &PullUpdate,
    ) -> Result<PullRequest, ForgeError> {
        let op = Op {
            repo,
            action: "update a pull request",
            resource: pull_resource(number),
        };
        let mut body = serde_json::Map::new();
        for (key, value) in [
            ("title", &update.title),
            ("body", &update.body),
            ("base", &update.base),
        ] {
            if let Some(value) = value {
                body.insert(key.into(), Value::String(value.clone()));
            }
        }
        let path = format!("{}/pulls/{number}", repo.api_path());
        self.call(Method::PATCH, &path, &[], Some(&Value::Object(body)), &op)
            .await
    }
}

/// Percent-encodes what a path segment may not carry raw (branch names may hold `/`, `#`, `%`…).
/// Slashes stay: GitHub reads `branches/feature/x` as the branch `feature/x`.
pub(crate) fn encode_path(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode_path;

    #[test]
    fn branch_paths_keep_slashes_and_escape_the_rest() {
        assert_eq!(encode_path("trellis/0190ab"), "trellis/0190ab");
        assert_eq!(encode_path("fix #1 ü"), "fix%20%231%20%C3%BC");
    }
}
