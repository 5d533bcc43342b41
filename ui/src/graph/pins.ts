// Diagnostics placed on the nodes of a drawn model: on the node holding the place a diagnostic
// points at (a binding of a step: the step), else on every node it names.
import type { Diagnostic } from "../api/types";
import type { GraphModel } from "./model";

/** Diagnostics by the model node ids they name. */
export function pinsFor(model: GraphModel, diagnostics: Diagnostic[]): Map<string, Diagnostic[]> {
  const pins = new Map<string, Diagnostic[]>();
  for (const diagnostic of diagnostics) {
    // Pinned where it points when the model has that place (one of two nodes sharing a name),
    // else on every node it names.
    const holder = diagnostic.at === undefined ? undefined : nodeHolding(model, diagnostic.at);
    const exact = holder !== undefined && (!diagnostic.nodes?.length || holder === diagnostic.at) ? [holder] : undefined;
    for (const name of exact ? [""] : (diagnostic.nodes ?? [])) {
      for (const id of exact ?? model.byName.get(name) ?? []) {
        const list = pins.get(id);
        if (list) list.push(diagnostic);
        else pins.set(id, [diagnostic]);
      }
    }
  }
  return pins;
}

/** The model node at `location`, or the nearest one holding it (`root/children/1/input` → `root/children/1`). */
export function nodeHolding(model: GraphModel, location: string): string | undefined {
  const parts = location.split("/");
  for (let end = parts.length; end > 0; end -= 1) {
    const id = parts.slice(0, end).join("/");
    if (model.nodes.has(id)) return id;
  }
  return undefined;
}
