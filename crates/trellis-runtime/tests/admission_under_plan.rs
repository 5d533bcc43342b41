//! Admission of a graph under a runtime plan as the reference (Zeroshot 10.19.1) admits it
//! (graph-contract §13.9): the plan-bound graph rules before verification, in the
//! reference's order and words; any well-formed worker reference under an agent plan; loop
//! iteration counts from the input, checked and used for the bounds. Each expected message is
//! what `zeroshot run --validate-only` printed for the same graph and input.

use serde_json::{Value, json};
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, GraphSource, InputSource, PlanSource, admit,
};

fn field(kind: &str, required: bool) -> Value {
    json!({"type": {"kind": kind}, "required": required})
}

fn state() -> Value {
    json!({"kind": "record", "fields": {"value": field("integer", true),
                                        "rounds": field("integer", false)}})
}

fn step(name: &str) -> Value {
    json!({"kind": "step", "name": name, "worker": format!("gen.{name}@1"),
           "instructions": "Do it.", "input": {"kind": "null"},
           "output": {"kind": "record", "fields": {"result": field("integer", true)}},
           "inputBindings": [], "writeBindings": [], "attempts": 1, "timeoutMs": 60000})
}

fn succeed() -> Value {
    json!({"kind": "succeed", "name": "done", "output": {"kind": "null"}, "bindings": []})
}

fn graph(children: Vec<Value>) -> Value {
    json!({"profile": "openengine.graph.full/v1", "initialInput": state(),
           "policy": {"policy": "policy.native-v2@1", "default": "deny"},
           "root": {"kind": "seq", "name": "root", "state": state(), "promotedStatePaths": [],
                    "children": children}})
}

/// What admitting `graph` with `input` under the uniform claude plan says: `Ok(None)` when
/// admitted, else the refusal's message.
fn answer(graph: Value, input: Value) -> Result<(), String> {
    let workspace = tempfile::tempdir().unwrap();
    let request = AdmitRequest {
        graph: GraphSource::Document(graph),
        input: InputSource::Document(input),
        plan: PlanSource::Uniform(ConfigSource::Document(
            json!({"harness": "claude", "provider": "anthropic", "model": "m"}),
        )),
        workspace: Some(workspace.path().to_path_buf()),
    };
    match admit(request) {
        Ok(_) => Ok(()),
        Err(AdmissionError::Rejected { diagnostics, .. }) => Err(diagnostics[0].message.clone()),
        Err(other) => Err(other.to_string()),
    }
}

#[test]
fn any_well_formed_worker_reference_runs_on_the_agent_lane() {
    assert_eq!(
        answer(graph(vec![step("w"), succeed()]), json!({"value": 1})),
        Ok(())
    );
}

#[test]
fn the_reserved_single_worker_reference_runs_on_the_agent_lane_too() {
    // Seed 1234: under a plan the reference resolves `legacy.zeroshot.ship@1` in a full graph
    // like any other reference (its pinned descriptor is a registry's rule, and a plan-bound
    // run has none).
    let mut legacy = step("w");
    legacy["worker"] = json!("legacy.zeroshot.ship@1");
    assert_eq!(
        answer(graph(vec![legacy, succeed()]), json!({"value": 1})),
        Ok(())
    );
}

#[test]
fn graph_rules_come_before_verification_and_the_input() {
    let mut bare = step("w");
    bare.as_object_mut().unwrap().remove("instructions");
    // Unreachable `late` would fail verification, the input its check: the plan rule is first.
    let unreachable = graph(vec![bare, succeed(), step("late")]);
    assert_eq!(
        answer(unreachable, json!({"value": "text"})),
        Err("agent-backed node w requires authored instructions".into())
    );
    // Verification comes before the input.
    assert_eq!(
        answer(
            graph(vec![succeed(), step("late")]),
            json!({"value": "text"})
        ),
        Err("node is unreachable after an unconditional terminal".into())
    );
    assert_eq!(
        answer(graph(vec![step("w"), succeed()]), json!({"value": "text"})),
        Err(
            "initial input does not match GraphSpec.initialInput: $.value must be a integer".into()
        )
    );
}

#[test]
fn executables_are_checked_in_document_order() {
    let mut delivery = step("deliver");
    delivery["worker"] = json!("builtin.git-delivery.push@1");
    delivery.as_object_mut().unwrap().remove("instructions");
    let mut bare = step("w");
    bare.as_object_mut().unwrap().remove("instructions");
    assert_eq!(
        answer(
            graph(vec![delivery.clone(), bare.clone(), succeed()]),
            json!({"value": 1})
        ),
        Err("Git delivery binding deliver must be attached to a verifier node".into())
    );
    assert_eq!(
        answer(graph(vec![bare, delivery, succeed()]), json!({"value": 1})),
        Err("agent-backed node w requires authored instructions".into())
    );
}

