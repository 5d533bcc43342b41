// The run graph's accessible tree: visible items, places, and the WAI-ARIA tree keyboard model.
import { describe, expect, test } from "vitest";
import { addNode, emptyModel, type GraphModel, type ModelNode } from "../../src/graph/model";
import { placeOf, treeKey, typeAhead, visibleItems } from "../../src/graph/treeNav";

/** `worker`, then loop `repair` holding `review` and par `checks` (holding `lint`, `test`), then `done`. */
function model(): GraphModel {
  const built = emptyModel();
  const add = (id: string, kind: ModelNode["kind"], parent?: string) =>
    addNode(built, { id, name: id, kind, parent, children: [], group: ["loop", "par"].includes(kind) });
  add("worker", "step");
  add("repair", "loop");
  add("review", "verifier", "repair");
  add("checks", "par", "repair");
  add("lint", "step", "checks");
  add("test", "step", "checks");
  add("done", "succeed");
  return built;
}

describe("the graph's tree", () => {
  test("only the children of expanded frames show, in document order", () => {
    const graph = model();
    expect(visibleItems(graph, new Set(["repair"]))).toEqual(["worker", "repair", "done"]);
    expect(visibleItems(graph, new Set(["checks"]))).toEqual(["worker", "repair", "review", "checks", "done"]);
    expect(visibleItems(graph, new Set())).toEqual(["worker", "repair", "review", "checks", "lint", "test", "done"]);
  });

  test("each item knows its level and its place among its siblings", () => {
    const graph = model();
    expect(placeOf(graph, "worker")).toEqual({ level: 1, setSize: 3, position: 1 });
    expect(placeOf(graph, "checks")).toEqual({ level: 2, setSize: 2, position: 2 });
    expect(placeOf(graph, "test")).toEqual({ level: 3, setSize: 2, position: 2 });
  });

  test("Up and Down move between visible items, Home and End to the ends", () => {
    const graph = model();
    const closed = new Set(["checks"]);
    expect(treeKey(graph, closed, "review", "ArrowDown")).toEqual({ kind: "focus", id: "checks" });
    expect(treeKey(graph, closed, "checks", "ArrowDown")).toEqual({ kind: "focus", id: "done" });
    expect(treeKey(graph, closed, "done", "ArrowDown")).toBeUndefined();
    expect(treeKey(graph, closed, "review", "ArrowUp")).toEqual({ kind: "focus", id: "repair" });
    expect(treeKey(graph, closed, "review", "Home")).toEqual({ kind: "focus", id: "worker" });
    expect(treeKey(graph, new Set(), "worker", "End")).toEqual({ kind: "focus", id: "done" });
  });

  test("Right expands a closed frame, then enters it; Left collapses an open one, then goes up", () => {
    const graph = model();
    expect(treeKey(graph, new Set(["repair"]), "repair", "ArrowRight")).toEqual({ kind: "expand", ids: ["repair"] });
    expect(treeKey(graph, new Set(), "repair", "ArrowRight")).toEqual({ kind: "focus", id: "review" });
    expect(treeKey(graph, new Set(), "worker", "ArrowRight")).toBeUndefined();
    expect(treeKey(graph, new Set(), "repair", "ArrowLeft")).toEqual({ kind: "collapse", id: "repair" });
    expect(treeKey(graph, new Set(), "lint", "ArrowLeft")).toEqual({ kind: "focus", id: "checks" });
    expect(treeKey(graph, new Set(), "worker", "ArrowLeft")).toBeUndefined();
  });

  test("Enter and Space open the item; * expands the frames beside it", () => {
    const graph = model();
    expect(treeKey(graph, new Set(), "lint", "Enter")).toEqual({ kind: "open", id: "lint" });
    expect(treeKey(graph, new Set(), "repair", " ")).toEqual({ kind: "open", id: "repair" });
    expect(treeKey(graph, new Set(["checks"]), "review", "*")).toEqual({ kind: "expand", ids: ["checks"] });
    expect(treeKey(graph, new Set(), "review", "*")).toBeUndefined();
  });

  test("typing a name's first letters moves to the next visible item that starts so", () => {
    const graph = model();
    expect(typeAhead(graph, new Set(), "worker", "t")).toBe("test");
    expect(typeAhead(graph, new Set(), "test", "r")).toBe("repair");
    expect(typeAhead(graph, new Set(), "repair", "r")).toBe("review");
    expect(typeAhead(graph, new Set(), "review", "re")).toBe("review");
    expect(typeAhead(graph, new Set(["repair"]), "worker", "t")).toBeUndefined();
  });
});
