//! The GaP surfaces of issue 18 and 19 #4 through the binary: `validate --skills --strict`,
//! cycle and depth rejection, `run --checkpoints warn|strict` with a connector module, and
//! `trace diff`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn gap_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../trellis-gap/tests/fixtures")
}

fn trellis(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .env("TRELLIS_HOME", home)
        .output()
        .expect("trellis runs")
}

fn write_workflow(dir: &Path, document: &Value) -> PathBuf {
    let file = dir.join("workflow.json");
    std::fs::write(&file, serde_json::to_string_pretty(document).unwrap()).unwrap();
    file
}

/// `call` runs `sg` whose only node is a noop; `sg` may also call `inner`.
fn one_subgraph(skill: &str, success: &str, on_error: &str) -> Value {
    json!({
        "version": 3,
        "nodes": {"call": {"type": "subgraph", "ref": "sg"},
                  "done": {"type": "end", "status": "success"},
                  "abort": {"type": "end", "status": "failure"}},
        "edges": [["START", "call"]],
        "conditional_edges": {"call": {"router_field": "exit", "mapping": {success: "done", on_error: "abort"}}},
        "subgraphs": {"sg": {"skill": skill, "inputs": {}, "outputs": {},
            "nodes": {success: {"type": "noop"}},
            "edges": [["START", success], [success, "END"]],
            "exit": {"router_field": null, "success_values": [success]}, "on_error": on_error}}
    })
}

#[test]
fn validate_with_skills_and_strict_reports_the_contract_as_json() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // `lookout` declares found / not_found / none; this subgraph covers two.
    let bundle = dir.path().join("skills/lookout");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("SKILL.md"),
        "---\nname: lookout\ndescription: Looks.\ngap:\n  exit_conditions: {found: a, not_found: b, none: c}\n---\n",
    )
    .unwrap();
    let file = write_workflow(dir.path(), &one_subgraph("lookout", "found", "not_found"));
    let skills = dir.path().join("skills");
    let skills = skills.to_str().unwrap();
    let path = file.to_str().unwrap();
    let relaxed = trellis(
        home.path(),
        &["validate", path, "--skills", skills, "--json"],
    );
    assert_eq!(
        relaxed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&relaxed.stdout)
    );
    let strict = trellis(
        home.path(),
        &["validate", path, "--skills", skills, "--strict", "--json"],
    );
    assert_eq!(strict.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&strict.stdout).unwrap();
    assert_eq!(
        report,
        json!({"status": "rejected", "issues": [{
            "severity": "error", "node_id": "subgraphs.sg.exit", "field": null,
            "message": "missing exit condition 'none' declared in lookout.exit_conditions"}]})
    );
    let no_skills = trellis(home.path(), &["validate", path, "--strict"]);
    assert_eq!(no_skills.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&no_skills.stderr).contains("name them with --skills DIR"));
}

#[test]
fn a_subgraph_cycle_is_rejected_by_validate_and_run_without_crashing() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut document = one_subgraph("generic", "ok", "boom");
    document["subgraphs"]["sg"]["nodes"]["again"] = json!({"type": "subgraph", "ref": "sg"});
    document["subgraphs"]["sg"]["edges"] =
        json!([["START", "again"], ["again", "ok"], ["ok", "END"]]);
    let file = write_workflow(dir.path(), &document);
    let path = file.to_str().unwrap();
    let validated = trellis(home.path(), &["validate", path]);
    assert_eq!(validated.status.code(), Some(1));
    let text = String::from_utf8_lossy(&validated.stdout);
    assert!(text.contains("[error] subgraphs.sg.nodes.again: subgraph node 'again' references 'sg', closing the subgraph cycle sg → sg"), "{text}");
    let ran = trellis(
        home.path(),
        &["run", dir.path().to_str().unwrap(), "--json"],
    );
    assert_eq!(
        ran.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(String::from_utf8_lossy(&ran.stderr).contains("(W9)"));
}

const SIDECAR: &str = "CHECKPOINTS = [\n    {'name': 'cube_on_table', 'predicate': lambda world: world.objects.cube.z < 0.05},\n]\n";

#[test]
fn run_checkpoints_warn_succeeds_with_the_failure_recorded_and_strict_fails() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_workflow(dir.path(), &one_subgraph("generic", "ok", "boom"));
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    std::fs::write(dir.path().join("checkpoints/sg.py"), SIDECAR).unwrap();
    let connector = gap_fixtures().join("connectors/counter.py");
    let run = |mode: &str| {
        trellis(
            home.path(),
            &[
                "run",
                dir.path().to_str().unwrap(),
                "--connector",
                connector.to_str().unwrap(),
                "--checkpoints",
                mode,
                "--json",
            ],
        )
    };
    let warn = run("warn");
    assert_eq!(
        warn.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&warn.stderr)
    );
    let stdout = String::from_utf8_lossy(&warn.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["exit_status"], "success");
    assert_eq!(result["checkpoints"][0]["name"], "cube_on_table");
    assert_eq!(result["checkpoints"][0]["passed"], false);
    let strict = run("strict");
    assert_eq!(strict.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&strict.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        result["error"],
        "VerificationFailed: checkpoint(s) failed after subgraph 'sg' (visit 1): cube_on_table"
    );
}

#[test]
fn trace_diff_reports_the_first_divergence_and_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_workflow(
        dir.path(),
        &json!({"version": 3, "nodes": {
            "first": {"type": "tool", "tool": "stub.const", "inputs": {"value": {"$ref": "in.v"}}},
            "done": {"type": "end", "status": "success"}},
            "edges": [["START", "first"], ["first", "done"]]}),
    );
    let traces = tempfile::tempdir().unwrap();
    let run = |name: &str, v: i64| {
        let inputs = dir.path().join(format!("{name}.json"));
        std::fs::write(&inputs, json!({"v": v}).to_string()).unwrap();
        let trace = traces.path().join(name);
        let out = trellis(
            home.path(),
            &[
                "run",
                dir.path().to_str().unwrap(),
                "--stub-tools",
                "--inputs",
                inputs.to_str().unwrap(),
                "--trace-dir",
                trace.to_str().unwrap(),
                "--json",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        trace
    };
    let (a, same, other) = (run("a", 1), run("same", 1), run("other", 2));
    let diff = |x: &Path, y: &Path| {
        trellis(
            home.path(),
            &[
                "trace",
                "diff",
                x.to_str().unwrap(),
                y.to_str().unwrap(),
                "--json",
            ],
        )
    };
    let agree = diff(&a, &same);
    assert_eq!(agree.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&agree.stdout).unwrap();
    assert_eq!(report["first_divergence"], Value::Null);
    let differ = diff(&a, &other);
    assert_eq!(differ.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&differ.stdout).unwrap();
    assert_eq!(
        report["first_divergence"],
        json!({"node": "first", "visit": 0, "kind": "inputs", "path": "$.value", "a": 1, "b": 2})
    );
    let missing = trellis(
        home.path(),
        &[
            "trace",
            "diff",
            a.to_str().unwrap(),
            dir.path().join("nope").to_str().unwrap(),
        ],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("dag_trace.json not found"));
}