#[test]
fn a_delivery_binding_on_another_worker_is_refused_in_the_references_words() {
    // Seed 2027: a node sharing the delivery node's name gets its git delivery binding; the
    // reference places the binding (a verifier) before it checks the worker.
    let mut delivery = step("deliver");
    delivery["worker"] = json!("builtin.git-delivery.push@1");
    delivery.as_object_mut().unwrap().remove("instructions");
    let mut namesake = step("deliver");
    assert_eq!(
        answer(
            graph(vec![namesake.clone(), delivery.clone(), succeed()]),
            json!({"value": 1})
        ),
        Err("Git delivery binding deliver must be attached to a verifier node".into())
    );
    namesake["kind"] = json!("verifier");
    namesake["signals"] = json!({"verdict": ["accepted", "rejected"]});
    namesake["diagnostic"] = json!({"kind": "null"});
    assert_eq!(
        answer(
            graph(vec![namesake, delivery, succeed()]),
            json!({"value": 1})
        ),
        Err("Git delivery binding deliver uses unsupported worker gen.deliver@1".into())
    );
}

#[test]
fn a_reused_reference_keeps_one_contract_after_the_per_node_rules() {
    let mut twin = step("w2");
    twin["worker"] = json!("gen.w@1");
    twin["output"] = json!({"kind": "null"});
    assert_eq!(
        answer(
            graph(vec![step("w"), twin.clone(), succeed()]),
            json!({"value": 1})
        ),
        Err("worker gen.w@1 is reused with inconsistent executable declarations (w, w2)".into())
    );
    let mut profile = graph(vec![step("w"), twin, succeed()]);
    profile["profile"] = json!("openengine.graph.single-worker/v1");
    assert_eq!(
        answer(profile, json!({"value": 1})),
        Err("Trellis requires graph profile openengine.graph.full/v1".into())
    );
}

/// A loop of one step whose round count the input's `rounds` may set.
fn counted_loop() -> Value {
    let body = json!({"kind": "seq", "name": "body", "state": state(), "promotedStatePaths": [],
                      "children": [step("w")]});
    graph(vec![
        json!({"kind": "loop", "name": "again", "state": state(), "promotedStatePaths": [],
               "maxIterations": 3, "maxIterationsInput": ["rounds"], "body": body}),
        succeed(),
    ])
}

#[test]
fn an_iteration_count_from_the_input_is_a_positive_safe_integer_that_sets_the_bounds() {
    for bad in [json!(0), json!(-2), json!(9_007_199_254_740_992_u64)] {
        assert_eq!(
            answer(counted_loop(), json!({"value": 1, "rounds": bad})),
            Err("loop iteration count at rounds must be a positive safe integer".into()),
            "{bad}"
        );
    }
    assert_eq!(answer(counted_loop(), json!({"value": 1})), Ok(()));
    // Past `maxIterations` (3) is allowed; past the execution ceiling is not.
    assert_eq!(
        answer(counted_loop(), json!({"value": 1, "rounds": 60000})),
        Ok(())
    );
    assert_eq!(
        answer(counted_loop(), json!({"value": 1, "rounds": 70000})),
        Err("node executions exceed 65536".into())
    );
}

/// Admits the one-step graph under `plan` (uniform or exact): its notices, or the refusal.
fn notices(plan: PlanSource) -> Result<Vec<String>, String> {
    let workspace = tempfile::tempdir().unwrap();
    let request = AdmitRequest {
        graph: GraphSource::Document(graph(vec![step("w"), succeed()])),
        input: InputSource::Document(json!({"value": 1})),
        plan,
        workspace: Some(workspace.path().to_path_buf()),
    };
    admit(request)
        .map(|admitted| admitted.notices().to_vec())
        .map_err(|e| e.to_string())
}

