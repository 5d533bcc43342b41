// What the Checkpoints panel may offer for a run, and how it reads the server's refusal of a
// resume: a workspace changed after the run ended is the one refusal that `force` overrides.
import { ApiError } from "../api/client";
import type { RetainedWorkspace } from "../api/types";
import { isLive } from "./format";

/** The problem code of a resume refused because the workspace changed after the run ended. */
export const WORKSPACE_CHANGED = "run.workspace_changed";

/** Whether a run can be resumed from one of its checkpoints (a failed run nobody resumed). */
export function canResumeFrom(status: string | undefined, successor: string | undefined): boolean {
  return !isLive(status) && status !== "succeeded" && !successor;
}

/** Whether the page offers to discard the run's worktree: a failed run's, still there. */
export function canDiscard(status: string | undefined, worktree: RetainedWorkspace | undefined): boolean {
  return Boolean(worktree?.exists) && !isLive(status) && status !== "succeeded";
}

/** A failed request as `code: message`, and whether resuming again with `force` may help. */
export function resumeFailure(error: unknown): { text: string; offerForce: boolean } {
  if (error instanceof ApiError) {
    return { text: `${error.code}: ${error.message}`, offerForce: error.code === WORKSPACE_CHANGED };
  }
  return { text: error instanceof Error ? error.message : String(error), offerForce: false };
}
