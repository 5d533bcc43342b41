//! A target branch that moved under the run: before pushing, `trellis run --pr` fetches the
//! target and merges it into the change; a conflict is left in the workspace's files with
//! conflict markers and routed to the worker as feedback, the worker's next round resolves it,
//! and the pushed run branch then contains the target — while the user's branch, HEAD and
//! index stay as they were. A target that merges cleanly but changes the candidate goes back
//! through the worker's round and the reviewers before it is delivered.

use serde_json::Value;
use trellis_testkit::git::git;

mod forge_support;

use forge_support::*;

/// A worker that writes the greeting, or — finding conflict markers in it — keeps both sides'
/// lines and drops the markers. With `offline/lazy-once` present it first leaves the markers
/// (only appending a line its reviewers like) and removes the flag. It appends each input it
/// got to `offline/inputs.jsonl`.
const RESOLVER: &str = r#"import json, os, sys
request = json.load(sys.stdin)
with open("offline/inputs.jsonl", "a") as log:
    log.write(json.dumps(request["input"]) + "\n")
text = open("greeting.txt").read() if os.path.exists("greeting.txt") else ""
if "<<<<<<<" in text and os.path.exists("offline/lazy-once"):
    os.remove("offline/lazy-once")
    text += "Done!\n"
elif "<<<<<<<" in text:
    markers = ("<<<<<<<", "=======", ">>>>>>>", "Done!")
    kept = [line for line in text.splitlines() if not line.startswith(markers)]
    text = "\n".join(kept) + "\n"
else:
    text = "Hello, world!\n"
with open("greeting.txt", "w") as out:
    out.write(text)
print(json.dumps({"output": None}))
"#;

/// Makes the worker node run `RESOLVER`.
fn resolve_with_the_test_worker(setup: &Setup) {
    let offline = setup.work.join("offline");
    std::fs::write(offline.join("resolver.py"), RESOLVER).unwrap();
    let mut plan: Value =
        serde_json::from_str(&std::fs::read_to_string(offline.join("plan.json")).unwrap()).unwrap();
    plan["nodes"]["worker"]["command"] = serde_json::json!(["python3", "offline/resolver.py"]);
    std::fs::write(offline.join("plan.json"), plan.to_string()).unwrap();
}

#[test]
fn a_resolution_that_leaves_markers_is_sent_back_before_it_is_delivered_as_done() {
    let setup = Setup::new();
    setup.move_target("elsewhere", "greeting.txt", "Howdy, partner!\n");
    resolve_with_the_test_worker(&setup);
    std::fs::write(setup.work.join("offline/lazy-once"), "").unwrap();
    let out = setup.run_command("--pr").output().unwrap();
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    let inputs = setup.worker_inputs_of("inputs.jsonl");
    assert_eq!(inputs.len(), 3, "{inputs:?}");
    let feedback = inputs[2]["deliveryFeedback"].as_str().unwrap_or_default();
    assert!(
        feedback.contains("still hold conflict markers") && feedback.contains("greeting.txt"),
        "{feedback}"
    );
    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nHowdy, partner!"
    );
}

#[test]
fn a_conflict_with_the_target_is_resolved_by_the_worker_in_the_next_round() {
    let setup = Setup::new();
    setup.move_target("elsewhere", "greeting.txt", "Howdy, partner!\n");
    let target = git(&setup.origin, &["rev-parse", "main"]);
    resolve_with_the_test_worker(&setup);
    let head_before = git(&setup.work, &["rev-parse", "HEAD"]);
    let index_before = std::fs::read(setup.work.join(".git/index")).unwrap();

    let out = setup.run_command("--pr").output().unwrap();
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");

    // Round one's delivery left the conflict in the file and told the worker where it is.
    let inputs = setup.worker_inputs_of("inputs.jsonl");
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    let feedback = inputs[1]["deliveryFeedback"].as_str().unwrap_or_default();
    assert!(
        feedback.contains("conflict markers") && feedback.contains("greeting.txt"),
        "{feedback}"
    );

    // The pushed run branch holds the resolution and descends from the moved target.
    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nHowdy, partner!"
    );
    git(
        &setup.origin,
        &["merge-base", "--is-ancestor", &target, &branch],
    );
    assert_eq!(setup.pulls_opened(), 1);
    assert_eq!(
        Value::String(git(&setup.origin, &["rev-parse", &branch])),
        result["output"]["headRevision"]
    );

    // The user's checkout: same HEAD and branch, byte-identical index, resolved work tree.
    assert_eq!(git(&setup.work, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(&setup.work, &["rev-parse", "main"]), head_before);
    assert_eq!(
        std::fs::read(setup.work.join(".git/index")).unwrap(),
        index_before
    );
    assert_eq!(
        std::fs::read_to_string(setup.work.join("greeting.txt")).unwrap(),
        "Hello, world!\nHowdy, partner!\n"
    );
}