#[test]
fn reference_plan_fields_are_accepted_and_the_ignored_ones_named() {
    let uniform = |extra: Value| {
        let mut plan = json!({"harness": "claude", "provider": "anthropic", "model": "m"});
        plan.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        notices(PlanSource::Uniform(ConfigSource::Document(plan)))
    };
    assert_eq!(
        uniform(
            json!({"size": "tiny", "activeMemory": {"repository": true, "budgetBytes": 3},
                       "globalAgents": {"postmortem": {"enabled": true, "sourceNode": "w"}}})
        ),
        Ok(vec![
            "runtime plan field activeMemory is ignored: Trellis has no active memory".into(),
            "runtime plan field globalAgents is ignored: Trellis runs no global agents".into(),
        ])
    );
    // The reference's ranges and references hold.
    assert!(
        uniform(json!({"activeMemory": {"budgetBytes": 0}}))
            .unwrap_err()
            .contains("memory budgetBytes must be in 1..=16384")
    );
    assert_eq!(
        uniform(json!({"globalAgents": {"postmortem": {"sourceNode": "nosuch"}}})),
        Err("runtime plan has no binding for executable node nosuch".into())
    );
    let exact = |binding: Value| {
        notices(PlanSource::Exact(ConfigSource::Document(json!({
            "harness": "claude", "provider": "anthropic", "size": "standard",
            "nodes": {"w": binding}}))))
    };
    assert_eq!(
        exact(json!({"kind": "agent", "model": "m",
                     "lane": {"harness": "codex", "provider": "openai"}})),
        Ok(vec![
            "runtime plan field lane of node w (codex/openai) is ignored: Trellis runs every \
             agent node on the plan's claude/anthropic"
                .into()
        ])
    );
    assert_eq!(
        exact(json!({"kind": "agent", "model": "m",
                     "lane": {"harness": "codex", "provider": "anthropic"}})),
        Err("harness codex does not support provider anthropic".into())
    );
}

/// The issue-review template (which posts its report as a comment), as a document.
fn issue_review() -> Value {
    let text = include_str!("../../../templates/issue-review.json");
    serde_json::from_str(text).unwrap()
}

fn issue_input(url: &str) -> Value {
    json!({"url": url, "context": {"body": "b", "title": "t", "reviewScope": {}}})
}

/// The comment delivery node of `graph` (the issue-review template's last executable).
fn deliver(graph: &mut Value) -> &mut Value {
    &mut graph["root"]["children"][1]["otherwise"]["children"][0]
}

#[test]
fn a_comment_delivery_posts_to_a_url_bound_from_required_input() {
    let issue = "https://github.com/example/scratch/issues/1";
    assert_eq!(answer(issue_review(), issue_input(issue)), Ok(()));
    let mut unbound = issue_review();
    deliver(&mut unbound)["inputBindings"]
        .as_array_mut()
        .unwrap()
        .remove(0);
    assert_eq!(
        answer(unbound, issue_input(issue)),
        Err("invalid comment delivery: comment URL requires a caller input binding".into())
    );
    let mut optional = issue_review();
    optional["initialInput"]["fields"]["url"]["required"] = json!(false);
    assert_eq!(
        answer(optional, issue_input(issue)),
        Err(
            "invalid comment delivery: comment URL must select a required string in initial input"
                .into()
        )
    );
    for url in [
        "https://gitlab.com/o/r/issues/1",
        "https://github.com/o/r/issues/0",
        "https://github.com/o/r/issues/1/",
    ] {
        assert_eq!(
            answer(issue_review(), issue_input(url)),
            Err(
                "invalid comment delivery: no registered source provider recognizes this comment \
                 URL"
                .into()
            ),
            "{url}"
        );
    }
    assert_eq!(
        answer(issue_review(), issue_input("https://github.com/o/r/pull/1")),
        Err(
            "invalid comment delivery: source delivery identity mismatch: PR review scope is empty"
                .into()
        )
    );
}

#[test]
fn a_comment_delivery_declares_the_workers_input_exactly() {
    // Seed 5150: the reference holds a comment delivery's input to the worker's own, unlike a
    // git delivery's (whose input is the graph's to choose).
    let issue = "https://github.com/example/scratch/issues/1";
    let refused = Err(
        "Git delivery node deliver declares an invalid contract for worker \
                       builtin.comment-delivery.post@1"
            .to_owned(),
    );
    let mut retyped = issue_review();
    deliver(&mut retyped)["input"]["fields"]["reviewScope"]["type"]["fields"]["headRepository"]["type"] =
        json!({"kind": "integer"});
    assert_eq!(answer(retyped, issue_input(issue)), refused);
    let mut widened = issue_review();
    deliver(&mut widened)["input"]["fields"]["extra"] =
        json!({"type": {"kind": "string"}, "required": false});
    assert_eq!(answer(widened, issue_input(issue)), refused);
}

#[test]
fn a_delivery_nodes_contract_is_checked_before_its_instructions() {
    // Seed 1234: the reference names the invalid contract of a delivery node that also
    // carries instructions.
    let issue = "https://github.com/example/scratch/issues/1";
    let mut instructed = issue_review();
    deliver(&mut instructed)["instructions"] = json!("Post it.");
    assert_eq!(
        answer(instructed.clone(), issue_input(issue)),
        Err("Git delivery node deliver rejects authored instructions".into())
    );
    deliver(&mut instructed)["signals"] = json!({"delivery": ["posted", "skipped"]});
    assert_eq!(
        answer(instructed, issue_input(issue)),
        Err(
            "Git delivery node deliver declares an invalid contract for worker \
             builtin.comment-delivery.post@1"
                .into()
        )
    );
}

