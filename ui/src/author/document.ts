// The editor's atomic actions over a GraphSpec document: pure functions that return a new
// document and never touch what they were given. Every object is copied with its unknown
// fields, so an imported document exports unchanged apart from what was edited.

export type Json = Record<string, unknown>;
/** A location in the document: keys and list indices from the top (`["root", "children", 0]`). */
export type DocPath = (string | number)[];

export const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

export const GROUP_KINDS = ["seq", "par", "choice", "loop", "map"] as const;
export const LEAF_KINDS = ["step", "verifier", "succeed", "fail"] as const;
export type NodeKind = (typeof GROUP_KINDS)[number] | (typeof LEAF_KINDS)[number];

/** The graph of a new empty profile: a task input, and a sequence that only completes. */
export function emptyGraph(): Json {
  const state = recordType({ task: { type: { kind: "string" }, required: true } });
  return {
    profile: "openengine.graph.full/v1",
    initialInput: state,
    policy: { policy: "policy.trellis@1", default: "deny" },
    root: { kind: "seq", name: "run", state, promotedStatePaths: [], children: [{ kind: "succeed", name: "done", output: { kind: "null" }, bindings: [] }] },
  };
}

/** Every worker reference the document uses. */
export function workersUsed(document: unknown): Set<string> {
  const used = new Set<string>();
  walkNodes(document, (node) => {
    if (typeof node.worker === "string") used.add(node.worker);
  });
  return used;
}

/**
 * The worker a new executable gets: `preferred` while no other node uses it (one worker
 * reference has one contract), else a command worker of its own, bound by the run's plan.
 */
export function workerFor(document: unknown, preferred: string, name: string): string {
  return workersUsed(document).has(preferred) ? `command.${name}@1` : preferred;
}

export function recordType(fields: Record<string, { type: unknown; required: boolean }>): Json {
  return { kind: "record", fields };
}

/** The model id the canvas uses for a document location (`root/children/0`), and back. */
export const pathId = (path: DocPath): string => path.join("/");
export const idPath = (id: string): DocPath => id.split("/").map((part) => (/^\d+$/.test(part) ? Number(part) : part));

export function getAt(document: unknown, path: DocPath): unknown {
  let current: unknown = document;
  for (const key of path) {
    if (typeof key === "number") current = Array.isArray(current) ? current[key] : undefined;
    else current = isObject(current) ? current[key] : undefined;
  }
  return current;
}

/** The document with the value at `path` replaced (copying every container on the way). */
export function setAt(document: unknown, path: DocPath, value: unknown): Json {
  const write = (current: unknown, depth: number): unknown => {
    if (depth === path.length) return value;
    const key = path[depth] as string | number;
    if (typeof key === "number") {
      const list = Array.isArray(current) ? [...(current as unknown[])] : [];
      list[key] = write(list[key], depth + 1);
      return list;
    }
    const object = isObject(current) ? { ...current } : {};
    object[key] = write(object[key], depth + 1);
    return object;
  };
  return write(document, 0) as Json;
}

/** The document with `update` applied to the object at `path`. */
export function updateAt(document: unknown, path: DocPath, update: (node: Json) => Json): Json {
  const current = getAt(document, path);
  return setAt(document, path, update(isObject(current) ? current : {}));
}

/** Every node name in the document. */
export function nodeNames(document: unknown): Set<string> {
  const names = new Set<string>();
  walkNodes(document, (node) => {
    if (typeof node.name === "string") names.add(node.name);
  });
  return names;
}

/** Calls `visit` on every graph node with its path, parents first. */
export function walkNodes(document: unknown, visit: (node: Json, path: DocPath) => void): void {
  const root = isObject(document) ? document.root : undefined;
  const walk = (node: unknown, path: DocPath) => {
    if (!isObject(node)) return;
    visit(node, path);
    for (const [key, list] of [["children", node.children], ["branches", node.branches]] as const) {
      if (!Array.isArray(list)) continue;
      list.forEach((child, index) => {
        if (node.kind === "choice" && isObject(child)) walk(child.node, [...path, key, index, "node"]);
        else walk(child, [...path, key, index]);
      });
    }
    if (isObject(node.otherwise)) walk(node.otherwise, [...path, "otherwise"]);
    if (isObject(node.body)) walk(node.body, [...path, "body"]);
  };
  walk(root, ["root"]);
}

