//! `trellis validate` as a user sees it: the reference templates verify with stable identities,
//! independent mistakes are all reported, bad documents and inputs get clear answers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use trellis_testkit::conformance::{json_files, require};

fn trellis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .env(
            "TRELLIS_HOME",
            std::env::temp_dir().join("trellis-validate-tests"),
        )
        .output()
        .expect("trellis runs")
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn write(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

/// A minimal value of a PayloadType: required fields only, the first enum label.
fn sample(ty: &Value) -> Value {
    match ty["kind"].as_str().unwrap() {
        "null" => Value::Null,
        "boolean" => json!(true),
        "integer" | "number" => json!(1),
        "string" => json!("add a --verbose flag"),
        "enum" => ty["values"][0].clone(),
        "array" => json!([]),
        "record" => {
            let mut out = serde_json::Map::new();
            for (name, field) in ty["fields"].as_object().unwrap() {
                if field["required"] == json!(true) {
                    out.insert(name.clone(), sample(&field["type"]));
                }
            }
            Value::Object(out)
        }
        other => panic!("unexpected kind {other}"),
    }
}

#[test]
fn the_reference_templates_verify_with_stable_identities() {
    let Some(dir) = require(env!("CARGO_MANIFEST_DIR")).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let files = json_files(&dir.join("zeroshot-templates"));
    for file in &files {
        let graph: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let input = write(
            scratch.path(),
            "input.json",
            &sample(&graph["initialInput"]),
        );
        let args = [
            "validate",
            "--json",
            file.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ];
        let first = trellis(&args);
        let again = trellis(&args);
        assert_eq!(
            first.status.code(),
            Some(0),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&first.stdout)
        );
        let (a, b) = (json_of(&first), json_of(&again));
        assert_eq!(a["status"], "verified");
        assert_eq!(a["identity"], b["identity"], "identity must be stable");
        assert_eq!(a["identity"].as_str().unwrap().len(), 64);
        println!(
            "{}: {}",
            file.file_name().unwrap().to_string_lossy(),
            a["identity"]
        );
    }
    assert_eq!(files.len(), 5);
}

fn single_worker(scratch: &Path) -> Value {
    let shown = trellis(&["template", "show", "single-worker"]);
    assert!(shown.status.success());
    let graph: Value = serde_json::from_slice(&shown.stdout).unwrap();
    write(scratch, "single.json", &graph);
    graph
}

