//! Trellis's own `auto-research` template (`templates/auto-research*.json`) driven with scripted
//! outcomes: the iteration's roles in order, what each iteration hands to the next, the judges'
//! verdicts choosing the disposition, the planner ending the loop, the audit's one repair, and
//! the push variant's delivery after every iteration.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;
use trellis_engine::{Reduction, TerminalResult};
use trellis_graph::{GraphSpec, WorkerErrorCode, WorkerOutcome};

fn template(file: &str) -> GraphSpec {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../templates/{file}"));
    let text = std::fs::read_to_string(path).expect("built-in template readable");
    GraphSpec::from_json_str(&text).expect("built-in template parses")
}

fn research(iterations: u64) -> Run {
    Run::new(
        template("auto-research.json"),
        json!({"task": "Does caching help?", "options": {"iterations": iterations}}),
    )
}

fn message(text: &str) -> Value {
    json!({"message": text})
}

/// Starts what is ready, checks it is exactly `expected`, and returns the dispatches' inputs.
fn expect_started(run: &mut Run, expected: &[&str]) -> Vec<Value> {
    let started = run.start();
    assert_eq!(names(&started), expected);
    started.into_iter().map(|d| d.input).collect()
}

fn bootstrap(run: &mut Run) {
    expect_started(run, &["bootstrap"]);
    run.settle(
        "bootstrap",
        ok(json!({
            "scouts": [{"role": "explorer"}, {"role": "synthesizer"}, {"role": "challenger"}],
            "judges": [{"role": "evidence"}, {"role": "method"}, {"role": "progress"}],
            "parentArtifact": ""
        })),
    );
    let topology = expect_started(run, &["topology_validation"]);
    assert_eq!(topology[0]["scouts"][2], json!({"role": "challenger"}));
    run.settle(
        "topology_validation",
        verdict(&[("verdict", "accepted")], json!(null), message("complete")),
    );
}

fn plan(run: &mut Run, decision: &str, iteration: &str) -> (Value, Reduction) {
    let input = expect_started(run, &["planner"]).remove(0);
    let reduction = run.settle(
        "planner",
        verdict(
            &[("decision", decision)],
            json!({"iteration": iteration, "hypothesis": format!("h{iteration}")}),
            message(&format!("{decision}: because")),
        ),
    );
    (input, reduction)
}

/// One worked iteration up to the judges' verdicts; the recorder the verdicts chose is the
/// only dispatch returned.
fn work(run: &mut Run, iteration: &str, judges: [WorkerOutcome; 3]) -> Vec<Value> {
    plan(run, "work", iteration);
    let scouts = expect_started(
        run,
        &[
            "research_scout[0]",
            "research_scout[1]",
            "research_scout[2]",
        ],
    );
    let roles: Vec<&Value> = scouts.iter().map(|i| &i["role"]).collect();
    assert_eq!(roles, ["explorer", "synthesizer", "challenger"]);
    assert_eq!(scouts[0]["hypothesis"], format!("h{iteration}"));
    for (index, role) in ["explorer", "synthesizer", "challenger"].iter().enumerate() {
        run.settle_at(
            "research_scout",
            &[index as u32],
            verdict(
                &[],
                json!({"proposal": format!("{role} p{iteration}")}),
                message("ok"),
            ),
        );
    }
    let staging = expect_started(run, &["staging"]).remove(0);
    assert_eq!(
        staging["proposals"],
        json!([
            format!("explorer p{iteration}"),
            format!("synthesizer p{iteration}"),
            format!("challenger p{iteration}")
        ])
    );
    run.settle("staging", ok(json!({"plan": format!("plan {iteration}")})));
    let experiment = expect_started(run, &["experiment"]).remove(0);
    assert_eq!(experiment["experimentPlan"], format!("plan {iteration}"));
    run.settle(
        "experiment",
        ok(json!({"result": format!("result {iteration}")})),
    );
    let judge_inputs = expect_started(
        run,
        &[
            "research_judge[0]",
            "research_judge[1]",
            "research_judge[2]",
        ],
    );
    assert_eq!(judge_inputs[1]["role"], "method");
    assert_eq!(
        judge_inputs[2]["experimentResult"],
        format!("result {iteration}")
    );
    for (index, outcome) in judges.into_iter().enumerate() {
        run.settle_at("research_judge", &[index as u32], outcome);
    }
    let started = run.start();
    assert_eq!(started.len(), 1, "one recorder: {:?}", names(&started));
    started.into_iter().map(|d| d.input).collect()
}

