#!/usr/bin/env python3
"""Builds the auto-research template (templates/auto-research.json) and its push variant
(templates/auto-research-push.json) from the protocol described below, so the two stay the same
graph up to delivery and every group carries the same state type.

Run from anywhere after editing this file or the prompts (research_prompts.py next to it);
commit the results. `--check` only compares: it exits 1 when a committed template is not what
this script builds (a test runs it).

The protocol: bootstrap (creates or resumes the research folder) → topology preflight → a loop of
`options.iterations` iterations (default 10), each one: planner (work / stop / abort) → three
hypothesis scouts (a map over the topology's scout roles) → staging → experiment → three
independent judges (a map over the judge roles, verdict adopt / record_only / abort) → one
disposition recorder chosen by the verdicts; with `--push` each iteration that worked ends with a
read-only manifest agent and one push of the run branch. After the loop: three finalizers, the
disposition auditor (one repair and a re-audit), the archivist (archive and `audit.json`).
"""
import copy
import json
import pathlib
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import research_prompts as prompts  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent / "templates"

ERRORS = ["crash", "malformed", "refusal", "timeout"]
SCOUT_ROLES = ["challenger", "explorer", "synthesizer"]
JUDGE_ROLES = ["evidence", "method", "progress"]
VERDICTS = ["abort", "adopt", "record_only"]
STRING = {"kind": "string"}


def field(kind, required=True):
    return {"type": kind, "required": required}


def record(**fields):
    return {"kind": "record", "fields": {k: field(v) for k, v in fields.items()}}


def array(items):
    return {"kind": "array", "items": items}


def enum(values):
    return {"kind": "enum", "values": sorted(values)}


OPTIONS = {
    "kind": "record",
    "fields": {"iterations": field({"kind": "integer"}, required=False)},
}
ROLE_LIST = {"scouts": array(record(role=enum(SCOUT_ROLES))),
             "judges": array(record(role=enum(JUDGE_ROLES)))}
RECEIPT_FIELDS = ["repository", "targetBranch", "headBranch", "headRevision"]


def state_type(push):
    fields = {
        "task": STRING,
        "options": OPTIONS,
        **ROLE_LIST,
        "parentArtifact": STRING,
        "lastDisposition": STRING,
        "plannerNote": STRING,
        "iteration": STRING,
        "hypothesis": STRING,
        "proposals": array(STRING),
        "experimentPlan": STRING,
        "experimentResult": STRING,
        "judgements": array(STRING),
        "verdicts": array(enum(VERDICTS)),
        "findingsNote": STRING,
        "backlogNote": STRING,
        "stateNote": STRING,
        "auditFindings": STRING,
        "repairNote": STRING,
        "archivePath": STRING,
        # Always empty: the no-op maps run over it.
        "nothing": array({"kind": "null"}),
    }
    if push:
        fields.update({"checkpointTitle": STRING, "checkpointDescription": STRING})
        fields.update({name: STRING for name in RECEIPT_FIELDS})
    return {"kind": "record", "fields": {k: field(v) for k, v in fields.items()}}


