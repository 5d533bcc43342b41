// The replay of a run: its whole event history loaded once, and the fold of any prefix of it.
// A replay is a read-only view of the past: the page keeps the run's real status beside it.
import { useCallback, useEffect, useRef, useState } from "react";
import { streamUrls } from "../api/client";
import { watchEvent } from "../api/normalize";
import { subscribe } from "../api/stream";
import type { GapBody, WatchEvent } from "../api/types";
import { bodiesAt, describeGapEvent, gapExecutions } from "./gapBodies";
import { replay, type RunFold } from "./state";

export interface ReplayState {
  events: WatchEvent[];
  position: number;
  loading: boolean;
}

export interface Replay {
  state?: ReplayState;
  /** The run as it was after `position` events (undefined when not replaying). */
  fold?: RunFold;
  /** When the event at the position was recorded: the replay's "now". */
  at?: number;
  start: () => void;
  stop: () => void;
  move: (position: number) => void;
}

export function useReplay(runId: string, gapBodies: GapBody[] | undefined, onStart?: () => void): Replay {
  const [state, setState] = useState<ReplayState | undefined>();
  const subscription = useRef<{ close: () => void } | undefined>(undefined);

  const start = useCallback(() => {
    onStart?.();
    setState({ events: [], position: 0, loading: true });
    subscription.current?.close();
    subscription.current = subscribe<unknown>(
      { url: (cursor) => streamUrls.watch(runId, cursor) },
      {
        onEvent: (raw) =>
          setState((current) => {
            const event = watchEvent(raw);
            if (!current) return current;
            const atEnd = current.position === current.events.length;
            const events = [...current.events, event];
            return { ...current, events, position: atEnd ? events.length : current.position };
          }),
        onEnd: () => setState((current) => current && { ...current, loading: false }),
      },
    );
  }, [runId, onStart]);

  const stop = useCallback(() => {
    subscription.current?.close();
    subscription.current = undefined;
    setState(undefined);
  }, []);
  useEffect(() => () => subscription.current?.close(), []);
  useEffect(() => stop, [runId, stop]);

  const move = useCallback((position: number) => setState((current) => current && { ...current, position }), []);

  const last = state && state.position > 0 ? state.events[state.position - 1] : undefined;
  const fold = state ? replay(state.events, state.position) : undefined;
  if (fold && gapBodies) {
    const bodies = bodiesAt(gapBodies, last?.cursor);
    fold.executions = gapExecutions(bodies);
    if (last) fold.lastEvent = describeGapEvent(gapBodies, last) ?? fold.lastEvent;
  }
  return { state, fold, at: last?.atMs, start, stop, move };
}
