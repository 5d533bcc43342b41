// The inspector: what one node did. For an executable, each of its executions with input,
// output, signals, diagnostic, attempts, worker binding, tokens, timings and logs; for a frame,
// its counts, and for a map the grid of its items.
import { useEffect, useMemo, useState } from "react";
import { api } from "../api/client";
import type { ExecutionDetail } from "../api/types";
import type { ModelNode } from "../graph/model";
import { kindIcon } from "../graph/nodes";
import { formatCost, formatDuration, formatTime, formatTokens, prettyJson } from "./format";
import { describeFailure } from "./errors";
import { GapBodyPane } from "./GapBodyPane";
import { LogsPane } from "./LogsPane";
import { MapItems } from "./MapItems";
import type { ExecutionView, NodeRunState } from "./state";

export interface InspectorProps {
  runId: string;
  node: ModelNode;
  run?: NodeRunState;
  /** Execution to show first (from a timeline click). */
  executionKey?: string;
  onPickExecution: (key: string) => void;
  onClose: () => void;
  now: number;
}

function Section({ title, children, testId }: { title: string; children: React.ReactNode; testId?: string }) {
  return (
    <section className="inspector-section" data-testid={testId}>
      <h3>{title}</h3>
      {children}
    </section>
  );
}

function JsonBlock({ value }: { value: unknown }) {
  return <pre className="json">{prettyJson(value)}</pre>;
}

function executionLabel(view: ExecutionView): string {
  const parts = [`#${view.key}`];
  parts.push(`round ${view.round}`);
  if (view.attempt > 1) parts.push(`attempt ${view.attempt}`);
  if (view.itemKey !== undefined) parts.push(`item ${view.itemKey}`);
  return parts.join(" · ");
}

/** The diagnostic as text when it has a message, else as JSON. */
function DiagnosticView({ value }: { value: unknown }) {
  const message =
    typeof value === "object" && value !== null && "message" in value
      ? String((value as { message: unknown }).message)
      : undefined;
  return (
    <div className="diagnostic" data-testid="inspector-diagnostic">
      {message ? <p>{message}</p> : <JsonBlock value={value} />}
    </div>
  );
}

function ExecutionPane({
  runId,
  view,
  now,
  onPick,
}: {
  runId: string;
  view: ExecutionView;
  now: number;
  onPick: (key: string) => void;
}) {
  const [detail, setDetail] = useState<ExecutionDetail | undefined>();
  const [error, setError] = useState<string | undefined>();
  // Fetch again when the execution settles, so output and diagnostic appear live.
  useEffect(() => {
    const controller = new AbortController();
    api
      .execution(runId, view.id, controller.signal)
      .then((answer) => {
        setDetail(answer);
        setError(undefined);
      })
      .catch((failure: unknown) => {
        if (!controller.signal.aborted) setError(describeFailure(failure));
      });
    return () => controller.abort();
  }, [runId, view.id, view.state]);

  const outcome = detail?.outcome ?? view.outcome;
  const signals = detail?.signals ?? (outcome?.status === "verifier" ? outcome.signals : undefined);
  const diagnostic = detail?.diagnostic ?? (outcome?.status === "verifier" ? outcome.diagnostic : undefined);
  const output = detail?.output ?? (outcome && "output" in outcome ? outcome.output : undefined);
  const started = detail?.startedAtMs ?? view.startedAtMs;
  const ended = detail?.endedAtMs ?? view.endedAtMs;
  const tokens = detail?.tokens ?? view.tokens;
  const binding = detail?.binding;

  return (
    <div className="execution-pane" data-testid="execution-pane" data-execution={view.key}>
      <div className={`state-banner state-${view.state}`}>
        {view.state}
        {view.channel && ` · ${view.channel}`}
        {outcome?.status === "error" && outcome.reason && <span className="muted"> ({outcome.reason})</span>}
        {view.voidReason && <span className="muted"> ({view.voidReason})</span>}
      </div>
      {error && <div className="error-box small">{error}</div>}
      {signals && Object.keys(signals).length > 0 && (
        <Section title="Signals" testId="inspector-signals">
          <div className="signals">
            {Object.entries(signals).map(([name, label]) => (
              <span className="signal" key={name}>
                {name}: <strong>{label}</strong>
              </span>
            ))}
          </div>
        </Section>
      )}
      {diagnostic !== undefined && diagnostic !== null && (
        <Section title="Diagnostic">
          <DiagnosticView value={diagnostic} />
        </Section>
      )}
      <Section title="Timings">
        <dl className="facts">
          <dt>started</dt>
          <dd>{formatTime(started)}</dd>
          <dt>ended</dt>
          <dd>{ended ? formatTime(ended) : "–"}</dd>
          <dt>duration</dt>
          <dd>{started !== undefined ? formatDuration((ended ?? now) - started) : "–"}</dd>
          <dt>attempt</dt>
          <dd>{view.attempt}</dd>
        </dl>
      </Section>
      <Section title="Worker binding" testId="inspector-binding">
        <dl className="facts">
          <dt>worker</dt>
          <dd>{detail?.worker ?? "–"}</dd>
          <dt>harness</dt>
          <dd>{binding?.harness ?? binding?.kind ?? "–"}</dd>
          {binding?.provider && (
            <>
              <dt>provider</dt>
              <dd>{binding.provider}</dd>
            </>
          )}
          <dt>model</dt>
          <dd>{binding?.model ?? "–"}</dd>
          {binding?.effort && (
            <>
              <dt>effort</dt>
              <dd>{binding.effort}</dd>
            </>
          )}
          {binding?.command && (
            <>
              <dt>command</dt>
              <dd>
                <code>{binding.command.join(" ")}</code>
              </dd>
            </>
          )}
          {binding?.environment && binding.environment.length > 0 && (
            <>
              <dt>env names</dt>
              <dd>{binding.environment.join(", ")}</dd>
            </>
          )}
        </dl>
      </Section>
      <Section title="Tokens and cost">
        <dl className="facts">
          <dt>input</dt>
          <dd>{formatTokens(tokens?.input)}</dd>
          <dt>output</dt>
          <dd>{formatTokens(tokens?.output)}</dd>
          <dt>cost</dt>
          <dd>{formatCost(detail?.costUsd ?? view.costUsd)}</dd>
        </dl>
      </Section>
      {detail?.siblings && detail.siblings.length > 1 && (
        <Section title="Rounds and attempts of this occurrence">
          <div className="execution-picker">
            {detail.siblings.map((id) => (
              <button
                type="button"
                key={id}
                className={`chip${String(id) === view.key ? " active" : ""}`}
                onClick={() => onPick(String(id))}
              >
                #{id}
              </button>
            ))}
          </div>
        </Section>
      )}
      {detail?.attempts && detail.attempts.length > 1 && (
        <Section title="Attempts">
          <ol className="attempts">
            {detail.attempts.map((attempt) => (
              <li key={attempt.attempt}>
                attempt {attempt.attempt}: {attempt.state}
                {attempt.outcome?.status === "error" && ` · ${attempt.outcome.code}`}
                {attempt.startedAtMs !== undefined &&
                  ` · ${formatDuration((attempt.endedAtMs ?? now) - attempt.startedAtMs)}`}
              </li>
            ))}
          </ol>
        </Section>
      )}
      <Section title="Input">
        <JsonBlock value={detail?.input} />
      </Section>
      {output !== undefined && (
        <Section title="Output">
          <JsonBlock value={output} />
        </Section>
      )}
      <Section title="Logs">
        <LogsPane runId={runId} nodes={[]} node={view.node} execution={view.id} compact />
      </Section>
    </div>
  );
}

