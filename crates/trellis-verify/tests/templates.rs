//! The five reference templates verify unchanged against the built-in registry, with stable
//! identities, and their initial input types accept a minimal matching input.

use std::path::PathBuf;

use serde_json::{Value, json};
use trellis_graph::GraphSpec;
use trellis_graph::conformance::require;
use trellis_verify::{Verification, verify_builtin};

fn templates() -> Option<PathBuf> {
    require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|d| d.join("zeroshot-templates"))
}

const TEMPLATES: [&str; 5] = [
    "single-worker",
    "software-change",
    "auto-research",
    "issue-review",
    "pr-review",
];

/// The smallest input each template's `initialInput` must accept.
fn minimal_input(name: &str) -> Value {
    match name {
        "issue-review" => {
            json!({"context": {"body": "b", "title": "t", "reviewScope": {}}, "url": "u"})
        }
        "pr-review" => json!({
            "context": {
                "body": "b",
                "linkedIssues": [],
                "reviewScope": {
                    "baseBranch": "main", "baseRepository": "o/r", "baseRevision": "a",
                    "headBranch": "h", "headRepository": "o/r", "headRevision": "b"
                },
                "title": "t"
            },
            "url": "u"
        }),
        _ => json!({"task": "x"}),
    }
}

#[test]
fn templates_verify_against_the_builtin_registry() {
    let Some(dir) = templates() else { return };
    let mut verified = 0;
    for name in TEMPLATES {
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let spec = GraphSpec::from_json_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let first = verify_builtin(&spec);
        let second = verify_builtin(&spec);
        let (Verification::Verified(a), Verification::Verified(b)) = (&first, &second) else {
            panic!("{name} is not admitted: {:#}", first.envelope());
        };
        assert_eq!(a.identity, b.identity, "{name}: identity is not stable");
        println!("template {name}: {}", a.identity);
        verified += 1;
    }
    println!("zeroshot-templates: {verified}/{}", TEMPLATES.len());
}

#[test]
fn template_inputs_accept_a_minimal_input() {
    let Some(dir) = templates() else { return };
    for name in TEMPLATES {
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let spec = GraphSpec::from_json_str(&text).unwrap();
        spec.initial_input
            .check_value(&minimal_input(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            spec.initial_input.check_value(&json!({})).is_err(),
            "{name}"
        );
    }
}
