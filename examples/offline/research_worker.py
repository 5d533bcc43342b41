#!/usr/bin/env python3
"""A stand-in for every agent role of the auto-research template: reads the node input from
stdin, does a small but real version of the role's job on the research folder
`.trellis/research/` (the experiment appends a line to `findings.txt` in the workspace), and
answers what the node's contract asks for. Every judge adopts and the planner always works, so
a run lasts `options.iterations` iterations.

Trellis runs it through the exec harness (`research_plan.json`, a uniform command plan).
Options, for trying the other paths:
  --abort-judge N   the `method` judge votes `abort` in iteration N (the change is undone)
  --audit-repair    the first disposition audit asks for a repair (the re-audit passes)
  --stop-at N       the planner stops at iteration N
"""
import json
import os
import shutil
import sys

ROOT = os.path.join(".trellis", "research")
SCOUTS = [{"role": "explorer"}, {"role": "synthesizer"}, {"role": "challenger"}]
JUDGES = [{"role": "evidence"}, {"role": "method"}, {"role": "progress"}]


def option(name):
    args = sys.argv[1:]
    if name not in args:
        return None
    at = args.index(name)
    return args[at + 1] if at + 1 < len(args) and not args[at + 1].startswith("--") else True


def path(*parts):
    return os.path.join(ROOT, *parts)


def write(relative, text):
    os.makedirs(os.path.dirname(relative) or ".", exist_ok=True)
    with open(relative, "w") as handle:
        handle.write(text)


def read_json(relative, default):
    try:
        with open(relative) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def write_json(relative, value):
    write(relative, json.dumps(value, indent=2) + "\n")


def bootstrap(given):
    state = read_json(path("state.json"), None)
    if state is None:
        # With a file in each, the folders survive in git and in the verifiers' copies.
        write(path("archive", "README.md"), "Closed research sessions.\n")
        write(path("iterations", "README.md"), "One folder per iteration.\n")
        write(path("charter.md"), f"# Charter\n\n{given['task']}\n")
        state = {"status": "active", "topology": {"scouts": SCOUTS, "judges": JUDGES},
                 "nextIteration": 1, "parentArtifact": "", "iterations": []}
        write(path("summary.md"), "# Summary\n\nNothing measured yet.\n")
        write_json(path("backlog.json"), {"items": []})
    state["status"] = "active"
    write_json(path("state.json"), state)
    return {"output": {"scouts": state["topology"]["scouts"],
                       "judges": state["topology"]["judges"],
                       "parentArtifact": state["parentArtifact"]}}


def topology(given):
    files = ["charter.md", "state.json", "summary.md", "backlog.json", "archive", "iterations"]
    missing = [f for f in files if not os.path.exists(path(f))]
    roles = [s["role"] for s in given["scouts"]] + [j["role"] for j in given["judges"]]
    ok = not missing and sorted(roles) == sorted(r["role"] for r in SCOUTS + JUDGES)
    message = "topology and folder complete" if ok else f"missing: {missing}, roles: {roles}"
    return {"output": None, "signals": {"verdict": "accepted" if ok else "rejected"},
            "diagnostic": {"message": message}}


def planner(given):
    state = read_json(path("state.json"), {})
    number = state.get("nextIteration", 1)
    iteration = f"{number:06d}"
    stop_at = option("--stop-at")
    if stop_at is not None and int(stop_at) == number:
        return {"output": {"iteration": iteration, "hypothesis": ""},
                "signals": {"decision": "stop"},
                "diagnostic": {"message": "stop: the question is answered"}}
    hypothesis = f"caching helps, measured again in iteration {iteration}"
    return {"output": {"iteration": iteration, "hypothesis": hypothesis},
            "signals": {"decision": "work"},
            "diagnostic": {"message": f"work: test '{hypothesis}'"}}


def staging(given):
    folder = path("iterations", given["iteration"])
    os.makedirs(os.path.join(folder, "before"), exist_ok=True)
    write(os.path.join(folder, "hypothesis.md"), given["hypothesis"] + "\n")
    roles = [s["role"] for s in given["scouts"]]
    write(os.path.join(folder, "proposals.md"),
          "".join(f"## {r}\n\n{p}\n\n" for r, p in zip(roles, given["proposals"])))
    if os.path.exists("findings.txt"):
        shutil.copy("findings.txt", os.path.join(folder, "before", "findings.txt"))
    plan = "Append one measurement to findings.txt; changes: findings.txt"
    write(os.path.join(folder, "plan.md"), plan + "\n")
    return {"output": {"plan": plan}}


def experiment(given):
    with open("findings.txt", "a") as handle:
        handle.write(f"iteration {given['iteration']}: 12% faster with the cache\n")
    result = "12% faster with the cache (3 runs, spread 1%)"
    write(path("iterations", given["iteration"], "results.md"), result + "\n")
    return {"output": {"result": result}}


