//! The GitHub half of delivery, through `trellis-forge`: the pull request of the run branch
//! (found by head branch, so a retry or a resumed run never opens a second), then the watch of
//! its feedback and checks (`watch`), and its merge (found already made on a resume).

use serde_json::{Map, Value, json};
use trellis_agents::{DeliveryBinding, ExecutionRequest};
use trellis_forge::{GitHub, MergePolicy, PullAction, PullRequestDraft, RepoRef};

use super::calls::{connect, input_text, refusal, tried};
use super::git::{DeliveryFailure, Git, Pushed, crash};
use super::kind::DeliveryKind;
use super::settings::{ForgeSettings, parse_remote};
use super::target::{
    TargetMerge, conflict_message, merged_message, needs_review_again, unresolved_message,
};
use super::watch::{CatchUp, Verdict, Watch};

/// Opens or finds the run branch's pull request, then (pr@2, merge) waits for its checks and
/// reports feedback, and (merge) merges it.
pub(super) async fn deliver_pull(
    forge: &ForgeSettings,
    request: &ExecutionRequest,
    binding: &DeliveryBinding,
    kind: DeliveryKind,
    git: &Git<'_>,
    (pushed, target_merge): (&Pushed, &TargetMerge),
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
    let verdict = match (target_merge, kind) {
        // The conflict (or a merge the reviewers have not judged) is in the work tree now:
        // the worker's next round resolves (or checks) it and the reviewers judge it again.
        (merge, _) if goes_back_to_the_worker(merge) => {
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
            let message = match merge {
                TargetMerge::Conflicted { target, paths } => {
                    conflict_message(&pushed.target_branch, target, paths)
                }
                TargetMerge::Unresolved { paths } => unresolved_message(paths),
                TargetMerge::Merged {
                    target, changed, ..
                } => merged_message(&pushed.target_branch, target, changed),
                TargetMerge::UpToDate => String::new(),
            };
            let outcome = match merge {
                TargetMerge::Merged { .. } => "repair_required",
                _ => "conflict",
            };
            Verdict { outcome, message }
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
                Watch::new(forge, &github, &repo, number, request, pushed, log).under(&policy);
            watch.until_ready(git, &url).await?
        }
        (_, DeliveryKind::Merge { version }) => {
            output.insert("version".into(), json!(format!("v{version}")));
            let policy = read_policy(forge, &github, &repo, &pushed.target_branch, log).await?;
            let mut watch =
                Watch::new(forge, &github, &repo, number, request, pushed, log).under(&policy);
            let (verdict, revision) = loop {
                let verdict = watch.until_ready(git, &url).await?;
                if verdict.outcome != "ready" {
                    break (verdict, String::new());
                }
                // "Strict" required checks judge the head only once it contains the target's
                // tip: merge the target in, push, and wait for the checks of the new head.
                if policy.strict_checks {
                    match watch.catch_up(git).await? {
                        CatchUp::Current => {}
                        CatchUp::Moved => continue,
                        CatchUp::Conflict(verdict) => break (verdict, String::new()),
                    }
                }
                break watch.merge(git, &url).await?;
            };
            output.insert("headRevision".into(), json!(watch.head));
            if version > 1 {
                output.insert("mergeRevision".into(), json!(revision));
            }
            verdict
        }
        (_, DeliveryKind::Push | DeliveryKind::Comment) => {
            return Err(crash("not a pull request delivery".into()));
        }
    };
    let message = verdict.message;
    output.insert("outcome".into(), json!(verdict.outcome));
    Ok(json!({
        "output": output,
        "signals": {"delivery": verdict.outcome},
        "diagnostic": {"message": message},
    }))
}

/// Whether the target merge leaves the next step to the worker's round: a conflict, an
/// unfinished resolution, or a clean merge that changed what the reviewers judged.
fn goes_back_to_the_worker(merge: &TargetMerge) -> bool {
    match merge {
        TargetMerge::Conflicted { .. } | TargetMerge::Unresolved { .. } => true,
        TargetMerge::Merged { .. } => needs_review_again(merge),
        TargetMerge::UpToDate => false,
    }
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
