//! The forge client's delivery policy against the loopback fake GitHub: job-log excerpts in
//! check feedback, merge policy (rulesets, branch protection, allowed methods, linear history,
//! merge queues), the PR body section Trellis owns, and conversation feedback.

use std::collections::BTreeSet;

use serde_json::json;
use trellis_forge::{
    FeedbackItem, GitHub, MergeBlocker, MergeMethod, MergeOutcome, MergeRequest, ProtectionAccess,
    PullAction, PullRequestDraft, PullUpdate, RepoRef, ReportMarker, Token,
};
use trellis_testkit::github::{Auth, FakeGitHub};

const TOKEN: &str = "ghp_policy_c0ffee";
const BASE: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";
const REPO: &str = "acme/app";

async fn fake() -> FakeGitHub {
    let fake = FakeGitHub::start(TOKEN).await.unwrap();
    fake.add_repository(REPO, "main", BASE);
    fake.set_branch(REPO, "trellis/run1", HEAD);
    fake
}

fn client(fake: &FakeGitHub) -> GitHub {
    let token = Token::from_lookup("GH_TOKEN", |_| Some(TOKEN.to_owned())).unwrap();
    GitHub::new(&fake.api_url(), token).unwrap()
}

fn repo() -> RepoRef {
    RepoRef::parse(REPO).unwrap()
}

fn draft(body: &str) -> PullRequestDraft {
    PullRequestDraft {
        head: "trellis/run1".into(),
        base: "main".into(),
        title: "Add --json".into(),
        body: body.into(),
        draft: false,
    }
}

async fn open_pull(github: &GitHub) -> u64 {
    github
        .find_or_create_pull(&repo(), &draft("Adds the flag."))
        .await
        .unwrap()
        .pull
        .number
}

fn request(method: MergeMethod) -> MergeRequest {
    MergeRequest {
        method,
        expected_head: Some(HEAD.into()),
        ..MergeRequest::default()
    }
}

fn blockers(outcome: &MergeOutcome) -> &[MergeBlocker] {
    match outcome {
        MergeOutcome::Blocked { blockers, .. } => blockers,
        MergeOutcome::Merged { .. } => panic!("merged: {outcome:?}"),
    }
}