class Builder:
    """Makes nodes that share one state type; `paths` are promoted state paths."""

    def __init__(self, push):
        self.push = push
        self.state = state_type(push)

    def field_type(self, name):
        return self.state["fields"][name]["type"]

    def group(self, kind, name, promoted, **rest):
        node = {"kind": kind, "name": name, "state": copy.deepcopy(self.state)}
        node.update(rest)
        node["promotedStatePaths"] = [[p] for p in promoted]
        return node

    def seq(self, name, children, promoted=()):
        return self.group("seq", name, promoted, children=children)

    def choice(self, name, branches, otherwise, promoted=()):
        return self.group(
            "choice",
            name,
            promoted,
            branches=[{"when": when, "node": node} for when, node in branches],
            otherwise=otherwise,
        )

    def noop(self, name):
        """A map over the always-empty `nothing`: the graph language's way to do nothing."""
        return self.group(
            "map",
            name,
            (),
            over={"source": "state", "path": ["nothing"]},
            maxItems=1,
            body={"kind": "fail", "name": f"{name}_invalid", "reason": "invalid_round_state"},
        )

    def executable(self, kind, name, worker, reads, output, writes, instructions,
                   signals=None, items=None):
        """`reads`: input fields bound from the same-named state paths; `items`: input fields
        bound from the map item; `writes`: (channel, path, state target)."""
        inputs = {name_: self.field_type(name_) for name_ in reads}
        bindings = [
            {"target": [r], "value": {"source": "state", "path": [r]}} for r in reads
        ]
        for target, (kind_, path) in (items or {}).items():
            inputs[target] = kind_
            bindings.append({"target": [target], "value": {"source": "item", "path": [path]}})
        node = {
            "kind": kind,
            "name": name,
            "worker": worker,
            "input": {"kind": "record", "fields": {k: field(v) for k, v in inputs.items()}},
            "output": output,
            "inputBindings": bindings,
            "writeBindings": [
                {"value": {"node": name, "channel": channel, "path": [path]}, "target": [target]}
                for channel, path, target in writes
            ],
            "attempts": 2 if kind == "verifier" else 1,
        }
        if instructions is not None:
            node["instructions"] = instructions
        if kind == "verifier":
            node["signals"] = signals or {}
            node["diagnostic"] = record(message=STRING)
        return node

    def step(self, name, worker, reads, output, writes, instructions):
        return self.executable("step", name, worker, reads, output, writes, instructions)

    def verifier(self, name, worker, reads, output, writes, instructions, signals, items=None):
        return self.executable(
            "verifier", name, worker, reads, output, writes, instructions, signals, items
        )


def errors_of(node):
    return {"kind": "in", "value": {"name": node, "source": "error", "field": None},
            "labels": ERRORS}


def signal_of(node, signal, labels):
    return {"kind": "in", "value": {"name": node, "source": "signal", "field": signal},
            "labels": sorted(labels)}


def k_of_map(count, node, source, field_, labels):
    return {"kind": "k_of_map", "count": count,
            "value": {"name": node, "source": source, "field": field_},
            "labels": sorted(labels)}


def fail(name, reason):
    return {"kind": "fail", "name": name, "reason": reason}


RECORDER_READS = ["task", "iteration", "hypothesis", "parentArtifact", "scouts", "proposals",
                  "experimentPlan", "experimentResult", "judges", "judgements", "verdicts"]
# What an iteration hands to the next one (and to the finalizers); everything else it writes is
# forgotten when the iteration ends, so each iteration starts from empty per-iteration fields.
ITERATION_STATE = ["parentArtifact", "lastDisposition"]


def recorder(b, name, instructions):
    """A disposition recorder. Its failure is not routed: the iteration then simply has no
    recorded disposition, which the disposition auditor finds and has repaired. (Routing every
    agent's failure inside an iteration would multiply the control space the verifier checks
    past its ceiling.)"""
    return b.step(
        name,
        "builtin.agent.research-recorder@1",
        RECORDER_READS,
        record(parentArtifact=STRING, disposition=STRING),
        [("out", "parentArtifact", "parentArtifact"), ("out", "disposition", "lastDisposition")],
        instructions,
    )


