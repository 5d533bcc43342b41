//! The pull-request delivery verifier against the fake GitHub and a local bare repository:
//! one pull request per run branch however often delivery runs, review feedback reported until
//! a new head is delivered, `--no-pr-feedback` leaving reviews to people, failing checks and
//! conflicts as their own verdicts, and a token that never reaches an outcome or a log line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::binding::PullRequestFeedback;
use trellis_agents::{
    Binding, DeliveryBinding, ExecutionRequest, Harness, HarnessEvent, NodeContract, SecretEnv,
};
use trellis_graph::{GraphNode, GraphSpec, NodeName, WorkerOutcome, WorkerRef};
use trellis_runtime::testing::{ForgeSettings, GitDelivery, SourceRevision, read_source};
use trellis_testkit::git::git;
use trellis_testkit::github::{Action, FakeGitHub};

const TOKEN: &str = "ghp_canary_pr_delivery_0b9e";
const REPO: &str = "acme/widgets";
const REMOTE_URL: &str = "https://github.com/acme/widgets.git";
const RUN: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

fn contract() -> NodeContract {
    let text = trellis_runtime::template("software-change")
        .unwrap()
        .document_for(Some(trellis_runtime::DeliveryMode::PullRequest))
        .unwrap();
    let graph = GraphSpec::from_json_str(text).unwrap();
    let mut contract = None;
    graph.root.walk(&mut |node: &GraphNode| {
        if node.name().as_str() == "deliver" {
            contract = NodeContract::of(node);
        }
    });
    contract.unwrap()
}

struct Setup {
    _dir: tempfile::TempDir,
    work: PathBuf,
    /// Where the run started (fixed at submission in a real run).
    source: SourceRevision,
    github: FakeGitHub,
}

impl Setup {
    async fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("origin.git");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        git(
            dir.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("README.md"), "hello\n").unwrap();
        git(&work, &["add", "."]);
        git(&work, &["commit", "-q", "-m", "init"]);
        git(&work, &["remote", "add", "origin", REMOTE_URL]);
        let rewrite = format!("url.{}.insteadOf", bare.display());
        git(&work, &["config", &rewrite, REMOTE_URL]);
        git(&work, &["push", "-q", "origin", "main"]);
        let github = FakeGitHub::start(TOKEN).await.unwrap();
        github
            .apply(Action::AddRepository {
                repository: REPO.into(),
                default_branch: "main".into(),
                private: false,
                git_dir: Some(bare),
            })
            .unwrap();
        Setup {
            _dir: dir,
            source: read_source(&work).unwrap(),
            work,
            github,
        }
    }

    fn delivery(&self) -> GitDelivery {
        GitDelivery::new(Some(self.source.clone()))
            .with_workers(BTreeMap::from([(
                NodeName::new("deliver").unwrap(),
                WorkerRef::new("builtin.git-delivery.pr@2").unwrap(),
            )]))
            .with_lineage_key(RUN)
            .with_forge(ForgeSettings {
                api_url: Some(self.github.api_url()),
                web_host: Some("github.com".into()),
                poll: Duration::from_millis(20),
                wait_limit: Duration::from_secs(20),
                ..ForgeSettings::default()
            })
    }

    fn request(&self, feedback: PullRequestFeedback) -> ExecutionRequest {
        ExecutionRequest {
            run_id: "0190a1b2-ffff-7e5f-8a9b-0c1d2e3f4a5b".into(),
            node: NodeName::new("deliver").unwrap(),
            execution: 4,
            node_instance: 4,
            attempt: 1,
            input: json!({"title": "Add a greeting", "description": "accepted"}),
            instructions: None,
            contract: contract(),
            binding: Binding::GitDelivery(DeliveryBinding {
                connections: BTreeMap::from([("github".into(), vec!["GH_TOKEN".into()])]),
                pull_request_feedback: feedback,
                remote: None,
            }),
            workspace: self.work.clone(),
            scratch: self.work.join(".scratch"),
            deadline: None,
            idle_timeout: None,
            environment: SecretEnv::new(BTreeMap::from([("GH_TOKEN".into(), TOKEN.into())])),
            base_env: vec![("PATH".into(), std::env::var("PATH").unwrap())],
        }
    }

    /// Runs delivery once: its `delivery` signal, output and diagnostic message.
    async fn deliver(&self, feedback: PullRequestFeedback) -> (String, Value, String) {
        let (tx, mut rx) = mpsc::channel(256);
        let result = self
            .delivery()
            .execute(self.request(feedback), tx, CancellationToken::new())
            .await;
        let mut logs = Vec::new();
        while let Ok(event) = rx.try_recv() {
            if let HarnessEvent::Log { message, .. } = event {
                assert!(!message.contains(TOKEN), "{message}");
                logs.push(message);
            }
        }
        let WorkerOutcome::Verifier {
            output,
            signals,
            diagnostic,
            ..
        } = result.outcome
        else {
            panic!("unexpected outcome {:?}: {logs:#?}", result.outcome);
        };
        let text = diagnostic["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!text.contains(TOKEN));
        (signals["delivery"].as_str().to_owned(), output, text)
    }

    fn edit(&self, text: &str) {
        std::fs::write(self.work.join("greeting.txt"), text).unwrap();
    }
}

