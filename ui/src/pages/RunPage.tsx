// The Run page: the run's graph coloured by state and updated live, its timeline and logs, the
// inspector of a clicked node, the force-stop and resume controls, and the replay scrubber.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, streamUrls } from "../api/client";
import { watchEvent } from "../api/normalize";
import { subscribe } from "../api/stream";
import type { RunGraph, RunStatus, WatchEvent } from "../api/types";
import { useNow } from "../app/hooks";
import { gapModel } from "../graph/gap";
import { GraphCanvas } from "../graph/GraphCanvas";
import { graphSpecModel } from "../graph/graphspec";
import { executables, type GraphModel } from "../graph/model";
import { causeLines } from "../run/cause";
import { Checkpoints } from "../run/Checkpoints";
import { Controls } from "../run/Controls";
import { formatCost, formatDuration, formatTime, formatTokens, isLive } from "../run/format";
import { Inspector } from "../run/Inspector";
import { LogsPane } from "../run/LogsPane";
import { Scrubber } from "../run/Scrubber";
import {
  applyEvent,
  executionViews,
  foldFromStatus,
  nodeStates,
  replay,
  type ExecutionView,
  type RunFold,
} from "../run/state";
import { Timeline } from "../run/Timeline";
import { StatusBadge } from "./RunsPage";

function modelOf(graph: RunGraph): GraphModel {
  return graph.kind === "gap" ? gapModel(graph.graph) : graphSpecModel(graph.graph);
}

interface ReplayState {
  events: WatchEvent[];
  position: number;
  loading: boolean;
}