def iteration_body(b):
    promoted = ITERATION_STATE + (RECEIPT_FIELDS if b.push else [])
    planner = b.verifier(
        "planner",
        "builtin.agent.research-planner@1",
        ["task", "options", "parentArtifact", "lastDisposition"],
        record(iteration=STRING, hypothesis=STRING),
        [("out", "iteration", "iteration"), ("out", "hypothesis", "hypothesis"),
         ("diagnostic", "message", "plannerNote")],
        prompts.PLANNER,
        {"decision": ["abort", "stop", "work"]},
    )
    scout = b.verifier(
        "research_scout",
        "builtin.agent.research-scout@1",
        ["task", "iteration", "hypothesis", "parentArtifact"],
        record(proposal=STRING),
        [("out", "proposal", "proposals")],
        prompts.SCOUT,
        {},
        items={"role": (enum(SCOUT_ROLES), "role")},
    )
    scouts = b.group("map", "hypothesis_scouts", ["proposals"],
                     over={"source": "state", "path": ["scouts"]}, maxItems=3, body=scout)
    judge = b.verifier(
        "research_judge",
        "builtin.agent.research-judge@1",
        ["task", "iteration", "hypothesis", "parentArtifact", "experimentPlan",
         "experimentResult"],
        record(assessment=STRING),
        [("out", "assessment", "judgements"), ("signal", "verdict", "verdicts")],
        prompts.JUDGE,
        {"verdict": VERDICTS},
        items={"role": (enum(JUDGE_ROLES), "role")},
    )
    judges = b.group("map", "independent_judges", ["judgements", "verdicts"],
                     over={"source": "state", "path": ["judges"]}, maxItems=3, body=judge)
    decision = b.choice(
        "research_decision",
        [
            (k_of_map(1, "research_judge", "error", None, ERRORS),
             recorder(b, "abort_review", prompts.ABORT_REVIEW)),
            (k_of_map(1, "research_judge", "signal", "verdict", ["abort"]),
             recorder(b, "abort_iteration", prompts.ABORT_ITERATION)),
            (k_of_map(3, "research_judge", "signal", "verdict", ["adopt"]),
             recorder(b, "adopt_iteration", prompts.ADOPT_ITERATION)),
        ],
        recorder(b, "record_iteration", prompts.RECORD_ITERATION),
        promoted,
    )
    # Staging and the experiment report failures through what they leave behind: an empty
    # plan or result, which the judges are told to answer with `abort`.
    staging = b.step(
        "staging",
        "builtin.agent.research-stager@1",
        ["task", "iteration", "hypothesis", "parentArtifact", "scouts", "proposals"],
        record(plan=STRING),
        [("out", "plan", "experimentPlan")],
        prompts.STAGING,
    )
    experiment = b.step(
        "experiment",
        "builtin.agent.research-experimenter@1",
        ["task", "iteration", "hypothesis", "parentArtifact", "experimentPlan"],
        record(result=STRING),
        [("out", "result", "experimentResult")],
        prompts.EXPERIMENT,
    )
    experiment_round = b.seq("experiment_round", [staging, experiment, judges, decision],
                             promoted)
    scout_result = b.choice(
        "scout_result",
        [(k_of_map(1, "research_scout", "error", None, ERRORS),
          recorder(b, "abort_scouting", prompts.ABORT_SCOUTING))],
        experiment_round,
        promoted,
    )
    children = [
        planner,
        b.choice(
            "plan_result",
            [(signal_of("planner", "decision", ["work"]),
              b.seq("work", [scouts, scout_result], promoted))],
            b.noop("plan_closed"),
            promoted,
        ),
    ]
    if b.push:
        children += checkpoint(b)
    return b.seq("iteration", children, promoted + ["plannerNote"])


def checkpoint(b):
    """The push variant's end of every iteration: a read-only manifest agent names the
    checkpoint and the one delivery node pushes the run branch. Their failures end the loop
    (its `until`) and then the run."""
    manifest = b.verifier(
        "checkpoint_manifest",
        "builtin.agent.research-manifest@1",
        ["task", "iteration", "hypothesis", "plannerNote", "lastDisposition"],
        record(title=STRING, description=STRING),
        [("out", "title", "checkpointTitle"), ("out", "description", "checkpointDescription")],
        prompts.MANIFEST,
        {},
    )
    string = lambda: field(STRING)  # noqa: E731
    deliver = {
        "kind": "verifier",
        "name": "checkpoint_delivery",
        "worker": "builtin.git-delivery.push@1",
        "input": {"kind": "record", "fields": {"title": string(), "description": string()}},
        "output": {"kind": "record", "fields": {
            "version": field(enum(["v1"])),
            "mode": field(enum(["push"])),
            "outcome": field(enum(["pushed"])),
            "repository": string(),
            "targetBranch": string(),
            "headRevision": string(),
            "headBranch": string(),
        }},
        "inputBindings": [
            {"target": ["title"], "value": {"source": "state", "path": ["checkpointTitle"]}},
            {"target": ["description"],
             "value": {"source": "state", "path": ["checkpointDescription"]}},
        ],
        "writeBindings": [
            {"value": {"node": "checkpoint_delivery", "channel": "out", "path": [name]},
             "target": [name]}
            for name in RECEIPT_FIELDS
        ],
        "attempts": 1,
        "signals": {"delivery": ["pushed"]},
        "diagnostic": record(message=STRING),
    }
    return [manifest, deliver]