/** `base`, or `base_2`, `base_3`, … : the first name the document does not use yet. */
export function freshName(document: unknown, base: string): string {
  const taken = nodeNames(document);
  if (!taken.has(base)) return base;
  for (let n = 2; ; n += 1) if (!taken.has(`${base}_${n}`)) return `${base}_${n}`;
}

/** The `state` type in scope at `path`: that of the nearest group holding it. */
export function stateInScope(document: unknown, path: DocPath): unknown {
  for (let end = path.length - 1; end >= 1; end -= 1) {
    const candidate = getAt(document, path.slice(0, end));
    if (isObject(candidate) && typeof candidate.kind === "string" && "state" in candidate) return candidate.state;
  }
  return isObject(document) ? document.initialInput : undefined;
}

/** A new node of `kind` named `name`; groups get the state in scope and one step inside. */
export function newNode(document: unknown, kind: NodeKind, name: string, state: unknown): Json {
  const step = (stepName: string): Json => ({
    kind: "step",
    name: stepName,
    worker: workerFor(document, "builtin.agent.worker@1", stepName),
    instructions: "Describe what this step does.",
    input: recordType({}),
    output: { kind: "null" },
    inputBindings: [],
    writeBindings: [],
    attempts: 1,
  });
  const inner = () => step(freshName(document, `${name}_step`));
  switch (kind) {
    case "step":
      return step(name);
    case "verifier":
      return {
        ...step(name),
        kind: "verifier",
        worker: workerFor(document, "builtin.agent.acceptance-verifier@1", name),
        signals: { verdict: ["accepted", "rejected"] },
        diagnostic: recordType({ message: { type: { kind: "string" }, required: true } }),
      };
    case "seq":
      return { kind, name, state, promotedStatePaths: [], children: [inner()] };
    case "par":
      return { kind, name, state, promotedStatePaths: [], join: { kind: "all" }, branches: [inner()] };
    case "choice": {
      const guarded = inner();
      return {
        kind,
        name,
        state,
        promotedStatePaths: [],
        branches: [
          {
            when: { kind: "in", value: { name: guarded.name, source: "error", field: null }, labels: ["crash", "malformed", "refusal", "timeout"] },
            node: { kind: "fail", name: freshName(document, `${name}_failed`), reason: `${name}_failed` },
          },
        ],
        otherwise: null,
      };
    }
    case "loop":
      return {
        kind,
        name,
        state,
        maxIterations: 3,
        promotedStatePaths: [],
        body: { kind: "seq", name: freshName(document, `${name}_round`), state, promotedStatePaths: [], children: [inner()] },
      };
    case "map":
      return { kind, name, state, over: { source: "state", path: ["items"] }, maxItems: 10, promotedStatePaths: [], body: inner() };
    case "succeed":
      return { kind, name, output: { kind: "null" }, bindings: [] };
    case "fail":
      return { kind, name, reason: name };
  }
}

/** Inserts `node` into the list at `listPath` (a `children` or `branches` array) at `index`. */
export function insertNode(document: unknown, listPath: DocPath, index: number, node: Json): Json {
  const list = getAt(document, listPath);
  const items = Array.isArray(list) ? [...(list as unknown[])] : [];
  const parent = getAt(document, listPath.slice(0, -1));
  // A choice's branches hold guarded nodes: a new one is guarded by a copy of the first guard.
  const entry =
    isObject(parent) && parent.kind === "choice" && listPath[listPath.length - 1] === "branches"
      ? { when: isObject(items[0]) ? items[0].when : { kind: "all", guards: [] }, node }
      : node;
  items.splice(Math.max(0, Math.min(index, items.length)), 0, entry);
  return setAt(document, listPath, items);
}

