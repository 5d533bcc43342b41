// The GaP model: scopes as frames, START/END pills, conditional edges labelled by value.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { validationReport } from "../../src/api/normalize";
import { gapModel, looksLikeGap } from "../../src/graph/gap";

const conformance = process.env.TRELLIS_CONFORMANCE_DIR ?? `${__dirname}/../../../../shared/conformance`;

describe("gapModel", () => {
  test("a subgraph node is a frame holding its definition's nodes", () => {
    const document = JSON.parse(readFileSync(`${conformance}/gap/test_minimal_v3.json`, "utf8")) as unknown;
    expect(looksLikeGap(document)).toBe(true);
    const model = gapModel(document);
    const frame = model.nodes.get("workflow/sg");
    expect(frame?.kind).toBe("subgraph");
    expect(frame?.children.map((id) => model.nodes.get(id)?.name).sort()).toEqual(["END", "START", "ok", "step"]);
    expect(model.nodes.get("workflow/sg/step")?.worker).toBe("robot.go_home");
    const conditional = model.edges.find((edge) => edge.kind === "conditional");
    expect(conditional).toMatchObject({ source: "workflow/sg", target: "workflow/done", label: "ok" });
  });

  test("a subgraph that refers to itself stops at the depth limit", () => {
    const document = {
      version: 3,
      nodes: { a: { type: "subgraph", ref: "loop" } },
      subgraphs: { loop: { nodes: { again: { type: "subgraph", ref: "loop" } } } },
    };
    const model = gapModel(document);
    expect(model.nodes.size).toBeLessThan(20);
  });
});

describe("GaP validation reports", () => {
  test("issues become diagnostics pinned on the node their location names", () => {
    const report = validationReport({
      status: "rejected",
      issues: [
        { severity: "error", node_id: "workflow.nodes.fetch", field: null, message: "node 'fetch' is unreachable from START (W4)" },
        { severity: "error", node_id: "workflow.edges", field: null, message: "no edge from START (W2)" },
        { severity: "warning", node_id: "subgraphs.inner.nodes.step", field: null, message: "script has no docstring (S9)" },
      ],
    });
    expect(report.status).toBe("rejected");
    if (report.status !== "rejected") return;
    expect(report.diagnostics.map((d) => [d.code, d.nodes])).toEqual([
      ["W4", ["fetch"]],
      ["W2", []],
      ["S9", ["step"]],
    ]);
    expect(report.diagnostics[2]?.severity).toBe("warning");
  });
});
