//! A target branch that moved under the run: before pushing, `trellis run --pr` fetches the
//! target and merges it into the change; a conflict is left in the workspace's files with
//! conflict markers and routed to the worker as feedback, the worker's next round resolves it,
//! and the pushed run branch then contains the target — while the user's branch, HEAD and
//! index stay as they were. A target that merges cleanly is merged before the push.

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
fn a_target_that_merges_cleanly_is_merged_before_the_push() {
    let setup = Setup::new();
    setup.move_target("elsewhere", "NOTICE", "Moved on.\n");
    let target = git(&setup.origin, &["rev-parse", "main"]);
    let head_before = git(&setup.work, &["rev-parse", "HEAD"]);

    let out = setup.run_command("--pr").output().unwrap();
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
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
    setup.move_target(
        "elsewhere",
        "fixture.txt",
        "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n",
    );
    setup.github.require_checks(REPO, &["ci"]);
    let mut commented_on: Option<String> = None;
    let mut greened: Vec<String> = Vec::new();
    let out = drive(setup.start("--pr"), || {
        let Some((number, head)) = setup.pull() else {
            return;
        };
        match &commented_on {
            None => {
                setup.github.add_review_comment(
                    REPO,
                    number,
                    "greeting.txt",
                    1,
                    "Please thank the reviewers too.",
                );
                commented_on = Some(head);
            }
            Some(first) if *first != head && !greened.contains(&head) => {
                setup.set_check(&head, "success");
                greened.push(head);
            }
            Some(_) => {}
        }
    });
    let result = terminal(&out);
    // The second round (after the review comment) is delivered as ready, not sent back as an
    // unresolved conflict over the target's own fixture.
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(greened.len(), 1);
    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nThanks for the review!"
    );
}
