// Folds a run's executions and watch events into what the page draws: per-node states, rounds,
// map item counts. Pure functions, so the replay scrubber can fold any prefix of the events.
import type {
  ExecutionSummary,
  RunStatus,
  TerminalResult,
  TokenTotals,
  WatchEvent,
} from "../api/types";
import type { GraphModel } from "../graph/model";
import { cursorSequence } from "./gapBodies";

export type NodeStateName =
  | "pending"
  | "running"
  | "succeeded"
  | "accepted"
  | "rejected"
  | "failed"
  | "void";

export const NODE_STATES: NodeStateName[] = [
  "pending",
  "running",
  "succeeded",
  "accepted",
  "rejected",
  "failed",
  "void",
];

/** Signal labels read as a rejection; any other label of a verifier counts as acceptance. */
const REJECTING_LABELS = new Set([
  "rejected",
  "reject",
  "denied",
  "fail",
  "failed",
  "changes_requested",
  "blocked",
  "no",
]);

export interface Classified {
  state: NodeStateName;
  /** The error channel of a failed execution (`timeout`, `crash`, …). */
  channel?: string;
}

/** What one execution means for its node's colour. */
export function classify(execution: ExecutionSummary): Classified {
  const state = execution.state.toLowerCase();
  const outcome = execution.outcome;
  if (state === "voided" || state === "void") return { state: "void" };
  if (outcome?.status === "error") return { state: "failed", channel: outcome.code };
  if (outcome?.status === "verifier") {
    const labels = Object.values(outcome.signals ?? {});
    const rejected = labels.some((label) => REJECTING_LABELS.has(String(label).toLowerCase()));
    return { state: rejected ? "rejected" : "accepted" };
  }
  if (outcome?.status === "verified") return { state: "succeeded" };
  if (state === "running" || state === "active" || state === "started") return { state: "running" };
  if ((NODE_STATES as string[]).includes(state)) return { state: state as NodeStateName };
  if (state === "settled" || state === "completed") return { state: "succeeded" };
  return { state: "pending" };
}

export interface ExecutionView extends Omit<ExecutionSummary, "state">, Classified {
  key: string;
  /** The state as the server named it (`running`, `settled`, `voided`, …). */
  rawState: string;
  /** The loop round it ran in (1-based), as given or counted from earlier first attempts. */
  round: number;
  /** `"3"` or `"3.1"` for nested maps; undefined outside maps. */
  itemKey?: string;
}

export interface RunFold {
  executions: Map<string, ExecutionSummary>;
  result?: TerminalResult;
  status?: string;
  cursor?: string;
  tokens?: TokenTotals;
  costUsd?: number;
  endedAtMs?: number;
  /** The last event folded, in words, for the replay scrubber. */
  lastEvent?: string;
}

export function foldFromStatus(status: RunStatus): RunFold {
  return {
    executions: new Map(status.executions.map((execution) => [String(execution.id), execution])),
    result: status.result,
    status: status.status,
    cursor: status.cursor,
    tokens: status.tokens,
    costUsd: status.costUsd,
    endedAtMs: status.endedAtMs,
  };
}

export function emptyFold(): RunFold {
  return { executions: new Map() };
}

/** The run status a terminal result implies. */
export function statusOfResult(result: TerminalResult): string {
  if (result.status === "succeeded") return "succeeded";
  return result.reason === "force_stopped" ? "force_stopped" : "failed";
}

/** Applies one watch event; returns a new fold (the old one is left untouched). */
export function applyEvent(fold: RunFold, event: WatchEvent): RunFold {
  const next: RunFold = { ...fold, executions: event.execution ? new Map(fold.executions) : fold.executions };
  applyInPlace(next, event);
  return next;
}

/** The fold after the first `count` events, from nothing: what the replay scrubber shows. */
export function replay(events: WatchEvent[], count: number): RunFold {
  const fold = emptyFold();
  for (const event of events.slice(0, count)) applyInPlace(fold, event);
  return fold;
}

