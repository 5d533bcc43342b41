// Loads one run (status, graph document, and for a GaP run its journaled bodies) and follows it
// live from the watch stream while it runs; a GaP run's bodies are read again as they move.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, streamUrls } from "../api/client";
import { watchEvent } from "../api/normalize";
import { subscribe } from "../api/stream";
import type { GapBody, RunGraph, RunStatus } from "../api/types";
import { describeFailure } from "./errors";
import { isLive } from "./format";
import { applyEvent, foldFromStatus, type RunFold } from "./state";

export interface RunData {
  status?: RunStatus;
  graph?: RunGraph;
  fold?: RunFold;
  /** A GaP run's bodies (undefined for GraphSpec runs). */
  gapBodies?: GapBody[];
  error?: string;
  connected: boolean;
  reloadStatus: () => void;
  reloadGapBodies: () => Promise<GapBody[] | undefined>;
}

export function useRunData(runId: string): RunData {
  const [status, setStatus] = useState<RunStatus | undefined>();
  const [graph, setGraph] = useState<RunGraph | undefined>();
  const [fold, setFold] = useState<RunFold | undefined>();
  const [gapBodies, setGapBodies] = useState<GapBody[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [connected, setConnected] = useState(false);
  const reading = useRef<{ busy: boolean; again: boolean }>({ busy: false, again: false });

  const reloadGapBodies = useCallback(async () => {
    const bodies = await api.gapBodies(runId).catch(() => undefined);
    if (bodies) setGapBodies(bodies);
    return bodies;
  }, [runId]);

  // One read at a time; events arriving meanwhile ask for one more read after it.
  const refreshBodies = useCallback(() => {
    const state = reading.current;
    if (state.busy) {
      state.again = true;
      return;
    }
    state.busy = true;
    void reloadGapBodies().finally(() => {
      state.busy = false;
      if (state.again) {
        state.again = false;
        refreshBodies();
      }
    });
  }, [reloadGapBodies]);

  useEffect(() => {
    const controller = new AbortController();
    let subscription: { close: () => void } | undefined;
    setStatus(undefined);
    setGraph(undefined);
    setFold(undefined);
    setGapBodies(undefined);
    setError(undefined);
    Promise.all([api.runStatus(runId, controller.signal), api.runGraph(runId, controller.signal)])
      .then(async ([loadedStatus, loadedGraph]) => {
        const bodies = loadedGraph.kind === "gap" ? await api.gapBodies(runId, controller.signal) : undefined;
        setStatus(loadedStatus);
        setGraph(loadedGraph);
        setGapBodies(bodies);
        setFold(foldFromStatus(loadedStatus));
        if (!isLive(loadedStatus.status)) return;
        subscription = subscribe<unknown>(
          { url: (cursor) => streamUrls.watch(runId, cursor), initialCursor: loadedStatus.cursor },
          {
            onEvent: (raw) => {
              const event = watchEvent(raw);
              setFold((current) => (current ? applyEvent(current, event) : current));
              if (bodies && (event.type.startsWith("gap_node") || event.terminalResult)) refreshBodies();
            },
            onStateChange: setConnected,
          },
        );
      })
      .catch((failure: unknown) => {
        if (!controller.signal.aborted) setError(describeFailure(failure));
      });
    return () => {
      controller.abort();
      subscription?.close();
    };
  }, [runId, refreshBodies]);

  const reloadStatus = useCallback(() => {
    api
      .runStatus(runId)
      .then(setStatus)
      .catch(() => undefined);
  }, [runId]);

  // Read the status again once a live run has ended, so the page shows what only the status
  // carries (a failure's classified cause, the successor).
  const endedLive = Boolean(fold?.status && !isLive(fold.status) && status && isLive(status.status));
  useEffect(() => {
    if (endedLive) reloadStatus();
  }, [endedLive, reloadStatus]);

  return { status, graph, fold, gapBodies, error, connected, reloadStatus, reloadGapBodies };
}
