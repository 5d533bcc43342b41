//! The five reference templates exported from Zeroshot, driven with scripted outcomes.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;
use trellis_engine::TerminalResult;
use trellis_graph::{GraphSpec, WorkerErrorCode};

fn templates_dir() -> Option<PathBuf> {
    let dir = trellis_graph::conformance::require(env!("CARGO_MANIFEST_DIR"))
        .expect("conformance vectors are required under CI")?;
    Some(dir.join("zeroshot-templates"))
}

fn template(name: &str) -> Option<GraphSpec> {
    let path = templates_dir()?.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("template readable");
    Some(GraphSpec::from_json_str(&text).expect("template parses"))
}

fn settle_only(
    run: &mut Run,
    node: &str,
    outcome: trellis_graph::WorkerOutcome,
) -> trellis_engine::Reduction {
    let started = run.start();
    assert_eq!(names(&started), [node]);
    run.settle(node, outcome)
}

#[test]
fn single_worker_succeeds_or_fails_on_the_worker() {
    let Some(graph) = template("single-worker") else {
        return;
    };
    let mut run = Run::new(graph.clone(), json!({"task": "fix it"}));
    assert_eq!(run.decide().dispatches[0].input, json!({"task": "fix it"}));
    let end = settle_only(&mut run, "worker", ok(json!(null)));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );

    let mut run = Run::new(graph, json!({"task": "fix it"}));
    let end = settle_only(&mut run, "worker", error(WorkerErrorCode::Refusal));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "worker_failed".into()
        })
    );
}

fn review(verdict_label: &str, diagnostic: &str, output: Value) -> trellis_graph::WorkerOutcome {
    verdict(
        &[("verdict", verdict_label)],
        output,
        json!({"message": diagnostic}),
    )
}

fn receipt() -> Value {
    json!({"headRevision": "abc123", "mode": "pr", "outcome": "ready", "pullRequestId": "42",
           "repository": "acme/app", "targetBranch": "main", "version": "v2"})
}

#[test]
fn software_change_repairs_after_rejection_then_delivers() {
    let Some(graph) = template("software-change") else {
        return;
    };
    let mut run = Run::new(graph, json!({"task": "add --json"}));
    let mut sequence = Vec::new();

    let worker = run.start();
    sequence.extend(names(&worker));
    assert_eq!(
        worker[0].input,
        json!({"task": "add --json", "phase": {}, "acceptanceFeedback": "",
               "codeFeedback": "", "deliveryFeedback": ""})
    );
    run.settle("worker", ok(json!(null)));
    let reviewers = run.start();
    sequence.extend(names(&reviewers));
    assert_eq!(
        reviewers[0].input,
        json!({"task": "add --json", "deliveryFeedback": ""})
    );
    run.settle("code", review("rejected", "tests are missing", json!(null)));
    let round_two = run.settle(
        "acceptance",
        review(
            "rejected",
            "flag is undocumented",
            json!({"title": "t1", "description": "d1"}),
        ),
    );
    // The worker of the next round is the repair step: it sees both reviewers' diagnostics.
    assert_eq!(names(&round_two.dispatches), ["worker"]);
    assert_eq!(
        round_two.dispatches[0].input,
        json!({"task": "add --json", "phase": {"after": "rejected"},
               "acceptanceFeedback": "flag is undocumented", "codeFeedback": "tests are missing",
               "deliveryFeedback": ""})
    );
    assert_eq!(
        round_two.dispatches[0].node_instance,
        worker[0].node_instance
    );

    let repair = run.start();
    sequence.extend(names(&repair));
    run.settle("worker", ok(json!(null)));
    let reviewers_again = run.start();
    sequence.extend(names(&reviewers_again));
    run.settle(
        "acceptance",
        review(
            "accepted",
            "",
            json!({"title": "Add --json", "description": "Adds JSON output"}),
        ),
    );
    let deliver = run.settle("code", review("accepted", "", json!(null)));
    assert_eq!(names(&deliver.dispatches), ["deliver"]);
    assert_eq!(
        deliver.dispatches[0].input,
        json!({"title": "Add --json", "description": "Adds JSON output", "issueNumber": ""})
    );
    sequence.extend(names(&run.start()));
    let end = run.settle(
        "deliver",
        verdict(&[("delivery", "ready")], receipt(), json!({"message": ""})),
    );
    assert_eq!(
        sequence,
        [
            "worker",
            "acceptance",
            "code",
            "worker",
            "acceptance",
            "code",
            "deliver"
        ]
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded { output: receipt() })
    );
}

