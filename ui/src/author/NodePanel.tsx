// The selected node's properties: name, worker (from the built-in registry, or a command
// worker), instructions, attempts and timeout; bindings and writes; a group's promotions, round
// and item limits, join; a choice's guards (as JSON) and its otherwise; a terminal's reason.
import { useEffect, useId, useState } from "react";
import type { BuiltinWorker } from "../api/profiles";
import type { Diagnostic } from "../api/types";
import { guardSummary } from "../graph/graphspec";
import { togglePromotion, fieldPaths } from "./bindings";
import { InputBindings, Promotions, WriteBindings } from "./BindingsEditor";
import { getAt, isObject, newNode, freshName, renameNode, setAt, stateInScope, type DocPath, type Json } from "./document";
import { CommitField, SelectField } from "./fields";

interface Props {
  graph: unknown;
  path: DocPath;
  workers: BuiltinWorker[];
  diagnostics: Diagnostic[];
  onChange: (graph: Json) => void;
}

const positive = (text: string): number | undefined => {
  const value = Number(text);
  return Number.isInteger(value) && value > 0 ? value : undefined;
};

export function NodePanel({ graph, path, workers, diagnostics, onChange }: Props) {
  const node = getAt(graph, path);
  if (!isObject(node)) return <p className="muted">Select a node in the outline or on the canvas.</p>;
  const kind = String(node.kind ?? "?");
  const name = String(node.name ?? "");
  const set = (key: string, value: unknown) => onChange(setAt(graph, [...path, key], value));
  const executable = kind === "step" || kind === "verifier";
  const worker = String(node.worker ?? "");
  const workerOptions = [
    ...workers.map((entry) => ({ value: entry.worker, label: `${entry.worker} (${entry.kind})` })),
    { value: `command.${name}@1`, label: `command.${name}@1 (command)` },
  ];
  if (!workerOptions.some((option) => option.value === worker)) workerOptions.unshift({ value: worker, label: worker });

  return (
    <div className="node-panel" data-testid="node-panel" data-node={name}>
      <h2>
        {kind} <span className="muted">{name}</span>
      </h2>
      {diagnostics.length > 0 && (
        <ul className="diagnostics node-diagnostics" data-testid="node-diagnostics">
          {diagnostics.map((diagnostic, index) => (
            <li key={index}>
              <strong>{diagnostic.code}</strong>: {diagnostic.message}
            </li>
          ))}
        </ul>
      )}
      <CommitField label="Name" value={name} testId="node-name" onCommit={(value) => value.trim() && onChange(renameNode(graph, path, value.trim()))} />
      {executable && (
        <>
          <SelectField label="Worker" value={worker} options={workerOptions} testId="node-worker" onChange={(value) => set("worker", value)} />
          <CommitField label="Instructions" multiline value={typeof node.instructions === "string" ? node.instructions : ""} testId="node-instructions" onCommit={(value) => set("instructions", value)} />
          <CommitField label="Attempts" type="number" value={String(node.attempts ?? 1)} onCommit={(value) => positive(value) && set("attempts", positive(value))} />
          <CommitField
            label="Timeout (ms, empty: none)"
            type="number"
            value={node.timeoutMs === undefined ? "" : String(node.timeoutMs)}
            onCommit={(value) => {
              if (value.trim() === "") {
                const { timeoutMs: _dropped, ...rest } = node;
                onChange(setAt(graph, path, rest));
              } else if (positive(value)) set("timeoutMs", positive(value));
            }}
          />
          {kind === "verifier" && isObject(node.signals) && (
            <p className="small">
              Signals:{" "}
              {Object.entries(node.signals)
                .map(([signal, labels]) => `${signal} ∈ {${Array.isArray(labels) ? labels.join(", ") : ""}}`)
                .join("; ")}
            </p>
          )}
          <InputBindings graph={graph} path={path} node={node} onChange={onChange} />
          <WriteBindings graph={graph} path={path} node={node} onChange={onChange} />
        </>
      )}
      {kind === "succeed" && <InputBindings graph={graph} path={path} node={node} onChange={onChange} />}
      {kind === "fail" && <CommitField label="Reason" value={String(node.reason ?? "")} onCommit={(value) => value.trim() && set("reason", value.trim())} />}
      {kind === "loop" && <CommitField label="At most rounds" type="number" value={String(node.maxIterations ?? "")} onCommit={(value) => positive(value) && set("maxIterations", positive(value))} />}
      {kind === "map" && <MapSettings graph={graph} path={path} node={node} onChange={onChange} />}
      {kind === "par" && (
        <SelectField
          label="Join"
          value={isObject(node.join) ? String(node.join.kind) : "all"}
          options={["all", "any"].map((value) => ({ value, label: value }))}
          onChange={(value) => set("join", { kind: value })}
        />
      )}
      {kind === "choice" && <ChoiceSettings graph={graph} path={path} node={node} onChange={onChange} />}
      {isObject(node.state) && <Promotions graph={graph} path={path} node={node} onChange={onChange} toggle={togglePromotion} />}
    </div>
  );
}