fn judge(label: &str) -> WorkerOutcome {
    verdict(
        &[("verdict", label)],
        json!({"assessment": label}),
        message(label),
    )
}

fn adopting() -> [WorkerOutcome; 3] {
    [judge("adopt"), judge("adopt"), judge("adopt")]
}

fn record(run: &mut Run, node: &str, parent: &str) -> Reduction {
    let recorder = run
        .history
        .executions
        .last()
        .map(|r| r.occurrence.node.as_str().to_owned());
    assert_eq!(recorder.as_deref(), Some(node));
    run.settle(
        node,
        ok(json!({"parentArtifact": parent, "disposition": format!("{node} done")})),
    )
}

/// The three finalizers, then the audit with `audit_label`.
fn finalize(run: &mut Run, audit_label: &str) -> Reduction {
    for node in ["finalize_findings", "finalize_backlog", "finalize_state"] {
        expect_started(run, &[node]);
        run.settle(node, ok(json!({"note": format!("{node} note")})));
    }
    let audit = expect_started(run, &["disposition_audit"]).remove(0);
    assert_eq!(audit["findingsNote"], "finalize_findings note");
    assert_eq!(audit["repairNote"], "");
    run.settle(
        "disposition_audit",
        verdict(
            &[("audit", audit_label)],
            json!({"findings": format!("audit {audit_label}")}),
            message(audit_label),
        ),
    )
}

fn archive(run: &mut Run) -> Reduction {
    let input = expect_started(run, &["archive"]).remove(0);
    assert!(
        input["auditFindings"]
            .as_str()
            .unwrap()
            .starts_with("audit")
    );
    run.settle("archive", ok(json!({"archive": "archive/000001-000002"})))
}

#[test]
fn two_iterations_hand_over_the_parent_and_close_the_research() {
    let mut run = research(2);
    bootstrap(&mut run);
    let first = work(&mut run, "000001", adopting());
    assert_eq!(first[0]["verdicts"], json!(["adopt", "adopt", "adopt"]));
    record(&mut run, "adopt_iteration", "iterations/000001");
    // The next planner builds on the adopted iteration; per-iteration fields start empty.
    let (second, _) = plan(&mut run, "work", "000002");
    assert_eq!(second["parentArtifact"], "iterations/000001");
    assert_eq!(second["lastDisposition"], "adopt_iteration done");
    let scouts = expect_started(
        &mut run,
        &[
            "research_scout[0]",
            "research_scout[1]",
            "research_scout[2]",
        ],
    );
    assert_eq!(scouts[0]["parentArtifact"], "iterations/000001");
    for index in 0..3 {
        run.settle_at(
            "research_scout",
            &[index],
            verdict(&[], json!({"proposal": "p"}), message("ok")),
        );
    }
    let staging = expect_started(&mut run, &["staging"]).remove(0);
    assert_eq!(staging["proposals"], json!(["p", "p", "p"]));
    run.settle("staging", ok(json!({"plan": "plan 2"})));
    expect_started(&mut run, &["experiment"]);
    run.settle("experiment", ok(json!({"result": "r2"})));
    run.start();
    for (index, label) in ["adopt", "record_only", "adopt"].iter().enumerate() {
        run.settle_at("research_judge", &[index as u32], judge(label));
    }
    expect_started(&mut run, &["record_iteration"]);
    record(&mut run, "record_iteration", "iterations/000001");
    // The iteration budget is spent: the finalizers run.
    let passed = finalize(&mut run, "passed");
    assert!(passed.terminal.is_none());
    let end = archive(&mut run);
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({
                "report": "finalize_findings note",
                "audit": "audit passed",
                "archive": "archive/000001-000002"
            })
        })
    );
}

