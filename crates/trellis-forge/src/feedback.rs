//! Feedback on a pull request — requested changes, inline review comments, failing check runs
//! and commit statuses — as a structured list a delivery verifier turns into its `rejected`
//! diagnostic. Items carry stable keys so feedback already routed back is not reported twice.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::client::{MAX_PAGES, Op, PER_PAGE};
use crate::models::{CheckRun, CheckRuns, CombinedStatus, CommitStatus, Review, ReviewComment};
use crate::{ForgeError, GitHub, RepoRef};

/// Longest quoted text of one item, and of a whole diagnostic message.
const MAX_ITEM_CHARS: usize = 2_000;
const MAX_MESSAGE_CHARS: usize = 16_000;

/// One thing a reviewer or a check asks the change to fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeedbackItem {
    /// A reviewer's latest review requests changes.
    ChangesRequested {
        review_id: u64,
        author: String,
        body: String,
        url: String,
    },
    /// An inline comment on a line of the diff (`line` is `None` once the line is outdated).
    ReviewComment {
        comment_id: u64,
        author: String,
        path: String,
        line: Option<u64>,
        body: String,
        url: String,
    },
    /// A completed check run on the head commit that is not green.
    FailingCheck {
        name: String,
        conclusion: String,
        summary: String,
        url: String,
    },
    /// A commit status on the head commit in `failure` or `error`.
    FailingStatus {
        context: String,
        state: String,
        description: String,
        url: String,
    },
}

fn short_hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..4])
}

fn clip(text: &str) -> String {
    let text = text.trim();
    let mut out: String = text.chars().take(MAX_ITEM_CHARS).collect();
    if text.chars().count() > MAX_ITEM_CHARS {
        out.push('…');
    }
    out
}

impl FeedbackItem {
    /// A stable key: the same feedback gets the same key on every look; an edited comment or
    /// a check failing on a new commit gets a new one.
    pub fn key(&self, head_sha: &str) -> String {
        match self {
            Self::ChangesRequested {
                review_id, body, ..
            } => format!("review:{review_id}:{}", short_hash(body)),
            Self::ReviewComment {
                comment_id, body, ..
            } => format!("review-comment:{comment_id}:{}", short_hash(body)),
            Self::FailingCheck { name, .. } => format!("check:{name}@{head_sha}"),
            Self::FailingStatus { context, .. } => format!("status:{context}@{head_sha}"),
        }
    }

    /// One readable entry of a diagnostic.
    pub fn describe(&self) -> String {
        let with_url = |text: String, url: &str| {
            if url.is_empty() {
                text
            } else {
                format!("{text}\n   ({url})")
            }
        };
        match self {
            Self::ChangesRequested {
                author, body, url, ..
            } => with_url(format!("{author} requested changes: {}", clip(body)), url),
            Self::ReviewComment {
                author,
                path,
                line,
                body,
                url,
                ..
            } => {
                let place = line.map_or_else(|| path.clone(), |l| format!("{path}:{l}"));
                with_url(
                    format!("{author} commented on {place}: {}", clip(body)),
                    url,
                )
            }
            Self::FailingCheck {
                name,
                conclusion,
                summary,
                url,
            } => {
                let summary = if summary.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", clip(summary))
                };
                with_url(format!("check {name} ended {conclusion}{summary}"), url)
            }
            Self::FailingStatus {
                context,
                state,
                description,
                url,
            } => with_url(
                format!("status {context} is {state}: {}", clip(description)),
                url,
            ),
        }
    }
}

/// The feedback on a pull request's current head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Feedback {
    pub number: u64,
    pub url: String,
    pub head_sha: String,
    /// New feedback (not among the acknowledged keys), oldest reviews first, then checks.
    pub items: Vec<FeedbackItem>,
    /// Check runs and statuses still running on the head commit.
    pub pending: Vec<String>,
}

impl Feedback {
    /// No new feedback (pending checks aside).
    pub fn is_clean(&self) -> bool {
        self.items.is_empty()
    }

    /// The keys of every item, to acknowledge once they have been routed back.
    pub fn keys(&self) -> Vec<String> {
        self.items.iter().map(|i| i.key(&self.head_sha)).collect()
    }

    /// The text of a `rejected` diagnostic: what to fix, one numbered entry per item.
    pub fn diagnostic_message(&self) -> String {
        let mut message = format!(
            "Pull request #{} ({}) has feedback to address:",
            self.number, self.url
        );
        for (index, item) in self.items.iter().enumerate() {
            let entry = format!("\n{}. {}", index + 1, item.describe());
            if message.len() + entry.len() > MAX_MESSAGE_CHARS {
                let left = self.items.len() - index;
                message.push_str(&format!("\n… and {left} more (see the pull request)"));
                break;
            }
            message.push_str(&entry);
        }
        message
    }
}

