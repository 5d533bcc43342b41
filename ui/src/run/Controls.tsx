// Force-stop, resume and discarding a failed run's worktree, each behind a confirmation; the
// answer is shown in place and the run's status keeps updating live from the watch stream.
import { useState } from "react";
import { api, ApiError } from "../api/client";
import type { RetainedWorkspace } from "../api/types";
import { Dialog } from "../app/Dialog";
import { navigate } from "../app/hooks";
import { describeFailure } from "./errors";
import { canDiscard } from "./checkpoints";
import { isLive } from "./format";

type Action = "force-stop" | "resume" | "discard-workspace";

const QUESTIONS: Record<Action, { title: string; body: string; confirm: string }> = {
  "force-stop": {
    title: "Force-stop this run?",
    body: "Every running worker is killed and the run ends force_stopped. Settled work is kept; you can resume later.",
    confirm: "Force-stop",
  },
  resume: {
    title: "Resume this run?",
    body: "A successor run starts with the same graph, input and plan and reuses every settled outcome.",
    confirm: "Resume",
  },
  "discard-workspace": {
    title: "Discard this run's worktree?",
    body: "The worktree the run worked in is removed with everything in it that was not committed or pushed; a resume can no longer continue there. Its checkpoints stay.",
    confirm: "Discard workspace",
  },
};

interface Props {
  runId: string;
  status?: string;
  successor?: string;
  worktree?: RetainedWorkspace;
  /** Called after the worktree was discarded, so the page can read the run again. */
  onDiscarded?: () => void;
}

export function Controls({ runId, status, successor, worktree, onDiscarded }: Props) {
  const [asking, setAsking] = useState<Action | undefined>();
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<string | undefined>();
  const live = isLive(status);
  // A worktree run whose worktree was discarded has nowhere left to continue.
  const discarded = Boolean(worktree && !worktree.exists);

  const act = async (action: Action) => {
    setBusy(true);
    setMessage(undefined);
    try {
      if (action === "force-stop") {
        const answer = await api.forceStop(runId);
        setMessage(`Force-stop requested: ${answer.status}`);
      } else if (action === "discard-workspace") {
        const answer = await api.discardWorkspace(runId);
        setMessage(answer.removed ? `Removed ${answer.path}` : `${answer.path} was already gone`);
        onDiscarded?.();
      } else {
        const answer = await api.resume(runId);
        setMessage(`Resumed as ${answer.runId}`);
        navigate(`/runs/${answer.runId}`);
      }
    } catch (error) {
      setMessage(error instanceof ApiError && !["bad_token", "no_session"].includes(error.code) ? `${error.code}: ${error.message}` : describeFailure(error));
    } finally {
      setBusy(false);
      setAsking(undefined);
    }
  };

  const question = asking ? QUESTIONS[asking] : undefined;
  return (
    <div className="controls">
      <button
        type="button"
        className="danger"
        disabled={!live || busy}
        onClick={() => setAsking("force-stop")}
        data-testid="force-stop"
      >
        Force-stop
      </button>
      <button
        type="button"
        disabled={live || busy || status === "succeeded" || Boolean(successor) || discarded}
        onClick={() => setAsking("resume")}
        data-testid="resume"
        title={
          successor ? `already resumed as ${successor}` : discarded ? "its worktree was discarded" : undefined
        }
      >
        Resume
      </button>
      {canDiscard(status, worktree) && (
        <button
          type="button"
          className="danger"
          disabled={busy}
          onClick={() => setAsking("discard-workspace")}
          data-testid="discard-workspace"
          title={worktree?.path}
        >
          Discard workspace
        </button>
      )}
      {message && (
        <span className="control-result" data-testid="control-result">
          {message}
        </span>
      )}
      {question && asking && (
        <Dialog
          titleId="confirm-title"
          title={question.title}
          onCancel={() => setAsking(undefined)}
          actions={
            <button
              type="button"
              className={asking === "resume" ? "primary" : "danger"}
              disabled={busy}
              data-testid="confirm"
              onClick={() => void act(asking)}
            >
              {question.confirm}
            </button>
          }
        >
          <p>{question.body}</p>
        </Dialog>
      )}
    </div>
  );
}
