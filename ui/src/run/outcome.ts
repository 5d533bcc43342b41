// How a run ended, drawn on its graph: the terminal it reached, the path it took, and the
// verdicts each round of a loop gave.
import type { GapEnd, TerminalResult } from "../api/types";
import type { GraphModel, ModelEdge } from "../graph/model";
import type { ExecutionView, NodeRunState } from "./state";

/** A GaP run's top-level end node called `name`. */
function gapEndNode(model: GraphModel, name: string): string[] {
  return [...model.nodes.values()].filter((node) => node.kind === "end" && node.parent === "workflow" && node.name === name).map((node) => node.id);
}

/**
 * The terminal node(s) a finished run reached: a GaP run's end node (from its result, or for a
 * failure from `gapEnd`), or the node whose failure ended it; a GraphSpec failure's `fail` node
 * with that reason; a GraphSpec success's only `succeed` node, or the one whose frame ran last
 * when there are several.
 */
export function reachedTerminals(model: GraphModel, result: TerminalResult | undefined, views: ExecutionView[], gapEnd?: GapEnd): string[] {
  if (!result) return [];
  const nodes = [...model.nodes.values()];
  if (result.status === "failed" && gapEnd) {
    if (gapEnd.endNode) return gapEndNode(model, gapEnd.endNode);
    const failed = gapEnd.failedNode;
    if (failed) return nodes.filter((node) => !node.group && (node.runName ?? node.name) === failed).map((node) => node.id);
  }
  if (result.status === "succeeded") {
    const output = result.output as { end_node?: unknown } | undefined;
    if (output && typeof output.end_node === "string") {
      return gapEndNode(model, output.end_node);
    }
    const succeeds = nodes.filter((node) => node.kind === "succeed");
    if (succeeds.length <= 1) return succeeds.map((node) => node.id);
    // Several: the one sharing the deepest frame with the last execution.
    const last = views[views.length - 1];
    const lastIds = last ? (model.byName.get(last.node) ?? []) : [];
    const score = (id: string) => {
      let best = 0;
      for (const other of lastIds) best = Math.max(best, sharedDepth(model, id, other));
      return best;
    };
    const ranked = [...succeeds].sort((a, b) => score(b.id) - score(a.id));
    return ranked[0] ? [ranked[0].id] : [];
  }
  if (result.reason === "force_stopped") return [];
  return nodes.filter((node) => node.kind === "fail" && node.reason === result.reason).map((node) => node.id);
}

function chain(model: GraphModel, id: string): string[] {
  const ids: string[] = [];
  let current: string | undefined = id;
  while (current) {
    ids.unshift(current);
    current = model.nodes.get(current)?.parent;
  }
  return ids;
}

function sharedDepth(model: GraphModel, a: string, b: string): number {
  const left = chain(model, a);
  const right = chain(model, b);
  let depth = 0;
  while (depth < left.length && depth < right.length && left[depth] === right[depth]) depth += 1;
  return depth;
}

/** Marks the reached terminals on the states, and on every frame holding one (a collapsed frame names it). */
export function markReached(model: GraphModel, states: Map<string, NodeRunState>, reached: string[], failed: boolean): void {
  for (const id of reached) {
    const state = states.get(id);
    if (!state) continue;
    state.reached = true;
    state.state = failed ? "failed" : "succeeded";
    let parent = model.nodes.get(id)?.parent;
    while (parent) {
      const frame = states.get(parent);
      if (frame) frame.endedAt = model.nodes.get(id)?.name;
      parent = model.nodes.get(parent)?.parent;
    }
  }
}

/**
 * Whether the run went along `edge`: both of its drawn ends ran (or were reached).
 */
export function edgeTaken(model: GraphModel, edge: Pick<ModelEdge, "source" | "target">, states: Map<string, NodeRunState> | undefined): boolean {
  const ran = (id: string): boolean => {
    const node = model.nodes.get(id);
    // Markers that run nothing themselves (a choice's decision, GaP's START, END and noop)
    // count as run when their frame did.
    if (node && ["decision", "start", "finish", "noop"].includes(node.kind) && node.parent) return ran(node.parent);
    const state = states?.get(id);
    return Boolean(state && (state.reached || state.executions.length > 0));
  };
  return ran(edge.source) && ran(edge.target);
}

/** A verifier's verdict per round: `[{round: 1, state: "rejected", label: "rejected"}, …]`. */
export function verdictsByRound(run: NodeRunState | undefined): { round: number; state: string; label: string }[] {
  if (!run) return [];
  const byRound = new Map<number, ExecutionView>();
  for (const view of run.executions) byRound.set(view.round, view);
  return [...byRound.entries()]
    .sort(([a], [b]) => a - b)
    .map(([round, view]) => {
      const signals = view.outcome?.status === "verifier" ? Object.values(view.outcome.signals ?? {}) : [];
      return { round, state: view.state, label: signals.length > 0 ? signals.join(", ") : view.state };
    });
}
