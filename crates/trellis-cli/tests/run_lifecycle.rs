//! A run's life through the real binary: foreground success, detached observation and
//! force-stop, a killed controller observed as `runtime_lost` (its workers killed, its record
//! still replayable, its follower ending), resume of that run, and observers that lose their
//! reader.

mod support;

use serde_json::{Value, json};
use support::graph::*;
use support::{
    STATE_TIMEOUT, Sandbox, TRELLIS, controller_pid, process_alive, process_exited, send_signal,
    uniform_worker_plan, wait_until,
};

#[test]
fn a_foreground_run_succeeds_and_status_shows_its_output() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 21}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sandbox.trellis(&args).success();

    let lines = run.ndjson();
    let run_id = lines[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(
        lines[0],
        json!({"runId": run_id}),
        "the first line is the receipt"
    );
    let last = lines.last().expect("events");
    assert_eq!(last["event"], "terminal");
    assert_eq!(
        last["status"],
        json!({"phase": "finished", "terminalResult": {"status": "succeeded", "output": {"result": 42}}})
    );
    assert!(
        lines[1..].iter().all(|l| l["runId"] == run_id.as_str()),
        "every event names the run"
    );

    let status = sandbox.status(&run_id);
    assert_eq!(status["runId"], run_id.as_str());
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}})
    );
    let human = sandbox.trellis(&["status", &run_id]).success();
    assert!(human.stdout.contains("succeeded"), "{}", human.stdout);
    assert!(
        human.stdout.contains(r#"{"result":42}"#),
        "{}",
        human.stdout
    );
    assert_eq!(sandbox.invocations(), ["double"]);
}

/// State `{value}`: `blockWork` never finishes on its own.
fn blocking_graph() -> Value {
    let state = record(&[("value", integer(), true)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step("blockWork", null(), null(), &[], &[]),
                unless_failed("blockWork", &state, succeed("done", null(), &[])),
            ],
            &[],
        ),
    )
}

#[test]
fn force_stop_ends_a_detached_run_and_kills_the_workers_process_group() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let run_id = sandbox.start_detached(&args);
    let (worker, grandchild) = sandbox.worker_pids("blockWork");
    assert!(process_alive(worker) && process_alive(grandchild));

    let status = sandbox.status(&run_id);
    assert_eq!(status["status"]["phase"], "running", "{status}");
    let active = status["status"]["activeExecutions"]
        .as_array()
        .expect("activeExecutions");
    assert_eq!(active.len(), 1, "{status}");
    assert_eq!(active[0]["node"], "blockWork");
    assert!(
        active[0]["execution"]
            .as_str()
            .is_some_and(|e| !e.is_empty())
    );
    let controller = controller_pid(&run_id).expect("the controller runs");
    let early = sandbox.trellis(&["resume", &run_id]);
    assert_eq!(
        early.code,
        Some(1),
        "a running run cannot be resumed: {early:?}"
    );
    assert!(early.stderr.contains("still active"), "{early:?}");

    let stopped = sandbox.trellis(&["force-stop", &run_id]).success().json();
    assert_eq!(
        stopped["status"],
        json!({"phase": "finished", "terminalResult": {"status": "failed", "reason": "force_stopped"}})
    );
    assert_eq!(
        sandbox.status(&run_id)["status"]["terminalResult"]["reason"],
        "force_stopped"
    );
    wait_until(
        "the worker and its grandchild to die",
        STATE_TIMEOUT,
        || (!process_alive(worker) && !process_alive(grandchild)).then_some(()),
    );
    wait_until("the controller to exit", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });
    assert_eq!(sandbox.invocations(), ["blockWork"]);
}

/// State `{value, result?, final?}`: `doubleFirst` doubles `value` into `result`, then
/// `gateSecond` (which waits for the file `open-gateSecond`) adds one into `final`.
fn two_step_graph() -> Value {
    two_step_graph_with("gateSecond")
}

