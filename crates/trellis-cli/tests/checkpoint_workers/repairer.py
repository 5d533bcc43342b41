#!/usr/bin/env python3
"""A coding-agent stand-in for the checkpoint tests: one behaviour per repair round.

Usage: repairer.py MARKER_DIR. The round is one more than the lines of `progress.txt` (an
untracked file it keeps in the workspace). Before changing anything it writes a manifest of
the workspace as it found it (every file but `.git`: path, mode, sha256) to
MARKER_DIR/manifest-round<N>-<K>.json (K counts attempts of that round), so a test can compare
what a restore produced with what the round started from.

  round 1  greeting.txt "Hello"; deletes the tracked obsolete.txt; creates notes/round1.txt
  round 2  greeting.txt "Hello, world"; creates notes/round2.txt
  round 3  greeting.txt "Hello, world!" (what the reviewers accept); the first time, it also
           deletes notes/round1.txt, recreates obsolete.txt, writes MARKER_DIR/round3-started
           and then sleeps until it is killed
"""
import hashlib
import json
import os
import stat
import sys
import time

marker = sys.argv[1]
json.load(sys.stdin)


def manifest():
    entries = {}
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if not (root == "." and d == ".git")]
        for name in files:
            path = os.path.join(root, name)[2:]
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                entries[path] = ["link", os.readlink(path)]
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                entries[path] = ["file", bool(info.st_mode & 0o100), digest]
    return entries


try:
    with open("progress.txt") as handle:
        done = len(handle.read().splitlines())
except FileNotFoundError:
    done = 0
round_number = done + 1
attempt = 1
while os.path.exists(os.path.join(marker, f"manifest-round{round_number}-{attempt}.json")):
    attempt += 1
with open(os.path.join(marker, f"manifest-round{round_number}-{attempt}.json"), "w") as handle:
    json.dump(manifest(), handle, sort_keys=True)

with open("progress.txt", "a") as handle:
    handle.write(f"round {round_number}\n")
if round_number == 1:
    with open("greeting.txt", "w") as handle:
        handle.write("Hello\n")
    os.remove("obsolete.txt")
    os.makedirs("notes", exist_ok=True)
    with open("notes/round1.txt", "w") as handle:
        handle.write("first attempt\n")
elif round_number == 2:
    with open("greeting.txt", "w") as handle:
        handle.write("Hello, world\n")
    with open("notes/round2.txt", "w") as handle:
        handle.write("first repair\n")
else:
    with open("greeting.txt", "w") as handle:
        handle.write("Hello, world!\n")
    if attempt == 1:
        os.remove("notes/round1.txt")
        with open("obsolete.txt", "w") as handle:
            handle.write("brought back by a round that never finished\n")
        with open(os.path.join(marker, "round3-started"), "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(600)
print(json.dumps({"output": None}))
