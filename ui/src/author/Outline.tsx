// The document as an ordered tree: every node with its diagnostics count, selectable, movable
// up and down, removable; every group with a menu adding a node of any kind at its end.
import type { Diagnostic } from "../api/types";
import { kindIcon } from "../graph/nodes";
import {
  GROUP_KINDS,
  LEAF_KINDS,
  addInto,
  addTarget,
  getAt,
  isObject,
  listSlot,
  moveNode,
  pathId,
  removeNode,
  type DocPath,
  type Json,
  type NodeKind,
} from "./document";

const KINDS: NodeKind[] = [...LEAF_KINDS, ...GROUP_KINDS];
const KIND_WORDS: Record<NodeKind, string> = {
  step: "step",
  verifier: "verifier",
  succeed: "completion",
  fail: "error",
  seq: "sequence",
  par: "parallel group",
  choice: "choice",
  loop: "loop",
  map: "map",
};

interface OutlineProps {
  graph: unknown;
  selected?: string;
  onSelect: (id: string) => void;
  onChange: (graph: Json) => void;
  /** Diagnostics by the node id holding them. */
  pins: Map<string, Diagnostic[]>;
}

export function Outline({ graph, selected, onSelect, onChange, pins }: OutlineProps) {
  const root = isObject(graph) ? graph.root : undefined;
  return (
    <nav className="outline" aria-label="Graph structure" data-testid="outline">
      {isObject(root) ? (
        <ul>
          <OutlineNode graph={graph} node={root} path={["root"]} selected={selected} onSelect={onSelect} onChange={onChange} pins={pins} />
        </ul>
      ) : (
        <p className="muted">The document has no root node.</p>
      )}
    </nav>
  );
}

function OutlineNode({
  graph,
  node,
  path,
  selected,
  onSelect,
  onChange,
  pins,
  label,
}: Omit<OutlineProps, "graph"> & { graph: unknown; node: Json; path: DocPath; label?: string }) {
  const id = pathId(path);
  const name = typeof node.name === "string" ? node.name : "?";
  const kind = typeof node.kind === "string" ? node.kind : "?";
  const slot = listSlot(path);
  const siblings = slot ? getAt(graph, slot.listPath) : undefined;
  const count = Array.isArray(siblings) ? siblings.length : 0;
  const removable = slot !== undefined || path[path.length - 1] === "otherwise";
  const problems = pins.get(id)?.length ?? 0;
  const children: { node: Json; path: DocPath; label?: string }[] = [];
  if (Array.isArray(node.children)) node.children.forEach((child, index) => isObject(child) && children.push({ node: child, path: [...path, "children", index] }));
  if (Array.isArray(node.branches)) {
    node.branches.forEach((branch, index) => {
      if (kind === "choice" && isObject(branch) && isObject(branch.node)) children.push({ node: branch.node, path: [...path, "branches", index, "node"], label: `when #${index + 1}` });
      else if (kind !== "choice" && isObject(branch)) children.push({ node: branch, path: [...path, "branches", index] });
    });
  }
  if (isObject(node.otherwise)) children.push({ node: node.otherwise, path: [...path, "otherwise"], label: "otherwise" });
  if (isObject(node.body)) children.push({ node: node.body, path: [...path, "body"], label: "body" });
  const canAdd = addTarget(graph, path) !== undefined;

  return (
    <li>
      <div className={`outline-row${selected === id ? " selected" : ""}`} data-testid={`outline-${name}`}>
        <button type="button" className="link outline-name" onClick={() => onSelect(id)} aria-current={selected === id ? "true" : undefined}>
          <span aria-hidden="true">{kindIcon(kind)}</span> {label && <span className="muted small">{label}: </span>}
          {name} <span className="muted small">{KIND_WORDS[kind as NodeKind] ?? kind}</span>
        </button>
        {problems > 0 && (
          <span className="outline-problems" data-testid="outline-problems" title={`${problems} problem(s)`}>
            {problems}
          </span>
        )}
        {slot && (
          <>
            <button type="button" className="icon" aria-label={`Move ${name} up`} disabled={slot.index === 0} onClick={() => onChange(moveNode(graph, path, -1))}>
              ↑
            </button>
            <button type="button" className="icon" aria-label={`Move ${name} down`} disabled={slot.index >= count - 1} onClick={() => onChange(moveNode(graph, path, 1))}>
              ↓
            </button>
          </>
        )}
        {removable && (
          <button type="button" className="icon danger" aria-label={`Remove ${name}`} onClick={() => onChange(removeNode(graph, path))}>
            ✕
          </button>
        )}
        {canAdd && (
          <select
            className="outline-add"
            aria-label={`Add to ${name}`}
            value=""
            data-testid={`add-to-${name}`}
            onChange={(event) => {
              const added = addInto(graph, path, event.target.value as NodeKind);
              if (added) {
                onChange(added.graph);
                onSelect(added.id);
              }
            }}
          >
            <option value="">+ add…</option>
            {KINDS.map((choice) => (
              <option key={choice} value={choice}>
                {KIND_WORDS[choice]}
              </option>
            ))}
          </select>
        )}
      </div>
      {children.length > 0 && (
        <ul>
          {children.map((child) => (
            <OutlineNode key={pathId(child.path)} graph={graph} {...child} selected={selected} onSelect={onSelect} onChange={onChange} pins={pins} />
          ))}
        </ul>
      )}
    </li>
  );
}
