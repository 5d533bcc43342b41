//! The forge client against the loopback fake GitHub: idempotent pull requests, feedback,
//! merges, report comments, and errors that say what went wrong without the token.

use std::collections::BTreeSet;

use trellis_forge::{
    CommentAction, ForgeError, GitHub, MergeBlocker, MergeMethod, MergeOutcome, MergeRequest,
    PullAction, PullRequestDraft, RepoRef, ReportMarker, Token,
};
use trellis_testkit::github::{Action, FakeGitHub};

const TOKEN: &str = "ghp_canary_c0ffee";
const BASE: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";
const HEAD2: &str = "3333333333333333333333333333333333333333";

async fn fake() -> FakeGitHub {
    let fake = FakeGitHub::start(TOKEN).await.unwrap();
    fake.add_repository("acme/app", "main", BASE);
    fake.set_branch("acme/app", "trellis/run1", HEAD);
    fake
}

fn client(fake: &FakeGitHub, token: &str) -> GitHub {
    let token = Token::from_lookup("GH_TOKEN", |_| Some(token.to_owned())).unwrap();
    GitHub::new(&fake.api_url(), token).unwrap()
}

fn repo() -> RepoRef {
    RepoRef::parse("acme/app").unwrap()
}

fn draft(title: &str) -> PullRequestDraft {
    PullRequestDraft {
        head: "trellis/run1".into(),
        base: "main".into(),
        title: title.into(),
        body: "Adds the flag.".into(),
        draft: false,
    }
}

#[tokio::test]
async fn a_retried_delivery_finds_the_pull_request_it_opened() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let first = github
        .find_or_create_pull(&repo(), &draft("Add --json"))
        .await
        .unwrap();
    assert_eq!(first.action, PullAction::Created);
    assert_eq!(first.pull.html_url, "https://github.com/acme/app/pull/1");
    assert_eq!(first.pull.head.sha, HEAD);

    let again = github
        .find_or_create_pull(&repo(), &draft("Add --json"))
        .await
        .unwrap();
    assert_eq!(
        (again.action, again.pull.number),
        (PullAction::Unchanged, 1)
    );
    let retitled = github
        .find_or_create_pull(&repo(), &draft("Add --json output"))
        .await
        .unwrap();
    assert_eq!(
        (retitled.action, retitled.pull.number),
        (PullAction::Updated, 1)
    );
    assert_eq!(retitled.pull.title, "Add --json output");

    assert_eq!(fake.pull_numbers("acme/app"), [1]);
    assert_eq!(fake.calls_to("POST", "/pulls").len(), 1);
    let lookup = &fake.calls_to("GET", "/repos/acme/app/pulls")[0];
    assert!(
        lookup
            .query
            .as_deref()
            .unwrap()
            .contains("head=acme%3Atrellis%2Frun1"),
        "{lookup:?}"
    );
}

#[tokio::test]
async fn a_missing_head_branch_is_refused_with_githubs_reason() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let mut missing = draft("x");
    missing.head = "trellis/nowhere".into();
    let error = github
        .find_or_create_pull(&repo(), &missing)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "forge.refused");
    assert!(error.to_string().contains("(422)"), "{error}");
}

#[tokio::test]
async fn errors_name_the_problem_and_never_the_token() {
    let fake = fake().await;
    let rejected = client(&fake, "ghp_canary_wrong")
        .repository(&repo())
        .await
        .unwrap_err();
    assert_eq!(rejected.code(), "forge.token_rejected");
    assert_eq!(
        rejected.to_string(),
        "token rejected: GitHub did not accept the value of GH_TOKEN (401)"
    );

    let github = client(&fake, TOKEN);
    let unknown = github
        .repository(&RepoRef::parse("acme/nope").unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "repository acme/nope not found, or the token cannot see it"
    );
    let no_pull = github.pull(&repo(), 41).await.unwrap_err();
    assert_eq!(no_pull.code(), "forge.not_found");
    assert!(
        no_pull.to_string().contains("pull request #41"),
        "{no_pull}"
    );

    let addr = fake.addr();
    fake.shutdown().await;
    let token = Token::from_lookup("GH_TOKEN", |_| Some(TOKEN.into())).unwrap();
    let down = GitHub::new(&format!("http://{addr}"), token)
        .unwrap()
        .repository(&repo())
        .await
        .unwrap_err();
    assert_eq!(down.code(), "forge.unreachable");
    assert!(down.is_transient());

    for error in [rejected, unknown, no_pull, down] {
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("canary"), "{shown}");
    }
    assert!(!format!("{github:?}").contains("canary"));
}