/// A push delivery verifier that binds nothing (its input is the graph's to choose).
fn push_delivery(name: &str) -> Value {
    let text = || field("string", true);
    let single =
        |label: &str| json!({"type": {"kind": "enum", "values": [label]}, "required": true});
    json!({"kind": "verifier", "name": name, "worker": "builtin.git-delivery.push@1",
           "input": {"kind": "null"},
           "output": {"kind": "record", "fields": {
               "version": single("v1"), "mode": single("push"), "outcome": single("pushed"),
               "repository": text(), "targetBranch": text(), "headRevision": text(),
               "headBranch": text()}},
           "inputBindings": [], "writeBindings": [], "attempts": 1,
           "signals": {"delivery": ["pushed"]},
           "diagnostic": {"kind": "record", "fields": {"message": text()}}})
}

fn par(name: &str, branches: Vec<Value>) -> Value {
    json!({"kind": "par", "name": name, "state": state(), "promotedStatePaths": [],
           "join": {"kind": "all"}, "branches": branches})
}

/// What admission's refusal code is, or `None` when admitted.
fn refusal_code(graph: Value) -> Option<&'static str> {
    let workspace = tempfile::tempdir().unwrap();
    let request = AdmitRequest {
        graph: GraphSource::Document(graph),
        input: InputSource::Document(json!({"value": 1})),
        plan: PlanSource::Uniform(ConfigSource::Document(
            json!({"harness": "claude", "provider": "anthropic", "model": "m"}),
        )),
        workspace: Some(workspace.path().to_path_buf()),
    };
    admit(request).err().map(|e| e.code())
}

#[test]
fn a_git_delivery_that_can_run_beside_a_writer_or_another_delivery_is_refused() {
    // Trellis's own rule (the reference admits these graphs): a delivery commits and pushes the
    // whole workspace, so beside a writer it would deliver a half-edited tree.
    let beside_a_worker = graph(vec![
        par("together", vec![step("worker"), push_delivery("deliver")]),
        succeed(),
    ]);
    assert_eq!(
        answer(beside_a_worker.clone(), json!({"value": 1})),
        Err(
            "Git delivery node deliver can run at the same time as worker (parallel branches \
             of together): a delivery commits and pushes the whole workspace, so it must not \
             overlap a writer or another delivery"
                .into()
        )
    );
    assert_eq!(
        refusal_code(beside_a_worker),
        Some("admission.delivery_overlap")
    );
    let two_deliveries = graph(vec![
        par(
            "together",
            vec![push_delivery("first"), push_delivery("second")],
        ),
        succeed(),
    ]);
    assert_eq!(
        answer(two_deliveries, json!({"value": 1})),
        Err(
            "Git delivery node first can run at the same time as second (parallel branches of \
             together): a delivery commits and pushes the whole workspace, so it must not \
             overlap a writer or another delivery"
                .into()
        )
    );
    // In sequence, or in one branch after its writer, a delivery sees a settled workspace.
    assert_eq!(
        answer(
            graph(vec![step("worker"), push_delivery("deliver"), succeed()]),
            json!({"value": 1})
        ),
        Ok(())
    );
    let one_branch = json!({"kind": "seq", "name": "branch", "state": state(),
                            "promotedStatePaths": [],
                            "children": [step("worker"), push_delivery("deliver")]});
    assert_eq!(
        answer(
            graph(vec![par("alone", vec![one_branch]), succeed()]),
            json!({"value": 1})
        ),
        Ok(())
    );
}

#[test]
fn a_git_delivery_in_a_map_of_several_items_is_refused() {
    let with_items = || {
        let mut state = state();
        state["fields"]["items"] = json!({"type": {"kind": "array", "items": {"kind": "null"}},
                                          "required": true});
        state
    };
    let mapped = |max_items: u64| {
        let mut graph = graph(vec![
            json!({"kind": "map", "name": "each", "state": with_items(),
                   "promotedStatePaths": [], "over": {"source": "state", "path": ["items"]},
                   "maxItems": max_items, "body": push_delivery("deliver")}),
            succeed(),
        ]);
        graph["initialInput"] = with_items();
        graph["root"]["state"] = with_items();
        graph
    };
    let input = json!({"value": 1, "items": [null, null]});
    assert_eq!(
        answer(mapped(4), input.clone()),
        Err(
            "Git delivery node deliver runs for several items of map each at once: a delivery \
             commits and pushes the whole workspace, so it must not overlap a writer or another \
             delivery"
                .into()
        )
    );
    // One item at most: nothing runs beside it.
    assert_eq!(
        answer(mapped(1), json!({"value": 1, "items": [null]})),
        Ok(())
    );
}
