//! Merging a pull request only when it is mergeable and green; otherwise a list of what blocks
//! it, ready to become a `rejected` diagnostic. A merge that already happened (a retry after a
//! crash) is reported as merged, never attempted twice.

use std::fmt;

use reqwest::Method;
use serde::Serialize;
use serde_json::json;

use crate::client::Op;
use crate::feedback::latest_reviews;
use crate::models::{MergeResult, PullRequest, login};
use crate::policy::{MergeMethod, MergePolicy};
use crate::queue::QueueEntry;
use crate::{ForgeError, GitHub, RepoRef};

/// A merge request: how, and (optionally) which head commit was reviewed — GitHub refuses if
/// the head moved since. The method is a preference: the branch's policy picks an allowed one
/// when it is not (see [`MergePolicy::choose_method`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeRequest {
    pub method: MergeMethod,
    pub expected_head: Option<String>,
    /// When a merge queue rule applies: add the pull request to the queue (GraphQL
    /// `enqueuePullRequest`) once nothing else blocks, instead of answering
    /// [`MergeBlocker::MergeQueueRequired`].
    pub use_merge_queue: bool,
}

/// One reason a pull request cannot be merged now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MergeBlocker {
    Closed,
    Draft,
    /// The head conflicts with the base.
    Conflicts,
    /// GitHub has not computed mergeability yet; ask again shortly.
    MergeabilityUnknown,
    HeadMoved {
        expected: String,
        actual: String,
    },
    ChangesRequested {
        by: String,
    },
    CheckFailing {
        name: String,
        conclusion: String,
    },
    CheckPending {
        name: String,
    },
    StatusFailing {
        context: String,
        state: String,
    },
    StatusPending {
        context: String,
    },
    /// GitHub refused the merge itself (branch protection, rules) with this message.
    Refused {
        message: String,
    },
    /// No merge method is allowed on the base branch (repository settings, a ruleset's
    /// allowed methods, linear history).
    NoAllowedMethod {
        requested: MergeMethod,
        linear_history: bool,
    },
    /// The base branch merges through a merge queue, and the request did not ask to enqueue.
    MergeQueueRequired {
        branch: String,
    },
    /// The pull request waits in the merge queue (the queue merges it, or removes it).
    InMergeQueue {
        entry: QueueEntry,
    },
    /// The merge queue removed the pull request at its current head.
    RemovedFromMergeQueue {
        reason: String,
    },
}

impl fmt::Display for MergeBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => write!(f, "the pull request is closed"),
            Self::Draft => write!(f, "the pull request is a draft"),
            Self::Conflicts => write!(f, "the head branch conflicts with the base branch"),
            Self::MergeabilityUnknown => write!(f, "GitHub is still computing mergeability"),
            Self::HeadMoved { expected, actual } => {
                write!(f, "the head moved from {expected} to {actual}")
            }
            Self::ChangesRequested { by } => write!(f, "{by} requested changes"),
            Self::CheckFailing { name, conclusion } => {
                write!(f, "check {name} ended {conclusion}")
            }
            Self::CheckPending { name } => write!(f, "check {name} has not finished"),
            Self::StatusFailing { context, state } => write!(f, "status {context} is {state}"),
            Self::StatusPending { context } => write!(f, "status {context} is pending"),
            Self::Refused { message } => write!(f, "GitHub refused the merge: {message}"),
            Self::NoAllowedMethod {
                requested,
                linear_history,
            } => {
                let why = if *linear_history {
                    " (linear history forbids merge commits)"
                } else {
                    ""
                };
                write!(
                    f,
                    "no merge method is allowed on the base branch{why}; {} was asked for",
                    requested.as_str()
                )
            }
            Self::MergeQueueRequired { branch } => write!(
                f,
                "{branch} merges through a merge queue; the pull request must be added to it"
            ),
            Self::InMergeQueue { entry } => match entry.position {
                Some(position) => write!(
                    f,
                    "the pull request is in the merge queue ({}, position {position})",
                    entry.state
                ),
                None => write!(
                    f,
                    "the pull request is in the merge queue ({})",
                    entry.state
                ),
            },
            Self::RemovedFromMergeQueue { reason } => {
                write!(f, "the merge queue removed the pull request: {reason}")
            }
        }
    }
}