#[tokio::test]
async fn feedback_lists_reviews_comments_and_failing_checks_once() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let number = github
        .find_or_create_pull(&repo(), &draft("t"))
        .await
        .unwrap()
        .pull
        .number;
    let clean = github
        .pull_feedback(&repo(), number, &BTreeSet::new())
        .await
        .unwrap();
    assert!(clean.is_clean(), "{clean:?}");

    fake.add_review(
        "acme/app",
        number,
        "alice",
        "CHANGES_REQUESTED",
        "Please add tests.",
    );
    fake.add_review("acme/app", number, "bob", "APPROVED", "");
    fake.add_review_comment("acme/app", number, "src/main.rs", 12, "Name this constant.");
    fake.set_check_run("acme/app", number, "build", Some("failure"));
    fake.set_check_run("acme/app", number, "lint", None);
    let feedback = github
        .pull_feedback(&repo(), number, &BTreeSet::new())
        .await
        .unwrap();
    assert_eq!(feedback.items.len(), 3, "{feedback:?}");
    assert_eq!(feedback.pending, ["check lint"]);
    let message = feedback.diagnostic_message();
    assert!(
        message.starts_with("Pull request #1 (https://github.com/acme/app/pull/1) has feedback")
    );
    assert!(
        message.contains("1. alice requested changes: Please add tests."),
        "{message}"
    );
    assert!(
        message.contains("2. reviewer commented on src/main.rs:12: Name this constant."),
        "{message}"
    );
    assert!(
        message.contains("3. check build ended failure"),
        "{message}"
    );

    // Routed back once, the same feedback is not reported again…
    let acknowledged: BTreeSet<String> = feedback.keys().into_iter().collect();
    let next = github
        .pull_feedback(&repo(), number, &acknowledged)
        .await
        .unwrap();
    assert!(next.is_clean(), "{next:?}");
    // …but a new comment and a check failing on the new head are.
    fake.set_branch("acme/app", "trellis/run1", HEAD2);
    fake.add_review_comment(
        "acme/app",
        number,
        "src/main.rs",
        20,
        "Still missing a test.",
    );
    fake.set_check_run("acme/app", number, "build", Some("timed_out"));
    let later = github
        .pull_feedback(&repo(), number, &acknowledged)
        .await
        .unwrap();
    assert_eq!(later.head_sha, HEAD2);
    let kinds: Vec<String> = later.items.iter().map(|i| i.describe()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds[0].contains("Still missing a test."));
    assert!(kinds[1].starts_with("check build ended timed_out"));
}

#[tokio::test]
async fn merges_only_when_mergeable_and_green_and_only_once() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let number = github
        .find_or_create_pull(&repo(), &draft("t"))
        .await
        .unwrap()
        .pull
        .number;
    fake.set_check_run("acme/app", number, "build", Some("failure"));
    fake.set_check_run("acme/app", number, "e2e", None);
    fake.add_review("acme/app", number, "alice", "CHANGES_REQUESTED", "no");
    fake.set_mergeable("acme/app", number, Some(false));
    let request = MergeRequest {
        method: MergeMethod::Squash,
        expected_head: Some(HEAD.into()),
        ..MergeRequest::default()
    };
    let blocked = github
        .merge_when_green(&repo(), number, &request)
        .await
        .unwrap();
    let MergeOutcome::Blocked { blockers, .. } = &blocked else {
        panic!("merged while blocked: {blocked:?}");
    };
    assert_eq!(
        blockers,
        &[
            MergeBlocker::Conflicts,
            MergeBlocker::ChangesRequested { by: "alice".into() },
            MergeBlocker::CheckFailing {
                name: "build".into(),
                conclusion: "failure".into()
            },
            MergeBlocker::CheckPending { name: "e2e".into() },
        ]
    );
    let message = blocked.diagnostic_message();
    assert!(
        message.contains("- the head branch conflicts with the base branch"),
        "{message}"
    );
    assert!(
        message.contains("- check e2e has not finished"),
        "{message}"
    );
    assert!(
        fake.calls_to("PUT", "/merge").is_empty(),
        "no merge was attempted"
    );

    fake.set_mergeable("acme/app", number, Some(true));
    fake.add_review("acme/app", number, "alice", "APPROVED", "ok now");
    fake.set_check_run("acme/app", number, "build", Some("success"));
    fake.set_check_run("acme/app", number, "e2e", Some("success"));
    let merged = github
        .merge_when_green(&repo(), number, &request)
        .await
        .unwrap();
    let MergeOutcome::Merged {
        sha,
        already: false,
    } = merged
    else {
        panic!("not merged: {merged:?}");
    };
    assert!(fake.is_merged("acme/app", number));
    let retried = github
        .merge_when_green(&repo(), number, &request)
        .await
        .unwrap();
    assert_eq!(retried, MergeOutcome::Merged { sha, already: true });
    assert_eq!(fake.calls_to("PUT", "/merge").len(), 1);
}