/// The merge methods the fake was asked to merge with.
fn merge_methods(fake: &FakeGitHub) -> Vec<String> {
    fake.calls_to("PUT", "/merge")
        .iter()
        .map(|c| c.body["merge_method"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_failing_actions_check_brings_a_clean_bounded_labelled_log_excerpt() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_check_run(REPO, number, "build", Some("failure"));
    fake.set_check_run(REPO, number, "docs", Some("failure"));
    fake.set_check_run(REPO, number, "external-ci", Some("failure"));
    let mut log = String::from("\u{feff}");
    for i in 0..200 {
        log.push_str(&format!(
            "2026-01-01T10:00:{:02}.1234567Z \u{1b}[31merror\u{1b}[0m[E{i:04}]: step {i} failed {}\r\n",
            i % 60,
            "x".repeat(100)
        ));
    }
    fake.set_job_log(REPO, number, "build", &log, 200);
    fake.set_job_log(REPO, number, "docs", "", 410);

    let feedback = github
        .pull_feedback(&repo(), number, &BTreeSet::new())
        .await
        .unwrap();
    let logs: Vec<_> = feedback
        .items
        .iter()
        .filter_map(|item| match item {
            FeedbackItem::FailingCheck { name, log, .. } => Some((name.as_str(), log.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(logs.len(), 3, "{feedback:?}");
    let build = logs[0].1.clone().expect("build has a log excerpt");
    assert_eq!(build.check, "build");
    assert!(build.truncated && build.note.is_none());
    assert!(build.text.len() <= trellis_forge::LOG_EXCERPT_BYTES);
    assert!(build.lines <= trellis_forge::LOG_EXCERPT_LINES);
    assert!(
        build.text.contains("error[E0199]: step 199 failed"),
        "{}",
        build.text
    );
    assert!(!build.text.contains('\u{1b}') && !build.text.contains("2026-01-01T"));
    assert!(
        !build.text.contains("step 100 failed"),
        "only the end is kept"
    );
    let docs = logs[1].1.clone().expect("docs has a note");
    assert_eq!(docs.note.as_deref(), Some("the log has expired (410)"));
    assert_eq!(logs[2].1, None, "a third-party check has no Actions log");

    let message = feedback.diagnostic_message();
    assert!(
        message.contains(&format!(
            "log of build (last {} lines):\n```text\n",
            build.lines
        )),
        "{message}"
    );
    assert!(message.contains("log of docs: the log has expired (410)"));
    // The logs endpoint answered GitHub's 302; the download was followed.
    let logs_call = fake.calls_to("GET", "/logs");
    assert_eq!(
        logs_call.iter().map(|c| c.status).collect::<Vec<_>>(),
        [302, 410]
    );
    let downloads: Vec<_> = fake
        .calls()
        .into_iter()
        .filter(|c| c.path.starts_with("/_blobs/"))
        .collect();
    assert_eq!(downloads.len(), 1);
    assert_eq!(
        downloads[0].auth,
        Auth::Missing,
        "the token is not sent to the download origin"
    );
}

#[tokio::test]
async fn a_ruleset_requiring_one_check_ignores_other_failing_checks() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "required_status_checks", "parameters": {
            "strict_required_status_checks_policy": false,
            "required_status_checks": [{"context": "test", "integration_id": 15368}],
        }})],
    );
    fake.set_check_run(REPO, number, "lint", Some("failure"));
    fake.set_check_run(REPO, number, "slow-e2e", None);
    let policy = github.merge_policy(&repo(), "main").await.unwrap();
    assert_eq!(policy.required_checks, ["test"]);
    assert_eq!(policy.protection, ProtectionAccess::None);

    // The required check has not reported yet: that alone is waited for.
    let waiting = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Merge))
        .await
        .unwrap();
    assert_eq!(
        blockers(&waiting),
        [MergeBlocker::CheckPending {
            name: "test".into()
        }]
    );
    let feedback = github
        .pull_feedback_under(&repo(), number, &BTreeSet::new(), &policy)
        .await
        .unwrap();
    assert!(feedback.is_clean(), "lint is not required: {feedback:?}");
    assert_eq!(feedback.pending, ["check test (not reported yet)"]);

    fake.set_check_run(REPO, number, "test", Some("success"));
    let merged = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Merge))
        .await
        .unwrap();
    assert!(
        matches!(merged, MergeOutcome::Merged { already: false, .. }),
        "{merged:?}"
    );
    assert!(fake.is_merged(REPO, number));
}

#[tokio::test]
async fn linear_history_merges_by_squash_instead_of_a_merge_commit() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "required_linear_history"})],
    );
    let policy = github.merge_policy(&repo(), "main").await.unwrap();
    assert!(policy.linear_history);
    assert_eq!(
        policy.allowed_methods,
        [MergeMethod::Squash, MergeMethod::Rebase]
    );
    let merged = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Merge))
        .await
        .unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert_eq!(merge_methods(&fake), ["squash"]);
}

#[tokio::test]
async fn a_repository_allowing_only_rebase_is_merged_by_rebase() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_merge_methods(REPO, false, false, false);
    let nothing = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Squash))
        .await
        .unwrap();
    assert_eq!(
        blockers(&nothing),
        [MergeBlocker::NoAllowedMethod {
            requested: MergeMethod::Squash,
            linear_history: false
        }]
    );
    assert!(
        nothing
            .diagnostic_message()
            .contains("no merge method is allowed")
    );
    assert!(merge_methods(&fake).is_empty());

    fake.set_merge_methods(REPO, false, false, true);
    let merged = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Squash))
        .await
        .unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert_eq!(merge_methods(&fake), ["rebase"]);
}

