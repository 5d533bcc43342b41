//! The registry compatibility check on its own: several independent issues at one node, and
//! the check's place after a clean analyzer.

mod support;

use serde_json::json;
use support::build::*;
use trellis_graph::json::JsonPath;
use trellis_graph::{StaticRegistry, WorkerDescriptor, WorkerRef};
use trellis_verify::{Verification, WorkerIssueKind, check_workers, verify};

fn registry(worker: &str, returned: &str, output: serde_json::Value) -> StaticRegistry {
    let descriptor = json!({
        "worker": returned, "graphProfiles": ["openengine.graph.full/v1"],
        "binding": {"protocol": "acp", "version": "1", "profile": "openengine.worker.acp/v1"},
        "contract": {"input": {"kind": "string"}, "output": output, "verifier": null,
                     "errors": ["timeout", "crash", "malformed", "refusal"]},
        "capabilityPolicy": {"autonomy": "strict", "permissionPolicy": "policy.strict@1"},
        "artifactProfile": {"allowedTypeIds": ["openengine.result@1"],
                            "allowedMediaTypes": ["application/json"], "minimumRedaction": "internal"},
        "credentialRequirements": []});
    let mut registry = StaticRegistry::new();
    registry.insert(
        WorkerRef::new(worker).unwrap(),
        WorkerDescriptor::parse_unvalidated(&descriptor, &JsonPath::root()).unwrap(),
    );
    registry
}

#[test]
fn independent_issues_at_one_executable_are_all_reported() {
    let spec = graph(seq("root", vec![step("work"), succeed("done")]));
    let registry = registry("test.step@1", "test.other@1", json!({"kind": "string"}));
    let kinds: Vec<WorkerIssueKind> = check_workers(&spec, &registry)
        .iter()
        .map(|i| i.kind)
        .collect();
    assert_eq!(
        kinds,
        vec![
            WorkerIssueKind::DescriptorIdentity,
            WorkerIssueKind::Input,
            WorkerIssueKind::Output
        ]
    );
}

#[test]
fn the_registry_is_consulted_only_for_a_clean_analysis() {
    // The analyzer finds the fall-through; the broken registry is never consulted.
    let spec = graph(seq("root", vec![step("work")]));
    let broken = registry("test.step@1", "test.other@1", json!({"kind": "string"}));
    let Verification::Rejected(list) = verify(&spec, &broken) else {
        panic!()
    };
    assert_eq!(
        messages(&list),
        vec!["normal-success path falls through without explicit succeed or fail terminal"]
    );
}
