// Calls of the profile routes (`/profiles`), the built-in worker registry and starting a run
// (of a saved profile on `trellis ui`, of the run itself on a team server): what the profile
// editor needs beside the run API's reads.
import type { TeamSubmission } from "../author/submission";
import { getJson, sendJson } from "./client";

/** A profile's definition: its own graph (or a template), default input and plan. */
export interface ProfileDefinition {
  graph?: unknown;
  template?: { name: string; delivery?: string; ignorePrFeedback?: boolean };
  taskDefault?: string;
  input?: unknown;
  plan?: { exact?: unknown; uniform?: unknown };
  description?: string;
}

export interface ProfileSummary {
  name: string;
  revision: number;
  savedAtMs: number;
  identity: string;
  template?: string;
  description?: string;
}

export interface Profile {
  name: string;
  revision: number;
  savedAtMs: number;
  identity: string;
  definition: ProfileDefinition;
}

export interface SavedProfile {
  name: string;
  revision: number;
  previousRevision?: number;
  identity: string;
}

export interface BuiltinWorker {
  worker: string;
  kind: string;
}

/** What a run of a profile is started with. */
export interface StartRequest {
  profile: string;
  input?: unknown;
  title?: string;
  workspace?: string;
}

const named = (name: string) => `/profiles/${encodeURIComponent(name)}`;

export const profilesApi = {
  list: () => getJson<{ profiles: ProfileSummary[]; unreadable?: { name: string; reason: string }[] }>("/profiles"),
  get: (name: string) => getJson<Profile>(named(name)),
  /** Saves over `revision` (none: the profile must be new); 409 when another save came first. */
  save: (name: string, definition: ProfileDefinition, revision?: number) =>
    sendJson<SavedProfile>("PUT", named(name), revision === undefined ? { definition } : { definition, revision }),
  remove: (name: string, revision: number) =>
    sendJson<{ name: string; revision: number }>("DELETE", `${named(name)}?revision=${revision}`),
  workers: () => getJson<BuiltinWorker[]>("/workers"),
  /** A run of a saved profile, on `trellis ui`. */
  start: (request: StartRequest) => sendJson<{ runId: string; created: boolean }>("POST", "/runs", request),
  /** A run on a team server (`trellis serve`), whose `POST /runs` takes the run itself. */
  submit: (submission: TeamSubmission) => sendJson<{ runId: string; created: boolean }>("POST", "/runs", submission),
};
