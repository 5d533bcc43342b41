//! Every built-in template verifies against the built-in registry, every agent node carries
//! real instructions, the review templates keep the exported reference graphs' shape exactly
//! (node names, kinds, worker refs, types, bindings and bounds — only the prompts and the
//! policy name are ours), and auto-research's push variant is its default graph plus one
//! delivery per iteration.

use serde_json::Value;
use trellis_graph::GraphSpec;
use trellis_runtime::{
    AdmitRequest, GraphSource, InputSource, PlanSource, TemplateInput, admit, template, templates,
};
use trellis_verify::{Verification, verify_builtin};

/// The templates that follow a reference graph node for node.
const MIRRORED: [&str; 2] = ["issue-review", "pr-review"];

fn document(name: &str) -> Value {
    let text = template(name).unwrap().document(false).unwrap();
    serde_json::from_str(text).unwrap()
}

/// Calls `visit` on every executable node (step or verifier) of a graph document.
fn executables(value: &Value, visit: &mut dyn FnMut(&Value)) {
    match value {
        Value::Object(map) => {
            if matches!(
                map.get("kind").and_then(Value::as_str),
                Some("step" | "verifier")
            ) {
                visit(value);
            }
            map.values().for_each(|v| executables(v, visit));
        }
        Value::Array(items) => items.iter().for_each(|v| executables(v, visit)),
        _ => {}
    }
}

/// The document with instructions of executable nodes and the policy name blanked.
fn shape(mut document: Value) -> Value {
    fn blank(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if matches!(
                    map.get("kind").and_then(Value::as_str),
                    Some("step" | "verifier")
                ) && map.contains_key("instructions")
                {
                    map.insert("instructions".into(), Value::String(String::new()));
                }
                map.values_mut().for_each(blank);
            }
            Value::Array(items) => items.iter_mut().for_each(blank),
            _ => {}
        }
    }
    blank(&mut document["root"]);
    document["policy"]["policy"] = Value::Null;
    document
}

#[test]
fn every_builtin_template_verifies() {
    let mut names = Vec::new();
    for template in templates() {
        for delivery in template.deliveries.clone() {
            let Some(text) = template.document_for(Some(delivery)) else {
                panic!("{} offers {delivery} without a graph", template.name);
            };
            let spec = GraphSpec::from_json_str(text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", template.name));
            let verification = verify_builtin(&spec);
            let Verification::Verified(_) = &verification else {
                panic!(
                    "{} ({delivery}) is rejected: {:#}",
                    template.name,
                    verification.envelope()
                );
            };
        }
        names.push(template.name);
    }
    assert_eq!(
        names,
        [
            "single-worker",
            "software-change",
            "issue-review",
            "pr-review",
            "auto-research"
        ]
    );
}

#[test]
fn agent_nodes_carry_our_own_instructions() {
    for template in templates() {
        for delivery in template.deliveries.clone() {
            let text = template.document_for(Some(delivery)).unwrap();
            executables(&serde_json::from_str(text).unwrap(), &mut |node| {
                let worker = node["worker"].as_str().unwrap();
                let name = node["name"].as_str().unwrap();
                let instructions = node.get("instructions").and_then(Value::as_str);
                if worker.starts_with("builtin.agent.") {
                    let text = instructions.unwrap_or_else(|| panic!("{name} has no instructions"));
                    assert!(
                        text.len() > 300 && !text.contains("Placeholder"),
                        "{}: {name} has no real instructions",
                        template.name
                    );
                } else {
                    assert!(
                        instructions.is_none(),
                        "delivery node {name} has instructions"
                    );
                }
            });
        }
    }
}

#[test]
fn review_templates_keep_the_reference_shape() {
    let Some(dir) = trellis_graph::conformance::require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        return;
    };
    for name in MIRRORED {
        let path = dir.join("zeroshot-templates").join(format!("{name}.json"));
        let reference: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let ours = document(name);
        assert_eq!(ours["policy"]["policy"], "policy.trellis@1");
        assert!(
            shape(ours) == shape(reference),
            "{name} differs from the reference graph beyond prompts and policy"
        );
    }
}