/// GitHub's list endpoints answer "pull request simple" items, which carry `merged_at` and no
/// `merged`: a resumed merge delivery must still find the pull request GitHub merged.
#[tokio::test]
async fn a_merged_pull_request_is_found_from_githubs_list_shape() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let number = github
        .find_or_create_pull(&repo(), &draft("t"))
        .await
        .unwrap()
        .pull
        .number;
    assert_eq!(
        github
            .find_merged_pull(&repo(), "trellis/run1", HEAD)
            .await
            .unwrap(),
        None
    );
    let request = MergeRequest {
        method: MergeMethod::Merge,
        expected_head: Some(HEAD.into()),
        ..MergeRequest::default()
    };
    let merged = github
        .merge_when_green(&repo(), number, &request)
        .await
        .unwrap();
    assert!(matches!(
        merged,
        MergeOutcome::Merged { already: false, .. }
    ));
    let found = github
        .find_merged_pull(&repo(), "trellis/run1", HEAD)
        .await
        .unwrap()
        .expect("the merged pull request is found from the closed list");
    assert_eq!(found.number, number);
    assert!(!found.merged, "list items carry no `merged` field");
    assert!(found.is_merged());
    assert_eq!(
        github
            .find_merged_pull(&repo(), "trellis/run1", HEAD2)
            .await
            .unwrap(),
        None,
        "a merge of another head is not this delivery's"
    );
}

#[tokio::test]
async fn a_moved_head_blocks_the_merge() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let number = github
        .find_or_create_pull(&repo(), &draft("t"))
        .await
        .unwrap()
        .pull
        .number;
    fake.set_branch("acme/app", "trellis/run1", HEAD2);
    let request = MergeRequest {
        method: MergeMethod::Merge,
        expected_head: Some(HEAD.into()),
        ..MergeRequest::default()
    };
    let outcome = github
        .merge_when_green(&repo(), number, &request)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        MergeOutcome::Blocked {
            number,
            url: "https://github.com/acme/app/pull/1".into(),
            blockers: vec![MergeBlocker::HeadMoved {
                expected: HEAD.into(),
                actual: HEAD2.into()
            }],
        }
    );
}

#[tokio::test]
async fn the_report_comment_is_posted_once_and_edited_after() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    let issue = fake.add_issue("acme/app", "Crash", "Steps", &[]);
    fake.apply_json(
        &serde_json::json!({"action": "addIssueComment", "repository": "acme/app",
                                        "number": issue, "body": "I see it too"}),
    )
    .unwrap();
    let marker = ReportMarker::new("run-0190ab").unwrap();
    let posted = github
        .post_report(&repo(), issue, &marker, "First report")
        .await
        .unwrap();
    assert_eq!(posted.action, CommentAction::Created);
    assert_eq!(posted.body_hash, trellis_forge::body_hash("First report"));
    let again = github
        .post_report(&repo(), issue, &marker, "First report")
        .await
        .unwrap();
    assert_eq!(
        (again.action, again.comment.id),
        (CommentAction::Unchanged, posted.comment.id)
    );
    let edited = github
        .post_report(&repo(), issue, &marker, "Second report")
        .await
        .unwrap();
    assert_eq!(
        (edited.action, edited.comment.id),
        (CommentAction::Updated, posted.comment.id)
    );
    let other = ReportMarker::new("run-other").unwrap();
    github
        .post_report(&repo(), issue, &other, "Another run")
        .await
        .unwrap();
    assert_eq!(
        fake.comment_bodies("acme/app", issue),
        [
            "I see it too".to_owned(),
            "<!-- trellis-report:run-0190ab -->\nSecond report".to_owned(),
            "<!-- trellis-report:run-other -->\nAnother run".to_owned(),
        ]
    );
    assert_eq!(fake.calls_to("POST", "/comments").len(), 2);
    assert_eq!(
        fake.calls_to("PATCH", &format!("/comments/{}", posted.comment.id))
            .len(),
        1
    );
}

