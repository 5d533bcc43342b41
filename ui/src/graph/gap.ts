// Reads a GaP `workflow.json` v3 document into a drawable model: the top level and each visited
// subgraph are frames holding their nodes, wired by edges and labelled conditional edges.
import { addEdge, addNode, emptyModel, type GraphModel, type ModelNodeKind } from "./model";

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const LEAF_KINDS = new Set(["tool", "script", "router", "end", "noop"]);

/** Subgraph references deeper than this are drawn as a leaf (a subgraph may refer to itself). */
const MAX_SUBGRAPH_DEPTH = 8;

export function gapModel(document: unknown): GraphModel {
  const model = emptyModel();
  if (!isObject(document)) return model;
  const subgraphs = isObject(document.subgraphs) ? document.subgraphs : {};
  const rootId = "workflow";
  addNode(model, {
    id: rootId,
    name: "workflow",
    kind: "workflow",
    children: [],
    group: true,
    summary: "workflow",
  });
  readScope(model, document, rootId, subgraphs, 0, "");
  return model;
}

function readScope(
  model: GraphModel,
  scope: Json,
  scopeId: string,
  subgraphs: Json,
  depth: number,
  /** How the executor prefixes this scope's node ids: `""` at the top, `subgraph.` inside. */
  runPrefix: string,
): void {
  const nodes = isObject(scope.nodes) ? scope.nodes : {};
  const idOf = (name: string) => `${scopeId}/${name}`;
  const virtual = new Map<string, string>();
  // START and END are virtual: drawn as small pills only when an edge uses them.
  const endpoint = (name: string): string | undefined => {
    if (name === "START" || name === "END") {
      let id = virtual.get(name);
      if (!id) {
        id = `${scopeId}/${name}`;
        virtual.set(name, id);
        addNode(model, {
          id,
          name,
          kind: name === "START" ? "start" : "finish",
          parent: scopeId,
          children: [],
          group: false,
        });
      }
      return id;
    }
    return name in nodes ? idOf(name) : undefined;
  };

  for (const [name, definition] of Object.entries(nodes)) {
    const node = isObject(definition) ? definition : {};
    const type = typeof node.type === "string" ? node.type : "noop";
    const id = idOf(name);
    const reference = typeof node.ref === "string" ? node.ref : undefined;
    const subgraph = reference && isObject(subgraphs[reference]) ? subgraphs[reference] : undefined;
    if (type === "subgraph" && subgraph && depth < MAX_SUBGRAPH_DEPTH) {
      const nested = subgraph as Json;
      const nestedNodes = isObject(nested.nodes) ? Object.keys(nested.nodes).length : 0;
      addNode(model, {
        id,
        name,
        kind: "subgraph",
        parent: scopeId,
        children: [],
        group: true,
        worker: reference,
        summary: `subgraph ${reference} · ${nestedNodes} nodes`,
      });
      readScope(model, nested, id, subgraphs, depth + 1, `${reference}.`);
    } else {
      addNode(model, {
        id,
        name,
        kind: (LEAF_KINDS.has(type) ? type : "noop") as ModelNodeKind,
        runName: `${runPrefix}${name}`,
        parent: scopeId,
        children: [],
        group: false,
        worker:
          typeof node.tool === "string"
            ? node.tool
            : typeof node.script === "string"
              ? node.script
              : reference,
        reason: type === "end" && typeof node.status === "string" ? node.status : undefined,
        inputs: isObject(node.inputs)
          ? Object.keys(node.inputs).map((input) => ({ name: input, type: "" }))
          : undefined,
      });
    }
  }

  const edges = Array.isArray(scope.edges) ? scope.edges : [];
  for (const edge of edges) {
    if (!Array.isArray(edge) || edge.length !== 2) continue;
    const [from, to] = edge;
    if (typeof from !== "string" || typeof to !== "string") continue;
    const source = endpoint(from);
    const target = endpoint(to);
    if (source && target) addEdge(model, source, target, "flow");
  }
  const conditional = isObject(scope.conditional_edges) ? scope.conditional_edges : {};
  for (const [from, rule] of Object.entries(conditional)) {
    if (!isObject(rule) || !isObject(rule.mapping)) continue;
    const source = endpoint(from);
    if (!source) continue;
    for (const [value, to] of Object.entries(rule.mapping)) {
      const target = typeof to === "string" ? endpoint(to) : undefined;
      if (target) addEdge(model, source, target, "conditional", value);
    }
  }
}

/** Whether a JSON document looks like a GaP workflow rather than a GraphSpec. */
export function looksLikeGap(document: unknown): boolean {
  return isObject(document) && "version" in document && "nodes" in document && !("root" in document);
}
