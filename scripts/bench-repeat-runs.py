#!/usr/bin/env python3
"""Whole-process benchmark of one repository used run after run: what checkpoints leave behind.

Runs the same chain of trivial command steps (scripts/bench-worker.c, built here; checkpoints
on) --runs times in one git repository with one Trellis home, as a user who runs Trellis in
their project every day does. After each run it counts the packs Trellis wrote there (the
lines of `trellis/own-packs` in git's common directory) and all packs in the repository, and
times the run (`trellis run --json` to its exit). Several binaries (--trellis, repeatable)
take turns run by run, each in a repository of its own, so load drifts hit them alike.

Prints, per binary: the first run's time, the median of the last five, their ratio, and the
packs after the last run. --writing makes every step change a file (a shell worker appending
a line), so every checkpoint writes objects: the case where packs pile up.

Usage: scripts/bench-repeat-runs.py [--trellis PATH]... [--runs 40] [--steps 100] [--writing]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER_SOURCE = os.path.join(REPO, "scripts", "bench-worker.c")
NULL = {"kind": "null"}


def chain(steps):
    children = [{"kind": "step", "name": f"s{n}", "worker": f"command.s{n}@1", "input": NULL,
                 "output": NULL, "inputBindings": [], "writeBindings": [],
                 "timeoutMs": 600000, "attempts": 1} for n in range(1, steps + 1)]
    children.append({"kind": "succeed", "name": "done", "output": NULL, "bindings": []})
    return {"profile": "openengine.graph.full/v1", "initialInput": NULL,
            "policy": {"policy": "policy.strict@1", "default": "deny"},
            "root": {"kind": "seq", "name": "root", "state": NULL, "promotedStatePaths": [],
                     "children": children}}


def git(directory, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    subprocess.run(["git", *args], cwd=directory, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def repository(scratch, label, graph, plan):
    """A project with a few files and one commit, plus the graph and plan to run."""
    directory = tempfile.mkdtemp(prefix=f"repo-{label}-", dir=scratch)
    for index in range(50):
        with open(os.path.join(directory, f"file{index}.txt"), "w") as out:
            out.write(f"line {index}\n" * 20)
    for name, value in (("graph.json", graph), ("plan.json", plan)):
        with open(os.path.join(directory, name), "w") as out:
            json.dump(value, out)
    git(directory, "init", "--quiet")
    git(directory, "add", "--all")
    git(directory, "commit", "--quiet", "-m", "project")
    return directory


def packs(directory):
    own = os.path.join(directory, ".git", "trellis", "own-packs")
    ours = sum(1 for line in open(own) if line.strip()) if os.path.exists(own) else 0
    pack_dir = os.path.join(directory, ".git", "objects", "pack")
    every = sum(1 for name in os.listdir(pack_dir) if name.endswith(".pack"))
    return ours, every


def one_run(trellis, directory, home):
    env = dict(os.environ, TRELLIS_HOME=home)
    for name in ("TRELLIS_LEDGER", "TRELLIS_DISPATCH"):
        env.pop(name, None)
    started = time.monotonic()
    done = subprocess.run([trellis, "run", "graph.json", "--uniform-runtime-config",
                           "plan.json", "--json"], cwd=directory, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0 or '"succeeded"' not in done.stdout:
        sys.exit(f"bench-repeat-runs: a run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trellis", action="append",
                        help="a Trellis binary (repeat to compare; default target/release/trellis)")
    parser.add_argument("--runs", type=int, default=40, help="runs in each repository")
    parser.add_argument("--steps", type=int, default=100, help="steps of the chain")
    parser.add_argument("--writing", action="store_true",
                        help="every step appends a line to a file (a shell worker)")
    args = parser.parse_args()
    binaries = [os.path.abspath(b) for b in (args.trellis or
                                             [os.path.join(REPO, "target/release/trellis")])]
    scratch = tempfile.mkdtemp(prefix="trellis-bench-repeat-")
    try:
        worker = os.path.join(scratch, "bench-worker")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-static", "-nostdlib",
                        "-fno-stack-protector", "-o", worker, WORKER_SOURCE], check=True)
        plan = {"kind": "command", "command": [worker]}
        if args.writing:
            plan = {"kind": "command", "command": [
                "/bin/sh", "-c",
                "cat >/dev/null; date +%s%N >> notes.txt; echo '{\"output\":null}'"]}
        places = [(repository(scratch, str(n), chain(args.steps), plan),
                   tempfile.mkdtemp(prefix="home-", dir=scratch)) for n in range(len(binaries))]
        walls = [[] for _ in binaries]
        for run in range(1, args.runs + 1):
            for index, binary in enumerate(binaries):
                directory, home = places[index]
                walls[index].append(one_run(binary, directory, home))
                ours, every = packs(directory)
                print(f"  run {run:>3} {binary}: {walls[index][-1]:.3f} s, Trellis packs {ours},"
                      f" all packs {every}", flush=True)
        kind = "each step appending to a file" if args.writing else "trivial steps"
        print(f"\n{args.runs} runs of a {args.steps}-step chain ({kind}) in one repository "
              f"each (checkpoints on)")
        print("| binary | first run | median of last 5 | last / first | Trellis packs | all packs |")
        print("|---|---|---|---|---|---|")
        for index, binary in enumerate(binaries):
            first, last = walls[index][0], statistics.median(walls[index][-5:])
            ours, every = packs(places[index][0])
            print(f"| {binary} | {first:.3f} s | {last:.3f} s | {last / first:.2f} | {ours} |"
                  f" {every} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
