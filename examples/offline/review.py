#!/usr/bin/env python3
"""A stand-in for a reviewing agent: accepts greeting.txt only when it ends with '!'.

Usage: review.py acceptance|code. Prints the verifier reply the node contract asks for:
{"output": null, "signals": {"verdict": ...}, "diagnostic": {"message": ...}}.
"""
import json
import sys
import time

role = sys.argv[1] if len(sys.argv) > 1 else "review"
json.load(sys.stdin)
time.sleep(0.7)
try:
    text = open("greeting.txt").read().strip()
except FileNotFoundError:
    text = ""
if text.endswith("!"):
    verdict, message = "accepted", f"{role}: greeting.txt reads {text!r}; checked by reading the file"
else:
    verdict, message = "rejected", f"{role}: 1. greeting.txt must end with an exclamation mark (found {text!r})"
print(f"{role} verdict: {verdict}", file=sys.stderr)
print(json.dumps({"output": None, "signals": {"verdict": verdict}, "diagnostic": {"message": message}}))
