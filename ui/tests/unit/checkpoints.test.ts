// The checkpoint panel's reading of the API (pages, a failure's cause, the worktree) and its
// choices: when resuming from a checkpoint or discarding a worktree is offered, and when a
// refused resume offers `force`.
import { describe, expect, test } from "vitest";
import { ApiError } from "../../src/api/client";
import { checkpointPage, runStatus } from "../../src/api/normalize";
import { causeLine, causeLines } from "../../src/run/cause";
import { WORKSPACE_CHANGED, canDiscard, canResumeFrom, resumeFailure } from "../../src/run/checkpoints";
import { formatBytes } from "../../src/run/format";

describe("checkpointPage", () => {
  test("reads a page with its next cursor and drops entries without an id", () => {
    const page = checkpointPage({
      runId: "0190",
      checkpoints: [
        {
          id: 1, before: { kind: "node", name: "worker" }, takenAtMs: 1730000000000, filesChanged: 3,
          bytesChanged: 2048, commit: "a".repeat(40), tree: "b".repeat(40),
          reference: "refs/trellis/checkpoints/0190/1", nextExecution: 2,
        },
        { before: { kind: "group", name: "reviews" } },
        { id: 2, before: { kind: "group", name: "reviews" } },
      ],
      nextAfter: 2,
    });
    expect(page.checkpoints.map((c) => c.id)).toEqual([1, 2]);
    expect(page.checkpoints[0]).toMatchObject({ before: { kind: "node", name: "worker" }, filesChanged: 3, nextExecution: 2 });
    expect(page.checkpoints[1]).toMatchObject({ before: { kind: "group", name: "reviews" }, filesChanged: 0 });
    expect(page.nextAfter).toBe(2);
    expect(checkpointPage({ runId: "0190", checkpoints: [] }).nextAfter).toBeUndefined();
  });
});

describe("a failed run's status", () => {
  const raw = {
    runId: "0190",
    title: "t",
    status: { phase: "finished", terminalResult: { status: "failed", reason: "worker_failed" } },
    executions: [],
    worktree: { path: "/state/worktrees/x", worktreeOf: "/home/me/p", exists: true },
    cause: {
      reason: "worker_failed",
      nodes: [
        { node: "worker", execution: "ex-1", executionId: 1, status: "error", channel: "refusal", reason: "authentication_required", message: "not signed in" },
        { node: "code", execution: "ex-3", executionId: 3, status: "verifier", signals: { verdict: "rejected" }, diagnostic: "tests fail" },
        { status: "error" },
      ],
    },
  };

  test("carries its cause and worktree", () => {
    const status = runStatus(raw);
    expect(status.cause?.reason).toBe("worker_failed");
    expect(status.cause?.nodes.map((n) => n.node)).toEqual(["worker", "code"]);
    expect(status.worktree).toEqual({ path: "/state/worktrees/x", worktreeOf: "/home/me/p", exists: true });
    expect(runStatus({ ...raw, cause: undefined, worktree: undefined })).toMatchObject({ cause: undefined, worktree: undefined });
  });

  test("renders each causing node as a line, as `trellis status` does", () => {
    expect(causeLines(runStatus(raw).cause)).toEqual([
      "worker: refusal (authentication_required) — not signed in",
      "code: verdict=rejected — tests fail",
    ]);
    expect(causeLine({ node: "w", status: "error" })).toBe("w: error");
    expect(causeLines(undefined)).toEqual([]);
  });
});

describe("what the panel offers", () => {
  test("resume from a checkpoint only for an ended, unsucceeded run nobody resumed", () => {
    expect(canResumeFrom("failed", undefined)).toBe(true);
    expect(canResumeFrom("force_stopped", undefined)).toBe(true);
    expect(canResumeFrom("running", undefined)).toBe(false);
    expect(canResumeFrom("succeeded", undefined)).toBe(false);
    expect(canResumeFrom("failed", "0191")).toBe(false);
  });

  test("discard only a failed run's worktree that still exists", () => {
    const worktree = { path: "/w", worktreeOf: "/p", exists: true };
    expect(canDiscard("failed", worktree)).toBe(true);
    expect(canDiscard("failed", { ...worktree, exists: false })).toBe(false);
    expect(canDiscard("failed", undefined)).toBe(false);
    expect(canDiscard("running", worktree)).toBe(false);
    expect(canDiscard("succeeded", worktree)).toBe(false);
  });

  test("a workspace changed since the run ended is the refusal that offers force", () => {
    const changed = resumeFailure(new ApiError(409, WORKSPACE_CHANGED, "the workspace changed"));
    expect(changed).toEqual({ text: "run.workspace_changed: the workspace changed", offerForce: true });
    expect(resumeFailure(new ApiError(409, "run.unknown_checkpoint", "no checkpoint 9")).offerForce).toBe(false);
    expect(resumeFailure(new Error("offline")).offerForce).toBe(false);
  });

  test("sizes read in binary units", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(2048)).toBe("2.0 KiB");
    expect(formatBytes(5 * 1024 * 1024)).toBe("5.0 MiB");
    expect(formatBytes(undefined)).toBe("–");
  });
});
