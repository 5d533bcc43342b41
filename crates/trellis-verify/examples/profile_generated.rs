//! Times the phases of verifying a generated graph (a profiling target):
//! `profile_generated [nodes] [rounds] [phase]` with phase `all`, `parse`, `tree` (the JSON
//! tree alone), `value`, `strict`,
//! `analyze`, `verify`, `builtin`, `pipeline` (parse + `verify_owned`, as the `generated/N`
//! benchmark), `identity` or `canonical` (its bytes without the hash). Allocations go to mimalloc, the allocator the `trellis` binary
//! ships with; build with `PROFILE_SYSTEM_ALLOC=1` in the environment to use the system
//! allocator instead.

#[allow(dead_code)] // shared with the tests; not every helper is used here
#[path = "../tests/support/mixed.rs"]
mod mixed;

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Counts allocations so phases can be compared by allocation count as well as time.
struct Counting;

/// Chosen when the example is compiled, so every allocation and its release use one allocator.
const SYSTEM_ALLOC: bool = option_env!("PROFILE_SYSTEM_ALLOC").is_some();

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the chosen allocator.
        unsafe {
            if SYSTEM_ALLOC {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the pointer came from `alloc` above (same allocator) with this layout.
        unsafe {
            if SYSTEM_ALLOC {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let rounds: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let phase = args.get(3).cloned().unwrap_or_else(|| "all".to_owned());
    let registry = mixed::bench_registry();
    let (spec, text) = match std::env::var("GRAPH_FILE") {
        Ok(path) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            match trellis_graph::GraphSpec::from_json_str(&text) {
                Ok(spec) => (spec, text),
                Err(e) => return eprintln!("{e}"),
            }
        }
        Err(_) => {
            let spec = mixed::mixed_graph(size);
            let text = serde_json::to_string(&spec.to_value()).unwrap_or_default();
            (spec, text)
        }
    };
    if let Ok(path) = std::env::var("DUMP_GRAPH") {
        // Keeps the generated document for inspection or for other tools.
        if let Err(e) = std::fs::write(&path, &text) {
            return eprintln!("{path}: {e}");
        }
    }
    let allocator = if SYSTEM_ALLOC { "system" } else { "mimalloc" };
    println!("document: {} bytes, allocator: {allocator}", text.len());
    let time = |label: &str, f: &dyn Fn()| {
        if phase != "all" && phase != label {
            return;
        }
        let allocations = ALLOCATIONS.load(Ordering::Relaxed);
        let start = Instant::now();
        for _ in 0..rounds {
            f();
        }
        let per_round = (ALLOCATIONS.load(Ordering::Relaxed) - allocations) / u64::from(rounds);
        println!(
            "{label:>8}: {:?} per round, {per_round} allocations",
            start.elapsed() / rounds
        );
    };
    time("parse", &|| {
        std::hint::black_box(trellis_graph::GraphSpec::from_json_str(&text).ok());
    });
    time("tree", &|| {
        // The JSON tree alone (the first half of `parse`).
        let mut arena = trellis_graph::json::Arena::new();
        std::hint::black_box(trellis_graph::json::parse_tree(&text, &mut arena).is_ok());
    });
    time("value", &|| {
        std::hint::black_box(serde_json::from_str::<serde_json::Value>(&text).ok());
    });
    time("strict", &|| {
        std::hint::black_box(trellis_graph::json::parse_strict(&text).ok());
    });
    time("analyze", &|| {
        std::hint::black_box(trellis_verify::analyze(&spec));
    });
    time("verify", &|| {
        std::hint::black_box(trellis_verify::verify(&spec, &registry));
    });
    time("builtin", &|| {
        std::hint::black_box(trellis_verify::verify_builtin(&spec));
    });
    time("pipeline", &|| {
        // What the `generated/N` benchmark measures: parse, then verify the parsed graph.
        let parsed = trellis_graph::GraphSpec::from_json_str(&text).ok();
        std::hint::black_box(parsed.map(|s| trellis_verify::verify_owned(s, &registry)));
    });
    if let trellis_verify::Verification::Verified(graph) = trellis_verify::verify(&spec, &registry)
    {
        time("identity", &|| {
            std::hint::black_box(trellis_verify::graph_identity(&graph.ir).ok());
        });
        time("canonical", &|| {
            std::hint::black_box(trellis_verify::canonical_bytes(&graph.ir).ok());
        });
    }
}