#[test]
fn the_judges_verdicts_choose_the_disposition() {
    let cases: [([WorkerOutcome; 3], &str); 4] = [
        (
            [
                judge("adopt"),
                error(WorkerErrorCode::Timeout),
                judge("abort"),
            ],
            "abort_review",
        ),
        (
            [judge("adopt"), judge("abort"), judge("adopt")],
            "abort_iteration",
        ),
        (adopting(), "adopt_iteration"),
        (
            [judge("record_only"), judge("adopt"), judge("adopt")],
            "record_iteration",
        ),
    ];
    for (judges, recorder) in cases {
        let mut run = research(1);
        bootstrap(&mut run);
        work(&mut run, "000001", judges);
        let end = record(&mut run, recorder, "");
        assert!(end.terminal.is_none(), "{recorder}");
    }
    // A failed recorder does not end the run: the audit finds the missing disposition.
    let mut run = research(1);
    bootstrap(&mut run);
    work(&mut run, "000001", adopting());
    run.settle("adopt_iteration", error(WorkerErrorCode::Crash));
    assert_eq!(names(&run.start()), ["finalize_findings"]);
}

#[test]
fn a_failed_scout_records_the_iteration_without_an_experiment() {
    let mut run = research(2);
    bootstrap(&mut run);
    plan(&mut run, "work", "000001");
    run.start();
    run.settle_at(
        "research_scout",
        &[0],
        verdict(&[], json!({"proposal": "p"}), message("ok")),
    );
    run.settle_at("research_scout", &[1], error(WorkerErrorCode::Refusal));
    run.settle_at(
        "research_scout",
        &[2],
        verdict(&[], json!({"proposal": "p"}), message("ok")),
    );
    let recorder = expect_started(&mut run, &["abort_scouting"]).remove(0);
    assert_eq!(recorder["experimentPlan"], "");
    record(&mut run, "abort_scouting", "");
    // The loop goes on with the next iteration.
    assert_eq!(names(&run.start()), ["planner"]);
}

#[test]
fn the_planner_ends_the_loop_by_stopping_or_aborting() {
    // `stop` in the first of five iterations: straight to the finalizers, then success.
    let mut run = research(5);
    bootstrap(&mut run);
    plan(&mut run, "stop", "000001");
    let end = finalize(&mut run, "passed");
    assert!(end.terminal.is_none());
    let end = archive(&mut run);
    assert!(matches!(
        end.terminal,
        Some(TerminalResult::Succeeded { .. })
    ));

    // `abort` after a worked iteration: everything is still closed and archived, then it fails.
    let mut run = research(5);
    bootstrap(&mut run);
    work(&mut run, "000001", adopting());
    record(&mut run, "adopt_iteration", "iterations/000001");
    plan(&mut run, "abort", "000002");
    let finalizer = expect_started(&mut run, &["finalize_findings"]).remove(0);
    assert_eq!(finalizer["plannerNote"], "abort: because");
    run.settle("finalize_findings", ok(json!({"note": "n"})));
    for node in ["finalize_backlog", "finalize_state"] {
        expect_started(&mut run, &[node]);
        run.settle(node, ok(json!({"note": "n"})));
    }
    run.start();
    run.settle(
        "disposition_audit",
        verdict(
            &[("audit", "passed")],
            json!({"findings": "audit ok"}),
            message("ok"),
        ),
    );
    let end = archive(&mut run);
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "research_aborted".into()
        })
    );

    // A planner that fails ends the run without finalizing.
    let mut run = research(3);
    bootstrap(&mut run);
    run.start();
    let end = run.settle("planner", error(WorkerErrorCode::Malformed));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "research_planner_failed".into()
        })
    );
}

