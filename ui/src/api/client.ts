// Calls to the run API: JSON GETs, and the state-changing POSTs that carry the page's token.
import type {
  CheckpointPage,
  DiscardedWorkspace,
  DocumentKind,
  ExecutionDetail,
  GapBody,
  Problem,
  RunGraph,
  RunStatus,
  RunSummary,
  SkippedRun,
  TemplateDetail,
  TemplateInfo,
  ValidationReport,
} from "./types";

import * as normalize from "./normalize";
import { takePrefetched } from "./prefetch";
import { onTeamServer, signInAgain } from "./server";

const API = "/api/v1";

/** An answer that was not 2xx, with the server's problem code when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/**
 * The per-process token the server writes into the page it serves. State changes must carry it;
 * a page served by anything else (or a cross-site form) does not have it.
 */
export function pageToken(): string {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="trellis-token"]');
  return meta?.content ?? "";
}

async function readProblem(response: Response): Promise<ApiError> {
  // On a team server a 401 is a session that ended: sign in again, then come back here.
  if (response.status === 401 && onTeamServer()) signInAgain();
  let problem: Partial<Problem> = {};
  try {
    problem = (await response.json()) as Partial<Problem>;
  } catch {
    // Not JSON: fall back to the status line.
  }
  return new ApiError(
    response.status,
    problem.code ?? `http_${response.status}`,
    problem.message ?? response.statusText ?? "request failed",
    problem.details,
  );
}

async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const prefetched = takePrefetched(path);
  const response = await ((prefetched && prefetched.catch(() => undefined)) ?? Promise.resolve(undefined)).then(
    (early) => early ?? fetch(`${API}${path}`, { headers: { Accept: "application/json" }, signal }),
  );
  if (!response.ok) throw await readProblem(response);
  return (await response.json()) as T;
}

/** A state change (`POST`, `PUT`, `DELETE`) carrying the page token; the answer's JSON. */
export async function sendJson<T>(method: "POST" | "PUT" | "DELETE", path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${API}${path}`, {
    method,
    headers: {
      Accept: "application/json",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      "X-Trellis-Token": pageToken(),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await readProblem(response);
  return (await response.json()) as T;
}

export { getJson };

/**
 * Asks whether this page's session is still live (an event stream that broke cannot tell a
 * 401 from a network failure); a session that ended sends the page to sign in again.
 */
export async function checkSession(): Promise<void> {
  if (!onTeamServer()) return;
  await getJson<unknown>("/runs?limit=1").catch(() => undefined);
}

async function postJson<T>(path: string, body: unknown): Promise<T> {
  const response = await fetch(`${API}${path}`, {
    method: "POST",
    headers: {
      Accept: "application/json",
      "Content-Type": "application/json",
      "X-Trellis-Token": pageToken(),
    },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await readProblem(response);
  return (await response.json()) as T;
}

/** The body of `POST /runs/{run}/resume`. */
export interface ResumeOptions {
  fromCheckpoint?: number;
  force?: boolean;
}

export interface RunQuery {
  status?: string;
  q?: string;
  limit?: number;
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const api = {
  listRuns: async (filter: RunQuery, signal?: AbortSignal): Promise<{ runs: RunSummary[]; skipped: SkippedRun[] }> => {
    const answer = await getJson<{ runs?: unknown[]; skipped?: unknown } | unknown[]>(
      `/runs${query({ ...filter })}`,
      signal,
    );
    const runs = Array.isArray(answer) ? answer : (answer.runs ?? []);
    const skipped = Array.isArray(answer) ? [] : normalize.skippedRuns(answer.skipped);
    return { runs: runs.map(normalize.runSummary), skipped };
  },
  runStatus: async (runId: string, signal?: AbortSignal): Promise<RunStatus> =>
    normalize.runStatus(await getJson<unknown>(`/runs/${encodeURIComponent(runId)}`, signal)),
  runGraph: (runId: string, signal?: AbortSignal) =>
    getJson<RunGraph>(`/runs/${encodeURIComponent(runId)}/graph`, signal),
  gapBodies: (runId: string, signal?: AbortSignal) =>
    getJson<GapBody[]>(`/runs/${encodeURIComponent(runId)}/gap-bodies`, signal),
  execution: async (runId: string, execution: number | string, signal?: AbortSignal): Promise<ExecutionDetail> =>
    normalize.executionDetail(
      await getJson<unknown>(
        `/runs/${encodeURIComponent(runId)}/executions/${encodeURIComponent(String(execution))}`,
        signal,
      ),
    ),
  forceStop: async (runId: string): Promise<RunStatus> =>
    normalize.runStatus(await postJson<unknown>(`/runs/${encodeURIComponent(runId)}/force-stop`, {})),
  /** Resumes a failed run; from a checkpoint (restoring its files) when one is named. */
  resume: (runId: string, options: ResumeOptions = {}) =>
    postJson<{ runId: string }>(`/runs/${encodeURIComponent(runId)}/resume`, options),
  checkpoints: async (runId: string, after?: number, limit?: number, signal?: AbortSignal): Promise<CheckpointPage> =>
    normalize.checkpointPage(
      await getJson<unknown>(`/runs/${encodeURIComponent(runId)}/checkpoints${query({ after, limit })}`, signal),
    ),
  discardWorkspace: (runId: string) =>
    postJson<DiscardedWorkspace>(`/runs/${encodeURIComponent(runId)}/discard-workspace`, {}),
  validate: async (document: unknown, kind?: DocumentKind): Promise<ValidationReport> =>
    normalize.validationReport(await postJson<unknown>(`/validate`, kind ? { document, kind } : { document })),
  templates: () => getJson<TemplateInfo[]>(`/templates`),
  template: (name: string) => getJson<TemplateDetail>(`/templates/${encodeURIComponent(name)}`),
};

export const streamUrls = {
  runs: () => `${API}/runs/events`,
  watch: (runId: string, after?: string) =>
    `${API}/runs/${encodeURIComponent(runId)}/watch${query({ after })}`,
  logs: (runId: string, after?: string, node?: string, level?: string) =>
    `${API}/runs/${encodeURIComponent(runId)}/logs${query({ after, node, level })}`,
};