impl MergeBlocker {
    /// True for blockers that go away by waiting (checks running, mergeability computing).
    pub fn is_waiting(&self) -> bool {
        matches!(
            self,
            Self::MergeabilityUnknown | Self::CheckPending { .. } | Self::StatusPending { .. }
        ) || matches!(self, Self::InMergeQueue { entry } if entry.state != "UNMERGEABLE")
    }
}

/// What [`GitHub::merge_when_green`] found or did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum MergeOutcome {
    /// Merged as `sha`; `already` when an earlier attempt had merged it.
    Merged { sha: String, already: bool },
    Blocked {
        number: u64,
        url: String,
        blockers: Vec<MergeBlocker>,
    },
}

impl MergeOutcome {
    /// The diagnostic text of a blocked merge (empty for a merged one).
    pub fn diagnostic_message(&self) -> String {
        match self {
            Self::Merged { .. } => String::new(),
            Self::Blocked {
                number,
                url,
                blockers,
            } => {
                let mut message = format!("Pull request #{number} ({url}) cannot be merged yet:");
                for blocker in blockers {
                    message.push_str(&format!("\n- {blocker}"));
                }
                message
            }
        }
    }
}

impl GitHub {
    /// Merges pull request `number` if it is open, not a draft, conflict-free, on the expected
    /// head, without requested changes and with its checks green — the required ones when the
    /// base branch's policy names any, every one otherwise — with an allowed method; enqueues
    /// it instead where a merge queue rule applies (and the request allows it). Otherwise
    /// answers what blocks it. An already merged pull request answers `Merged { already }`.
    /// Reads the base branch's policy on every call (see [`GitHub::merge_when_green_under`]).
    pub async fn merge_when_green(
        &self,
        repo: &RepoRef,
        number: u64,
        request: &MergeRequest,
    ) -> Result<MergeOutcome, ForgeError> {
        let pull = self.pull(repo, number).await?;
        if pull.is_merged() {
            return Ok(already_merged(pull));
        }
        let policy = self.merge_policy(repo, &pull.base.reference).await?;
        self.merge_pull(repo, pull, request, &policy).await
    }

    /// As [`GitHub::merge_when_green`], under a policy read before (with
    /// [`GitHub::merge_policy`] for the pull request's base branch), so a caller that polls
    /// reads it once.
    pub async fn merge_when_green_under(
        &self,
        repo: &RepoRef,
        number: u64,
        request: &MergeRequest,
        policy: &MergePolicy,
    ) -> Result<MergeOutcome, ForgeError> {
        let pull = self.pull(repo, number).await?;
        if pull.is_merged() {
            return Ok(already_merged(pull));
        }
        self.merge_pull(repo, pull, request, policy).await
    }

