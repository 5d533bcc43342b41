// The data a node reads and writes: its input (or a completion's output) bindings chosen from
// the typed paths in scope, and an executable's write bindings from its result into state.
import { useId, useState } from "react";
import { typeSummary } from "../graph/graphspec";
import { bindField, addWrite, readablePaths, rebind, removeWrite, resultPaths, sameType, unbind, fieldPaths } from "./bindings";
import { useProvenPaths } from "./available";
import { getAt, isObject, stateInScope, type DocPath, type Json } from "./document";

interface Props {
  graph: unknown;
  path: DocPath;
  node: Json;
  onChange: (graph: Json) => void;
}

const keyOf = (source: string, path: string[]) => `${source}:${path.join(".")}`;

/** A source's label, saying when the verifier does not prove it defined where the node reads it. */
const sourceLabel = (entry: { source: string; path: string[]; label: string }, proven: Set<string> | undefined) =>
  proven && !proven.has(keyOf(entry.source, entry.path)) ? `${entry.label} (not proven defined here)` : entry.label;

export function InputBindings({ graph, path, node, onChange }: Props) {
  const completion = node.kind === "succeed";
  const payloadKey = completion ? "output" : "input";
  const bindings = Array.isArray(node[completion ? "bindings" : "inputBindings"]) ? (node[completion ? "bindings" : "inputBindings"] as unknown[]) : [];
  const payload = node[payloadKey];
  const fields = isObject(payload) && isObject(payload.fields) ? payload.fields : {};
  const readable = readablePaths(graph, path);
  const proven = useProvenPaths(graph, path, readable);
  const [field, setField] = useState("");
  const [source, setSource] = useState("");
  const fieldId = useId();
  const sourceId = useId();
  const chosen = readable.find((entry) => keyOf(entry.source, entry.path) === source);

  return (
    <section className="panel-section" aria-label={completion ? "Output bindings" : "Input bindings"}>
      <h3>{completion ? "Output" : "Input"} bindings</h3>
      {bindings.length === 0 && <p className="muted small">No bindings yet.</p>}
      <ul className="binding-list">
        {bindings.map((binding, index) => {
          if (!isObject(binding)) return null;
          const target = Array.isArray(binding.target) ? binding.target.map(String) : [];
          const value = isObject(binding.value) ? binding.value : {};
          const current = keyOf(String(value.source ?? "?"), Array.isArray(value.path) ? value.path.map(String) : []);
          const fieldType = isObject(fields[target[0] ?? ""]) ? (fields[target[0] ?? ""] as Json).type : undefined;
          // Typed: only sources of the target's type are offered (plus the current one, whatever it is).
          const choices = readable.filter((entry) => target.length !== 1 || sameType(entry.type, fieldType) || keyOf(entry.source, entry.path) === current);
          const known = choices.some((entry) => keyOf(entry.source, entry.path) === current);
          return (
            <li key={index} data-testid="binding" data-target={target.join(".")}>
              <span className="binding-target">
                {target.join(".")}: {typeSummary(fieldType)}
              </span>{" "}
              ←{" "}
              <select
                aria-label={`Source of ${target.join(".")}`}
                value={current}
                data-testid={`binding-source-${target.join(".")}`}
                onChange={(event) => {
                  const next = readable.find((entry) => keyOf(entry.source, entry.path) === event.target.value);
                  if (next) onChange(rebind(graph, path, index, next));
                }}
              >
                {!known && <option value={current}>{current.replace(":", ".")} (not in scope)</option>}
                {choices.map((entry) => (
                  <option key={keyOf(entry.source, entry.path)} value={keyOf(entry.source, entry.path)}>
                    {sourceLabel(entry, proven)}
                  </option>
                ))}
              </select>
              <button type="button" className="icon danger" aria-label={`Remove binding of ${target.join(".")}`} onClick={() => onChange(unbind(graph, path, index))}>
                ✕
              </button>
            </li>
          );
        })}
      </ul>
      <div className="add-binding">
        <label htmlFor={sourceId}>Read</label>
        <select id={sourceId} value={source} data-testid="new-binding-source" onChange={(event) => setSource(event.target.value)}>
          <option value="">choose a path in scope…</option>
          {readable.map((entry) => (
            <option key={keyOf(entry.source, entry.path)} value={keyOf(entry.source, entry.path)}>
              {sourceLabel(entry, proven)}
            </option>
          ))}
        </select>
        <label htmlFor={fieldId}>into field</label>
        <input id={fieldId} value={field} placeholder={chosen?.path[chosen.path.length - 1] ?? "field"} data-testid="new-binding-field" onChange={(event) => setField(event.target.value)} />
        <button
          type="button"
          disabled={!chosen}
          data-testid="add-binding"
          onClick={() => {
            if (!chosen) return;
            const name = field.trim() || chosen.path[chosen.path.length - 1] || "value";
            onChange(bindField(graph, path, name, chosen));
            setField("");
            setSource("");
          }}
        >
          Bind
        </button>
      </div>
    </section>
  );
}

