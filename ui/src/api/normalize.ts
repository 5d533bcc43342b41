// Reads the runtime's JSON shapes (docs/run-api.md: `status` objects, `tokenUsage`, execution
// `phase`, log `record`s, diagnostic `relatedNodes`) into the page's own types. Shapes already
// in the page's form pass through, so the page reads either.
import type {
  CauseNode,
  GapEnd,
  CheckpointInfo,
  CheckpointPage,
  Diagnostic,
  ExecutionDetail,
  ExecutionSummary,
  LogLine,
  RunCause,
  RunStatus,
  RunSummary,
  SkippedRun,
  TerminalResult,
  TokenTotals,
  ValidationReport,
  WatchCounts,
  WatchEvent,
  WorkerOutcome,
} from "./types";

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined);
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** `{inputTokens, outputTokens, costUsd}` or `{input, output}` as totals, plus the cost. */
function tokensOf(value: unknown): { tokens?: TokenTotals; costUsd?: number } {
  if (!isObject(value)) return {};
  const input = num(value.inputTokens) ?? num(value.input);
  const output = num(value.outputTokens) ?? num(value.output);
  return {
    tokens: input !== undefined || output !== undefined ? { input: input ?? 0, output: output ?? 0 } : undefined,
    costUsd: num(value.costUsd),
  };
}

/** The run's status word from a `status` observation object (or the word itself). */
export function statusWord(status: unknown): { word: string; result?: TerminalResult } {
  if (typeof status === "string") return { word: status };
  if (!isObject(status)) return { word: "unknown" };
  const phase = str(status.phase) ?? "unknown";
  const result = isObject(status.terminalResult) ? (status.terminalResult as unknown as TerminalResult) : undefined;
  if (phase !== "finished" || !result) return { word: phase };
  if (result.status === "succeeded") return { word: "succeeded", result };
  return { word: result.reason === "force_stopped" ? "force_stopped" : "failed", result };
}

export function runSummary(raw: unknown): RunSummary {
  const run = isObject(raw) ? raw : {};
  const { word } = statusWord(run.status);
  const usage = tokensOf(run.tokenUsage ?? run.tokens);
  return {
    runId: str(run.runId) ?? "?",
    title: str(run.title) ?? "",
    template: str(run.template),
    kind: str(run.kind) ?? "graphspec",
    status: word,
    startedAtMs: num(run.startedAtMs) ?? num(run.createdAtMs) ?? 0,
    endedAtMs: num(run.finishedAtMs) ?? num(run.endedAtMs),
    tokens: usage.tokens ?? { input: 0, output: 0 },
    costUsd: num(run.costUsd) ?? usage.costUsd,
    predecessor: str(run.predecessor),
    successor: str(run.successor),
  };
}

const PHASE_STATE: Record<string, string> = { active: "running", completed: "settled", voided: "voided" };

export function executionSummary(raw: unknown): ExecutionSummary {
  const execution = isObject(raw) ? raw : {};
  const indices = Array.isArray(execution.mapIndices) ? execution.mapIndices.filter((index) => typeof index === "number") : undefined;
  const phase = str(execution.phase);
  const usage = tokensOf(execution.tokenUsage ?? execution.tokens);
  const outcome = (execution.outcome ?? execution.result) as WorkerOutcome | undefined;
  return {
    id: (num(execution.id) ?? str(execution.id) ?? "?") as number | string,
    node: str(execution.node) ?? "?",
    attempt: num(execution.attempt) ?? 1,
    iteration: num(execution.iteration),
    item: indices && indices.length > 0 ? (indices.length === 1 ? indices[0] : indices) : (execution.item as ExecutionSummary["item"]),
    state: (phase ? PHASE_STATE[phase] ?? phase : str(execution.state)) ?? "running",
    outcome: isObject(outcome) ? outcome : undefined,
    startedAtMs: num(execution.startedAtMs),
    endedAtMs: num(execution.endedAtMs),
    tokens: usage.tokens,
    costUsd: num(execution.costUsd) ?? usage.costUsd,
    voidReason: str(execution.voidReason) ?? str(execution.settledBy),
  };
}

function gapEnd(raw: unknown): GapEnd | undefined {
  if (!isObject(raw)) return undefined;
  const exitStatus = raw.exitStatus === "success" || raw.exitStatus === "failure" ? raw.exitStatus : undefined;
  return { exitStatus, endNode: str(raw.endNode), failedNode: str(raw.failedNode) };
}

