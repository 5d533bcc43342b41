//! What every subcommand prints, human and JSON, pinned with `insta` snapshots: validate (a
//! verified graph, one rejected graph per diagnostic family from the public vectors, an
//! unparseable file, a mismatching input), run (validate-only and the NDJSON stream of a real
//! run), status, list, watch, logs, force-stop, resume, template list/show, schema, and the
//! errors for bad input. Run ids, execution references, times, pids, hosts and the sandbox's
//! paths are redacted; cursors and graph identities are deterministic and kept.

mod support;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use support::graph::*;
use support::{CliOutput, Sandbox, uniform_worker_plan};
use trellis_testkit::conformance::{json_files, require};

/// Escapes `text` for use inside a regular expression.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The redactions every snapshot of a sandbox needs.
fn settings(sandbox: &Sandbox) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    let root = sandbox.workspace.parent().expect("sandbox root");
    settings.add_filter(&literal(&root.display().to_string()), "[sandbox]");
    settings.add_filter(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[run-id]",
    );
    settings.add_filter(r"trellis/[0-9a-f]{12}", "trellis/[run]");
    settings.add_filter(r"ex-[0-9a-f]{64}", "[execution]");
    settings.add_filter(r#""(\w*[aA]tMs)":\s*\d+"#, r#""$1": "[ms]""#);
    settings.add_filter(r#""pid":\s*\d+"#, r#""pid": "[pid]""#);
    settings.add_filter(r#""host":\s*"[^"]*""#, r#""host": "[host]""#);
    settings.add_filter(r#""(command)":\s*\[[^\]]*\]"#, r#""$1": "[worker]""#);
    settings.add_filter(r"(after|within) \d+ ms", "$1 [n] ms");
    settings
}

/// Stdout, stderr and exit code, as one snapshot.
fn shown(output: &CliOutput) -> String {
    let mut text = format!("exit: {:?}\n", output.code);
    if !output.stdout.is_empty() {
        text.push_str("--- stdout\n");
        text.push_str(&pretty(&output.stdout));
    }
    if !output.stderr.is_empty() {
        text.push_str("--- stderr\n");
        text.push_str(&output.stderr);
    }
    text
}

/// JSON documents (one per line) pretty-printed, anything else as it is.
fn pretty(stdout: &str) -> String {
    let mut out = String::new();
    for line in stdout.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(value) if line.starts_with('{') || line.starts_with('[') => {
                out.push_str(&serde_json::to_string_pretty(&value).expect("json"));
                out.push('\n');
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A finished run of the doubling graph with the test worker; returns its id.
fn finished_run(sandbox: &Sandbox, value: i64) -> (String, CliOutput) {
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({ "value": value }),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = sandbox.trellis(&args);
    let run = output.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();
    (run, output)
}

/// Keeps the NDJSON lines of a run whose timing the snapshot must not depend on: the event
/// kinds that are not logs or process bookkeeping.
fn stable_lines(output: &CliOutput) -> String {
    let kept: Vec<String> = output
        .stdout
        .lines()
        .filter(|line| {
            !line.contains("\"event\":\"controller_attached\"")
                && !line.contains("\"event\":\"worker_process\"")
        })
        .map(str::to_owned)
        .collect();
    kept.join("\n")
}

#[test]
fn validate_reports_a_verified_graph_and_a_mismatching_input() {
    let sandbox = Sandbox::new();
    let graph = sandbox.write_json("graph.json", &doubling_graph());
    let good = sandbox.write_json("input.json", &json!({"value": 2}));
    let bad = sandbox.write_json("bad-input.json", &json!({"value": "two"}));
    settings(&sandbox).bind(|| {
        insta::assert_snapshot!(
            "validate_verified",
            shown(&sandbox.trellis(&["validate", &graph]))
        );
        insta::assert_snapshot!(
            "validate_verified_json",
            shown(&sandbox.trellis(&["validate", &graph, "--json", "--input", &good]))
        );
        insta::assert_snapshot!(
            "validate_input_mismatch",
            shown(&sandbox.trellis(&["validate", &graph, "--input", &bad]))
        );
        insta::assert_snapshot!(
            "validate_input_mismatch_json",
            shown(&sandbox.trellis(&["validate", &graph, "--json", "--input", &bad]))
        );
    });
}

#[test]
fn validate_reports_an_unparseable_file() {
    let sandbox = Sandbox::new();
    let path = sandbox.workspace.join("broken.json");
    std::fs::write(&path, "{\"profile\": ").expect("write");
    let path = path.to_str().expect("UTF-8");
    settings(&sandbox).bind(|| {
        insta::assert_snapshot!(
            "validate_unparseable",
            shown(&sandbox.trellis(&["validate", path]))
        );
        insta::assert_snapshot!(
            "validate_unparseable_json",
            shown(&sandbox.trellis(&["validate", path, "--json"]))
        );
    });
}

#[test]
fn validate_reports_each_diagnostic_family() {
    let Some(dir) = require(env!("CARGO_MANIFEST_DIR")).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    // The first public vector (by name) whose diagnostics start with each code.
    let mut families: BTreeMap<String, std::path::PathBuf> = BTreeMap::new();
    for file in json_files(&dir.join("openengine-v1/verifier/negative")) {
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("vector")).expect("json");
        if let Some(code) = vector["expected"]["diagnostics"][0]["code"].as_str() {
            families.entry(code.to_owned()).or_insert(file);
        }
    }
    assert!(
        families.len() >= 8,
        "diagnostic families: {:?}",
        families.keys()
    );
    let sandbox = Sandbox::new();
    for (code, file) in &families {
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(file).expect("vector")).expect("json");
        let graph = sandbox.write_json(&format!("{code}.json"), &vector["graph"]);
        let mut args = vec!["validate".to_owned(), graph];
        if file
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("registry-"))
        {
            // Registry vectors are judged against the fixture registry, as the public suite does.
            let registry = dir.join("openengine-v1/fixture-registry.json");
            args.extend(["--registry".to_owned(), registry.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let human = sandbox.trellis(&args);
        let machine = sandbox.trellis(&[&args[..], &["--json"]].concat());
        let mut settings = settings(&sandbox);
        settings.add_filter(&literal(&dir.display().to_string()), "[conformance]");
        settings.set_info(&file.file_name().map(|n| n.to_string_lossy().into_owned()));
        settings.bind(|| {
            insta::assert_snapshot!(format!("validate_rejected_{code}"), shown(&human));
            insta::assert_snapshot!(format!("validate_rejected_{code}_json"), shown(&machine));
        });
    }
}

#[test]
fn run_prints_its_plan_check_and_its_event_stream() {
    let sandbox = Sandbox::new();
    let mut args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 21}),
        &uniform_worker_plan(&[]),
    );
    args.push("--validate-only".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let check = sandbox.trellis(&args);
    let (run, output) = finished_run(&sandbox, 21);
    assert_eq!(output.code, Some(0), "{output:#?}");
    settings(&sandbox).bind(|| {
        insta::assert_snapshot!("run_validate_only", shown(&check));
        insta::assert_snapshot!("run_json_stream", pretty(&stable_lines(&output)));
        insta::assert_snapshot!("status", shown(&sandbox.trellis(&["status", &run])));
        insta::assert_snapshot!(
            "status_json",
            shown(&sandbox.trellis(&["status", &run, "--json"]))
        );
        insta::assert_snapshot!("list", shown(&sandbox.trellis(&["list"])));
        insta::assert_snapshot!("list_json", shown(&sandbox.trellis(&["list", "--json"])));
        let watch = sandbox.trellis(&["watch", &run, "--json"]);
        insta::assert_snapshot!("watch_json", pretty(&stable_lines(&watch)));
        insta::assert_snapshot!(
            "watch_after_cursor",
            shown(&sandbox.trellis(&["watch", &run, "--after", "c1:2"]))
        );
        let logs = sandbox.trellis(&["logs", &run]);
        insta::assert_snapshot!("logs", shown(&logs));
        insta::assert_snapshot!(
            "force_stop_finished",
            shown(&sandbox.trellis(&["force-stop", &run]))
        );
        insta::assert_snapshot!(
            "resume_succeeded",
            shown(&sandbox.trellis(&["resume", &run, "--json"]))
        );
    });
}

#[test]
fn a_failed_run_is_shown_and_resumed() {
    let sandbox = Sandbox::new();
    let plan = json!({"kind": "command", "command": ["false"]});
    let args = sandbox.run_args(&doubling_graph(), &json!({"value": 1}), &plan);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = sandbox.trellis(&args);
    let run = output.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();
    settings(&sandbox).bind(|| {
        insta::assert_snapshot!("run_failed_stream", pretty(&stable_lines(&output)));
        insta::assert_snapshot!("status_failed", shown(&sandbox.trellis(&["status", &run])));
        let resumed = sandbox.trellis(&["resume", &run, "--json"]);
        insta::assert_snapshot!("resume_failed_run_stream", pretty(&stable_lines(&resumed)));
        insta::assert_snapshot!(
            "resume_twice",
            shown(&sandbox.trellis(&["resume", &run, "--json"]))
        );
    });
}

#[test]
fn templates_and_schemas_are_printed() {
    let sandbox = Sandbox::new();
    settings(&sandbox).bind(|| {
        insta::assert_snapshot!(
            "template_list",
            shown(&sandbox.trellis(&["template", "list"]))
        );
        insta::assert_snapshot!(
            "template_list_json",
            shown(&sandbox.trellis(&["template", "list", "--json"]))
        );
        insta::assert_snapshot!(
            "template_show",
            shown(&sandbox.trellis(&["template", "show", "single-worker"]))
        );
        insta::assert_snapshot!(
            "template_show_push",
            shown(&sandbox.trellis(&["template", "show", "single-worker", "--push"]))
        );
        insta::assert_snapshot!(
            "schema_graph",
            shown(&sandbox.trellis(&["schema", "graph"]))
        );
    });
}

#[test]
fn bad_input_gets_one_clear_line() {
    let sandbox = Sandbox::new();
    let graph = sandbox.write_json("graph.json", &doubling_graph());
    let input = sandbox.write_json("input.json", &json!({"value": 1}));
    let exact = sandbox.write_json("exact.json", &json!({"nodes": {}}));
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "error_unknown_run",
            vec!["status", "01a229f6-f791-7144-841c-2b885e31093f"],
        ),
        ("error_not_a_run_id", vec!["status", "not/a/run"]),
        (
            "error_bad_cursor",
            vec![
                "logs",
                "01a229f6-f791-7144-841c-2b885e31093f",
                "--after",
                "7",
            ],
        ),
        (
            "error_missing_graph",
            vec!["validate", "no-such-graph.json"],
        ),
        (
            "error_unknown_template",
            vec!["template", "show", "no-such-template"],
        ),
        ("error_run_without_graph", vec!["run"]),
        (
            "error_run_without_input",
            vec!["run", &graph, "--uniform-runtime-config", &exact],
        ),
        (
            "error_plan_missing_binding",
            vec!["run", &graph, "--input", &input, "--runtime-config", &exact],
        ),
        (
            "error_template_without_task",
            vec!["run", "--template", "single-worker"],
        ),
        ("error_usage", vec!["status"]),
    ];
    settings(&sandbox).bind(|| {
        for (name, args) in cases {
            insta::assert_snapshot!(name, shown(&sandbox.trellis(&args)));
        }
    });
}