export function RunPage({ runId }: { runId: string }) {
  const [status, setStatus] = useState<RunStatus | undefined>();
  const [graph, setGraph] = useState<RunGraph | undefined>();
  const [fold, setFold] = useState<RunFold | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [connected, setConnected] = useState(false);
  const [selected, setSelected] = useState<string | undefined>();
  const [executionKey, setExecutionKey] = useState<string | undefined>();
  const [tab, setTab] = useState<"timeline" | "logs" | "checkpoints">("timeline");
  const [replayState, setReplayState] = useState<ReplayState | undefined>();
  const now = useNow(1000);

  // Load the status and the graph, then follow the watch stream from the status's cursor.
  useEffect(() => {
    const controller = new AbortController();
    let subscription: { close: () => void } | undefined;
    setStatus(undefined);
    setGraph(undefined);
    setFold(undefined);
    setSelected(undefined);
    setReplayState(undefined);
    Promise.all([api.runStatus(runId, controller.signal), api.runGraph(runId, controller.signal)])
      .then(([loadedStatus, loadedGraph]) => {
        setStatus(loadedStatus);
        setGraph(loadedGraph);
        setFold(foldFromStatus(loadedStatus));
        setError(undefined);
        if (!isLive(loadedStatus.status)) return;
        subscription = subscribe<unknown>(
          { url: (cursor) => streamUrls.watch(runId, cursor), initialCursor: loadedStatus.cursor },
          {
            onEvent: (raw) => {
              const event = watchEvent(raw);
              setFold((current) => (current ? applyEvent(current, event) : current));
            },
            onStateChange: setConnected,
          },
        );
      })
      .catch((failure: unknown) => {
        if (!controller.signal.aborted) setError(String(failure));
      });
    return () => {
      controller.abort();
      subscription?.close();
    };
  }, [runId]);

  // Read the status again when asked (a discarded worktree) and once a live run has ended, so
  // the page shows what only the status carries (a failure's classified cause, the successor).
  const reloadStatus = useCallback(() => {
    api
      .runStatus(runId)
      .then(setStatus)
      .catch(() => undefined);
  }, [runId]);
  const endedLive = Boolean(fold?.status && !isLive(fold.status) && status && isLive(status.status));
  useEffect(() => {
    if (endedLive) reloadStatus();
  }, [endedLive, reloadStatus]);

  // Replay: load the whole event history once, then fold any prefix of it.
  const replaySubscription = useRef<{ close: () => void } | undefined>(undefined);
  const startReplay = useCallback(() => {
    setReplayState({ events: [], position: 0, loading: true });
    replaySubscription.current?.close();
    replaySubscription.current = subscribe<unknown>(
      { url: (cursor) => streamUrls.watch(runId, cursor) },
      {
        onEvent: (raw) =>
          setReplayState((current) => {
            const event = watchEvent(raw);
            if (!current) return current;
            const atEnd = current.position === current.events.length;
            const events = [...current.events, event];
            return { ...current, events, position: atEnd ? events.length : current.position };
          }),
        onEnd: () => setReplayState((current) => current && { ...current, loading: false }),
      },
    );
  }, [runId]);
  const stopReplay = useCallback(() => {
    replaySubscription.current?.close();
    replaySubscription.current = undefined;
    setReplayState(undefined);
  }, []);
  useEffect(() => () => replaySubscription.current?.close(), []);

  const model = useMemo(() => (graph ? modelOf(graph) : undefined), [graph]);
  const shownFold = useMemo(
    () => (replayState ? replay(replayState.events, replayState.position) : fold),
    [replayState, fold],
  );
  const views = useMemo(() => (shownFold ? executionViews(shownFold) : []), [shownFold]);
  const states = useMemo(() => (model ? nodeStates(model, views) : undefined), [model, views]);
  const nodeNames = useMemo(() => (model ? executables(model).map((node) => node.name) : []), [model]);

  const selectExecution = useCallback(
    (key: string) => {
      const view = views.find((candidate) => candidate.key === key);
      if (!view || !model) return;
      const ids = model.byName.get(view.node) ?? [];
      setSelected(ids[0]);
      setExecutionKey(key);
    },
    [views, model],
  );
  const selectFromTimeline = useCallback((view: ExecutionView) => selectExecution(view.key), [selectExecution]);

  if (error) return <div className="page error-box">Could not load run {runId}: {error}</div>;
  if (!status || !model || !shownFold || !states) return <div className="page loading">Loading run…</div>;

  const runStatus = shownFold.status ?? status.status;
  const ended = shownFold.endedAtMs ?? status.endedAtMs;
  // The run's totals, or the sum over its executions when those are further along.
  const summed = views.reduce(
    (sum, view) => ({ input: sum.input + (view.tokens?.input ?? 0), output: sum.output + (view.tokens?.output ?? 0) }),
    { input: 0, output: 0 },
  );
  const reported = shownFold.tokens ?? status.tokens;
  const tokens = summed.input + summed.output > reported.input + reported.output ? summed : reported;
  const selectedNode = selected ? model.nodes.get(selected) : undefined;
  const result = shownFold.result;
  // The classified cause arrives with the status: read again once a live run has failed.
  const cause = result?.status === "failed" ? causeLines(status.cause) : [];

  return (
    <div className="page run-page" data-testid="run-page" data-run-status={runStatus}>
      <header className="run-header">
        <div className="run-title">
          <h1>{status.title || runId}</h1>
          <StatusBadge status={runStatus} />
          {result?.status === "failed" && (
            <span className="muted" data-testid="run-reason">
              {result.reason}
            </span>
          )}
          {cause.length > 0 && (
            <ul className="run-cause" data-testid="run-cause">
              {cause.map((line) => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          )}
          {isLive(runStatus) && !replayState && (
            <span className={`live-dot ${connected ? "on" : "off"}`}>{connected ? "live" : "reconnecting"}</span>
          )}
        </div>
        <dl className="run-facts">
          <dt>run</dt>
          <dd>
            <code>{runId}</code>
          </dd>
          <dt>template</dt>
          <dd>{status.template ?? status.kind}</dd>
          <dt>started</dt>
          <dd>{formatTime(status.startedAtMs)}</dd>
          <dt>duration</dt>
          <dd>{formatDuration((ended ?? (isLive(runStatus) ? now : status.startedAtMs)) - status.startedAtMs)}</dd>
          <dt>tokens</dt>
          <dd>
            {formatTokens(tokens.input)} in / {formatTokens(tokens.output)} out
          </dd>
          <dt>cost</dt>
          <dd>{formatCost(shownFold.costUsd ?? status.costUsd)}</dd>
          {graph?.identity && (
            <>
              <dt>identity</dt>
              <dd title={graph.identity}>
                <code>{graph.identity.slice(0, 12)}…</code>
              </dd>
            </>
          )}
          {status.predecessor && (
            <>
              <dt>resumes</dt>
              <dd>
                <a href={`#/runs/${status.predecessor}`}>{status.predecessor}</a>
              </dd>
            </>
          )}
          {status.successor && (
            <>
              <dt>resumed as</dt>
              <dd>
                <a href={`#/runs/${status.successor}`}>{status.successor}</a>
              </dd>
            </>
          )}
        </dl>
        <div className="run-actions">
          <Controls
            runId={runId}
            status={runStatus}
            successor={status.successor}
            worktree={status.worktree}
            onDiscarded={reloadStatus}
          />
          {!replayState && (
            <button type="button" onClick={startReplay} data-testid="replay">
              Replay
            </button>
          )}
        </div>
      </header>
      <div className="run-main">
        <GraphCanvas
          model={model}
          states={states}
          selected={selected}
          onSelect={(id) => {
            setSelected(id);
            setExecutionKey(undefined);
          }}
        />
        {selectedNode && (
          <Inspector
            runId={runId}
            node={selectedNode}
            run={states.get(selectedNode.id)}
            executionKey={executionKey}
            onPickExecution={selectExecution}
            onClose={() => setSelected(undefined)}
            now={now}
          />
        )}
      </div>
      {replayState && (
        <Scrubber
          total={replayState.events.length}
          position={replayState.position}
          loading={replayState.loading}
          latest={shownFold.lastEvent}
          onMove={(position) => setReplayState((current) => current && { ...current, position })}
          onExit={stopReplay}
        />
      )}
      <div className="run-bottom">
        <div className="tabs" role="tablist">
          <button type="button" role="tab" aria-selected={tab === "timeline"} onClick={() => setTab("timeline")}>
            Timeline
          </button>
          <button type="button" role="tab" aria-selected={tab === "logs"} onClick={() => setTab("logs")}>
            Logs
          </button>
          <button
            type="button"
            role="tab"
            aria-selected={tab === "checkpoints"}
            onClick={() => setTab("checkpoints")}
          >
            Checkpoints
          </button>
        </div>
        {tab === "timeline" && (
          <Timeline views={views} now={ended ?? now} selectedKey={executionKey} onSelect={selectFromTimeline} />
        )}
        {tab === "logs" && <LogsPane runId={runId} nodes={nodeNames} />}
        {tab === "checkpoints" && <Checkpoints runId={runId} status={runStatus} successor={status.successor} />}
      </div>
    </div>
  );
}
