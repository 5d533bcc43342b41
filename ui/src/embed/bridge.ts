// The message bridge between the embeddable run view (`embed.html`) and the page that frames
// it: version 1 envelopes `{trellis: 1, type, ...}` over `postMessage`, only with the parent
// window and only with the origins the server lets frame it (docs/embedding.md).

/** The bridge's version; a parent speaking another is told so and otherwise ignored. */
export const BRIDGE_VERSION = 1;

/** What the run view tells its parent. */
export type OutgoingMessage =
  | { type: "ready"; runId: string | null }
  | { type: "run-state"; runId: string; status: string }
  | { type: "select-node"; runId: string; node: string | null }
  | { type: "error"; code: "unsupported_version" | "unknown_command" | "bad_command"; message: string };

/** What the parent may ask. */
export type Command = { type: "open-run"; runId: string } | { type: "ping" };

/** A run id as the run API names runs (no path characters). */
const RUN_ID = /^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$/;

/** The origins the server wrote into the page as allowed to frame it. */
export function allowedParents(): string[] {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="trellis-embed-origins"]');
  return (meta?.content ?? "").split(/\s+/).filter(Boolean);
}

/**
 * Reads a message event: the command, an error to answer, or nothing (not for this bridge:
 * another window, an origin not allowed, not an envelope).
 */
export function readCommand(
  event: { origin: string; source: unknown; data: unknown },
  parent: unknown,
  allowed: readonly string[],
): { command: Command } | { error: OutgoingMessage } | undefined {
  if (event.source !== parent || !allowed.includes(event.origin)) return undefined;
  const data = event.data as Record<string, unknown> | null;
  if (typeof data !== "object" || data === null || !("trellis" in data)) return undefined;
  if (data.trellis !== BRIDGE_VERSION) {
    return {
      error: { type: "error", code: "unsupported_version", message: `this run view speaks bridge version ${BRIDGE_VERSION}` },
    };
  }
  if (data.type === "ping") return { command: { type: "ping" } };
  if (data.type === "open-run") {
    if (typeof data.runId === "string" && RUN_ID.test(data.runId)) return { command: { type: "open-run", runId: data.runId } };
    return { error: { type: "error", code: "bad_command", message: "open-run needs a runId" } };
  }
  return { error: { type: "error", code: "unknown_command", message: `unknown command ${JSON.stringify(String(data.type))}` } };
}

/** Sends `message` to the parent, at each allowed origin (only the parent's own receives it). */
export function postToParent(message: OutgoingMessage, parent: Window | null, allowed: readonly string[]): void {
  if (!parent || parent === window) return;
  for (const origin of allowed) parent.postMessage({ trellis: BRIDGE_VERSION, ...message }, origin);
}
