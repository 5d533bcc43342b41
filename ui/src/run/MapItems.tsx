// A map's items as a grid of cells coloured by state: a thousand items stay readable, a filter
// narrows them, and a click opens that item's latest execution.
import { useMemo, useState } from "react";
import { NODE_STATES, type ExecutionView, type NodeRunState, type NodeStateName } from "./state";

/** Cells drawn at once; the rest are reached by paging. */
const PAGE = 512;

export function MapItems({ run, onPick }: { run: NodeRunState; onPick: (key: string) => void }) {
  const [filter, setFilter] = useState<NodeStateName | "all">("all");
  const [page, setPage] = useState(0);

  const items = useMemo(() => {
    const latest = new Map<string, ExecutionView>();
    for (const view of run.executions) {
      const first = Array.isArray(view.item) ? view.item[0] : view.item;
      latest.set(String(first ?? "?"), view);
    }
    return [...latest.entries()].sort((a, b) => Number(a[0]) - Number(b[0]));
  }, [run]);
  const shown = items.filter(([, view]) => filter === "all" || view.state === filter);
  const pages = Math.max(1, Math.ceil(shown.length / PAGE));
  const current = Math.min(page, pages - 1);

  return (
    <div className="map-items" data-testid="map-items">
      <div className="map-counts">
        <button type="button" className={`chip${filter === "all" ? " active" : ""}`} onClick={() => setFilter("all")}>
          all {items.length}
        </button>
        {NODE_STATES.filter((state) => run.counts[state] > 0).map((state) => (
          <button
            type="button"
            key={state}
            className={`chip state-${state}${filter === state ? " active" : ""}`}
            onClick={() => {
              setFilter(state);
              setPage(0);
            }}
          >
            {state} {run.counts[state]}
          </button>
        ))}
      </div>
      <div className="item-grid">
        {shown.slice(current * PAGE, (current + 1) * PAGE).map(([item, view]) => (
          <button
            type="button"
            key={item}
            className={`item-cell state-${view.state}`}
            title={`item ${item}: ${view.node} ${view.state}${view.channel ? ` (${view.channel})` : ""}`}
            data-testid="map-item"
            onClick={() => onPick(view.key)}
          />
        ))}
      </div>
      {pages > 1 && (
        <div className="pager">
          <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)}>
            ‹
          </button>
          <span>
            {current + 1} / {pages}
          </span>
          <button type="button" disabled={current >= pages - 1} onClick={() => setPage(current + 1)}>
            ›
          </button>
        </div>
      )}
    </div>
  );
}
