//! The GitHub half of delivery, through `trellis-forge`: the pull request of the run branch
//! (found by head branch, so a retry or a resumed run never opens a second), its feedback and
//! checks, the merge (found already made on a resume), and the calls the comment half shares.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use trellis_agents::binding::PullRequestFeedback;
use trellis_agents::{DeliveryBinding, ExecutionRequest};
use trellis_forge::{
    FeedbackItem, ForgeError, GitHub, MergeBlocker, MergeOutcome, MergePolicy, MergeRequest,
    PullAction, PullRequestDraft, RepoRef,
};
use trellis_graph::WorkerErrorCode;

use super::feedback_log::FeedbackLog;
use super::git::{DeliveryFailure, Git, Pushed, crash, delivered_ref};
use super::kind::{DeliveryKind, token_variable};
use super::retry::{RetrySchedule, retrying};
use super::settings::{ForgeSettings, parse_remote};
use super::target::{TargetMerge, conflict_message, merge_target};

pub(super) fn forge_failure(error: ForgeError) -> DeliveryFailure {
    let code = if error.is_transient() {
        WorkerErrorCode::Crash
    } else {
        WorkerErrorCode::Refusal
    };
    DeliveryFailure {
        code,
        message: format!("{} [{}]", error, error.code()),
    }
}

/// One forge operation, tried again through transient failures (see `retry`); the failure
/// says how often it was tried.
pub(super) async fn tried<T, F, Fut>(
    schedule: &RetrySchedule,
    what: &str,
    log: &(dyn Fn(String) + Sync),
    operation: F,
) -> Result<T, DeliveryFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ForgeError>>,
{
    retrying(schedule, what, log, operation)
        .await
        .map_err(|gave_up| {
            let mut failure = forge_failure(gave_up.error);
            if gave_up.tries > 1 {
                failure
                    .message
                    .push_str(&format!(" (gave up after {} tries)", gave_up.tries));
            }
            failure
        })
}

fn refusal(message: String) -> DeliveryFailure {
    DeliveryFailure {
        code: WorkerErrorCode::Refusal,
        message,
    }
}

pub(super) fn connect(
    forge: &ForgeSettings,
    host: &str,
    binding: &DeliveryBinding,
    request: &ExecutionRequest,
) -> Result<GitHub, DeliveryFailure> {
    forge
        .client(host, &token_variable(binding), |name| {
            request.environment.get(name).map(str::to_owned)
        })
        .map_err(forge_failure)
}

pub(super) fn input_text<'a>(request: &'a ExecutionRequest, field: &str) -> Option<&'a str> {
    request.input.get(field).and_then(Value::as_str)
}

/// How a look at the pull request ended.
struct Verdict {
    outcome: &'static str,
    message: String,
}

