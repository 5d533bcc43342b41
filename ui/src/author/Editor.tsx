// One profile in the editor: the toolbar (undo, redo, save, delete, JSON export and import),
// the run bar, the outline beside the canvas (a picture of the document, diagnostics pinned on
// its nodes), the selected node's panel, the Inputs and Outputs panels and the validation status.
import { useEffect, useMemo, useState } from "react";
import { profilesApi, type BuiltinWorker } from "../api/profiles";
import type { Diagnostic } from "../api/types";
import { Dialog } from "../app/Dialog";
import { navigate } from "../app/hooks";
import { GraphCanvas } from "../graph/GraphCanvas";
import { graphSpecModel } from "../graph/graphspec";
import { nodeHolding, pinsFor } from "../graph/pins";
import { idPath, isObject, type Json } from "./document";
import { InputsPanel, OutputsPanel } from "./IoPanels";
import { JsonView } from "./JsonView";
import { NodePanel } from "./NodePanel";
import { Outline } from "./Outline";
import { RunBar } from "./RunBar";
import type { ProfileEditor } from "./useProfileEditor";

export function Editor({ name, editor }: { name: string; editor: ProfileEditor }) {
  const { definition, report } = editor;
  const graph = definition.graph;
  const [selected, setSelected] = useState<string | undefined>();
  const [showJson, setShowJson] = useState(false);
  const [workers, setWorkers] = useState<BuiltinWorker[]>([]);
  const [confirmDelete, setConfirmDelete] = useState(false);
  useEffect(() => {
    profilesApi.workers().then(setWorkers, () => setWorkers([]));
  }, []);

  // Ctrl/Cmd+Z and Ctrl/Cmd+Shift+Z (or Ctrl+Y), outside text fields, which keep their own undo.
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      if (target && ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName)) return;
      if (!(event.ctrlKey || event.metaKey)) return;
      const key = event.key.toLowerCase();
      if (key === "z" && !event.shiftKey) editor.undo();
      else if ((key === "z" && event.shiftKey) || key === "y") editor.redo();
      else return;
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [editor]);

  const model = useMemo(() => graphSpecModel(graph), [graph]);
  const diagnostics: Diagnostic[] = report && report.status !== "unparseable" ? (report.diagnostics ?? []) : [];
  const pins = useMemo(() => pinsFor(model, diagnostics), [model, diagnostics]);
  const outlinePins = useMemo(() => {
    // The outline also lists groups the canvas draws inline (the root): pin by location too.
    const byLocation = new Map(pins);
    for (const diagnostic of diagnostics) {
      if (!diagnostic.at || nodeHolding(model, diagnostic.at)) continue;
      const list = byLocation.get("root") ?? [];
      byLocation.set("root", [...list, diagnostic]);
    }
    return byLocation;
  }, [pins, diagnostics, model]);
  const setGraph = (next: Json) => editor.setGraph(next);
  const status = report?.status ?? "checking";

  return (
    <div className="editor" data-testid="editor" data-profile={name} data-dirty={editor.dirty ? "true" : "false"}>
      <div className="toolbar editor-toolbar">
        <h1>{name}</h1>
        <span className="muted small" data-testid="revision">
          {editor.revision === undefined ? "not saved yet" : `revision ${editor.revision}`}
          {editor.dirty ? " · unsaved changes" : ""}
        </span>
        <button type="button" onClick={editor.undo} disabled={!editor.canUndo} data-testid="undo" aria-keyshortcuts="Control+Z">
          Undo
        </button>
        <button type="button" onClick={editor.redo} disabled={!editor.canRedo} data-testid="redo" aria-keyshortcuts="Control+Shift+Z">
          Redo
        </button>
        <button type="button" className="primary" onClick={() => void editor.save()} disabled={editor.saving || !editor.dirty} data-testid="save">
          {editor.saving ? "Saving…" : "Save profile"}
        </button>
        <button type="button" onClick={() => setShowJson((shown) => !shown)} aria-pressed={showJson} data-testid="toggle-json">
          JSON
        </button>
        <button type="button" className="danger" data-testid="delete-profile" onClick={() => setConfirmDelete(true)}>
          Delete
        </button>
        <span className={`validation-status status ${status === "verified" ? "status-ok" : status === "checking" ? "status-muted" : "status-bad"}`} data-testid="validation-status" data-status={status}>
          {status === "verified" ? "✓ verified" : status === "checking" ? "checking…" : `needs attention: ${diagnostics.length || 1} problem(s)`}
        </span>
      </div>
      {confirmDelete && (
        <Dialog
          titleId="delete-profile-title"
          title={`Delete the profile "${name}"?`}
          onCancel={() => setConfirmDelete(false)}
          actions={
            <button
              type="button"
              className="danger"
              data-testid="confirm-delete"
              onClick={() => {
                setConfirmDelete(false);
                void editor.remove().then((done) => done && navigate("/profiles"));
              }}
            >
              Delete
            </button>
          }
        >
          <p>{editor.revision === undefined ? "Its unsaved draft is dropped." : `Revision ${editor.revision} and its unsaved changes are deleted; runs started from it stay.`}</p>
        </Dialog>
      )}
      {editor.restored && (
        <div className="warn-box" data-testid="draft-restored">
          Unsaved changes from earlier were restored.{" "}
          <button type="button" onClick={() => void editor.reload()}>
            Discard them
          </button>
        </div>
      )}
      {editor.saveProblem && (
        <div className="error-box" role="alert" data-testid="save-error" data-stale={editor.saveProblem.stale ? "true" : "false"}>
          {editor.saveProblem.message}{" "}
          {editor.saveProblem.stale && (
            <button type="button" onClick={() => void editor.reload()} data-testid="reload-profile">
              Reload the saved profile
            </button>
          )}
        </div>
      )}
      <RunBar name={name} definition={definition} apply={editor.apply} save={editor.save} dirty={editor.dirty} valid={status === "verified"} />
      {showJson && <JsonView graph={graph} onImport={setGraph} />}
      <div className="editor-grid">
        <div className="editor-side">
          <Outline graph={graph} selected={selected} onSelect={setSelected} onChange={setGraph} pins={outlinePins} />
          <InputsPanel graph={graph} onChange={setGraph} />
          <OutputsPanel graph={graph} onSelect={setSelected} />
        </div>
        <section className="editor-canvas" aria-label="Graph picture">
          {model.nodes.size > 0 ? (
            <GraphCanvas model={model} pins={pins} selected={selected} onSelect={(id) => id && setSelected(id)} keepCollapsed />
          ) : (
            <p className="empty">An empty graph: add a step to the root sequence in the outline.</p>
          )}
          {report?.status === "unparseable" && (
            <div className="error-box" data-testid="unparseable">
              {report.error}
            </div>
          )}
          {diagnostics.length > 0 && (
            <ol className="diagnostics editor-diagnostics" data-testid="diagnostics">
              {diagnostics.map((diagnostic, index) => (
                <li key={index} data-testid="diagnostic" data-code={diagnostic.code}>
                  <button type="button" className="link" onClick={() => diagnostic.at && setSelected(nodeHolding(model, diagnostic.at) ?? diagnostic.at)}>
                    <strong>{diagnostic.code}</strong>: {diagnostic.message}
                  </button>
                </li>
              ))}
            </ol>
          )}
        </section>
        <aside className="editor-panel" aria-label="Selected node">
          {selected && isObject(graph) ? (
            <NodePanel graph={graph} path={idPath(selected)} workers={workers} diagnostics={pins.get(selected) ?? []} onChange={setGraph} />
          ) : (
            <p className="muted">Select a node in the outline or on the canvas to edit it.</p>
          )}
        </aside>
      </div>
    </div>
  );
}