def closing(b):
    """After the loop: three finalizers, the audit with one repair, the archive, the end."""
    final_reads = ["task", "parentArtifact", "lastDisposition", "plannerNote"]

    def finalizer(name, target, instructions):
        return b.step(name, "builtin.agent.research-finalizer@1", final_reads,
                      record(note=STRING), [("out", "note", target)], instructions)

    audit_reads = ["task", "parentArtifact", "findingsNote", "repairNote"]

    def auditor(name, instructions):
        return b.verifier(name, "builtin.agent.research-auditor@1", audit_reads,
                          record(findings=STRING), [("out", "findings", "auditFindings")],
                          instructions, {"audit": ["passed", "repair_required"]})

    audited = ["auditFindings", "repairNote"]
    reaudit = b.seq(
        "reaudit_round",
        [
            auditor("disposition_reaudit", prompts.REAUDIT),
            b.choice(
                "reaudit_result",
                [
                    (errors_of("disposition_reaudit"),
                     fail("reaudit_failed", "research_audit_failed")),
                    (signal_of("disposition_reaudit", "audit", ["passed"]),
                     b.noop("reaudit_passed")),
                ],
                fail("audit_unresolved", "research_audit_unresolved"),
                audited,
            ),
        ],
        audited,
    )
    repair = b.seq(
        "audit_repair",
        [
            b.step("disposition_repair", "builtin.agent.research-repair@1",
                   ["task", "parentArtifact", "auditFindings"], record(note=STRING),
                   [("out", "note", "repairNote")], prompts.REPAIR),
            b.choice(
                "repair_result",
                [(errors_of("disposition_repair"),
                  fail("repair_failed", "research_repair_failed"))],
                reaudit,
                audited,
            ),
        ],
        audited,
    )
    done_fields = {"report": "findingsNote", "audit": "auditFindings", "archive": "archivePath"}
    if b.push:
        done_fields.update({name: name for name in ["repository", "headBranch", "headRevision"]})
    done = {
        "kind": "succeed",
        "name": "done",
        "output": {"kind": "record",
                   "fields": {k: field(STRING) for k in done_fields}},
        "bindings": [
            {"target": [k], "value": {"source": "state", "path": [v]}}
            for k, v in done_fields.items()
        ],
    }
    audit_phase = b.seq(
        "audit_phase",
        [
            auditor("disposition_audit", prompts.AUDIT),
            b.choice(
                "audit_result",
                [
                    (errors_of("disposition_audit"),
                     fail("audit_failed", "research_audit_failed")),
                    (signal_of("disposition_audit", "audit", ["passed"]),
                     b.noop("audit_passed")),
                ],
                repair,
                audited,
            ),
            b.step("archive", "builtin.agent.research-archivist@1",
                   ["task", "parentArtifact", "findingsNote", "auditFindings", "repairNote"],
                   record(archive=STRING), [("out", "archive", "archivePath")],
                   prompts.ARCHIVE),
            b.choice(
                "archive_result",
                [
                    (errors_of("archive"), fail("archive_failed", "research_archive_failed")),
                    (signal_of("planner", "decision", ["abort"]),
                     fail("research_aborted", "research_aborted")),
                ],
                done,
            ),
        ],
    )

    def then(step, failed, rest):
        name = step["name"]
        return [step, b.choice(f"{name}_result",
                               [(errors_of(name), fail(failed, "research_finalization_failed"))],
                               rest)]

    state_phase = b.seq("state_phase", then(
        finalizer("finalize_state", "stateNote", prompts.FINALIZE_STATE),
        "state_finalization_failed", audit_phase))
    backlog_phase = b.seq("backlog_phase", then(
        finalizer("finalize_backlog", "backlogNote", prompts.FINALIZE_BACKLOG),
        "backlog_finalization_failed", state_phase))
    return then(finalizer("finalize_findings", "findingsNote", prompts.FINALIZE_FINDINGS),
                "findings_finalization_failed", backlog_phase)


