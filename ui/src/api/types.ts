// The wire shapes of the run API (`docs/run-api.md`): what the server answers, as TypeScript.
// Fields the contract marks optional stay optional here; the UI never assumes more than that.

/** A run's phase or final status as the server names it (`running`, `succeeded`, `failed`, …). */
export type RunStatusName = string;

export interface TokenTotals {
  input: number;
  output: number;
}

export interface RunSummary {
  runId: string;
  title: string;
  template?: string;
  kind: string;
  status: RunStatusName;
  startedAtMs: number;
  endedAtMs?: number;
  tokens: TokenTotals;
  costUsd?: number;
  predecessor?: string;
  successor?: string;
}

/** How a run ended: the ledger's terminal result. */
export type TerminalResult =
  | { status: "succeeded"; output?: unknown }
  | { status: "failed"; reason: string };

/** A settled worker outcome, tagged by `status` as the ledger stores it. */
export type WorkerOutcome =
  | { status: "verified"; output?: unknown; artifacts?: unknown[] }
  | {
      status: "verifier";
      output?: unknown;
      signals?: Record<string, string>;
      diagnostic?: unknown;
      artifacts?: unknown[];
    }
  | { status: "error"; code: string; reason?: string };

/** Where one execution stands: `running`, `settled` or `voided` (other names are tolerated). */
export type ExecutionStateName = string;

export interface ExecutionSummary {
  id: number | string;
  node: string;
  path?: string[];
  attempt: number;
  /** The round of the innermost loop this execution belongs to (1 = first round). */
  iteration?: number;
  /** Map item index (or indices, outermost first) when the node sits inside a map. */
  item?: number | number[];
  state: ExecutionStateName;
  outcome?: WorkerOutcome;
  startedAtMs?: number;
  endedAtMs?: number;
  tokens?: TokenTotals;
  costUsd?: number;
  voidReason?: string;
  /** For a GaP run: the journaled body this execution stands for (there is no execution id). */
  gap?: GapBody;
}

/** One visit of a GaP run's tool, script or router body (`GET /runs/{run}/gap-bodies`). */
export interface GapBody {
  /** `node` at the top level, `subgraph.node` inside one. */
  node: string;
  visit: number;
  nodeType: string;
  phase: "running" | "succeeded" | "failed" | "cancelled";
  startedAtMs: number;
  startedCursor: string;
  endedAtMs?: number;
  settledCursor?: string;
  output?: unknown;
  omittedBytes?: number;
  error?: string;
  reusedFrom?: string;
}

/** One execution whose outcome led a failed run to its end (`RunCause.nodes`). */
export interface CauseNode {
  node: string;
  execution?: string;
  executionId?: number;
  /** `error` or `verifier`. */
  status: string;
  /** The error channel (`crash`, `refusal`, `malformed`, `timeout`). */
  channel?: string;
  reason?: string;
  signals?: Record<string, string>;
  diagnostic?: string;
  message?: string;
}

/** Why a finished run failed, for failures the graph routed to. */
export interface RunCause {
  reason: string;
  nodes: CauseNode[];
}

/** The worktree a `--workspace worktree` run works in. */
export interface RetainedWorkspace {
  path: string;
  worktreeOf: string;
  exists: boolean;
}

/** Where a finished GaP run ended (`RunStatus.gapEnd`): the end node it reached, or the node whose failure ended it. */
export interface GapEnd {
  exitStatus?: "success" | "failure";
  endNode?: string;
  /** The full node id (`subgraph.node`). */
  failedNode?: string;
}

export interface RunStatus extends RunSummary {
  cursor: string;
  executions: ExecutionSummary[];
  result?: TerminalResult;
  cause?: RunCause;
  gapEnd?: GapEnd;
  worktree?: RetainedWorkspace;
}

