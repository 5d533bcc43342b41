// The benchmark graphs: a map over 1,024 items (one command step each), and their parts.
const integer = { kind: "integer" };
export const nothing = { kind: "null" };
const item = { kind: "record", fields: { value: { type: integer, required: true } } };
const items = { kind: "record", fields: { items: { type: { kind: "array", items: item }, required: true } } };

export function graph(initialInput: unknown, children: unknown[]) {
  return {
    profile: "openengine.graph.full/v1",
    initialInput,
    policy: { policy: "policy.strict@1", default: "deny" },
    root: { kind: "seq", name: "root", state: initialInput, promotedStatePaths: [], children: [...children, { kind: "succeed", name: "done", output: nothing, bindings: [] }] },
  };
}

export function step(name: string, input: unknown, reads: unknown[]) {
  return { kind: "step", name, worker: `command.${name}@1`, input, output: nothing, inputBindings: reads, writeBindings: [], timeoutMs: 120_000, attempts: 1 };
}

/** `map fanOut` over 1,024 items, one `work` step per item. */
export function mapGraph() {
  const body = step("work", item, [{ target: ["value"], value: { source: "item", path: ["value"] } }]);
  return graph(items, [{ kind: "map", name: "fanOut", state: items, body, over: { source: "state", path: ["items"] }, maxItems: 1024, promotedStatePaths: [] }]);
}

/** The map's input: 1,024 items. */
export function mapItems() {
  return { items: Array.from({ length: 1024 }, (_, value) => ({ value })) };
}
