// Typed data flow in the editor: which state and item paths a node can read (with their
// types), bindings from them into a node's input or a completion's output, write bindings from
// a node's result into state, promotions, and the run input's fields.
import { typeSummary } from "../graph/graphspec";
import { getAt, isObject, setAt, stateInScope, updateAt, walkNodes, type DocPath, type Json } from "./document";

/** A path a binding can read or write, with its type. */
export interface TypedPath {
  source: "state" | "item";
  path: string[];
  type: unknown;
  /** `state.task: string` */
  label: string;
}

/** Every field path of a record type (records recursed), with its type. */
export function fieldPaths(type: unknown, prefix: string[] = []): { path: string[]; type: unknown }[] {
  if (!isObject(type) || type.kind !== "record" || !isObject(type.fields)) return [];
  return Object.entries(type.fields).flatMap(([name, field]) => {
    const fieldType = isObject(field) ? field.type : undefined;
    const path = [...prefix, name];
    return [{ path, type: fieldType }, ...fieldPaths(fieldType, path)];
  });
}

/** The item type of the map whose body holds `path`, if any. */
function itemTypeInScope(document: unknown, path: DocPath): unknown {
  for (let end = path.length - 1; end >= 1; end -= 1) {
    const candidate = getAt(document, path.slice(0, end));
    if (!isObject(candidate) || candidate.kind !== "map" || path[end] !== "body") continue;
    const over = isObject(candidate.over) ? candidate.over : {};
    const overPath = Array.isArray(over.path) ? over.path.map(String) : [];
    const listType = fieldPaths(stateInScope(document, path.slice(0, end + 1))).find(
      (entry) => entry.path.join(".") === overPath.join("."),
    )?.type;
    return isObject(listType) ? listType.items : undefined;
  }
  return undefined;
}

/** What a node at `path` may read: the fields of the state in scope, and a map item's. */
export function readablePaths(document: unknown, path: DocPath): TypedPath[] {
  const state = fieldPaths(stateInScope(document, path)).map(
    (entry): TypedPath => ({ source: "state", ...entry, label: `state.${entry.path.join(".")}: ${typeSummary(entry.type)}` }),
  );
  const itemType = itemTypeInScope(document, path);
  const item: TypedPath[] = itemType === undefined ? [] : [{ source: "item", path: [], type: itemType, label: `item: ${typeSummary(itemType)}` }];
  const itemFields = fieldPaths(itemType).map(
    (entry): TypedPath => ({ source: "item", ...entry, label: `item.${entry.path.join(".")}: ${typeSummary(entry.type)}` }),
  );
  // A binding path is never empty: a whole item is offered only through its fields.
  return [...state, ...(itemFields.length > 0 ? itemFields : item.filter((entry) => entry.path.length > 0))];
}

export const sameType = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The payload and binding keys of an executable (`input`) or a completion (`output`). */
function payloadKeys(node: unknown): { payload: string; bindings: string } {
  return isObject(node) && node.kind === "succeed" ? { payload: "output", bindings: "bindings" } : { payload: "input", bindings: "inputBindings" };
}

/**
 * Binds `field` of the node's input (or a completion's output) to `from`: the field is added
 * with the source's type (required), or, when it exists, kept and only bound.
 */
export function bindField(document: unknown, nodePath: DocPath, field: string, from: TypedPath): Json {
  return updateAt(document, nodePath, (node) => {
    const keys = payloadKeys(node);
    const payload = isObject(node[keys.payload]) && (node[keys.payload] as Json).kind === "record" ? (node[keys.payload] as Json) : { kind: "record", fields: {} };
    const fields = isObject(payload.fields) ? payload.fields : {};
    const nextFields = field in fields ? fields : { ...fields, [field]: { type: from.type, required: true } };
    const bindings = Array.isArray(node[keys.bindings]) ? (node[keys.bindings] as unknown[]) : [];
    const kept = bindings.filter((binding) => !(isObject(binding) && Array.isArray(binding.target) && binding.target.join(".") === field));
    return {
      ...node,
      [keys.payload]: { ...payload, fields: nextFields },
      [keys.bindings]: [...kept, { target: [field], value: { source: from.source, path: from.path } }],
    };
  });
}

