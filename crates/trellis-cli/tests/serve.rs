//! `trellis serve` as a team uses it: the real binary on loopback with a bearer token from the
//! environment, runs submitted over HTTP and driven by detached controllers, observed over
//! HTTP (JSON and SSE) and by the local CLI on the same ledger, stopped and resumed, and
//! carrying on when the server is killed and started again. The PostgreSQL leg repeats the
//! main case on a fresh schema of the test server.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::graph::{doubling_graph, integer, null, record, seq, step, succeed, unless_failed};
use support::serve::{Server, served_workspaces};
use support::{STATE_TIMEOUT, Sandbox, uniform_worker_plan};

const TOKEN: &str = "trellis_serve_canary_5e4d3c2b1a09f8e7";

/// `trellis serve` with this file's token, which it must name (never print) in its first line.
fn start(sandbox: &Sandbox, ledger: Option<&str>) -> Server {
    let server = Server::start(sandbox, TOKEN, ledger, &[], &[]);
    assert_eq!(server.listening["tokens"], json!(["env:TEAM_TOKEN"]));
    server
}

/// Kills the server and returns what it printed, which never holds its token.
fn stop(server: Server) -> String {
    let text = server.kill();
    assert!(!text.contains(TOKEN), "the server printed its token");
    text
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(STATE_TIMEOUT)
        .build()
        .expect("client")
}

