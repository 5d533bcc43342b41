//! A team without a serving host, on a PostgreSQL ledger: when a run's controller dies, no host
//! takes the run over, so whoever observes it (`status`, `list`) ends it `runtime_lost` once its
//! lease has been expired for a while (`TRELLIS_ABANDONED_AFTER_MS`, 30 s by default; short
//! here) — it never reads `running` for ever. Skipped without a PostgreSQL test server.

mod support;

use serde_json::{Value, json};
use support::graph::one_step_graph;
use support::{
    STATE_TIMEOUT, Sandbox, controller_pid, process_exited, send_signal, uniform_worker_plan,
    wait_until,
};

#[test]
fn an_abandoned_run_on_a_shared_ledger_is_ended_by_its_observer() {
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    let sandbox = Sandbox::new();
    let env = [
        ("TRELLIS_LEDGER", ledger.as_str()),
        ("TRELLIS_CONTROLLER_LEASE_MS", "600"),
        ("TRELLIS_ABANDONED_AFTER_MS", "600"),
    ];
    let args = sandbox.run_args(
        &one_step_graph("gateStep"),
        &json!({"value": 1}),
        &uniform_worker_plan(&[]),
    );
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.push("--detach");
    let receipt = sandbox.trellis_with_env(&args, &env).success().json();
    let run = receipt["runId"].as_str().expect("runId").to_owned();
    let controller = wait_until("the controller to run", STATE_TIMEOUT, || {
        controller_pid(&run)
    });
    wait_until("the gate to start", STATE_TIMEOUT, || {
        (sandbox.invocation_count("gateStep") == 1).then_some(())
    });
    send_signal(controller, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });
    let status: Value = wait_until("an observer to end the run", STATE_TIMEOUT, || {
        let status = sandbox
            .trellis_with_env(&["status", &run, "--json"], &env)
            .success()
            .json();
        (status["status"]["phase"] == "finished").then_some(status)
    });
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "failed", "reason": "runtime_lost"})
    );
    let listed = sandbox
        .trellis_with_env(&["list", "--json"], &env)
        .success()
        .json();
    assert_eq!(listed["runs"][0]["status"]["phase"], "finished", "{listed}");
    // The dead controller's gate still waits on this host: let it end.
    std::fs::write(sandbox.workspace.join("open-gateStep"), b"").expect("open the gate");
}
