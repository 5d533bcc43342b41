// Starts the run page's first requests from the entry chunk, before the (large) app chunk is
// parsed and mounted, so the answers arrive while the browser is still busy with the script.
// The app takes each prefetched answer once; anything else is fetched as usual.

const API = "/api/v1";
const started = new Map<string, Promise<Response>>();

/** Fetches what the page at `hash` (`#/runs/ID`) will ask for first. */
export function prefetchFor(hash: string): void {
  const run = /^#\/runs\/([^/?#]+)$/.exec(hash)?.[1];
  if (!run) return;
  for (const path of [`/runs/${run}`, `/runs/${run}/graph`]) {
    const request = fetch(`${API}${path}`, { headers: { Accept: "application/json" } });
    // A failed prefetch is retried by the app's own request.
    request.catch(() => started.delete(path));
    started.set(path, request);
  }
}

/** The prefetched answer for `path`, once. */
export function takePrefetched(path: string): Promise<Response> | undefined {
  const request = started.get(path);
  started.delete(path);
  return request;
}
