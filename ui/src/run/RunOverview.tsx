// The run at a glance, above its graph: what it was given, how it ended (result and cause) and
// what it produced.
import type { RunGraph, TerminalResult } from "../api/types";
import { prettyJson } from "./format";

export interface RunOverviewProps {
  graph: RunGraph;
  result?: TerminalResult;
  cause: string[];
  live: boolean;
}

/** A value in one line for the summary, whole in the open details. */
function oneLine(value: unknown, limit = 140): string {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? "";
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

/** The input a person wrote, when the run's input is `{task: "…"}`-like. */
function headline(value: unknown): unknown {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    const first = entries[0];
    if (entries.length === 1 && first && typeof first[1] === "string") return first[1];
  }
  return value;
}

function Value({ label, value, testId }: { label: string; value: unknown; testId: string }) {
  return (
    <details className="overview-value" data-testid={testId}>
      <summary>
        <span className="overview-label">{label}</span>{" "}
        <span className="overview-line" title={oneLine(headline(value), 2000)}>
          {oneLine(headline(value))}
        </span>
      </summary>
      <pre className="json">{prettyJson(value)}</pre>
    </details>
  );
}

export function RunOverview({ graph, result, cause, live }: RunOverviewProps) {
  const output = result?.status === "succeeded" ? result.output : undefined;
  return (
    <section className="run-overview" aria-label="Run overview" data-testid="run-overview">
      {graph.input !== undefined ? (
        <Value label="Input" value={graph.input} testId="overview-input" />
      ) : (
        <p className="muted small">No input recorded.</p>
      )}
      <div className="overview-result" data-testid="overview-result">
        <span className="overview-label">Result</span>{" "}
        {result ? (
          result.status === "succeeded" ? (
            <strong className="state-succeeded">succeeded</strong>
          ) : (
            <strong className="state-failed">{result.reason === "force_stopped" ? "force-stopped" : `failed: ${result.reason}`}</strong>
          )
        ) : (
          <span className="muted">{live ? "still running" : "none recorded"}</span>
        )}
        {cause.length > 0 && (
          <ul className="run-cause" data-testid="run-cause">
            {cause.map((line) => (
              <li key={line} title={line}>
                {line}
              </li>
            ))}
          </ul>
        )}
      </div>
      {output !== undefined && <Value label="Output" value={output} testId="overview-output" />}
    </section>
  );
}
