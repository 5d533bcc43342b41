// A run of the profile being edited, in the body a team server's `POST /runs` takes: the
// graph (or template), default input and plan exactly as the editor just saved them, under a
// fresh submission key, so what starts is what the person saw.
import type { ProfileDefinition } from "../api/profiles";

/** The body of a team server's `POST /api/v1/runs` (docs/run-api.md). */
export interface TeamSubmission {
  submissionKey: string;
  title?: string;
  graph?: unknown;
  template?: { name: string; delivery?: string; ignore_pr_feedback?: boolean };
  input?: unknown;
  task?: string;
  plan?: { exact?: unknown; uniform?: unknown };
  workspace?: string;
}

/** A new submission key: `ui-` and 32 random hex digits (any page, secure context or not). */
export function newSubmissionKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `ui-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

/** The submission of `definition` with `key`, an optional title and a workspace name. */
export function teamSubmission(definition: ProfileDefinition, key: string, title?: string, workspace?: string): TeamSubmission {
  const submission: TeamSubmission = { submissionKey: key };
  if (title) submission.title = title;
  if (definition.graph !== undefined) {
    submission.graph = definition.graph;
  } else if (definition.template) {
    // The team route names this field in snake case, unlike a profile's definition.
    const { name, delivery, ignorePrFeedback } = definition.template;
    submission.template = { name, ...(delivery ? { delivery } : {}), ...(ignorePrFeedback ? { ignore_pr_feedback: true } : {}) };
  }
  if (definition.input !== undefined) submission.input = definition.input;
  else if (definition.template && definition.taskDefault !== undefined) submission.task = definition.taskDefault;
  if (definition.plan) submission.plan = definition.plan;
  if (workspace) submission.workspace = workspace;
  return submission;
}
