//! `trellis run --target NAME` with a source: the client sends the repository URL, branch and
//! exact revision of its checkout; a local `trellis serve` checks that revision out into its own
//! workspace, runs the software-change template there with the offline command workers and
//! pushes the run branch to the same (bare, local) repository, leaving the client's checkout
//! alone. Then the refusals: a dirty tree, an unpushed revision, credentials in the URL (a
//! canary never echoed), no checkout at all — on the client — and a repository the server
//! cannot fetch, a revision it does not hold and credentials sent anyway — on the server.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::Sandbox;
use support::serve::{Server, served_workspaces};
use trellis_testkit::git::git;

const TOKEN: &str = "trellis_remote_source_token_7a6b5c4d";
const CANARY: &str = "canary-source-secret-91f3e2";

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline")
}

/// A bare `origin.git` beside the sandbox's workspace, and the workspace a clone of it holding
/// the offline workers on `main`, pushed.
fn client_checkout(sandbox: &Sandbox) -> PathBuf {
    let origin = sandbox.workspace.with_file_name("origin.git");
    let origin_text = origin.to_str().expect("UTF-8 path");
    git(&sandbox.workspace, &["init", "-q", "--bare", origin_text]);
    let work = &sandbox.workspace;
    git(work, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(work.join("offline")).expect("offline dir");
    for file in ["worker.py", "review.py", "plan.json"] {
        std::fs::copy(examples().join(file), work.join("offline").join(file)).expect("copy");
    }
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", "init"]);
    git(work, &["remote", "add", "origin", origin_text]);
    git(work, &["push", "-q", "-u", "origin", "main"]);
    origin
}

/// Runs `trellis ARGS` with the targets file naming `base` as `team`.
fn with_target(sandbox: &Sandbox, base: &str, args: &[&str]) -> support::CliOutput {
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path");
    let env = [("TRELLIS_TARGETS", targets), ("TEAM_TOKEN", TOKEN)];
    if !Path::new(targets).exists() {
        sandbox
            .trellis_with_env(
                &["target", "add", "team", base, "--token-env", "TEAM_TOKEN"],
                &env,
            )
            .success();
    }
    let mut all = vec!["--target", "team"];
    all.extend(args);
    sandbox.trellis_with_env(&all, &env)
}

const GREETING_RUN: [&str; 8] = [
    "run",
    "--template",
    "software-change",
    "--push",
    "--task",
    "Write a friendly greeting to greeting.txt",
    "--runtime-config",
    "offline/plan.json",
];

#[test]
fn a_remote_run_works_on_the_servers_checkout_and_pushes_to_the_same_repository() {
    remote_run_end_to_end(None);
}

#[test]
fn the_same_on_a_postgresql_ledger() {
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    remote_run_end_to_end(Some(&ledger));
}

fn remote_run_end_to_end(ledger: Option<&str>) {
    let sandbox = Sandbox::new();
    let origin = client_checkout(&sandbox);
    let work = sandbox.workspace.clone();
    let head_before = git(&work, &["rev-parse", "HEAD"]);
    let server = Server::start(&sandbox, TOKEN, ledger, &[], &[]);

    let out = with_target(&sandbox, &server.base, &GREETING_RUN).success();
    let lines = out.ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    let last = lines.last().expect("updates");
    assert_eq!(last["status"]["terminalResult"]["status"], "succeeded");
    let output = &last["status"]["terminalResult"]["output"];
    let branch = output["headBranch"]
        .as_str()
        .expect("head branch")
        .to_owned();
    assert!(branch.starts_with("trellis/"), "{branch} for {run}");

    // The run branch reached the bare repository, built on the client's revision.
    let pushed = git(&origin, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(Value::String(pushed.clone()), output["headRevision"]);
    assert_eq!(
        git(&origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!"
    );
    assert_eq!(
        git(&origin, &["rev-parse", &format!("{pushed}^")]),
        head_before
    );
    assert_eq!(git(&origin, &["rev-parse", "main"]), head_before);

    // The client's checkout is untouched: same HEAD, clean, no new branch, no greeting.
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(&work, &["status", "--porcelain"]), "");
    assert_eq!(git(&work, &["branch", "--format=%(refname:short)"]), "main");
    assert!(!work.join("greeting.txt").exists());

    // The server worked in a checkout of its own, on the source branch, `origin` the source.
    let checkouts: Vec<PathBuf> = std::fs::read_dir(served_workspaces(&sandbox))
        .expect("served workspaces")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join(".git/trellis-source.json").exists())
        .collect();
    assert_eq!(checkouts.len(), 1, "{checkouts:?}");
    let checkout = &checkouts[0];
    assert_eq!(
        git(checkout, &["remote", "get-url", "origin"]),
        origin.to_str().expect("UTF-8")
    );
    assert_eq!(git(checkout, &["symbolic-ref", "--short", "HEAD"]), "main");
    // Delivery committed on the run branch only: the checkout's branch stays at the source,
    // the pushed commit (kept under refs/trellis/deliveries/) builds on it.
    assert_eq!(git(checkout, &["rev-parse", "HEAD"]), head_before);
    git(
        checkout,
        &[
            "merge-base",
            "--is-ancestor",
            head_before.as_str(),
            pushed.as_str(),
        ],
    );

    // The same submission again (same key) finds the same run and leaves the checkout be.
    let mut again: Vec<&str> = GREETING_RUN.to_vec();
    again.extend(["--submission-key", "same-source", "--detach"]);
    let first = with_target(&sandbox, &server.base, &again)
        .success()
        .ndjson();
    assert_eq!(first[0]["created"], true);
    let second = with_target(&sandbox, &server.base, &again)
        .success()
        .ndjson();
    assert_eq!(second[0]["runId"], first[0]["runId"]);
    assert_eq!(second[0]["created"], false);
    server.kill();
}

#[test]
fn the_client_refuses_what_the_server_could_not_run_faithfully() {
    let sandbox = Sandbox::new();
    client_checkout(&sandbox);
    let work = sandbox.workspace.clone();
    // Nothing listens here: every refusal below happens before anything is sent.
    let nowhere = "http://127.0.0.1:9";
    let refused = |args: &[&str], expected: &str| {
        let out = with_target(&sandbox, nowhere, args);
        assert_eq!(out.code, Some(1), "{out:#?}");
        assert!(out.stderr.contains(expected), "{expected:?} in {out:#?}");
        assert!(!out.stderr.contains("cannot reach http"), "{out:#?}");
        out
    };

    // A tracked change, then an untracked file (accepted with --allow-untracked: the run goes
    // on to the network, where nothing answers).
    std::fs::write(work.join("offline/plan.json"), "{}\n").expect("edit");
    refused(&GREETING_RUN, "uncommitted change");
    git(&work, &["checkout", "--", "offline/plan.json"]);
    std::fs::write(work.join("notes.txt"), "draft\n").expect("untracked");
    refused(&GREETING_RUN, "--allow-untracked");
    let mut untracked_ok: Vec<&str> = GREETING_RUN.to_vec();
    untracked_ok.push("--allow-untracked");
    let out = with_target(&sandbox, nowhere, &untracked_ok);
    assert!(
        out.stderr.contains("cannot reach http://127.0.0.1:9"),
        "{out:#?}"
    );
    std::fs::remove_file(work.join("notes.txt")).expect("remove");

    // A commit the remote does not have.
    std::fs::write(work.join("local.txt"), "local\n").expect("write");
    git(&work, &["add", "local.txt"]);
    git(&work, &["commit", "-q", "-m", "not pushed"]);
    refused(&GREETING_RUN, "push it first");
    git(&work, &["reset", "-q", "--hard", "HEAD^"]);

    // Credentials in the URL, given or configured: refused, never echoed.
    let secret_url = format!("https://user:{CANARY}@127.0.0.1:9/repo.git");
    let mut given: Vec<&str> = GREETING_RUN.to_vec();
    given.extend(["--source-remote", &secret_url]);
    let out = refused(&given, "carries credentials");
    assert!(!format!("{}{}", out.stdout, out.stderr).contains(CANARY));
    git(&work, &["remote", "set-url", "origin", &secret_url]);
    let out = refused(&GREETING_RUN, "carries credentials");
    assert!(!format!("{}{}", out.stdout, out.stderr).contains(CANARY));

    // Not a checkout: refused unless the run asks for no source.
    std::fs::remove_dir_all(work.join(".git")).expect("no longer a checkout");
    refused(&GREETING_RUN, "not a git checkout");
    let mut no_source: Vec<&str> = GREETING_RUN.to_vec();
    no_source.push("--no-source");
    let out = with_target(&sandbox, nowhere, &no_source);
    assert!(
        out.stderr.contains("cannot reach http://127.0.0.1:9"),
        "{out:#?}"
    );

    // The source flags mean nothing to a local run.
    let local = sandbox.trellis(&["run", "--no-source", "graph.json"]);
    assert_eq!(local.code, Some(1), "{local:#?}");
    assert!(local.stderr.contains("--target"), "{local:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_sources_it_cannot_check_out() {
    let sandbox = Sandbox::new();
    let origin = client_checkout(&sandbox);
    let revision = git(&sandbox.workspace, &["rev-parse", "HEAD"]);
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let client = reqwest::Client::new();
    let submit = |source: Value| {
        let client = client.clone();
        let url = format!("{}/api/v1/runs", server.base);
        async move {
            let response = client
                .post(url)
                .bearer_auth(TOKEN)
                .json(&json!({
                    "graph": support::graph::doubling_graph(),
                    "input": {"value": 1},
                    "plan": {"uniform": support::uniform_worker_plan(&[])},
                    "source": source,
                }))
                .send()
                .await
                .expect("request");
            let status = response.status().as_u16();
            let text = response.text().await.expect("body");
            (status, text)
        }
    };
    let missing_repository = sandbox.workspace.with_file_name("missing.git");
    let (status, text) = submit(json!({
        "repository": missing_repository.to_str().expect("UTF-8"),
        "branch": "main",
        "revision": revision,
    }))
    .await;
    assert_eq!(status, 422, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("problem")["code"],
        "source.unreachable"
    );

    let (status, text) = submit(json!({
        "repository": origin.to_str().expect("UTF-8"),
        "branch": "main",
        "revision": "0123456789abcdef0123456789abcdef01234567",
    }))
    .await;
    assert_eq!(status, 422, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("problem")["code"],
        "source.revision_missing"
    );

    let (status, text) = submit(json!({
        "repository": format!("https://user:{CANARY}@127.0.0.1:9/repo.git"),
        "branch": "main",
        "revision": revision,
    }))
    .await;
    assert_eq!(status, 400, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("problem")["code"],
        "source.credentials"
    );
    assert!(!text.contains(CANARY), "{text}");

    // Nothing was created, and the OpenAPI document shows the field.
    let listed: Value = client
        .get(format!("{}/api/v1/runs", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("JSON");
    assert_eq!(listed["runs"], json!([]));
    let document: Value = client
        .get(format!("{}/openapi.json", server.base))
        .send()
        .await
        .expect("openapi")
        .json()
        .await
        .expect("JSON");
    let schemas = &document["components"]["schemas"];
    assert!(
        schemas["SubmitRequest"]["properties"]["source"].is_object(),
        "{schemas}"
    );
    assert_eq!(
        schemas["SourceChoice"]["required"],
        json!(["repository", "branch", "revision"])
    );
    let printed = server.kill();
    assert!(!printed.contains(CANARY), "{printed}");
}
