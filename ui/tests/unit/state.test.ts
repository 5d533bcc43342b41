// Folding executions and watch events into node states, rounds and map item counts.
import { describe, expect, test } from "vitest";
import type { ExecutionSummary, WatchEvent } from "../../src/api/types";
import { graphSpecModel } from "../../src/graph/graphspec";
import {
  applyEvent,
  classify,
  emptyFold,
  executionViews,
  nodeStates,
  replay,
} from "../../src/run/state";

const step = (name: string) => ({ kind: "step", name, worker: "w@1", input: { kind: "null" }, output: { kind: "null" } });
const verifier = (name: string) => ({ ...step(name), kind: "verifier", signals: { verdict: ["accepted", "rejected"] } });

const loopGraph = {
  root: {
    kind: "loop",
    name: "rounds",
    maxIterations: 3,
    body: { kind: "seq", name: "round", children: [step("worker"), verifier("review")] },
  },
};
const mapGraph = {
  root: { kind: "map", name: "each", maxItems: 1024, over: { source: "state", path: ["xs"] }, body: step("lint") },
};

const started = (id: number, node: string, extra: Partial<ExecutionSummary> = {}): WatchEvent => ({
  cursor: `c${id}a`,
  type: "execution_started",
  atMs: 1000 + id,
  execution: { id, node, attempt: 1, state: "running", ...extra },
});
const settled = (id: number, node: string, outcome: ExecutionSummary["outcome"], extra: Partial<ExecutionSummary> = {}): WatchEvent => ({
  cursor: `c${id}b`,
  type: "execution_settled",
  atMs: 2000 + id,
  execution: { id, node, attempt: 1, state: "settled", outcome, ...extra },
});

describe("classify", () => {
  test("outcomes decide the colour", () => {
    const base = { id: 1, node: "n", attempt: 1 };
    expect(classify({ ...base, state: "running" }).state).toBe("running");
    expect(classify({ ...base, state: "voided" }).state).toBe("void");
    expect(classify({ ...base, state: "settled", outcome: { status: "verified" } }).state).toBe("succeeded");
    expect(classify({ ...base, state: "settled", outcome: { status: "verifier", signals: { verdict: "accepted" } } }).state).toBe("accepted");
    expect(classify({ ...base, state: "settled", outcome: { status: "verifier", signals: { verdict: "rejected" } } }).state).toBe("rejected");
    expect(classify({ ...base, state: "settled", outcome: { status: "error", code: "timeout" } })).toEqual({ state: "failed", channel: "timeout" });
  });
});

describe("folding a loop run", () => {
  const events: WatchEvent[] = [
    started(1, "worker"),
    settled(1, "worker", { status: "verified" }),
    started(2, "review"),
    settled(2, "review", { status: "verifier", signals: { verdict: "rejected" } }),
    started(3, "worker"),
  ];

  test("rounds are counted from first attempts when the server does not say", () => {
    const views = executionViews(replay(events, events.length));
    expect(views.map((view) => [view.node, view.round])).toEqual([
      ["worker", 1],
      ["review", 1],
      ["worker", 2],
    ]);
  });

  test("the latest execution colours a node; the loop frame reports its round", () => {
    const model = graphSpecModel(loopGraph);
    const states = nodeStates(model, executionViews(replay(events, events.length)));
    const id = (name: string) => model.byName.get(name)?.[0] ?? "";
    expect(states.get(id("worker"))?.state).toBe("running");
    expect(states.get(id("review"))?.state).toBe("rejected");
    expect(states.get(id("rounds"))?.rounds).toBe(2);
    expect(states.get(id("rounds"))?.state).toBe("running");
  });

  test("a prefix of the events gives the state at that point (the replay scrubber)", () => {
    const model = graphSpecModel(loopGraph);
    const states = nodeStates(model, executionViews(replay(events, 2)));
    expect(states.get(model.byName.get("worker")?.[0] ?? "")?.state).toBe("succeeded");
    expect(states.get(model.byName.get("review")?.[0] ?? "")?.state).toBe("pending");
  });

  test("applyEvent leaves the previous fold untouched and fills times from the event", () => {
    const before = applyEvent(emptyFold(), events[0] as WatchEvent);
    const after = applyEvent(before, events[1] as WatchEvent);
    expect(before.executions.get("1")?.state).toBe("running");
    expect(after.executions.get("1")).toMatchObject({ state: "settled", startedAtMs: 1001, endedAtMs: 2001 });
  });

  test("a terminal event ends the run with its status", () => {
    const fold = applyEvent(emptyFold(), { cursor: "t", type: "terminal", terminalResult: { status: "failed", reason: "force_stopped" } });
    expect(fold.status).toBe("force_stopped");
    expect(fold.lastEvent).toBe("Run failed: force_stopped");
  });
});

describe("a map of 1,024 items", () => {
  test("items are counted by their latest execution, not drawn one by one", () => {
    const events: WatchEvent[] = [];
    for (let item = 0; item < 1024; item += 1) {
      events.push(started(item + 1, "lint", { item }));
      if (item < 1000) {
        events.push(settled(item + 1, "lint", item % 100 === 7 ? { status: "error", code: "crash" } : { status: "verified" }, { item }));
      }
    }
    const model = graphSpecModel(mapGraph);
    const states = nodeStates(model, executionViews(replay(events, events.length)));
    const frame = states.get("root");
    expect(frame?.items).toBe(1024);
    expect(frame?.counts.running).toBe(24);
    expect(frame?.counts.failed).toBe(10);
    expect(frame?.counts.succeeded).toBe(990);
    expect(frame?.state).toBe("running");
    expect(model.nodes.size).toBe(2);
  });
});
