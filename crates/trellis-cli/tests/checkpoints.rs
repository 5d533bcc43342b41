//! Subprocess tests of checkpoints and disposable verifier copies with the real binary, a real
//! git repository and offline command workers (`tests/checkpoint_workers/`): a software-change
//! run killed in its second repair round resumes from the checkpoint before that round with
//! the files of that moment, byte for byte, and re-runs only that round; a reviewer that
//! deletes every file reaches neither the candidate nor the delivery; the user's index, HEAD,
//! branches and stash never move.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{
    STATE_TIMEOUT, Sandbox, Signal, controller_pid, process_alive, python, send_signal, wait_until,
};

fn workers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/checkpoint_workers")
}

/// Runs git for the test's own set-up and checks, as the user would.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "User")
        .env("GIT_AUTHOR_EMAIL", "user@example.invalid")
        .env("GIT_COMMITTER_NAME", "User")
        .env("GIT_COMMITTER_EMAIL", "user@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The user's git state: index bytes, HEAD, every reference outside Trellis's namespace, stash.
fn user_state(root: &Path) -> (Vec<u8>, String, String, String) {
    let references = git(root, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter(|line| !line.starts_with("refs/trellis/"))
        .collect::<Vec<_>>()
        .join("\n");
    (
        std::fs::read(root.join(".git/index")).expect("index"),
        std::fs::read_to_string(root.join(".git/HEAD")).expect("HEAD"),
        references,
        git(root, &["stash", "list", "--format=%H"]),
    )
}

/// A repository with a commit, a branch, a stash and a staged change of the user's own.
fn user_repository(root: &Path) {
    git(root, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(
        root.join(".gitignore"),
        "graph.json\ninput.json\nplan.json\n",
    )
    .unwrap();
    std::fs::write(root.join("greeting.txt"), "Hi\n").unwrap();
    std::fs::write(
        root.join("obsolete.txt"),
        "to be deleted by the first round\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "# demo\n").unwrap();
    git(root, &["add", "--all"]);
    git(root, &["commit", "--quiet", "-m", "initial"]);
    git(root, &["branch", "feature"]);
    std::fs::write(root.join("README.md"), "# demo, stashed\n").unwrap();
    git(root, &["stash", "--quiet"]);
    std::fs::write(root.join("README.md"), "# demo, staged\n").unwrap();
    git(root, &["add", "README.md"]);
}

fn command(script: &str, args: &[&str]) -> Value {
    let mut argv = vec![json!(python()), json!(workers().join(script))];
    argv.extend(args.iter().map(|a| json!(a)));
    json!({"kind": "command", "command": argv})
}

fn manifest(markers: &Path, round: u32, attempt: u32) -> Value {
    let path = markers.join(format!("manifest-round{round}-{attempt}.json"));
    serde_json::from_slice(&std::fs::read(&path).expect("manifest")).expect("manifest JSON")
}

/// Runs software-change with the repairer, SIGKILLs the controller in round 3 (the second
/// repair), resumes (from checkpoint 3, or plainly) and checks that round 3 ran again from
/// exactly the files it first started from, with everything before it reused.
fn killed_in_the_second_repair_round(resume: &[&str]) {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    let markers = sandbox.home.parent().expect("sandbox root").join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let user = user_state(root);
    let marker_dir = markers.to_str().unwrap();
    let plan = json!({"nodes": {
        "worker": command("repairer.py", &[marker_dir]),
        "acceptance": command("reviewer.py", &["acceptance"]),
        "code": command("reviewer.py", &["code"]),
    }});
    let run = sandbox.start_software_change(&plan, &[]);

    // Round 3 (the second repair) has started and changed files; kill the controller.
    wait_until("round 3 to start", STATE_TIMEOUT, || {
        markers.join("round3-started").exists().then_some(())
    });
    let controller = controller_pid(&run).expect("the controller runs");
    send_signal(controller, Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        controller_pid(&run).is_none().then_some(())
    });

    let listed = sandbox
        .trellis(&["checkpoints", &run, "--json"])
        .success()
        .json();
    let checkpoints = listed["checkpoints"].as_array().expect("checkpoints");
    assert_eq!(
        checkpoints.len(),
        3,
        "one before each worker round: {listed}"
    );
    for (index, checkpoint) in checkpoints.iter().enumerate() {
        assert_eq!(checkpoint["id"], json!(index + 1));
        assert_eq!(
            checkpoint["before"],
            json!({"kind": "node", "name": "worker"})
        );
    }
    // Round 1 changed greeting.txt, deleted obsolete.txt and added progress.txt and a note;
    // round 2 changed greeting.txt and progress.txt and added a note.
    assert_eq!(checkpoints[1]["filesChanged"], json!(4));
    assert_eq!(checkpoints[2]["filesChanged"], json!(3));
    let page = sandbox
        .trellis(&[
            "checkpoints",
            &run,
            "--json",
            "--after",
            "1",
            "--limit",
            "1",
        ])
        .success()
        .json();
    assert_eq!(page["checkpoints"][0]["id"], json!(2));
    assert_eq!(page["nextAfter"], json!(2));

    let namespace = format!("refs/trellis/checkpoints/{run}/");
    let kept = git(root, &["for-each-ref", "--format=%(refname)", &namespace]);
    assert_eq!(kept.lines().count(), 3, "kept for the resume: {kept}");

    // A controller killed mid-checkpoint leaves git's lock on the run's private index; the
    // resume, holding the workspace, clears it instead of failing on it.
    let lock = sandbox
        .home
        .join("runs")
        .join(&run)
        .join("checkpoint.index.lock");
    std::fs::write(&lock, b"left by a killed git").unwrap();

    let mut args = vec!["resume", run.as_str()];
    args.extend_from_slice(resume);
    args.extend(["--detach", "--json"]);
    let receipt = sandbox.trellis(&args).success().json();
    let successor = receipt["runId"].as_str().expect("successor").to_owned();
    let result = sandbox.wait_finished(&successor);
    assert_eq!(result["status"], "succeeded", "{result}");

    // The successor's success pruned its own checkpoints and its predecessor's.
    let left = git(
        root,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/trellis/checkpoints/",
        ],
    );
    assert_eq!(left, "", "no checkpoint reference is left");
    let index = sandbox
        .home
        .join("runs")
        .join(&run)
        .join("checkpoint.index");
    assert!(!index.exists(), "the predecessor's private index is gone");

    // Round 3 ran again from exactly the files it first started from.
    assert_eq!(manifest(&markers, 3, 2), manifest(&markers, 3, 1));
    assert!(!markers.join("manifest-round1-2.json").exists());
    assert!(!markers.join("manifest-round2-2.json").exists());
    let restored = manifest(&markers, 3, 2);
    assert!(
        restored.get("obsolete.txt").is_none(),
        "deleted file stays deleted"
    );
    assert!(
        restored.get("notes/round1.txt").is_some(),
        "untracked file is back"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("greeting.txt")).unwrap(),
        "Hello, world!\n"
    );

    // Only round 3 (worker and both reviews) ran again; everything before was reused.
    let status = sandbox.status(&successor);
    let executions = status["executions"].as_array().expect("executions");
    let ran: Vec<&str> = executions
        .iter()
        .filter(|e| e.get("reusedFrom").is_none())
        .map(|e| e["node"].as_str().unwrap())
        .collect();
    let mut ran_sorted = ran.clone();
    ran_sorted.sort_unstable();
    assert_eq!(ran_sorted, ["acceptance", "code", "worker"], "{status}");
    assert_eq!(
        executions.len(),
        9,
        "three rounds of worker and two reviews"
    );

    assert_eq!(user_state(root), user, "the user's git state never moved");
    sandbox.wait_no_processes();
}

#[test]
fn a_run_killed_in_its_second_repair_round_resumes_from_the_checkpoint_before_it() {
    killed_in_the_second_repair_round(&["--from-checkpoint", "3"]);
}

#[test]
fn plain_resume_restores_the_latest_checkpoint_when_the_workspace_moved_on() {
    killed_in_the_second_repair_round(&[]);
}

/// A plan whose worker appends to `attempts.txt` and then fails, ending the run.
fn failing_plan() -> Value {
    let fail = "cat >/dev/null; echo attempt >> attempts.txt; exit 1";
    json!({"nodes": {
        "worker": {"kind": "command", "command": ["/bin/sh", "-c", fail]},
        "acceptance": command("reviewer.py", &["acceptance"]),
        "code": command("reviewer.py", &["code"]),
    }})
}

#[test]
fn resume_from_a_checkpoint_refuses_a_workspace_changed_after_the_run_ended_unless_forced() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    let run = sandbox.start_software_change(&failing_plan(), &[]);
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(
        std::fs::read_to_string(root.join("attempts.txt")).unwrap(),
        "attempt\n"
    );

    // The user works on after the failure.
    std::fs::write(root.join("mine.txt"), "the user's own fix\n").unwrap();
    let refused = sandbox.trellis(&["resume", &run, "--from-checkpoint", "1", "--json"]);
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    assert!(refused.stderr.contains("--force"), "{refused:#?}");
    assert!(root.join("mine.txt").exists(), "a refusal changes nothing");
    let unknown = sandbox.trellis(&["resume", &run, "--from-checkpoint", "9", "--force"]);
    assert_eq!(unknown.code, Some(1), "{unknown:#?}");
    assert!(unknown.stderr.contains("no checkpoint 9"), "{unknown:#?}");

    let receipt = sandbox
        .trellis(&[
            "resume",
            &run,
            "--from-checkpoint",
            "1",
            "--force",
            "--detach",
            "--json",
        ])
        .success()
        .json();
    let successor = receipt["runId"].as_str().unwrap().to_owned();
    sandbox.wait_finished(&successor);
    // Restored to before the first attempt (no attempts.txt, no mine.txt), then one attempt.
    assert_eq!(
        std::fs::read_to_string(root.join("attempts.txt")).unwrap(),
        "attempt\n"
    );
    assert!(!root.join("mine.txt").exists());
    let saved = git(
        root,
        &["for-each-ref", "--format=%(refname)", "refs/trellis/saved/"],
    );
    let saved = saved.lines().next().expect("the replaced state was kept");
    assert_eq!(
        git(root, &["show", &format!("{saved}:mine.txt")]),
        "the user's own fix"
    );
    sandbox.wait_no_processes();
}