def judge(given, role):
    abort_at = option("--abort-judge")
    aborting = role == "method" and abort_at is not None and int(abort_at) == int(given["iteration"])
    verdict = "abort" if aborting else "adopt"
    return {"output": {"assessment": f"{role}: {verdict}"}, "signals": {"verdict": verdict},
            "diagnostic": {"message": f"{role} votes {verdict}"}}


def recorder(given, node):
    disposition = {"adopt_iteration": "adopted", "record_iteration": "recorded",
                   "abort_iteration": "aborted", "abort_review": "review_failed",
                   "abort_scouting": "scouting_failed"}[node]
    folder = path("iterations", given["iteration"])
    parent = given["parentArtifact"]
    if disposition == "adopted":
        parent = f"iterations/{given['iteration']}"
    else:
        before = os.path.join(folder, "before", "findings.txt")
        if os.path.exists(before):
            shutil.copy(before, "findings.txt")
        elif os.path.exists("findings.txt"):
            os.remove("findings.txt")
    write_json(os.path.join(folder, "decision.json"),
               {"disposition": disposition, "verdicts": given["verdicts"]})
    state = read_json(path("state.json"), {})
    state.setdefault("iterations", []).append(
        {"id": given["iteration"], "hypothesis": given["hypothesis"], "disposition": disposition})
    state["nextIteration"] = int(given["iteration"]) + 1
    state["parentArtifact"] = parent
    write_json(path("state.json"), state)
    return {"output": {"parentArtifact": parent,
                       "disposition": f"{given['iteration']}: {disposition}"}}


def finalizer(given, node):
    if node == "finalize_findings":
        write(path("report.md"), "# Report\n\nThe cache makes startup 12% faster.\n")
        return {"output": {"note": "The cache makes startup 12% faster."}}
    if node == "finalize_state":
        state = read_json(path("state.json"), {})
        state["status"] = "stopped" if given["plannerNote"].startswith("stop") else "exhausted"
        write_json(path("state.json"), state)
    return {"output": {"note": f"{node} done"}}


def audit(given, node):
    repair = (option("--audit-repair") is not None and node == "disposition_audit"
              and not given["repairNote"])
    verdict = "repair_required" if repair else "passed"
    findings = "iteration 000001 lacks a summary line" if repair else "every disposition holds"
    return {"output": {"findings": findings}, "signals": {"audit": verdict},
            "diagnostic": {"message": verdict}}


def archive(given):
    state = read_json(path("state.json"), {})
    ids = [i["id"] for i in state.get("iterations", [])]
    record = {"audit": "passed", "repaired": bool(given["repairNote"]),
              "findings": given["auditFindings"], "repair": given["repairNote"],
              "iterations": state.get("iterations", []),
              "parentArtifact": given["parentArtifact"]}
    write_json(path("audit.json"), record)
    name = f"{ids[0]}-{ids[-1]}" if ids else "empty"
    target = path("archive", name)
    os.makedirs(target, exist_ok=True)
    for file in ["charter.md", "state.json", "summary.md", "backlog.json", "report.md",
                 "audit.json"]:
        if os.path.exists(path(file)):
            shutil.copy(path(file), os.path.join(target, file))
    return {"output": {"archive": target}}


def main():
    request = json.load(sys.stdin)
    node = request["node"]
    given = request["input"]
    if node == "bootstrap":
        reply = bootstrap(given)
    elif node == "topology_validation":
        reply = topology(given)
    elif node == "planner":
        reply = planner(given)
    elif node == "research_scout":
        role = given["role"]
        reply = {"output": {"proposal": f"{role}: measure {given['hypothesis']!r} three times"},
                 "signals": {}, "diagnostic": {"message": f"{role} proposed"}}
    elif node == "staging":
        reply = staging(given)
    elif node == "experiment":
        reply = experiment(given)
    elif node == "research_judge":
        reply = judge(given, given["role"])
    elif node in ("adopt_iteration", "record_iteration", "abort_iteration", "abort_review",
                  "abort_scouting"):
        reply = recorder(given, node)
    elif node in ("finalize_findings", "finalize_backlog", "finalize_state"):
        reply = finalizer(given, node)
    elif node in ("disposition_audit", "disposition_reaudit"):
        reply = audit(given, node)
    elif node == "disposition_repair":
        write(path("repair.md"), given["auditFindings"] + "\n")
        reply = {"output": {"note": "added the missing summary line"}}
    elif node == "archive":
        reply = archive(given)
    elif node == "checkpoint_manifest":
        reply = {"output": {"title": f"research {given['iteration']}: {given['lastDisposition']}",
                            "description": given["hypothesis"]},
                 "signals": {}, "diagnostic": {"message": "manifest written"}}
    else:
        print(f"research_worker.py does not know node {node}", file=sys.stderr)
        sys.exit(2)
    output = reply["output"] if isinstance(reply["output"], dict) else {}
    role = given.get("role")
    iteration = given.get("iteration") or output.get("iteration")
    label = node + (f"/{role}" if role else "") + (f" in {iteration}" if iteration else "")
    print(f"{label}: done", file=sys.stderr)
    print(json.dumps(reply))


if __name__ == "__main__":
    main()