/// Opens or finds the run branch's pull request, then (pr@2, merge) waits for its checks and
/// reports feedback, and (merge) merges it.
pub(super) async fn deliver_pull(
    forge: &ForgeSettings,
    request: &ExecutionRequest,
    binding: &DeliveryBinding,
    kind: DeliveryKind,
    git: &Git<'_>,
    pushed: &Pushed,
    log: &(dyn Fn(String) + Sync),
) -> Result<Value, DeliveryFailure> {
    let (host, repo) = parse_remote(&pushed.configured_url).ok_or_else(|| {
        refusal(format!(
            "the remote URL {} does not name a GitHub repository (https://HOST/OWNER/REPO or \
             git@HOST:OWNER/REPO)",
            pushed.configured_url
        ))
    })?;
    let github = connect(forge, &host, binding, request)?;
    let mut body = input_text(request, "description").unwrap_or("").to_owned();
    if let Some(issue) = input_text(request, "issueNumber").filter(|n| !n.trim().is_empty()) {
        body.push_str(&format!(
            "\n\nCloses #{}",
            issue.trim().trim_start_matches('#')
        ));
    }
    let title: String = input_text(request, "title")
        .unwrap_or("Trellis change")
        .lines()
        .next()
        .unwrap_or("Trellis change")
        .chars()
        .take(200)
        .collect();
    let draft = PullRequestDraft {
        head: pushed.branch.clone(),
        base: pushed.target_branch.clone(),
        title,
        body,
        draft: false,
    };
    if let DeliveryKind::Merge { version } = kind
        && let Some(merged) = tried(
            &forge.retry,
            "looking for a merged pull request",
            log,
            || github.find_merged_pull(&repo, &pushed.branch, &pushed.head),
        )
        .await?
    {
        return Ok(already_merged(
            &github, &repo, version, pushed, &merged, log,
        ));
    }
    log(format!(
        "delivery: opening or updating the pull request of {} in {repo}",
        pushed.branch
    ));
    // A retry looks for the pull request by its head branch first: one GitHub opened before
    // answering an error is found, not opened again.
    let opened = tried(&forge.retry, "opening the pull request", log, || {
        github.find_or_create_pull(&repo, &draft)
    })
    .await?;
    let number = opened.pull.number;
    let url = opened.pull.html_url.clone();
    let did = match opened.action {
        PullAction::Created => "opened",
        PullAction::Updated => "updated",
        PullAction::Unchanged => "found",
    };
    log(format!("delivery: {did} pull request #{number} {url}"));
    let mut output = Map::new();
    output.insert(
        "mode".into(),
        json!(if matches!(kind, DeliveryKind::Merge { .. }) {
            "merge"
        } else {
            "pr"
        }),
    );
    output.insert(
        "repository".into(),
        json!(format!("https://{}/{repo}", github.web_host())),
    );
    output.insert("targetBranch".into(), json!(pushed.target_branch));
    output.insert("headRevision".into(), json!(pushed.head));
    output.insert("pullRequestId".into(), json!(number.to_string()));
    let verdict = match (&pushed.target_merge, kind) {
        // The conflict is in the work tree now: the worker's next round resolves it.
        (TargetMerge::Conflicted { target, paths }, _) => {
            output.insert(
                "version".into(),
                json!(match kind {
                    DeliveryKind::Merge { version } => format!("v{version}"),
                    _ => "v2".to_owned(),
                }),
            );
            if matches!(kind, DeliveryKind::Merge { version: 2.. }) {
                output.insert("mergeRevision".into(), json!(""));
            }
            Verdict {
                outcome: "conflict",
                message: conflict_message(&pushed.target_branch, target, paths),
            }
        }
        (_, DeliveryKind::PullRequest { version: 1 }) => {
            output.insert("version".into(), json!("v1"));
            Verdict {
                outcome: "opened",
                message: format!("pull request #{number} {did}: {url}"),
            }
        }
        (_, DeliveryKind::PullRequest { .. }) => {
            output.insert("version".into(), json!("v2"));
            let policy = read_policy(forge, &github, &repo, &pushed.target_branch, log).await?;
            let watch =
                Watch::new(forge, &github, &repo, number, binding, pushed, log).under(&policy);
            watch.until_ready(git, &url).await?
        }
        (_, DeliveryKind::Merge { version }) => {
            output.insert("version".into(), json!(format!("v{version}")));
            let policy = read_policy(forge, &github, &repo, &pushed.target_branch, log).await?;
            let watch =
                Watch::new(forge, &github, &repo, number, binding, pushed, log).under(&policy);
            let verdict = watch.until_ready(git, &url).await?;
            let (verdict, revision) = if verdict.outcome == "ready" {
                watch.merge(git, &url).await?
            } else {
                (verdict, String::new())
            };
            if version > 1 {
                output.insert("mergeRevision".into(), json!(revision));
            }
            verdict
        }
        (_, DeliveryKind::Push | DeliveryKind::Comment) => {
            return Err(crash("not a pull request delivery".into()));
        }
    };
    let mut message = verdict.message;
    if let TargetMerge::Merged {
        target, changed, ..
    } = &pushed.target_merge
    {
        // Recorded in the diagnostic: the reviewers judged the change before the merge.
        message.push_str(&format!(
            "\n\n{} ({target}) was merged into the change before the push; it changed {}.",
            pushed.target_branch,
            changed.join(", ")
        ));
    }
    output.insert("outcome".into(), json!(verdict.outcome));
    Ok(json!({
        "output": output,
        "signals": {"delivery": verdict.outcome},
        "diagnostic": {"message": message},
    }))
}