#[test]
fn software_change_fails_when_a_reviewer_errors_and_retries_crashes() {
    let Some(graph) = template("software-change") else {
        return;
    };
    let mut run = Run::new(graph, json!({"task": "t", "issueNumber": "7"}));
    run.start();
    run.settle("worker", ok(json!(null)));
    let reviewers = run.start();
    // Reviewers allow two attempts: a crash is retried once on the same instance.
    let retry = run.settle("code", error(WorkerErrorCode::Crash));
    assert_eq!(names(&retry.dispatches), ["code"]);
    assert_eq!(retry.dispatches[0].attempt, 2);
    assert_eq!(
        retry.dispatches[0].node_instance,
        reviewers[1].node_instance
    );
    run.start();
    run.settle(
        "acceptance",
        review("accepted", "", json!({"title": "x", "description": "y"})),
    );
    let end = run.settle("code", error(WorkerErrorCode::Timeout));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "review_failed".into()
        })
    );
}

#[test]
fn software_change_gives_up_after_ten_rejected_rounds() {
    let Some(graph) = template("software-change") else {
        return;
    };
    let mut run = Run::new(graph, json!({"task": "t"}));
    let mut end = None;
    for round in 0..10 {
        run.start();
        run.settle("worker", ok(json!(null)));
        run.start();
        run.settle(
            "acceptance",
            review(
                "rejected",
                &format!("r{round}"),
                json!({"title": "", "description": ""}),
            ),
        );
        end = run
            .settle("code", review("rejected", "no", json!(null)))
            .terminal;
    }
    assert_eq!(
        end,
        Some(TerminalResult::Failed {
            reason: "change_attempts_exhausted".into()
        })
    );
    assert_eq!(run.history.executions.len(), 30);
}

fn comment_receipt() -> Value {
    json!({"receipt": {"bodyHash": "h", "commentId": "c1", "destinationUrl": "u", "discussionId": "d",
                        "discussionKind": "issue", "mode": "comment", "outcome": "posted",
                        "repository": "acme/app", "url": "u", "version": "v1"}})
}

#[test]
fn issue_review_posts_the_review() {
    let Some(graph) = template("issue-review") else {
        return;
    };
    let input = json!({"url": "https://example.invalid/i/1",
                       "context": {"title": "Bug", "body": "It breaks", "reviewScope": {}}});
    let mut run = Run::new(graph, input);
    let reviewer = run.start();
    assert_eq!(
        reviewer[0].input,
        json!({"url": "https://example.invalid/i/1",
               "context": {"title": "Bug", "body": "It breaks", "reviewScope": {}},
               "instructions": ""})
    );
    run.settle("reviewer", ok(json!({"body": "Looks like a race."})));
    let deliver = run.start();
    assert_eq!(
        deliver[0].input,
        json!({"url": "https://example.invalid/i/1", "body": "Looks like a race.", "reviewScope": {}})
    );
    let end = run.settle(
        "deliver",
        verdict(
            &[("delivery", "posted")],
            comment_receipt(),
            json!({"message": ""}),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: comment_receipt()
        })
    );
}

fn pr_input() -> Value {
    json!({"url": "https://example.invalid/pr/2",
           "context": {"title": "PR", "body": "b", "linkedIssues": [],
                       "reviewScope": {"baseBranch": "main", "baseRepository": "a/b", "baseRevision": "1",
                                       "headBranch": "f", "headRepository": "a/b", "headRevision": "2"}}})
}

