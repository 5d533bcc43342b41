//! `--task-from URL` against the fake GitHub: issue and pull request URLs become exactly the
//! input the built-in `issue-review` and `pr-review` templates declare.

use serde_json::{Value, json};
use trellis_forge::{GitHub, TaskKind, Token};
use trellis_graph::GraphSpec;
use trellis_testkit::github::FakeGitHub;

const TOKEN: &str = "ghp_canary_task";
const MAIN: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";

fn template_input_type(name: &str) -> GraphSpec {
    let path = format!("{}/../../templates/{name}.json", env!("CARGO_MANIFEST_DIR"));
    GraphSpec::from_json_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn admits(template: &str, input: &Value) {
    template_input_type(template)
        .initial_input
        .check_value(input)
        .unwrap_or_else(|e| panic!("{template} refuses {input}: {e}"));
}

async fn fake() -> FakeGitHub {
    let fake = FakeGitHub::start(TOKEN).await.unwrap();
    fake.add_repository("acme/app", "main", MAIN);
    fake.add_repository("acme/lib", "trunk", MAIN);
    fake.set_branch("acme/app", "fix/crash", HEAD);
    fake
}

fn client(fake: &FakeGitHub) -> GitHub {
    let token = Token::from_lookup("GH_TOKEN", |_| Some(TOKEN.into())).unwrap();
    GitHub::new(&fake.api_url(), token)
        .unwrap()
        .with_web_host("github.com")
}

#[tokio::test]
async fn an_issue_url_becomes_the_issue_review_input() {
    let fake = fake().await;
    let number = fake.add_issue(
        "acme/app",
        "Crash on start",
        "Run `app` with no config.",
        &["bug", "p1"],
    );
    let url = format!("https://github.com/acme/app/issues/{number}#issuecomment-9");
    let task = client(&fake).resolve_task(&url).await.unwrap();
    assert_eq!(task.kind, TaskKind::Issue);
    let input = task.issue_review_input(Some("Focus on the config loader."));
    assert_eq!(
        input,
        json!({
            "url": "https://github.com/acme/app/issues/1",
            "context": {
                "title": "Crash on start",
                "body": "Run `app` with no config.\n\nLabels: bug, p1",
                "reviewScope": {"baseRepository": "acme/app", "baseBranch": "main", "baseRevision": MAIN},
            },
            "instructions": "Focus on the config loader.",
        })
    );
    admits("issue-review", &input);
    let error = task.input_for_template("pr-review", None).unwrap_err();
    assert_eq!(error.code(), "forge.not_a_pull_request");
    assert_eq!(
        task.input_for_template("single-worker", None)
            .unwrap_err()
            .code(),
        "forge.template_takes_no_url"
    );
}

#[tokio::test]
async fn a_pull_request_url_brings_its_scope_and_linked_issues() {
    let fake = fake().await;
    let bug = fake.add_issue("acme/app", "Crash on start", "Steps…", &[]);
    let upstream = fake.add_issue("acme/lib", "Config parser panics", "On empty files.", &[]);
    let body = format!("Fixes #{bug}; also closes acme/lib#{upstream}. Resolves #404. See #{bug}.");
    let number = fake.add_pull("acme/app", "Load config lazily", &body, "fix/crash", "main");
    let task = client(&fake)
        .resolve_task(&format!("https://github.com/acme/app/pull/{number}/files"))
        .await
        .unwrap();
    assert_eq!(task.kind, TaskKind::PullRequest);
    let input = task.pr_review_input(None).unwrap();
    assert_eq!(
        input,
        json!({
            "url": format!("https://github.com/acme/app/pull/{number}"),
            "context": {
                "title": "Load config lazily",
                "body": body,
                "linkedIssues": [
                    {"url": "https://github.com/acme/app/issues/1", "title": "Crash on start", "body": "Steps…"},
                    {"url": "https://github.com/acme/lib/issues/1", "title": "Config parser panics", "body": "On empty files."},
                ],
                "reviewScope": {
                    "baseRepository": "acme/app", "baseBranch": "main", "baseRevision": MAIN,
                    "headRepository": "acme/app", "headBranch": "fix/crash", "headRevision": HEAD,
                },
            },
        })
    );
    admits("pr-review", &input);
    // An issue review of a pull request sees the same scope.
    admits("issue-review", &task.issue_review_input(None));
    // #404 does not exist: left out, not an error.
    assert_eq!(fake.calls_to("GET", "/repos/acme/app/issues/404").len(), 1);
}

#[tokio::test]
async fn an_issues_url_naming_a_pull_request_is_resolved_as_one() {
    let fake = fake().await;
    let number = fake.add_pull("acme/app", "Load config lazily", "", "fix/crash", "main");
    let task = client(&fake)
        .resolve_task(&format!("https://github.com/acme/app/issues/{number}"))
        .await
        .unwrap();
    assert_eq!(task.kind, TaskKind::PullRequest);
    admits("pr-review", &task.pr_review_input(None).unwrap());
}

#[tokio::test]
async fn urls_of_other_hosts_and_missing_objects_are_clear_errors() {
    let fake = fake().await;
    let github = client(&fake);
    let foreign = github
        .resolve_task("https://gitlab.com/acme/app/issues/1")
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), "forge.foreign_host");
    let missing = github
        .resolve_task("https://github.com/acme/app/issues/77")
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "issue #77 not found in acme/app (or the token cannot see it)"
    );
    let no_repo = github
        .resolve_task("https://github.com/acme/gone/pull/1")
        .await
        .unwrap_err();
    assert_eq!(
        no_repo.to_string(),
        "repository acme/gone not found, or the token cannot see it"
    );
    assert!(
        fake.calls()
            .iter()
            .all(|c| c.path.starts_with("/repos/acme/"))
    );
}

#[tokio::test]
async fn enterprise_urls_resolve_through_the_enterprise_api() {
    let fake = fake().await;
    let number = fake.add_issue("acme/app", "Slow build", "", &[]);
    let token = Token::from_lookup("GH_ENTERPRISE_TOKEN", |_| Some(TOKEN.into())).unwrap();
    let github = GitHub::new(&fake.enterprise_api_url(), token)
        .unwrap()
        .with_web_host("ghe.corp.example");
    let task = github
        .resolve_task(&format!(
            "https://ghe.corp.example/acme/app/issues/{number}"
        ))
        .await
        .unwrap();
    assert_eq!(task.url, "https://ghe.corp.example/acme/app/issues/1");
    assert_eq!(task.scope.base_revision, MAIN);
}
