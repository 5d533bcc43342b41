// The Run page: the run's overview, its graph coloured by state and updated live (with the
// terminal it reached and the path it took), its timeline and logs, the inspector of a node,
// the controls, and the replay scrubber (a read-only view of the past).
import { useCallback, useEffect, useMemo, useState } from "react";
import type { RunGraph } from "../api/types";
import { useNow } from "../app/hooks";
import { gapModel } from "../graph/gap";
import { GraphCanvas } from "../graph/GraphCanvas";
import { graphSpecModel } from "../graph/graphspec";
import { executables, type GraphModel } from "../graph/model";
import { causeLines } from "../run/cause";
import { Checkpoints } from "../run/Checkpoints";
import { gapExecutions } from "../run/gapBodies";
import { Inspector } from "../run/Inspector";
import { LogsPane } from "../run/LogsPane";
import { markReached, reachedTerminals } from "../run/outcome";
import { RunHeader } from "../run/RunHeader";
import { RunOverview } from "../run/RunOverview";
import { Scrubber } from "../run/Scrubber";
import { executionViews, nodeStates, type ExecutionView } from "../run/state";
import { Timeline } from "../run/Timeline";
import { useReplay } from "../run/useReplay";
import { useRunData } from "../run/useRunData";

function modelOf(graph: RunGraph): GraphModel {
  return graph.kind === "gap" ? gapModel(graph.graph) : graphSpecModel(graph.graph);
}

type Tab = "timeline" | "logs" | "checkpoints";

/** What a frame embedding the run view (`embed.html`) is told of: its status and the selected node. */
export interface RunPageEvents {
  onStatus?: (status: string) => void;
  onSelectNode?: (node: string | undefined) => void;
}