/// Issue 29 #9: `resume --from-checkpoint` rewrites the work tree with git; a resume killed
/// mid-restore (SIGKILL, nothing to clean up) must not leave that git running. Here git's
/// `read-tree` is held in a wrapper that notes its pid and sleeps: once the resume is killed
/// the wrapper is gone within a moment, not 30 s later.
#[test]
fn a_resume_killed_mid_restore_leaves_no_git_behind() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    let run = sandbox.start_software_change(&failing_plan(), &[]);
    assert_eq!(sandbox.wait_finished(&run)["status"], "failed");

    let real_git = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .expect("sh")
            .stdout,
    )
    .expect("UTF-8");
    let wrappers = tempfile::tempdir().expect("tempdir");
    let pid_file = wrappers.path().join("read-tree.pid");
    let wrapper = wrappers.path().join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" read-tree \"*) echo $$ > '{}'; sleep 30;; esac\nexec {} \"$@\"\n",
            pid_file.display(),
            real_git.trim()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!(
        "{}:{}",
        wrappers.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut resume = sandbox.spawn_with_env(
        &[
            "resume",
            &run,
            "--from-checkpoint",
            "1",
            "--force",
            "--detach",
        ],
        &[("PATH", path.as_str())],
    );
    let deadline = std::time::Instant::now() + STATE_TIMEOUT;
    let git_pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            break pid;
        }
        if let Ok(Some(_)) = resume.child.try_wait() {
            let output = support::finish(resume, STATE_TIMEOUT, &["resume"]);
            panic!("the resume ended before its restore reached read-tree: {output:#?}");
        }
        assert!(std::time::Instant::now() < deadline, "no read-tree");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(process_alive(git_pid));
    let _ = resume.child.kill();
    let _ = resume.child.wait();
    wait_until(
        "git to stop with the resume",
        std::time::Duration::from_secs(5),
        || (!process_alive(git_pid)).then_some(()),
    );
}