export function runStatus(raw: unknown): RunStatus {
  const run = isObject(raw) ? raw : {};
  const { result } = statusWord(run.status);
  return {
    ...runSummary(run),
    cursor: str(run.cursor) ?? str(run.atCursor) ?? "",
    executions: (Array.isArray(run.executions) ? run.executions : []).map(executionSummary),
    result: (run.result as TerminalResult | undefined) ?? result,
    cause: runCause(run.cause),
    gapEnd: gapEnd(run.gapEnd),
    worktree: isObject(run.worktree) && typeof run.worktree.path === "string"
      ? { path: run.worktree.path, worktreeOf: str(run.worktree.worktreeOf) ?? "", exists: run.worktree.exists === true }
      : undefined,
  };
}

/** A failed run's `cause`, keeping only nodes that name themselves. */
export function runCause(raw: unknown): RunCause | undefined {
  if (!isObject(raw) || !Array.isArray(raw.nodes)) return undefined;
  const nodes: CauseNode[] = raw.nodes.filter(isObject).flatMap((node) => {
    const name = str(node.node);
    if (!name) return [];
    const signals = isObject(node.signals)
      ? Object.fromEntries(Object.entries(node.signals).filter((entry): entry is [string, string] => typeof entry[1] === "string"))
      : undefined;
    return [{
      node: name,
      execution: str(node.execution),
      executionId: num(node.executionId),
      status: str(node.status) ?? "error",
      channel: str(node.channel),
      reason: str(node.reason),
      signals,
      diagnostic: str(node.diagnostic),
      message: str(node.message),
    }];
  });
  return { reason: str(raw.reason) ?? "", nodes };
}

/** A page of checkpoints, dropping entries without an id. */
export function checkpointPage(raw: unknown): CheckpointPage {
  const page = isObject(raw) ? raw : {};
  const checkpoints: CheckpointInfo[] = (Array.isArray(page.checkpoints) ? page.checkpoints : [])
    .filter(isObject)
    .flatMap((entry) => {
      const id = num(entry.id);
      if (id === undefined) return [];
      const before = isObject(entry.before) ? entry.before : {};
      return [{
        id,
        before: { kind: str(before.kind) ?? "node", name: str(before.name) ?? "?" },
        takenAtMs: num(entry.takenAtMs) ?? 0,
        filesChanged: num(entry.filesChanged) ?? 0,
        bytesChanged: num(entry.bytesChanged) ?? 0,
        commit: str(entry.commit) ?? "",
        tree: str(entry.tree) ?? "",
        reference: str(entry.reference) ?? "",
        nextExecution: num(entry.nextExecution) ?? 0,
      }];
    });
  return { runId: str(page.runId) ?? "", checkpoints, nextAfter: num(page.nextAfter) };
}

export function executionDetail(raw: unknown): ExecutionDetail {
  const detail = isObject(raw) ? raw : {};
  const summary = executionSummary(detail);
  // `result` is the whole outcome (with output and diagnostic); `outcome` may be its summary.
  const outcome = isObject(detail.result) ? (detail.result as WorkerOutcome) : summary.outcome;
  const binding = isObject(detail.binding) ? detail.binding : undefined;
  const siblings = Array.isArray(detail.siblings) ? detail.siblings.filter((id): id is number => typeof id === "number") : undefined;
  return {
    ...summary,
    input: detail.input,
    output: "output" in detail ? detail.output : outcome && "output" in outcome ? outcome.output : undefined,
    signals: (detail.signals as Record<string, string> | undefined) ?? (outcome?.status === "verifier" ? outcome.signals : undefined),
    diagnostic: "diagnostic" in detail ? detail.diagnostic : outcome?.status === "verifier" ? outcome.diagnostic : undefined,
    worker: str(detail.worker),
    attempts: Array.isArray(detail.attempts) ? (detail.attempts as ExecutionDetail["attempts"]) : undefined,
    siblings,
    binding: binding && {
      kind: str(binding.kind),
      harness: str(binding.harness),
      provider: str(binding.provider),
      model: str(binding.model),
      effort: str(binding.effort),
      command: Array.isArray(binding.command) ? binding.command.map(String) : undefined,
      environment: Array.isArray(binding.connections)
        ? binding.connections.map(String)
        : Array.isArray(binding.environment)
          ? binding.environment.map(String)
          : undefined,
    },
  };
}

/** The execution counts a watch event carries (`{"active", "settled"}`), if it has them. */
function watchCounts(raw: unknown): WatchCounts | undefined {
  if (!isObject(raw)) return undefined;
  const active = num(raw.active);
  const settled = num(raw.settled);
  return active === undefined || settled === undefined ? undefined : { active, settled };
}