#[tokio::test]
async fn unreadable_branch_protection_falls_back_to_the_rulesets() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_branch_protection(REPO, "main", &["ci"], false, false);
    fake.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "required_status_checks", "parameters": {
            "strict_required_status_checks_policy": true,
            "required_status_checks": [{"context": "test"}],
        }})],
    );
    let policy = github.merge_policy(&repo(), "main").await.unwrap();
    assert_eq!(policy.protection, ProtectionAccess::Forbidden);
    assert_eq!(policy.required_checks, ["test"]);
    assert!(policy.strict_checks);
    assert!(policy.notes.iter().any(|n| n.contains("403")), "{policy:?}");

    // Readable protection adds its checks and linear history.
    fake.set_branch_protection(REPO, "main", &["ci"], true, true);
    let policy = github.merge_policy(&repo(), "main").await.unwrap();
    assert_eq!(policy.protection, ProtectionAccess::Read);
    assert_eq!(policy.required_checks, ["ci", "test"]);
    assert!(policy.linear_history);
    fake.set_check_run(REPO, number, "ci", Some("success"));
    fake.set_check_run(REPO, number, "test", Some("success"));
    fake.set_check_run(REPO, number, "optional", Some("failure"));
    let merged = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Merge))
        .await
        .unwrap();
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    assert_eq!(merge_methods(&fake), ["squash"]);
}

#[tokio::test]
async fn a_merge_queue_rule_is_reported_then_used_through_graphql() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    fake.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "merge_queue", "parameters": {
            "check_response_timeout_minutes": 60, "grouping_strategy": "ALLGREEN",
            "max_entries_to_build": 5, "max_entries_to_merge": 5, "merge_method": "SQUASH",
            "min_entries_to_merge": 1, "min_entries_to_merge_wait_minutes": 5,
        }})],
    );
    let required = github
        .merge_when_green(&repo(), number, &request(MergeMethod::Merge))
        .await
        .unwrap();
    let [blocker] = blockers(&required) else {
        panic!("{required:?}");
    };
    assert_eq!(
        blocker,
        &MergeBlocker::MergeQueueRequired {
            branch: "main".into()
        }
    );
    assert!(!blocker.is_waiting());
    assert!(fake.merge_queue(REPO).is_empty() && merge_methods(&fake).is_empty());

    let enqueue = MergeRequest {
        use_merge_queue: true,
        ..request(MergeMethod::Merge)
    };
    for _ in 0..2 {
        let queued = github
            .merge_when_green(&repo(), number, &enqueue)
            .await
            .unwrap();
        let [MergeBlocker::InMergeQueue { entry }] = blockers(&queued) else {
            panic!("{queued:?}");
        };
        assert_eq!(entry.position, Some(1));
        assert!(blockers(&queued)[0].is_waiting());
    }
    assert_eq!(fake.merge_queue(REPO), [number]);
    let mutations = fake
        .calls_to("POST", "/graphql")
        .into_iter()
        .filter(|c| {
            c.body["query"]
                .as_str()
                .unwrap_or("")
                .contains("enqueuePullRequest")
        })
        .count();
    assert_eq!(mutations, 1, "enqueued once, then found in the queue");

    // The queue removes it: a blocker that waiting does not lift…
    fake.remove_from_merge_queue(REPO, number, "FAILED_CHECKS");
    let removed = github
        .merge_when_green(&repo(), number, &enqueue)
        .await
        .unwrap();
    assert_eq!(
        blockers(&removed),
        [MergeBlocker::RemovedFromMergeQueue {
            reason: "FAILED_CHECKS".into()
        }]
    );
    // …until the change moves on; a queued pull request the queue merges reads as merged.
    fake.set_branch(
        REPO,
        "trellis/run1",
        "4444444444444444444444444444444444444444",
    );
    let again = MergeRequest {
        expected_head: None,
        ..enqueue
    };
    let queued = github
        .merge_when_green(&repo(), number, &again)
        .await
        .unwrap();
    assert!(matches!(
        blockers(&queued),
        [MergeBlocker::InMergeQueue { .. }]
    ));
    fake.complete_merge_queue(REPO, number);
    let merged = github
        .merge_when_green(&repo(), number, &again)
        .await
        .unwrap();
    assert!(
        matches!(merged, MergeOutcome::Merged { already: true, .. }),
        "{merged:?}"
    );
    assert!(
        merge_methods(&fake).is_empty(),
        "never merged around the queue"
    );
}

