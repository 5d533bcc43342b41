#!/usr/bin/env python3
"""A stand-in for a coding agent: reads the node input from stdin and edits the workspace.

It writes greeting.txt; after a rejection it applies the reviewers' feedback (it fixes the
punctuation the reviewers asked for), and after pull-request feedback (`deliveryFeedback`) it
adds the thank-you line the pull request's reviewer asks for. Trellis runs it through the exec
harness.
"""
import json
import sys
import time

request = json.load(sys.stdin)
task = request["input"]["task"]
feedback = request["input"].get("acceptanceFeedback", "") + request["input"].get("codeFeedback", "")
print(f"working on: {task}", file=sys.stderr)
time.sleep(1.0)  # long enough to watch the live view
delivery_feedback = request["input"].get("deliveryFeedback", "")
text = "Hello, world" if not feedback else "Hello, world!"
if delivery_feedback:
    text += "\nThanks for the review!"
with open("greeting.txt", "w") as handle:
    handle.write(text + "\n")
print(f"wrote greeting.txt ({'repaired after review' if feedback else 'first attempt'})", file=sys.stderr)
print(json.dumps({"output": None}))
