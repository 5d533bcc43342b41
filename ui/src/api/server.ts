// What the page knows of the server that served it, and going back to sign in. A team server
// (`trellis serve`) writes the signed-in name into the pages it serves a session; `trellis ui`
// writes none. On a team server an API call answered 401 means the session ended (expired,
// signed out elsewhere, the server restarted): the page goes to the sign-in page, which brings
// it back to the same route afterwards.

/** Who is signed in to the team server that served this page; none on `trellis ui`. */
export function signedInAs(): string | undefined {
  return document.querySelector<HTMLMetaElement>('meta[name="trellis-user"]')?.content || undefined;
}

/** Whether a team server (`trellis serve`) served this page. */
export function onTeamServer(): boolean {
  return signedInAs() !== undefined;
}

/** The sign-in page, told to come back to `route` (a hash route such as `#/profiles/x`). */
export function signInUrl(route: string): string {
  const back = route.startsWith("#/") ? `/${route}` : "/";
  return back === "/" ? "/signin" : `/signin?next=${encodeURIComponent(back)}`;
}

let leaving = false;

/**
 * The session ended: on to sign in again (once, whatever else fails meanwhile). Not from a
 * frame (the embeddable run view): the sign-in page refuses to be framed, and signing in is
 * the framing page's business.
 */
export function signInAgain(): void {
  if (leaving || window.self !== window.top) return;
  leaving = true;
  window.location.assign(signInUrl(window.location.hash));
}
