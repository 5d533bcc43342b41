#!/usr/bin/env python3
"""A command worker for the CLI's subprocess tests; what it does follows the node's name.

Every invocation first appends the node name to `invocations.log` in its working directory
(the run's workspace), so tests can count how often each node really ran, and `[node, input]`
as one JSON line to `calls.log`, so they can tell loop rounds and map items apart. Then, by
the prefix of the node name:

  chain<N>  output {"v": (sum of the input's fields * 31 + N) % 1000003}, after
            WORKER_DELAY_MS milliseconds
  double    output {"result": value * 2}
  bump      output {"round": round + 1}
  check     verifier: verdict "accepted" once round >= 3, else "rejected"
  race      verifier: verdict "accepted" (once no file hold-<node> exists), output
            {"note": "fast"}
  square    output {"result": value * value}
  gate      waits for a file open-<node> in the workspace, then outputs {"result": value + 1}
  block     starts a grandchild, records both pids in pids-<node>.json, then sleeps
  stubborn  like block, but it and its grandchild ignore SIGTERM
  slow      sleeps far longer than any test waits
  noop      output null
  refuse    exits 75 (a refusal)
  flaky     exits 75 (a refusal) until a file fixed-<node> exists in the workspace, then
            outputs {"result": value + 1}
  crash     exits 3 (a crash)
  garble    prints a reply that is not JSON
  noisy     prints NOISY_LINES numbered lines of 100 bytes to stderr, then outputs null
  flood     prints FLOOD_BYTES bytes of 1 KiB lines to stderr, then outputs null
  leak      prints every CANARY_* variable to stderr raw, inside JSON (ASCII and UTF-8) and
            as Python's repr (one raw after 4,066 bytes of padding on the same line), then
            outputs null
  victim    outputs null when a file spare-<node> exists; otherwise records its pid (as
            both pids) in pids-<node>.json and sleeps until someone kills it
  pause     sleeps PAUSE_MS milliseconds, then outputs null
  fds       writes what each of its open descriptors names, one per line, to fds-<node>.txt,
            then outputs null
"""

import json
import os
import signal
import subprocess
import sys
import time


def append_line(path, line):
    # One short write on an O_APPEND descriptor: concurrent workers never interleave lines.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def reply(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def write_pids(node, pids):
    path = "pids-%s.json" % node
    with open(path + ".tmp", "w") as out:
        json.dump(pids, out)
    os.rename(path + ".tmp", path)


def main():
    request = json.load(sys.stdin)
    node = request["node"]
    given = request["input"]
    append_line("invocations.log", node)
    append_line("calls.log", json.dumps([node, given], sort_keys=True, separators=(",", ":")))
    print("%s attempt %d starting" % (node, request["attempt"]), file=sys.stderr, flush=True)

    if node.startswith("chain"):
        time.sleep(int(os.environ.get("WORKER_DELAY_MS", "0")) / 1000.0)
        step = int(node[len("chain"):])
        total = sum(given.values())
        reply({"output": {"v": (total * 31 + step) % 1000003}})
    elif node.startswith("double"):
        reply({"output": {"result": given["value"] * 2}})
    elif node.startswith("bump"):
        reply({"output": {"round": given["round"] + 1}})
    elif node.startswith("check"):
        verdict = "accepted" if given["round"] >= 3 else "rejected"
        print("round %d: %s" % (given["round"], verdict), file=sys.stderr, flush=True)
        reply({
            "output": {"round": given["round"]},
            "signals": {"verdict": verdict},
            "diagnostic": {"round": given["round"]},
        })
    elif node.startswith("race"):
        while os.path.exists("hold-" + node):
            time.sleep(0.02)
        reply({
            "output": {"note": "fast"},
            "signals": {"verdict": "accepted"},
            "diagnostic": {"round": 0},
        })
    elif node.startswith("square"):
        reply({"output": {"result": given["value"] * given["value"]}})
    elif node.startswith("gate"):
        while not os.path.exists("open-" + node):
            time.sleep(0.02)
        reply({"output": {"result": given["value"] + 1}})
    elif node.startswith("block"):
        grandchild = subprocess.Popen(["sleep", "600"])
        write_pids(node, {"worker": os.getpid(), "grandchild": grandchild.pid})
        time.sleep(600)
    elif node.startswith("stubborn"):
        # Ignored signals stay ignored across fork and exec: the grandchild ignores it too.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grandchild = subprocess.Popen(["sleep", "600"])
        write_pids(node, {"worker": os.getpid(), "grandchild": grandchild.pid})
        time.sleep(600)
    elif node.startswith("slow"):
        time.sleep(600)
    elif node.startswith("noop"):
        reply({"output": None})
    elif node.startswith("refuse"):
        sys.exit(75)
    elif node.startswith("flaky"):
        if not os.path.exists("fixed-" + node):
            print("%s: the service answered 502" % node, file=sys.stderr)
            sys.exit(75)
        reply({"output": {"result": given["value"] + 1}})
    elif node.startswith("crash"):
        sys.exit(3)
    elif node.startswith("garble"):
        sys.stdout.write("this is not JSON\n")
    elif node.startswith("noisy"):
        for i in range(int(os.environ.get("NOISY_LINES", "0"))):
            sys.stderr.write(("noisy line %06d " % i).ljust(99, ".") + "\n")
        sys.stderr.flush()
        reply({"output": None})
    elif node.startswith("fds"):
        names = []
        for fd in sorted(os.listdir("/proc/self/fd"), key=int):
            try:
                names.append("%s %s" % (fd, os.readlink("/proc/self/fd/" + fd)))
            except OSError:
                pass  # the descriptor listdir itself used, closed by now
        with open("fds-%s.txt" % node, "w") as out:
            out.write("\n".join(names) + "\n")
        reply({"output": None})
    elif node.startswith("flood"):
        line = b"f" * 1023 + b"\n"
        for _ in range(int(os.environ.get("FLOOD_BYTES", "0")) // len(line)):
            os.write(2, line)
        reply({"output": None})
    elif node.startswith("leak"):
        canaries = [v for k, v in sorted(os.environ.items()) if k.startswith("CANARY_")]
        for value in canaries:
            sys.stderr.write("value: %s :end\n" % value)
            # The shapes a program prints a value in besides the raw one.
            sys.stderr.write("json: %s\n" % json.dumps({"k": value}))
            sys.stderr.write("json8: %s\n" % json.dumps({"k": value}, ensure_ascii=False))
            sys.stderr.write("repr: %r\n" % value)
        sys.stderr.write("p" * 4066 + canaries[0] + "\n")
        sys.stderr.flush()
        reply({"output": None})
    elif node.startswith("victim"):
        if os.path.exists("spare-" + node):
            reply({"output": None})
        else:
            write_pids(node, {"worker": os.getpid(), "grandchild": os.getpid()})
            time.sleep(600)
    elif node.startswith("pause"):
        time.sleep(int(os.environ.get("PAUSE_MS", "0")) / 1000.0)
        reply({"output": None})
    else:
        print("no behaviour for node %s" % node, file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
