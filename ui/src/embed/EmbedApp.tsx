// The run view alone, for a frame in another page: the run the URL (`#/runs/ID`) or the
// parent's `open-run` names, reporting its state and selected node through the bridge.
import { useCallback, useEffect, useMemo, useRef } from "react";
import { useHashRoute } from "../app/hooks";
import { RunPage } from "../pages/RunPage";
import { allowedParents, postToParent, readCommand, type OutgoingMessage } from "./bridge";

export function EmbedApp() {
  const route = useHashRoute();
  const runId = /^\/runs\/([^/]+)$/.exec(route)?.[1] ?? null;
  const allowed = useMemo(allowedParents, []);
  const post = useCallback((message: OutgoingMessage) => postToParent(message, window.parent, allowed), [allowed]);
  const lastNode = useRef<string | null>(null);

  useEffect(() => {
    const onMessage = (event: MessageEvent) => {
      const read = readCommand(event, window.parent, allowed);
      if (!read) return;
      if ("error" in read) return post(read.error);
      if (read.command.type === "ping") return post({ type: "ready", runId });
      window.location.hash = `/runs/${encodeURIComponent(read.command.runId)}`;
    };
    window.addEventListener("message", onMessage);
    return () => window.removeEventListener("message", onMessage);
  }, [allowed, post, runId]);

  useEffect(() => {
    lastNode.current = null;
    post({ type: "ready", runId });
  }, [post, runId]);

  const onStatus = useCallback(
    (status: string) => {
      if (runId) post({ type: "run-state", runId, status });
    },
    [post, runId],
  );
  const onSelectNode = useCallback(
    (node: string | undefined) => {
      const name = node ?? null;
      if (!runId || name === lastNode.current) return;
      lastNode.current = name;
      post({ type: "select-node", runId, node: name });
    },
    [post, runId],
  );

  return (
    <div className="app embed">
      <main>
        {runId ? (
          <RunPage key={runId} runId={runId} onStatus={onStatus} onSelectNode={onSelectNode} />
        ) : (
          <div className="page loading">No run chosen: the page around this one opens one.</div>
        )}
      </main>
    </div>
  );
}
