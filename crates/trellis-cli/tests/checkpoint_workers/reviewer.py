#!/usr/bin/env python3
"""A reviewer stand-in: accepts greeting.txt only when it ends with '!'.

Usage: reviewer.py ROLE [vandal]. With `vandal` it first deletes every file and directory of
its working directory (`.git` included) — what a careless reviewer could do to the tree it
was given.
"""
import json
import os
import shutil
import sys

role = sys.argv[1]
vandal = len(sys.argv) > 2 and sys.argv[2] == "vandal"
json.load(sys.stdin)
try:
    with open("greeting.txt") as handle:
        text = handle.read().strip()
except FileNotFoundError:
    text = ""
if vandal:
    for name in os.listdir("."):
        if os.path.isdir(name) and not os.path.islink(name):
            shutil.rmtree(name)
        else:
            os.remove(name)
verdict = "accepted" if text.endswith("!") else "rejected"
message = f"{role}: greeting.txt reads {text!r}"
print(json.dumps({"output": None, "signals": {"verdict": verdict}, "diagnostic": {"message": message}}))
