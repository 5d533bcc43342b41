//! Push delivery against a local bare repository: the run branch appears there with the change,
//! and an unchanged workspace settles `malformed`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    Binding, DeliveryBinding, ExecutionRequest, Harness, NodeContract, SecretEnv,
};
use trellis_graph::{GraphNode, GraphSpec, NodeName, WorkerErrorCode, WorkerOutcome};
use trellis_runtime::testing::{GitDelivery, read_source, run_branch};
use trellis_testkit::git::git;

fn deliver_contract() -> NodeContract {
    let text = trellis_runtime::template("software-change")
        .unwrap()
        .document(true)
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

fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
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
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    git(&work, &["push", "-q", "origin", "main"]);
    (dir, bare, work)
}

fn request(work: &Path) -> ExecutionRequest {
    ExecutionRequest {
        run_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
        node: NodeName::new("deliver").unwrap(),
        execution: 4,
        node_instance: 4,
        attempt: 1,
        input: json!({"title": "Add a greeting", "description": "accepted: greeting added"}),
        instructions: None,
        contract: deliver_contract(),
        binding: Binding::GitDelivery(DeliveryBinding {
            connections: BTreeMap::new(),
            pull_request_feedback: Default::default(),
            remote: None,
        }),
        workspace: work.to_path_buf(),
        scratch: work.join(".scratch"),
        deadline: None,
        idle_timeout: None,
        environment: SecretEnv::default(),
        base_env: vec![("PATH".into(), std::env::var("PATH").unwrap())],
    }
}

#[tokio::test]
async fn push_delivery_creates_the_run_branch_with_the_change() {
    let (_dir, bare, work) = setup();
    let source = read_source(&work).unwrap();
    std::fs::write(work.join("greeting.txt"), "hi\n").unwrap();
    let (tx, _rx) = mpsc::channel(64);
    let result = GitDelivery::new(Some(source.clone()))
        .execute(request(&work), tx, CancellationToken::new())
        .await;
    let WorkerOutcome::Verifier {
        output, signals, ..
    } = &result.outcome
    else {
        panic!("unexpected outcome {:?}", result.outcome);
    };
    assert_eq!(signals["delivery"].as_str(), "pushed");
    let branch = run_branch("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    assert_eq!(output["headBranch"], json!(branch));
    assert_eq!(output["targetBranch"], json!("main"));
    let pushed = git(&bare, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(json!(pushed), output["headRevision"]);
    let file = git(&bare, &["show", &format!("{branch}:greeting.txt")]);
    assert_eq!(file, "hi");
    let subject = git(&bare, &["log", "-1", "--format=%s%n%an", &branch]);
    assert_eq!(subject, "Add a greeting\nTrellis");
}

#[tokio::test]
async fn nothing_to_deliver_is_malformed() {
    let (_dir, _bare, work) = setup();
    let source = read_source(&work).unwrap();
    let (tx, _rx) = mpsc::channel(64);
    let result = GitDelivery::new(Some(source))
        .execute(request(&work), tx, CancellationToken::new())
        .await;
    assert_eq!(
        result.outcome.error_code(),
        Some(WorkerErrorCode::Malformed)
    );
}
