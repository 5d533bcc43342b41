// Starting a run of the profile: its input (saved as the profile's default input, which a save
// is admitted with), where it works and its title, and the runtime settings (harness, provider,
// model, effort, budget, a command per node) saved as the profile's plan. Starting saves
// pending changes first; then `trellis ui` starts the saved profile, while a team server is sent
// the run itself (graph, input and plan as saved, a fresh submission key); the run opens in the
// run view.
import { useId, useMemo, useState } from "react";
import { profilesApi, type ProfileDefinition } from "../api/profiles";
import { onTeamServer } from "../api/server";
import { navigate } from "../app/hooks";
import { describeFailure } from "../run/errors";
import { isObject, walkNodes } from "./document";
import { CommitField, SelectField } from "./fields";
import { EFFORTS, HARNESSES, PROVIDERS, readSettings, writePlan, type Settings } from "./plan";
import { newSubmissionKey, teamSubmission } from "./submission";

interface Props {
  name: string;
  definition: ProfileDefinition;
  apply: (change: (current: ProfileDefinition) => ProfileDefinition) => void;
  /** Saves pending changes; false when refused. */
  save: () => Promise<boolean>;
  dirty: boolean;
  valid: boolean;
}

/** The executables of a graph, by name, in document order. */
export function executableNames(graph: unknown): string[] {
  const names: string[] = [];
  walkNodes(graph, (node) => {
    if ((node.kind === "step" || node.kind === "verifier") && typeof node.name === "string") names.push(node.name);
  });
  return names;
}

const choices = (values: string[], empty: string) => values.map((value) => ({ value, label: value || empty }));

export function RunBar({ name, definition, apply, save, dirty, valid }: Props) {
  const graph = definition.graph;
  const executables = useMemo(() => executableNames(graph), [graph]);
  const settings = readSettings(definition.plan, executables);
  const inputFields = useMemo(() => {
    const input = isObject(graph) ? graph.initialInput : undefined;
    return isObject(input) && isObject(input.fields) ? Object.entries(input.fields) : [];
  }, [graph]);
  const values: Record<string, unknown> = isObject(definition.input) ? definition.input : {};
  const [inputError, setInputError] = useState<string | undefined>();
  const [workspace, setWorkspace] = useState("");
  const [title, setTitle] = useState("");
  const [starting, setStarting] = useState(false);
  const [failure, setFailure] = useState<string | undefined>();
  const workspaceId = useId();
  const titleId = useId();
  const [team] = useState(onTeamServer);

  const change = (patch: Partial<Settings>) => {
    const next = { ...settings, ...patch };
    apply((current) => {
      const plan = writePlan(next, executableNames(current.graph), current.plan);
      const { plan: _old, ...rest } = current;
      return plan ? { ...rest, plan } : rest;
    });
  };

  /** Sets one field of the default input: text for a string field, else JSON. */
  const setInput = (field: string, kind: unknown, text: string) => {
    let value: unknown = text;
    if (kind !== "string" && text !== "") {
      try {
        value = JSON.parse(text) as unknown;
      } catch {
        setInputError(`${field} is not JSON`);
        return;
      }
    }
    setInputError(undefined);
    apply((current) => {
      const input = { ...(isObject(current.input) ? current.input : {}) };
      if (text === "") delete input[field];
      else input[field] = value;
      const { input: _old, ...rest } = current;
      return Object.keys(input).length > 0 ? { ...rest, input } : rest;
    });
  };

  const start = async () => {
    setFailure(undefined);
    setStarting(true);
    try {
      if (dirty && !(await save())) return;
      const answer = team
        ? await profilesApi.submit(teamSubmission(definition, newSubmissionKey(), title.trim() || undefined, workspace.trim() || undefined))
        : await profilesApi.start({
            profile: name,
            ...(title.trim() ? { title: title.trim() } : {}),
            ...(workspace.trim() ? { workspace: workspace.trim() } : {}),
          });
      navigate(`/runs/${answer.runId}`);
    } catch (error) {
      setFailure(`Not started: ${describeFailure(error)}`);
    } finally {
      setStarting(false);
    }
  };

  return (
    <section className="run-bar" aria-label="Run" data-testid="run-bar">
      <div className="run-inputs">
        {inputFields.map(([field, spec]) => {
          const kind = isObject(spec) && isObject(spec.type) ? spec.type.kind : "string";
          const value = values[field];
          return (
            <CommitField
              key={field}
              label={`Input: ${field}${kind === "string" ? "" : " (JSON)"}`}
              value={value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value)}
              testId={`run-input-${field}`}
              onCommit={(text) => setInput(field, kind, text)}
            />
          );
        })}
        <div className="form-row">
          <label htmlFor={workspaceId}>
            {team ? "Workspace (a name under the server's workspaces; empty: a new one)" : "Workspace (absolute; empty: where trellis ui runs)"}
          </label>
          <input id={workspaceId} value={workspace} data-testid="run-workspace" onChange={(event) => setWorkspace(event.target.value)} />
        </div>
        <div className="form-row">
          <label htmlFor={titleId}>Title</label>
          <input id={titleId} value={title} data-testid="run-title" onChange={(event) => setTitle(event.target.value)} />
        </div>
        <button type="button" className="primary" disabled={starting || !valid} data-testid="start-run" onClick={() => void start()}>
          {starting ? "Starting…" : dirty ? "Save and start" : "Start run"}
        </button>
      </div>
      <details className="run-settings" data-testid="run-settings">
        <summary>Runtime settings</summary>
        <div className="settings-grid">
          <SelectField label="Harness" value={settings.harness} options={choices(["", ...HARNESSES], "detect")} onChange={(harness) => change({ harness })} testId="setting-harness" />
          <SelectField label="Provider" value={settings.provider} options={choices(["", ...PROVIDERS], "the harness's own")} onChange={(provider) => change({ provider })} />
          <CommitField label="Model" value={settings.model} onCommit={(model) => change({ model })} placeholder="the CLI's default" />
          <SelectField label="Effort" value={settings.effort} options={choices(EFFORTS, "default")} onChange={(effort) => change({ effort })} />
          <CommitField label="Budget: input tokens" type="number" value={settings.inputTokens} onCommit={(inputTokens) => change({ inputTokens })} />
          <CommitField label="Budget: output tokens" type="number" value={settings.outputTokens} onCommit={(outputTokens) => change({ outputTokens })} />
          <CommitField label="Budget: cost (USD)" type="number" value={settings.costUsd} onCommit={(costUsd) => change({ costUsd })} />
        </div>
        <h3>Command bindings</h3>
        <p className="muted small">A node given a command runs it with its input as JSON on stdin; the others run on the agent lane above.</p>
        {executables.map((node) => (
          <CommitField
            key={node}
            label={`Command for ${node}`}
            value={settings.commands[node] ?? ""}
            testId={`command-${node}`}
            placeholder="agent"
            onCommit={(line) => change({ commands: { ...settings.commands, [node]: line } })}
          />
        ))}
      </details>
      {inputError && <span className="error-text">{inputError}</span>}
      {failure && (
        <div className="error-box" role="alert" data-testid="start-error">
          {failure}
        </div>
      )}
    </section>
  );
}