/** One checkpoint of a run's workspace (`GET /runs/{run}/checkpoints`). */
export interface CheckpointInfo {
  id: number;
  /** What it was taken before: a writing node, or a parallel group holding one. */
  before: { kind: string; name: string };
  takenAtMs: number;
  filesChanged: number;
  bytesChanged: number;
  commit: string;
  tree: string;
  reference: string;
  nextExecution: number;
  /** False once `trellis prune` (or a succeeded chain) deleted its reference. */
  kept?: boolean;
}

/** One page of a run's checkpoints, oldest first; `nextAfter` asks for the next. */
export interface CheckpointPage {
  runId: string;
  checkpoints: CheckpointInfo[];
  nextAfter?: number;
}

/** What `POST /runs/{run}/discard-workspace` did. */
export interface DiscardedWorkspace {
  runId: string;
  path: string;
  removed: boolean;
}

export interface WatchCounts {
  active: number;
  settled: number;
}

/** One event of `GET /runs/{run}/watch`: a ledger event as the page needs it. */
export interface WatchEvent {
  cursor: string;
  type: string;
  atMs?: number;
  execution?: ExecutionSummary;
  counts?: WatchCounts;
  terminalResult?: TerminalResult;
  status?: RunStatusName;
  tokens?: TokenTotals;
  costUsd?: number;
}

export type LogLevel = "error" | "warn" | "info" | "debug";

export interface LogLine {
  cursor: string;
  execution?: number | string | null;
  node?: string | null;
  level: LogLevel | string;
  source?: string;
  message: string;
  atMs: number;
}

export interface WorkerBinding {
  kind?: string;
  harness?: string;
  provider?: string;
  model?: string;
  effort?: string;
  worker?: string;
  /** Names of environment variables the binding may read — names only, never values. */
  environment?: string[];
  command?: string[];
}

export interface AttemptDetail {
  attempt: number;
  state: ExecutionStateName;
  outcome?: WorkerOutcome;
  startedAtMs?: number;
  endedAtMs?: number;
}

export interface ExecutionDetail extends ExecutionSummary {
  input?: unknown;
  output?: unknown;
  signals?: Record<string, string>;
  diagnostic?: unknown;
  attempts?: AttemptDetail[];
  binding?: WorkerBinding;
  worker?: string;
  /** Other attempts of the same node occurrence (execution ids). */
  siblings?: number[];
}

/** The compiled shape of one node, as `layout` lists it. */
export interface LayoutNode {
  id: string;
  name: string;
  kind: string;
  parent?: string | null;
  maxIterations?: number;
  maxItems?: number;
  over?: unknown;
}

export interface Bounds {
  maxExecutions?: number;
  peakConcurrency?: number;
}

export type DocumentKind = "graphspec" | "gap";

export interface RunGraph {
  kind: DocumentKind;
  graph: unknown;
  /** The run's input as submitted (a GaP run's inputs). */
  input?: unknown;
  identity?: string;
  bounds?: Bounds;
  layout?: { nodes: LayoutNode[] } | LayoutNode[];
}

export interface Diagnostic {
  code: string;
  message: string;
  path?: string | string[];
  /** The model id of the document location the path points at (`root/children/1/otherwise`). */
  at?: string;
  nodes?: string[];
  severity?: string;
}

export type ValidationReport =
  | {
      status: "verified";
      kind?: DocumentKind;
      identity?: string;
      bounds?: Bounds;
      compiledIr?: unknown;
      layout?: unknown;
      diagnostics?: Diagnostic[];
    }
  | { status: "rejected"; kind?: DocumentKind; diagnostics: Diagnostic[] }
  | { status: "unparseable"; kind?: DocumentKind; error: string };

export interface TemplateInfo {
  name: string;
  description: string;
}

export interface TemplateDetail extends TemplateInfo {
  graph: unknown;
  layout?: unknown;
}

/** The body of an answer that is not 2xx. */
/** A run a listing left out because its stored rows cannot be read, and why. */
export interface SkippedRun {
  run: string;
  reason: string;
}

export interface Problem {
  code: string;
  message: string;
  details?: unknown;
}