function applyInPlace(fold: RunFold, event: WatchEvent): void {
  fold.cursor = event.cursor ?? fold.cursor;
  if (event.execution) {
    const key = String(event.execution.id);
    const merged: ExecutionSummary = { ...fold.executions.get(key), ...event.execution };
    if (merged.startedAtMs === undefined && event.atMs !== undefined) merged.startedAtMs = event.atMs;
    const settled = merged.state !== "running" && merged.state !== "active";
    if (settled && merged.endedAtMs === undefined && event.atMs !== undefined) {
      merged.endedAtMs = event.atMs;
    }
    fold.executions.set(key, merged);
  }
  if (event.type === "run_started") fold.status = "running";
  if (event.type === "force_stop_requested") fold.status = "stopping";
  if (event.status) fold.status = event.status;
  if (event.tokens) fold.tokens = event.tokens;
  if (event.costUsd !== undefined) fold.costUsd = event.costUsd;
  if (event.terminalResult) {
    fold.result = event.terminalResult;
    fold.status = statusOfResult(event.terminalResult);
    fold.endedAtMs = event.atMs ?? fold.endedAtMs;
  }
  fold.lastEvent = describeEvent(event);
}

/** An event in words: "worker started (round 2)", "acceptance rejected", "run succeeded". */
export function describeEvent(event: WatchEvent): string {
  const execution = event.execution;
  if (event.terminalResult) {
    const result = event.terminalResult;
    return result.status === "succeeded" ? "Run succeeded" : `Run failed: ${result.reason}`;
  }
  if (execution) {
    const { state, channel } = classify(execution);
    const where = execution.item !== undefined ? ` [item ${itemKeyOf(execution.item)}]` : "";
    const attempt = execution.attempt > 1 ? ` (attempt ${execution.attempt})` : "";
    const verb = state === "running" ? "started" : state === "failed" ? `failed (${channel})` : state;
    return `${execution.node}${where} ${verb}${attempt}`;
  }
  return event.type.replace(/_/g, " ");
}

export function itemKeyOf(item: number | number[] | undefined): string | undefined {
  if (item === undefined) return undefined;
  return Array.isArray(item) ? item.join(".") : String(item);
}

/** Start order: by execution id, or for GaP bodies (which have none) by the event that started them. */
const executionOrder = (a: ExecutionSummary, b: ExecutionSummary) => {
  if (a.gap && b.gap) return cursorSequence(a.gap.startedCursor) - cursorSequence(b.gap.startedCursor);
  return Number(a.id) - Number(b.id) || String(a.id).localeCompare(String(b.id));
};

/** Every execution, classified and with its round, in start order. */
export function executionViews(fold: RunFold): ExecutionView[] {
  const ordered = [...fold.executions.values()].sort(executionOrder);
  const firstAttempts = new Map<string, number>();
  return ordered.map((execution) => {
    const itemKey = itemKeyOf(execution.item);
    const lane = `${execution.node}\u0000${itemKey ?? ""}`;
    if (execution.attempt <= 1) firstAttempts.set(lane, (firstAttempts.get(lane) ?? 0) + 1);
    const counted = firstAttempts.get(lane) ?? 1;
    return {
      ...execution,
      ...classify(execution),
      rawState: execution.state,
      key: String(execution.id),
      round: execution.iteration ?? counted,
      itemKey,
    };
  });
}

export type StateCounts = Record<NodeStateName, number>;

export function zeroCounts(): StateCounts {
  return { pending: 0, running: 0, succeeded: 0, accepted: 0, rejected: 0, failed: 0, void: 0 };
}

