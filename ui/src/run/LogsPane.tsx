// The logs pane: the run's log lines over SSE, filtered by node and level, following the tail
// unless the reader scrolls up or turns following off.
import { useEffect, useMemo, useRef, useState } from "react";
import { streamUrls } from "../api/client";
import { logLine } from "../api/normalize";
import { subscribe } from "../api/stream";
import type { LogLine } from "../api/types";

const LEVELS = ["debug", "info", "warn", "error"];
/** Lines kept in the page; older ones are dropped (the ledger keeps them all). */
const MAX_LINES = 5000;

export interface LogsPaneProps {
  runId: string;
  nodes: string[];
  /** Fixed node filter (the inspector shows one node's logs). */
  node?: string;
  /** Only lines of this execution. */
  execution?: number | string;
  compact?: boolean;
}

const levelRank = (level: string) => {
  const rank = LEVELS.indexOf(level);
  return rank === -1 ? 1 : rank;
};

export function LogsPane({ runId, nodes, node: fixedNode, execution, compact }: LogsPaneProps) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [node, setNode] = useState(fixedNode ?? "");
  const [level, setLevel] = useState("debug");
  const [follow, setFollow] = useState(true);
  const [ended, setEnded] = useState(false);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    setLines([]);
    setEnded(false);
    const subscription = subscribe<unknown>(
      {
        url: (cursor) =>
          streamUrls.logs(runId, cursor, node || undefined, level === "debug" ? undefined : level),
        eventNames: ["log"],
      },
      {
        onEvent: (raw) =>
          setLines((current) => {
            const line = logLine(raw);
            const next = current.length >= MAX_LINES ? current.slice(-MAX_LINES + 1) : current.slice();
            next.push(line);
            return next;
          }),
        onEnd: () => setEnded(true),
      },
    );
    return () => subscription.close();
  }, [runId, node, level]);

  const shown = useMemo(
    () =>
      lines.filter(
        (line) =>
          levelRank(String(line.level)) >= levelRank(level) &&
          (!node || line.node === node) &&
          (execution === undefined || String(line.execution) === String(execution)),
      ),
    [lines, level, node, execution],
  );

  // Follow the tail inside the pane only: scrolling it into view would also scroll whatever
  // holds the pane (the inspector would open scrolled down to its logs).
  useEffect(() => {
    const element = box.current;
    if (follow && !compact && element) element.scrollTop = element.scrollHeight;
  }, [shown, follow, compact]);

  return (
    <div className={`logs${compact ? " compact" : ""}`} data-testid="logs-pane">
      {!compact && (
        <div className="logs-toolbar">
          <select aria-label="Filter logs by node" value={node} onChange={(event) => setNode(event.target.value)}>
            <option value="">all nodes</option>
            {nodes.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
          <select aria-label="Minimum log level" value={level} onChange={(event) => setLevel(event.target.value)}>
            {LEVELS.map((name) => (
              <option key={name} value={name}>
                {name === "debug" ? "all levels" : `${name} and above`}
              </option>
            ))}
          </select>
          <label>
            <input type="checkbox" checked={follow} onChange={(event) => setFollow(event.target.checked)} /> follow
          </label>
          <span className="muted small">
            {shown.length} lines{ended ? " · complete" : ""}
          </span>
        </div>
      )}
      <div className="logs-lines" ref={box}>
        {shown.map((line) => (
          <div className={`log-line level-${line.level}`} key={line.cursor} data-testid="log-line">
            <span className="log-time">{new Date(line.atMs).toLocaleTimeString([], { hour12: false })}</span>
            <span className="log-node">{line.node ?? "run"}</span>
            <span className="log-level">{line.level}</span>
            <span className="log-message">{line.message}</span>
          </div>
        ))}
        {shown.length === 0 && <div className="empty small">No log lines{ended ? "" : " yet"}.</div>}
      </div>
    </div>
  );
}