#[test]
fn a_worktree_run_leaves_the_checkout_alone_and_keeps_its_worktree_until_discarded() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    let user = user_state(root);
    let run = sandbox.start_software_change(&failing_plan(), &["--workspace", "worktree"]);
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        !root.join("attempts.txt").exists(),
        "the checkout is untouched"
    );
    assert_eq!(user_state(root), user);

    let status = sandbox.status(&run);
    let worktree = PathBuf::from(status["worktree"]["path"].as_str().expect("worktree"));
    assert_eq!(status["worktree"]["exists"], json!(true));
    assert!(
        worktree.join("attempts.txt").exists(),
        "the run worked there"
    );
    let listed = sandbox.trellis(&["list", "--json"]).success().json();
    assert_eq!(
        listed["runs"][0]["worktree"]["path"],
        status["worktree"]["path"]
    );
    assert!(
        sandbox
            .trellis(&["status", &run])
            .success()
            .stdout
            .contains("worktree"),
        "the readable status names it"
    );

    // Its successor works in the same worktree, from the checkpoint before the worker.
    let receipt = sandbox
        .trellis(&[
            "resume",
            &run,
            "--from-checkpoint",
            "1",
            "--detach",
            "--json",
        ])
        .success()
        .json();
    let successor = receipt["runId"].as_str().unwrap().to_owned();
    sandbox.wait_finished(&successor);
    assert_eq!(sandbox.status(&successor)["worktree"], status["worktree"]);
    assert_eq!(
        std::fs::read_to_string(worktree.join("attempts.txt")).unwrap(),
        "attempt\n",
        "restored to before the first attempt, then attempted once"
    );
    let own = sandbox
        .trellis(&["checkpoints", &successor, "--json"])
        .success()
        .json();
    assert_eq!(own["checkpoints"].as_array().map(Vec::len), Some(1));
    assert!(
        !root.join("attempts.txt").exists(),
        "the checkout is still untouched"
    );

    let discarded = sandbox
        .trellis(&["discard-workspace", &run])
        .success()
        .json();
    assert_eq!(discarded["removed"], json!(true));
    assert!(!worktree.exists());
    assert!(!git(root, &["worktree", "list"]).contains(worktree.to_str().unwrap()));
    assert_eq!(sandbox.status(&run)["worktree"]["exists"], json!(false));
    let in_place = sandbox.trellis(&["discard-workspace", &successor]);
    assert_eq!(
        in_place.code,
        Some(0),
        "the successor shares it: gone already"
    );
    assert_eq!(user_state(root), user);
    sandbox.wait_no_processes();
}