export interface NodeRunState {
  state: NodeStateName;
  channel?: string;
  latest?: ExecutionView;
  executions: ExecutionView[];
  /** For map bodies and frames: the state of each item's latest execution, counted. */
  counts: StateCounts;
  /** Distinct map items seen (frames inside maps, map frames). */
  items: number;
  /** The highest loop round seen under a loop frame. */
  rounds: number;
  tokens: TokenTotals;
  costUsd?: number;
  /** A terminal the finished run reached. */
  reached?: boolean;
  /** For a frame: the name of the reached terminal inside it. */
  endedAt?: string;
}

const SEVERITY: NodeStateName[] = [
  "running",
  "failed",
  "rejected",
  "void",
  "accepted",
  "succeeded",
  "pending",
];

/** The state a group of states shows: running wins, then failures, then successes. */
function dominant(counts: StateCounts): NodeStateName {
  for (const state of SEVERITY) if (counts[state] > 0) return state;
  return "pending";
}

function newState(): NodeRunState {
  return {
    state: "pending",
    executions: [],
    counts: zeroCounts(),
    items: 0,
    rounds: 0,
    tokens: { input: 0, output: 0 },
  };
}

/**
 * The state of every model node: leaves from their executions (by document name), frames from
 * everything under them. Map frames count items; loop frames report the highest round.
 */
export function nodeStates(model: GraphModel, views: ExecutionView[]): Map<string, NodeRunState> {
  const states = new Map<string, NodeRunState>();
  const byName = new Map<string, ExecutionView[]>();
  for (const view of views) {
    const list = byName.get(view.node);
    if (list) list.push(view);
    else byName.set(view.node, [view]);
  }

  const visit = (id: string, mapDepth: number): NodeRunState => {
    const node = model.nodes.get(id);
    const state = newState();
    states.set(id, state);
    if (!node) return state;
    if (!node.group) {
      state.executions = node.kind === "decision" ? [] : (byName.get(node.runName ?? node.name) ?? []);
    } else {
      const innerDepth = node.kind === "map" ? mapDepth + 1 : mapDepth;
      for (const child of node.children) state.executions.push(...visit(child, innerDepth).executions);
      state.executions.sort(executionOrder);
    }
    summarize(state, node.kind === "map" ? mapDepth + 1 : mapDepth, node.group);
    if (node.kind === "loop") {
      state.rounds = state.executions.reduce((most, view) => Math.max(most, view.round), 0);
      // A loop stands as its last round does: earlier rounds' rejections were repaired.
      if (state.state !== "running" && state.rounds > 0) {
        const last = zeroCounts();
        for (const view of state.executions) if (view.round === state.rounds) last[view.state] += 1;
        state.state = dominant(last);
      }
    }
    return state;
  };
  for (const root of model.roots) visit(root, 0);
  return states;
}

/** Fills the counts, latest execution, tokens and state of one node from its executions. */
function summarize(state: NodeRunState, mapDepth: number, isGroup: boolean): void {
  // One entry per map item (or one in all outside maps): its latest execution decides.
  const latestPerItem = new Map<string, ExecutionView>();
  for (const view of state.executions) {
    const prefix = mapDepth > 0 ? itemPrefix(view, mapDepth) : "";
    latestPerItem.set(prefix, view);
    state.tokens.input += view.tokens?.input ?? 0;
    state.tokens.output += view.tokens?.output ?? 0;
    if (view.costUsd !== undefined) state.costUsd = (state.costUsd ?? 0) + view.costUsd;
  }
  for (const view of latestPerItem.values()) state.counts[view.state] += 1;
  state.items = mapDepth > 0 ? latestPerItem.size : 0;
  state.latest = state.executions[state.executions.length - 1];
  if (isGroup || mapDepth > 0) {
    const running = state.executions.some((view) => view.state === "running");
    state.state = running ? "running" : dominant(state.counts);
  } else if (state.latest) {
    state.state = state.latest.state;
    state.channel = state.latest.channel;
  }
}

function itemPrefix(view: ExecutionView, depth: number): string {
  if (view.item === undefined) return "";
  const indices = Array.isArray(view.item) ? view.item : [view.item];
  return indices.slice(0, depth).join(".");
}
