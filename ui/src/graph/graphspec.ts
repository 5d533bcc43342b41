// Reads a GraphSpec document (`openengine.graph.full/v1`) into a drawable model, leniently:
// a rejected document is drawn as far as its shape allows, so diagnostics can be pinned on it.
import {
  addEdge,
  addNode,
  emptyModel,
  type FieldSummary,
  type GraphModel,
  type ModelNode,
  type ModelNodeKind,
} from "./model";

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const text = (value: unknown): string | undefined =>
  typeof value === "string" ? value : undefined;

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

/** A short rendering of a payload type: `string`, `[string]`, `{task, feedback}`, `a|b`. */
export function typeSummary(type: unknown, depth = 0): string {
  if (!isObject(type)) return "?";
  const kind = text(type.kind) ?? "?";
  switch (kind) {
    case "array":
      return `[${typeSummary(type.items, depth + 1)}]`;
    case "record": {
      const fields = isObject(type.fields) ? Object.keys(type.fields) : [];
      if (depth > 0) return `{${fields.length} fields}`;
      return `{${fields.slice(0, 4).join(", ")}${fields.length > 4 ? ", …" : ""}}`;
    }
    case "enum": {
      const values = Array.isArray(type.values) ? type.values.map(String) : [];
      return values.slice(0, 4).join("|") + (values.length > 4 ? "|…" : "");
    }
    case "optional":
    case "nullable":
      return `${typeSummary(type.inner ?? type.type, depth + 1)}?`;
    default:
      return kind;
  }
}

function fieldsOf(type: unknown): FieldSummary[] | undefined {
  if (!isObject(type) || type.kind !== "record" || !isObject(type.fields)) return undefined;
  return Object.entries(type.fields).map(([name, field]) => ({
    name,
    type: typeSummary(isObject(field) ? field.type : undefined, 1),
  }));
}

/** A data selector as a readable path: `state.items`, `input.task`, `worker.output.files`. */
export function selectorSummary(selector: unknown): string {
  if (!isObject(selector)) return "?";
  const source = text(selector.source) ?? "?";
  const path = Array.isArray(selector.path) ? selector.path.map(String) : [];
  const head = text(selector.name) ?? source;
  return [head, ...(text(selector.name) ? [source] : []), ...path].join(".");
}

/** A guard as a short sentence: `acceptance.verdict ∈ {accepted}`, `worker error`, `a and b`. */
export function guardSummary(guard: unknown): string {
  if (!isObject(guard)) return "?";
  const kind = text(guard.kind);
  const parts = (list: unknown) =>
    (Array.isArray(list) ? list : []).map((item) => guardSummary(item));
  switch (kind) {
    case "in": {
      const value = isObject(guard.value) ? guard.value : {};
      const labels = Array.isArray(guard.labels) ? guard.labels.map(String) : [];
      if (text(value.source) === "error") {
        // All four error channels: the node failed, however.
        return labels.length >= 4
          ? `${text(value.name) ?? "?"} failed`
          : `${text(value.name) ?? "?"} error ∈ {${labels.join(", ")}}`;
      }
      const subject = [text(value.name), text(value.field)].filter(Boolean).join(".");
      return `${subject || selectorSummary(value)} ∈ {${labels.join(", ")}}`;
    }
    case "any":
      return parts(guard.guards).join(" or ");
    case "all":
      return parts(guard.guards).join(" and ");
    case "not":
      return `not (${guardSummary(guard.guard)})`;
    case "k_of_n": {
      const labels = Array.isArray(guard.labels) ? guard.labels.map(String) : [];
      const values = (Array.isArray(guard.values) ? guard.values : []).map((value) =>
        isObject(value) ? [text(value.name), text(value.source) === "error" ? "error" : text(value.field)].filter(Boolean).join(".") : "?",
      );
      return `${String(guard.count ?? "?")} of (${values.join(", ")}) ∈ {${labels.join(", ")}}`;
    }
    case "k_of_map": {
      const labels = Array.isArray(guard.labels) ? guard.labels.map(String) : [];
      const value = isObject(guard.value) ? guard.value : {};
      const subject = [text(value.name), text(value.source) === "error" ? "error" : text(value.field)].filter(Boolean).join(".");
      return `${String(guard.count ?? "?")} items' ${subject} ∈ {${labels.join(", ")}}`;
    }
    default:
      return kind ?? "?";
  }
}

const GROUP_KINDS = new Set(["seq", "par", "choice", "loop", "map"]);

function frameSummary(node: Json, kind: string, childCount: number): string {
  switch (kind) {
    case "seq":
      return `${childCount} steps in order`;
    case "par": {
      const join = isObject(node.join) ? text(node.join.kind) : undefined;
      return `${childCount} branches in parallel${join ? ` · join ${join}` : ""}`;
    }
    case "choice":
      return `first matching of ${childCount} branches`;
    case "loop": {
      const body = isObject(node.body) && node.body.kind === "seq" ? text(node.body.name) : undefined;
      return `up to ${count(node.maxIterations) ?? "?"} rounds${body ? ` of ${body}` : ""}`;
    }
    case "map":
      return `each item of ${selectorSummary(node.over)} · at most ${count(node.maxItems) ?? "?"}`;
    default:
      return kind;
  }
}

