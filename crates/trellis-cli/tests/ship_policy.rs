//! `trellis run --pr|--ship` against repositories with a merge policy, on the loopback fake
//! GitHub: a branch behind a merge queue is shipped by enqueueing (never the merge endpoint), a
//! ruleset requiring one check lets another failing check pass, a failing Actions check sends
//! its log excerpt to the worker's next round, and "strict" required checks make delivery merge
//! the moved target in and wait for the new head's checks before merging.

use serde_json::{Value, json};
use trellis_testkit::git::git;
use trellis_testkit::github::Action;

mod forge_support;

use forge_support::*;

fn merges(setup: &Setup) -> usize {
    setup.github.calls_to("PUT", "/merge").len()
}

#[test]
fn ship_behind_a_merge_queue_enqueues_and_waits_for_the_queue() {
    let setup = Setup::new();
    setup.github.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "merge_queue", "parameters": {
            "check_response_timeout_minutes": 60, "grouping_strategy": "ALLGREEN",
            "max_entries_to_build": 5, "max_entries_to_merge": 5, "merge_method": "SQUASH",
            "min_entries_to_merge": 1, "min_entries_to_merge_wait_minutes": 5,
        }})],
    );
    let mut completed = false;
    let out = drive(setup.start("--ship"), || {
        // The queue merges what delivery enqueued, once it saw it waiting there a while.
        if !completed && setup.github.merge_queue(REPO) == [1] && check_looks(&setup) >= 2 {
            assert!(!setup.github.is_merged(REPO, 1));
            setup.github.complete_merge_queue(REPO, 1);
            completed = true;
        }
    });
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert!(completed, "nothing was enqueued");
    assert!(setup.github.is_merged(REPO, 1));
    assert_eq!(merges(&setup), 0, "the merge endpoint was called");
    let enqueues = setup
        .github
        .calls_to("POST", "/graphql")
        .iter()
        .filter(|c| c.body.to_string().contains("enqueuePullRequest"))
        .count();
    assert_eq!(enqueues, 1);
    assert!(
        !result["output"]["mergeRevision"]
            .as_str()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_ruleset_requiring_one_check_lets_the_others_fail() {
    let setup = Setup::new();
    setup.github.set_branch_rules(
        REPO,
        "main",
        vec![json!({"type": "required_status_checks", "parameters": {
            "strict_required_status_checks_policy": false,
            "required_status_checks": [{"context": "ci"}],
        }})],
    );
    setup.github.require_checks(REPO, &["ci", "lint"]);
    let mut reported = None;
    let out = drive(setup.start("--ship"), || {
        if let (None, Some((_, head))) = (&reported, setup.pull()) {
            setup.set_check(&head, "success");
            setup
                .github
                .apply(Action::SetCheckRun {
                    repository: REPO.into(),
                    sha: Some(head.clone()),
                    pull: None,
                    name: "lint".into(),
                    status: "completed".into(),
                    conclusion: Some("failure".into()),
                    summary: "style nits".into(),
                })
                .unwrap();
            reported = Some(head);
        }
    });
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert!(setup.github.is_merged(REPO, 1));
    // Merged at the head judged once: the failing lint check sent nothing back.
    assert_eq!(
        Value::String(reported.unwrap()),
        result["output"]["headRevision"]
    );
    assert_eq!(merges(&setup), 1);
}

#[test]
fn a_failing_checks_log_excerpt_reaches_the_workers_next_round() {
    let setup = Setup::new();
    setup.record_worker_inputs();
    setup.github.require_checks(REPO, &["ci"]);
    let mut failed: Option<String> = None;
    let mut greened = false;
    let out = drive(setup.start("--pr"), || {
        let Some((number, head)) = setup.pull() else {
            return;
        };
        match &failed {
            None => {
                setup.set_check(&head, "failure");
                setup.github.set_job_log(
                    REPO,
                    number,
                    "ci",
                    "2026-12-05T19:00:00.0000000Z ##[group]Run tests\n\
                     \u{1b}[31merror\u{1b}[0m: greeting.txt must thank the reviewers\n\
                     ##[endgroup]\n",
                    200,
                );
                failed = Some(head);
            }
            Some(first) if *first != head && !greened => {
                setup.set_check(&head, "success");
                greened = true;
            }
            Some(_) => {}
        }
    });
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    // The reviewers sent the first attempt back; the failing check, the third round.
    let inputs = setup.worker_inputs();
    let routed: Vec<&str> = inputs
        .iter()
        .filter_map(|i| i["deliveryFeedback"].as_str())
        .filter(|f| !f.is_empty())
        .collect();
    assert_eq!(routed.len(), 1, "{inputs:?}");
    let feedback = routed[0];
    assert!(
        feedback.contains("log of ci") && feedback.contains("error: greeting.txt must thank"),
        "{feedback}"
    );
    assert!(
        !feedback.contains('\u{1b}'),
        "ANSI escapes reached the worker"
    );
    assert!(!feedback.contains("##[group]"), "{feedback}");
    assert!(greened);
    assert_eq!(setup.pulls_opened(), 1);
}

#[test]
fn strict_required_checks_merge_the_moved_target_and_wait_for_the_new_head() {
    let setup = Setup::new();
    setup
        .github
        .apply(Action::SetBranchProtection {
            repository: REPO.into(),
            branch: "main".into(),
            required_checks: vec!["ci".into()],
            strict: true,
            required_approvals: 0,
            linear_history: false,
            readable: true,
            remove: false,
        })
        .unwrap();
    setup.github.require_checks(REPO, &["ci"]);
    let mut first: Option<String> = None;
    let mut greened: Vec<String> = Vec::new();
    let out = drive(setup.start("--ship"), || {
        let Some((_, head)) = setup.pull() else {
            return;
        };
        if first.is_none() {
            // The target moves while the first head's checks run; then they pass.
            setup.move_target("elsewhere", "NOTICE", "Moved on.\n");
            first = Some(head.clone());
        }
        if !greened.contains(&head) {
            setup.set_check(&head, "success");
            greened.push(head);
        }
    });
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert!(setup.github.is_merged(REPO, 1));
    let first = first.unwrap();
    let merged_head = result["output"]["headRevision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(
        merged_head, first,
        "merged without bringing the head up to date"
    );
    assert_eq!(greened, [first, merged_head.clone()]);
    let target = git(&setup.origin, &["rev-parse", "main"]);
    git(
        &setup.origin,
        &["merge-base", "--is-ancestor", &target, &merged_head],
    );
    assert_eq!(
        merges(&setup),
        1,
        "{:#?}",
        setup.github.calls_to("PUT", "/merge")
    );
    assert_eq!(setup.pulls_opened(), 1);
}