async fn call(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client()
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    assert!(!text.contains(TOKEN));
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn status(server: &Server, run: &str) -> Value {
    let (code, body) = call(
        server,
        reqwest::Method::GET,
        &format!("/api/v1/runs/{run}"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    body
}

async fn wait_phase(server: &Server, run: &str, phase: &str) -> Value {
    let deadline = std::time::Instant::now() + STATE_TIMEOUT;
    loop {
        let body = status(server, run).await;
        if body["status"]["phase"] == phase {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run} never reached {phase}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The SSE `watch` stream of a run, read to its end: the data of its unnamed (update) events.
async fn watch_to_end(server: &Server, run: &str) -> Vec<Value> {
    let text = client()
        .get(format!("{}/api/v1/runs/{run}/watch", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("watch")
        .text()
        .await
        .expect("stream");
    assert!(text.contains("event: end"), "{text}");
    text.split("\n\n")
        .filter(|block| !block.contains("event:"))
        .filter_map(|block| {
            block
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .and_then(|data| serde_json::from_str(data).ok())
        })
        .collect()
}

fn doubling_submission(key: &str, value: i64) -> Value {
    json!({
        "submissionKey": key,
        "graph": doubling_graph(),
        "input": {"value": value},
        "plan": {"uniform": uniform_worker_plan(&[])},
    })
}

/// State `{value}`: `node` runs (a worker whose behaviour follows its name), then success.
fn one_step(name: &str) -> Value {
    let state = record(&[("value", integer(), true)]);
    support::graph::graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step(name, null(), null(), &[], &[]),
                unless_failed(name, &state, succeed("done", null(), &[])),
            ],
            &[],
        ),
    )
}

/// The processes whose parent is `pid`, with their state letter (`Z`: ended, not reaped).
fn children_of(pid: u32) -> Vec<(u32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|candidate| {
            let stat = std::fs::read_to_string(format!("/proc/{candidate}/stat")).ok()?;
            // The command name may hold spaces: the fields resume after its last ')'.
            let mut rest = stat[stat.rfind(')')? + 2..].split(' ');
            let state = rest.next()?.chars().next()?;
            let parent = rest.next()?.parse::<u32>().ok()?;
            (parent == pid).then_some((candidate, state))
        })
        .collect()
}

async fn submit(server: &Server, body: Value) -> String {
    let (code, answer) = call(server, reqwest::Method::POST, "/api/v1/runs", Some(body)).await;
    assert_eq!(code, 201, "{answer}");
    answer["runId"].as_str().expect("run id").to_owned()
}

async fn submit_watch_and_compare(sandbox: &Sandbox, server: &Server, ledger: Option<&str>) {
    let (code, _) = {
        let response = client()
            .get(format!("{}/api/v1/runs", server.base))
            .send()
            .await
            .expect("request");
        (response.status().as_u16(), ())
    };
    assert_eq!(code, 401, "no token must mean no answer");

    let run = submit(server, doubling_submission("serve-double", 21)).await;
    let updates = watch_to_end(server, &run).await;
    let last = updates.last().expect("updates");
    assert_eq!(last["event"], "terminal");
    assert_eq!(
        last["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}})
    );
    // The run's controller was a child of the server: once it ended, the server reaped it.
    let deadline = std::time::Instant::now() + STATE_TIMEOUT;
    while !children_of(server.pid()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server keeps finished children: {:?}",
            children_of(server.pid())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The same key again: the same run, nothing started.
    let (code, again) = call(
        server,
        reqwest::Method::POST,
        "/api/v1/runs",
        Some(doubling_submission("serve-double", 21)),
    )
    .await;
    assert_eq!((code, again["created"].clone()), (200, json!(false)));
    assert_eq!(again["runId"], run.as_str());

    // The local CLI on the same ledger sees the same run.
    let mut args = vec!["status", run.as_str(), "--json"];
    if let Some(ledger) = ledger {
        args.extend(["--ledger", ledger]);
    }
    let local = sandbox.trellis(&args).success().json();
    assert_eq!(local["status"], status(server, &run).await["status"]);
    let workspace = served_workspaces(sandbox);
    let ran: usize = std::fs::read_dir(&workspace)
        .expect("workspaces")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("invocations.log").exists())
        .count();
    assert_eq!(ran, 1, "one workspace, used once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_submitted_over_http_runs_and_is_observed_by_everyone() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, None);
    submit_watch_and_compare(&sandbox, &server, None).await;
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_over_a_postgresql_ledger() {
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    let sandbox = Sandbox::new();
    let server = start(&sandbox, Some(&ledger));
    submit_watch_and_compare(&sandbox, &server, Some(&ledger)).await;
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_stopped_and_resumed_over_http() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, None);
    let body = json!({
        "submissionKey": "serve-slow",
        "graph": one_step("slow"),
        "input": {"value": 1},
        "plan": {"uniform": uniform_worker_plan(&[])},
    });
    let run = submit(&server, body).await;
    wait_phase(&server, &run, "running").await;
    let (code, stopped) = call(
        &server,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{run}/force-stop"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 200, "{stopped}");
    let finished = wait_phase(&server, &run, "finished").await;
    assert_eq!(
        finished["status"]["terminalResult"]["reason"],
        "force_stopped"
    );
    let (code, resumed) = call(
        &server,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{run}/resume"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 201, "{resumed}");
    let successor = resumed["runId"].as_str().expect("successor").to_owned();
    assert_ne!(successor, run);
    assert_eq!(status(&server, &run).await["successor"], successor.as_str());
    // Resuming twice is a conflict with a stable code.
    let (code, twice) = call(
        &server,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{run}/resume"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (code, twice["code"].clone()),
        (409, json!("run.already_resumed"))
    );
    wait_phase(&server, &successor, "running").await;
    call(
        &server,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{successor}/force-stop"),
        Some(json!({})),
    )
    .await;
    wait_phase(&server, &successor, "finished").await;
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_carry_on_when_the_server_is_killed_and_started_again() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, None);
    let body = json!({
        "submissionKey": "serve-pause",
        "graph": one_step("pause"),
        "input": {"value": 1},
        "plan": {"uniform": uniform_worker_plan(&[("PAUSE_MS", "1500")])},
    });
    let run = submit(&server, body).await;
    wait_phase(&server, &run, "running").await;
    stop(server);

    let server = start(&sandbox, None);
    let updates = watch_to_end(&server, &run).await;
    let last = updates.last().expect("updates");
    assert_eq!(last["status"]["terminalResult"]["status"], "succeeded");
    // The worker ran once: the restart neither lost nor repeated it.
    let invocations: Vec<String> = std::fs::read_dir(served_workspaces(&sandbox))
        .expect("workspaces")
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("invocations.log")).ok())
        .flat_map(|text| text.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert_eq!(invocations, ["pause"]);
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_runs_and_observes_through_a_named_target() {
    let sandbox = Sandbox::new();
    let server = start(&sandbox, None);
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path").to_owned();
    let env = [("TRELLIS_TARGETS", targets.as_str()), ("TEAM_TOKEN", TOKEN)];
    let cli = |args: &[&str]| sandbox.trellis_with_env(args, &env);

    cli(&[
        "target",
        "add",
        "team",
        &server.base,
        "--token-env",
        "TEAM_TOKEN",
    ])
    .success();
    let listed = cli(&["target", "list"]).success();
    assert_eq!(
        listed.json(),
        json!({"name": "team", "url": server.base, "tokenEnv": "TEAM_TOKEN", "ledger": null})
    );
    assert!(
        !std::fs::read_to_string(&targets)
            .expect("targets")
            .contains(TOKEN)
    );

    let mut run_args: Vec<String> = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 4}),
        &uniform_worker_plan(&[]),
    );
    run_args.splice(0..0, ["--target".to_owned(), "team".to_owned()]);
    // The sandbox is no git checkout: the run needs no files, so it is sent without a source.
    run_args.extend([
        "--submission-key".to_owned(),
        "cli-remote".to_owned(),
        "--no-source".to_owned(),
    ]);
    let args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let output = cli(&args).success();
    let lines = output.ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(lines[0]["created"], true);
    let last = lines.last().expect("updates");
    assert_eq!(last["event"], "terminal");
    assert_eq!(
        last["status"]["terminalResult"]["output"],
        json!({"result": 8})
    );

    let status = cli(&["--target", "team", "status", &run]).success().json();
    assert_eq!(status["runId"], run.as_str());
    let list = cli(&["--target", "team", "list"]).success().json();
    assert_eq!(list["runs"][0]["runId"], run.as_str());
    let logs = cli(&["--target", "team", "logs", &run]).success().ndjson();
    assert!(logs.iter().all(|line| line["runId"] == run.as_str()) && !logs.is_empty());
    // The run's workspace commands act on the server's host: no checkpoints outside git, no
    // worktree kept, and a succeeded run is not resumed even from a checkpoint.
    let checkpoints = cli(&["--target", "team", "checkpoints", &run])
        .success()
        .json();
    assert_eq!(checkpoints, json!({"runId": run, "checkpoints": []}));
    let discard = cli(&["--target", "team", "discard-workspace", &run]);
    assert_eq!(discard.code, Some(1));
    assert!(
        discard.stderr.contains("run.no_retained_workspace"),
        "{}",
        discard.stderr
    );
    let resume = cli(&["--target", "team", "resume", &run, "--from-checkpoint", "1"]);
    assert!(
        resume.stderr.contains("run.nothing_to_resume"),
        "{}",
        resume.stderr
    );
    // Prune runs on the server's host too: nothing there is in git, so nothing goes.
    let pruned = cli(&[
        "--target",
        "team",
        "prune",
        "--dry-run",
        "--older-than",
        "0s",
    ])
    .success()
    .json();
    assert_eq!(
        pruned,
        json!({"dryRun": true, "olderThanMs": 0, "pruned": [], "liveRunsSkipped": []})
    );

    // A problem from the server is an error naming its code; a missing token is refused early.
    let missing = cli(&[
        "--target",
        "team",
        "status",
        "01900000-0000-7000-8000-000000000000",
    ]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("run.not_found"),
        "{}",
        missing.stderr
    );
    let no_token = sandbox.trellis_with_env(
        &["--target", "team", "list"],
        &[("TRELLIS_TARGETS", targets.as_str())],
    );
    assert_eq!(no_token.code, Some(1));
    assert!(
        no_token.stderr.contains("TEAM_TOKEN"),
        "{}",
        no_token.stderr
    );

    cli(&["target", "remove", "team"]).success();
    assert_eq!(cli(&["--target", "team", "list"]).code, Some(1));
    stop(server);
}

/// The ids of the runs the server lists.
async fn listed_runs(server: &Server) -> Vec<String> {
    let (code, list) = call(server, reqwest::Method::GET, "/api/v1/runs", None).await;
    assert_eq!(code, 200, "{list}");
    list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|run| run["runId"].as_str().map(str::to_owned))
        .collect()
}

/// A server killed between creating a run and starting its controller (the test hook aborts
/// it right there) leaves a run nobody drives. The client's retry with the same key gets a run
/// that runs: the dead run's successor, whether or not someone looked at the dead run first
/// (looking ends it `runtime_lost`). A second retry finds that same successor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_server_died_before_starting_the_controller_gets_a_run_that_runs() {
    let sandbox = Sandbox::new();
    for (key, looked_at_first) in [("revive-unlooked", false), ("revive-looked-at", true)] {
        let dying = Server::start(
            &sandbox,
            TOKEN,
            None,
            &[],
            &[("TRELLIS_TEST_DIE_BEFORE_CONTROLLER_START", "1")],
        );
        let before = listed_runs(&dying).await;
        let sent = client()
            .post(format!("{}/api/v1/runs", dying.base))
            .bearer_auth(TOKEN)
            .json(&doubling_submission(key, 21))
            .send()
            .await;
        assert!(sent.is_err(), "the server died mid-submission: {sent:?}");
        stop(dying);

        let server = start(&sandbox, None);
        let dead: Vec<String> = listed_runs(&server)
            .await
            .into_iter()
            .filter(|run| !before.contains(run))
            .collect();
        assert_eq!(dead.len(), 1, "the dying server created one run: {dead:?}");
        let dead = &dead[0];
        if looked_at_first {
            let seen = status(&server, dead).await;
            assert_eq!(
                seen["status"]["terminalResult"],
                json!({"status": "failed", "reason": "runtime_lost"}),
                "{seen}"
            );
        }

        let (code, retried) = call(
            &server,
            reqwest::Method::POST,
            "/api/v1/runs",
            Some(doubling_submission(key, 21)),
        )
        .await;
        assert_eq!(
            (code, &retried["created"]),
            (201, &json!(true)),
            "{retried}"
        );
        let revived = retried["runId"].as_str().expect("run id").to_owned();
        assert_ne!(&revived, dead);
        let updates = watch_to_end(&server, &revived).await;
        assert_eq!(
            updates.last().expect("updates")["status"]["terminalResult"],
            json!({"status": "succeeded", "output": {"result": 42}})
        );
        let dead_status = status(&server, dead).await;
        assert_eq!(dead_status["successor"], revived.as_str(), "{dead_status}");
        assert_eq!(
            dead_status["status"]["terminalResult"]["reason"],
            "runtime_lost"
        );

        let (code, again) = call(
            &server,
            reqwest::Method::POST,
            "/api/v1/runs",
            Some(doubling_submission(key, 21)),
        )
        .await;
        assert_eq!(code, 200, "{again}");
        assert_eq!(
            (again["runId"].as_str(), &again["created"]),
            (Some(revived.as_str()), &json!(false))
        );
        stop(server);
    }
}

/// Issue 37: `attach` and `logs --execution` through a named target: the execution's first
/// line arrives while it runs on the server's host, and attach exits once it settled.
#[test]
fn attach_follows_an_execution_through_a_named_target() {
    use std::io::BufRead;
    let sandbox = Sandbox::new();
    let server = start(&sandbox, None);
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path").to_owned();
    let env = [("TRELLIS_TARGETS", targets.as_str()), ("TEAM_TOKEN", TOKEN)];
    let base = server.base.clone();
    sandbox
        .trellis_with_env(
            &["target", "add", "team", &base, "--token-env", "TEAM_TOKEN"],
            &env,
        )
        .success();
    let mut run_args = sandbox.run_args(
        &support::graph::one_step_graph("gate"),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    run_args.splice(0..0, ["--target".to_owned(), "team".to_owned()]);
    run_args.extend(["--no-source".to_owned(), "--detach".to_owned()]);
    let args: Vec<&str> = run_args.iter().map(String::as_str).collect();
    let receipt = sandbox.trellis_with_env(&args, &env).success().json();
    let run = receipt["runId"].as_str().expect("run id").to_owned();

    let mut command = sandbox.command(&["--target", "team", "attach", &run, "gate"]);
    command.envs(env);
    let mut attach = command.spawn().expect("start attach");
    let stdout = attach.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("readable");
    assert_eq!(first, "gate attempt 1 starting");
    for workspace in std::fs::read_dir(served_workspaces(&sandbox))
        .expect("workspaces")
        .filter_map(Result::ok)
    {
        let _ = std::fs::write(workspace.path().join("open-gate"), "");
    }
    let deadline = std::time::Instant::now() + STATE_TIMEOUT;
    let code = loop {
        if let Some(status) = attach.try_wait().expect("wait") {
            break status.code();
        }
        assert!(std::time::Instant::now() < deadline, "attach never ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    let lines = sandbox
        .trellis_with_env(
            &["--target", "team", "logs", &run, "--execution", "gate"],
            &env,
        )
        .success()
        .ndjson();
    assert!(!lines.is_empty() && lines.iter().all(|line| line["node"] == "gate"));
    stop(server);
}
