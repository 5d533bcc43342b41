//! `TRELLIS_ERROR_FORMAT=json`: a failed command prints its error as one `{"code", "message"}`
//! line on stderr with the run API's code (what the Python client's local mode reads); without
//! it the human line stays.

mod support;

use serde_json::Value;
use support::Sandbox;

const UNKNOWN_RUN: &str = "0190a1b2-0000-7000-8000-000000000000";

#[test]
fn errors_are_json_lines_with_run_api_codes_when_asked() {
    let sandbox = Sandbox::new();
    let json = [("TRELLIS_ERROR_FORMAT", "json")];

    let missing = sandbox.trellis_with_env(&["status", UNKNOWN_RUN], &json);
    assert_eq!(missing.code, Some(1));
    let lines = missing.stderr_lines();
    assert_eq!(lines.len(), 1, "{missing:?}");
    let problem: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(problem["code"], "run.not_found");
    assert!(problem["message"].as_str().unwrap().contains(UNKNOWN_RUN));

    let template = sandbox.trellis_with_env(
        &[
            "run",
            "--template",
            "no-such-template",
            "--task",
            "t",
            "--json",
        ],
        &json,
    );
    let problem: Value = serde_json::from_str(template.stderr_lines()[0]).unwrap();
    assert_eq!(
        problem["code"], "admission.unknown_template",
        "{template:?}"
    );

    // A failure with no run API code still comes as a JSON line.
    let usage = sandbox.trellis_with_env(&["run"], &json);
    let problem: Value = serde_json::from_str(usage.stderr_lines()[0]).unwrap();
    assert_eq!(problem["code"], "cli.error", "{usage:?}");

    let human = sandbox.trellis(&["status", UNKNOWN_RUN]);
    assert!(human.stderr.starts_with("trellis: error: "), "{human:?}");
}
