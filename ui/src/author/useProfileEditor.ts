// The state of one profile being edited: the definition with its undo history, the revision it
// was read at, the draft kept in local storage, saving (refused when another save came first),
// deleting, and live validation of its graph through the run API.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, ApiError } from "../api/client";
import { profilesApi, type ProfileDefinition } from "../api/profiles";
import type { ValidationReport } from "../api/types";
import { describeFailure } from "../run/errors";
import { dropDraft, readDraft, writeDraft } from "./drafts";
import { commit, redo, startHistory, undo, type History } from "./history";

export type LoadState = "loading" | "ready" | "missing" | "failed";

export interface SaveProblem {
  message: string;
  /** The profile was saved elsewhere since this tab read it. */
  stale: boolean;
}

const VALIDATE_AFTER_MS = 350;

/** The graph a definition edits: its own, else its template's (read once). */
async function editableDefinition(definition: ProfileDefinition): Promise<ProfileDefinition> {
  if (definition.graph !== undefined || !definition.template) return definition;
  const template = await api.template(definition.template.name);
  const { template: _template, ...rest } = definition;
  return { ...rest, graph: template.graph };
}

export function useProfileEditor(name: string) {
  const [load, setLoad] = useState<LoadState>("loading");
  const [loadError, setLoadError] = useState<string | undefined>();
  const [history, setHistory] = useState<History<ProfileDefinition>>(() => startHistory({}));
  const [revision, setRevision] = useState<number | undefined>();
  const [saved, setSaved] = useState<string | undefined>();
  const [restored, setRestored] = useState(false);
  const [saving, setSaving] = useState(false);
  const [saveProblem, setSaveProblem] = useState<SaveProblem | undefined>();
  const [report, setReport] = useState<ValidationReport | undefined>();
  const definition = history.present;

  const open = useCallback(async () => {
    setLoad("loading");
    setSaveProblem(undefined);
    const draft = readDraft(name);
    if (draft && draft.baseRevision === undefined) {
      // A profile made in this browser and never saved: nothing to read from the server.
      setRevision(undefined);
      setSaved(undefined);
      setHistory(startHistory(draft.definition));
      setRestored(false);
      setLoad("ready");
      return;
    }
    try {
      const profile = await profilesApi.get(name).catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 404) return undefined;
        throw error;
      });
      const base = profile ? await editableDefinition(profile.definition) : undefined;
      setRevision(profile?.revision);
      setSaved(profile ? JSON.stringify(profile.definition) : undefined);
      if (draft) {
        setHistory(startHistory(draft.definition));
        setRestored(profile !== undefined);
        setLoad("ready");
      } else if (base) {
        setHistory(startHistory(base));
        setRestored(false);
        setLoad("ready");
      } else {
        setLoad("missing");
      }
    } catch (error) {
      setLoadError(describeFailure(error));
      setLoad("failed");
    }
  }, [name]);

  useEffect(() => {
    void open();
  }, [open]);

  const dirty = load === "ready" && JSON.stringify(definition) !== saved;
  const baseRevision = useRef<number | undefined>(undefined);
  baseRevision.current = readDraft(name)?.baseRevision ?? revision;

  // Every change is kept as a draft at once, so leaving the page loses nothing.
  useEffect(() => {
    if (load !== "ready") return;
    if (dirty) writeDraft(name, { definition, baseRevision: baseRevision.current, savedAtMs: Date.now() });
    else dropDraft(name);
  }, [definition, dirty, load, name]);

  const apply = useCallback((change: (current: ProfileDefinition) => ProfileDefinition) => {
    setHistory((current) => commit(current, change(current.present)));
  }, []);
  const setGraph = useCallback((graph: unknown) => apply((current) => ({ ...current, graph })), [apply]);

  const save = useCallback(async (): Promise<boolean> => {
    setSaving(true);
    setSaveProblem(undefined);
    try {
      const answer = await profilesApi.save(name, definition, baseRevision.current);
      setRevision(answer.revision);
      setSaved(JSON.stringify(definition));
      setRestored(false);
      dropDraft(name);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.code === "profile.revision_conflict") {
        const details = (error.details ?? {}) as { currentRevision?: number | null; expectedRevision?: number | null };
        setSaveProblem({
          stale: true,
          message: `Not saved: "${name}" was saved elsewhere since this tab read it (it is at revision ${details.currentRevision ?? "?"}, this tab edited revision ${details.expectedRevision ?? "none"}). Reload it to see that version, or save under another name.`,
        });
      } else {
        setSaveProblem({ stale: false, message: `Not saved: ${describeFailure(error)}` });
      }
      return false;
    } finally {
      setSaving(false);
    }
  }, [definition, name]);

  /** Drops the draft and reads the saved profile again. */
  const reload = useCallback(async () => {
    dropDraft(name);
    await open();
  }, [name, open]);

  const remove = useCallback(async (): Promise<boolean> => {
    if (revision === undefined) {
      dropDraft(name);
      return true;
    }
    try {
      await profilesApi.remove(name, revision);
      dropDraft(name);
      return true;
    } catch (error) {
      setSaveProblem({ stale: error instanceof ApiError && error.status === 409, message: `Not deleted: ${describeFailure(error)}` });
      return false;
    }
  }, [name, revision]);

  // Live validation of the graph, a moment after the last change.
  const graph = definition.graph;
  useEffect(() => {
    if (load !== "ready" || graph === undefined) return;
    let cancelled = false;
    const timer = setTimeout(() => {
      api
        .validate(graph, "graphspec")
        .then((answer) => !cancelled && setReport(answer))
        .catch((error: unknown) => !cancelled && setReport({ status: "unparseable", error: describeFailure(error) }));
    }, VALIDATE_AFTER_MS);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [graph, load]);

  return useMemo(
    () => ({
      load,
      loadError,
      definition,
      revision,
      dirty,
      restored,
      saving,
      saveProblem,
      report,
      canUndo: history.past.length > 0,
      canRedo: history.future.length > 0,
      undo: () => setHistory(undo),
      redo: () => setHistory(redo),
      apply,
      setGraph,
      save,
      reload,
      remove,
    }),
    [load, loadError, definition, revision, dirty, restored, saving, saveProblem, report, history, apply, setGraph, save, reload, remove],
  );
}

export type ProfileEditor = ReturnType<typeof useProfileEditor>;