/// `doubleFirst` then `second` (each routed to a `fail` node on an error), then `done`.
fn two_step_graph_with(second_step: &str) -> Value {
    let state = record(&[
        ("value", integer(), true),
        ("result", integer(), false),
        ("final", integer(), false),
    ]);
    let value_in = record(&[("value", integer(), true)]);
    let result_out = record(&[("result", integer(), true)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step(
                    "doubleFirst",
                    value_in.clone(),
                    result_out.clone(),
                    &[("value", state_path(&["value"]))],
                    &[("result", "result")],
                ),
                unless_failed(
                    "doubleFirst",
                    &state,
                    seq(
                        "second",
                        &state,
                        vec![
                            step(
                                second_step,
                                value_in,
                                result_out,
                                &[("value", state_path(&["result"]))],
                                &[("final", "result")],
                            ),
                            unless_failed(
                                second_step,
                                &state,
                                succeed(
                                    "done",
                                    record(&[("final", integer(), true)]),
                                    &[("final", state_path(&["final"]))],
                                ),
                            ),
                        ],
                        &[],
                    ),
                ),
            ],
            &[],
        ),
    )
}

/// Starts the two-step graph detached, waits until `doubleFirst` settled and `gateSecond` is
/// running, and SIGKILLs the controller. Returns the run id.
fn run_killed_mid_way(sandbox: &Sandbox) -> String {
    let args = sandbox.run_args(
        &two_step_graph(),
        &json!({"value": 20}),
        &uniform_worker_plan(&[]),
    );
    let run_id = sandbox.start_detached(&args);
    wait_until("gateSecond to start", STATE_TIMEOUT, || {
        (sandbox.invocation_count("gateSecond") == 1).then_some(())
    });
    // The worker notes its invocation just before it writes its first log line, and the
    // controller records that line as it reads it: kill only once the line is in the ledger,
    // so the tests ask for what a crash keeps rather than for how fast the controller reads.
    let (mut follower, stdout) = sandbox.spawn_reading(&["logs", &run_id]);
    let recorded = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .any(|line| line.contains("gateSecond attempt 1 starting"));
    assert!(recorded, "gateSecond's first log line is recorded");
    let _ = follower.child.kill();
    let _ = follower.child.wait();
    let controller = controller_pid(&run_id).expect("the controller runs");
    send_signal(controller, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });
    run_id
}

fn watch_lines(sandbox: &Sandbox, run_id: &str) -> Vec<Value> {
    sandbox.trellis(&["watch", run_id]).success().ndjson()
}

#[test]
fn a_killed_controller_is_reported_runtime_lost_and_its_record_still_replays() {
    let sandbox = Sandbox::new();
    let run_id = run_killed_mid_way(&sandbox);

    let status = sandbox.status(&run_id);
    assert_eq!(
        status["status"],
        json!({"phase": "finished", "terminalResult": {"status": "failed", "reason": "runtime_lost"}})
    );

    let events = watch_lines(&sandbox, &run_id);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    let started_nodes: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "node_started")
        .map(|e| &e["execution"]["node"])
        .collect();
    assert_eq!(kinds.first(), Some(&"controller_attached"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"terminal"), "{kinds:?}");
    assert_eq!(
        started_nodes.len(),
        2,
        "both nodes were dispatched: {kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "node_completed").count(),
        2,
        "doubleFirst settled by its worker, gateSecond by the loss: {kinds:?}"
    );
    let cursors: Vec<&str> = events.iter().filter_map(|e| e["cursor"].as_str()).collect();
    let mut unique = cursors.clone();
    unique.dedup();
    assert_eq!(cursors.len(), unique.len(), "no event is replayed twice");

    let logs = sandbox.trellis(&["logs", &run_id]).success().ndjson();
    let messages: Vec<&str> = logs
        .iter()
        .filter_map(|l| l["record"]["message"].as_str())
        .collect();
    for expected in [
        "doubleFirst attempt 1 starting",
        "gateSecond attempt 1 starting",
    ] {
        assert!(messages.contains(&expected), "{expected:?} in {messages:?}");
    }
    assert!(
        messages.iter().any(|m| m.contains("controller is gone")),
        "the loss is logged: {messages:?}"
    );
    // Replaying from a cursor returns exactly the later lines.
    let middle = events[1]["cursor"].as_str().expect("cursor");
    let tail = sandbox
        .trellis(&["watch", &run_id, "--after", middle])
        .success()
        .ndjson();
    assert_eq!(tail, events[2..].to_vec());
}

