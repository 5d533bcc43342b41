//! Subprocess tests of `trellis prune` with the real binary and a real git repository: the
//! checkpoints of a run a successor resumed go once the chain has ended, the latest run's
//! checkpoints, saved workspace states and a failed run's worktree go by age, and a run that
//! is still going, references outside Trellis's namespaces and those of runs the ledger does
//! not know stay. Verifier copies a killed controller left go when its run is found lost, and
//! `prune` removes any an ended run still has, as it does the worker-host transfer references
//! (`refs/trellis/remote/…`) of an ended run.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{STATE_TIMEOUT, Sandbox, Signal, controller_pid, python, send_signal, wait_until};
use trellis_testkit::git::git;

fn workers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/checkpoint_workers")
}

/// A plan whose worker runs `script` (after reading its input) and then fails.
fn failing_plan(script: &str) -> Value {
    let reviewer = |name: &str| {
        json!({"kind": "command", "command": [
            python(), workers().join("reviewer.py"), name,
        ]})
    };
    let fail = format!("cat >/dev/null; {script}; exit 1");
    json!({"nodes": {
        "worker": {"kind": "command", "command": ["/bin/sh", "-c", fail]},
        "acceptance": reviewer("acceptance"),
        "code": reviewer("code"),
    }})
}

/// Every reference of the repository, by name.
fn references(root: &Path) -> Vec<String> {
    git(root, &["for-each-ref", "--format=%(refname)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn of_run(references: &[String], namespace: &str, run: &str) -> usize {
    let prefix = format!("refs/trellis/{namespace}/{run}/");
    references.iter().filter(|r| r.starts_with(&prefix)).count()
}

/// The (kind, run, reason) of every item a prune report names, sorted.
fn pruned(report: &Value) -> Vec<(String, String, String)> {
    let mut items: Vec<_> = report["pruned"]
        .as_array()
        .expect("pruned")
        .iter()
        .map(|item| {
            let text = |field: &str| item[field].as_str().unwrap_or_default().to_owned();
            (text("kind"), text("runId"), text("reason"))
        })
        .collect();
    items.sort();
    items
}

fn item(kind: &str, run: &str, reason: &str) -> (String, String, String) {
    (kind.to_owned(), run.to_owned(), reason.to_owned())
}

/// A repository with one commit (`greeting.txt`) that ignores the run's plan file.
fn init_repository(root: &Path) {
    git(root, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(root.join(".gitignore"), "plan.json\n").unwrap();
    std::fs::write(root.join("greeting.txt"), "Hi\n").unwrap();
    git(root, &["add", "--all"]);
    git(root, &["commit", "--quiet", "-m", "initial"]);
}

#[test]
fn prune_removes_what_no_run_will_use_and_leaves_live_runs_and_user_refs_alone() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    init_repository(root);
    git(root, &["branch", "feature"]);
    // A reference of a run this ledger does not know (another ledger's, say).
    git(
        root,
        &["update-ref", "refs/trellis/checkpoints/stranger/1", "HEAD"],
    );

    // A fails; the user works on; a forced resume from its first checkpoint keeps that work
    // under refs/trellis/saved/A/… and B fails too.
    let first = sandbox.start_software_change(&failing_plan("echo attempt >> attempts.txt"), &[]);
    assert_eq!(sandbox.wait_finished(&first)["status"], "failed");
    std::fs::write(root.join("mine.txt"), "the user's own fix\n").unwrap();
    let receipt = sandbox
        .trellis(&[
            "resume",
            &first,
            "--from-checkpoint",
            "1",
            "--force",
            "--detach",
            "--json",
        ])
        .success()
        .json();
    let second = receipt["runId"].as_str().unwrap().to_owned();
    assert_eq!(sandbox.wait_finished(&second)["status"], "failed");

    // C works in a worktree and waits until released: it is live.
    let release = sandbox.home.parent().expect("sandbox root").join("release");
    let wait = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done",
        release.display()
    );
    let live = sandbox.start_software_change(&failing_plan(&wait), &["--workspace", "worktree"]);
    wait_until("C's first checkpoint", STATE_TIMEOUT, || {
        of_run(&references(root), "checkpoints", &live)
            .gt(&0)
            .then_some(())
    });
    let before = references(root);
    assert_eq!(of_run(&before, "saved", &first), 1, "{before:?}");
    let user: Vec<_> = before
        .iter()
        .filter(|r| !r.starts_with("refs/trellis/"))
        .cloned()
        .collect();

    // A dry run reports and removes nothing: only A's checkpoints go at the default age
    // (B superseded them); C is live.
    let dry = sandbox
        .trellis(&["prune", "--dry-run", "--json"])
        .success()
        .json();
    assert_eq!(dry["dryRun"], json!(true));
    assert_eq!(
        pruned(&dry),
        vec![item("checkpoints", &first, "superseded")]
    );
    assert_eq!(dry["liveRunsSkipped"], json!([live]));
    assert_eq!(references(root), before, "a dry run deletes nothing");

    let report = sandbox.trellis(&["prune", "--json"]).success().json();
    assert_eq!(pruned(&report), pruned(&dry));
    let after = references(root);
    assert_eq!(of_run(&after, "checkpoints", &first), 0, "{after:?}");
    assert!(
        of_run(&after, "checkpoints", &second) > 0,
        "B is the latest attempt"
    );
    assert_eq!(of_run(&after, "saved", &first), 1, "younger than a week");

    // Everything old enough, but the live run and the stranger.
    let all = sandbox
        .trellis(&["prune", "--older-than", "0s", "--json"])
        .success()
        .json();
    assert_eq!(
        pruned(&all),
        vec![
            item("checkpoints", &second, "olderThan"),
            item("saved", &first, "olderThan"),
        ]
    );
    let after = references(root);
    assert_eq!(of_run(&after, "checkpoints", &second), 0, "{after:?}");
    assert_eq!(of_run(&after, "saved", &first), 0, "{after:?}");
    assert!(of_run(&after, "checkpoints", &live) > 0, "C is live");
    assert!(after.contains(&"refs/trellis/checkpoints/stranger/1".to_owned()));

    // C ends failed: its checkpoints and its worktree go.
    let worktree = PathBuf::from(
        sandbox.status(&live)["worktree"]["path"]
            .as_str()
            .expect("worktree")
            .to_owned(),
    );
    std::fs::write(&release, "").unwrap();
    assert_eq!(sandbox.wait_finished(&live)["status"], "failed");
    assert!(worktree.exists());
    let last = sandbox
        .trellis(&["prune", "--older-than", "0s"])
        .success()
        .stdout;
    assert!(last.contains("worktree of run"), "{last}");
    assert!(!worktree.exists());
    let after = references(root);
    assert_eq!(of_run(&after, "checkpoints", &live), 0, "{after:?}");
    let user_after: Vec<_> = after
        .iter()
        .filter(|r| !r.starts_with("refs/trellis/"))
        .cloned()
        .collect();
    assert_eq!(user_after, user, "user references are never touched");
    assert!(after.contains(&"refs/trellis/checkpoints/stranger/1".to_owned()));
    let nothing = sandbox
        .trellis(&["prune", "--older-than", "0s"])
        .success()
        .stdout;
    assert!(nothing.contains("nothing to prune"), "{nothing}");
    sandbox.wait_no_processes();
}

/// The start and result references a worker host without this host's files leaves when its
/// run ends before the execution settled (a controller that died, say) go with their ended
/// run at any age; a live run's stay, as do those of runs the ledger does not know.
#[test]
fn worker_host_transfer_references_go_with_their_ended_run() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    init_repository(root);
    let ended = sandbox.start_software_change(&failing_plan("true"), &[]);
    assert_eq!(sandbox.wait_finished(&ended)["status"], "failed");
    let release = sandbox.home.parent().expect("sandbox root").join("release");
    let wait = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done",
        release.display()
    );
    let live = sandbox.start_software_change(&failing_plan(&wait), &["--workspace", "worktree"]);
    wait_until("the live run's first checkpoint", STATE_TIMEOUT, || {
        of_run(&references(root), "checkpoints", &live)
            .gt(&0)
            .then_some(())
    });
    // What `GET …/executions/1/workspace` and `PUT …/result` record, left behind.
    for run in [ended.as_str(), live.as_str(), "stranger"] {
        for end in ["start", "result"] {
            let name = format!("refs/trellis/remote/{run}/1/{end}");
            git(root, &["update-ref", &name, "HEAD"]);
        }
    }

    let report = sandbox.trellis(&["prune", "--json"]).success().json();
    assert_eq!(pruned(&report), vec![item("remote", &ended, "ended")]);
    assert_eq!(report["liveRunsSkipped"], json!([live]));
    let after = references(root);
    assert_eq!(of_run(&after, "remote", &ended), 0, "{after:?}");
    assert_eq!(of_run(&after, "remote", &live), 2, "{after:?}");
    assert_eq!(of_run(&after, "remote", "stranger"), 2, "{after:?}");
    assert!(
        of_run(&after, "checkpoints", &ended) > 0,
        "its checkpoints go by age, not with the transfers"
    );

    std::fs::write(&release, "").unwrap();
    assert_eq!(sandbox.wait_finished(&live)["status"], "failed");
    let text = sandbox.trellis(&["prune"]).success().stdout;
    assert!(
        text.contains("removed 2 worker-host transfer reference(s) of run"),
        "{text}"
    );
    let after = references(root);
    assert_eq!(of_run(&after, "remote", &live), 0, "{after:?}");
    assert_eq!(of_run(&after, "remote", "stranger"), 2, "{after:?}");
    sandbox.wait_no_processes();
}

