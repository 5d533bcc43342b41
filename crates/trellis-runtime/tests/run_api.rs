//! The run API as a front end uses it, through the public surface only: admit and submit a
//! graph (driven in-process), then read it back every way the API offers — status, list,
//! watch (blocking and async), logs with filters, one execution, the graph for drawing — and
//! the refusals with their stable codes.

use std::path::Path;

use futures_util::StreamExt;
use serde_json::{Value, json};
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, Cursor, ExecutionPhase, GraphSource, InputSource,
    LogFilter, LogLevel, PlanSource, RunListFilter, Runtime, RuntimeOptions, StartMode,
    SubmitOptions, TerminalResult,
};

fn nothing() -> Value {
    json!({"kind": "null"})
}

fn step(name: &str) -> Value {
    json!({"kind": "step", "name": name, "worker": format!("command.{name}@1"),
           "input": nothing(), "output": nothing(), "inputBindings": [], "writeBindings": [],
           "timeoutMs": 60_000, "attempts": 1})
}

/// `root = seq[first, second, done]`.
fn two_steps() -> Value {
    json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": nothing(),
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": nothing(), "promotedStatePaths": [],
                 "children": [step("first"), step("second"),
                              {"kind": "succeed", "name": "done", "output": nothing(),
                               "bindings": []}]},
    })
}

/// A command worker that says which node it is on stderr and replies `null`.
fn plan() -> Value {
    json!({"kind": "command", "command": ["sh", "-c",
        "cat >/dev/null; echo \"working on $TRELLIS_NODE\" >&2; echo '{\"output\":null}'"]})
}

fn open(home: &Path) -> Runtime {
    Runtime::open(RuntimeOptions {
        home: Some(home.to_path_buf()),
        ..RuntimeOptions::default()
    })
    .expect("the runtime opens")
}

fn request(workspace: &Path) -> AdmitRequest {
    AdmitRequest {
        graph: GraphSource::Document(two_steps()),
        input: InputSource::Default,
        plan: PlanSource::Uniform(ConfigSource::Document(plan())),
        workspace: Some(workspace.to_path_buf()),
    }
}

fn in_process(key: &str) -> SubmitOptions {
    SubmitOptions {
        submission_key: Some(key.to_owned()),
        title: Some("two steps".to_owned()),
        start: StartMode::InProcess,
        ..SubmitOptions::default()
    }
}

#[test]
fn a_submitted_run_can_be_read_back_every_way() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(&dir.path().join("home"));
    let admitted = runtime.admit(request(dir.path())).expect("admitted");
    assert_eq!(admitted.identity().len(), 64);
    let receipt = runtime.submit(admitted, in_process("key-1")).unwrap();
    assert!(receipt.created);
    let run = receipt.run_id;

    let status = runtime.status(&run).unwrap();
    assert_eq!(
        status.summary.terminal(),
        Some(&TerminalResult::Succeeded {
            output: Value::Null
        })
    );
    assert_eq!(status.summary.title, "two steps");
    let nodes: Vec<(&str, ExecutionPhase)> = status
        .executions
        .iter()
        .map(|e| (e.node.as_str(), e.phase))
        .collect();
    assert_eq!(
        nodes,
        [
            ("first", ExecutionPhase::Completed),
            ("second", ExecutionPhase::Completed)
        ]
    );

    // The same key and submission name the same run.
    let again = runtime
        .submit(
            runtime.admit(request(dir.path())).unwrap(),
            in_process("key-1"),
        )
        .unwrap();
    assert_eq!((again.run_id.clone(), again.created), (run.clone(), false));

    let listed = runtime.list(&RunListFilter::default()).unwrap().runs;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].run_id, run);
    let none = RunListFilter {
        title_contains: Some("no such title".to_owned()),
        ..RunListFilter::default()
    };
    assert!(runtime.list(&none).unwrap().runs.is_empty());

    let updates: Vec<_> = runtime
        .watch(&run, Cursor::START)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let last = updates.last().expect("updates");
    assert_eq!(last.event, "terminal");
    let started: Vec<&str> = updates
        .iter()
        .filter(|u| u.event == "node_started")
        .filter_map(|u| u.execution.as_ref().map(|e| e.node.as_str()))
        .collect();
    assert_eq!(started, ["first", "second"]);
    // Resuming from an update's cursor returns exactly what followed it.
    let middle = &updates[updates.len() / 2];
    let rest = runtime.watch(&run, middle.cursor).unwrap().count();
    assert_eq!(rest, updates.len() - updates.len() / 2 - 1);

    let second_only = LogFilter {
        node: Some("second".to_owned()),
        ..LogFilter::default()
    };
    let lines: Vec<_> = runtime
        .logs(&run, Cursor::START, second_only)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!lines.is_empty());
    assert!(
        lines
            .iter()
            .all(|l| l.node.as_deref() == Some("second") && l.execution_id == Some(2))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.record.message == "working on second")
    );
    let warnings = LogFilter {
        min_level: Some(LogLevel::Warn),
        ..LogFilter::default()
    };
    assert!(
        runtime
            .logs(&run, Cursor::START, warnings)
            .unwrap()
            .all(|l| l.unwrap().record.level.at_least(LogLevel::Warn))
    );

    let detail = runtime.execution(&run, 1).unwrap();
    assert_eq!(detail.summary.node, "first");
    assert_eq!(detail.input, Value::Null);
    assert!(detail.result.is_some());
    let binding = detail.binding.expect("binding");
    assert_eq!(binding.kind, "command");
    assert_eq!(
        binding.command.as_deref().map(|c| c[0].as_str()),
        Some("sh")
    );
    assert_eq!(detail.siblings, [1]);
    assert_eq!(
        runtime.execution(&run, 9).unwrap_err().code(),
        "run.unknown_execution"
    );

    let graph = runtime.run_graph(&run).unwrap();
    let names: Vec<&str> = graph
        .layout
        .as_ref()
        .expect("layout")
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["root", "first", "second", "done"]);
    assert_eq!(
        graph.identity.as_deref(),
        Some(status.summary.graph_identity.as_deref().unwrap())
    );

    // Control of a finished run: force-stop changes nothing, resume has nothing to do.
    assert_eq!(
        runtime.force_stop(&run).unwrap().summary.at_cursor,
        status.summary.at_cursor
    );
    let resume = runtime.resume(&run, Default::default()).unwrap_err();
    assert_eq!(resume.code(), "run.nothing_to_resume");
}

