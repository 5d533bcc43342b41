//! Merging a pull request only when it is mergeable and green; otherwise a list of what blocks
//! it, ready to become a `rejected` diagnostic. A merge that already happened (a retry after a
//! crash) is reported as merged, never attempted twice.

use std::fmt;

use reqwest::Method;
use serde::Serialize;
use serde_json::json;

use crate::client::Op;
use crate::feedback::{latest_reviews, login};
use crate::models::MergeResult;
use crate::{ForgeError, GitHub, RepoRef};

/// How GitHub should merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    #[default]
    Merge,
    Squash,
    Rebase,
}

impl MergeMethod {
    fn as_str(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Squash => "squash",
            Self::Rebase => "rebase",
        }
    }
}

/// A merge request: how, and (optionally) which head commit was reviewed — GitHub refuses if
/// the head moved since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeRequest {
    pub method: MergeMethod,
    pub expected_head: Option<String>,
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
        }
    }
}

impl MergeBlocker {
    /// True for blockers that go away by waiting (checks running, mergeability computing).
    pub fn is_waiting(&self) -> bool {
        matches!(
            self,
            Self::MergeabilityUnknown | Self::CheckPending { .. } | Self::StatusPending { .. }
        )
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
    /// head, without requested changes and with every check run and status green; otherwise
    /// answers what blocks it. An already merged pull request answers `Merged { already }`.
    pub async fn merge_when_green(
        &self,
        repo: &RepoRef,
        number: u64,
        request: &MergeRequest,
    ) -> Result<MergeOutcome, ForgeError> {
        let pull = self.pull(repo, number).await?;
        if pull.is_merged() {
            return Ok(MergeOutcome::Merged {
                sha: pull.merge_commit_sha.unwrap_or_default(),
                already: true,
            });
        }
        let mut blockers = Vec::new();
        if !pull.is_open() {
            blockers.push(MergeBlocker::Closed);
        }
        if pull.draft {
            blockers.push(MergeBlocker::Draft);
        }
        match pull.mergeable {
            Some(false) => blockers.push(MergeBlocker::Conflicts),
            None if pull.is_open() => blockers.push(MergeBlocker::MergeabilityUnknown),
            _ => {}
        }
        let head = pull.head.sha.clone();
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
        for run in self.check_runs(repo, &head).await? {
            if run.is_failing() {
                blockers.push(MergeBlocker::CheckFailing {
                    name: run.name,
                    conclusion: run.conclusion.unwrap_or_default(),
                });
            } else if !run.is_green() {
                blockers.push(MergeBlocker::CheckPending { name: run.name });
            }
        }
        for status in self.combined_status(repo, &head).await?.statuses {
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
        if !blockers.is_empty() {
            return Ok(MergeOutcome::Blocked {
                number,
                url: pull.html_url,
                blockers,
            });
        }
        let op = Op {
            repo,
            action: "merge a pull request",
            resource: Some(format!("pull request #{number}")),
        };
        let body = json!({"sha": head, "merge_method": request.method.as_str()});
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
            return Ok(MergeOutcome::Merged {
                sha: pull.merge_commit_sha.unwrap_or_default(),
                already: true,
            });
        }
        Ok(MergeOutcome::Blocked {
            number,
            url,
            blockers: vec![MergeBlocker::Refused { message }],
        })
    }
}