/// A pruned checkpoint is listed as no longer kept; once git has collected its objects, a
/// resume from it is refused with what to do instead, and nothing in the workspace changes.
#[test]
fn a_pruned_and_collected_checkpoint_is_listed_as_such_and_refused_clearly() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    init_repository(root);
    // Untracked work only the checkpoint holds, so its tree is reachable from nothing else.
    std::fs::write(root.join("scratch.txt"), "only in the checkpoint\n").unwrap();

    let run = sandbox.start_software_change(&failing_plan("true"), &[]);
    assert_eq!(sandbox.wait_finished(&run)["status"], "failed");
    let listed = sandbox
        .trellis(&["checkpoints", &run, "--json"])
        .success()
        .json();
    assert_eq!(listed["checkpoints"][0]["kept"], json!(true), "{listed}");

    sandbox.trellis(&["prune", "--older-than", "0s"]).success();
    let listed = sandbox
        .trellis(&["checkpoints", &run, "--json"])
        .success()
        .json();
    let checkpoints = listed["checkpoints"].as_array().expect("checkpoints");
    assert!(!checkpoints.is_empty(), "{listed}");
    assert!(
        checkpoints.iter().all(|c| c["kept"] == json!(false)),
        "{listed}"
    );
    let table = sandbox.trellis(&["checkpoints", &run]).success().stdout;
    assert!(table.contains("(pruned)"), "{table}");

    std::fs::remove_file(root.join("scratch.txt")).unwrap();
    git(root, &["reflog", "expire", "--expire=now", "--all"]);
    git(root, &["gc", "--quiet", "--prune=now"]);
    let refused = sandbox.trellis(&["resume", &run, "--from-checkpoint", "1", "--force"]);
    assert_ne!(refused.code, Some(0), "{refused:#?}");
    assert!(
        refused.stderr.contains("was pruned") && refused.stderr.contains("trellis checkpoints"),
        "{refused:#?}"
    );
    assert!(!root.join("scratch.txt").exists(), "nothing was restored");
    sandbox.wait_no_processes();
}