#[tokio::test]
async fn human_text_around_the_trellis_section_survives_two_updates() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    let opened = fake.pull_body(REPO, number).unwrap();
    assert_eq!(
        opened,
        "<!-- trellis:begin -->\nAdds the flag.\n<!-- trellis:end -->"
    );
    let human = format!("Reviewer notes: ✓ ran it locally\r\n\n{opened}\n\n> keep this  \n");
    github
        .update_pull(
            &repo(),
            number,
            &PullUpdate {
                body: Some(human.clone()),
                ..PullUpdate::default()
            },
        )
        .await
        .unwrap();
    for round in ["Round 2 summary.", "Round 3 summary.\n\nCloses #7"] {
        let outcome = github
            .find_or_create_pull(&repo(), &draft(round))
            .await
            .unwrap();
        assert_eq!(outcome.action, PullAction::Updated);
        let body = fake.pull_body(REPO, number).unwrap();
        assert_eq!(
            body,
            human.replace("Adds the flag.", round),
            "only the section changed"
        );
    }
    let unchanged = github
        .find_or_create_pull(&repo(), &draft("Round 3 summary.\n\nCloses #7"))
        .await
        .unwrap();
    assert_eq!(unchanged.action, PullAction::Unchanged);
}

#[tokio::test]
async fn conversation_comments_and_review_summaries_are_feedback_once_per_version() {
    let fake = fake().await;
    let github = client(&fake);
    let number = open_pull(&github).await;
    let marker = ReportMarker::new("run-0190ab").unwrap();
    github
        .post_report(&repo(), number, &marker, "Trellis report")
        .await
        .unwrap();
    let id = fake.add_issue_comment(REPO, number, "carol", "Please also update the README.");
    fake.add_review(
        REPO,
        number,
        "dave",
        "COMMENTED",
        "Consider a shorter flag name.",
    );
    fake.add_review(REPO, number, "erin", "APPROVED", "");

    let first = github
        .pull_feedback(&repo(), number, &BTreeSet::new())
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2, "{first:?}");
    assert!(
        matches!(&first.items[0], FeedbackItem::ReviewSummary { author, .. } if author == "dave")
    );
    assert!(
        matches!(&first.items[1], FeedbackItem::Comment { comment_id, body, .. } if *comment_id == id && body == "Please also update the README.")
    );
    let message = first.diagnostic_message();
    assert!(
        message.contains("carol commented: Please also update the README."),
        "{message}"
    );
    assert!(!message.contains("Trellis report"), "{message}");

    let mut acknowledged: BTreeSet<String> = first.keys().into_iter().collect();
    let seen = github
        .pull_feedback(&repo(), number, &acknowledged)
        .await
        .unwrap();
    assert!(seen.is_clean(), "{seen:?}");

    fake.edit_issue_comment(REPO, id, "Please also update the README and the man page.");
    let edited = github
        .pull_feedback(&repo(), number, &acknowledged)
        .await
        .unwrap();
    assert_eq!(edited.items.len(), 1, "{edited:?}");
    assert!(
        matches!(&edited.items[0], FeedbackItem::Comment { body, .. } if body.ends_with("man page."))
    );
    acknowledged.extend(edited.keys());
    let after = github
        .pull_feedback(&repo(), number, &acknowledged)
        .await
        .unwrap();
    assert!(after.is_clean(), "{after:?}");
}
