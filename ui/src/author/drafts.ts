// Unsaved edits kept in the browser's local storage per profile, so leaving the editor (or
// reloading the tab) loses nothing; a draft remembers the revision it started from.
import type { ProfileDefinition } from "../api/profiles";

export interface Draft {
  definition: ProfileDefinition;
  /** The revision the edits started from (none: a profile not saved yet). */
  baseRevision?: number;
  savedAtMs: number;
}

const PREFIX = "trellis.draft.";

function storage(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
}

export function readDraft(name: string): Draft | undefined {
  const text = storage()?.getItem(PREFIX + name);
  if (!text) return undefined;
  try {
    const draft = JSON.parse(text) as Draft;
    return typeof draft === "object" && draft !== null && typeof draft.definition === "object" ? draft : undefined;
  } catch {
    return undefined;
  }
}

export function writeDraft(name: string, draft: Draft): void {
  try {
    storage()?.setItem(PREFIX + name, JSON.stringify(draft));
  } catch {
    // A full storage keeps the edits in this tab only.
  }
}

export function dropDraft(name: string): void {
  storage()?.removeItem(PREFIX + name);
}

/** Names of profiles with a draft, including profiles not saved yet. */
export function draftNames(): string[] {
  const store = storage();
  if (!store) return [];
  const names: string[] = [];
  for (let index = 0; index < store.length; index += 1) {
    const key = store.key(index);
    if (key?.startsWith(PREFIX)) names.push(key.slice(PREFIX.length));
  }
  return names.sort();
}
