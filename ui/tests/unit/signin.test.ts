// Where a page whose team-server session ended is sent: the sign-in page, told to bring it
// back to the route it was on (and only to a route of this page).
import { describe, expect, test } from "vitest";
import { signInUrl } from "../../src/api/server";

describe("signing in again", () => {
  test("the sign-in page comes back to the page's route", () => {
    expect(signInUrl("#/profiles/greeter")).toBe("/signin?next=%2F%23%2Fprofiles%2Fgreeter");
    expect(signInUrl("#/runs/abc?x=1&y=2")).toBe(`/signin?next=${encodeURIComponent("/#/runs/abc?x=1&y=2")}`);
    // No route, or something that is not one, comes back to the runs.
    expect(signInUrl("")).toBe("/signin");
    expect(signInUrl("#")).toBe("/signin");
    expect(signInUrl("#x")).toBe("/signin");
  });
});
