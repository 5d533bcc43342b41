#!/usr/bin/env python3
"""Observation output and admission of large graphs, whole `trellis` processes.

Two tables (issue 20, items 1 and 2):

1. NDJSON bytes of `trellis run --json` for maps of --items items (default 64, 256, 1024) of a
   no-op command worker: total bytes, lines and bytes per item (flat when the output is linear).
2. `trellis run --validate-only` against `trellis validate` of sequential chains of --steps
   steps (default 1000, 2000, 4000): an alternated series of --runs runs of each, medians and
   their ratio.

Python 3 standard library only; runs the binary given (a release build) in a temporary state
directory that it removes afterwards.

Usage: scripts/bench-observation.py [--trellis target/release/trellis] [--items 64,256,1024]
                                    [--steps 1000,2000,4000] [--runs 7] [--skip-map]
                                    [--skip-admission]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NULL = {"kind": "null"}

# A trivial worker: read the request, answer a null output.
PLAN = {"kind": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"]}


def noop_step(name):
    return {
        "kind": "step", "name": name, "worker": "command.%s@1" % name,
        "input": NULL, "output": NULL, "inputBindings": [], "writeBindings": [],
        "timeoutMs": 60000, "attempts": 1,
    }


def document(state, children):
    return {
        "profile": "openengine.graph.full/v1",
        "initialInput": state,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {
            "kind": "seq", "name": "root", "state": state, "promotedStatePaths": [],
            "children": children + [{"kind": "succeed", "name": "done", "output": NULL,
                                     "bindings": []}],
        },
    }


def map_graph(items):
    """A map of `items` no-op steps, all dispatched at once, and its input."""
    item = {"kind": "record", "fields": {"value": {"type": {"kind": "integer"}, "required": True}}}
    state = {"kind": "record",
             "fields": {"items": {"type": {"kind": "array", "items": item}, "required": True}}}
    fan = {
        "kind": "map", "name": "fan", "state": state, "body": noop_step("item"),
        "over": {"source": "state", "path": ["items"]}, "maxItems": items,
        "promotedStatePaths": [],
    }
    return document(state, [fan]), {"items": [{"value": v} for v in range(items)]}


def chain_graph(steps):
    """A sequence of `steps` no-op steps, one after another."""
    return document(NULL, [noop_step("s%d" % index) for index in range(steps)])


def write_json(path, value):
    with open(path, "w") as out:
        json.dump(value, out)


def load():
    return "load %.2f" % os.getloadavg()[0]


def map_table(trellis, root, sizes):
    print("NDJSON of `trellis run --json`, map of N no-op command items")
    print("  %6s  %12s  %7s  %14s  %8s  %s" % ("items", "bytes", "lines", "bytes per item",
                                                "wall s", "load"))
    env = dict(os.environ, TRELLIS_HOME=os.path.join(root, "home-map"))
    for items in sizes:
        graph, run_input = map_graph(items)
        graph_path = os.path.join(root, "map-%d.json" % items)
        input_path = os.path.join(root, "map-%d-input.json" % items)
        plan_path = os.path.join(root, "plan.json")
        write_json(graph_path, graph)
        write_json(input_path, run_input)
        write_json(plan_path, PLAN)
        command = [trellis, "run", graph_path, "--input", input_path,
                   "--uniform-runtime-config", plan_path, "--json"]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=root, env=env, capture_output=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0 or b'"succeeded"' not in done.stdout:
            sys.exit("map run failed:\n%s\n%s" % (done.stdout[-2000:], done.stderr[-2000:]))
        size = len(done.stdout)
        lines = done.stdout.count(b"\n")
        print("  %6d  %12d  %7d  %14.0f  %8.2f  %s" % (items, size, lines, size / items,
                                                      elapsed, load()))


def timed(command, cwd, env):
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit("%s failed:\n%s\n%s" % (" ".join(command), done.stdout[-2000:],
                                          done.stderr[-2000:]))
    return elapsed * 1000.0


def admission_table(trellis, root, sizes, runs):
    print("`run --validate-only` vs `validate`, sequential chain of N no-op steps, "
          "%d alternated runs each (medians)" % runs)
    print("  %6s  %12s  %16s  %6s  %s" % ("steps", "validate ms", "validate-only ms", "ratio",
                                           "load"))
    env = dict(os.environ, TRELLIS_HOME=os.path.join(root, "home-chain"))
    plan_path = os.path.join(root, "plan.json")
    write_json(plan_path, PLAN)
    for steps in sizes:
        graph_path = os.path.join(root, "chain-%d.json" % steps)
        write_json(graph_path, chain_graph(steps))
        validate = [trellis, "validate", graph_path]
        admit = [trellis, "run", graph_path, "--uniform-runtime-config", plan_path,
                 "--validate-only"]
        timed(validate, root, env)
        timed(admit, root, env)
        validate_ms, admit_ms = [], []
        for _ in range(runs):
            validate_ms.append(timed(validate, root, env))
            admit_ms.append(timed(admit, root, env))
        v, a = statistics.median(validate_ms), statistics.median(admit_ms)
        print("  %6d  %12.1f  %16.1f  %6.2f  %s" % (steps, v, a, a / v, load()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trellis", default="target/release/trellis", help="the Trellis binary")
    parser.add_argument("--items", default="64,256,1024",
                        help="comma-separated map widths whose `run --json` bytes to count")
    parser.add_argument("--steps", default="1000,2000,4000",
                        help="comma-separated chain lengths for run --validate-only vs validate")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per admission case")
    parser.add_argument("--skip-map", action="store_true", help="leave the NDJSON size table out")
    parser.add_argument("--skip-admission", action="store_true", help="leave the admission table out")
    args = parser.parse_args()
    trellis = os.path.abspath(args.trellis)
    with tempfile.TemporaryDirectory(prefix="trellis-bench-observation-") as root:
        if not args.skip_map:
            map_table(trellis, root, [int(n) for n in args.items.split(",")])
        if not args.skip_admission:
            admission_table(trellis, root, [int(n) for n in args.steps.split(",")], args.runs)


if __name__ == "__main__":
    main()