/// The latest deciding review (approve, request changes, dismiss) of each reviewer.
pub(crate) fn latest_reviews(reviews: &[Review]) -> BTreeMap<String, &Review> {
    let mut latest = BTreeMap::new();
    for review in reviews {
        if matches!(review.state.as_str(), "COMMENTED" | "PENDING") {
            continue;
        }
        let author = review.user.as_ref().map_or("", |u| u.login.as_str());
        latest.insert(author.to_owned(), review);
    }
    latest
}

impl GitHub {
    pub async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        let op = Op {
            repo,
            action: "list reviews",
            resource: Some(format!("pull request #{number}")),
        };
        let path = format!("{}/pulls/{number}/reviews", repo.api_path());
        self.call_all(&path, &[], &op).await
    }

    pub async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let op = Op {
            repo,
            action: "list review comments",
            resource: Some(format!("pull request #{number}")),
        };
        let path = format!("{}/pulls/{number}/comments", repo.api_path());
        self.call_all(&path, &[], &op).await
    }

    /// Every check run on a commit.
    pub async fn check_runs(&self, repo: &RepoRef, sha: &str) -> Result<Vec<CheckRun>, ForgeError> {
        let op = Op {
            repo,
            action: "list check runs",
            resource: Some(format!("commit {sha}")),
        };
        let path = format!("{}/commits/{sha}/check-runs", repo.api_path());
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let query = [
                ("per_page", PER_PAGE.to_string()),
                ("page", page.to_string()),
            ];
            let runs: CheckRuns = self.call(Method::GET, &path, &query, None, &op).await?;
            let short = runs.check_runs.len() < PER_PAGE;
            all.extend(runs.check_runs);
            if short || all.len() as u64 >= runs.total_count {
                return Ok(all);
            }
        }
        Err(ForgeError::TooManyPages {
            what: "check runs".into(),
            limit: MAX_PAGES,
        })
    }

    /// The combined commit status of a commit (the older status API some CI still uses).
    pub async fn combined_status(
        &self,
        repo: &RepoRef,
        sha: &str,
    ) -> Result<CombinedStatus, ForgeError> {
        let op = Op {
            repo,
            action: "read the commit status",
            resource: Some(format!("commit {sha}")),
        };
        let path = format!("{}/commits/{sha}/status", repo.api_path());
        self.call(
            Method::GET,
            &path,
            &[("per_page", PER_PAGE.to_string())],
            None,
            &op,
        )
        .await
    }

    /// The feedback on pull request `number` that is not in `acknowledged` (keys from earlier
    /// rounds, see [`Feedback::keys`]).
    pub async fn pull_feedback(
        &self,
        repo: &RepoRef,
        number: u64,
        acknowledged: &BTreeSet<String>,
    ) -> Result<Feedback, ForgeError> {
        let pull = self.pull(repo, number).await?;
        let head = pull.head.sha.clone();
        let reviews = self.reviews(repo, number).await?;
        let comments = self.review_comments(repo, number).await?;
        let runs = self.check_runs(repo, &head).await?;
        let status = self.combined_status(repo, &head).await?;

        let mut items = Vec::new();
        for review in latest_reviews(&reviews).into_values() {
            if review.state == "CHANGES_REQUESTED" {
                items.push(FeedbackItem::ChangesRequested {
                    review_id: review.id,
                    author: login(review.user.as_ref()),
                    body: review.body.clone().unwrap_or_default(),
                    url: review.html_url.clone(),
                });
            }
        }
        for comment in comments {
            items.push(FeedbackItem::ReviewComment {
                comment_id: comment.id,
                author: login(comment.user.as_ref()),
                path: comment.path,
                line: comment.line,
                body: comment.body,
                url: comment.html_url,
            });
        }
        let mut pending = Vec::new();
        for run in runs {
            if run.is_failing() {
                let output = run.output.unwrap_or(crate::models::CheckOutput {
                    title: None,
                    summary: None,
                });
                items.push(FeedbackItem::FailingCheck {
                    name: run.name,
                    conclusion: run.conclusion.unwrap_or_default(),
                    summary: output.summary.or(output.title).unwrap_or_default(),
                    url: run.html_url.unwrap_or_default(),
                });
            } else if !run.is_green() {
                pending.push(format!("check {}", run.name));
            }
        }
        for CommitStatus {
            context,
            state,
            description,
            target_url,
        } in status.statuses
        {
            match state.as_str() {
                "failure" | "error" => items.push(FeedbackItem::FailingStatus {
                    context,
                    state,
                    description: description.unwrap_or_default(),
                    url: target_url.unwrap_or_default(),
                }),
                "pending" => pending.push(format!("status {context}")),
                _ => {}
            }
        }
        items.retain(|item| !acknowledged.contains(&item.key(&head)));
        Ok(Feedback {
            number,
            url: pull.html_url,
            head_sha: head,
            items,
            pending,
        })
    }
}

pub(crate) fn login(user: Option<&crate::models::User>) -> String {
    user.map_or_else(|| "someone".to_owned(), |u| u.login.clone())
}