/** Builds the model of a GraphSpec document; unknown shapes become `?` leaves, never errors. */
export function graphSpecModel(document: unknown): GraphModel {
  const model = emptyModel();
  const root = isObject(document) ? document.root : undefined;
  if (isObject(root)) readNode(model, root, "root", undefined, true);
  return model;
}

/**
 * Reads one node (and everything under it); returns its id. A sequence that is the root or a
 * loop's or map's body is `inline`: its children go straight into the enclosing frame (a frame
 * around a frame's only child says nothing), and its name refers to that frame.
 */
function readNode(
  model: GraphModel,
  node: Json,
  id: string,
  parent: string | undefined,
  inline = false,
): string {
  const kind = text(node.kind) ?? "?";
  const name = text(node.name) ?? "?";
  if (kind === "seq" && inline) return readInlineSequence(model, node, id, parent, name);
  const isGroup = GROUP_KINDS.has(kind);
  const entry: ModelNode = {
    id,
    name,
    kind: (isGroup || ["step", "verifier", "succeed", "fail"].includes(kind)
      ? kind
      : "noop") as ModelNodeKind,
    parent,
    children: [],
    group: isGroup,
  };
  if (kind === "step" || kind === "verifier") {
    entry.worker = text(node.worker);
    entry.inputs = fieldsOf(node.input);
    entry.output = typeSummary(node.output);
    entry.attempts = count(node.attempts);
    if (kind === "verifier" && isObject(node.signals)) {
      entry.signals = Object.fromEntries(
        Object.entries(node.signals).map(([signal, labels]) => [
          signal,
          Array.isArray(labels) ? labels.map(String) : [],
        ]),
      );
    }
  }
  if (kind === "fail") entry.reason = text(node.reason);
  if (kind === "loop") entry.maxIterations = count(node.maxIterations);
  if (kind === "map") {
    entry.maxItems = count(node.maxItems);
    entry.over = selectorSummary(node.over);
  }
  if (kind === "par" && isObject(node.join)) entry.join = text(node.join.kind);
  addNode(model, entry);

  if (kind === "seq") {
    const children = Array.isArray(node.children) ? node.children.filter(isObject) : [];
    let previous: string | undefined;
    children.forEach((child, index) => {
      const childId = readNode(model, child, `${id}/children/${index}`, id);
      if (previous) addEdge(model, previous, childId, "flow");
      previous = childId;
    });
  } else if (kind === "par") {
    const branches = Array.isArray(node.branches) ? node.branches.filter(isObject) : [];
    branches.forEach((branch, index) => readNode(model, branch, `${id}/branches/${index}`, id));
  } else if (kind === "choice") {
    // A decision marker at the top of the frame, with one labelled edge per branch.
    const decision = `${id}/decision`;
    addNode(model, { id: decision, name, kind: "decision", parent: id, children: [], group: false });
    const branches = Array.isArray(node.branches) ? node.branches : [];
    branches.forEach((branch, index) => {
      if (!isObject(branch) || !isObject(branch.node)) return;
      const target = readNode(model, branch.node, `${id}/branches/${index}/node`, id);
      addEdge(model, decision, target, "branch", guardSummary(branch.when));
    });
    if (isObject(node.otherwise)) {
      const target = readNode(model, node.otherwise, `${id}/otherwise`, id);
      addEdge(model, decision, target, "otherwise", "otherwise");
    }
  } else if ((kind === "loop" || kind === "map") && isObject(node.body)) {
    readNode(model, node.body, `${id}/body`, id, true);
    // The loop's back-edge: from the end of its body back to its start, for the next round.
    const first = entry.children[0];
    const last = entry.children[entry.children.length - 1];
    if (kind === "loop" && first && last && first !== last) {
      addEdge(model, last, first, "back", `next round (max ${entry.maxIterations ?? "?"})`, id);
    }
  }
  const shown = entry.children.filter((child) => model.nodes.get(child)?.kind !== "decision");
  entry.summary = isGroup ? frameSummary(node, kind, shown.length) : undefined;
  return id;
}

function readInlineSequence(
  model: GraphModel,
  node: Json,
  id: string,
  parent: string | undefined,
  name: string,
): string {
  const children = Array.isArray(node.children) ? node.children.filter(isObject) : [];
  let previous: string | undefined;
  let first: string | undefined;
  children.forEach((child, index) => {
    const childId = readNode(model, child, `${id}/children/${index}`, parent);
    if (previous) addEdge(model, previous, childId, "flow");
    first ??= childId;
    previous = childId;
  });
  const stand = parent ?? first;
  if (stand) {
    const named = model.byName.get(name);
    if (named) named.push(stand);
    else model.byName.set(name, [stand]);
  }
  return stand ?? id;
}
