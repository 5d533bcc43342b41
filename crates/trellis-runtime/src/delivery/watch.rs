//! Watching one pull request: repeated looks at its feedback, checks and mergeability until it
//! is ready (or feedback, failing checks or a conflict send the change back), bringing its head
//! up to date with the target when required checks are strict, and merging it.

use std::time::{Duration, Instant};

use trellis_agents::binding::PullRequestFeedback;
use trellis_agents::{Binding, ExecutionRequest};
use trellis_forge::{
    FeedbackItem, GitHub, MergeBlocker, MergeOutcome, MergePolicy, MergeRequest, RepoRef,
};
use trellis_graph::WorkerErrorCode;

use super::calls::{refusal, tried};
use super::feedback_log::FeedbackLog;
use super::git::{DeliveryFailure, Git, Pushed, crash, delivered_ref, push_head};
use super::retry::RetrySchedule;
use super::settings::ForgeSettings;
use super::target::{MergeInto, TargetMerge, conflict_message, merge_target, unresolved_message};

/// How a look at the pull request ended.
pub(super) struct Verdict {
    pub outcome: &'static str,
    pub message: String,
}

/// What bringing the head up to date with the target did.
pub(super) enum CatchUp {
    Current,
    Moved,
    Conflict(Verdict),
}

/// Repeated looks at one pull request.
pub(super) struct Watch<'a> {
    github: &'a GitHub,
    /// What the target branch requires: which checks count, how it may be merged (none read:
    /// every check counts and the requested method is used).
    policy: Option<&'a MergePolicy>,
    repo: &'a RepoRef,
    number: u64,
    /// The pull request's head as delivered (it moves when the target is merged in).
    pub head: String,
    branch: &'a str,
    remote: &'a str,
    target_branch: &'a str,
    consider_feedback: bool,
    /// The run and execution delivering (named in a pending merge it records).
    run_id: &'a str,
    execution: u64,
    retry: RetrySchedule,
    poll: Duration,
    deadline: Instant,
    log: &'a (dyn Fn(String) + Sync),
}

impl<'a> Watch<'a> {
    pub fn new(
        forge: &ForgeSettings,
        github: &'a GitHub,
        repo: &'a RepoRef,
        number: u64,
        request: &'a ExecutionRequest,
        pushed: &'a Pushed,
        log: &'a (dyn Fn(String) + Sync),
    ) -> Self {
        Self {
            github,
            policy: None,
            repo,
            number,
            head: pushed.head.clone(),
            branch: &pushed.branch,
            remote: &pushed.remote,
            target_branch: &pushed.target_branch,
            consider_feedback: matches!(
                &request.binding,
                Binding::GitDelivery(binding)
                    if binding.pull_request_feedback == PullRequestFeedback::Consider
            ),
            run_id: &request.run_id,
            execution: request.execution,
            retry: forge.retry,
            poll: forge.poll,
            deadline: Instant::now() + forge.wait_limit,
            log,
        }
    }

    /// Judges the pull request under the target branch's merge policy.
    pub fn under(mut self, policy: &'a MergePolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    async fn pause(&self, waiting_for: &str, said: &mut String) -> Result<(), DeliveryFailure> {
        if Instant::now() >= self.deadline {
            return Err(DeliveryFailure {
                code: WorkerErrorCode::Timeout,
                message: format!(
                    "gave up waiting for {waiting_for} on pull request #{}",
                    self.number
                ),
            });
        }
        if said != waiting_for {
            (self.log)(format!("delivery: waiting for {waiting_for}"));
            waiting_for.clone_into(said);
        }
        tokio::time::sleep(self.poll).await;
        Ok(())
    }

    /// Waits until the head's checks finished and mergeability is known; feedback not yet
    /// routed back (reviews when considered, failing checks always) ends the wait.
    pub async fn until_ready(&self, git: &Git<'_>, url: &str) -> Result<Verdict, DeliveryFailure> {
        let mut log_file = FeedbackLog::open(git, self.branch).await?;
        let mut said = String::new();
        loop {
            let acknowledged = log_file.acknowledged(&self.head);
            let mut feedback = tried(&self.retry, "reading feedback", self.log, || async {
                match self.policy {
                    Some(policy) => {
                        self.github
                            .pull_feedback_under(self.repo, self.number, &acknowledged, policy)
                            .await
                    }
                    None => {
                        self.github
                            .pull_feedback(self.repo, self.number, &acknowledged)
                            .await
                    }
                }
            })
            .await?;
            if !self.consider_feedback {
                feedback.items.retain(is_check);
            }
            if !feedback.items.is_empty() {
                log_file
                    .record(&self.head, feedback.keys())
                    .map_err(|e| crash(format!("cannot record routed feedback: {e}")))?;
                let outcome = if feedback.items.iter().all(is_check) {
                    "ci_failed"
                } else {
                    "repair_required"
                };
                (self.log)(format!(
                    "delivery: pull request #{} has {} item(s) of feedback ({outcome})",
                    self.number,
                    feedback.items.len()
                ));
                return Ok(Verdict {
                    outcome,
                    message: feedback.diagnostic_message(),
                });
            }
            if !feedback.pending.is_empty() {
                self.pause(&feedback.pending.join(", "), &mut said).await?;
                continue;
            }
            let pull = tried(&self.retry, "reading the pull request", self.log, || {
                self.github.pull(self.repo, self.number)
            })
            .await?;
            match pull.mergeable {
                Some(false) => return self.conflict(git, url).await,
                Some(true) => {
                    return Ok(Verdict {
                        outcome: "ready",
                        message: format!("pull request #{} ready: {url}", self.number),
                    });
                }
                None => {
                    self.pause("GitHub to compute mergeability", &mut said)
                        .await?
                }
            }
        }
    }

