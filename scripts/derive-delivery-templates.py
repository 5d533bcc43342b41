#!/usr/bin/env python3
"""Derives the pull-request and merge variants of the software-change template from its push
variant (templates/software-change-push.json), so the three stay the same graph up to delivery.

Run from the repository root after editing the push variant; commit the results.
"""
import copy
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "templates"

WORKER_NOTE = (
    "\n\nIf `deliveryFeedback` is not empty, your change was already delivered as a pull request "
    "and its reviewers or checks asked for more: the field lists each review comment, requested "
    "change and failing check. Address every item in the code (the branch already holds your "
    "earlier rounds); a failing check means the project's own build or tests fail on the pushed "
    "change."
)

STRING = {"type": {"kind": "string"}, "required": False}


def find(node, name):
    if isinstance(node, dict):
        if node.get("name") == name:
            return node
        values = node.values()
    elif isinstance(node, list):
        values = node
    else:
        return None
    for value in values:
        found = find(value, name)
        if found is not None:
            return found
    return None


def every_state(node, visit):
    if isinstance(node, dict):
        if isinstance(node.get("state"), dict):
            visit(node["state"])
        for value in node.values():
            every_state(value, visit)
    elif isinstance(node, list):
        for value in node:
            every_state(value, visit)


def enum(values):
    return {"type": {"kind": "enum", "values": values}, "required": True}


def derive(push, mode):
    graph = copy.deepcopy(push)
    extra = ["pullRequestId"] + (["mergeRevision"] if mode == "merge" else [])

    def add_fields(state):
        for name in extra:
            state["fields"][name] = copy.deepcopy(STRING)

    every_state(graph, add_fields)

    # The delivery feedback reaches the worker of the next round.
    for name in ["change_loop", "change_iteration", "worker_result", "reviews", "review_result"]:
        paths = find(graph, name)["promotedStatePaths"]
        if ["deliveryFeedback"] not in paths:
            paths.append(["deliveryFeedback"])
    worker = find(graph, "worker")
    worker["instructions"] += WORKER_NOTE
    worker["input"]["fields"]["deliveryFeedback"] = {"type": {"kind": "string"}, "required": True}
    worker["inputBindings"].append(
        {"target": ["deliveryFeedback"], "value": {"source": "state", "path": ["deliveryFeedback"]}}
    )

    delivery = find(graph, "push_delivery")
    delivery["name"] = "pr_delivery" if mode == "pr" else "merge_delivery"
    delivery["promotedStatePaths"] = [["deliveryFeedback"]]
    deliver = find(delivery, "deliver")
    if mode == "pr":
        deliver["worker"] = "builtin.git-delivery.pr@2"
        labels = ["ci_failed", "conflict", "ready", "repair_required"]
        version = "v2"
        success = "ready"
    else:
        deliver["worker"] = "builtin.git-delivery.merge@3"
        labels = ["ci_failed", "conflict", "merged", "repair_required"]
        version = "v3"
        success = "merged"
    fields = {
        "version": enum([version]),
        "mode": enum(["pr" if mode == "pr" else "merge"]),
        "outcome": enum(labels),
        "repository": {"type": {"kind": "string"}, "required": True},
        "targetBranch": {"type": {"kind": "string"}, "required": True},
        "headRevision": {"type": {"kind": "string"}, "required": True},
    }
    for name in extra:
        fields[name] = {"type": {"kind": "string"}, "required": True}
    deliver["output"] = {"kind": "record", "fields": fields}
    deliver["signals"] = {"delivery": labels}
    writes = [
        {"value": {"node": "deliver", "channel": "out", "path": [f]}, "target": [f]}
        for f in ["repository", "targetBranch", "headRevision"] + extra
    ]
    writes.append(
        {
            "value": {"node": "deliver", "channel": "diagnostic", "path": ["message"]},
            "target": ["deliveryFeedback"],
        }
    )
    deliver["writeBindings"] = writes

    result = find(delivery, "delivery_result")
    repair = {
        "when": {
            "kind": "in",
            "value": {"name": "deliver", "source": "signal", "field": "delivery"},
            "labels": [l for l in labels if l != success],
        },
        "node": {
            "kind": "map",
            "name": "delivery_repair",
            "state": copy.deepcopy(result["state"]),
            "promotedStatePaths": [],
            "over": {"source": "state", "path": ["nextRound"]},
            "maxItems": 1,
            "body": {"kind": "fail", "name": "delivery_repair_invalid", "reason": "invalid_round_state"},
        },
    }
    result["branches"].append(repair)
    done = result["otherwise"]
    out_fields = {
        "acceptanceReview": {"type": {"kind": "string"}, "required": True},
        "codeReview": {"type": {"kind": "string"}, "required": True},
        "repository": {"type": {"kind": "string"}, "required": True},
        "pullRequestId": {"type": {"kind": "string"}, "required": True},
        "headRevision": {"type": {"kind": "string"}, "required": True},
        "delivery": {"type": {"kind": "string"}, "required": True},
    }
    bindings = [
        ("acceptanceReview", "acceptanceFeedback"),
        ("codeReview", "codeFeedback"),
        ("repository", "repository"),
        ("pullRequestId", "pullRequestId"),
        ("headRevision", "headRevision"),
        ("delivery", "deliveryFeedback"),
    ]
    if mode == "merge":
        out_fields["mergeRevision"] = {"type": {"kind": "string"}, "required": True}
        bindings.append(("mergeRevision", "mergeRevision"))
    done["output"] = {"kind": "record", "fields": out_fields}
    done["bindings"] = [
        {"target": [t], "value": {"source": "state", "path": [s]}} for t, s in bindings
    ]
    return graph


def main():
    push = json.loads((ROOT / "software-change-push.json").read_text())
    for mode, file in [("pr", "software-change-pr.json"), ("merge", "software-change-merge.json")]:
        text = json.dumps(derive(push, mode), indent=2, ensure_ascii=False) + "\n"
        (ROOT / file).write_text(text)


if __name__ == "__main__":
    main()
