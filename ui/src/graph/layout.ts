// Lays a graph model out left to right with ELK: expanded frames hold their children, collapsed
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
  loop?: string;
  /** The route ELK drew, in canvas coordinates (start, bends, end). */
  points?: { x: number; y: number }[];
  /** Where ELK placed the label (its top-left corner, canvas coordinates), clear of nodes and other labels. */
  labelAt?: { x: number; y: number };
}

/** Labels longer than this are cut (the whole text is the label's tooltip). */
export const EDGE_LABEL_MAX = 34;

export function shortLabel(label: string | undefined): string | undefined {
  if (!label) return undefined;
  return label.length > EDGE_LABEL_MAX ? `${label.slice(0, EDGE_LABEL_MAX - 1)}…` : label;
}

/** The box a label of 12 px text needs. */
function labelSize(text: string): { width: number; height: number } {
  return { width: Math.ceil(text.length * 7.2) + 14, height: 20 };
}

export interface Layout {
  /** Parents always come before their children. */
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

export const FRAME_HEADER = 52;
const FRAME_PAD = 14;
const CARD_WIDTH = 236;
const COLLAPSED = { width: 270, height: 84 };
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
      const verdicts = node.kind === "verifier" ? 1 : 0;
      return { width: CARD_WIDTH, height: 78 + 18 * (rows + extra + verdicts) };
    }
    default:
      // Room for "· run ended here ✓" once the run reached it.
      return { width: Math.max(120, Math.min(340, node.name.length * 8.5 + 170)), height: 34 };
  }
}

const elk = new ELK({ workerFactory: () => layoutWorker() });

const ROOT_OPTIONS: Record<string, string> = {
  "elk.algorithm": "layered",
  "elk.direction": "RIGHT",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.layered.spacing.nodeNodeBetweenLayers": "64",
  "elk.layered.spacing.edgeNodeBetweenLayers": "24",
  "elk.spacing.edgeLabel": "6",
  "elk.spacing.nodeNode": "26",
  "elk.spacing.componentComponent": "26",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.edgeRouting": "ORTHOGONAL",
  "elk.edgeLabels.placement": "CENTER",
  "elk.layered.edgeLabels.sideSelection": "ALWAYS_UP",
};

const FRAME_OPTIONS: Record<string, string> = {
  "elk.padding": `[top=${FRAME_HEADER + 8},left=${FRAME_PAD},bottom=${FRAME_PAD},right=${FRAME_PAD}]`,
};
/** Below a loop's body runs its back-edge, with its label: room for both. */
const BACK_EDGE_ROOM = 40;
const LOOP_OPTIONS: Record<string, string> = {
  "elk.padding": `[top=${FRAME_HEADER + 8},left=${FRAME_PAD},bottom=${FRAME_PAD + BACK_EDGE_ROOM},right=${FRAME_PAD}]`,
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
        layoutOptions: node.kind === "loop" ? LOOP_OPTIONS : FRAME_OPTIONS,
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
    // A loop's back-edge is drawn under its body after the layout (given to ELK, it would
    // turn the body around to break the cycle).
    if (edge.kind === "back") {
      edges.push({ ...edge, source, target });
      continue;
    }
    const key = `${source}->${target}:${edge.label ?? ""}`;
    if (seen.has(key)) continue;
    seen.add(key);
    edges.push({ ...edge, source, target });
    const label = shortLabel(edge.label);
    elkEdges.push({
      id: edge.id,
      sources: [source],
      targets: [target],
      labels: label ? [{ id: `${edge.id}:label`, text: label, ...labelSize(label) }] : undefined,
    });
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

  // Edge coordinates are relative to the frame ELK put each edge in.
  const offsets = new Map<string, { x: number; y: number }>([["__root", { x: 0, y: 0 }]]);
  for (const placed of nodes) {
    const parent = placed.parent ? offsets.get(placed.parent) : { x: 0, y: 0 };
    offsets.set(placed.id, { x: (parent?.x ?? 0) + placed.x, y: (parent?.y ?? 0) + placed.y });
  }
  const routed = new Map<string, ElkExtendedEdge>();
  const gather = (elkNode: ElkNode) => {
    for (const edge of elkNode.edges ?? []) routed.set(edge.id, edge);
    for (const child of elkNode.children ?? []) gather(child);
  };
  gather(laid);
  for (const edge of edges) {
    if (edge.kind === "back") {
      routeBackEdge(edge, nodes, offsets);
      continue;
    }
    const elkEdge = routed.get(edge.id);
    const section = elkEdge?.sections?.[0];
    if (!elkEdge || !section) continue;
    const offset = offsets.get(elkEdge.container ?? "__root") ?? { x: 0, y: 0 };
    const shift = (point: { x: number; y: number }) => ({ x: point.x + offset.x, y: point.y + offset.y });
    edge.points = [section.startPoint, ...(section.bendPoints ?? []), section.endPoint].map(shift);
    const label = elkEdge.labels?.[0];
    if (label?.x !== undefined && label.y !== undefined) edge.labelAt = shift({ x: label.x, y: label.y });
  }
  return { nodes, edges, width: laid.width ?? 0, height: laid.height ?? 0 };
}

/** Routes a back-edge from under its source, along the bottom of its loop, up into its target. */
function routeBackEdge(edge: PlacedEdge, nodes: PlacedNode[], offsets: Map<string, { x: number; y: number }>): void {
  const box = (id: string) => {
    const placed = nodes.find((node) => node.id === id);
    const at = offsets.get(id);
    return placed && at ? { ...at, width: placed.width, height: placed.height } : undefined;
  };
  const source = box(edge.source);
  const target = box(edge.target);
  if (!source || !target) return;
  const below = Math.max(source.y + source.height, target.y + target.height) + BACK_EDGE_ROOM / 2;
  const from = { x: source.x + source.width / 2, y: source.y + source.height };
  const to = { x: target.x + target.width / 2, y: target.y + target.height };
  edge.points = [from, { x: from.x, y: below }, { x: to.x, y: below }, to];
  const text = shortLabel(edge.label) ?? "";
  const size = labelSize(text);
  edge.labelAt = { x: (from.x + to.x) / 2 - size.width / 2, y: below - size.height / 2 };
}
