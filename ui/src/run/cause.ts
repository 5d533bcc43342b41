// A failed run's classified cause as lines people read, the same as `trellis status` prints:
// `worker: refusal (authentication_required) — Claude Code is not signed in…`.
import type { CauseNode, RunCause } from "../api/types";

/** `node: channel (reason) — message`, or `node: verdict=rejected — diagnostic`. */
export function causeLine(node: CauseNode): string {
  const signals = Object.entries(node.signals ?? {});
  let head = `${node.node}: `;
  if (node.channel) head += node.channel;
  else if (signals.length === 0) head += node.status;
  else head += signals.map(([field, label]) => `${field}=${label}`).join(", ");
  if (node.reason) head += ` (${node.reason})`;
  const detail = node.diagnostic ?? node.message;
  return detail ? `${head} — ${detail}` : head;
}

export function causeLines(cause: RunCause | undefined): string[] {
  return cause ? cause.nodes.map(causeLine) : [];
}
