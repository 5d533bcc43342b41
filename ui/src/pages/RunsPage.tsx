// The Runs page: every run in the ledger, newest first, kept live over SSE; filter by status and
// search by title.
import { useEffect, useMemo, useState } from "react";
import { describeFailure } from "../run/errors";
import { api, streamUrls } from "../api/client";
import { runSummary } from "../api/normalize";
import { subscribe } from "../api/stream";
import type { RunSummary, SkippedRun } from "../api/types";
import { navigate, useNow } from "../app/hooks";
import { formatCost, formatDuration, formatTime, formatTokens, isLive, statusTone } from "../run/format";

const STATUS_FILTERS = ["all", "running", "succeeded", "failed", "force_stopped"];

function matches(run: RunSummary, status: string, search: string): boolean {
  if (status !== "all" && run.status !== status) return false;
  if (search && !run.title.toLowerCase().includes(search.toLowerCase())) return false;
  return true;
}

export function StatusBadge({ status }: { status: string | undefined }) {
  return (
    <span className={`status status-${statusTone(status)}`} data-testid="run-status">
      {status?.replace(/_/g, "-") ?? "unknown"}
    </span>
  );
}

export function RunsPage() {
  const [runs, setRuns] = useState<Map<string, RunSummary>>(new Map());
  const [status, setStatus] = useState("all");
  const [search, setSearch] = useState("");
  const [error, setError] = useState<string | undefined>();
  const [skipped, setSkipped] = useState<SkippedRun[]>([]);
  const [connected, setConnected] = useState(false);
  const now = useNow(1000);

  useEffect(() => {
    const controller = new AbortController();
    const timer = setTimeout(() => {
      api
        .listRuns(
          { status: status === "all" ? undefined : status, q: search || undefined, limit: 500 },
          controller.signal,
        )
        .then((answer) => {
          setRuns((current) => {
            // Keep runs that arrived over SSE meanwhile; the listing is the base.
            const next = new Map(answer.runs.map((run) => [run.runId, run]));
            for (const [id, run] of current) if (!next.has(id) && matches(run, status, search)) next.set(id, run);
            return next;
          });
          setSkipped(answer.skipped);
          setError(undefined);
        })
        .catch((failure: unknown) => {
          if (!controller.signal.aborted) setError(describeFailure(failure));
        });
    }, 150);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [status, search]);

  useEffect(() => {
    const subscription = subscribe<unknown>(
      { url: () => streamUrls.runs(), eventNames: ["run"] },
      {
        onEvent: (raw) => {
          const run = runSummary(raw);
          setRuns((current) => new Map(current).set(run.runId, run));
        },
        onStateChange: setConnected,
      },
    );
    return () => subscription.close();
  }, []);

  const shown = useMemo(
    () =>
      [...runs.values()]
        .filter((run) => matches(run, status, search))
        .sort((a, b) => b.startedAtMs - a.startedAtMs),
    [runs, status, search],
  );

  return (
    <div className="page runs-page">
      <div className="toolbar">
        <h1>Runs</h1>
        <input
          type="search"
          placeholder="Search titles"
          aria-label="Search runs by title"
          value={search}
          onChange={(event) => setSearch(event.target.value)}
        />
        <select aria-label="Filter by status" value={status} onChange={(event) => setStatus(event.target.value)}>
          {STATUS_FILTERS.map((name) => (
            <option key={name} value={name}>
              {name === "all" ? "all statuses" : name}
            </option>
          ))}
        </select>
        <span className={`live-dot ${connected ? "on" : "off"}`} title={connected ? "live" : "reconnecting"}>
          {connected ? "live" : "offline"}
        </span>
      </div>
      {error && <div className="error-box">{error}</div>}
      {skipped.length > 0 && (
        <details className="warn-box" data-testid="skipped-runs">
          <summary>
            {skipped.length === 1 ? "1 run is" : `${skipped.length} runs are`} left out: the ledger cannot read{" "}
            {skipped.length === 1 ? "it" : "them"}
          </summary>
          <ul>
            {skipped.map((entry) => (
              <li key={entry.run}>
                <code>{entry.run}</code>: {entry.reason}
              </li>
            ))}
          </ul>
        </details>
      )}
      <table className="runs-table" data-testid="runs-table">
        <thead>
          <tr>
            <th>Title</th>
            <th>Template</th>
            <th>Status</th>
            <th>Started</th>
            <th>Duration</th>
            <th>Tokens in / out</th>
            <th>Cost</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((run) => (
            <tr
              key={run.runId}
              data-testid="run-row"
              data-run-id={run.runId}
              data-status={run.status}
              onClick={() => navigate(`/runs/${run.runId}`)}
            >
              <td>
                <a href={`#/runs/${encodeURIComponent(run.runId)}`}>{run.title || run.runId}</a>
                {run.predecessor && <span className="muted small"> · resumed</span>}
              </td>
              <td>{run.template ?? <span className="muted">{run.kind}</span>}</td>
              <td>
                <StatusBadge status={run.status} />
              </td>
              <td>{formatTime(run.startedAtMs)}</td>
              <td>
                {formatDuration((run.endedAtMs ?? (isLive(run.status) ? now : run.startedAtMs)) - run.startedAtMs)}
              </td>
              <td>
                {formatTokens(run.tokens.input)} / {formatTokens(run.tokens.output)}
              </td>
              <td>{formatCost(run.costUsd)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 && !error && (
        <p className="empty">
          No runs yet{status !== "all" || search ? " match this filter" : ""}. Start one with{" "}
          <code>trellis run --template software-change --task "…"</code>.
        </p>
      )}
    </div>
  );
}