#[test]
fn a_reviewer_that_deletes_everything_reaches_neither_the_candidate_nor_the_delivery() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    // Push delivery refuses uncommitted work (it would ship with the run's change).
    git(root, &["commit", "--quiet", "-m", "staged work"]);
    let remote = sandbox.home.parent().unwrap().join("remote.git");
    git(
        root,
        &["init", "--quiet", "--bare", remote.to_str().unwrap()],
    );
    git(root, &["remote", "add", "origin", remote.to_str().unwrap()]);
    let edit = "cat >/dev/null; echo 'Hello, world!' > greeting.txt; echo '{\"output\":null}'";
    let plan = json!({"nodes": {
        "worker": {"kind": "command", "command": ["/bin/sh", "-c", edit]},
        "acceptance": command("reviewer.py", &["acceptance", "vandal"]),
        "code": command("reviewer.py", &["code", "vandal"]),
        "deliver": {"kind": "git_delivery"},
    }});
    let run = sandbox.start_software_change(&plan, &["--push"]);
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "succeeded", "{result}");

    for file in ["greeting.txt", "README.md", "obsolete.txt", ".gitignore"] {
        assert!(root.join(file).exists(), "{file} survived the reviewers");
    }
    assert_eq!(
        std::fs::read_to_string(root.join("greeting.txt")).unwrap(),
        "Hello, world!\n"
    );
    let branches = git(&remote, &["for-each-ref", "--format=%(refname)"]);
    let pushed = branches
        .lines()
        .find(|r| r.starts_with("refs/heads/trellis/"))
        .unwrap_or_else(|| panic!("a run branch was pushed: {branches}"));
    let files = git(&remote, &["ls-tree", "-r", "--name-only", pushed]);
    for file in ["greeting.txt", "README.md", "obsolete.txt", ".gitignore"] {
        assert!(
            files.lines().any(|f| f == file),
            "{file} delivered: {files}"
        );
    }
    assert_eq!(
        git(&remote, &["show", &format!("{pushed}:greeting.txt")]),
        "Hello, world!"
    );
    // The copies are gone.
    let copies = sandbox.home.join("runs").join(&run).join("copies");
    assert!(!copies.exists(), "verifier copies are removed");
    // So are those made in memory (a small workspace's go to /dev/shm when it is a tmpfs).
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(&sandbox.home).unwrap().uid();
    let in_memory = Path::new("/dev/shm")
        .join(format!("trellis-{uid}"))
        .join(&run);
    assert!(!in_memory.exists(), "{} is removed", in_memory.display());
    sandbox.wait_no_processes();
}

#[test]
fn checkpoints_are_switched_by_one_flag_pair_for_graphspec_runs() {
    let sandbox = Sandbox::new();
    let root = &sandbox.workspace;
    user_repository(root);
    let count = |run: &str| {
        let listed = sandbox
            .trellis(&["checkpoints", run, "--json"])
            .success()
            .json();
        listed["checkpoints"].as_array().expect("checkpoints").len()
    };
    let off = sandbox.start_software_change(&failing_plan(), &["--checkpoints", "off"]);
    sandbox.wait_finished(&off);
    assert_eq!(count(&off), 0, "--checkpoints off records none");
    let also_off = sandbox.start_software_change(&failing_plan(), &["--no-checkpoints"]);
    sandbox.wait_finished(&also_off);
    assert_eq!(count(&also_off), 0, "--no-checkpoints records none");
    let on = sandbox.start_software_change(&failing_plan(), &["--checkpoints"]);
    sandbox.wait_finished(&on);
    assert_eq!(count(&on), 1, "a bare --checkpoints turns them on");
    sandbox.wait_no_processes();
}
