// The timeline: one bar per execution on a row per node, concurrent executions on stacked lanes,
// attempts and loop rounds (repair rounds) marked so a repair is visible at a glance.
import { useMemo } from "react";
import { formatDuration } from "./format";
import type { ExecutionView } from "./state";

export interface TimelineProps {
  views: ExecutionView[];
  now: number;
  selectedKey?: string;
  onSelect?: (view: ExecutionView) => void;
}

/** Rows with more concurrent lanes than this draw their bars overlapped on this many lanes. */
const MAX_LANES = 6;

interface Row {
  node: string;
  lanes: number;
  bars: { view: ExecutionView; lane: number }[];
}

function packRows(views: ExecutionView[], now: number): Row[] {
  const rows = new Map<string, Row>();
  const laneEnds = new Map<string, number[]>();
  for (const view of views) {
    let row = rows.get(view.node);
    if (!row) {
      row = { node: view.node, lanes: 1, bars: [] };
      rows.set(view.node, row);
      laneEnds.set(view.node, []);
    }
    const ends = laneEnds.get(view.node) ?? [];
    const start = view.startedAtMs ?? now;
    let lane = ends.findIndex((end) => end <= start);
    if (lane === -1) {
      lane = ends.length;
      ends.push(0);
    }
    ends[lane] = view.endedAtMs ?? now;
    row.bars.push({ view, lane: lane % MAX_LANES });
    row.lanes = Math.min(MAX_LANES, Math.max(row.lanes, lane + 1));
  }
  return [...rows.values()];
}

interface RoundMark {
  round: number;
  atMs: number;
}

/** Where each loop round after the first began: its earliest execution. */
function roundMarks(views: ExecutionView[]): RoundMark[] {
  const starts = new Map<number, number>();
  for (const view of views) {
    if (view.round <= 1 || view.startedAtMs === undefined) continue;
    const known = starts.get(view.round);
    if (known === undefined || view.startedAtMs < known) starts.set(view.round, view.startedAtMs);
  }
  return [...starts.entries()].map(([round, atMs]) => ({ round, atMs })).sort((a, b) => a.round - b.round);
}

export function Timeline({ views, now, selectedKey, onSelect }: TimelineProps) {
  const timed = useMemo(() => views.filter((view) => view.startedAtMs !== undefined), [views]);
  const rows = useMemo(() => packRows(timed, now), [timed, now]);
  const marks = useMemo(() => roundMarks(timed), [timed]);
  if (timed.length === 0) return <div className="empty">No executions yet.</div>;

  const start = Math.min(...timed.map((view) => view.startedAtMs ?? now));
  const end = Math.max(start + 1, ...timed.map((view) => view.endedAtMs ?? now));
  const span = end - start;
  const percent = (ms: number) => `${(((ms - start) / span) * 100).toFixed(3)}%`;

  return (
    <div className="timeline" data-testid="timeline">
      <div className="timeline-axis">
        <span>0 s</span>
        <span>{formatDuration(span / 2)}</span>
        <span>{formatDuration(span)}</span>
      </div>
      <div className="timeline-body">
        <div className="round-marks">
        {marks.map((mark) => (
          <div
            key={mark.round}
            className="round-mark"
            style={{ left: percent(mark.atMs) }}
            data-testid="round-marker"
            data-round={mark.round}
          >
            <span>round {mark.round} · repair</span>
          </div>
        ))}
        </div>
        {rows.map((row) => (
          <div className="timeline-row" key={row.node} style={{ height: 8 + row.lanes * 20 }}>
            <div className="timeline-label" title={row.node}>
              {row.node}
              {row.bars.length > 1 && <span className="muted"> ×{row.bars.length}</span>}
            </div>
            <div className="timeline-track">
              {row.bars.map(({ view, lane }) => {
                const from = view.startedAtMs ?? now;
                const to = view.endedAtMs ?? now;
                const tags = [
                  view.round > 1 ? `r${view.round}` : "",
                  view.attempt > 1 ? `a${view.attempt}` : "",
                  view.itemKey !== undefined && row.bars.length < 40 ? `#${view.itemKey}` : "",
                ].filter(Boolean);
                return (
                  <button
                    type="button"
                    key={view.key}
                    className={`timeline-bar state-${view.state}${selectedKey === view.key ? " selected" : ""}`}
                    data-testid="timeline-bar"
                    data-node={view.node}
                    data-round={view.round}
                    data-attempt={view.attempt}
                    data-state={view.state}
                    style={{
                      left: percent(from),
                      width: `max(3px, ${(((to - from) / span) * 100).toFixed(3)}%)`,
                      top: 4 + lane * 20,
                    }}
                    aria-label={`${[...tags, view.node].join(" ")} · round ${view.round} · ${view.state}`}
                    title={`${view.node} · round ${view.round} · attempt ${view.attempt}${
                      view.itemKey !== undefined ? ` · item ${view.itemKey}` : ""
                    } · ${view.state}${view.channel ? ` (${view.channel})` : ""} · ${formatDuration(to - from)}`}
                    onClick={() => onSelect?.(view)}
                  >
                    {tags.join(" ")}
                  </button>
                );
              })}
            </div>
          </div>
        ))}
      </div>
    </div>
  );
}
