#!/usr/bin/env python3
"""A stand-in for the agents of the issue-review and pr-review templates: reads the node input
from stdin and answers what each node's contract asks for, from the input alone
(auto-research has its own stand-in, `research_worker.py`).

Trellis runs it through the exec harness (`review_plan.json`, a uniform command plan); delivery
(the report comment) is Trellis's own and needs no binding.
"""
import json
import sys

request = json.load(sys.stdin)
node = request["node"]
task = request["input"]
context = task.get("context", {})
title = context.get("title", "")

if node == "reviewer":
    reply = {"output": {"body": f"Issue review of {title!r}: the described behaviour was checked against the code."}}
elif node == "classifier":
    reply = {
        "output": {
            "reproductionReason": "one claim to reproduce",
            "reproductionTasks": [{"plan": f"Reproduce the claim of {title!r}"}],
        },
        "signals": {},
        "diagnostic": None,
    }
elif node == "reproducer":
    reply = {"output": {"reproductionEvidence": "reproduced offline"}}
elif node == "code_checker":
    reply = {
        "output": {"body": f"PR review of {title!r}: one claim reproduced; the code matches it."},
        "signals": {},
        "diagnostic": None,
    }
else:
    print(f"review_worker.py does not know node {node}", file=sys.stderr)
    sys.exit(2)
print(f"{node}: done", file=sys.stderr)
print(json.dumps(reply))
