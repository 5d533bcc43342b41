// The graph canvas's accessible twin: a WAI-ARIA tree of the same nodes (frames as expandable
// items holding their children), kept in step with the canvas (what is expanded, what is
// open in the inspector). It is one tab stop with a roving tabindex; the canvas draws the focus
// ring on the node the tree's focus is on, so sighted keyboard users see where they are.
import { useCallback, useEffect, useId, useMemo, useRef, type KeyboardEvent } from "react";
import type { Diagnostic } from "../api/types";
import type { NodeRunState } from "../run/state";
import type { GraphModel, ModelNode } from "./model";
import { frameHeadline, stateWords } from "./nodes";
import { isExpandable, placeOf, treeKey, typeAhead, type TreeMove } from "./treeNav";
import "./tree.css";

export interface GraphTreeProps {
  model: GraphModel;
  states?: Map<string, NodeRunState>;
  pins?: Map<string, Diagnostic[]>;
  collapsed: Set<string>;
  /** The node open in the inspector. */
  selected?: string;
  /** The item that holds the tab stop. */
  active: string;
  onActive: (id: string) => void;
  onExpand: (ids: string[]) => void;
  onCollapse: (id: string) => void;
  onOpen: (id: string) => void;
  /** Whether keyboard focus is inside the tree. */
  onFocusedChange: (focused: boolean) => void;
}

/** How long typed letters add up to one type-ahead prefix. */
const TYPE_AHEAD_MS = 600;

/** An item in words: "step worker, succeeded", "loop change_loop, round 2 of at most 3, accepted". */
export function itemLabel(node: ModelNode, run: NodeRunState | undefined, pins: Diagnostic[] | undefined): string {
  const parts = [`${node.kind} ${node.name}`];
  if (node.group) parts.push(frameHeadline(node, run));
  else if (node.worker) parts.push(node.worker);
  if (run && (run.executions.length > 0 || run.reached || node.group)) parts.push(stateWords(run));
  if (run?.reached) parts.push("the run ended here");
  else if (run?.endedAt) parts.push(`the run ended inside, at ${run.endedAt}`);
  if (pins && pins.length > 0) parts.push(`${pins.length} problem${pins.length > 1 ? "s" : ""}: ${pins.map((pin) => pin.code).join(", ")}`);
  return parts.join(", ");
}

export function GraphTree(props: GraphTreeProps) {
  const { model, states, pins, collapsed, selected, active, onActive, onExpand, onCollapse, onOpen, onFocusedChange } = props;
  const prefix = useId();
  /** A number per node, for element ids (node ids hold `/` and names may repeat). */
  const numbers = useMemo(() => new Map([...model.nodes.keys()].map((id, index) => [id, index])), [model]);
  const tree = useRef<HTMLUListElement>(null);
  const typed = useRef({ text: "", at: 0 });
  /** Set by a key that moved the active item: focus follows it once it is drawn. */
  const follow = useRef(false);

  useEffect(() => {
    if (!follow.current) return;
    follow.current = false;
    const item = [...(tree.current?.querySelectorAll<HTMLElement>('[role="treeitem"]') ?? [])].find((element) => element.dataset.nodeId === active);
    item?.focus({ preventScroll: true });
  });

  const apply = useCallback(
    (move: TreeMove) => {
      switch (move.kind) {
        case "focus":
          follow.current = true;
          onActive(move.id);
          return;
        case "expand":
          onExpand(move.ids);
          return;
        case "collapse":
          onCollapse(move.id);
          return;
        case "open":
          onOpen(move.id);
      }
    },
    [onActive, onExpand, onCollapse, onOpen],
  );

  const onKeyDown = useCallback(
    (event: KeyboardEvent<HTMLUListElement>) => {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      let move = treeKey(model, collapsed, active, event.key);
      if (!move && event.key.length === 1 && event.key !== " " && event.key !== "*") {
        const now = Date.now();
        const text = now - typed.current.at < TYPE_AHEAD_MS ? typed.current.text + event.key : event.key;
        typed.current = { text, at: now };
        const found = typeAhead(model, collapsed, active, text);
        if (found && found !== active) move = { kind: "focus", id: found };
        else if (found) move = undefined;
        event.preventDefault();
      }
      if (!move) return;
      event.preventDefault();
      event.stopPropagation();
      apply(move);
    },
    [model, collapsed, active, apply],
  );

  const item = (id: string) => {
    const node = model.nodes.get(id);
    if (!node) return null;
    const expandable = isExpandable(model, id);
    const open = expandable && !collapsed.has(id);
    const place = placeOf(model, id);
    const labelId = `${prefix}-item-${numbers.get(id) ?? 0}`;
    return (
      <li
        key={id}
        role="treeitem"
        data-node-id={id}
        data-testid={`tree-${node.name}`}
        aria-labelledby={labelId}
        aria-level={place.level}
        aria-setsize={place.setSize}
        aria-posinset={place.position}
        aria-expanded={expandable ? open : undefined}
        aria-selected={selected === id}
        tabIndex={id === active ? 0 : -1}
        onFocus={(event) => {
          // Focus on a nested item bubbles through its ancestors: only the item itself counts.
          if (event.target !== event.currentTarget) return;
          if (id !== active) onActive(id);
        }}
        onClick={(event) => {
          event.stopPropagation();
          onActive(id);
          onOpen(id);
        }}
      >
        <span id={labelId}>{itemLabel(node, states?.get(id), pins?.get(id))}</span>
        {open && <ul role="group">{node.children.map(item)}</ul>}
      </li>
    );
  };

  return (
    <ul
      ref={tree}
      role="tree"
      aria-label="Graph nodes"
      className="graph-tree"
      data-testid="graph-tree"
      onKeyDown={onKeyDown}
      onFocus={() => onFocusedChange(true)}
      onBlur={(event) => {
        if (!event.currentTarget.contains(event.relatedTarget as Node | null)) onFocusedChange(false);
      }}
    >
      {model.roots.map(item)}
    </ul>
  );
}
