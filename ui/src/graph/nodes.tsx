// The React Flow node components: executable cards, terminal pills and group frames, each
// coloured by its run state and carrying the diagnostics pinned on it.
import { Handle, Position, type NodeProps, type Node } from "@xyflow/react";
import { memo } from "react";
import type { Diagnostic } from "../api/types";
import type { NodeRunState } from "../run/state";
import { verdictsByRound } from "../run/outcome";
import { formatDuration } from "../run/format";
import { useNow } from "../app/hooks";
import type { ModelNode } from "./model";

export interface DrawnData extends Record<string, unknown> {
  node: ModelNode;
  run?: NodeRunState;
  pins?: Diagnostic[];
  collapsed?: boolean;
  selected?: boolean;
  onToggle?: (id: string) => void;
}

export type DrawnNode = Node<DrawnData>;

const KIND_ICON: Record<string, string> = {
  step: "▶",
  verifier: "✔",
  seq: "⇣",
  par: "⇉",
  choice: "◇",
  loop: "↻",
  map: "▦",
  succeed: "●",
  fail: "✕",
  decision: "◇",
  tool: "⚙",
  script: "ƒ",
  router: "⇄",
  end: "■",
  noop: "○",
  start: "▷",
  finish: "■",
  workflow: "⊞",
  subgraph: "⊟",
};

export const kindIcon = (kind: string) => KIND_ICON[kind] ?? "•";

function Handles() {
  return (
    <>
      <Handle type="target" position={Position.Left} className="handle" isConnectable={false} />
      <Handle type="source" position={Position.Right} className="handle" isConnectable={false} />
    </>
  );
}

function Elapsed({ since }: { since: number }) {
  const now = useNow(1000);
  return <span className="elapsed">{formatDuration(Math.max(0, now - since))}</span>;
}

/** "running 12 s", "failed · timeout", "rejected", … */
/** A state in words: a node the force-stop cancelled says so rather than "failed · refusal". */
export function stateWords(run: Pick<NodeRunState, "state" | "latest">): string {
  // The runtime settles what a force-stop killed as a refusal, by `force_stop`.
  if (run.latest?.voidReason === "force_stop") return "force-stopped";
  return run.state;
}

function StateLine({ run }: { run: NodeRunState }) {
  const latest = run.latest;
  const words = stateWords(run);
  return (
    <span className={`state-label state-${run.state}`}>
      {words}
      {run.state === "running" && latest?.startedAtMs !== undefined && (
        <>
          {" "}
          <Elapsed since={latest.startedAtMs} />
        </>
      )}
      {run.channel && words !== "force-stopped" && ` · ${run.channel}`}
    </span>
  );
}

/** A verifier's verdict of each round, so round 2 reads as round 2 without opening anything. */
function Verdicts({ run }: { run: NodeRunState }) {
  const verdicts = verdictsByRound(run);
  if (verdicts.length < 2) return null;
  return (
    <div className="verdicts" data-testid="verdicts">
      {verdicts.map((verdict) => (
        <span key={verdict.round} className={`verdict state-${verdict.state}`} data-round={verdict.round} data-state={verdict.state}>
          r{verdict.round} {verdict.label}
        </span>
      ))}
    </div>
  );
}

function Pins({ pins }: { pins?: Diagnostic[] }) {
  if (!pins || pins.length === 0) return null;
  return (
    <span
      className="pin"
      data-testid="diagnostic-pin"
      title={pins.map((pin) => `${pin.code}: ${pin.message}`).join("\n")}
    >
      {pins.length} ⚠ {pins[0]?.code}
    </span>
  );
}

function CardNode({ data }: NodeProps<DrawnNode>) {
  const { node, run, pins } = data;
  const state = run?.state ?? "pending";
  const inputs = node.inputs ?? [];
  const itemsShown = run && run.items > 0;
  return (
    <div
      className={`card state-${state}${data.selected ? " selected" : ""}${pins?.length ? " pinned" : ""}`}
      data-testid={`node-${node.name}`}
      data-state={state}
      data-reached={run?.reached ? "true" : undefined}
    >
      <Handles />
      <div className="card-head">
        <span className="kind-icon" title={node.kind} aria-hidden="true">
          {kindIcon(node.kind)}
        </span>
        <span className="card-name" title={node.name}>
          {node.name}
        </span>
        {run && run.executions.length > 1 && !itemsShown && (
          <span className="badge" title="executions">
            ×{run.executions.length}
          </span>
        )}
        {run?.reached && (
          <span className="reached-mark" title="The run ended here, with this node's failure">
            ended here ✕
          </span>
        )}
      </div>
      {node.worker && (
        <div className="card-worker" title={node.worker}>
          {node.worker}
        </div>
      )}
      {inputs.slice(0, 4).map((field) => (
        <div className="card-field" key={field.name}>
          <span className="muted">in</span> {field.name}
          {field.type && <span className="muted">: {field.type}</span>}
        </div>
      ))}
      {inputs.length > 4 && <div className="card-field muted">+{inputs.length - 4} more</div>}
      {node.signals && (
        <div className="card-field">
          <span className="muted">signals</span>{" "}
          {Object.entries(node.signals)
            .map(([name, labels]) => `${name}: ${labels.join("|")}`)
            .join("; ")}
        </div>
      )}
      {node.kind === "verifier" && run && <Verdicts run={run} />}
      <div className="card-foot">
        {run ? <StateLine run={run} /> : <span className="muted">{node.kind}</span>}
        {itemsShown && <ItemCounts run={run} />}
        <Pins pins={pins} />
      </div>
    </div>
  );
}

