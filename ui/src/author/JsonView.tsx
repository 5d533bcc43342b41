// The document as JSON: export (shown, and downloadable as a file) and import (a file, or text
// pasted here). The document is kept as read, unknown fields included, so export after import
// gives back the same document.
import { useEffect, useId, useState } from "react";

interface Props {
  graph: unknown;
  onImport: (graph: Record<string, unknown>) => void;
}

export const exportText = (graph: unknown): string => `${JSON.stringify(graph, null, 2)}\n`;

/** A document read from text: an object, or why not. */
export function importText(text: string): { graph?: Record<string, unknown>; error?: string } {
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { error: "a GraphSpec document is a JSON object" };
    return { graph: parsed as Record<string, unknown> };
  } catch (error) {
    return { error: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

export function JsonView({ graph, onImport }: Props) {
  const exported = exportText(graph);
  const [text, setText] = useState(exported);
  const [error, setError] = useState<string | undefined>();
  const id = useId();
  useEffect(() => setText(exported), [exported]);
  const load = (source: string) => {
    const read = importText(source);
    setError(read.error);
    if (read.graph) onImport(read.graph);
  };
  const download = () => {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([exported], { type: "application/json" }));
    link.download = "graph.json";
    link.click();
    URL.revokeObjectURL(link.href);
  };
  return (
    <section className="json-view" aria-label="Document JSON" data-testid="json-view">
      <label htmlFor={id}>GraphSpec document (export, or paste one and import it)</label>
      <textarea id={id} spellCheck={false} value={text} data-testid="json-text" onChange={(event) => setText(event.target.value)} />
      <div className="toolbar">
        <button type="button" onClick={download} data-testid="export-json">
          Download
        </button>
        <button type="button" onClick={() => load(text)} disabled={text === exported} data-testid="import-text">
          Import the text above
        </button>
        <label className="file-button">
          Import a file…
          <input type="file" accept=".json,application/json" data-testid="import-file" onChange={(event) => void event.target.files?.[0]?.text().then(load)} />
        </label>
        {error && (
          <span className="error-text" role="alert">
            {error}
          </span>
        )}
      </div>
    </section>
  );
}