/// The places `trellis prune --json` reported as copies of `run`, sorted.
fn pruned_copies(report: &Value, run: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = report["pruned"]
        .as_array()
        .expect("pruned")
        .iter()
        .filter(|item| item["kind"] == "copies" && item["runId"] == run)
        .map(|item| {
            assert_eq!(item["reason"], "ended", "{item}");
            PathBuf::from(item["path"].as_str().expect("path"))
        })
        .collect();
    paths.sort();
    paths
}

/// Starts a software-change run in a fresh repository whose two reviewers say where their
/// copies are and then work until stopped; returns the run, its copies (waited for) and the
/// directory that holds them all.
fn run_with_reviewers_in_copies(sandbox: &Sandbox) -> (String, Vec<PathBuf>, PathBuf) {
    init_repository(&sandbox.workspace);
    let seen = sandbox.home.parent().expect("sandbox root").join("seen");
    std::fs::create_dir_all(&seen).unwrap();
    let reviewer = |role: &str| {
        let script = format!(
            "cat >/dev/null; pwd > '{}/{role}'; sleep 600",
            seen.display()
        );
        json!({"kind": "command", "command": ["/bin/sh", "-c", script]})
    };
    let plan = json!({"nodes": {
        "worker": {"kind": "command", "command": ["/bin/sh", "-c",
            "cat >/dev/null; echo 'Hi!' > greeting.txt; echo '{\"output\":null}'"]},
        "acceptance": reviewer("acceptance"),
        "code": reviewer("code"),
    }});
    let run = sandbox.start_software_change(&plan, &[]);
    let copies: Vec<PathBuf> = ["acceptance", "code"]
        .iter()
        .map(|role| {
            let said = seen.join(role);
            wait_until("a reviewer to start in its copy", STATE_TIMEOUT, || {
                let text = std::fs::read_to_string(&said).ok()?;
                text.ends_with('\n').then(|| PathBuf::from(text.trim_end()))
            })
        })
        .collect();
    for copy in &copies {
        assert!(copy.join("greeting.txt").exists(), "{}", copy.display());
        assert!(
            !copy.starts_with(&sandbox.workspace),
            "a copy, not the workspace"
        );
    }
    let holder = copies[0].parent().expect("the run's copies").to_path_buf();
    assert!(
        copies
            .iter()
            .all(|copy| copy.parent() == Some(holder.as_path()))
    );
    (run, copies, holder)
}

