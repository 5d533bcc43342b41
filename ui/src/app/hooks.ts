// Small React hooks shared by the pages: a ticking clock and the current hash route.
import { useEffect, useState } from "react";

/** The current time, refreshed every `intervalMs` while the component is mounted. */
export function useNow(intervalMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

/** The location after `#`, e.g. `/runs/abc`; `/` when empty. */
export function useHashRoute(): string {
  const read = () => decodeURI(window.location.hash.replace(/^#/, "")) || "/";
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const update = () => setRoute(read());
    window.addEventListener("hashchange", update);
    return () => window.removeEventListener("hashchange", update);
  }, []);
  return route;
}

export function navigate(path: string): void {
  window.location.hash = path;
}
