//! Runtime plans (`--runtime-config` and `--uniform-runtime-config`), read as the CLI reads
//! them and admitted against a built-in template with agent, verifier and delivery nodes:
//! nothing panics, and an exact plan serializes to a document that reads back the same.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use trellis_graph::GraphSpec;
use trellis_graph::json::parse_strict;
use trellis_runtime::testing::RuntimePlan;

/// The graph plans are admitted against: the software-change template with delivery.
fn graph() -> Option<&'static GraphSpec> {
    static GRAPH: OnceLock<Option<GraphSpec>> = OnceLock::new();
    GRAPH
        .get_or_init(|| {
            GraphSpec::from_json_str(include_str!("../../templates/software-change-push.json")).ok()
        })
        .as_ref()
}

fuzz_target!(|data: &[u8]| {
    let Some(graph) = graph() else {
        panic!("the template graph no longer parses");
    };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse_strict(text) else {
        return;
    };
    if let Ok(mut plan) = RuntimePlan::from_json(&value) {
        let written = serde_json::to_value(&plan).unwrap_or_default();
        assert_eq!(RuntimePlan::from_json(&written).ok().as_ref(), Some(&plan));
        let _ = plan.admit(graph);
        plan.fill_delivery_defaults(graph);
        let _ = plan.connection_names();
    }
    if let Ok(plan) = RuntimePlan::uniform(&value, graph) {
        let _ = plan.admit(graph);
    }
});