def build(push):
    b = Builder(push)
    # Failures that end the loop (through its `until`) and then the run.
    failures = [("planner", "planner_failed", "research_planner_failed")]
    if push:
        failures += [
            ("checkpoint_manifest", "manifest_failed", "research_manifest_failed"),
            ("checkpoint_delivery", "checkpoint_failed", "research_delivery_failed"),
        ]
    loop_promoted = ITERATION_STATE + ["plannerNote"] + (RECEIPT_FIELDS if push else [])
    loop = b.group(
        "loop",
        "research_loop",
        loop_promoted,
        body=iteration_body(b),
        until={"kind": "any", "guards": [signal_of("planner", "decision", ["abort", "stop"])]
               + [errors_of(name) for name, _, _ in failures]},
        maxIterations=10,
        maxIterationsInput=["options", "iterations"],
    )
    loop_result = b.choice(
        "loop_result",
        [(errors_of(node), fail(name, reason)) for node, name, reason in failures],
        b.seq("closing", closing(b)),
    )
    research = b.seq("research", [loop, loop_result])
    topology = b.verifier(
        "topology_validation",
        "builtin.agent.research-topology@1",
        ["task", "scouts", "judges"],
        {"kind": "null"},
        [],
        prompts.TOPOLOGY,
        {"verdict": ["accepted", "rejected"]},
    )
    preflight = b.seq(
        "preflight",
        [
            topology,
            b.choice(
                "topology_result",
                [
                    (errors_of("topology_validation"),
                     fail("topology_failed", "research_topology_failed")),
                    (signal_of("topology_validation", "verdict", ["rejected"]),
                     fail("topology_rejected", "research_topology_rejected")),
                ],
                research,
            ),
        ],
    )
    bootstrap = b.step(
        "bootstrap",
        "builtin.agent.research-bootstrap@1",
        ["task", "options"],
        {"kind": "record", "fields": {
            **{k: field(v) for k, v in ROLE_LIST.items()},
            "parentArtifact": field(STRING),
        }},
        [("out", "scouts", "scouts"), ("out", "judges", "judges"),
         ("out", "parentArtifact", "parentArtifact")],
        prompts.BOOTSTRAP,
    )
    root = b.seq(
        "run",
        [
            bootstrap,
            b.choice(
                "bootstrap_result",
                [(errors_of("bootstrap"), fail("bootstrap_failed", "research_bootstrap_failed"))],
                preflight,
            ),
        ],
    )
    return {
        "profile": "openengine.graph.full/v1",
        "initialInput": {"kind": "record", "fields": {
            "options": field(OPTIONS, required=False),
            "task": field(STRING),
        }},
        "policy": {"policy": "policy.trellis@1", "default": "deny"},
        "root": root,
    }


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for push, file in [(False, "auto-research.json"), (True, "auto-research-push.json")]:
        text = json.dumps(build(push), indent=2, ensure_ascii=False) + "\n"
        if not check:
            (ROOT / file).write_text(text)
        elif (ROOT / file).read_text() != text:
            stale.append(file)
    if stale:
        print(f"out of date: {', '.join(stale)}; run scripts/build-research-templates.py",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
