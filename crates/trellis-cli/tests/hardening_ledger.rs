//! Hardening: a damaged, read-only or full ledger, through the real binary (issue 19 #13, #15).
//! A storage failure says what happened, to which file, and what to do; one damaged run never
//! hides the others from `list`.

mod support;

use std::os::unix::fs::MetadataExt;
use std::process::Command;

use serde_json::{Value, json};
use support::graph::doubling_graph;
use support::serve::Server;
use support::{CliOutput, Sandbox, TRELLIS, finish, python, uniform_worker_plan};

/// Runs `doubling_graph` to its end in the sandbox's workspace and returns the run id.
fn finished_run(sandbox: &Sandbox, value: i64) -> String {
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": value}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lines = sandbox.trellis(&args).success().ndjson();
    lines[0]["runId"].as_str().expect("receipt").to_owned()
}

/// Runs one SQL statement with `?1 = run` on the sandbox's ledger (Python's sqlite3).
fn damage(sandbox: &Sandbox, sql: &str, run: &str) {
    let script = "import sqlite3, sys\n\
                  db = sqlite3.connect(sys.argv[1])\n\
                  db.execute(sys.argv[2], (sys.argv[3],))\n\
                  db.commit()\n";
    let status = Command::new(python())
        .args(["-c", script])
        .arg(sandbox.home.join("ledger.sqlite3"))
        .args([sql, run])
        .status()
        .expect("python");
    assert!(status.success(), "{sql}");
}

/// Asserts a command error: exit 1, nothing on stdout, one `trellis: error:` line holding
/// every phrase, and none of the words that used to be all it said.
fn assert_one_line_error(output: &CliOutput, phrases: &[&str]) {
    assert_eq!(output.code, Some(1), "{output:#?}");
    assert!(output.stdout.trim().is_empty(), "{output:#?}");
    let lines = output.stderr_lines();
    assert_eq!(lines.len(), 1, "exactly one line: {output:#?}");
    assert!(lines[0].starts_with("trellis: error: "), "{output:#?}");
    for phrase in phrases {
        assert!(lines[0].contains(phrase), "{phrase:?} in {output:#?}");
    }
    assert!(!lines[0].contains("extended code"), "{output:#?}");
}

/// Issue 19 #15: one corrupt run row made `list` fail for every run.
#[test]
fn list_skips_damaged_runs_with_a_warning_naming_each_and_shows_the_rest() {
    let sandbox = Sandbox::new();
    let runs: Vec<String> = (1..=4).map(|v| finished_run(&sandbox, v)).collect();
    // Two kinds of damage: the run's head (what `list` reads first) and its submission.
    damage(
        &sandbox,
        "UPDATE run_heads SET progress_json = '{not json' \
         WHERE run = (SELECT id FROM runs WHERE run_id = ?1)",
        &runs[1],
    );
    damage(
        &sandbox,
        "UPDATE runs SET submission_json = '[' WHERE run_id = ?1",
        &runs[2],
    );
    // Newest first, as `list` shows runs.
    let damaged = [&runs[2], &runs[1]];
    let intact = [&runs[3], &runs[0]];

    let listed = sandbox.trellis(&["list", "--json"]).success();
    let value = listed.json();
    let shown: Vec<&str> = value["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["runId"].as_str().expect("runId"))
        .collect();
    assert_eq!(shown, intact, "the intact runs, newest first");
    let skipped: Vec<&str> = value["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|run| run["run"].as_str().expect("run"))
        .collect();
    assert_eq!(skipped, [damaged[0].as_str(), damaged[1].as_str()]);
    let warnings = listed.stderr_lines();
    assert_eq!(warnings.len(), 2, "{listed:#?}");
    for (warning, run) in warnings.iter().zip(damaged) {
        assert!(
            warning.starts_with("trellis: warning: skipped run ")
                && warning.contains(run.as_str())
                && warning.contains("corrupt"),
            "{warning}"
        );
    }

    let table = sandbox.trellis(&["list"]).success();
    for run in intact {
        assert!(table.stdout.contains(run.as_str()), "{table:#?}");
    }
    for run in damaged {
        assert!(!table.stdout.contains(run.as_str()), "{table:#?}");
    }
    assert_eq!(table.stderr_lines().len(), 2, "{table:#?}");

    // The damaged run itself is one clear error, never a panic.
    let status = sandbox.trellis(&["status", &runs[1]]);
    assert_one_line_error(&status, &["ledger", "corrupt", &runs[1]]);

    // The HTTP list (team server and web UI) shows the same runs and names those it left out.
    let token = "hardening-list-token";
    let server = Server::start(&sandbox, token, None, &[], &[]);
    let listed: Value = tokio::runtime::Runtime::new()
        .expect("tokio")
        .block_on(async {
            reqwest::Client::new()
                .get(format!("{}/api/v1/runs", server.base))
                .bearer_auth(token)
                .send()
                .await
                .expect("GET /runs")
                .json()
                .await
                .expect("a JSON list")
        });
    server.kill();
    let ids = |key: &str, field: &str| -> Vec<String> {
        listed[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} in {listed}"))
            .iter()
            .map(|run| run[field].as_str().expect("an id").to_owned())
            .collect()
    };
    assert_eq!(ids("runs", "runId"), intact.map(String::as_str), "{listed}");
    assert_eq!(
        ids("skipped", "run"),
        damaged.map(String::as_str),
        "{listed}"
    );
    for skipped in listed["skipped"].as_array().expect("skipped") {
        assert!(
            skipped["reason"]
                .as_str()
                .is_some_and(|r| r.contains("corrupt")),
            "{listed}"
        );
    }
}

/// The uid the tests give up root for (`nobody`).
const NOBODY: u32 = 65534;

/// Whether this process runs as root (file permissions do not stop root).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `trellis ARGS` in the sandbox, as `nobody` when the test runs as root.
fn trellis_unprivileged(sandbox: &Sandbox, args: &[&str]) -> CliOutput {
    let mut command = sandbox.command(args);
    if is_root() {
        let mut wrapped = Command::new("setpriv");
        wrapped
            .args([
                format!("--reuid={NOBODY}"),
                format!("--regid={NOBODY}"),
                "--clear-groups".to_owned(),
                "--".to_owned(),
                TRELLIS.to_owned(),
            ])
            .args(args)
            .current_dir(&sandbox.workspace)
            .env("TRELLIS_HOME", &sandbox.home)
            .env_remove("XDG_STATE_HOME")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command = wrapped;
    }
    finish(support::start(command), support::COMMAND_TIMEOUT, args)
}

/// Hands the sandbox to `nobody` when running as root, so that permissions apply.
fn give_sandbox_away(sandbox: &Sandbox) {
    if !is_root() {
        return;
    }
    let base = sandbox.workspace.parent().expect("sandbox root");
    for path in [base, sandbox.workspace.as_path()] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
}

fn run_doubling_unprivileged(sandbox: &Sandbox) -> CliOutput {
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 5}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    trellis_unprivileged(sandbox, &args)
}

/// Issue 19 #13: a read-only ledger said only "storage failure (SQLite extended code 8)".
#[test]
fn a_read_only_ledger_says_which_file_and_what_to_do_and_still_lists() {
    let sandbox = Sandbox::new();
    give_sandbox_away(&sandbox);
    let created = trellis_unprivileged(&sandbox, &["list"]);
    assert_eq!(created.code, Some(0), "{created:#?}");
    let ledger = sandbox.home.join("ledger.sqlite3");
    let mut permissions = std::fs::metadata(&ledger).expect("ledger").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o400);
    std::fs::set_permissions(&ledger, permissions).expect("chmod");
    let before = std::fs::read(&ledger).expect("ledger");

    let output = run_doubling_unprivileged(&sandbox);
    let shown = ledger.to_str().expect("UTF-8");
    assert_one_line_error(&output, &[shown, "read-only", "writable"]);
    assert_eq!(std::fs::read(&ledger).expect("ledger"), before, "untouched");
    let runs: Vec<_> = std::fs::read_dir(sandbox.home.join("runs"))
        .map(|d| d.filter_map(Result::ok).collect())
        .unwrap_or_default();
    assert!(runs.is_empty(), "no run directory is left: {runs:?}");

    // Reading a read-only ledger still works.
    let listed = trellis_unprivileged(&sandbox, &["list", "--json"]);
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    let value: Value = serde_json::from_str(listed.stdout.trim()).expect("json");
    assert_eq!(value, json!({"runs": []}));
}

