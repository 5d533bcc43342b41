// Who is signed in to a team server (`trellis serve`) in this browser, and signing out. The
// server writes the name into the page it serves a session; `trellis ui`'s page has none, so
// nothing is shown there.
import { useState } from "react";
import { pageToken } from "../api/client";
import { signedInAs } from "../api/server";

export function SessionBar() {
  const [name] = useState(signedInAs);
  const [failed, setFailed] = useState(false);
  if (!name) return null;
  const signOut = async () => {
    const response = await fetch("/signout", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Trellis-Token": pageToken() },
      body: "{}",
    }).catch(() => undefined);
    if (response?.ok) window.location.assign("/signin");
    else setFailed(true);
  };
  return (
    <span className="session-bar" data-testid="session-bar">
      <span>
        Signed in as <strong data-testid="signed-in-as">{name}</strong>
      </span>
      <button type="button" onClick={() => void signOut()} data-testid="sign-out">
        Sign out
      </button>
      {failed && <span role="alert">Could not sign out; reload the page.</span>}
    </span>
  );
}
