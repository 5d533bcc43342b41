//! The built-in registry's admission rules and its fixed delivery contracts.

mod support;

use serde_json::{Value, json};
use support::build::*;
use trellis_graph::{WorkerRef, WorkerRegistry};
use trellis_verify::builtin::{BUILTIN_WORKERS, BuiltinKind, BuiltinRegistry, builtin_kind};
use trellis_verify::{Verification, verify_builtin};

fn agent(name: &str, worker: &str) -> Value {
    let mut node = step(name);
    node["worker"] = json!(worker);
    node["instructions"] = json!("Do the work.");
    node
}

fn routed_agent(name: &str, worker: &str) -> Vec<Value> {
    vec![
        agent(name, worker),
        choice(
            &format!("{name}Route"),
            vec![(errors_of(name), fail(&format!("{name}Failed")))],
            None,
        ),
    ]
}

fn rejected(children: Vec<Value>) -> Vec<String> {
    match verify_builtin(&graph(seq("root", children))) {
        Verification::Rejected(list) => list.into_iter().map(|d| d.message).collect(),
        other => panic!("expected a rejection, got {:#}", other.envelope()),
    }
}

/// A git delivery verifier declaring exactly the given outcome labels.
fn delivery(worker: &str, version: &str, mode: &str, labels: &[&str], extra: &[&str]) -> Value {
    let string = || field(json!({"kind": "string"}), true);
    let mut fields = serde_json::Map::new();
    for name in ["headRevision", "repository", "targetBranch"]
        .iter()
        .chain(extra)
    {
        fields.insert((*name).to_owned(), string());
    }
    fields.insert(
        "mode".into(),
        field(json!({"kind": "enum", "values": [mode]}), true),
    );
    fields.insert(
        "outcome".into(),
        field(json!({"kind": "enum", "values": labels}), true),
    );
    fields.insert(
        "version".into(),
        field(json!({"kind": "enum", "values": [version]}), true),
    );
    json!({"kind": "verifier", "name": "deliver", "worker": worker, "input": {"kind": "null"},
           "output": {"kind": "record", "fields": fields}, "inputBindings": [], "writeBindings": [],
           "attempts": 1, "signals": {"delivery": labels},
           "diagnostic": {"kind": "record", "fields": {"message": string()}}})
}

fn delivered(node: Value) -> Verification {
    verify_builtin(&graph(seq(
        "root",
        vec![
            node,
            choice(
                "route",
                vec![(errors_of("deliver"), fail("failed"))],
                Some(succeed("done")),
            ),
        ],
    )))
}

#[test]
fn built_in_references_have_a_kind() {
    for worker in BUILTIN_WORKERS {
        let reference = WorkerRef::new(worker.worker).unwrap();
        assert_eq!(builtin_kind(&reference), Some(worker.kind));
    }
    let agent = WorkerRef::new("builtin.agent.software-worker@1").unwrap();
    assert_eq!(builtin_kind(&agent), Some(BuiltinKind::Agent));
    let push = WorkerRef::new("builtin.git-delivery.push@1").unwrap();
    assert_eq!(builtin_kind(&push), Some(BuiltinKind::Delivery));
    assert_eq!(builtin_kind(&WorkerRef::new("acme.tool@1").unwrap()), None);
}

#[test]
fn agents_take_the_contract_their_node_declares() {
    let mut children = routed_agent("work", "builtin.agent.worker@1");
    children[1]["otherwise"] = succeed("done");
    let spec = graph(seq("root", children));
    let registry = BuiltinRegistry::for_graph(&spec).unwrap();
    let descriptor = registry
        .resolve(&WorkerRef::new("builtin.agent.worker@1").unwrap())
        .unwrap();
    assert!(descriptor.validate().is_ok());
    assert_eq!(
        descriptor.contract.output,
        spec.root.children()[0].executable().unwrap().output
    );
    assert!(matches!(verify_builtin(&spec), Verification::Verified(_)));
}

#[test]
fn agent_nodes_need_instructions() {
    let mut work = agent("work", "builtin.agent.worker@1");
    work.as_object_mut().unwrap().remove("instructions");
    let messages = rejected(vec![work, succeed("done")]);
    assert!(messages.contains(&"agent-backed node work requires authored instructions".to_owned()));
}

#[test]
fn reused_agent_references_must_declare_one_contract() {
    let mut second = agent("second", "builtin.agent.reviewer@1");
    second["output"] = json!({"kind": "null"});
    let messages = rejected(vec![
        agent("first", "builtin.agent.reviewer@1"),
        second,
        succeed("done"),
    ]);
    assert!(messages.contains(
        &"worker builtin.agent.reviewer@1 is reused with inconsistent executable declarations (first, second)".to_owned()
    ));
}

#[test]
fn admission_and_analyzer_diagnostics_are_reported_together() {
    let mut work = agent("work", "builtin.agent.worker@1");
    work.as_object_mut().unwrap().remove("instructions");
    let messages = rejected(vec![work]);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("normal-success path falls through"))
    );
}

#[test]
fn delivery_workers_have_fixed_contracts() {
    let push = delivery(
        "builtin.git-delivery.push@1",
        "v1",
        "push",
        &["pushed"],
        &["headBranch"],
    );
    assert!(matches!(delivered(push), Verification::Verified(_)));
    let repair = delivery(
        "builtin.git-delivery.push@1",
        "v1",
        "push",
        &["pushed", "repair_required"],
        &["headBranch"],
    );
    assert!(matches!(delivered(repair), Verification::Verified(_)));
    let merge3 = delivery(
        "builtin.git-delivery.merge@3",
        "v3",
        "merge",
        &["ci_failed", "conflict", "merged", "repair_required"],
        &["pullRequestId", "mergeRevision"],
    );
    assert!(matches!(delivered(merge3), Verification::Verified(_)));

    let wrong = delivery(
        "builtin.git-delivery.pr@2",
        "v2",
        "pr",
        &["ready"],
        &["pullRequestId"],
    );
    let Verification::Rejected(list) = delivered(wrong) else {
        panic!("subset of labels is not the contract")
    };
    assert_eq!(
        list[0].message,
        "delivery node deliver declares an invalid contract for worker builtin.git-delivery.pr@2"
    );
}

#[test]
fn delivery_nodes_are_verifiers_without_instructions() {
    let mut with_prose = delivery(
        "builtin.git-delivery.push@1",
        "v1",
        "push",
        &["pushed"],
        &["headBranch"],
    );
    with_prose["instructions"] = json!("push it");
    let Verification::Rejected(list) = delivered(with_prose) else {
        panic!()
    };
    assert_eq!(
        list[0].message,
        "delivery node deliver rejects authored instructions"
    );

    let mut as_step = step("deliver");
    as_step["worker"] = json!("builtin.git-delivery.push@1");
    let Verification::Rejected(list) = delivered(as_step) else {
        panic!()
    };
    assert_eq!(list[0].message, "delivery node deliver must be a verifier");
}

#[test]
fn unknown_references_are_not_found() {
    let mut children = vec![step("work")];
    children.push(choice(
        "route",
        vec![(errors_of("work"), fail("failed"))],
        Some(succeed("done")),
    ));
    let messages = rejected(children);
    assert_eq!(
        messages,
        vec!["worker descriptor not found: test.step@1".to_owned()]
    );
}
