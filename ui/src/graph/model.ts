// The drawable shape of a graph document: nodes (leaves and nested group frames) and edges,
// independent of the language it was written in and of any layout.

/** Group frames: GraphSpec control nodes and GaP scopes. */
export type GroupKind = "seq" | "par" | "choice" | "loop" | "map" | "workflow" | "subgraph";

/** Leaves: executables, terminals, and the small markers a frame needs to read well. */
export type LeafKind =
  | "step"
  | "verifier"
  | "succeed"
  | "fail"
  | "decision"
  | "tool"
  | "script"
  | "router"
  | "end"
  | "noop"
  | "start"
  | "finish";

export type ModelNodeKind = GroupKind | LeafKind;

export interface FieldSummary {
  name: string;
  type: string;
}

export interface ModelNode {
  /** Unique within the model: the node's location in the document. */
  id: string;
  /** The name the document gives it (what diagnostics refer to). */
  name: string;
  /** The name a run records its executions under, when not `name` (GaP: `subgraph.node`). */
  runName?: string;
  kind: ModelNodeKind;
  parent?: string;
  /** Children in document order; empty for leaves. */
  children: string[];
  group: boolean;
  /** The worker reference, tool or script a leaf runs. */
  worker?: string;
  inputs?: FieldSummary[];
  output?: string;
  signals?: Record<string, string[]>;
  reason?: string;
  maxIterations?: number;
  maxItems?: number;
  over?: string;
  join?: string;
  attempts?: number;
  /** A one-line description of what the frame does, shown when it is collapsed. */
  summary?: string;
}

export type EdgeKind = "flow" | "branch" | "otherwise" | "conditional" | "back";

export interface ModelEdge {
  id: string;
  source: string;
  target: string;
  label?: string;
  kind: EdgeKind;
  /** For a loop's back-edge: the loop frame it belongs to (its round count labels the edge). */
  loop?: string;
}

export interface GraphModel {
  nodes: Map<string, ModelNode>;
  /** Top-level node ids, in order. */
  roots: string[];
  edges: ModelEdge[];
  /** Node ids by document name (a rejected document may use a name twice). */
  byName: Map<string, string[]>;
}

export function emptyModel(): GraphModel {
  return { nodes: new Map(), roots: [], edges: [], byName: new Map() };
}

/** Adds `node` to `model`, under its parent when it has one. */
export function addNode(model: GraphModel, node: ModelNode): void {
  model.nodes.set(node.id, node);
  if (node.parent) {
    model.nodes.get(node.parent)?.children.push(node.id);
  } else {
    model.roots.push(node.id);
  }
  const named = model.byName.get(node.name);
  if (named) named.push(node.id);
  else model.byName.set(node.name, [node.id]);
}

export function addEdge(
  model: GraphModel,
  source: string,
  target: string,
  kind: EdgeKind,
  label?: string,
  loop?: string,
): void {
  model.edges.push({ id: `e${model.edges.length}:${source}->${target}`, source, target, kind, label, loop });
}

/** Every executable leaf (the nodes that run workers) of the model. */
export function executables(model: GraphModel): ModelNode[] {
  return [...model.nodes.values()].filter(
    (node) => !node.group && ["step", "verifier", "tool", "script", "router"].includes(node.kind),
  );
}

/** The chain of group ids from the top down to (not including) `id`. */
export function ancestors(model: GraphModel, id: string): string[] {
  const chain: string[] = [];
  let current = model.nodes.get(id)?.parent;
  while (current) {
    chain.unshift(current);
    current = model.nodes.get(current)?.parent;
  }
  return chain;
}

/** Number of nodes under a group (all depths). */
export function descendantCount(model: GraphModel, id: string): number {
  const node = model.nodes.get(id);
  if (!node) return 0;
  return node.children.reduce((sum, child) => sum + 1 + descendantCount(model, child), 0);
}