#[test]
fn pr_review_reproduces_each_task_then_comments() {
    let Some(graph) = template("pr-review") else {
        return;
    };
    let mut run = Run::new(graph.clone(), pr_input());
    run.start();
    run.settle(
        "classifier",
        verdict(&[], json!({"reproductionTasks": [{"plan": "run the tests"}], "reproductionReason": "flaky"}), json!(null)),
    );
    let reproducer = run.start();
    assert_eq!(names(&reproducer), ["reproducer[0]"]);
    assert_eq!(reproducer[0].input["plan"], json!("run the tests"));
    run.settle_at(
        "reproducer",
        &[0],
        ok(json!({"reproductionEvidence": "fails 1 in 3"})),
    );
    let checker = run.start();
    assert_eq!(
        checker[0].input["reproductionEvidence"],
        json!(["fails 1 in 3"])
    );
    assert_eq!(checker[0].input["reproductionReason"], json!("flaky"));
    run.settle(
        "code_checker",
        verdict(&[], json!({"body": "Please fix the race."}), json!(null)),
    );
    run.start();
    let end = run.settle(
        "deliver",
        verdict(
            &[("delivery", "posted")],
            comment_receipt(),
            json!({"message": ""}),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: comment_receipt()
        })
    );

    // Two tasks overflow the single-item map: the run fails without reproducing.
    let mut run = Run::new(graph, pr_input());
    run.start();
    let end = run.settle(
        "classifier",
        verdict(
            &[],
            json!({"reproductionTasks": [{"plan": "a"}, {"plan": "b"}], "reproductionReason": "r"}),
            json!(null),
        ),
    );
    assert!(end.dispatches.is_empty());
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "reproduction_failed".into()
        })
    );
}

fn scouts(run: &mut Run) {
    let started = run.start();
    assert_eq!(names(&started), ["explorer", "synthesizer", "challenger"]);
    for name in ["explorer", "synthesizer", "challenger"] {
        run.settle(
            name,
            verdict(
                &[],
                json!({ format!("{name}Proposal"): format!("{name} idea") }),
                json!({"message": ""}),
            ),
        );
    }
}

fn research(
    run: &mut Run,
    report: &str,
    verdict_label: &str,
    feedback: &str,
) -> trellis_engine::Reduction {
    run.start();
    run.settle("researcher", ok(json!({"researchReport": report})));
    run.start();
    run.settle(
        "reviewer",
        verdict(
            &[("verdict", verdict_label)],
            json!({"reviewFeedback": feedback}),
            json!({"message": ""}),
        ),
    )
}

#[test]
fn auto_research_iterates_with_review_feedback() {
    let Some(graph) = template("auto-research") else {
        return;
    };
    let mut run = Run::new(
        graph.clone(),
        json!({"task": "speed up", "options": {"iterations": 2}}),
    );
    scouts(&mut run);
    let revise = research(&mut run, "draft 1", "revise", "measure first");
    assert_eq!(names(&revise.dispatches), ["researcher"]);
    assert_eq!(
        revise.dispatches[0].input["reviewFeedback"],
        json!("measure first")
    );
    assert_eq!(
        revise.dispatches[0].input["review"],
        json!({"verdict": "revise"})
    );
    assert_eq!(
        revise.dispatches[0].input["explorerProposal"],
        json!("explorer idea")
    );
    // Accepted ends the inner loop; the outer loop starts its second round with new scouts.
    let accepted = research(&mut run, "draft 2", "accepted", "good");
    assert_eq!(
        names(&accepted.dispatches),
        ["explorer", "synthesizer", "challenger"]
    );
    scouts(&mut run);
    let stop = research(&mut run, "final", "stop", "enough");
    assert_eq!(
        stop.terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );

    // One iteration only: accepted then the outer loop is exhausted, which still succeeds.
    let mut run = Run::new(
        graph.clone(),
        json!({"task": "t", "options": {"iterations": 1}}),
    );
    scouts(&mut run);
    let end = research(&mut run, "r", "accepted", "ok");
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );

    // A scout error fails the run.
    let mut run = Run::new(graph, json!({"task": "t"}));
    run.start();
    run.settle(
        "explorer",
        verdict(
            &[],
            json!({"explorerProposal": "e"}),
            json!({"message": ""}),
        ),
    );
    run.settle("synthesizer", error(WorkerErrorCode::Malformed));
    let end = run.settle(
        "challenger",
        verdict(
            &[],
            json!({"challengerProposal": "c"}),
            json!({"message": ""}),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "research_scout_failed".into()
        })
    );
}