fn kill_controller(run: &str) {
    let controller = controller_pid(run).expect("the controller runs");
    send_signal(controller, Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        controller_pid(run).is_none().then_some(())
    });
}

fn assert_lost(sandbox: &Sandbox, run: &str) {
    assert_eq!(
        sandbox.status(run)["status"]["terminalResult"],
        json!({"status": "failed", "reason": "runtime_lost"})
    );
}

#[test]
fn copies_a_killed_controller_left_go_when_a_command_finds_the_run_lost() {
    let sandbox = Sandbox::new();
    let (run, copies, _) = run_with_reviewers_in_copies(&sandbox);
    kill_controller(&run);
    assert!(copies.iter().all(|copy| copy.exists()), "left behind");
    // `status` finds the run lost, stops the reviewers and removes their copies (in memory
    // they would otherwise stay until the machine restarts).
    assert_lost(&sandbox, &run);
    for copy in &copies {
        assert!(!copy.exists(), "{} is removed", copy.display());
    }
    sandbox.wait_no_processes();
}

#[test]
fn prune_ends_lost_runs_and_removes_the_copies_an_ended_run_still_has() {
    let sandbox = Sandbox::new();
    let (run, copies, holder) = run_with_reviewers_in_copies(&sandbox);

    // While the run is going, prune leaves its copies alone.
    let live = sandbox
        .trellis(&["prune", "--older-than", "0s", "--json"])
        .success()
        .json();
    assert!(pruned_copies(&live, &run).is_empty(), "{live}");
    assert!(copies.iter().all(|copy| copy.exists()));

    // Once its controller is dead, a dry run still changes nothing: the run counts as live.
    kill_controller(&run);
    let dry = sandbox
        .trellis(&["prune", "--dry-run", "--json"])
        .success()
        .json();
    assert_eq!(dry["liveRunsSkipped"], json!([run]), "{dry}");
    assert!(copies.iter().all(|copy| copy.exists()));
    // Prune itself finds the run lost and ends it, which removes its copies.
    let found = sandbox.trellis(&["prune", "--json"]).success().json();
    assert_eq!(pruned_copies(&found, &run), vec![holder.clone()], "{found}");
    assert_lost(&sandbox, &run);
    assert!(copies.iter().all(|copy| !copy.exists()));

    // Copies an ended run still has (here put back by hand, as a removal that failed would
    // leave them) are prune's, whatever their age; a dry run only lists them.
    let on_disk = sandbox.home.join("runs").join(&run).join("copies");
    std::fs::create_dir_all(on_disk.join("9")).unwrap();
    let mut leftovers = vec![on_disk.clone()];
    if holder != on_disk {
        std::fs::create_dir_all(copies[0].join("leftover")).unwrap();
        leftovers.push(holder);
    }
    leftovers.sort();
    let dry = sandbox
        .trellis(&["prune", "--dry-run", "--json"])
        .success()
        .json();
    assert_eq!(pruned_copies(&dry, &run), leftovers, "{dry}");
    assert!(leftovers.iter().all(|place| place.exists()));
    let report = sandbox.trellis(&["prune", "--json"]).success().json();
    assert_eq!(pruned_copies(&report, &run), leftovers, "{report}");
    assert!(leftovers.iter().all(|place| !place.exists()));
    let again = sandbox.trellis(&["prune", "--json"]).success().json();
    assert!(pruned_copies(&again, &run).is_empty(), "{again}");
    sandbox.wait_no_processes();
}