#[test]
fn a_target_that_merges_cleanly_goes_back_through_review_before_it_is_pushed() {
    let setup = Setup::new();
    setup.move_target("elsewhere", "NOTICE", "Moved on.\n");
    let target = git(&setup.origin, &["rev-parse", "main"]);
    resolve_with_the_test_worker(&setup);
    let head_before = git(&setup.work, &["rev-parse", "HEAD"]);

    let out = setup.run_command("--pr").output().unwrap();
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");

    // The merge changed what the reviewers judged: a second round checked it (and the
    // reviewers judged it) before it was delivered.
    let inputs = setup.worker_inputs_of("inputs.jsonl");
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    let feedback = inputs[1]["deliveryFeedback"].as_str().unwrap_or_default();
    assert!(
        feedback.contains("merged into the workspace cleanly") && feedback.contains("NOTICE"),
        "{feedback}"
    );
    assert_eq!(setup.pulls_opened(), 1);

    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    git(
        &setup.origin,
        &["merge-base", "--is-ancestor", &target, &branch],
    );
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:NOTICE")]),
        "Moved on."
    );
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!"
    );
    // What is delivered is the merge the second round checked: the reviewed candidate (which
    // lacks the target's change) merged with the target.
    assert_eq!(
        git(&setup.origin, &["rev-parse", &format!("{branch}^2")]),
        target
    );
    let candidate_files = git(
        &setup.origin,
        &["ls-tree", "--name-only", &format!("{branch}^1")],
    );
    assert!(
        !candidate_files.lines().any(|name| name == "NOTICE"),
        "{candidate_files}"
    );
    // The merged file is in the work tree too (the next round builds on it); HEAD stays.
    assert_eq!(
        std::fs::read_to_string(setup.work.join("NOTICE")).unwrap(),
        "Moved on.\n"
    );
    assert_eq!(git(&setup.work, &["rev-parse", "HEAD"]), head_before);
}

#[test]
fn conflict_markers_the_target_itself_holds_are_not_the_runs() {
    let setup = Setup::new();
    // The target gains a fixture that holds conflict markers on purpose; it merges cleanly.
    let fixture = "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n";
    setup.move_target("elsewhere", "fixture.txt", fixture);
    setup.github.require_checks(REPO, &["ci"]);
    setup.record_worker_inputs();
    let mut greened: Vec<String> = Vec::new();
    let out = drive(setup.start("--pr"), || {
        if let Some((_, head)) = setup.pull()
            && !greened.contains(&head)
        {
            setup.set_check(&head, "success");
            greened.push(head);
        }
    });
    let result = terminal(&out);
    // The stand-in worker's first attempt is rejected by its reviewers; the accepted second is
    // merged with the target, which changed it, so a third round checked it; that one is delivered
    // as ready, not sent back as an unresolved conflict over the target's own fixture.
    assert_eq!(result["status"], "succeeded", "{result}");
    let inputs = setup.worker_inputs();
    assert_eq!(inputs.len(), 3, "{inputs:?}");
    let feedback = inputs[2]["deliveryFeedback"].as_str().unwrap_or_default();
    assert!(
        feedback.contains("merged into the workspace cleanly") && !feedback.contains("markers"),
        "{feedback}"
    );
    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:fixture.txt")]),
        fixture.trim_end()
    );
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nThanks for the review!"
    );
}
