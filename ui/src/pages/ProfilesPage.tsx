// The Profiles page: saved profiles and unsaved drafts on the left, a new profile from a
// template or an empty graph, and the editor of the one the route names (`#/profiles/NAME`).
import { useEffect, useId, useState } from "react";
import { api } from "../api/client";
import { profilesApi, type ProfileSummary } from "../api/profiles";
import type { TemplateInfo } from "../api/types";
import { navigate } from "../app/hooks";
import { draftNames, writeDraft } from "../author/drafts";
import { emptyGraph } from "../author/document";
import { Editor } from "../author/Editor";
import { useProfileEditor } from "../author/useProfileEditor";
import { describeFailure } from "../run/errors";

/** What the profile store accepts: 1–64 lowercase letters, digits, `-`, `_`, `.`, starting with a letter or digit. */
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function ProfilesPage({ open }: { open?: string }) {
  const [profiles, setProfiles] = useState<ProfileSummary[] | undefined>();
  const [failure, setFailure] = useState<string | undefined>();
  const [drafts, setDrafts] = useState<string[]>(() => draftNames());

  useEffect(() => {
    let cancelled = false;
    profilesApi
      .list()
      .then((listing) => !cancelled && setProfiles(listing.profiles))
      .catch((error: unknown) => !cancelled && setFailure(describeFailure(error)));
    setDrafts(draftNames());
    return () => {
      cancelled = true;
    };
  }, [open]);

  const saved = new Set((profiles ?? []).map((profile) => profile.name));
  const unsaved = drafts.filter((name) => !saved.has(name));

  return (
    <div className="page profiles-page" data-testid="profiles-page">
      <div className="profiles-grid">
        <aside className="profiles-list" aria-label="Profiles">
          <h1>Profiles</h1>
          <NewProfile taken={new Set([...saved, ...unsaved])} />
          {failure && <div className="error-box">{failure}</div>}
          {!profiles && !failure && <div className="loading">Loading profiles…</div>}
          <ul data-testid="profile-list">
            {(profiles ?? []).map((profile) => (
              <li key={profile.name} data-testid="profile-item" data-name={profile.name}>
                <a href={`#/profiles/${encodeURIComponent(profile.name)}`} aria-current={open === profile.name ? "page" : undefined}>
                  {profile.name}
                </a>{" "}
                <span className="muted small">
                  r{profile.revision}
                  {drafts.includes(profile.name) ? " · draft" : ""}
                </span>
              </li>
            ))}
            {unsaved.map((name) => (
              <li key={name} data-testid="profile-item" data-name={name}>
                <a href={`#/profiles/${encodeURIComponent(name)}`} aria-current={open === name ? "page" : undefined}>
                  {name}
                </a>{" "}
                <span className="muted small">not saved yet</span>
              </li>
            ))}
          </ul>
        </aside>
        <section className="profiles-main">
          {open ? <OpenProfile key={open} name={open} /> : <p className="empty">Open a profile, or make a new one from a template or an empty graph.</p>}
        </section>
      </div>
    </div>
  );
}

function OpenProfile({ name }: { name: string }) {
  const editor = useProfileEditor(name);
  if (editor.load === "loading") return <div className="loading">Loading {name}…</div>;
  if (editor.load === "failed") return <div className="error-box">{editor.loadError}</div>;
  if (editor.load === "missing") return <div className="empty">There is no profile named {name}.</div>;
  return <Editor name={name} editor={editor} />;
}

function NewProfile({ taken }: { taken: Set<string> }) {
  const [templates, setTemplates] = useState<TemplateInfo[]>([]);
  const [name, setName] = useState("");
  const [source, setSource] = useState("");
  const [failure, setFailure] = useState<string | undefined>();
  const nameId = useId();
  const sourceId = useId();
  useEffect(() => {
    api.templates().then(setTemplates, (error: unknown) => setFailure(describeFailure(error)));
  }, []);
  const problem = !name ? undefined : !NAME.test(name) ? "lowercase letters, digits, -, _ and ., starting with a letter or digit" : taken.has(name) ? "that name is taken" : undefined;

  const create = async () => {
    setFailure(undefined);
    try {
      const graph = source ? (await api.template(source)).graph : emptyGraph();
      writeDraft(name, { definition: { graph, ...(source ? { description: `from the ${source} template` } : {}) }, savedAtMs: Date.now() });
      navigate(`/profiles/${encodeURIComponent(name)}`);
      setName("");
    } catch (error) {
      setFailure(describeFailure(error));
    }
  };

  return (
    <form
      className="new-profile"
      aria-label="New profile"
      onSubmit={(event) => {
        event.preventDefault();
        if (name && !problem) void create();
      }}
    >
      <div className="form-row">
        <label htmlFor={nameId}>New profile</label>
        <input id={nameId} value={name} placeholder="name" data-testid="new-profile-name" aria-invalid={problem ? "true" : undefined} onChange={(event) => setName(event.target.value)} />
      </div>
      {problem && <span className="error-text">{problem}</span>}
      <div className="form-row">
        <label htmlFor={sourceId}>from</label>
        <select id={sourceId} value={source} data-testid="new-profile-source" onChange={(event) => setSource(event.target.value)}>
          <option value="">an empty graph</option>
          {templates.map((template) => (
            <option key={template.name} value={template.name}>
              the {template.name} template
            </option>
          ))}
        </select>
      </div>
      <button type="submit" disabled={!name || problem !== undefined} data-testid="create-profile">
        Create
      </button>
      {failure && <div className="error-box">{failure}</div>}
    </form>
  );
}