/** The list a node sits in and its index there, when it sits in one. */
export function listSlot(path: DocPath): { listPath: DocPath; index: number } | undefined {
  // A choice branch's node is at …/branches/i/node: the slot is the branch.
  const tail = path[path.length - 1] === "node" ? path.slice(0, -1) : path;
  const index = tail[tail.length - 1];
  if (typeof index !== "number") return undefined;
  return { listPath: tail.slice(0, -1), index };
}

/** Removes the node at `path`: from its list, or an `otherwise` (left null). Bodies stay. */
export function removeNode(document: unknown, path: DocPath): Json {
  if (path[path.length - 1] === "otherwise") return setAt(document, path, null);
  const slot = listSlot(path);
  if (!slot) return document as Json;
  const list = getAt(document, slot.listPath);
  if (!Array.isArray(list)) return document as Json;
  return setAt(document, slot.listPath, list.filter((_, at) => at !== slot.index));
}

/** Moves the node at `path` one place up (`-1`) or down (`+1`) in its list. */
export function moveNode(document: unknown, path: DocPath, delta: -1 | 1): Json {
  const slot = listSlot(path);
  if (!slot) return document as Json;
  const list = getAt(document, slot.listPath);
  const to = slot.index + delta;
  if (!Array.isArray(list) || to < 0 || to >= list.length) return document as Json;
  const items = [...(list as unknown[])];
  [items[slot.index], items[to]] = [items[to], items[slot.index]];
  return setAt(document, slot.listPath, items);
}

/** Renames the node at `path` and every guard, write binding and selector that names it. */
export function renameNode(document: unknown, path: DocPath, name: string): Json {
  const old = getAt(document, [...path, "name"]);
  const renamed = setAt(document, [...path, "name"], name);
  if (typeof old !== "string" || old === name) return renamed;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (!isObject(value)) return value;
    const copy: Json = {};
    for (const [key, inner] of Object.entries(value)) copy[key] = rewrite(inner);
    // Control selectors (`{name, source}`) and node output selectors (`{node, channel}`).
    if (copy.name === old && typeof copy.source === "string" && !("kind" in copy)) copy.name = name;
    if (copy.node === old && typeof copy.channel === "string") copy.node = name;
    return copy;
  };
  return rewrite(renamed) as Json;
}

/** The lists a group adds into: a sequence's children, a group's branches, a body's children. */
export function addTarget(graph: unknown, path: DocPath): DocPath | undefined {
  const node = getAt(graph, path);
  if (!isObject(node)) return undefined;
  if (node.kind === "seq") return [...path, "children"];
  if (node.kind === "par" || node.kind === "choice") return [...path, "branches"];
  if ((node.kind === "loop" || node.kind === "map") && isObject(node.body) && node.body.kind === "seq") return [...path, "body", "children"];
  return undefined;
}

/** Adds a new node of `kind` at the end of the group at `path`; its new id. */
export function addInto(graph: unknown, path: DocPath, kind: NodeKind): { graph: Json; id: string } | undefined {
  const list = addTarget(graph, path);
  if (!list) return undefined;
  const name = freshName(graph, kind === "succeed" ? "done" : kind === "fail" ? "failed" : kind);
  const state = isObject(getAt(graph, path)) ? (getAt(graph, path) as Json).state : undefined;
  const node = newNode(graph, kind, name, state);
  const items = getAt(graph, list);
  const count = Array.isArray(items) ? items.length : 0;
  // A sequence ending in a completion or error node keeps it last: new work goes before it.
  const last = Array.isArray(items) ? items[count - 1] : undefined;
  const endsInTerminal = list[list.length - 1] === "children" && isObject(last) && (last.kind === "succeed" || last.kind === "fail") && kind !== "succeed" && kind !== "fail";
  const index = endsInTerminal ? count - 1 : count;
  const next = insertNode(graph, list, index, node);
  const parent = getAt(graph, path) as Json;
  const id = parent.kind === "choice" ? pathId([...list, index, "node"]) : pathId([...list, index]);
  return { graph: next, id };
}
