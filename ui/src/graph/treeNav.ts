// The run graph as a WAI-ARIA tree: which items show (every frame's children while it is
// expanded), where each sits (level, position among its siblings), and what a key does.
// Pure functions, shared by the accessible tree and its tests.
import type { GraphModel } from "./model";

/** A frame with children: the tree items that expand and collapse. */
export function isExpandable(model: GraphModel, id: string): boolean {
  const node = model.nodes.get(id);
  return Boolean(node?.group && node.children.length > 0);
}

/** The items a reader can reach, in order: the top level, and the children of every expanded frame. */
export function visibleItems(model: GraphModel, collapsed: Set<string>): string[] {
  const items: string[] = [];
  const walk = (ids: string[]) => {
    for (const id of ids) {
      items.push(id);
      if (isExpandable(model, id) && !collapsed.has(id)) walk(model.nodes.get(id)?.children ?? []);
    }
  };
  walk(model.roots);
  return items;
}

/** An item's place: its level (1 at the top), its siblings' count and its 1-based position. */
export function placeOf(model: GraphModel, id: string): { level: number; setSize: number; position: number } {
  let level = 1;
  let parent = model.nodes.get(id)?.parent;
  const siblings = parent ? (model.nodes.get(parent)?.children ?? []) : model.roots;
  while (parent) {
    level += 1;
    parent = model.nodes.get(parent)?.parent;
  }
  return { level, setSize: siblings.length, position: siblings.indexOf(id) + 1 };
}

/** What a key press asks of the tree. */
export type TreeMove =
  | { kind: "focus"; id: string }
  | { kind: "expand"; ids: string[] }
  | { kind: "collapse"; id: string }
  | { kind: "open"; id: string };

/**
 * What `key` does on the item `active` (the WAI-ARIA tree keyboard model): Up and Down move
 * between visible items, Right expands a closed frame or enters an open one, Left collapses an
 * open frame or goes to the parent, Home and End go to the first and last visible item, Enter
 * and Space open the item, `*` expands every frame beside it. Anything else: undefined.
 */
export function treeKey(model: GraphModel, collapsed: Set<string>, active: string, key: string): TreeMove | undefined {
  const items = visibleItems(model, collapsed);
  const at = items.indexOf(active);
  if (at < 0) return items[0] ? { kind: "focus", id: items[0] } : undefined;
  const expandable = isExpandable(model, active);
  const open = expandable && !collapsed.has(active);
  const node = model.nodes.get(active);
  const focus = (id: string | undefined): TreeMove | undefined => (id === undefined || id === active ? undefined : { kind: "focus", id });
  switch (key) {
    case "ArrowDown":
      return focus(items[at + 1]);
    case "ArrowUp":
      return focus(items[at - 1]);
    case "Home":
      return focus(items[0]);
    case "End":
      return focus(items[items.length - 1]);
    case "ArrowRight":
      if (!expandable) return undefined;
      return open ? focus(node?.children[0]) : { kind: "expand", ids: [active] };
    case "ArrowLeft":
      if (open) return { kind: "collapse", id: active };
      return focus(node?.parent);
    case "Enter":
    case " ":
      return { kind: "open", id: active };
    case "*": {
      const siblings = node?.parent ? (model.nodes.get(node.parent)?.children ?? []) : model.roots;
      const closed = siblings.filter((id) => isExpandable(model, id) && collapsed.has(id));
      return closed.length > 0 ? { kind: "expand", ids: closed } : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * Type-ahead: the next visible item after `active` (wrapping round) whose name starts with
 * `typed`, ignoring case; undefined when none does.
 */
export function typeAhead(model: GraphModel, collapsed: Set<string>, active: string, typed: string): string | undefined {
  const items = visibleItems(model, collapsed);
  const wanted = typed.toLowerCase();
  const start = Math.max(0, items.indexOf(active));
  // A fresh single letter looks past the current item; a longer prefix may stay on it.
  const offset = typed.length === 1 ? 1 : 0;
  for (let step = 0; step < items.length; step += 1) {
    const id = items[(start + offset + step) % items.length];
    const name = id === undefined ? undefined : model.nodes.get(id)?.name;
    if (id !== undefined && name?.toLowerCase().startsWith(wanted)) return id;
  }
  return undefined;
}