#[test]
fn review_templates_take_their_input_from_a_url() {
    let sources: Vec<(&str, TemplateInput)> =
        templates().iter().map(|t| (t.name, t.input)).collect();
    assert_eq!(
        sources,
        [
            ("single-worker", TemplateInput::Task),
            ("software-change", TemplateInput::Task),
            ("issue-review", TemplateInput::ForgeUrl),
            ("pr-review", TemplateInput::ForgeUrl),
            ("auto-research", TemplateInput::Task),
        ]
    );
    // auto-research takes a task and optionally the number of rounds; the review templates
    // take no task at all.
    let request = |name: &str, input: InputSource| AdmitRequest {
        graph: GraphSource::Template {
            name: name.to_owned(),
            delivery: Default::default(),
        },
        input,
        plan: PlanSource::Unchecked,
        workspace: None,
    };
    let task = || InputSource::Task("Why is startup slow?".to_owned());
    admit(request("auto-research", task())).unwrap();
    let with_rounds =
        serde_json::json!({"task": "Why is startup slow?", "options": {"iterations": 2}});
    admit(request("auto-research", InputSource::Document(with_rounds))).unwrap();
    for name in ["issue-review", "pr-review"] {
        let refused = admit(request(name, task())).unwrap_err();
        assert_eq!(refused.code(), "admission.task_not_accepted");
    }
}

#[test]
fn issue_review_offers_no_delivery_as_the_reference_does_and_pr_review_does_not() {
    use trellis_runtime::DeliveryMode;
    let offered = |name: &str| template(name).unwrap().deliveries;
    assert_eq!(
        offered("issue-review"),
        [DeliveryMode::Comment, DeliveryMode::None]
    );
    assert_eq!(offered("pr-review"), [DeliveryMode::Comment]);
    // Without delivery the review is the run's output: the reviewer's body, nothing posted.
    let text = template("issue-review")
        .unwrap()
        .document_for(Some(DeliveryMode::None))
        .unwrap();
    let graph: Value = serde_json::from_str(text).unwrap();
    let mut workers = Vec::new();
    executables(&graph, &mut |node| {
        workers.push(node["worker"].as_str().unwrap().to_owned())
    });
    assert_eq!(workers, ["builtin.agent.reviewer@1"]);
    let done = &graph["root"]["children"][1]["otherwise"];
    assert_eq!(done["name"], "done");
    assert_eq!(
        done["bindings"][0]["value"],
        serde_json::json!({"source": "state", "path": ["body"]})
    );
}

/// The executable nodes of a graph document: name and worker, in document order.
fn workers_of(graph: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    executables(graph, &mut |node| {
        found.push((
            node["name"].as_str().unwrap().to_owned(),
            node["worker"].as_str().unwrap().to_owned(),
        ))
    });
    found
}

#[test]
fn auto_research_pushes_from_one_delivery_node_inside_its_loop() {
    use trellis_runtime::DeliveryMode;
    let research = template("auto-research").unwrap();
    assert_eq!(
        research.deliveries,
        [DeliveryMode::None, DeliveryMode::Push]
    );
    let plain: Value = serde_json::from_str(research.document_for(None).unwrap()).unwrap();
    let text = research.document_for(Some(DeliveryMode::Push)).unwrap();
    let push: Value = serde_json::from_str(text).unwrap();
    // The push graph is the default one plus a manifest agent and one push, both in the loop.
    let mut expected = workers_of(&plain);
    let mut added = workers_of(&push);
    added.retain(|node| !expected.contains(node));
    assert_eq!(
        added,
        [
            (
                "checkpoint_manifest".to_owned(),
                "builtin.agent.research-manifest@1".to_owned()
            ),
            (
                "checkpoint_delivery".to_owned(),
                "builtin.git-delivery.push@1".to_owned()
            ),
        ]
    );
    expected.extend(added);
    let mut all = workers_of(&push);
    all.sort();
    expected.sort();
    assert_eq!(all, expected);
    let mut in_loop = Vec::new();
    fn walk(value: &Value, inside: bool, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                let inside = inside || map.get("kind") == Some(&Value::from("loop"));
                if inside && map.get("kind") == Some(&Value::from("verifier")) {
                    out.push(map["name"].as_str().unwrap_or_default().to_owned());
                }
                map.values().for_each(|v| walk(v, inside, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, inside, out)),
            _ => {}
        }
    }
    walk(&push["root"], false, &mut in_loop);
    assert!(
        in_loop.contains(&"checkpoint_delivery".to_owned()),
        "{in_loop:?}"
    );
    // The manifest agent only reads: it is a verifier.
    assert!(
        in_loop.contains(&"checkpoint_manifest".to_owned()),
        "{in_loop:?}"
    );
}

/// The committed research graphs are what `scripts/build-research-templates.py` builds from
/// the prompts, so an edit to one never drifts from the other.
#[test]
fn the_research_templates_are_built_from_their_script() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/build-research-templates.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
