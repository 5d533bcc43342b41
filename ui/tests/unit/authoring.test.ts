// The editor's document actions: pure functions over a GraphSpec document that never change
// what they are given, keep unknown fields, and produce the shapes the verifier reads.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import {
  addInputField,
  bindField,
  readablePaths,
  rebind,
  togglePromotion,
  unbind,
  addWrite,
  removeInputField,
} from "../../src/author/bindings";
import {
  addInto,
  emptyGraph,
  freshName,
  getAt,
  idPath,
  moveNode,
  pathId,
  removeNode,
  renameNode,
  setAt,
  type Json,
} from "../../src/author/document";
import { commit, redo, startHistory, undo } from "../../src/author/history";
import { readSettings, splitCommand, writePlan } from "../../src/author/plan";
import { newSubmissionKey, teamSubmission } from "../../src/author/submission";
import { exportText, importText } from "../../src/author/JsonView";
import { probeDocument, provenIndices } from "../../src/author/available";
import { graphSpecModel } from "../../src/graph/graphspec";
import { pinsFor } from "../../src/graph/pins";

const here = fileURLToPath(new URL(".", import.meta.url));
const template = (name: string) => JSON.parse(readFileSync(`${here}../../../templates/${name}.json`, "utf8")) as Json;
const children = (graph: unknown, path: (string | number)[] = ["root", "children"]) =>
  (getAt(graph, path) as Json[]).map((node) => `${String(node.kind)}:${String(node.name)}`);

/** Deep-freezes a document, so an action that mutates its argument throws. */
function frozen<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(frozen);
    Object.freeze(value);
  }
  return value;
}

describe("structure actions", () => {
  test("adding steps to an empty graph keeps its completion node last and names them apart", () => {
    let graph: Json = frozen(emptyGraph());
    for (let n = 0; n < 3; n += 1) graph = frozen(addInto(graph, ["root"], "step")?.graph ?? graph);
    expect(children(graph)).toEqual(["step:step", "step:step_2", "step:step_3", "succeed:done"]);
    // One worker reference has one contract: later steps get command workers of their own.
    expect((getAt(graph, ["root", "children", 0, "worker"]) as string)).toBe("builtin.agent.worker@1");
    expect(getAt(graph, ["root", "children", 1, "worker"])).toBe("command.step_2@1");
  });

  test("every group kind is added with the state in scope and a step inside", () => {
    let graph: Json = emptyGraph();
    for (const kind of ["seq", "par", "choice", "loop", "map", "verifier", "fail"] as const) graph = addInto(graph, ["root"], kind)?.graph ?? graph;
    expect(children(graph)).toEqual(["seq:seq", "par:par", "choice:choice", "loop:loop", "map:map", "verifier:verifier", "succeed:done", "fail:failed"]);
    const loop = getAt(graph, ["root", "children", 3]) as Json;
    expect(loop.state).toEqual((graph.root as Json).state);
    expect(children(loop, ["body", "children"])).toEqual(["step:loop_step"]);
    const choice = getAt(graph, ["root", "children", 2]) as Json;
    expect(getAt(choice, ["branches", 0, "when", "value", "name"])).toBe("choice_step");
    // Adding to a choice adds a guarded branch; the new id is the branch's node.
    const added = addInto(graph, ["root", "children", 2], "succeed");
    expect(added?.id).toBe("root/children/2/branches/1/node");
    expect(getAt(added?.graph, ["root", "children", 2, "branches", 1, "when"])).toEqual(getAt(choice, ["branches", 0, "when"]));
  });

  test("move, remove and rename are atomic and leave the original untouched", () => {
    const original = frozen(template("software-change"));
    const reviews = ["root", "children", 0, "body", "children", 1, "otherwise", "children", 0];
    const moved = moveNode(original, [...reviews, "branches", 0], 1);
    expect(children(moved, [...reviews, "branches"])).toEqual(["verifier:code", "verifier:acceptance"]);
    expect(moveNode(original, [...reviews, "branches", 1], 1)).toBe(original);
    const removed = removeNode(original, [...reviews, "branches", 0]);
    expect(children(removed, [...reviews, "branches"])).toEqual(["verifier:code"]);
    // Renaming follows every guard and write binding naming the node.
    const renamed = renameNode(original, [...reviews, "branches", 0], "acceptance_review");
    const text = JSON.stringify(renamed);
    expect(text).not.toContain('"name":"acceptance"');
    expect(text).not.toContain('"node":"acceptance"');
    expect(getAt(renamed, [...reviews, "branches", 0, "writeBindings", 0, "value", "node"])).toBe("acceptance_review");
  });

  test("paths and model ids convert both ways; unknown fields survive edits", () => {
    const path = ["root", "children", 0, "body", "children", 1, "branches", 0, "node"];
    expect(idPath(pathId(path))).toEqual(path);
    const graph = { ...emptyGraph(), "x-editor": { kept: true } };
    const edited = setAt(graph, ["root", "children", 0, "name"], "finished");
    expect(edited["x-editor"]).toEqual({ kept: true });
    expect(freshName(edited, "finished")).toBe("finished_2");
  });
});