#[test]
fn resume_reruns_only_the_node_that_had_not_settled() {
    let sandbox = Sandbox::new();
    let run_id = run_killed_mid_way(&sandbox);
    assert_eq!(
        sandbox.status(&run_id)["status"]["terminalResult"]["reason"],
        "runtime_lost"
    );
    std::fs::write(sandbox.workspace.join("open-gateSecond"), b"").expect("open the gate");

    let resumed = sandbox
        .trellis(&["resume", &run_id, "--json"])
        .success()
        .ndjson();
    let successor = resumed[0]["runId"].as_str().expect("receipt").to_owned();
    assert_ne!(successor, run_id, "a resume is a new run");
    assert_eq!(
        resumed.last().expect("events")["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"final": 41}})
    );
    assert_eq!(
        sandbox.invocation_count("doubleFirst"),
        1,
        "settled work is reused"
    );
    assert_eq!(
        sandbox.invocation_count("gateSecond"),
        2,
        "unsettled work runs again"
    );

    assert_eq!(sandbox.status(&successor)["predecessor"], run_id.as_str());
    assert_eq!(sandbox.status(&run_id)["successor"], successor.as_str());
    let again = sandbox.trellis(&["resume", &run_id]);
    assert_eq!(again.code, Some(1), "a run is resumed once: {again:?}");
    assert!(again.stderr.contains("already resumed"), "{again:?}");
}

/// A run that ended failed because a step failed (a forge answering 502, say) can be fixed by
/// a resume: the failure that routed it to its `fail` node runs again, what succeeded is
/// reused, and a resume of a run that failed again fails again without a loop.
#[test]
fn resume_runs_again_the_failure_that_ended_the_run() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &two_step_graph_with("flakySecond"),
        &json!({"value": 20}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = sandbox.trellis(&args).ndjson();
    let first = failed[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(
        failed.last().expect("events")["status"]["terminalResult"],
        json!({"status": "failed", "reason": "worker_failed"})
    );

    // Resumed while the cause persists: it runs again, and fails again.
    let again = sandbox.trellis(&["resume", &first, "--json"]).ndjson();
    let second = again[0]["runId"].as_str().expect("receipt").to_owned();
    assert_eq!(
        again.last().expect("events")["status"]["terminalResult"]["status"],
        "failed"
    );
    assert_eq!(
        sandbox.invocation_count("flakySecond"),
        2,
        "the failure ran again"
    );

    std::fs::write(sandbox.workspace.join("fixed-flakySecond"), b"").expect("fix it");
    let resumed = sandbox
        .trellis(&["resume", &second, "--json"])
        .success()
        .ndjson();
    assert_eq!(
        resumed.last().expect("events")["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"final": 41}})
    );
    assert_eq!(
        sandbox.invocation_count("doubleFirst"),
        1,
        "what succeeded is reused across the lineage"
    );
    assert_eq!(sandbox.invocation_count("flakySecond"), 3);
}

#[test]
fn detecting_a_killed_controller_kills_its_workers_whole_process_group() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let run_id = sandbox.start_detached(&args);
    let (worker, grandchild) = sandbox.worker_pids("blockWork");
    let controller = controller_pid(&run_id).expect("the controller runs");
    send_signal(controller, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });

    assert_eq!(
        sandbox.status(&run_id)["status"]["terminalResult"]["reason"],
        "runtime_lost"
    );
    // The worker dies with its parent; the grandchild only when the loss is detected.
    wait_until(
        "the worker and its grandchild to die",
        STATE_TIMEOUT,
        || (!process_alive(worker) && !process_alive(grandchild)).then_some(()),
    );
}

#[test]
fn a_foreground_run_whose_controller_is_killed_ends_runtime_lost_and_exits_1() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let follower = sandbox.spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    sandbox.worker_pids("blockWork");
    let run_id = wait_until("the run to be listed", STATE_TIMEOUT, || {
        let listed = sandbox.trellis(&["list", "--json"]).success().json();
        listed["runs"][0]["runId"].as_str().map(str::to_owned)
    });
    let controller = controller_pid(&run_id).expect("the controller runs");
    send_signal(controller, support::Signal::SIGKILL);

    let output = support::finish(follower, support::COMMAND_TIMEOUT, &args);
    assert_eq!(output.code, Some(1), "{output:#?}");
    let lines = output.ndjson();
    assert_eq!(lines[0], json!({"runId": run_id}));
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"],
        json!({"status": "failed", "reason": "runtime_lost"})
    );
}

