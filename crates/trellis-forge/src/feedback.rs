//! Feedback on a pull request — requested changes, inline review comments, conversation
//! comments, review summaries, failing check runs (with job-log excerpts) and commit statuses —
//! as a structured list a delivery verifier turns into its `rejected` diagnostic. Items
//! ([`FeedbackItem`], in `item.rs`) carry stable keys so feedback already routed back is not
//! reported twice.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde::Serialize;

use crate::client::{MAX_PAGES, Op, PER_PAGE};
use crate::conversation::review_summaries;
use crate::item::FeedbackItem;
use crate::models::{
    CheckRun, CheckRuns, CombinedStatus, CommitStatus, Review, ReviewComment, login,
};
use crate::policy::MergePolicy;
use crate::{ForgeError, GitHub, RepoRef};

/// Longest diagnostic message: room for a few log excerpts ([`crate::LOG_EXCERPT_BYTES`]
/// each) beside the reviews.
const MAX_MESSAGE_CHARS: usize = 32_000;
/// Job logs downloaded for one look at the feedback, at most.
const MAX_LOGS: usize = 4;

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
    /// rounds, see [`Feedback::keys`]): requested changes, review comments, conversation
    /// comments and review summaries, and every failing check run and status (with a job-log
    /// excerpt for failing GitHub Actions checks).
    pub async fn pull_feedback(
        &self,
        repo: &RepoRef,
        number: u64,
        acknowledged: &BTreeSet<String>,
    ) -> Result<Feedback, ForgeError> {
        self.feedback_with(repo, number, acknowledged, None).await
    }

    /// As [`GitHub::pull_feedback`], but when `policy` names required checks only those are
    /// feedback and only those are waited for: other failing or pending checks and statuses
    /// do not count (see [`GitHub::merge_policy`]).
    pub async fn pull_feedback_under(
        &self,
        repo: &RepoRef,
        number: u64,
        acknowledged: &BTreeSet<String>,
        policy: &MergePolicy,
    ) -> Result<Feedback, ForgeError> {
        self.feedback_with(repo, number, acknowledged, Some(policy))
            .await
    }

    async fn feedback_with(
        &self,
        repo: &RepoRef,
        number: u64,
        acknowledged: &BTreeSet<String>,
        policy: Option<&MergePolicy>,
    ) -> Result<Feedback, ForgeError> {
        let counts = |name: &str| policy.is_none_or(|p| p.check_counts(name));
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
        items.extend(review_summaries(&reviews));
        items.extend(self.conversation_items(repo, number).await?);
        let mut pending = Vec::new();
        let mut jobs = BTreeMap::new();
        let seen: BTreeSet<String> = runs
            .iter()
            .map(|r| r.name.clone())
            .chain(status.statuses.iter().map(|s| s.context.clone()))
            .collect();
        for run in runs {
            if !counts(&run.name) {
                continue;
            }
            if run.is_failing() {
                if run.is_actions_job() {
                    jobs.insert(run.name.clone(), run.id);
                }
                let output = run.output.unwrap_or(crate::models::CheckOutput {
                    title: None,
                    summary: None,
                });
                items.push(FeedbackItem::FailingCheck {
                    name: run.name,
                    conclusion: run.conclusion.unwrap_or_default(),
                    summary: output.summary.or(output.title).unwrap_or_default(),
                    url: run.html_url.unwrap_or_default(),
                    log: None,
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
            if !counts(&context) {
                continue;
            }
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
        if let Some(policy) = policy {
            for missing in policy.unreported_checks(&seen) {
                pending.push(format!("check {missing} (not reported yet)"));
            }
        }
        items.retain(|item| !acknowledged.contains(&item.key(&head)));
        let mut fetched = 0;
        for item in &mut items {
            if let FeedbackItem::FailingCheck { name, log, .. } = item
                && let Some(job) = jobs.get(name.as_str())
                && fetched < MAX_LOGS
            {
                fetched += 1;
                *log = Some(self.job_log_excerpt(repo, name, *job).await);
            }
        }
        Ok(Feedback {
            number,
            url: pull.html_url,
            head_sha: head,
            items,
            pending,
        })
    }
}
