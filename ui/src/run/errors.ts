// Failures in words for the page: the server's problem code and message, never a JavaScript
// `Error:` prefix, and a hint to reload when the server was restarted under an open page.
import { ApiError } from "../api/client";

/** A failure as the page shows it. */
export function describeFailure(failure: unknown): string {
  if (failure instanceof ApiError) {
    if (failure.code === "bad_token" || failure.code === "no_session") {
      return `${failure.message} — the trellis ui server was restarted since this page was opened: reload the page (or open the new link it printed).`;
    }
    return failure.message;
  }
  if (failure instanceof Error) return failure.message;
  return String(failure);
}