#[test]
fn an_observer_whose_reader_goes_away_exits_quietly() {
    use std::io::BufRead;

    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let run_id = sandbox.start_detached(&args);
    let (logs, stdout) = sandbox.spawn_reading(&["logs", &run_id]);
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .expect("a log line");
    assert!(first.contains("blockWork attempt 1 starting"), "{first}");
    // The reader is gone; stopping the run makes `logs` write (and fail to) again.
    sandbox.trellis(&["force-stop", &run_id]).success();

    let output = support::finish(logs, support::COMMAND_TIMEOUT, &["logs"]);
    assert_eq!(output.code, Some(0), "{output:#?}");
    assert!(output.stderr.is_empty(), "{output:#?}");
}

#[test]
fn force_stop_of_a_run_whose_controller_died_kills_the_orphaned_workers() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let run_id = sandbox.start_detached(&args);
    let (worker, grandchild) = sandbox.worker_pids("blockWork");
    let controller = controller_pid(&run_id).expect("the controller runs");
    send_signal(controller, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });

    // Nothing observed the loss yet: force-stop finds the lease free and ends the run itself.
    let stopped = sandbox.trellis(&["force-stop", &run_id]).success().json();
    assert_eq!(
        stopped["status"]["terminalResult"],
        json!({"status": "failed", "reason": "force_stopped"})
    );
    wait_until(
        "the worker and its grandchild to die",
        STATE_TIMEOUT,
        || (!process_alive(worker) && !process_alive(grandchild)).then_some(()),
    );
}

#[test]
fn interrupting_a_foreground_run_only_detaches_from_it() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &blocking_graph(),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let follower =
        sandbox.spawn_interruptible(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (worker, grandchild) = sandbox.worker_pids("blockWork");
    send_signal(follower.child.id(), support::Signal::SIGINT);
    let output = support::finish(follower, support::COMMAND_TIMEOUT, &args);
    let run_id = output.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();

    let status = sandbox.status(&run_id);
    assert_eq!(status["status"]["phase"], "running", "{status}");
    assert!(process_alive(worker) && process_alive(grandchild));
    sandbox.trellis(&["force-stop", &run_id]).success();
}

#[test]
fn watch_on_a_terminal_draws_the_tree_and_the_summary_instead_of_ndjson() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 21}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sandbox.trellis(&args).success();
    let run_id = run.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();

    // `script` (util-linux) runs `trellis watch` with a pseudo-terminal as its stdout.
    let watch = format!("{TRELLIS} watch {run_id}");
    let output = std::process::Command::new("script")
        .args(["-qec", &watch, "/dev/null"])
        .current_dir(&sandbox.workspace)
        .env("TRELLIS_HOME", &sandbox.home)
        .env_remove("XDG_STATE_HOME")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("`script` from util-linux runs");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen}");
    assert!(
        screen.contains("double"),
        "the tree names the step: {screen}"
    );
    assert!(
        screen.contains(&format!("run {run_id} succeeded")),
        "the summary: {screen}"
    );
    assert!(
        !screen.contains(r#""event":"#),
        "no NDJSON on a terminal: {screen}"
    );

    // Piped, the same command streams NDJSON.
    let piped = sandbox.trellis(&["watch", &run_id]).success();
    assert_eq!(piped.ndjson().last().expect("events")["event"], "terminal");
}
