#!/usr/bin/env python3
"""Whole-process timing of `trellis run` on a one-node graph with a trivial command worker.

Runs `trellis run GRAPH --json` RUNS times (after WARMUP untimed runs) in a fresh state
directory, each from process start to exit (the run is terminal when it exits), and prints
the median, p95, min and max wall time, plus the ledger's bytes per run afterwards.

With --git the workspace is a git repository (one commit of --files files), so every run
takes its checkpoints there. With --software-change the run is the software-change template
with instant command stand-ins for its worker (it edits a file) and its two reviewers (they
accept): the accept path, one worker round and one review round.

Usage: scripts/bench-cli-run.py [--trellis target/release/trellis] [--runs 50] [--warmup 3]
                                [--git] [--files 100] [--software-change] [--extra=ARGS]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GRAPH = {
    "profile": "openengine.graph.full/v1",
    "initialInput": {"kind": "null"},
    "policy": {"policy": "policy.strict@1", "default": "deny"},
    "root": {
        "kind": "seq",
        "name": "root",
        "state": {"kind": "null"},
        "promotedStatePaths": [],
        "children": [
            {
                "kind": "step",
                "name": "work",
                "worker": "command.work@1",
                "input": {"kind": "null"},
                "output": {"kind": "null"},
                "inputBindings": [],
                "writeBindings": [],
                "timeoutMs": 60000,
                "attempts": 1,
            },
            {"kind": "succeed", "name": "done", "output": {"kind": "null"}, "bindings": []},
        ],
    },
}

# A trivial worker: read the request, answer a null output.
PLAN = {"kind": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"]}

# Instant stand-ins for the software-change template's agents: the worker edits a file, the
# reviewers accept.
EDIT = "cat >/dev/null; date +%s%N >> change.txt; echo '{\"output\":null}'"
ACCEPT = ("cat >/dev/null; echo '{\"output\":null,\"signals\":{\"verdict\":\"accepted\"},"
          "\"diagnostic\":{\"message\":\"looks right\"}}'")
SOFTWARE_CHANGE_PLAN = {
    "nodes": {
        "worker": {"kind": "command", "command": ["/bin/sh", "-c", EDIT]},
        "acceptance": {"kind": "command", "command": ["/bin/sh", "-c", ACCEPT]},
        "code": {"kind": "command", "command": ["/bin/sh", "-c", ACCEPT]},
    }
}


def make_repository(workspace, files):
    """One commit of `files` small files in directories of 100, the benchmark files ignored."""
    for index in range(files):
        directory = os.path.join(workspace, "src", "d%03d" % (index // 100))
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "f%05d.txt" % index), "w") as out:
            out.write("file %d\n" % index)
    with open(os.path.join(workspace, ".gitignore"), "w") as out:
        out.write("graph.json\nplan.json\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
    for command in (["git", "init", "--quiet"], ["git", "add", "--all"],
                    ["git", "commit", "--quiet", "-m", "bench"]):
        subprocess.run(command, cwd=workspace, env=env, check=True)


def percentile(sorted_values, fraction):
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trellis", default="target/release/trellis", help="the Trellis binary")
    parser.add_argument("--runs", type=int, default=50, help="measured runs")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured runs first")
    parser.add_argument("--git", action="store_true", help="run in a git repository")
    parser.add_argument("--files", type=int, default=100, help="files in that repository")
    parser.add_argument("--software-change", action="store_true",
                        help="the software-change template's accept path")
    parser.add_argument("--extra", default="",
                        help="more `trellis run` arguments, e.g. --extra=--no-checkpoints")
    args = parser.parse_args()
    trellis = os.path.abspath(args.trellis)

    with tempfile.TemporaryDirectory(prefix="trellis-bench-") as root:
        home = os.path.join(root, "home")
        workspace = os.path.join(root, "workspace")
        os.makedirs(workspace)
        if args.git:
            make_repository(workspace, args.files)
        plan = SOFTWARE_CHANGE_PLAN if args.software_change else PLAN
        for name, document in [("graph.json", GRAPH), ("plan.json", plan)]:
            with open(os.path.join(workspace, name), "w") as out:
                json.dump(document, out)
        env = dict(os.environ, TRELLIS_HOME=home)
        if args.software_change:
            command = [trellis, "run", "--template", "software-change", "--task", "bench",
                       "--runtime-config", "plan.json", "--json"]
        else:
            command = [trellis, "run", "graph.json", "--uniform-runtime-config", "plan.json",
                       "--json"]
        command += args.extra.split()

        timings = []
        for index in range(args.warmup + args.runs):
            started = time.perf_counter()
            done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            if done.returncode != 0 or '"succeeded"' not in done.stdout:
                sys.exit("run failed:\n%s\n%s" % (done.stdout, done.stderr))
            if index >= args.warmup:
                timings.append(elapsed * 1000.0)

        # A last observer closes the ledger's connections, checkpointing its WAL.
        subprocess.run([trellis, "list"], cwd=workspace, env=env, capture_output=True, check=True)
        ledger = os.path.join(home, "ledger.sqlite3")
        total_runs = args.warmup + args.runs
        ledger_bytes = os.path.getsize(ledger) + (
            os.path.getsize(ledger + "-wal") if os.path.exists(ledger + "-wal") else 0
        )

    timings.sort()
    shape = "software-change accept path" if args.software_change else "one-node graph"
    where = "git repository of %d files" % args.files if args.git else "plain directory"
    extra = " " + args.extra if args.extra else ""
    print("trellis run%s, %s, %s, %d runs (%d warm-up)" % (
        extra, shape, where, args.runs, args.warmup))
    print("  median %.1f ms   p95 %.1f ms   min %.1f ms   max %.1f ms" % (
        statistics.median(timings), percentile(timings, 0.95), timings[0], timings[-1]))
    print("  ledger %d bytes after %d runs = %d bytes per one-node run" % (
        ledger_bytes, total_runs, ledger_bytes // total_runs))


if __name__ == "__main__":
    main()
