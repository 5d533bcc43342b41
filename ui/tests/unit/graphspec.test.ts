// The GraphSpec model: frames, inlined sequences, branch labels, and lenient reading.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { graphSpecModel, guardSummary } from "../../src/graph/graphspec";
import { executables } from "../../src/graph/model";

const here = fileURLToPath(new URL(".", import.meta.url));
const template = (name: string) => JSON.parse(readFileSync(`${here}../../../templates/${name}.json`, "utf8")) as unknown;

describe("graphSpecModel", () => {
  test("software-change-push: executables, frames and the loop's inlined body", () => {
    const model = graphSpecModel(template("software-change-push"));
    expect(executables(model).map((node) => node.name).sort()).toEqual(["acceptance", "code", "deliver", "worker"]);
    const loop = model.nodes.get(model.byName.get("change_loop")?.[0] ?? "");
    expect(loop?.kind).toBe("loop");
    expect(loop?.maxIterations).toBe(11);
    // The loop's body sequence is drawn as the loop frame itself.
    expect(model.byName.get("change_iteration")).toEqual([loop?.id]);
    const worker = model.nodes.get(model.byName.get("worker")?.[0] ?? "");
    expect(worker?.parent).toBe(loop?.id);
    expect(worker?.inputs?.map((field) => field.name)).toEqual(["task", "acceptanceFeedback", "codeFeedback"]);
    const par = model.nodes.get(model.byName.get("parallel_reviews")?.[0] ?? "");
    expect(par?.children.map((id) => model.nodes.get(id)?.name)).toEqual(["acceptance", "code"]);
    expect(model.nodes.get(model.byName.get("acceptance")?.[0] ?? "")?.signals).toEqual({ verdict: ["accepted", "rejected"] });
  });

  test("a choice gets a decision marker with one labelled edge per branch", () => {
    const model = graphSpecModel(template("software-change"));
    const choice = model.byName.get("worker_result")?.find((id) => model.nodes.get(id)?.kind === "choice");
    const decision = model.nodes.get(`${choice}/decision`);
    expect(decision?.kind).toBe("decision");
    const labels = model.edges.filter((edge) => edge.source === decision?.id).map((edge) => edge.label);
    expect(labels).toEqual(["worker failed", "otherwise"]);
  });

  test("sequence children are chained in order", () => {
    const model = graphSpecModel(template("single-worker"));
    const worker = model.byName.get("worker")?.[0];
    const choice = model.byName.get("worker_result")?.[0];
    expect(model.edges.some((edge) => edge.source === worker && edge.target === choice && edge.kind === "flow")).toBe(true);
  });

  test("a duplicated name maps to both nodes, so a diagnostic pins on each", () => {
    const document = template("single-worker") as { root: { children: { otherwise?: { name: string } }[] } };
    const choice = document.root.children.find((child) => child.otherwise);
    if (!choice?.otherwise) throw new Error("template shape changed");
    choice.otherwise.name = "worker";
    const model = graphSpecModel(document);
    expect(model.byName.get("worker")).toHaveLength(2);
  });

  test("nonsense is read without throwing", () => {
    for (const document of [null, 3, "x", {}, { root: 5 }, { root: { kind: "seq", children: [1, null, { kind: "wat" }] } }]) {
      expect(() => graphSpecModel(document)).not.toThrow();
    }
    const model = graphSpecModel({ root: { kind: "par", name: "p", branches: [{ kind: "step", name: "a" }] } });
    expect(model.nodes.get("root")?.children).toEqual(["root/branches/0"]);
  });

  test("guards read as short sentences", () => {
    expect(
      guardSummary({
        kind: "all",
        guards: [
          { kind: "in", value: { name: "acceptance", source: "signal", field: "verdict" }, labels: ["accepted"] },
          { kind: "in", value: { name: "code", source: "error", field: null }, labels: ["timeout"] },
        ],
      }),
    ).toBe("acceptance.verdict ∈ {accepted} and code error ∈ {timeout}");
    expect(guardSummary({ kind: "not", guard: { kind: "any", guards: [] } })).toBe("not ()");
    expect(
      guardSummary({
        kind: "k_of_map",
        count: 1,
        labels: ["timeout"],
        value: { name: "mapWork", source: "error", field: null },
      }),
    ).toBe("1 items' mapWork.error ∈ {timeout}");
    expect(
      guardSummary({
        kind: "k_of_n",
        count: 2,
        labels: ["accepted"],
        values: [
          { name: "a", source: "signal", field: "verdict" },
          { name: "b", source: "signal", field: "verdict" },
        ],
      }),
    ).toBe("2 of (a.verdict, b.verdict) ∈ {accepted}");
  });
});