#[tokio::test]
async fn works_against_an_enterprise_api_base() {
    let fake = fake().await;
    let token = Token::from_lookup("GITHUB_TOKEN", |_| Some(TOKEN.into())).unwrap();
    let github = GitHub::new(&fake.enterprise_api_url(), token).unwrap();
    let repository = github.repository(&repo()).await.unwrap();
    assert_eq!(repository.default_branch, "main");
    assert!(matches!(
        github.pull(&repo(), 9).await,
        Err(ForgeError::NotFound { .. })
    ));
}

#[tokio::test]
async fn reads_are_retried_through_server_errors_and_writes_are_not() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    fake.fail_next(502, 2, false);
    let repository = github.repository(&repo()).await.unwrap();
    assert_eq!(repository.full_name, "acme/app");
    assert_eq!(fake.calls_to("GET", "/repos/acme/app").len(), 3);

    let number = github
        .find_or_create_pull(&repo(), &draft("t"))
        .await
        .unwrap()
        .pull
        .number;
    fake.fail_next(502, 1, false);
    let update = trellis_forge::PullUpdate {
        title: Some("new".into()),
        ..Default::default()
    };
    let failed = github
        .update_pull(&repo(), number, &update)
        .await
        .unwrap_err();
    assert_eq!(failed.code(), "forge.unavailable");
    assert_eq!(
        fake.calls_to("PATCH", "/pulls/1").len(),
        1,
        "a write is sent once"
    );

    // A read that keeps failing stops the operation before its write.
    let issue = fake.add_issue("acme/app", "i", "", &[]);
    fake.fail_next(500, 3, false);
    let marker = ReportMarker::new("k").unwrap();
    let down = github
        .post_report(&repo(), issue, &marker, "r")
        .await
        .unwrap_err();
    assert_eq!(down.code(), "forge.unavailable");
    assert_eq!(fake.calls_to("GET", "/comments").len(), 3);
    assert!(fake.calls_to("POST", "/comments").is_empty());
}

#[tokio::test]
async fn rate_limits_and_missing_permissions_are_told_apart() {
    let fake = fake().await;
    let github = client(&fake, TOKEN);
    fake.fail_next(403, 1, true);
    let limited = github.repository(&repo()).await.unwrap_err();
    assert_eq!(
        limited,
        ForgeError::RateLimited {
            reset_at: Some(1_767_225_600),
            retry_after: None,
        }
    );
    assert_eq!(
        fake.calls_to("GET", "/repos/acme/app").len(),
        1,
        "not retried"
    );
    // A secondary rate limit: 403 with Retry-After, and GitHub's wording.
    fake.apply(Action::FailNext {
        status: 403,
        count: 1,
        rate_limited: false,
        retry_after: Some(7),
        method: None,
        path_suffix: None,
        applied: false,
    })
    .unwrap();
    let secondary = github.repository(&repo()).await.unwrap_err();
    assert_eq!(
        secondary,
        ForgeError::RateLimited {
            reset_at: None,
            retry_after: Some(7),
        }
    );
    assert!(secondary.is_transient());
    fake.fail_next(403, 1, false);
    let forbidden = github.pull(&repo(), 1).await.unwrap_err();
    assert_eq!(forbidden.code(), "forge.forbidden");
    assert!(
        forbidden
            .to_string()
            .starts_with("the token may not read a pull request in acme/app (403)"),
        "{forbidden}"
    );
}