#[test]
fn the_audit_gets_one_repair_and_a_reaudit() {
    for (reaudit, expected) in [
        ("passed", None),
        ("repair_required", Some("research_audit_unresolved")),
    ] {
        let mut run = research(1);
        bootstrap(&mut run);
        plan(&mut run, "stop", "000001");
        finalize(&mut run, "repair_required");
        let repair = expect_started(&mut run, &["disposition_repair"]).remove(0);
        assert_eq!(repair["auditFindings"], "audit repair_required");
        run.settle("disposition_repair", ok(json!({"note": "fixed 000001"})));
        let again = expect_started(&mut run, &["disposition_reaudit"]).remove(0);
        assert_eq!(again["repairNote"], "fixed 000001");
        let end = run.settle(
            "disposition_reaudit",
            verdict(
                &[("audit", reaudit)],
                json!({"findings": format!("audit again: {reaudit}")}),
                message(reaudit),
            ),
        );
        match expected {
            None => {
                let input = expect_started(&mut run, &["archive"]).remove(0);
                assert_eq!(input["auditFindings"], "audit again: passed");
                assert_eq!(input["repairNote"], "fixed 000001");
            }
            Some(reason) => assert_eq!(
                end.terminal,
                Some(TerminalResult::Failed {
                    reason: reason.into()
                })
            ),
        }
    }
}

#[test]
fn a_rejected_topology_stops_before_any_iteration() {
    let mut run = research(2);
    expect_started(&mut run, &["bootstrap"]);
    run.settle(
        "bootstrap",
        ok(json!({"scouts": [], "judges": [], "parentArtifact": ""})),
    );
    run.start();
    let end = run.settle(
        "topology_validation",
        verdict(
            &[("verdict", "rejected")],
            json!(null),
            message("no scouts"),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "research_topology_rejected".into()
        })
    );
}

#[test]
fn the_push_variant_delivers_after_every_iteration() {
    let mut run = Run::new(
        template("auto-research-push.json"),
        json!({"task": "t", "options": {"iterations": 2}}),
    );
    bootstrap(&mut run);
    for iteration in ["000001", "000002"] {
        work(&mut run, iteration, adopting());
        record(
            &mut run,
            "adopt_iteration",
            &format!("iterations/{iteration}"),
        );
        let manifest = expect_started(&mut run, &["checkpoint_manifest"]).remove(0);
        assert_eq!(manifest["iteration"], iteration);
        run.settle(
            "checkpoint_manifest",
            verdict(
                &[],
                json!({"title": format!("research {iteration}"), "description": "d"}),
                message("ok"),
            ),
        );
        let delivery = expect_started(&mut run, &["checkpoint_delivery"]).remove(0);
        assert_eq!(
            delivery,
            json!({"title": format!("research {iteration}"), "description": "d"})
        );
        run.settle(
            "checkpoint_delivery",
            verdict(
                &[("delivery", "pushed")],
                json!({"version": "v1", "mode": "push", "outcome": "pushed",
                       "repository": "origin", "targetBranch": "main",
                       "headRevision": format!("rev{iteration}"), "headBranch": "trellis/x"}),
                message("pushed"),
            ),
        );
    }
    finalize(&mut run, "passed");
    let end = archive(&mut run);
    let Some(TerminalResult::Succeeded { output }) = end.terminal else {
        panic!("{:?}", end.terminal);
    };
    assert_eq!(output["headRevision"], "rev000002");
    assert_eq!(output["headBranch"], "trellis/x");

    // A failed push ends the loop and the run.
    let mut run = Run::new(
        template("auto-research-push.json"),
        json!({"task": "t", "options": {"iterations": 3}}),
    );
    bootstrap(&mut run);
    plan(&mut run, "stop", "000001");
    run.start();
    run.settle(
        "checkpoint_manifest",
        verdict(
            &[],
            json!({"title": "research: stopped", "description": "d"}),
            message("ok"),
        ),
    );
    run.start();
    let end = run.settle("checkpoint_delivery", error(WorkerErrorCode::Crash));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "research_delivery_failed".into()
        })
    );
}