export function watchEvent(raw: unknown): WatchEvent {
  const event = isObject(raw) ? raw : {};
  const { word, result } = statusWord(event.status);
  const type = str(event.type) ?? str(event.event) ?? "event";
  const usage = tokensOf(event.tokenUsage ?? event.tokens);
  return {
    cursor: str(event.cursor) ?? "",
    type,
    atMs: num(event.atMs),
    execution: isObject(event.execution) ? executionSummary(event.execution) : undefined,
    counts: watchCounts(event.counts),
    terminalResult: (event.terminalResult as TerminalResult | undefined) ?? result,
    status: event.status === undefined ? undefined : word,
    tokens: usage.tokens,
    costUsd: usage.costUsd,
  };
}

export function logLine(raw: unknown): LogLine {
  const line = isObject(raw) ? raw : {};
  const record = isObject(line.record) ? line.record : line;
  return {
    cursor: str(line.cursor) ?? "",
    execution: (num(line.executionId) ?? line.execution ?? null) as LogLine["execution"],
    node: str(line.node) ?? null,
    level: str(record.level) ?? "info",
    source: str(line.stream) ?? str(line.source),
    message: str(record.message) ?? "",
    atMs: num(line.atMs) ?? 0,
  };
}

/** A diagnostic's location as breadcrumb segments (`run`, `worker`, `attempts`, `[0]`). */
function pathSegments(path: unknown): string[] | string | undefined {
  if (typeof path === "string") return path;
  if (!Array.isArray(path)) return undefined;
  return path.map((segment) => {
    if (typeof segment === "string") return segment;
    if (isObject(segment)) {
      if (typeof segment.index === "number") return `[${segment.index}]`;
      return str(segment.name) ?? "?";
    }
    return String(segment);
  });
}

/**
 * Where in the document a diagnostic points, as the graph model names locations
 * (`root/children/1/otherwise`): its field and index segments, without the node names.
 */
function documentLocation(path: unknown): string | undefined {
  if (!Array.isArray(path)) return undefined;
  const parts: string[] = [];
  for (const segment of path) {
    if (!isObject(segment)) return undefined;
    if (segment.kind === "field" && typeof segment.name === "string") parts.push(segment.name);
    else if (segment.kind === "index" && typeof segment.index === "number") parts.push(String(segment.index));
  }
  return parts.length > 0 ? parts.join("/") : undefined;
}

/** The node a GaP issue's location names (`workflow.nodes.NAME`, `subgraphs.S.nodes.NAME`,
 * `workflow.conditional_edges.NAME…`), if any. */
function gapIssueNode(location: string): string | undefined {
  const parts = location.split(".");
  const at = parts.findIndex((part) => part === "nodes" || part === "conditional_edges");
  return at >= 0 ? parts[at + 1] : undefined;
}

/** A GaP validation issue (`{severity, node_id, field, message}`) as a diagnostic: the rule id
 * that ends its message is the code. */
function gapIssue(item: Json): Diagnostic {
  const message = str(item.message) ?? "";
  const location = str(item.node_id) ?? "";
  const node = gapIssueNode(location);
  return {
    code: /\(([A-Z]+\d+)\)$/.exec(message)?.[1] ?? str(item.severity) ?? "?",
    message,
    path: location ? location.split(".") : undefined,
    nodes: node ? [node] : [],
    severity: str(item.severity),
  };
}

export function diagnostic(raw: unknown): Diagnostic {
  const item = isObject(raw) ? raw : {};
  if (typeof item.node_id === "string") return gapIssue(item);
  const nodes = Array.isArray(item.relatedNodes) ? item.relatedNodes : Array.isArray(item.nodes) ? item.nodes : [];
  return {
    code: str(item.code) ?? "?",
    message: str(item.message) ?? "",
    path: pathSegments(item.path),
    at: documentLocation(item.path),
    nodes: nodes.map(String),
    severity: str(item.severity),
  };
}

export function validationReport(raw: unknown): ValidationReport {
  const report = isObject(raw) ? raw : {};
  // GraphSpec reports list `diagnostics`; GaP reports list `issues` (warnings included).
  const listed = Array.isArray(report.diagnostics) ? report.diagnostics : Array.isArray(report.issues) ? report.issues : [];
  const diagnostics = listed.map(diagnostic);
  switch (report.status) {
    case "verified":
      return { ...(report as object), status: "verified", diagnostics } as ValidationReport;
    case "rejected":
      return { status: "rejected", diagnostics };
    default:
      return { status: "unparseable", error: str(report.error) ?? JSON.stringify(report).slice(0, 500) };
  }
}

/** The runs a listing left out (`skipped`: damaged rows), each with its reason. */
export function skippedRuns(raw: unknown): SkippedRun[] {
  if (!Array.isArray(raw)) return [];
  return raw.filter(isObject).map((entry) => ({
    run: str(entry.run) ?? "?",
    reason: str(entry.reason) ?? "",
  }));
}
