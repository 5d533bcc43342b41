// The run page's header: title and real status (a replay never changes it), the run's facts,
// and the controls, which a replay hides: the past cannot be stopped or resumed.
import type { ReactNode } from "react";
import type { RunGraph, RunStatus, TokenTotals } from "../api/types";
import { StatusBadge } from "../pages/RunsPage";
import { Controls } from "./Controls";
import { formatCost, formatDuration, formatTime, formatTokens, isLive } from "./format";

export interface RunHeaderProps {
  runId: string;
  status: RunStatus;
  graph: RunGraph;
  /** The run's status now (from the live fold), whatever a replay shows. */
  runStatus: string;
  endedAtMs?: number;
  tokens: TokenTotals;
  costUsd?: number;
  now: number;
  connected: boolean;
  replaying: boolean;
  onReplay: () => void;
  onDiscarded: () => void;
  reason?: string;
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </>
  );
}

export function RunHeader(props: RunHeaderProps) {
  const { runId, status, graph, runStatus, endedAtMs, tokens, now, replaying } = props;
  const live = isLive(runStatus);
  const ended = endedAtMs ?? (live ? now : status.startedAtMs);
  return (
    <header className="run-header">
      <div className="run-title">
        <h1 title={status.title || runId}>{status.title || runId}</h1>
        <StatusBadge status={runStatus} />
        {props.reason && props.reason !== "force_stopped" && (
          <span className="muted" data-testid="run-reason">
            {props.reason}
          </span>
        )}
        {live && !replaying && (
          <span className={`live-dot ${props.connected ? "on" : "off"}`}>{props.connected ? "live" : "reconnecting"}</span>
        )}
        {replaying && (
          <span className="replay-note" data-testid="replay-note">
            replaying the past · read-only
          </span>
        )}
      </div>
      <dl className="run-facts">
        <Fact term="run">
          <code title={runId}>{runId}</code>
        </Fact>
        <Fact term={graph.kind === "gap" ? "workflow" : "template"}>{status.template ?? status.kind}</Fact>
        <Fact term="started">{formatTime(status.startedAtMs)}</Fact>
        <Fact term="duration">{formatDuration(ended - status.startedAtMs)}</Fact>
        <Fact term="tokens">
          {formatTokens(tokens.input)} in / {formatTokens(tokens.output)} out
        </Fact>
        <Fact term="cost">{formatCost(props.costUsd)}</Fact>
        {graph.identity && (
          <Fact term="identity">
            <code title={graph.identity}>{graph.identity.slice(0, 12)}…</code>
          </Fact>
        )}
        {status.predecessor && (
          <Fact term="resumes">
            <a href={`#/runs/${status.predecessor}`}>{status.predecessor}</a>
          </Fact>
        )}
        {status.successor && (
          <Fact term="resumed as">
            <a href={`#/runs/${status.successor}`}>{status.successor}</a>
          </Fact>
        )}
      </dl>
      <div className="run-actions">
        {!replaying && (
          <Controls
            runId={runId}
            status={runStatus}
            successor={status.successor}
            worktree={status.worktree}
            onDiscarded={props.onDiscarded}
          />
        )}
        {!replaying && (
          <button type="button" onClick={props.onReplay} data-testid="replay">
            Replay
          </button>
        )}
      </div>
    </header>
  );
}