#[tokio::test]
async fn review_feedback_is_reported_until_a_new_head_is_delivered() {
    let setup = Setup::new().await;
    setup.edit("hi\n");
    let (verdict, output, message) = setup.deliver(PullRequestFeedback::Consider).await;
    assert_eq!(verdict, "ready", "{message}");
    assert_eq!(output["pullRequestId"], "1");
    assert_eq!(output["repository"], "https://github.com/acme/widgets");
    assert!(
        message.contains("https://github.com/acme/widgets/pull/1"),
        "{message}"
    );

    setup
        .github
        .add_review_comment(REPO, 1, "greeting.txt", 1, "Say hello, not hi.");
    let (verdict, _, message) = setup.deliver(PullRequestFeedback::Consider).await;
    assert_eq!(verdict, "repair_required");
    assert!(message.contains("Say hello, not hi."), "{message}");
    // Retried at the same head (nothing new was done): reported again, not lost.
    let (verdict, _, _) = setup.deliver(PullRequestFeedback::Consider).await;
    assert_eq!(verdict, "repair_required");

    setup.edit("hello\n");
    let (verdict, output, message) = setup.deliver(PullRequestFeedback::Consider).await;
    assert_eq!(verdict, "ready", "{message}");
    assert_eq!(output["pullRequestId"], "1");
    assert_eq!(setup.github.pull_numbers(REPO), vec![1]);
    let opened = setup
        .github
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/pulls"))
        .count();
    assert_eq!(opened, 1);
}

#[tokio::test]
async fn without_pr_feedback_reviews_are_left_but_failing_checks_still_count() {
    let setup = Setup::new().await;
    setup.edit("hi\n");
    let (verdict, _, _) = setup.deliver(PullRequestFeedback::Ignore).await;
    assert_eq!(verdict, "ready");
    setup
        .github
        .add_review_comment(REPO, 1, "greeting.txt", 1, "Say hello, not hi.");
    let (verdict, _, _) = setup.deliver(PullRequestFeedback::Ignore).await;
    assert_eq!(verdict, "ready");
    setup.github.set_check_run(REPO, 1, "ci", Some("failure"));
    let (verdict, _, message) = setup.deliver(PullRequestFeedback::Ignore).await;
    assert_eq!(verdict, "ci_failed");
    assert!(message.contains("check ci ended failure"), "{message}");
}

#[tokio::test]
async fn delivery_waits_for_queued_checks_and_reports_conflicts() {
    let setup = Setup::new().await;
    setup.github.require_checks(REPO, &["ci"]);
    setup.edit("hi\n");
    let github = &setup.github;
    let greener = async {
        // Let delivery look a few times while the check is queued, then turn it green.
        loop {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let looks = github
                .calls()
                .iter()
                .filter(|c| c.path.ends_with("/check-runs"))
                .count();
            if looks >= 3 {
                github.set_check_run(REPO, 1, "ci", Some("success"));
                return looks;
            }
        }
    };
    let ((verdict, _, _), looks) =
        tokio::join!(setup.deliver(PullRequestFeedback::Consider), greener);
    assert_eq!(verdict, "ready");
    assert!(looks >= 3);
    setup.github.set_mergeable(REPO, 1, Some(false));
    let (verdict, _, message) = setup.deliver(PullRequestFeedback::Consider).await;
    assert_eq!(verdict, "conflict");
    assert!(message.contains("conflicts with main"), "{message}");
}
