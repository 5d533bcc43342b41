//! Parse + verify + compile + identity for the five reference templates and for generated
//! graphs of 512 to 4,096 nodes mixing every node kind. Measured with mimalloc, the allocator
//! the `trellis` binary ships with.

#[allow(dead_code)] // shared with the tests; not every helper is used here
#[path = "../tests/support/mixed.rs"]
mod mixed;

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use trellis_graph::GraphSpec;
use trellis_graph::conformance::locate;
use trellis_verify::{Verification, verify, verify_builtin, verify_owned};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn verified(v: &Verification) -> bool {
    matches!(v, Verification::Verified(_))
}

fn templates(c: &mut Criterion) {
    let Some(dir) = locate(env!("CARGO_MANIFEST_DIR")).map(|d| d.join("zeroshot-templates")) else {
        eprintln!("note: conformance directory not found; template benchmarks skipped");
        return;
    };
    let mut group = c.benchmark_group("template");
    for name in [
        "single-worker",
        "software-change",
        "auto-research",
        "issue-review",
        "pr-review",
    ] {
        let path: PathBuf = dir.join(format!("{name}.json"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let spec = GraphSpec::from_json_str(black_box(&text)).ok();
                let verdict = spec.as_ref().map(verify_builtin);
                assert!(verdict.as_ref().is_some_and(verified));
                verdict
            })
        });
    }
    group.finish();
}

/// The same graphs split into their two halves: parsing alone, and verification of an
/// already parsed graph (compile and identity included).
fn generated_phases(c: &mut Criterion) {
    let registry = mixed::bench_registry();
    let mut parse = c.benchmark_group("generated-parse");
    for size in [512, 1024, 2048, 4096] {
        let text = serde_json::to_string(&mixed::mixed_graph(size).to_value()).unwrap_or_default();
        parse.bench_with_input(BenchmarkId::from_parameter(size), &text, |b, text| {
            b.iter(|| GraphSpec::from_json_str(black_box(text)).ok())
        });
    }
    parse.finish();
    let mut check = c.benchmark_group("generated-verify");
    for size in [512, 1024, 2048, 4096] {
        let spec = mixed::mixed_graph(size);
        check.bench_with_input(BenchmarkId::from_parameter(size), &spec, |b, spec| {
            b.iter(|| {
                let verdict = verify(black_box(spec), &registry);
                assert!(verified(&verdict));
                verdict
            })
        });
    }
    check.finish();
}

fn generated(c: &mut Criterion) {
    let registry = mixed::bench_registry();
    let mut group = c.benchmark_group("generated");
    for size in [512, 1024, 2048, 4096] {
        let spec = mixed::mixed_graph(size);
        let text = serde_json::to_string(&spec.to_value()).unwrap_or_default();
        group.bench_with_input(BenchmarkId::from_parameter(size), &text, |b, text| {
            b.iter(|| {
                let spec = GraphSpec::from_json_str(black_box(text)).ok();
                let verdict = spec.map(|s| verify_owned(s, &registry));
                assert!(verdict.as_ref().is_some_and(verified));
                verdict
            })
        });
    }
    group.finish();
}

criterion_group!(benches, templates, generated, generated_phases);
criterion_main!(benches);
