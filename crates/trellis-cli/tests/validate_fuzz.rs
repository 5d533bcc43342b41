//! No-panic fuzz of `trellis validate` driven by the differential test's generator: every
//! generated graph and byte-level mutations of each go through the run API's `validate` with
//! an input, as the command does (strict JSON reading, GraphSpec parsing, verification with the
//! built-in registry, the input check), which must answer without panicking, deterministically;
//! a sample also goes through the real binary, which must exit 0 or 1 with no panic message.
//! `TRELLIS_FUZZ_CASES` sets the number of generated graphs (default 300).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use trellis_runtime::{GraphSource, InputSource, ValidateRequest, ValidationReport};
use trellis_testkit::graphgen::{self, Dice, Settings, WorkerStyle, mutate_bytes};

/// Byte-level mutations tried per generated graph.
const MUTATIONS_PER_GRAPH: usize = 3;
/// Every this many documents one also goes through the binary.
const BINARY_EVERY: usize = 40;

fn cases() -> usize {
    std::env::var("TRELLIS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// What `trellis validate --input` decides about a document (through the run API's
/// `validate`, as the command does), as text for the determinism check.
fn validate_in_process(file: &Path, bytes: &[u8], input: &Value) -> String {
    std::fs::write(file, bytes).unwrap();
    let request = ValidateRequest {
        input: Some(InputSource::Document(input.clone())),
        ..ValidateRequest::new(GraphSource::File(file.to_path_buf()))
    };
    match trellis_runtime::validate(request) {
        Ok(ValidationReport::Verified(report)) => {
            format!("verified {} {:?}", report.identity, report.input_error)
        }
        Ok(ValidationReport::Rejected { diagnostics, .. }) => format!("rejected {diagnostics:?}"),
        Ok(ValidationReport::Unparseable { error, .. }) => format!("unparseable: {error}"),
        Ok(ValidationReport::Gap { report, .. }) => format!("gap: {}", report.exit_code()),
        Err(e) => format!("refused: {e}"),
    }
}

#[test]
fn validate_never_panics_on_generated_and_mutated_graphs() {
    let count = cases();
    let corpus = graphgen::corpus(&Settings {
        seed: 0x7e11,
        count,
        workers: WorkerStyle::Command,
        heavy: false,
        seeds: Vec::new(),
    });
    let mut dice = Dice::new(99);
    let scratch = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_trellis");
    let in_process = scratch.path().join("in-process.json");
    let (mut documents, mut through_binary) = (0usize, 0usize);
    for (i, case) in corpus.iter().enumerate() {
        let text = serde_json::to_vec(&case.graph).unwrap();
        let mut variants = vec![text.clone()];
        for _ in 0..MUTATIONS_PER_GRAPH {
            variants.push(mutate_bytes(&mut dice, &text));
        }
        for (j, bytes) in variants.iter().enumerate() {
            documents += 1;
            let answer = catch_unwind(AssertUnwindSafe(|| {
                validate_in_process(&in_process, bytes, &case.input)
            }));
            let answer = answer.unwrap_or_else(|_| {
                let path = scratch.path().join(format!("panic-{i}-{j}.json"));
                let _ = std::fs::write(&path, bytes);
                panic!(
                    "validate panicked on case {i} variant {j} (kept at {})",
                    path.display()
                )
            });
            assert_eq!(
                answer,
                validate_in_process(&in_process, bytes, &case.input),
                "case {i} variant {j}: not deterministic"
            );
            if documents % BINARY_EVERY == 0 {
                through_binary += 1;
                let file = scratch.path().join("graph.json");
                std::fs::write(&file, bytes).unwrap();
                let output = Command::new(binary)
                    .args(["validate", "--json"])
                    .arg(&file)
                    .env("TRELLIS_HOME", scratch.path().join("home"))
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    matches!(output.status.code(), Some(0 | 1)) && !stderr.contains("panicked"),
                    "trellis validate on case {i} variant {j}: {:?}\n{stderr}",
                    output.status
                );
            }
        }
    }
    println!(
        "validate fuzz: {documents} documents ({count} generated graphs, {MUTATIONS_PER_GRAPH} \
         byte mutations each), {through_binary} through the binary, no panic"
    );
}