    /// Merges the target branch into the head (see [`merge_target`]).
    async fn merge_target_in(&self, git: &Git<'_>) -> Result<TargetMerge, DeliveryFailure> {
        let into = MergeInto {
            candidate: &self.head,
            branch: self.branch,
            delivered_ref: &delivered_ref(self.branch),
            run_id: self.run_id,
            execution: self.execution,
        };
        merge_target(git, self.remote, self.target_branch, into, self.log).await
    }

    /// Brings the head up to date with the target branch: nothing to do, a merge pushed as the
    /// new head, or a conflict left in the work tree.
    pub async fn catch_up(&mut self, git: &Git<'_>) -> Result<CatchUp, DeliveryFailure> {
        let merged = self.merge_target_in(git).await?;
        match merged {
            TargetMerge::UpToDate => Ok(CatchUp::Current),
            TargetMerge::Merged { commit, target, .. } => {
                (self.log)(format!(
                    "delivery: {} requires the head to be up to date with {}; pushing the \
                     merge of {target}",
                    self.target_branch, self.target_branch
                ));
                push_head(git, self.remote, &commit, self.branch).await?;
                self.head = commit;
                Ok(CatchUp::Moved)
            }
            TargetMerge::Conflicted { target, paths } => Ok(CatchUp::Conflict(Verdict {
                outcome: "conflict",
                message: conflict_message(self.target_branch, &target, &paths),
            })),
            TargetMerge::Unresolved { paths } => Ok(CatchUp::Conflict(Verdict {
                outcome: "conflict",
                message: unresolved_message(&paths),
            })),
        }
    }

    /// GitHub sees a conflict: the target is merged into the workspace so the conflict is
    /// there for the next round's worker (or, merging cleanly here, the next delivery pushes
    /// the merge).
    async fn conflict(&self, git: &Git<'_>, url: &str) -> Result<Verdict, DeliveryFailure> {
        let merged = self.merge_target_in(git).await?;
        let message = match merged {
            TargetMerge::Conflicted { target, paths } => {
                conflict_message(self.target_branch, &target, &paths)
            }
            TargetMerge::Unresolved { paths } => unresolved_message(&paths),
            TargetMerge::Merged { target, .. } => format!(
                "Pull request #{} ({url}) conflicts with {}; {} ({target}) merged cleanly into \
                 the workspace, and the next delivery pushes the merge.",
                self.number, self.target_branch, self.target_branch
            ),
            TargetMerge::UpToDate => format!(
                "Pull request #{} ({url}) conflicts with {}: merge {} into the change and \
                 resolve the conflicts.",
                self.number, self.target_branch, self.target_branch
            ),
        };
        Ok(Verdict {
            outcome: "conflict",
            message,
        })
    }

    /// Merges once nothing blocks; a blocker that waiting does not remove ends delivery.
    pub async fn merge(
        &self,
        git: &Git<'_>,
        url: &str,
    ) -> Result<(Verdict, String), DeliveryFailure> {
        let request = MergeRequest {
            expected_head: Some(self.head.clone()),
            // A branch behind a merge queue is merged by enqueueing the pull request.
            use_merge_queue: true,
            ..MergeRequest::default()
        };
        let mut said = String::new();
        loop {
            // A retry reads the pull request first: a merge (or an enqueue) GitHub made before
            // answering an error is found, not made again.
            let outcome = tried(&self.retry, "merging", self.log, || async {
                match self.policy {
                    Some(policy) => {
                        self.github
                            .merge_when_green_under(self.repo, self.number, &request, policy)
                            .await
                    }
                    None => {
                        self.github
                            .merge_when_green(self.repo, self.number, &request)
                            .await
                    }
                }
            })
            .await?;
            let blockers = match &outcome {
                MergeOutcome::Merged { sha, already } => {
                    let how = if *already {
                        "was already merged"
                    } else {
                        "merged"
                    };
                    (self.log)(format!(
                        "delivery: pull request #{} {how} as {sha}",
                        self.number
                    ));
                    return Ok((
                        Verdict {
                            outcome: "merged",
                            message: format!(
                                "pull request #{} merged as {sha}: {url}",
                                self.number
                            ),
                        },
                        sha.clone(),
                    ));
                }
                MergeOutcome::Blocked { blockers, .. } => blockers,
            };
            if blockers.iter().all(MergeBlocker::is_waiting) {
                let what: Vec<String> = blockers.iter().map(ToString::to_string).collect();
                self.pause(&what.join("; "), &mut said).await?;
                continue;
            }
            let message = outcome.diagnostic_message();
            let verdict = |outcome| {
                Ok((
                    Verdict {
                        outcome,
                        message: message.clone(),
                    },
                    String::new(),
                ))
            };
            if blockers
                .iter()
                .any(|b| matches!(b, MergeBlocker::Conflicts))
            {
                return Ok((self.conflict(git, url).await?, String::new()));
            }
            if blockers.iter().any(|b| {
                matches!(
                    b,
                    MergeBlocker::CheckFailing { .. } | MergeBlocker::StatusFailing { .. }
                )
            }) {
                return verdict("ci_failed");
            }
            if self.consider_feedback
                && blockers
                    .iter()
                    .any(|b| matches!(b, MergeBlocker::ChangesRequested { .. }))
            {
                return verdict("repair_required");
            }
            return Err(refusal(message));
        }
    }
}

fn is_check(item: &FeedbackItem) -> bool {
    matches!(
        item,
        FeedbackItem::FailingCheck { .. } | FeedbackItem::FailingStatus { .. }
    )
}
