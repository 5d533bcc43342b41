// The GaP model: scopes as frames, START/END pills, conditional edges labelled by value.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
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
