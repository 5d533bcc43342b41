//! `trellis run --template auto-research` with `options.iterations: 2` and the offline research
//! worker (`examples/offline/research_worker.py`) bound to every agent role: every role runs in
//! both iterations and the research folder ends archived with its `audit.json`; a judge's
//! `abort` undoes that iteration's change; an audit that asks for a repair gets one and a
//! re-audit; and `--push` pushes the run branch once per iteration to a local bare remote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use trellis_testkit::git::git;

struct Research {
    _dir: tempfile::TempDir,
    work: PathBuf,
    home: PathBuf,
    input: PathBuf,
}

impl Research {
    /// A workspace holding the offline worker, bound to every node by `plan`'s command.
    fn new(worker_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("offline")).unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline");
        std::fs::copy(
            examples.join("research_worker.py"),
            work.join("offline/research_worker.py"),
        )
        .unwrap();
        let mut command = vec!["python3", "offline/research_worker.py"];
        command.extend_from_slice(worker_args);
        let plan = json!({"kind": "command", "command": command});
        std::fs::write(work.join("offline/plan.json"), plan.to_string()).unwrap();
        let input = dir.path().join("input.json");
        let document = json!({"task": "Does caching help?", "options": {"iterations": 2}});
        std::fs::write(&input, document.to_string()).unwrap();
        Self {
            home: dir.path().join("home"),
            work,
            input,
            _dir: dir,
        }
    }

    fn trellis(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(args)
            .current_dir(&self.work)
            .env("TRELLIS_HOME", &self.home)
            .output()
            .unwrap()
    }

    /// Runs the template to its end; the run's status and its log messages.
    fn run(&self, extra: &[&str]) -> (Value, Vec<String>) {
        let input = self.input.to_str().unwrap();
        let mut args = vec![
            "run",
            "--template",
            "auto-research",
            "--input",
            input,
            "--uniform-runtime-config",
            "offline/plan.json",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = self.trellis(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let receipt: Value = serde_json::from_str(stdout.lines().next().unwrap_or("{}"))
            .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
        let run = receipt["runId"].as_str().unwrap().to_owned();
        let status: Value =
            serde_json::from_slice(&self.trellis(&["status", &run, "--json"]).stdout).unwrap();
        let logs = String::from_utf8_lossy(&self.trellis(&["logs", &run]).stdout).into_owned();
        let messages = logs
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|line| line["record"]["message"].as_str().map(str::to_owned))
            .collect();
        (status, messages)
    }

    fn research_file(&self, path: &str) -> PathBuf {
        self.work.join(".trellis/research").join(path)
    }
}

fn terminal(status: &Value) -> &Value {
    &status["status"]["terminalResult"]
}

