#!/usr/bin/env python3
"""Whole-process benchmarks of Trellis scaled out: worker hosts on a PostgreSQL ledger, and the
team server's API under many concurrent clients.

map   --items no-op command steps (read the request, answer null) in maps of at most 1,024
      items (the full-v1 profile's bound), one map after another,
      run by `trellis run` with queue dispatch (TRELLIS_DISPATCH=queue) on a PostgreSQL ledger,
      executed by 1, 2 and 4 `trellis worker` processes (--slots each); then the same map on
      the embedded SQLite ledger without workers (the controller runs the steps itself), for
      reference. Prints wall time (run start to exit) and items per second.
queue `trellis serve --dispatch queue` on PostgreSQL with --workers `trellis worker` hosts (2 by
      default): --items node dispatches in all, submitted through the API as 1 run and as
      --runs concurrent runs (each a map of its share), the trivial compiled worker
      (scripts/bench-worker.c) as the step so the queue, not the step, is measured; then the
      same with serve's local dispatch (no workers). Wall time from the first submission until
      every run is finished; prints node dispatches per second.
api   `trellis serve` on a SQLite ledger and on PostgreSQL, seeded with finished runs; then
      --clients concurrent clients (threads, one keep-alive connection each) for --seconds
      each send GET /runs/{run} (status), GET /runs?limit=20 (list) and, bounded to
      --submits per client, POST /runs (a one-node run, a fresh submission key each).
      Prints requests/s, p50 and p99 per request kind.

Every address is loopback. PostgreSQL is a private instance this script starts with
scripts/postgres.sh (durable commits: TRELLIS_PG_FAST is not set) and stops at the end, unless
--postgres URL names one already running. Each measurement uses a fresh schema.

Usage: scripts/bench-team.py [--trellis target/release/trellis] [--only map|queue|api]
                             [--baseline PATH]
                             [--items 4096] [--workers 1,2,4] [--slots 4] [--repeat 1]
                             [--runs 1,30] [--queue-workers 2] [--rounds 3]
                             [--clients 100] [--seconds 10] [--submits 2] [--postgres URL]
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "trellis_bench_token_" + uuid.uuid4().hex
NULL = {"kind": "null"}
# A no-op command worker: read the request, answer a null output.
PLAN = {"kind": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"]}


def step(name):
    return {
        "kind": "step", "name": name, "worker": f"command.{name}@1", "input": NULL,
        "output": NULL, "inputBindings": [], "writeBindings": [], "timeoutMs": 600000,
        "attempts": 1,
    }


def document(state, *first):
    return {
        "profile": "openengine.graph.full/v1",
        "initialInput": state,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {
            "kind": "seq", "name": "root", "state": state, "promotedStatePaths": [],
            "children": [*first,
                         {"kind": "succeed", "name": "done", "output": NULL, "bindings": []}],
        },
    }


# The full-v1 profile bounds one map at 1,024 items and 1,024 concurrent executions.
MAX_MAP_ITEMS = 1024


def map_graph(items):
    """`items` no-op executions: maps of at most 1,024 items over the input, one after another."""
    maps = -(-items // MAX_MAP_ITEMS)
    if items % maps:
        sys.exit(f"bench-team: --items must split evenly into {maps} maps of at most 1,024")
    width = items // maps
    item = {"kind": "record", "fields": {"value": {"type": {"kind": "integer"}, "required": True}}}
    state = {"kind": "record",
             "fields": {"items": {"type": {"kind": "array", "items": item}, "required": True}}}
    fans = [{"kind": "map", "name": f"fan{index}", "state": state, "body": step(f"item{index}"),
             "over": {"source": "state", "path": ["items"]}, "maxItems": width,
             "promotedStatePaths": []} for index in range(maps)]
    return document(state, *fans), {"items": [{"value": v} for v in range(width)]}


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --- PostgreSQL -------------------------------------------------------------------------------

class Postgres:
    """A private instance (or the one --postgres names) and fresh schemas in it."""

    def __init__(self, url):
        self.started = None
        if url is None:
            out = subprocess.run([os.path.join(REPO, "scripts/postgres.sh"), "start"],
                                 check=True, capture_output=True, text=True).stdout
            exports = dict(line.removeprefix("export ").split("=", 1)
                           for line in out.splitlines() if line.startswith("export "))
            url = exports["TRELLIS_TEST_POSTGRES_URL"].strip("'")
            self.started = exports["TRELLIS_PG_DIR"].strip("'")
        self.url = url
        self.psql = shutil.which("psql") or next(
            (os.path.join(d, "psql") for d in sorted(
                (os.path.join("/usr/lib/postgresql", v, "bin")
                 for v in os.listdir("/usr/lib/postgresql")), reverse=True)
             if os.path.exists(os.path.join(d, "psql"))), "psql")

    def sql(self, text):
        subprocess.run([self.psql, "-q", "-v", "ON_ERROR_STOP=1", self.url, "-c", text],
                       check=True, capture_output=True)

    def fresh_ledger(self):
        schema = "bench_" + uuid.uuid4().hex[:12]
        self.sql(f"CREATE SCHEMA {schema}")
        separator = "&" if "?" in self.url else "?"
        return schema, f"{self.url}{separator}options=-c%20search_path%3D{schema}"

    def drop(self, schema):
        self.sql(f"DROP SCHEMA {schema} CASCADE")

    def stop(self):
        if self.started:
            env = dict(os.environ, TRELLIS_PG_DIR=self.started)
            subprocess.run([os.path.join(REPO, "scripts/postgres.sh"), "stop"], env=env,
                           capture_output=True)


# --- map with worker processes ------------------------------------------------------------------

def run_map(trellis, home, graph_file, input_file, plan_file, ledger, env):
    args = [trellis, "run", graph_file, "--input", input_file,
            "--uniform-runtime-config", plan_file, "--json"]
    if ledger:
        args += ["--ledger", ledger]
    started = time.monotonic()
    done = subprocess.run(args, cwd=home, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    terminal = [line for line in done.stdout.splitlines() if '"succeeded"' in line]
    if done.returncode != 0 or not terminal:
        sys.exit(f"bench-team: the map run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall


def map_bench(args, postgres, scratch):
    graph, given = map_graph(args.items)
    files = {}
    for name, value in [("graph", graph), ("input", given), ("plan", PLAN)]:
        files[name] = os.path.join(scratch, f"{name}.json")
        with open(files[name], "w") as f:
            json.dump(value, f)
    rows = []
    for trial in range(args.repeat):
        for workers in args.workers:
            home = tempfile.mkdtemp(prefix="home-", dir=scratch)
            env = dict(os.environ, TRELLIS_HOME=home, TRELLIS_DISPATCH="queue")
            env.pop("TRELLIS_LEDGER", None)
            schema, ledger = postgres.fresh_ledger()
            hosts = [subprocess.Popen(
                [args.trellis, "worker", "--ledger", ledger, "--slots", str(args.slots),
                 "--poll-ms", "20"], cwd=home, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
            try:
                before = load()
                wall = run_map(args.trellis, home, files["graph"], files["input"],
                               files["plan"], ledger, env)
            finally:
                for host in hosts:
                    host.terminate()
                for host in hosts:
                    host.wait()
                postgres.drop(schema)
            rows.append((f"PostgreSQL, queue, {workers} worker(s) x {args.slots} slots",
                         wall, before))
            print(f"  {rows[-1][0]}: {wall:.2f} s, {args.items / wall:.0f} items/s "
                  f"(load {before})", flush=True)
            shutil.rmtree(home, ignore_errors=True)
        home = tempfile.mkdtemp(prefix="home-", dir=scratch)
        env = dict(os.environ, TRELLIS_HOME=home)
        for name in ("TRELLIS_LEDGER", "TRELLIS_DISPATCH"):
            env.pop(name, None)
        before = load()
        wall = run_map(args.trellis, home, files["graph"], files["input"], files["plan"],
                       None, env)
        rows.append(("SQLite (embedded default), no workers", wall, before))
        print(f"  {rows[-1][0]}: {wall:.2f} s, {args.items / wall:.0f} items/s (load {before})",
              flush=True)
        shutil.rmtree(home, ignore_errors=True)
    print(f"\n| {args.items:,}-item map of no-op command steps | wall | items/s | load (1/5/15 min) |")
    print("|---|---|---|---|")
    for name, wall, before in rows:
        print(f"| {name} | {wall:.2f} s | {args.items / wall:.0f} | {before} |")


# --- queue dispatch through serve --------------------------------------------------------------

WORKER_SOURCE = os.path.join(REPO, "scripts", "bench-worker.c")


def trivial_worker(scratch):
    """Builds bench-worker.c (static, no C library); falls back to the shell worker."""
    target = os.path.join(scratch, "bench-worker")
    built = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-static", "-nostdlib",
                            "-fno-stack-protector", "-o", target, WORKER_SOURCE],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if built.returncode == 0:
        return {"kind": "command", "command": [target]}, "scripts/bench-worker.c"
    print("bench-team: bench-worker.c could not be built; the step is /bin/sh", file=sys.stderr)
    return PLAN, "/bin/sh -c (bench-worker.c could not be built)"


def submit_runs(host, port, runs, items, plan, prefix):
    """Submits `runs` runs of `items // runs` map items each; returns their ids."""
    graph, given = map_graph(items // runs)
    body = {"graph": graph, "input": given, "plan": {"uniform": plan}, "noPreflight": True}
    ids = []
    connection = http.client.HTTPConnection(host, port, timeout=60)
    for index in range(runs):
        body["submissionKey"] = f"{prefix}-{index}"
        status, data = call(connection, "POST", "/api/v1/runs", json.dumps(body))
        if status not in (200, 201):
            sys.exit(f"bench-team: submission failed: {status} {data[:500]!r}")
        ids.append(json.loads(data)["runId"])
    return ids


def wait_all(host, port, runs, limit=600):
    """Waits until every run is finished; exits when one did not succeed. Returns when the last
    one finished, by the runs' own `finishedAtMs`, so the poll period (100 ms, light enough not
    to load the ledger with full status reads) adds nothing to the measured wall time."""
    connection = http.client.HTTPConnection(host, port, timeout=60)
    pending = list(runs)
    deadline = time.monotonic() + limit
    last_finish_ms = 0
    while pending and time.monotonic() < deadline:
        status, data = call(connection, "GET", f"/api/v1/runs/{pending[0]}")
        answer = json.loads(data) if status == 200 else {}
        phase = answer.get("status", {}).get("phase")
        if phase == "finished":
            outcome = json.dumps(answer["status"])
            if "succeeded" not in outcome:
                sys.exit(f"bench-team: run {pending[0]} did not succeed: {outcome[:500]}")
            last_finish_ms = max(last_finish_ms, answer.get("finishedAtMs", 0))
            pending.pop(0)
        else:
            time.sleep(0.1)
    if pending:
        sys.exit(f"bench-team: {len(pending)} runs did not finish in {limit} s")
    return last_finish_ms / 1000


def isolation_flags(trellis):
    """`--isolation none` where the build has it (the step is a file outside the workspace)."""
    usage = subprocess.run([trellis, "serve", "--help"], capture_output=True, text=True).stdout
    return ["--isolation", "none"] if "--isolation" in usage else []


def queue_once(args, trellis, postgres, scratch, plan, runs, dispatch, workers):
    home = tempfile.mkdtemp(prefix="queue-", dir=scratch)
    schema, ledger = postgres.fresh_ledger()
    env = dict(os.environ, TRELLIS_HOME=home, BENCH_TOKEN=TOKEN)
    for name in ("TRELLIS_LEDGER", "TRELLIS_DISPATCH"):
        env.pop(name, None)
    isolation = isolation_flags(trellis)
    serve = subprocess.Popen(
        [trellis, "serve", "--listen", "127.0.0.1:0", "--token-env", "BENCH_TOKEN",
         "--ledger", ledger, "--dispatch", dispatch, *isolation],
        cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    hosts = []
    try:
        host, port = json.loads(serve.stdout.readline())["listening"].rsplit(":", 1)
        port = int(port)
        hosts = [subprocess.Popen(
            [trellis, "worker", "--ledger", ledger, "--slots", str(args.slots), *isolation],
            cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL) for _ in range(workers)]
        before = load()
        started = time.time()
        ids = submit_runs(host, port, runs, args.items, plan, uuid.uuid4().hex[:8])
        finished = wait_all(host, port, ids)
        wall = (finished if finished > started else time.time()) - started
    finally:
        for process in [serve, *hosts]:
            process.terminate()
        for process in [serve, *hosts]:
            process.wait()
        postgres.drop(schema)
        shutil.rmtree(home, ignore_errors=True)
    return wall, before


def queue_bench(args, postgres, scratch):
    plan, step_name = trivial_worker(scratch)
    binaries = [args.trellis] + ([args.baseline] if args.baseline else [])
    modes = [("queue", args.queue_workers), ("local", 0)]
    configurations = [(binary, mode, workers, runs) for mode, workers in modes
                      for runs in args.runs for binary in binaries]
    samples = {configuration: [] for configuration in configurations}
    loads = []
    # Alternated rounds: every configuration once per round, so load drifts hit all alike.
    for round_index in range(args.rounds):
        for configuration in configurations:
            binary, mode, workers, runs = configuration
            wall, before = queue_once(args, binary, postgres, scratch, plan, runs, mode, workers)
            samples[configuration].append(wall)
            loads.append(before)
            total = runs * (args.items // runs)
            print(f"  round {round_index + 1}: {binary}, {mode} dispatch, {runs} run(s): "
                  f"{wall:.2f} s, {total / wall:.0f} dispatches/s (load {before})", flush=True)
    print(f"\n{args.items:,} node dispatches ({step_name}), PostgreSQL ledger, medians of "
          f"{args.rounds} alternated rounds; load before each: {loads[0]} … {loads[-1]}")
    print("| binary | dispatch | concurrent runs | wall | node dispatches/s |")
    print("|---|---|---|---|---|")
    for configuration in configurations:
        binary, mode, workers, runs = configuration
        label = f"queue, {workers} workers x {args.slots} slots" if workers else "local (serve)"
        wall = statistics.median(samples[configuration])
        total = runs * (args.items // runs)
        print(f"| {binary} | {label} | {runs} | {wall:.2f} s | {total / wall:.0f} |")


# --- API under concurrent clients ---------------------------------------------------------------

def start_serve(trellis, home, ledger):
    env = dict(os.environ, TRELLIS_HOME=home, BENCH_TOKEN=TOKEN)
    for name in ("TRELLIS_LEDGER", "TRELLIS_DISPATCH"):
        env.pop(name, None)
    args = [trellis, "serve", "--listen", "127.0.0.1:0", "--token-env", "BENCH_TOKEN",
            "--max-streams", "8"]
    if ledger:
        args += ["--ledger", ledger]
    serve = subprocess.Popen(args, cwd=home, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = json.loads(serve.stdout.readline())
    host, port = first["listening"].rsplit(":", 1)
    return serve, host, int(port)


def submission(key):
    return json.dumps({"submissionKey": key, "graph": document(NULL, step("work")),
                       "plan": {"uniform": PLAN}, "noPreflight": True})


def call(connection, method, path, body=None):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    connection.request(method, path, body=body, headers=headers)
    answer = connection.getresponse()
    data = answer.read()
    return answer.status, data


def wait_finished(host, port, run, limit=120):
    connection = http.client.HTTPConnection(host, port, timeout=30)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status, data = call(connection, "GET", f"/api/v1/runs/{run}")
        if status == 200 and json.loads(data)["status"]["phase"] == "finished":
            return
        time.sleep(0.1)
    sys.exit(f"bench-team: seed run {run} did not finish")


def client(host, port, run, until, submits, prefix, samples, errors):
    connection = http.client.HTTPConnection(host, port, timeout=60)
    kinds = ["status", "list"]
    sent = 0
    turn = 0
    while time.monotonic() < until:
        kind = kinds[turn % 2]
        turn += 1
        if submits and turn % 5 == 0 and sent < submits:
            kind = "submit"
        if kind == "status":
            request = ("GET", f"/api/v1/runs/{run}", None)
        elif kind == "list":
            request = ("GET", "/api/v1/runs?limit=20", None)
        else:
            sent += 1
            request = ("POST", "/api/v1/runs", submission(f"{prefix}-{sent}"))
        started = time.monotonic()
        try:
            status, _ = call(connection, *request)
        except (OSError, http.client.HTTPException):
            errors.append(kind)
            connection.close()
            connection = http.client.HTTPConnection(host, port, timeout=60)
            continue
        elapsed = time.monotonic() - started
        if status >= 400:
            errors.append(f"{kind}:{status}")
        else:
            samples.append((kind, elapsed))
    connection.close()


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def api_bench(args, postgres, scratch):
    rows = []
    for name in ("SQLite", "PostgreSQL"):
        home = tempfile.mkdtemp(prefix="serve-", dir=scratch)
        schema, ledger = postgres.fresh_ledger() if name == "PostgreSQL" else (None, None)
        serve, host, port = start_serve(args.trellis, home, ledger)
        try:
            connection = http.client.HTTPConnection(host, port, timeout=60)
            seeded = []
            for index in range(20):
                status, data = call(connection, "POST", "/api/v1/runs", submission(f"seed-{index}"))
                if status not in (200, 201):
                    sys.exit(f"bench-team: seeding failed: {status} {data[:500]!r}")
                seeded.append(json.loads(data)["runId"])
            for run in seeded:
                wait_finished(host, port, run)
            samples, errors = [], []
            before = load()
            started = time.monotonic()
            until = started + args.seconds
            threads = [threading.Thread(target=client, args=(
                host, port, seeded[i % len(seeded)], until, args.submits, f"c{i}", samples,
                errors)) for i in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - started
            after = load()
        finally:
            serve.terminate()
            serve.wait()
            if schema:
                postgres.drop(schema)
            shutil.rmtree(home, ignore_errors=True)
        for kind in ("status", "list", "submit"):
            times = [t for k, t in samples if k == kind]
            if times:
                rows.append((name, kind, len(times), len(times) / wall,
                             percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000,
                             sum(1 for e in errors if e.startswith(kind)), before, after))
                row = rows[-1]
                print(f"  {name} {kind}: {row[2]} requests, {row[3]:.0f}/s, p50 {row[4]:.1f} ms,"
                      f" p99 {row[5]:.1f} ms, {row[6]} errors", flush=True)
    print(f"\n| ledger | request | requests | requests/s | p50 | p99 | errors | load before → after |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kind, count, rate, p50, p99, failed, before, after in rows:
        print(f"| {name} | {kind} | {count} | {rate:.0f} | {p50:.1f} ms | {p99:.1f} ms | "
              f"{failed} | {before} → {after} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trellis", default=os.path.join(REPO, "target/release/trellis"),
                        help="the Trellis binary (default: target/release/trellis)")
    parser.add_argument("--only", choices=["map", "queue", "api"],
                        help="only the worker-scaling map, the serve queue case or the API test")
    parser.add_argument("--runs", default="1,30",
                        help="queue: comma-separated counts of concurrent runs sharing --items")
    parser.add_argument("--queue-workers", type=int, default=2,
                        help="queue: `trellis worker` processes beside serve")
    parser.add_argument("--rounds", type=int, default=3, help="queue: alternated rounds")
    parser.add_argument("--baseline", help="queue: a second Trellis build taking turns (A/B)")
    parser.add_argument("--items", type=int, default=4096,
                        help="no-op steps in all (maps of at most 1,024)")
    parser.add_argument("--workers", default="1,2,4",
                        help="comma-separated counts of `trellis worker` processes to try")
    parser.add_argument("--slots", type=int, default=4, help="--slots of each worker")
    parser.add_argument("--repeat", type=int, default=1, help="trials of each map measurement")
    parser.add_argument("--clients", type=int, default=100, help="concurrent API clients")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="how long each API request kind is driven")
    parser.add_argument("--submits", type=int, default=2,
                        help="at most this many run submissions per client (each starts a controller)")
    parser.add_argument("--postgres",
                        help="a PostgreSQL URL to use (default: a private instance via scripts/postgres.sh)")
    args = parser.parse_args()
    args.trellis = os.path.abspath(args.trellis)
    args.baseline = args.baseline and os.path.abspath(args.baseline)
    args.workers = [int(n) for n in args.workers.split(",")]
    args.runs = [int(n) for n in args.runs.split(",")]
    postgres = Postgres(args.postgres)
    scratch = tempfile.mkdtemp(prefix="trellis-bench-team-")
    try:
        print(f"trellis {args.trellis}, load {load()}, {os.cpu_count()} CPUs", flush=True)
        if args.only in (None, "map"):
            map_bench(args, postgres, scratch)
        if args.only in (None, "queue"):
            queue_bench(args, postgres, scratch)
        if args.only in (None, "api"):
            api_bench(args, postgres, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        postgres.stop()


if __name__ == "__main__":
    main()