/// A shell script for a private mount namespace: a 3 MiB tmpfs at `$HOME_DIR`, one run that
/// succeeds, the rest of the space filled, then the run that must fail; its exit code and
/// stderr are printed between markers.
const FULL_DISK_SCRIPT: &str = r#"
set -u
mount -t tmpfs -o size=3m tmpfs "$HOME_DIR" || { echo "no-tmpfs"; exit 0; }
"$TRELLIS" "$@" >/dev/null 2>&1 || { echo "first-run-failed"; exit 0; }
dd if=/dev/zero of="$HOME_DIR/filler" bs=4k 2>/dev/null
"$TRELLIS" "$@" >/dev/null 2>"$ERR_FILE"
echo "code=$?"
"#;

/// Issue 19 #13: a full disk said only "storage failure (SQLite extended code 13)". The home
/// is a small tmpfs in a private mount namespace (`unshare`), filled up before the second run.
#[test]
fn a_full_disk_says_which_ledger_and_what_to_do() {
    let sandbox = Sandbox::new();
    let home = sandbox.workspace.with_file_name("small-home");
    std::fs::create_dir_all(&home).expect("home");
    let err_file = sandbox.workspace.join("stderr.txt");
    let args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": 2}),
        &uniform_worker_plan(&[]),
    );
    let mut command = Command::new("unshare");
    command
        .args(["--user", "--map-root-user", "--mount", "bash", "-c"])
        .arg(FULL_DISK_SCRIPT)
        .arg("full-disk")
        .args(&args)
        .current_dir(&sandbox.workspace)
        .env("HOME_DIR", &home)
        .env("TRELLIS_HOME", &home)
        .env("TRELLIS", TRELLIS)
        .env("ERR_FILE", &err_file)
        .env_remove("XDG_STATE_HOME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = finish(
        support::start(command),
        support::COMMAND_TIMEOUT,
        &["unshare"],
    );
    let said = output.stdout.trim();
    if output.code != Some(0) || said == "no-tmpfs" {
        // Private mounts need user namespaces; CI must have them, elsewhere say so and stop.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI cannot make a full disk (unshare --user --mount): {output:#?}"
        );
        eprintln!("skipped: this machine cannot mount a private tmpfs: {output:#?}");
        return;
    }
    assert_eq!(said, "code=1", "{output:#?}");
    let stderr = std::fs::read_to_string(&err_file).expect("stderr");
    let error = CliOutput {
        code: Some(1),
        stdout: String::new(),
        stderr,
    };
    let ledger = home.join("ledger.sqlite3");
    assert_one_line_error(
        &error,
        &[
            ledger.to_str().expect("UTF-8"),
            "disk",
            "full",
            "free space",
        ],
    );
}