describe("typed data flow", () => {
  test("a node reads the fields of the state in scope, typed", () => {
    const graph = template("software-change");
    const worker = ["root", "children", 0, "body", "children", 0];
    const labels = readablePaths(graph, worker).map((entry) => entry.label);
    expect(labels).toContain("state.task: string");
    expect(labels).toContain("state.nextRound: [null]");
  });

  test("binding adds the field with the source's type, rebinding and unbinding undo it", () => {
    let graph: Json = addInto(emptyGraph(), ["root"], "step")?.graph ?? emptyGraph();
    const step = ["root", "children", 0];
    const task = readablePaths(graph, step).find((entry) => entry.path.join(".") === "task");
    if (!task) throw new Error("no task in scope");
    graph = bindField(graph, step, "goal", task);
    expect(getAt(graph, [...step, "input", "fields", "goal"])).toEqual({ type: { kind: "string" }, required: true });
    expect(getAt(graph, [...step, "inputBindings"])).toEqual([{ target: ["goal"], value: { source: "state", path: ["task"] } }]);
    graph = addInputField(graph, "topic", { kind: "string" }, false);
    expect(getAt(graph, ["initialInput", "fields", "topic"])).toEqual({ type: { kind: "string" }, required: false });
    expect(getAt(graph, ["root", "state", "fields", "topic"])).toEqual({ type: { kind: "string" }, required: false });
    const topic = readablePaths(graph, step).find((entry) => entry.path.join(".") === "topic");
    if (!topic) throw new Error("no topic in scope");
    graph = rebind(graph, step, 0, topic);
    expect(getAt(graph, [...step, "inputBindings", 0, "value", "path"])).toEqual(["topic"]);
    graph = unbind(graph, step, 0);
    expect(getAt(graph, [...step, "inputBindings"])).toEqual([]);
    expect(getAt(graph, [...step, "input", "fields"])).toEqual({});
    graph = removeInputField(graph, "topic");
    expect(getAt(graph, ["root", "state", "fields", "topic"])).toBeUndefined();
  });

  test("writes and promotions", () => {
    const graph = template("software-change");
    const acceptance = ["root", "children", 0, "body", "children", 1, "otherwise", "children", 0, "branches", 0];
    const written = addWrite(graph, acceptance, "signal", ["verdict"], ["verdict"]);
    expect(getAt(written, [...acceptance, "writeBindings", 1])).toEqual({ value: { node: "acceptance", channel: "signal", path: ["verdict"] }, target: ["verdict"] });
    const loop = ["root", "children", 0];
    const less = togglePromotion(graph, loop, ["codeFeedback"]);
    expect(getAt(less, [...loop, "promotedStatePaths"])).toEqual([["acceptanceFeedback"]]);
    expect(getAt(togglePromotion(less, loop, ["codeFeedback"]), [...loop, "promotedStatePaths"])).toEqual([["acceptanceFeedback"], ["codeFeedback"]]);
  });
});