export function WriteBindings({ graph, path, node, onChange }: Props) {
  const writes = Array.isArray(node.writeBindings) ? node.writeBindings : [];
  const results = resultPaths(node);
  const targets = fieldPaths(stateInScope(graph, path));
  const [result, setResult] = useState("");
  const [target, setTarget] = useState("");
  const resultId = useId();
  const targetId = useId();
  const chosen = results.find((entry) => keyOf(entry.channel, entry.path) === result);
  const typedTargets = chosen ? targets.filter((entry) => sameType(entry.type, chosen.type)) : targets;
  return (
    <section className="panel-section" aria-label="Write bindings">
      <h3>Writes into state</h3>
      <ul className="binding-list">
        {writes.map((write, index) => {
          if (!isObject(write)) return null;
          const value = isObject(write.value) ? write.value : {};
          const into = Array.isArray(write.target) ? write.target.join(".") : "?";
          return (
            <li key={index} data-testid="write-binding">
              {String(value.channel ?? "?")}.{Array.isArray(value.path) ? value.path.join(".") : ""} → state.{into}
              <button type="button" className="icon danger" aria-label={`Remove write into ${into}`} onClick={() => onChange(removeWrite(graph, path, index))}>
                ✕
              </button>
            </li>
          );
        })}
      </ul>
      {results.length === 0 ? (
        <p className="muted small">The result has no fields to write.</p>
      ) : (
        <div className="add-binding">
          <label htmlFor={resultId}>Write</label>
          <select id={resultId} value={result} onChange={(event) => setResult(event.target.value)}>
            <option value="">choose a result path…</option>
            {results.map((entry) => (
              <option key={keyOf(entry.channel, entry.path)} value={keyOf(entry.channel, entry.path)}>
                {entry.label}
              </option>
            ))}
          </select>
          <label htmlFor={targetId}>into</label>
          <select id={targetId} value={target} onChange={(event) => setTarget(event.target.value)}>
            <option value="">choose a state path…</option>
            {typedTargets.map((entry) => (
              <option key={entry.path.join(".")} value={entry.path.join(".")}>
                state.{entry.path.join(".")}: {typeSummary(entry.type)}
              </option>
            ))}
          </select>
          <button
            type="button"
            disabled={!chosen || !target}
            onClick={() => {
              if (!chosen || !target) return;
              onChange(addWrite(graph, path, chosen.channel, chosen.path, target.split(".")));
              setResult("");
              setTarget("");
            }}
          >
            Add write
          </button>
        </div>
      )}
    </section>
  );
}

/** The group's promoted state paths, chosen among its state's fields. */
export function Promotions({ graph, path, node, onChange, toggle }: Props & { toggle: (graph: unknown, path: DocPath, statePath: string[]) => Json }) {
  const promoted = new Set((Array.isArray(node.promotedStatePaths) ? node.promotedStatePaths : []).map((entry) => (Array.isArray(entry) ? entry.join(".") : "")));
  const fields = fieldPaths(getAt(graph, [...path, "state"]));
  return (
    <fieldset className="panel-section">
      <legend>Promoted to the enclosing state</legend>
      {fields.map((entry) => {
        const key = entry.path.join(".");
        return (
          <label key={key} className="check">
            <input type="checkbox" checked={promoted.has(key)} onChange={() => onChange(toggle(graph, path, entry.path))} /> {key}: {typeSummary(entry.type)}
          </label>
        );
      })}
    </fieldset>
  );
}
