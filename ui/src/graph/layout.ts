// Lays a graph model out top-down with ELK: expanded frames hold their children, collapsed
// frames are single boxes, and edges into a collapsed frame end on the frame.
import ELK, { type ElkExtendedEdge, type ElkNode } from "elkjs/lib/elk-api.js";
import { layoutWorker } from "./elkWorker";
import type { GraphModel, ModelNode } from "./model";

export interface PlacedNode {
  id: string;
  /** Position relative to the parent frame (or the canvas for top-level nodes). */
  x: number;
  y: number;
  width: number;
  height: number;
  parent?: string;
  collapsed: boolean;
}

export interface PlacedEdge {
  id: string;
  source: string;
  target: string;
  label?: string;
  kind: string;
}

export interface Layout {
  /** Parents always come before their children. */
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

export const FRAME_HEADER = 46;
const FRAME_PAD = 14;
const CARD_WIDTH = 236;
const COLLAPSED = { width: 250, height: 66 };
const MAX_INPUT_ROWS = 4;

/** The box a leaf needs for its card or pill. */
export function leafSize(node: ModelNode): { width: number; height: number } {
  switch (node.kind) {
    case "step":
    case "verifier":
    case "tool":
    case "script":
    case "router": {
      const rows = Math.min(node.inputs?.length ?? 0, MAX_INPUT_ROWS);
      const extra = node.signals ? 1 : 0;
      return { width: CARD_WIDTH, height: 70 + 15 * (rows + extra) };
    }
    default:
      return { width: Math.max(96, Math.min(260, node.name.length * 7.5 + 54)), height: 32 };
  }
}

const elk = new ELK({ workerFactory: () => layoutWorker() });

const ROOT_OPTIONS: Record<string, string> = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.layered.spacing.nodeNodeBetweenLayers": "52",
  "elk.spacing.nodeNode": "26",
  "elk.spacing.componentComponent": "26",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.edgeRouting": "ORTHOGONAL",
};

const FRAME_OPTIONS: Record<string, string> = {
  "elk.padding": `[top=${FRAME_HEADER + 8},left=${FRAME_PAD},bottom=${FRAME_PAD},right=${FRAME_PAD}]`,
};

/** The visible node an id is drawn as: itself, or its outermost collapsed ancestor. */
export function visibleOwner(model: GraphModel, id: string, collapsed: Set<string>): string {
  let owner = id;
  let current = model.nodes.get(id)?.parent;
  while (current) {
    if (collapsed.has(current)) owner = current;
    current = model.nodes.get(current)?.parent;
  }
  return owner;
}

export async function layoutGraph(model: GraphModel, collapsed: Set<string>): Promise<Layout> {
  const build = (id: string): ElkNode => {
    const node = model.nodes.get(id);
    if (!node) return { id, width: 10, height: 10 };
    if (node.group && !collapsed.has(id) && node.children.length > 0) {
      return {
        id,
        layoutOptions: FRAME_OPTIONS,
        children: node.children.map(build),
        edges: [],
      };
    }
    return { id, ...(node.group ? COLLAPSED : leafSize(node)) };
  };

  // Edges live on the lowest common frame of their ends, as ELK expects with hierarchy.
  const elkEdges: ElkExtendedEdge[] = [];
  const seen = new Set<string>();
  const edges: PlacedEdge[] = [];
  for (const edge of model.edges) {
    const source = visibleOwner(model, edge.source, collapsed);
    const target = visibleOwner(model, edge.target, collapsed);
    if (source === target) continue;
    const key = `${source}->${target}:${edge.label ?? ""}`;
    if (seen.has(key)) continue;
    seen.add(key);
    edges.push({ ...edge, source, target });
    elkEdges.push({ id: edge.id, sources: [source], targets: [target] });
  }

  const graph: ElkNode = {
    id: "__root",
    layoutOptions: ROOT_OPTIONS,
    children: model.roots.map(build),
    edges: elkEdges,
  };
  const laid = await elk.layout(graph);

  const nodes: PlacedNode[] = [];
  const collect = (elkNode: ElkNode, parent: string | undefined) => {
    for (const child of elkNode.children ?? []) {
      nodes.push({
        id: child.id,
        x: child.x ?? 0,
        y: child.y ?? 0,
        width: child.width ?? 0,
        height: child.height ?? 0,
        parent,
        collapsed: collapsed.has(child.id),
      });
      collect(child, child.id);
    }
  };
  collect(laid, undefined);
  return { nodes, edges, width: laid.width ?? 0, height: laid.height ?? 0 };
}

/** Frames collapsed by default: none while the graph is small, the deepest ones past `budget`. */
export function defaultCollapsed(model: GraphModel, budget = 80): Set<string> {
  const collapsed = new Set<string>();
  if (model.nodes.size <= budget) return collapsed;
  const depthOf = (id: string) => {
    let depth = 0;
    let current = model.nodes.get(id)?.parent;
    while (current) {
      depth += 1;
      current = model.nodes.get(current)?.parent;
    }
    return depth;
  };
  const frames = [...model.nodes.values()].filter((node) => node.group && node.parent);
  frames.sort((a, b) => depthOf(a.id) - depthOf(b.id));
  let visible = model.nodes.size;
  const hiddenBy = (id: string): number => {
    const node = model.nodes.get(id);
    return node ? node.children.reduce((sum, child) => sum + 1 + hiddenBy(child), 0) : 0;
  };
  for (const frame of frames.reverse()) {
    if (visible <= budget) break;
    if (ancestorsCollapsed(model, frame.id, collapsed)) continue;
    collapsed.add(frame.id);
    visible -= hiddenBy(frame.id);
  }
  return collapsed;
}

function ancestorsCollapsed(model: GraphModel, id: string, collapsed: Set<string>): boolean {
  let current = model.nodes.get(id)?.parent;
  while (current) {
    if (collapsed.has(current)) return true;
    current = model.nodes.get(current)?.parent;
  }
  return false;
}
