// Human formatting of durations, times, token counts and costs.

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  const rest = Math.floor(seconds % 60);
  if (minutes < 60) return `${minutes}m ${String(rest).padStart(2, "0")}s`;
  const hours = Math.floor(minutes / 60);
  return `${hours}h ${String(minutes % 60).padStart(2, "0")}m`;
}

export function formatTime(ms: number | undefined): string {
  if (ms === undefined) return "–";
  const date = new Date(ms);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay
    ? date.toLocaleTimeString([], { hour12: false })
    : `${date.toLocaleDateString()} ${date.toLocaleTimeString([], { hour12: false })}`;
}

export function formatTokens(count: number | undefined): string {
  if (count === undefined) return "–";
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${(count / 1000).toFixed(count < 10_000 ? 1 : 0)}k`;
  return `${(count / 1_000_000).toFixed(1)}M`;
}

export function formatCost(usd: number | undefined): string {
  if (usd === undefined) return "–";
  if (usd === 0) return "$0";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** Pretty JSON for panes, cut at `limit` characters so a huge value cannot freeze the page. */
export function prettyJson(value: unknown, limit = 20_000): string {
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? "null";
  } catch {
    text = String(value);
  }
  return text.length > limit ? `${text.slice(0, limit)}\n… (${text.length - limit} more characters)` : text;
}

/** Run statuses grouped into the colours the page uses. */
export function statusTone(status: string | undefined): string {
  switch (status) {
    case "succeeded":
      return "ok";
    case "running":
    case "stopping":
    case "admitted":
      return "live";
    case "failed":
    case "force_stopped":
    case "runtime_lost":
    case "budget_exhausted":
      return "bad";
    default:
      return "muted";
  }
}

export function isLive(status: string | undefined): boolean {
  return statusTone(status) === "live";
}

/** A size in bytes as people read it (binary units). */
export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return "–";
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