function MapSettings({ graph, path, node, onChange }: { graph: unknown; path: DocPath; node: Json; onChange: (graph: Json) => void }) {
  const lists = fieldPaths(stateInScope(graph, path)).filter((entry) => isObject(entry.type) && entry.type.kind === "array");
  const over = isObject(node.over) && Array.isArray(node.over.path) ? node.over.path.join(".") : "";
  const options = lists.map((entry) => ({ value: entry.path.join("."), label: `state.${entry.path.join(".")}` }));
  if (!options.some((option) => option.value === over)) options.unshift({ value: over, label: `state.${over} (not a list in scope)` });
  return (
    <>
      <SelectField label="Each item of" value={over} options={options} onChange={(value) => onChange(setAt(graph, [...path, "over"], { source: "state", path: value.split(".") }))} />
      <CommitField label="At most items" type="number" value={String(node.maxItems ?? "")} onCommit={(value) => positive(value) && onChange(setAt(graph, [...path, "maxItems"], positive(value)))} />
    </>
  );
}

function GuardEditor({ value, onCommit, label }: { value: unknown; onCommit: (guard: unknown) => void; label: string }) {
  const text = JSON.stringify(value, null, 1);
  const [draft, setDraft] = useState(text);
  const [error, setError] = useState<string | undefined>();
  const id = useId();
  useEffect(() => setDraft(text), [text]);
  return (
    <div className="form-row">
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        rows={4}
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
        onBlur={() => {
          try {
            const parsed = JSON.parse(draft) as unknown;
            setError(undefined);
            if (draft !== text) onCommit(parsed);
          } catch (failure) {
            setError(failure instanceof Error ? failure.message : String(failure));
          }
        }}
      />
      {error && <span className="error-text">not JSON: {error}</span>}
    </div>
  );
}

function ChoiceSettings({ graph, path, node, onChange }: { graph: unknown; path: DocPath; node: Json; onChange: (graph: Json) => void }) {
  const branches = Array.isArray(node.branches) ? node.branches : [];
  return (
    <section className="panel-section" aria-label="Branches">
      <h3>Branches, first match wins</h3>
      <ol>
        {branches.map((branch, index) =>
          isObject(branch) ? (
            <li key={index}>
              <span className="small">{guardSummary(branch.when)}</span>
              <GuardEditor label={`Guard of branch ${index + 1}`} value={branch.when} onCommit={(guard) => onChange(setAt(graph, [...path, "branches", index, "when"], guard))} />
            </li>
          ) : null,
        )}
      </ol>
      {isObject(node.otherwise) ? (
        <button type="button" onClick={() => onChange(setAt(graph, [...path, "otherwise"], null))}>
          Remove otherwise
        </button>
      ) : (
        <button
          type="button"
          onClick={() => onChange(setAt(graph, [...path, "otherwise"], newNode(graph, "fail", freshName(graph, `${String(node.name)}_otherwise`), node.state)))}
        >
          Add otherwise
        </button>
      )}
    </section>
  );
}