/// The receipt of a merge GitHub already made (a retry or resume after merging).
fn already_merged(
    github: &GitHub,
    repo: &RepoRef,
    version: u8,
    pushed: &Pushed,
    merged: &trellis_forge::models::PullRequest,
    log: &(dyn Fn(String) + Sync),
) -> Value {
    let sha = merged.merge_commit_sha.clone().unwrap_or_default();
    log(format!(
        "delivery: pull request #{} was already merged as {sha}",
        merged.number
    ));
    let mut output = json!({
        "version": format!("v{version}"),
        "mode": "merge",
        "outcome": "merged",
        "repository": format!("https://{}/{repo}", github.web_host()),
        "targetBranch": pushed.target_branch,
        "headRevision": pushed.head,
        "pullRequestId": merged.number.to_string(),
    });
    if version > 1 {
        output["mergeRevision"] = json!(sha);
    }
    json!({
        "output": output,
        "signals": {"delivery": "merged"},
        "diagnostic": {"message": format!(
            "pull request #{} merged as {sha}: {}", merged.number, merged.html_url
        )},
    })
}

/// The target branch's merge policy (rulesets, branch protection, allowed methods, a merge
/// queue), read once per delivery; what could not be read is logged as a note.
async fn read_policy(
    forge: &ForgeSettings,
    github: &GitHub,
    repo: &RepoRef,
    branch: &str,
    log: &(dyn Fn(String) + Sync),
) -> Result<MergePolicy, DeliveryFailure> {
    let policy = tried(&forge.retry, "reading the merge policy", log, || {
        github.merge_policy(repo, branch)
    })
    .await?;
    for note in &policy.notes {
        log(format!("delivery: merge policy of {branch}: {note}"));
    }
    Ok(policy)
}

/// Repeated looks at one pull request.
struct Watch<'a> {
    github: &'a GitHub,
    /// What the target branch requires: which checks count, how it may be merged (none read:
    /// every check counts and the requested method is used).
    policy: Option<&'a MergePolicy>,
    repo: &'a RepoRef,
    number: u64,
    head: &'a str,
    branch: &'a str,
    remote: &'a str,
    target_branch: &'a str,
    consider_feedback: bool,
    retry: RetrySchedule,
    poll: Duration,
    deadline: Instant,
    log: &'a (dyn Fn(String) + Sync),
}

impl<'a> Watch<'a> {
    fn new(
        forge: &ForgeSettings,
        github: &'a GitHub,
        repo: &'a RepoRef,
        number: u64,
        binding: &DeliveryBinding,
        pushed: &'a Pushed,
        log: &'a (dyn Fn(String) + Sync),
    ) -> Self {
        Self {
            github,
            policy: None,
            repo,
            number,
            head: &pushed.head,
            branch: &pushed.branch,
            remote: &pushed.remote,
            target_branch: &pushed.target_branch,
            consider_feedback: binding.pull_request_feedback == PullRequestFeedback::Consider,
            retry: forge.retry,
            poll: forge.poll,
            deadline: Instant::now() + forge.wait_limit,
            log,
        }
    }

    /// Judges the pull request under the target branch's merge policy.
    fn under(mut self, policy: &'a MergePolicy) -> Self {
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
    async fn until_ready(&self, git: &Git<'_>, url: &str) -> Result<Verdict, DeliveryFailure> {
        let mut log_file = FeedbackLog::open(git, self.branch).await?;
        let mut said = String::new();
        loop {
            let acknowledged = log_file.acknowledged(self.head);
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
                    .record(self.head, feedback.keys())
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

    /// GitHub sees a conflict: the target is merged into the workspace so the conflict is
    /// there for the next round's worker (or, merging cleanly here, the next delivery pushes
    /// the merge).
    async fn conflict(&self, git: &Git<'_>, url: &str) -> Result<Verdict, DeliveryFailure> {
        let merged = merge_target(
            git,
            self.remote,
            self.target_branch,
            self.head,
            self.branch,
            &delivered_ref(self.branch),
            self.log,
        )
        .await?;
        let message = match merged {
            TargetMerge::Conflicted { target, paths } => {
                conflict_message(self.target_branch, &target, &paths)
            }
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
    async fn merge(&self, git: &Git<'_>, url: &str) -> Result<(Verdict, String), DeliveryFailure> {
        let request = MergeRequest {
            expected_head: Some(self.head.to_owned()),
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
