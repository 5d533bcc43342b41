// Which paths in scope the verifier proves defined where a node reads them: the node is given
// one probe binding per candidate (into a field of the candidate's own type) and the probe
// document is validated; a candidate whose probe binding draws a diagnostic is not proven.
import { useEffect, useState } from "react";
import { api } from "../api/client";
import type { TypedPath } from "./bindings";
import { getAt, isObject, pathId, setAt, type DocPath } from "./document";

const PROBE = "__trellis_probe_";

/** The document with probe bindings on the node at `path`, and where they start. */
export function probeDocument(graph: unknown, path: DocPath, candidates: TypedPath[]): { document: unknown; first: number; key: string } | undefined {
  const node = getAt(graph, path);
  if (!isObject(node)) return undefined;
  const completion = node.kind === "succeed";
  const payloadKey = completion ? "output" : "input";
  const key = completion ? "bindings" : "inputBindings";
  const payload = isObject(node[payloadKey]) && (node[payloadKey] as Record<string, unknown>).kind === "record" ? (node[payloadKey] as Record<string, unknown>) : { kind: "record", fields: {} };
  const fields = { ...(isObject(payload.fields) ? payload.fields : {}) };
  const bindings = Array.isArray(node[key]) ? [...(node[key] as unknown[])] : [];
  const first = bindings.length;
  candidates.forEach((candidate, index) => {
    fields[`${PROBE}${index}`] = { type: candidate.type, required: true };
    bindings.push({ target: [`${PROBE}${index}`], value: { source: candidate.source, path: candidate.path } });
  });
  const probed = { ...node, [payloadKey]: { ...payload, fields }, [key]: bindings };
  return { document: setAt(graph, path, probed), first, key };
}

/** Candidates (by index) whose probe binding drew no diagnostic; undefined when unknown. */
export function provenIndices(diagnostics: { at?: string }[], path: DocPath, key: string, first: number, count: number): Set<number> {
  const base = `${pathId(path)}/${key}/`;
  const refused = new Set<number>();
  for (const diagnostic of diagnostics) {
    if (!diagnostic.at?.startsWith(base)) continue;
    const index = Number(diagnostic.at.slice(base.length).split("/")[0]);
    if (Number.isInteger(index) && index >= first) refused.add(index - first);
  }
  const proven = new Set<number>();
  for (let index = 0; index < count; index += 1) if (!refused.has(index)) proven.add(index);
  return proven;
}

/** The candidates proven available at the node (by `source:path` key), once the verifier said. */
export function useProvenPaths(graph: unknown, path: DocPath, candidates: TypedPath[]): Set<string> | undefined {
  const [proven, setProven] = useState<Set<string> | undefined>();
  const signature = JSON.stringify([pathId(path), candidates.map((entry) => [entry.source, entry.path])]);
  useEffect(() => {
    let cancelled = false;
    const probe = probeDocument(graph, path, candidates);
    if (!probe || candidates.length === 0) {
      setProven(undefined);
      return;
    }
    api
      .validate(probe.document, "graphspec")
      .then((report) => {
        if (cancelled) return;
        if (report.status === "unparseable") return setProven(undefined);
        const indices = provenIndices(report.diagnostics ?? [], path, probe.key, probe.first, candidates.length);
        setProven(new Set([...indices].map((index) => `${candidates[index]?.source}:${candidates[index]?.path.join(".")}`)));
      })
      .catch(() => !cancelled && setProven(undefined));
    return () => {
      cancelled = true;
    };
    // The signature stands for path and candidates; the graph is compared by identity.
  }, [graph, signature]);
  return proven;
}