#[test]
fn three_independent_mistakes_are_all_reported() {
    let scratch = tempfile::tempdir().unwrap();
    let mut graph = single_worker(scratch.path());
    graph["root"]["children"][0]["attempts"] = json!(101);
    graph["root"]["children"][0]["inputBindings"][0]["value"]["path"] = json!(["tsk"]);
    graph["root"]["children"][1]["otherwise"]["name"] = json!("worker");
    let path = write(scratch.path(), "broken.json", &graph);
    let out = trellis(&["validate", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_of(&out);
    assert_eq!(report["status"], "rejected");
    let codes: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["ceiling_exceeded", "schema_safety", "invalid_graph_shape"]
    );

    let human = trellis(&["validate", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("rejected: 3 diagnostic(s)"), "{text}");
    assert!(
        text.contains("at    run › worker › inputBindings[0] › value"),
        "{text}"
    );
}

#[test]
fn unparseable_documents_and_mismatched_inputs_are_named() {
    let scratch = tempfile::tempdir().unwrap();
    let truncated = scratch.path().join("t.json");
    std::fs::write(&truncated, "{\"profile\": ").unwrap();
    let out = trellis(&["validate", "--json", truncated.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["status"], "unparseable");

    let mut graph = single_worker(scratch.path());
    graph["root"]["children"][0]["command"] = json!(["rm", "-rf", "/"]);
    let path = write(scratch.path(), "cmd.json", &graph);
    let report = json_of(&trellis(&["validate", "--json", path.to_str().unwrap()]));
    assert_eq!(report["status"], "unparseable");
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `command`")
    );

    single_worker(scratch.path());
    let input = write(scratch.path(), "in.json", &json!({"task": 7}));
    let graph = scratch.path().join("single.json");
    let out = trellis(&[
        "validate",
        "--json",
        graph.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_of(&out);
    assert_eq!(report["status"], "rejected");
    assert!(
        report["inputError"]
            .as_str()
            .unwrap()
            .contains("$.task must be a string")
    );
}

#[test]
fn oversized_and_deeply_nested_files_are_refused_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    let deep = scratch.path().join("deep.json");
    std::fs::write(
        &deep,
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .unwrap();
    let out = trellis(&["validate", "--json", deep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        json_of(&out)["error"]
            .as_str()
            .unwrap()
            .contains("nesting exceeds")
    );

    let big = scratch.path().join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(17 * 1024 * 1024).unwrap();
    let out = trellis(&["validate", big.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("does not parse"), "{stdout}");
    assert!(stdout.contains("the limit is 16 MiB"), "{stdout}");
}

/// Issue 19 #12: a graph that cannot be a document (over 16 MiB, not UTF-8) printed nothing
/// on stdout under `--json`; it is `unparseable` like bad JSON, exit 1.
#[test]
fn validate_json_reports_an_unreadable_graph_as_unparseable() {
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(17 * 1024 * 1024)
        .unwrap();
    let latin1 = scratch.path().join("latin1.json");
    std::fs::write(&latin1, b"{\"name\": \"caf\xe9\"}").unwrap();
    let cases = [
        (
            &big,
            format!(
                "graph {} is 17825792 bytes; the limit is 16 MiB",
                big.display()
            ),
        ),
        (
            &latin1,
            format!(
                "graph {}: it is not UTF-8 text (invalid bytes at offset 13)",
                latin1.display()
            ),
        ),
    ];
    for (path, error) in cases {
        let out = trellis(&["validate", "--json", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(
            json_of(&out),
            json!({"status": "unparseable", "error": error})
        );
        assert!(out.stderr.is_empty(), "{out:?}");
    }
}

/// Issue 19 #11: a device or pipe has no length to check up front; it is read up to the
/// limit and refused, whichever file names it (graph, input, GaP inputs).
#[test]
fn a_device_is_read_only_up_to_the_limit() {
    let out = trellis(&["validate", "--json", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        json_of(&out),
        json!({
            "status": "unparseable",
            "error": "graph /dev/zero gave more than 16 MiB (it is not a regular file); \
                      the limit is 16 MiB",
        })
    );

    // A GaP run's `--inputs` too (the smallest workflow: straight to a successful end).
    let scratch = tempfile::tempdir().unwrap();
    let gap = scratch.path().join("gap");
    std::fs::create_dir_all(&gap).unwrap();
    write(
        &gap,
        "workflow.json",
        &json!({
            "version": 3,
            "meta": {},
            "nodes": {"done": {"type": "end", "status": "success"}},
            "edges": [["START", "done"]],
        }),
    );
    let gap_run = trellis(&[
        "run",
        gap.to_str().unwrap(),
        "--inputs",
        "/dev/zero",
        "--json",
    ]);
    assert_eq!(gap_run.status.code(), Some(1), "{gap_run:?}");
    let stderr = String::from_utf8_lossy(&gap_run.stderr);
    assert!(
        stderr.contains("/dev/zero") && stderr.contains("larger than 16 MiB"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_2_and_the_schema_is_json() {
    assert_eq!(trellis(&["validate", "--bogus"]).status.code(), Some(2));
    let schema = trellis(&["schema", "graph"]);
    assert!(schema.status.success());
    let value = json_of(&schema);
    assert_eq!(
        value["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn gap_workflows_validate_through_the_same_command() {
    let Some(dir) = require(env!("CARGO_MANIFEST_DIR")).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let minimal = dir.join("gap/test_minimal_v3.json");
    let out = trellis(&["validate", "--json", minimal.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(json_of(&out), json!({"status": "verified", "issues": []}));
}
