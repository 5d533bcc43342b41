// Which frames start collapsed: the first level open, what is nested deeper closed, and the
// deepest ones too while the graph shows more nodes than a page can hold.
import type { GraphModel } from "./model";

/**
 * Frames collapsed by default: in a small graph none; otherwise every frame nested inside
 * another frame (the first level stays open), and then the deepest ones until at most `budget`
 * nodes show.
 */
export function defaultCollapsed(model: GraphModel, budget = 80, small = 12): Set<string> {
  const collapsed = new Set<string>();
  if (model.nodes.size <= small) return collapsed;
  const depthOf = (id: string) => {
    let depth = 0;
    let current = model.nodes.get(id)?.parent;
    while (current) {
      depth += 1;
      current = model.nodes.get(current)?.parent;
    }
    return depth;
  };
  const frames = [...model.nodes.values()].filter((node) => node.group && node.children.length > 0);
  // The top frames are the first level (a GaP workflow's own frame holds its first level).
  const firstLevel = (node: (typeof frames)[number]) => !node.parent || model.nodes.get(node.parent)?.kind === "workflow" && !model.nodes.get(node.parent)?.parent;
  for (const frame of frames) if (frame.parent && !firstLevel(frame)) collapsed.add(frame.id);
  frames.sort((a, b) => depthOf(a.id) - depthOf(b.id));
  const hiddenBy = (id: string): number => {
    const node = model.nodes.get(id);
    return node ? node.children.reduce((sum, child) => sum + 1 + hiddenBy(child), 0) : 0;
  };
  let visible = model.nodes.size;
  for (const frame of frames) if (collapsed.has(frame.id) && !ancestorsCollapsed(model, frame.id, collapsed)) visible -= hiddenBy(frame.id);
  for (const frame of [...frames].reverse()) {
    if (visible <= budget) break;
    if (collapsed.has(frame.id) || ancestorsCollapsed(model, frame.id, collapsed) || !frame.parent) continue;
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