export function Inspector({ runId, node, run, executionKey, onPickExecution, onClose, now }: InspectorProps) {
  const executions = useMemo(() => run?.executions ?? [], [run]);
  const chosen = executions.find((view) => view.key === executionKey) ?? executions[executions.length - 1];
  return (
    <aside className="inspector" data-testid="inspector" data-node={node.name} aria-label={`Inspector: ${node.name}`}>
      <header>
        <span className="kind-icon" aria-hidden="true">
          {kindIcon(node.kind)}
        </span>
        <h2 title={node.name}>{node.name}</h2>
        <span className="muted">{node.kind}</span>
        <button type="button" className="close" aria-label="Close inspector" onClick={onClose}>
          ×
        </button>
      </header>
      {node.worker && <p className="muted small">{node.worker}</p>}
      {node.kind === "map" && run ? (
        <MapItems run={run} onPick={onPickExecution} />
      ) : node.group ? (
        <FrameFacts node={node} run={run} />
      ) : run?.reached ? (
        <p className="reached-note" data-testid="inspector-reached">
          The run ended here: {run.state === "failed" ? `failed${node.reason ? ` (${node.reason})` : ""}` : "succeeded"}.
        </p>
      ) : executions.length === 0 ? (
        <p className="empty">{isTerminal(node.kind) ? "Not reached." : `Not run${run ? " yet" : ""}.`}</p>
      ) : (
        <>
          {executions.length > 1 && executions.length <= 200 && (
            <div className="execution-picker" role="tablist">
              {executions.map((view) => (
                <button
                  type="button"
                  key={view.key}
                  role="tab"
                  aria-selected={view.key === chosen?.key}
                  className={`chip state-${view.state}${view.key === chosen?.key ? " active" : ""}`}
                  onClick={() => onPickExecution(view.key)}
                >
                  {executionLabel(view)}
                </button>
              ))}
            </div>
          )}
          {executions.length > 200 && (
            <p className="muted small">
              {executions.length} executions; pick one on the timeline or in its map's items.
            </p>
          )}
          {chosen?.gap && <GapBodyPane key={chosen.key} body={chosen.gap} now={now} />}
          {chosen && !chosen.gap && (
            <ExecutionPane key={chosen.key} runId={runId} view={chosen} now={now} onPick={onPickExecution} />
          )}
        </>
      )}
    </aside>
  );
}

const isTerminal = (kind: string) => ["succeed", "fail", "end", "finish"].includes(kind);

function FrameFacts({ node, run }: { node: ModelNode; run?: NodeRunState }) {
  return (
    <div>
      <p>{node.summary}</p>
      {run && (
        <dl className="facts">
          <dt>state</dt>
          <dd>{run.state}</dd>
          <dt>executions</dt>
          <dd>{run.executions.length}</dd>
          {node.kind === "loop" && (
            <>
              <dt>rounds</dt>
              <dd>
                {run.rounds} of at most {node.maxIterations ?? "?"}
              </dd>
            </>
          )}
          <dt>tokens</dt>
          <dd>
            {formatTokens(run.tokens.input)} in / {formatTokens(run.tokens.output)} out
          </dd>
          <dt>cost</dt>
          <dd>{formatCost(run.costUsd)}</dd>
        </dl>
      )}
    </div>
  );
}