/** Removes binding `index` of the node, and the payload field it filled when nothing else does. */
export function unbind(document: unknown, nodePath: DocPath, index: number): Json {
  return updateAt(document, nodePath, (node) => {
    const keys = payloadKeys(node);
    const bindings = Array.isArray(node[keys.bindings]) ? (node[keys.bindings] as unknown[]) : [];
    const removed = bindings[index];
    const rest = bindings.filter((_, at) => at !== index);
    const target = isObject(removed) && Array.isArray(removed.target) ? removed.target.map(String) : [];
    const payload = node[keys.payload];
    let nextPayload = payload;
    const stillBound = rest.some((binding) => isObject(binding) && Array.isArray(binding.target) && binding.target[0] === target[0]);
    if (target.length === 1 && !stillBound && isObject(payload) && isObject(payload.fields)) {
      const { [target[0] as string]: _dropped, ...fields } = payload.fields;
      nextPayload = { ...payload, fields };
    }
    return { ...node, [keys.payload]: nextPayload, [keys.bindings]: rest };
  });
}

/** Re-points binding `index` of the node at another source (its target unchanged). */
export function rebind(document: unknown, nodePath: DocPath, index: number, from: TypedPath): Json {
  const keys = payloadKeys(getAt(document, nodePath));
  return setAt(document, [...nodePath, keys.bindings, index, "value"], { source: from.source, path: from.path });
}

/** The channels of a node's result a write binding may read. */
export function resultPaths(node: unknown): { channel: "out" | "signal" | "diagnostic"; path: string[]; type: unknown; label: string }[] {
  if (!isObject(node)) return [];
  const out = fieldPaths(node.output).map((entry) => ({ channel: "out" as const, ...entry, label: `out.${entry.path.join(".")}: ${typeSummary(entry.type)}` }));
  const diagnostic = fieldPaths(node.diagnostic).map((entry) => ({ channel: "diagnostic" as const, ...entry, label: `diagnostic.${entry.path.join(".")}: ${typeSummary(entry.type)}` }));
  const signals = isObject(node.signals)
    ? Object.entries(node.signals).map(([name, labels]) => ({
        channel: "signal" as const,
        path: [name],
        type: { kind: "enum", values: Array.isArray(labels) ? labels : [] },
        label: `signal.${name}`,
      }))
    : [];
  return [...out, ...diagnostic, ...signals];
}

/** Adds a write binding from the node's own `channel.path` into `target` of the state in scope. */
export function addWrite(document: unknown, nodePath: DocPath, channel: string, path: string[], target: string[]): Json {
  return updateAt(document, nodePath, (node) => {
    const writes = Array.isArray(node.writeBindings) ? node.writeBindings : [];
    return { ...node, writeBindings: [...writes, { value: { node: node.name, channel, path }, target }] };
  });
}

export function removeWrite(document: unknown, nodePath: DocPath, index: number): Json {
  return updateAt(document, nodePath, (node) => ({
    ...node,
    writeBindings: (Array.isArray(node.writeBindings) ? node.writeBindings : []).filter((_, at) => at !== index),
  }));
}

/** Adds or removes `statePath` among the group's promoted state paths. */
export function togglePromotion(document: unknown, groupPath: DocPath, statePath: string[]): Json {
  return updateAt(document, groupPath, (group) => {
    const promoted = Array.isArray(group.promotedStatePaths) ? (group.promotedStatePaths as unknown[]) : [];
    const key = statePath.join(".");
    const has = promoted.some((entry) => Array.isArray(entry) && entry.join(".") === key);
    return {
      ...group,
      promotedStatePaths: has ? promoted.filter((entry) => !(Array.isArray(entry) && entry.join(".") === key)) : [...promoted, statePath],
    };
  });
}

/** Adds a field to the run input and to every group's state, so every node may read it. */
export function addInputField(document: unknown, name: string, type: unknown, required: boolean): Json {
  const field = { type, required };
  const next = updateAt(document, ["initialInput"], (input) => ({ ...input, kind: "record", fields: { ...(isObject(input.fields) ? input.fields : {}), [name]: field } }));
  return addStateField(next, name, type, required);
}

/** Adds a field to every group's state (where nodes write what they found, e.g. feedback). */
export function addStateField(document: unknown, name: string, type: unknown, required: boolean): Json {
  const groups: DocPath[] = [];
  walkNodes(document, (node, path) => {
    if (isObject(node.state)) groups.push(path);
  });
  let next = document as Json;
  for (const path of groups) {
    next = updateAt(next, [...path, "state"], (state) => ({ ...state, fields: { ...(isObject(state.fields) ? state.fields : {}), [name]: { type, required } } }));
  }
  return next;
}

/** Removes a field from the run input and from every group's state. */
export function removeInputField(document: unknown, name: string): Json {
  const drop = (type: Json): Json => {
    if (!isObject(type.fields)) return type;
    const { [name]: _removed, ...fields } = type.fields;
    return { ...type, fields };
  };
  let next = updateAt(document, ["initialInput"], drop);
  walkNodes(next, (node, path) => {
    if (isObject(node.state)) next = updateAt(next, [...path, "state"], drop);
  });
  return next;
}