#[test]
fn a_subscription_feeds_async_code_the_same_updates() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(&dir.path().join("home"));
    let admitted = runtime.admit(request(dir.path())).unwrap();
    let run = runtime
        .submit(admitted, in_process("key-async"))
        .unwrap()
        .run_id;
    let blocking: Vec<Cursor> = runtime
        .watch(&run, Cursor::START)
        .unwrap()
        .map(|u| u.unwrap().cursor)
        .collect();
    let subscription = runtime.watch(&run, Cursor::START).unwrap().subscribe();
    let streamed: Vec<Cursor> = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(subscription.map(|u| u.unwrap().cursor).collect());
    assert_eq!(streamed, blocking);
    assert!(!streamed.is_empty());
}

#[test]
fn refusals_carry_stable_codes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(&dir.path().join("home"));
    let code = |request: AdmitRequest| runtime.admit(request).unwrap_err().code();

    let mut missing_variable = request(dir.path());
    let mut with_connection = plan();
    with_connection["connections"] = json!(["TRELLIS_RUN_API_TEST_UNSET"]);
    missing_variable.plan = PlanSource::Uniform(ConfigSource::Document(with_connection));
    assert_eq!(code(missing_variable), "admission.missing_connection");

    let mut not_a_directory = request(dir.path());
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    not_a_directory.workspace = Some(file);
    assert_eq!(code(not_a_directory), "admission.workspace");

    let mut wrong_input = request(dir.path());
    wrong_input.input = InputSource::Document(json!({"unexpected": true}));
    assert_eq!(code(wrong_input), "admission.input_mismatch");

    let mut no_binding = request(dir.path());
    no_binding.plan = PlanSource::Exact(ConfigSource::Document(json!({"nodes": {}})));
    assert_eq!(code(no_binding), "admission.plan");

    let mut unknown = request(dir.path());
    unknown.graph = GraphSource::Template {
        name: "no-such-template".to_owned(),
        delivery: Default::default(),
    };
    assert_eq!(code(unknown), "admission.unknown_template");

    let mut rejected = request(dir.path());
    let mut graph = two_steps();
    graph["root"]["children"][1]["name"] = json!("first");
    rejected.graph = GraphSource::Document(graph);
    let refusal = runtime.admit(rejected).unwrap_err();
    assert!(
        matches!(&refusal, AdmissionError::Rejected { diagnostics, .. } if !diagnostics.is_empty())
    );
    assert_eq!(refusal.code(), "admission.graph_rejected");

    let mut unchecked = request(dir.path());
    unchecked.plan = PlanSource::Unchecked;
    let admitted = runtime.admit(unchecked).unwrap();
    let refused = runtime.submit(admitted, in_process("never")).unwrap_err();
    assert_eq!(refused.code(), "run.not_submittable");
    assert!(
        runtime
            .list(&RunListFilter::default())
            .unwrap()
            .runs
            .is_empty()
    );

    let unknown_run =
        trellis_runtime::parse_run_id("01a229f6-f791-7144-841c-2b885e31093f").unwrap();
    assert_eq!(
        runtime.status(&unknown_run).unwrap_err().code(),
        "run.not_found"
    );
    assert_eq!(
        trellis_runtime::parse_run_id("not/a/run")
            .unwrap_err()
            .code(),
        "run.invalid_id"
    );
}

/// Issue 19 #5: a run whose controller died before attaching was left behind unnamed (and
/// later found `runtime_lost`); the error now names it, and it is already ended.
#[test]
fn a_run_whose_controller_does_not_start_is_named_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(home.clone()),
        // A "controller" that exits at once without attaching.
        controller_program: Some("/bin/false".into()),
        ..RuntimeOptions::default()
    })
    .expect("the runtime opens");
    let admitted = runtime.admit(request(dir.path())).expect("admitted");
    let options = SubmitOptions {
        start: StartMode::Detached,
        ..in_process("never-starts")
    };
    let error = runtime.submit(admitted, options).unwrap_err();
    assert_eq!(error.code(), "run.controller_start", "{error}");
    let listed = runtime.list(&RunListFilter::default()).unwrap().runs;
    assert_eq!(listed.len(), 1);
    let run = &listed[0];
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "run {} was created but did not start: ",
            run.run_id
        )),
        "{message}"
    );
    assert_eq!(
        run.terminal(),
        Some(&TerminalResult::Failed {
            reason: "runtime_lost".into()
        })
    );
}
