// How a run ended, on the model: the reached terminal, GaP bodies placed on a replay, the
// frames collapsed by default, and a loop's back-edge.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import type { GapBody } from "../../src/api/types";
import { gapModel } from "../../src/graph/gap";
import { graphSpecModel } from "../../src/graph/graphspec";
import { defaultCollapsed } from "../../src/graph/collapse";
import { bodiesAt, gapExecutions } from "../../src/run/gapBodies";
import { edgeTaken, reachedTerminals } from "../../src/run/outcome";
import { executionViews, nodeStates } from "../../src/run/state";

const conformance = `${__dirname}/../../../../shared/conformance`;
const softwareChange = JSON.parse(readFileSync(`${__dirname}/../../../templates/software-change.json`, "utf8")) as unknown;

const body = (node: string, started: number, settled?: number): GapBody => ({
  node,
  visit: 0,
  nodeType: "tool",
  phase: settled === undefined ? "running" : "succeeded",
  startedAtMs: started,
  startedCursor: `c1:${started}`,
  settledCursor: settled === undefined ? undefined : `c1:${settled}`,
  endedAtMs: settled,
});

describe("how a run ended", () => {
  test("a GaP run's end node is its reached terminal, and its bodies colour the nodes inside subgraphs", () => {
    const model = gapModel(JSON.parse(readFileSync(`${conformance}/gap/test_sg_on_error_recovery.json`, "utf8")));
    const views = executionViews({ executions: gapExecutions([body("sg_work.work", 3, 4)]) });
    const states = nodeStates(model, views);
    expect(states.get("workflow/run_sg/work")?.state).toBe("succeeded");
    expect(reachedTerminals(model, { status: "succeeded", output: { end_node: "done" } }, views)).toEqual(["workflow/done"]);
    expect(edgeTaken(model, { source: "workflow/run_sg/START", target: "workflow/run_sg/work" }, states)).toBe(true);
  });

  test("a failed GaP run reaches the end node its ledger names, or the node whose failure ended it", () => {
    const model = gapModel(JSON.parse(readFileSync(`${conformance}/gap/test_sg_on_error_recovery.json`, "utf8")));
    const failed = { status: "failed", reason: "workflow_failed" } as const;
    expect(reachedTerminals(model, failed, [], { exitStatus: "failure", endNode: "failed" })).toEqual(["workflow/failed"]);
    expect(reachedTerminals(model, failed, [], { failedNode: "sg_work.work" })).toEqual(["workflow/run_sg/work"]);
    // A run recorded before its end was kept marks nothing.
    expect(reachedTerminals(model, failed, [])).toEqual([]);
  });

  test("a GraphSpec failure reaches the fail node with its reason; a force-stop reaches none", () => {
    const model = graphSpecModel(softwareChange);
    const reached = reachedTerminals(model, { status: "failed", reason: "change_attempts_exhausted" }, []);
    expect(reached.map((id) => model.nodes.get(id)?.name)).toEqual(["change_attempts_exhausted"]);
    expect(reachedTerminals(model, { status: "failed", reason: "force_stopped" }, [])).toEqual([]);
  });

  test("a replay shows only the bodies started by then, unsettled if they settled later", () => {
    const bodies = [body("a", 2, 5), body("b", 6, 8)];
    expect(bodiesAt(bodies, "c1:3").map((shown) => [shown.node, shown.phase])).toEqual([["a", "running"]]);
    expect(bodiesAt(bodies, "c1:8").map((shown) => shown.phase)).toEqual(["succeeded", "succeeded"]);
    expect(bodiesAt(bodies, "c1:1")).toEqual([]);
  });

  test("frames nested in a frame start collapsed; a loop has a back-edge from its last child to its first", () => {
    const model = graphSpecModel(softwareChange);
    const collapsed = [...defaultCollapsed(model)].map((id) => model.nodes.get(id)?.name);
    expect(collapsed).toContain("worker_result");
    expect(collapsed).not.toContain("change_loop");
    const back = model.edges.find((edge) => edge.kind === "back");
    expect(back && model.nodes.get(back.target)?.name).toBe("worker");
    expect(back && model.nodes.get(back.loop ?? "")?.name).toBe("change_loop");
  });
});
