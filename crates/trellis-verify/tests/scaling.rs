//! The generated mixed graphs used by the benchmarks verify at every size.

mod support;

use trellis_verify::{Verification, verify};

#[test]
fn generated_graphs_are_valid_at_every_benchmark_size() {
    for size in [64, 512, 1024, 2048, 4096] {
        let spec = support::mixed::mixed_graph(size);
        let nodes = support::mixed::node_count(&spec);
        assert!(nodes <= size && nodes > size - 20, "{size}: {nodes} nodes");
        let verdict = verify(&spec, &support::mixed::bench_registry());
        assert!(
            matches!(verdict, Verification::Verified(_)),
            "{size}: {:#}",
            verdict.envelope()
        );
    }
}

/// Large graphs are parsed in two halves and have their canonical tail written, their bounds
/// predicted and their identity hashed alongside the analyzer: the result must equal reading
/// and hashing on one thread, with loops (a ranking witness) and without (an acyclic order).
#[test]
fn large_graphs_parse_and_hash_as_on_one_thread() {
    large_graph_as_on_one_thread(support::mixed::mixed_graph(2048));
    let acyclic = support::mixed::acyclic_graph(1024);
    assert!(support::mixed::node_count(&acyclic) > 1000);
    large_graph_as_on_one_thread(acyclic);
}

fn large_graph_as_on_one_thread(spec: trellis_graph::GraphSpec) {
    let text = serde_json::to_string(&spec.to_value()).unwrap_or_default();
    let parsed = trellis_graph::GraphSpec::from_json_str(&text);
    assert_eq!(parsed.as_ref().ok(), Some(&spec));
    let Verification::Verified(graph) =
        trellis_verify::verify_owned(spec, &support::mixed::bench_registry())
    else {
        panic!("the generated graph verifies");
    };
    assert_eq!(
        trellis_verify::graph_identity(&graph.ir).ok(),
        Some(graph.identity)
    );
}