    async fn merge_pull(
        &self,
        repo: &RepoRef,
        pull: PullRequest,
        request: &MergeRequest,
        policy: &MergePolicy,
    ) -> Result<MergeOutcome, ForgeError> {
        let number = pull.number;
        let head = pull.head.sha.clone();
        let blocked = |blockers| MergeOutcome::Blocked {
            number,
            url: pull.html_url.clone(),
            blockers,
        };
        let mut blockers = Vec::new();
        if !pull.is_open() {
            blockers.push(MergeBlocker::Closed);
        }
        let queue = if policy.merge_queue.is_some() && pull.is_open() {
            let standing = self.queue_standing(repo, number, &head).await?;
            if let Some(entry) = standing.entry {
                return Ok(blocked(vec![MergeBlocker::InMergeQueue { entry }]));
            }
            if let Some(reason) = &standing.removed_reason {
                blockers.push(MergeBlocker::RemovedFromMergeQueue {
                    reason: reason.clone(),
                });
            }
            Some(standing)
        } else {
            None
        };
        if pull.draft {
            blockers.push(MergeBlocker::Draft);
        }
        match pull.mergeable {
            Some(false) => blockers.push(MergeBlocker::Conflicts),
            None if pull.is_open() => blockers.push(MergeBlocker::MergeabilityUnknown),
            _ => {}
        }
        if let Some(expected) = &request.expected_head
            && *expected != head
        {
            blockers.push(MergeBlocker::HeadMoved {
                expected: expected.clone(),
                actual: head.clone(),
            });
        }
        let reviews = self.reviews(repo, number).await?;
        for (author, review) in latest_reviews(&reviews) {
            if review.state == "CHANGES_REQUESTED" {
                blockers.push(MergeBlocker::ChangesRequested {
                    by: if author.is_empty() {
                        login(None)
                    } else {
                        author
                    },
                });
            }
        }
        blockers.extend(self.check_blockers(repo, &head, policy).await?);
        if !blockers.is_empty() {
            return Ok(blocked(blockers));
        }
        if let Some(standing) = queue {
            if !request.use_merge_queue {
                return Ok(blocked(vec![MergeBlocker::MergeQueueRequired {
                    branch: policy.branch.clone(),
                }]));
            }
            let entry = self.enqueue(repo, number, &standing.node_id, &head).await?;
            return Ok(blocked(vec![MergeBlocker::InMergeQueue { entry }]));
        }
        let Some(method) = policy.choose_method(request.method) else {
            return Ok(blocked(vec![MergeBlocker::NoAllowedMethod {
                requested: request.method,
                linear_history: policy.linear_history,
            }]));
        };
        let op = Op {
            repo,
            action: "merge a pull request",
            resource: Some(format!("pull request #{number}")),
        };
        let body = json!({"sha": head, "merge_method": method.as_str()});
        let path = format!("{}/pulls/{number}/merge", repo.api_path());
        match self
            .call::<MergeResult>(Method::PUT, &path, &[], Some(&body), &op)
            .await
        {
            Ok(result) if result.merged => Ok(MergeOutcome::Merged {
                sha: result.sha,
                already: false,
            }),
            Ok(result) => Ok(self
                .refused(repo, number, pull.html_url, result.message)
                .await?),
            Err(ForgeError::Refused {
                status: 405 | 409 | 422,
                message,
                ..
            }) => Ok(self.refused(repo, number, pull.html_url, message).await?),
            Err(error) => Err(error),
        }
    }

    /// What the head's check runs and statuses block: failing or pending ones that count
    /// under `policy`, and required ones nothing reported yet.
    async fn check_blockers(
        &self,
        repo: &RepoRef,
        head: &str,
        policy: &MergePolicy,
    ) -> Result<Vec<MergeBlocker>, ForgeError> {
        let mut blockers = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for run in self.check_runs(repo, head).await? {
            seen.insert(run.name.clone());
            if !policy.check_counts(&run.name) {
                continue;
            }
            if run.is_failing() {
                blockers.push(MergeBlocker::CheckFailing {
                    name: run.name,
                    conclusion: run.conclusion.unwrap_or_default(),
                });
            } else if !run.is_green() {
                blockers.push(MergeBlocker::CheckPending { name: run.name });
            }
        }
        for status in self.combined_status(repo, head).await?.statuses {
            seen.insert(status.context.clone());
            if !policy.check_counts(&status.context) {
                continue;
            }
            match status.state.as_str() {
                "success" => {}
                "pending" => blockers.push(MergeBlocker::StatusPending {
                    context: status.context,
                }),
                _ => blockers.push(MergeBlocker::StatusFailing {
                    context: status.context,
                    state: status.state,
                }),
            }
        }
        for name in policy.unreported_checks(&seen) {
            blockers.push(MergeBlocker::CheckPending { name });
        }
        Ok(blockers)
    }

    /// After GitHub refused: merged meanwhile (a concurrent or earlier attempt) or blocked.
    async fn refused(
        &self,
        repo: &RepoRef,
        number: u64,
        url: String,
        message: String,
    ) -> Result<MergeOutcome, ForgeError> {
        let pull = self.pull(repo, number).await?;
        if pull.is_merged() {
            return Ok(already_merged(pull));
        }
        Ok(MergeOutcome::Blocked {
            number,
            url,
            blockers: vec![MergeBlocker::Refused { message }],
        })
    }
}

fn already_merged(pull: PullRequest) -> MergeOutcome {
    MergeOutcome::Merged {
        sha: pull.merge_commit_sha.unwrap_or_default(),
        already: true,
    }
}