/// How many executions each node had.
fn executions(status: &Value) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for execution in status["executions"].as_array().unwrap() {
        *counts
            .entry(execution["node"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    counts
}

fn ran(messages: &[String], label: &str) -> bool {
    messages.iter().any(|m| m == &format!("{label}: done"))
}

#[test]
fn two_iterations_run_every_role_and_leave_the_archive_and_its_audit() {
    let research = Research::new(&[]);
    let (status, messages) = research.run(&[]);
    assert_eq!(terminal(&status)["status"], "succeeded", "{status}");
    for iteration in ["000001", "000002"] {
        let mut roles = vec!["planner".to_owned()];
        for role in ["explorer", "synthesizer", "challenger"] {
            roles.push(format!("research_scout/{role}"));
        }
        roles.extend(["staging".to_owned(), "experiment".to_owned()]);
        for role in ["evidence", "method", "progress"] {
            roles.push(format!("research_judge/{role}"));
        }
        roles.push("adopt_iteration".to_owned());
        for role in roles {
            let label = format!("{role} in {iteration}");
            assert!(ran(&messages, &label), "{label} missing from {messages:#?}");
        }
    }
    let counts = executions(&status);
    for (node, expected) in [
        ("bootstrap", 1),
        ("topology_validation", 1),
        ("planner", 2),
        ("research_scout", 6),
        ("staging", 2),
        ("experiment", 2),
        ("research_judge", 6),
        ("adopt_iteration", 2),
        ("finalize_findings", 1),
        ("finalize_backlog", 1),
        ("finalize_state", 1),
        ("disposition_audit", 1),
        ("archive", 1),
    ] {
        assert_eq!(counts.get(node), Some(&expected), "{node}: {counts:?}");
    }
    assert!(!counts.contains_key("disposition_repair"), "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 27, "{counts:?}");

    let output = &terminal(&status)["output"];
    assert_eq!(output["archive"], ".trellis/research/archive/000001-000002");
    let audit: Value = serde_json::from_str(
        &std::fs::read_to_string(research.research_file("audit.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(audit["repaired"], false);
    assert_eq!(audit["parentArtifact"], "iterations/000002");
    assert!(
        research
            .research_file("archive/000001-000002/audit.json")
            .is_file()
    );
    let state = std::fs::read_to_string(research.research_file("state.json")).unwrap();
    assert!(state.contains("\"exhausted\""), "{state}");
    // Both adopted experiments' changes stay in the workspace.
    let findings = std::fs::read_to_string(research.work.join("findings.txt")).unwrap();
    assert_eq!(findings.lines().count(), 2, "{findings}");
}

#[test]
fn a_judge_abort_undoes_the_iteration_and_keeps_the_last_adopted_parent() {
    let research = Research::new(&["--abort-judge", "2"]);
    let (status, messages) = research.run(&[]);
    assert_eq!(terminal(&status)["status"], "succeeded", "{status}");
    assert!(ran(&messages, "adopt_iteration in 000001"), "{messages:#?}");
    assert!(ran(&messages, "abort_iteration in 000002"), "{messages:#?}");
    let counts = executions(&status);
    assert_eq!(counts.get("adopt_iteration"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("abort_iteration"), Some(&1), "{counts:?}");
    // The second experiment's line was taken back out; the first adoption is the parent.
    let findings = std::fs::read_to_string(research.work.join("findings.txt")).unwrap();
    assert_eq!(
        findings.lines().collect::<Vec<_>>(),
        ["iteration 000001: 12% faster with the cache"]
    );
    let decision =
        std::fs::read_to_string(research.research_file("iterations/000002/decision.json")).unwrap();
    assert!(decision.contains("\"aborted\""), "{decision}");
    let audit = std::fs::read_to_string(research.research_file("audit.json")).unwrap();
    let audit: Value = serde_json::from_str(&audit).unwrap();
    assert_eq!(audit["parentArtifact"], "iterations/000001");
}

#[test]
fn an_audit_that_asks_for_a_repair_gets_one_and_a_reaudit() {
    let research = Research::new(&["--audit-repair"]);
    let (status, _) = research.run(&[]);
    assert_eq!(terminal(&status)["status"], "succeeded", "{status}");
    let counts = executions(&status);
    for node in [
        "disposition_audit",
        "disposition_repair",
        "disposition_reaudit",
        "archive",
    ] {
        assert_eq!(counts.get(node), Some(&1), "{node}: {counts:?}");
    }
    let audit = std::fs::read_to_string(research.research_file("audit.json")).unwrap();
    let audit: Value = serde_json::from_str(&audit).unwrap();
    assert_eq!(audit["repaired"], true);
    assert_eq!(audit["findings"], "every disposition holds");
    assert!(research.research_file("repair.md").is_file());
}

#[test]
fn the_push_variant_pushes_the_run_branch_once_per_iteration() {
    let research = Research::new(&[]);
    let origin = research.work.parent().unwrap().join("origin.git");
    git(
        research.work.parent().unwrap(),
        &["init", "-q", "--bare", origin.to_str().unwrap()],
    );
    // Every update of a branch in the remote is logged, so the pushes can be counted.
    git(&origin, &["config", "core.logAllRefUpdates", "always"]);
    let work = &research.work;
    git(work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join(".gitignore"), "offline/\n").unwrap();
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", "init"]);
    git(work, &["remote", "add", "origin", origin.to_str().unwrap()]);
    git(work, &["push", "-q", "origin", "main"]);

    let (status, messages) = research.run(&["--push"]);
    assert_eq!(terminal(&status)["status"], "succeeded", "{status}");
    let counts = executions(&status);
    assert_eq!(counts.get("checkpoint_manifest"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("checkpoint_delivery"), Some(&2), "{counts:?}");
    for iteration in ["000001", "000002"] {
        assert!(ran(
            &messages,
            &format!("checkpoint_manifest in {iteration}")
        ));
    }
    let output = &terminal(&status)["output"];
    let branch = output["headBranch"].as_str().unwrap();
    assert!(branch.starts_with("trellis/"), "{output}");
    let updates = git(
        &origin,
        &[
            "reflog",
            "show",
            "--format=%H",
            &format!("refs/heads/{branch}"),
        ],
    );
    let pushed: Vec<&str> = updates.lines().collect();
    assert_eq!(pushed.len(), 2, "one push per iteration: {updates}");
    assert_eq!(Value::String(pushed[0].to_owned()), output["headRevision"]);
    // Each push carried its iteration: the manifest's title is the commit's subject.
    let subjects = git(&origin, &["log", "--format=%s", &format!("main..{branch}")]);
    assert_eq!(
        subjects.lines().collect::<Vec<_>>(),
        [
            "research 000002: 000002: adopted",
            "research 000001: 000001: adopted"
        ]
    );
    let first = git(&origin, &["show", &format!("{}:findings.txt", pushed[1])]);
    assert_eq!(first.lines().count(), 1, "{first}");
    assert_eq!(git(&origin, &["rev-list", "--count", "main"]), "1");
}