function ItemCounts({ run }: { run: NodeRunState }) {
  const { counts } = run;
  const done = counts.succeeded + counts.accepted;
  return (
    <span className="item-counts" data-testid="item-counts">
      {run.items} items: {done} ✓{counts.running ? ` · ${counts.running} running` : ""}
      {counts.failed ? ` · ${counts.failed} ✕` : ""}
      {counts.rejected ? ` · ${counts.rejected} rejected` : ""}
      {counts.void ? ` · ${counts.void} void` : ""}
    </span>
  );
}

function PillNode({ data }: NodeProps<DrawnNode>) {
  const { node, run, pins } = data;
  const reached = Boolean(run?.reached || (run && run.executions.length > 0));
  return (
    <div
      className={`pill pill-${node.kind}${data.selected ? " selected" : ""}${reached ? ` state-${run?.state} reached` : ""}${pins?.length ? " pinned" : ""}`}
      data-testid={`node-${node.name}`}
      data-kind={node.kind}
      data-reached={run?.reached ? "true" : undefined}
      title={node.reason ? `${node.kind}: ${node.reason}` : node.kind}
    >
      <Handles />
      <span className="kind-icon" aria-hidden="true">
        {kindIcon(node.kind)}
      </span>{" "}
      {node.name}
      {run?.reached && <span className="reached-mark">{run.state === "failed" ? " · run ended here ✕" : " · run ended here ✓"}</span>}
      <Pins pins={pins} />
    </div>
  );
}

export function frameHeadline(node: ModelNode, run: NodeRunState | undefined): string {
  if (node.kind === "loop" && node.maxIterations !== undefined) {
    return run && run.rounds > 0
      ? `round ${run.rounds} of at most ${node.maxIterations}`
      : `up to ${node.maxIterations} rounds`;
  }
  if (node.kind === "map") {
    const limit = node.maxItems !== undefined ? ` (≤ ${node.maxItems})` : "";
    return `over ${node.over ?? "?"}${limit}`;
  }
  return node.summary ?? node.kind;
}

function FrameNode({ data }: NodeProps<DrawnNode>) {
  const { node, run, pins, collapsed } = data;
  const state = run?.state ?? "pending";
  return (
    <div
      className={`frame frame-${node.kind} state-${state}${collapsed ? " collapsed" : ""}${data.selected ? " selected" : ""}${pins?.length ? " pinned" : ""}`}
      data-testid={`frame-${node.name}`}
      data-state={state}
    >
      <Handles />
      <div className="frame-head">
        <button
          type="button"
          className="frame-toggle nodrag"
          // The accessible tree expands and collapses by keyboard; this is for the pointer.
          tabIndex={-1}
          aria-label={collapsed ? `Expand ${node.name}` : `Collapse ${node.name}`}
          onClick={(event) => {
            event.stopPropagation();
            data.onToggle?.(node.id);
          }}
        >
          {collapsed ? "▸" : "▾"}
        </button>
        <span className="kind-icon" title={node.kind}>
          {kindIcon(node.kind)}
        </span>
        <span className="frame-kind">{node.kind}</span>
        <span className="frame-name">{node.name}</span>
        <Pins pins={pins} />
      </div>
      <div className="frame-sub" title={frameHeadline(node, run)}>
        {frameHeadline(node, run)}
        {run && run.items > 0 && node.kind === "map" && (
          <>
            {" · "}
            <ItemCounts run={run} />
          </>
        )}
        {collapsed && run && run.executions.length > 0 && node.kind !== "map" && !run.endedAt && (
          <span className={`state-label state-${state}`}> · {state}</span>
        )}
        {collapsed && run?.endedAt && (
          <span className="reached-mark" data-testid="ended-inside">
            {" "}
            · run ended at {run.endedAt}
          </span>
        )}
        {collapsed && <span className="muted"> · collapsed</span>}
      </div>
    </div>
  );
}

export const nodeTypes = {
  card: memo(CardNode),
  pill: memo(PillNode),
  frame: memo(FrameNode),
};

/** Which component draws a model node. */
export function drawnType(node: ModelNode): keyof typeof nodeTypes {
  if (node.group) return "frame";
  return ["step", "verifier", "tool", "script", "router"].includes(node.kind) ? "card" : "pill";
}
