// The run's workspace checkpoints, a page at a time: what each was taken before, when, what
// changed since the previous one; "Resume from here" restores one in a successor run, behind a
// confirmation that offers `force` when the server says the workspace changed since the run ended.
import { useCallback, useEffect, useState } from "react";
import { Dialog } from "../app/Dialog";
import { api } from "../api/client";
import type { CheckpointInfo } from "../api/types";
import { navigate } from "../app/hooks";
import { canResumeFrom, resumeFailure } from "./checkpoints";
import { formatBytes, formatTime } from "./format";

/** Checkpoints per page. */
export const CHECKPOINT_PAGE = 20;

interface Props {
  runId: string;
  status?: string;
  successor?: string;
}

export function Checkpoints({ runId, status, successor }: Props) {
  const [checkpoints, setCheckpoints] = useState<CheckpointInfo[]>([]);
  const [nextAfter, setNextAfter] = useState<number | undefined>();
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | undefined>();
  const [asking, setAsking] = useState<CheckpointInfo | undefined>();
  const [force, setForce] = useState(false);
  const [failure, setFailure] = useState<{ text: string; offerForce: boolean } | undefined>();
  const [busy, setBusy] = useState(false);

  const load = useCallback(
    async (after: number | undefined, signal?: AbortSignal) => {
      setLoading(true);
      try {
        const page = await api.checkpoints(runId, after, CHECKPOINT_PAGE, signal);
        setCheckpoints((current) => (after === undefined ? page.checkpoints : [...current, ...page.checkpoints]));
        setNextAfter(page.nextAfter);
        setError(undefined);
      } catch (failed) {
        if (!signal?.aborted) setError(resumeFailure(failed).text);
      } finally {
        if (!signal?.aborted) setLoading(false);
      }
    },
    [runId],
  );

  // The first page again whenever the run moves on (a live run takes more checkpoints).
  useEffect(() => {
    const controller = new AbortController();
    void load(undefined, controller.signal);
    return () => controller.abort();
  }, [load, status]);

  const close = () => {
    setAsking(undefined);
    setForce(false);
    setFailure(undefined);
  };

  const resume = async (checkpoint: CheckpointInfo) => {
    setBusy(true);
    setFailure(undefined);
    try {
      const answer = await api.resume(runId, { fromCheckpoint: checkpoint.id, force: force || undefined });
      close();
      navigate(`/runs/${answer.runId}`);
    } catch (failed) {
      setFailure(resumeFailure(failed));
    } finally {
      setBusy(false);
    }
  };

  const resumable = canResumeFrom(status, successor);
  return (
    <div className="checkpoints" data-testid="checkpoints">
      {error && <div className="error-box">{error}</div>}
      {!error && !loading && checkpoints.length === 0 && (
        <p className="muted">No checkpoints: the workspace is not in git, checkpoints were off, or nothing was written yet.</p>
      )}
      {checkpoints.length > 0 && (
        <table className="checkpoints-table">
          <thead>
            <tr>
              <th>#</th>
              <th>taken before</th>
              <th>at</th>
              <th>files changed</th>
              <th>size</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {checkpoints.map((checkpoint) => (
              <tr key={checkpoint.id} data-testid="checkpoint-row" data-checkpoint={checkpoint.id}>
                <td>{checkpoint.id}</td>
                <td>
                  <span className="muted">{checkpoint.before.kind}</span> <code>{checkpoint.before.name}</code>
                </td>
                <td>{formatTime(checkpoint.takenAtMs)}</td>
                <td>{checkpoint.filesChanged}</td>
                <td>{formatBytes(checkpoint.bytesChanged)}</td>
                <td>
                  <button
                    type="button"
                    disabled={!resumable || busy}
                    title={successor ? `already resumed as ${successor}` : undefined}
                    data-testid="resume-from"
                    onClick={() => setAsking(checkpoint)}
                  >
                    Resume from here
                  </button>
                  {checkpoint.kept === false && (
                    <span
                      className="muted"
                      data-testid="checkpoint-pruned"
                      title="Its reference was pruned: it restores only until git collects its files."
                    >
                      {" "}
                      pruned
                    </span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {nextAfter !== undefined && (
        <button type="button" disabled={loading} data-testid="checkpoints-more" onClick={() => void load(nextAfter)}>
          More checkpoints
        </button>
      )}
      {asking && (
        <Dialog
          titleId="resume-from-title"
          title={`Resume from checkpoint ${asking.id}?`}
          onCancel={close}
          actions={
            <button
              type="button"
              className="primary"
              disabled={busy || (failure !== undefined && failure.offerForce && !force)}
              data-testid="confirm-resume-from"
              onClick={() => void resume(asking)}
            >
              {force ? "Resume, forcing" : "Resume"}
            </button>
          }
        >
          <p>
            The workspace&apos;s files are restored to how they were before {asking.before.kind}{" "}
            <code>{asking.before.name}</code>. A successor run reuses what settled before that point and runs
            everything after it again.
          </p>
          {failure && (
            <div className="error-box" data-testid="resume-problem">
              {failure.text}
            </div>
          )}
          {failure?.offerForce && (
            <label className="force-choice">
              <input
                type="checkbox"
                checked={force}
                data-testid="resume-force"
                onChange={(event) => setForce(event.target.checked)}
              />{" "}
              Force: the workspace changed after the run ended. Restore the checkpoint anyway; what the workspace
              holds now is kept under <code>refs/trellis/saved/</code>, so nothing is lost.
            </label>
          )}
        </Dialog>
      )}
    </div>
  );
}
