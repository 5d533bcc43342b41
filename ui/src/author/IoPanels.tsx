// The Inputs panel (the run input's fields, added to every group's state so nodes can read
// them) and the Outputs panel (each completion node with the fields its output binds).
import { useId, useState } from "react";
import { typeSummary } from "../graph/graphspec";
import { addInputField, addStateField, fieldPaths, removeInputField } from "./bindings";
import { isObject, pathId, walkNodes, type Json } from "./document";

const TYPES: Record<string, unknown> = {
  string: { kind: "string" },
  integer: { kind: "integer" },
  number: { kind: "number" },
  boolean: { kind: "boolean" },
  "list of strings": { kind: "array", items: { kind: "string" } },
};

interface Props {
  graph: unknown;
  onChange: (graph: Json) => void;
  onSelect: (id: string) => void;
}

export function InputsPanel({ graph, onChange }: Omit<Props, "onSelect">) {
  const input = isObject(graph) ? graph.initialInput : undefined;
  const fields = isObject(input) && isObject(input.fields) ? Object.entries(input.fields) : [];
  const [name, setName] = useState("");
  const [type, setType] = useState("string");
  const [required, setRequired] = useState(true);
  const [stateOnly, setStateOnly] = useState(false);
  const nameId = useId();
  const typeId = useId();
  return (
    <section className="io-panel" aria-label="Inputs" data-testid="inputs-panel">
      <h3>Inputs</h3>
      <ul className="binding-list">
        {fields.map(([field, spec]) => (
          <li key={field} data-testid="input-field">
            {field}: {typeSummary(isObject(spec) ? spec.type : undefined)}
            {isObject(spec) && spec.required === false ? " (optional)" : ""}
            <button type="button" className="icon danger" aria-label={`Remove input ${field}`} onClick={() => onChange(removeInputField(graph, field))}>
              ✕
            </button>
          </li>
        ))}
      </ul>
      <div className="add-binding">
        <label htmlFor={nameId}>Field</label>
        <input id={nameId} value={name} data-testid="new-input-name" onChange={(event) => setName(event.target.value)} />
        <label htmlFor={typeId}>type</label>
        <select id={typeId} value={type} onChange={(event) => setType(event.target.value)}>
          {Object.keys(TYPES).map((choice) => (
            <option key={choice}>{choice}</option>
          ))}
        </select>
        <label className="check">
          <input type="checkbox" checked={required} onChange={(event) => setRequired(event.target.checked)} /> required
        </label>
        <label className="check">
          <input type="checkbox" checked={stateOnly} onChange={(event) => setStateOnly(event.target.checked)} /> state only
        </label>
        <button
          type="button"
          disabled={!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)}
          data-testid="add-input"
          onClick={() => {
            const chosen = TYPES[type];
            onChange(stateOnly ? addStateField(graph, name, chosen, required) : addInputField(graph, name, chosen, required));
            setName("");
          }}
        >
          Add
        </button>
      </div>
      <p className="muted small">A field is added to the run input and to every group's state; "state only" adds a state field nodes write into.</p>
    </section>
  );
}

export function OutputsPanel({ graph, onSelect }: Omit<Props, "onChange">) {
  const completions: { id: string; name: string; fields: string[] }[] = [];
  walkNodes(graph, (node, path) => {
    if (node.kind !== "succeed") return;
    completions.push({
      id: pathId(path),
      name: String(node.name ?? "?"),
      fields: fieldPaths(node.output).map((entry) => `${entry.path.join(".")}: ${typeSummary(entry.type)}`),
    });
  });
  return (
    <section className="io-panel" aria-label="Outputs" data-testid="outputs-panel">
      <h3>Outputs</h3>
      {completions.length === 0 && <p className="muted small">No completion node: add one to say what a run returns.</p>}
      <ul className="binding-list">
        {completions.map((completion) => (
          <li key={completion.id}>
            <button type="button" className="link" onClick={() => onSelect(completion.id)}>
              {completion.name}
            </button>{" "}
            <span className="small">{completion.fields.length > 0 ? completion.fields.join(", ") : "null"}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