describe("history, plans and JSON", () => {
  test("undo and redo step over whole actions; a new action drops the redo", () => {
    let history = startHistory(1);
    history = commit(commit(history, 2), 3);
    history = undo(undo(history));
    expect(history.present).toBe(1);
    history = redo(history);
    expect(history.present).toBe(2);
    history = commit(history, 5);
    expect(history.future).toEqual([]);
    expect(redo(history)).toBe(history);
    expect(undo(startHistory(0))).toEqual(startHistory(0));
  });

  test("settings become an exact plan with commands, or a uniform agent plan, and read back", () => {
    const exact = writePlan(
      { harness: "", provider: "", model: "", effort: "", inputTokens: "1000", outputTokens: "", costUsd: "", commands: { worker: "python3 'my dir/worker.py'", code: "" } },
      ["worker", "code"],
    );
    expect(exact).toEqual({
      exact: { nodes: { worker: { kind: "command", command: ["python3", "my dir/worker.py"] }, code: { kind: "agent", model: "" } }, budget: { inputTokens: 1000 } },
    });
    expect(readSettings(exact).commands).toEqual({ worker: "python3 'my dir/worker.py'" });
    const uniform = writePlan({ harness: "claude", provider: "anthropic", model: "m", effort: "high", inputTokens: "", outputTokens: "", costUsd: "", commands: {} }, ["worker"]);
    expect(uniform).toEqual({ uniform: { harness: "claude", provider: "anthropic", model: "m", effort: "high" } });
    expect(readSettings(uniform).model).toBe("m");
    expect(splitCommand(` a "b c"  '' d`)).toEqual(["a", "b c", "", "d"]);
    // Fields the settings do not show survive a change; a uniform command plan reads as a command per node.
    const previous = { uniform: { harness: "claude", provider: "anthropic", model: "a", connections: { anthropic: ["KEY"] }, sessionScope: "node_instance" } };
    const changed = writePlan({ ...readSettings(previous), model: "b" }, ["worker"], previous);
    expect(changed).toEqual({ uniform: { harness: "claude", provider: "anthropic", model: "b", connections: { anthropic: ["KEY"] }, sessionScope: "node_instance" } });
    expect(readSettings({ uniform: { kind: "command", command: ["./run", "x y"] } }, ["a", "b"]).commands).toEqual({ a: "./run 'x y'", b: "./run 'x y'" });
  });

  test("a team server is sent the saved graph, input and plan under a fresh key", () => {
    const graph = template("software-change");
    const plan = { exact: { nodes: { worker: { kind: "command", command: ["python3", "worker.py"] } } } };
    const definition = { graph, input: { task: "Say hello" }, plan, description: "from the software-change template" };
    expect(teamSubmission(definition, "ui-1", "Hello", "hello")).toEqual({ submissionKey: "ui-1", title: "Hello", graph, input: { task: "Say hello" }, plan, workspace: "hello" });
    // Nothing is sent that was not set; a template profile names its template (in the team route's spelling) and task.
    expect(teamSubmission({ graph }, "ui-2")).toEqual({ submissionKey: "ui-2", graph });
    expect(teamSubmission({ template: { name: "software-change", delivery: "none", ignorePrFeedback: true }, taskDefault: "Fix it" }, "ui-3")).toEqual({
      submissionKey: "ui-3",
      template: { name: "software-change", delivery: "none", ignore_pr_feedback: true },
      task: "Fix it",
    });
    const keys = new Set(Array.from({ length: 50 }, newSubmissionKey));
    expect(keys.size).toBe(50);
    for (const key of keys) expect(key).toMatch(/^ui-[0-9a-f]{32}$/);
  });

  test("export then import gives back every template, unknown fields included", () => {
    for (const name of ["software-change", "auto-research", "issue-review", "pr-review", "single-worker"]) {
      const graph = { ...template(name), "x-editor": { layout: [1, 2] } };
      expect(importText(exportText(graph)).graph).toEqual(graph);
    }
    expect(importText("[1]").error).toMatch(/object/);
    expect(importText("{").error).toMatch(/not JSON/);
  });
});

describe("diagnostics on nodes", () => {
  test("a diagnostic inside a node's binding is pinned on that node; a named one on its nodes", () => {
    let graph: Json = emptyGraph();
    for (let n = 0; n < 3; n += 1) graph = addInto(graph, ["root"], "step")?.graph ?? graph;
    const model = graphSpecModel(graph);
    const pins = pinsFor(model, [
      { code: "undefined_read", message: "not defined", at: "root/children/2/inputBindings/0/value", nodes: [] },
      { code: "invalid_graph_shape", message: "reused", at: "root/children/0", nodes: ["step", "step_2"] },
    ]);
    expect(pins.get("root/children/2")?.map((pin) => pin.code)).toEqual(["undefined_read"]);
    expect(pins.get("root/children/0")?.map((pin) => pin.code)).toEqual(["invalid_graph_shape"]);
    expect(pins.has("root/children/1")).toBe(false);
  });
});

describe("what the verifier proves available", () => {
  test("a probe binds every candidate into a field of its type after the node's own bindings", () => {
    let graph: Json = addInto(emptyGraph(), ["root"], "step")?.graph ?? emptyGraph();
    const step = ["root", "children", 0];
    const candidates = readablePaths(graph, step);
    graph = bindField(graph, step, "goal", candidates[0] ?? { source: "state", path: ["task"], type: {}, label: "" });
    const probe = probeDocument(graph, step, candidates);
    expect(probe?.first).toBe(1);
    expect(getAt(probe?.document, [...step, "inputBindings", 1])).toEqual({ target: ["__trellis_probe_0"], value: { source: "state", path: ["task"] } });
    expect(getAt(probe?.document, [...step, "input", "fields", "__trellis_probe_0"])).toEqual({ type: { kind: "string" }, required: true });
    // The original is untouched; a diagnostic on a probe binding marks its candidate unproven.
    expect(getAt(graph, [...step, "inputBindings"])).toHaveLength(1);
    const diagnostics = [{ at: "root/children/0/inputBindings/2/value" }, { at: "root/children/0/inputBindings/0" }, { at: "root/children/1" }];
    expect([...provenIndices(diagnostics, step, "inputBindings", 1, 3)]).toEqual([0, 2]);
  });
});
