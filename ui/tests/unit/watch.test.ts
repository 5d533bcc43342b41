// Watch events as `trellis run --json` and the watch stream send them (docs/run-api.md): what
// one event changed, with execution counts instead of the list of active executions.
import { describe, expect, test } from "vitest";
import { watchEvent } from "../../src/api/normalize";

describe("watchEvent", () => {
  test("a running event carries its execution and the counts", () => {
    const event = watchEvent({
      runId: "0190",
      title: "map",
      cursor: "c1:7",
      event: "node_completed",
      atMs: 1730000000123,
      status: { phase: "running" },
      counts: { active: 2, settled: 5 },
      execution: { id: 3, reference: "ex-3", node: "item", mapIndices: [2], attempt: 1, worker: "command.item@1", phase: "completed", outcome: { status: "verified" }, startedAtMs: 1, endedAtMs: 2 },
    });
    expect(event).toMatchObject({ cursor: "c1:7", type: "node_completed", status: "running", counts: { active: 2, settled: 5 } });
    expect(event.execution?.node).toBe("item");
    expect(event.terminalResult).toBeUndefined();
  });

  test("the final event carries the terminal result", () => {
    const event = watchEvent({
      cursor: "c1:9",
      event: "terminal",
      status: { phase: "finished", terminalResult: { status: "failed", reason: "worker_failed" } },
      counts: { active: 0, settled: 6 },
    });
    expect(event.status).toBe("failed");
    expect(event.terminalResult).toEqual({ status: "failed", reason: "worker_failed" });
    expect(event.counts).toEqual({ active: 0, settled: 6 });
  });

  test("counts that are not numbers are left out", () => {
    expect(watchEvent({ cursor: "c1:1", event: "run_started", counts: { active: "2" } }).counts).toBeUndefined();
  });
});
