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
