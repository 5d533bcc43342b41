// A GaP run's journaled bodies as executions, so its graph, timeline and inspector read them
// like a GraphSpec run's: one execution per visit, the visit as its round.
import type { ExecutionSummary, GapBody } from "../api/types";

/** The sequence number of a cursor (`c1:42` → 42), for placing bodies on a replay. */
export function cursorSequence(cursor: string | undefined): number {
  const digits = /(\d+)$/.exec(cursor ?? "")?.[1];
  return digits === undefined ? Number.NaN : Number.parseInt(digits, 10);
}

/** One body as an execution summary (its key is `node#visit`, there being no execution id). */
export function gapExecution(body: GapBody): ExecutionSummary {
  const base: ExecutionSummary = {
    id: `${body.node}#${body.visit}`,
    node: body.node,
    attempt: 1,
    iteration: body.visit + 1,
    state: body.phase === "running" ? "running" : body.phase === "cancelled" ? "voided" : "settled",
    startedAtMs: body.startedAtMs,
    endedAtMs: body.endedAtMs,
    gap: body,
  };
  if (body.phase === "succeeded") base.outcome = { status: "verified", output: body.output };
  if (body.phase === "failed") base.outcome = { status: "error", code: "failed", reason: body.error };
  if (body.phase === "cancelled") base.voidReason = "cancelled";
  return base;
}

/** The bodies as they stood right after the event at `cursor`: later ones left out, later settlements undone. */
export function bodiesAt(bodies: GapBody[], cursor: string | undefined): GapBody[] {
  const at = cursorSequence(cursor);
  if (Number.isNaN(at)) return [];
  return bodies
    .filter((body) => cursorSequence(body.startedCursor) <= at)
    .map((body) =>
      body.settledCursor !== undefined && cursorSequence(body.settledCursor) > at
        ? { node: body.node, visit: body.visit, nodeType: body.nodeType, phase: "running", startedAtMs: body.startedAtMs, startedCursor: body.startedCursor }
        : body,
    );
}

/** The executions map a fold holds, from bodies. */
export function gapExecutions(bodies: GapBody[]): Map<string, ExecutionSummary> {
  return new Map(bodies.map((body) => {
    const execution = gapExecution(body);
    return [String(execution.id), execution];
  }));
}

/** A GaP body event in words ("stub.work started", "route failed"); undefined for other events. */
export function describeGapEvent(bodies: GapBody[], event: { type: string; cursor: string }): string | undefined {
  if (!event.type.startsWith("gap_node")) return undefined;
  const at = cursorSequence(event.cursor);
  const started = bodies.find((body) => cursorSequence(body.startedCursor) === at);
  if (started) return `${started.node} started${started.visit > 0 ? ` (visit ${started.visit + 1})` : ""}`;
  const settled = bodies.find((body) => body.settledCursor !== undefined && cursorSequence(body.settledCursor) === at);
  if (settled) return `${settled.node} ${settled.phase}`;
  return undefined;
}
