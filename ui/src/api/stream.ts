// A Server-Sent Events subscription that survives disconnects by resuming from its last cursor.
//
// EventSource already resends `Last-Event-ID` when it reconnects by itself; when the browser
// gives up (the server was down and answered with an error), this opens a new one with
// `?after=CURSOR` so no event is lost or repeated.

import { checkSession } from "./client";

export interface StreamHandlers<T> {
  /** Each data event, parsed; `cursor` is its SSE id. */
  onEvent: (event: T, cursor: string | undefined) => void;
  /** The server said nothing more will come (`event: end`). */
  onEnd?: () => void;
  onStateChange?: (connected: boolean) => void;
}

export interface StreamOptions {
  /** SSE event names to listen to besides the unnamed `message`. */
  eventNames?: string[];
  /** Build the URL for a (re)connection that resumes after `cursor`. */
  url: (cursor: string | undefined) => string;
  initialCursor?: string;
}

const RECONNECT_DELAY_MS = [250, 500, 1000, 2000, 4000];

export interface Subscription {
  close: () => void;
  lastCursor: () => string | undefined;
}

export function subscribe<T>(options: StreamOptions, handlers: StreamHandlers<T>): Subscription {
  let cursor = options.initialCursor;
  let source: EventSource | undefined;
  let closed = false;
  let failures = 0;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;

  const deliver = (message: MessageEvent<string>) => {
    let parsed: T;
    try {
      parsed = JSON.parse(message.data) as T;
    } catch {
      return; // a malformed frame is skipped, not fatal
    }
    if (message.lastEventId) cursor = message.lastEventId;
    failures = 0;
    handlers.onEvent(parsed, message.lastEventId || undefined);
  };

  const open = () => {
    if (closed) return;
    const current = new EventSource(options.url(cursor));
    source = current;
    current.onopen = () => handlers.onStateChange?.(true);
    current.onmessage = deliver;
    for (const name of options.eventNames ?? []) {
      current.addEventListener(name, deliver as EventListener);
    }
    current.addEventListener("end", () => {
      closed = true;
      current.close();
      handlers.onStateChange?.(false);
      handlers.onEnd?.();
    });
    current.onerror = () => {
      handlers.onStateChange?.(false);
      if (current.readyState === EventSource.CLOSED && !closed) {
        // The browser stopped retrying: reconnect ourselves, resuming from the cursor (unless
        // the session ended, which sends the page to sign in).
        if (failures === 0) void checkSession();
        const delay = RECONNECT_DELAY_MS[Math.min(failures, RECONNECT_DELAY_MS.length - 1)];
        failures += 1;
        retryTimer = setTimeout(open, delay);
      }
    };
  };

  open();
  return {
    close: () => {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      source?.close();
    },
    lastCursor: () => cursor,
  };
}