export function RunPage({ runId, onStatus, onSelectNode }: { runId: string } & RunPageEvents) {
  const data = useRunData(runId);
  const { status, graph, fold, gapBodies } = data;
  const [selected, setSelected] = useState<string | undefined>();
  const [executionKey, setExecutionKey] = useState<string | undefined>();
  const [tab, setTab] = useState<Tab>("timeline");
  const now = useNow(1000);
  const readBodies = data.reloadGapBodies;
  const onReplayStart = useCallback(() => void readBodies(), [readBodies]);
  const replay = useReplay(runId, gapBodies, gapBodies ? onReplayStart : undefined);

  useEffect(() => {
    setSelected(undefined);
    setExecutionKey(undefined);
  }, [runId]);

  // Escape closes the inspector (a dialog, when open, takes Escape first).
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.defaultPrevented || document.querySelector('[role="dialog"]')) return;
      setSelected(undefined);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const model = useMemo(() => (graph ? modelOf(graph) : undefined), [graph]);
  // The live fold, with a GaP run's bodies as its executions.
  const liveFold = useMemo(
    () => (fold && gapBodies ? { ...fold, executions: gapExecutions(gapBodies) } : fold),
    [fold, gapBodies],
  );
  const shownFold = replay.fold ?? liveFold;
  const views = useMemo(() => (shownFold ? executionViews(shownFold) : []), [shownFold]);
  const states = useMemo(() => {
    if (!model || !shownFold) return undefined;
    const computed = nodeStates(model, views);
    const result = shownFold.result;
    markReached(model, computed, reachedTerminals(model, result, views, status?.gapEnd), result?.status === "failed");
    return computed;
  }, [model, views, shownFold, status?.gapEnd]);
  const nodeNames = useMemo(
    () => (model ? [...new Set(executables(model).map((node) => node.runName ?? node.name))] : []),
    [model],
  );

  const selectExecution = useCallback(
    (key: string) => {
      const view = views.find((candidate) => candidate.key === key);
      if (!view || !model) return;
      const node = [...model.nodes.values()].find((candidate) => (candidate.runName ?? candidate.name) === view.node && !candidate.group);
      setSelected(node?.id ?? model.byName.get(view.node)?.[0]);
      setExecutionKey(key);
    },
    [views, model],
  );
  const selectFromTimeline = useCallback((view: ExecutionView) => selectExecution(view.key), [selectExecution]);

  const reportedStatus = liveFold?.status ?? status?.status;
  useEffect(() => {
    if (reportedStatus) onStatus?.(reportedStatus);
  }, [reportedStatus, onStatus]);
  const selectedName = selected ? model?.nodes.get(selected)?.name : undefined;
  useEffect(() => onSelectNode?.(selectedName), [selectedName, onSelectNode]);

  if (data.error) return <div className="page error-box">Could not load run {runId}: {data.error}</div>;
  if (!status || !graph || !model || !shownFold || !liveFold || !states) {
    return <div className="page loading">Loading run…</div>;
  }

  // The header is the run now; a replay shows the past in the graph, timeline and inspector only.
  const runStatus = liveFold.status ?? status.status;
  const liveViews = replay.fold ? executionViews(liveFold) : views;
  const summed = liveViews.reduce(
    (sum, view) => ({ input: sum.input + (view.tokens?.input ?? 0), output: sum.output + (view.tokens?.output ?? 0) }),
    { input: 0, output: 0 },
  );
  const reported = liveFold.tokens ?? status.tokens;
  const tokens = summed.input + summed.output > reported.input + reported.output ? summed : reported;
  const selectedNode = selected ? model.nodes.get(selected) : undefined;
  const result = liveFold.result;
  // A GaP run has no classified cause: its failed bodies say what went wrong.
  const cause =
    result?.status !== "failed"
      ? []
      : gapBodies
        ? gapBodies.filter((body) => body.phase === "failed").map((body) => `${body.node}: ${body.error ?? "failed"}`)
        : causeLines(status.cause);
  const ended = liveFold.endedAtMs ?? status.endedAtMs;
  // A replay's clock stops at the event shown; a finished run's at its end.
  const clock = replay.state ? (replay.at ?? status.startedAtMs) : (ended ?? now);

  return (
    <div
      className="page run-page"
      data-testid="run-page"
      data-run-status={runStatus}
      data-replaying={replay.state ? "true" : undefined}
    >
      <RunHeader
        runId={runId}
        status={status}
        graph={graph}
        runStatus={runStatus}
        endedAtMs={ended}
        tokens={tokens}
        costUsd={liveFold.costUsd ?? status.costUsd}
        now={now}
        connected={data.connected}
        replaying={Boolean(replay.state)}
        onReplay={replay.start}
        onDiscarded={data.reloadStatus}
        reason={result?.status === "failed" ? result.reason : undefined}
      />
      <RunOverview graph={graph} result={result} cause={cause} live={!result} />
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
            key={selectedNode.id}
            runId={runId}
            node={selectedNode}
            run={states.get(selectedNode.id)}
            executionKey={executionKey}
            onPickExecution={selectExecution}
            onClose={() => setSelected(undefined)}
            now={clock}
          />
        )}
      </div>
      {replay.state && (
        <Scrubber
          total={replay.state.events.length}
          position={replay.state.position}
          loading={replay.state.loading}
          latest={shownFold.lastEvent}
          onMove={replay.move}
          onExit={replay.stop}
        />
      )}
      <div className="run-bottom">
        <div className="tabs" role="tablist" aria-label="Run details">
          {(["timeline", "logs", "checkpoints"] as Tab[]).map((name) => (
            <button key={name} type="button" role="tab" aria-selected={tab === name} onClick={() => setTab(name)}>
              {name[0]?.toUpperCase()}
              {name.slice(1)}
            </button>
          ))}
        </div>
        {tab === "timeline" && <Timeline views={views} now={clock} selectedKey={executionKey} onSelect={selectFromTimeline} />}
        {tab === "logs" && <LogsPane runId={runId} nodes={nodeNames} />}
        {tab === "checkpoints" && <Checkpoints runId={runId} status={runStatus} successor={status.successor} />}
      </div>
    </div>
  );
}
