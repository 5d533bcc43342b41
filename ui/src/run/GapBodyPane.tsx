// The inspector's view of one visit of a GaP body: its phase, timings, and the output or error
// the ledger journaled (a GaP body has no execution record to fetch).
import type { GapBody } from "../api/types";
import { formatDuration, formatTime, prettyJson } from "./format";

export function GapBodyPane({ body, now }: { body: GapBody; now: number }) {
  return (
    <div className="execution-pane" data-testid="execution-pane" data-execution={`${body.node}#${body.visit}`}>
      <div className={`state-banner state-${body.phase === "cancelled" ? "void" : body.phase}`} data-testid="gap-phase">
        {body.phase}
        {body.reusedFrom && <span className="muted"> (reused from {body.reusedFrom})</span>}
      </div>
      <section className="inspector-section">
        <h3>Body</h3>
        <dl className="facts">
          <dt>node</dt>
          <dd>
            <code>{body.node}</code>
          </dd>
          <dt>type</dt>
          <dd>{body.nodeType || "–"}</dd>
          <dt>visit</dt>
          <dd>{body.visit + 1}</dd>
          <dt>started</dt>
          <dd>{formatTime(body.startedAtMs)}</dd>
          <dt>ended</dt>
          <dd>{body.endedAtMs ? formatTime(body.endedAtMs) : "–"}</dd>
          <dt>duration</dt>
          <dd>{formatDuration((body.endedAtMs ?? now) - body.startedAtMs)}</dd>
        </dl>
      </section>
      {body.error && (
        <section className="inspector-section">
          <h3>Error</h3>
          <div className="diagnostic" data-testid="inspector-diagnostic">
            <p>{body.error}</p>
          </div>
        </section>
      )}
      {body.output !== undefined && (
        <section className="inspector-section" data-testid="gap-output">
          <h3>Output</h3>
          <pre className="json">{prettyJson(body.output)}</pre>
        </section>
      )}
      {body.omittedBytes !== undefined && (
        <p className="muted small">The output ({body.omittedBytes} bytes) was too large to record.</p>
      )}
    </div>
  );
}
