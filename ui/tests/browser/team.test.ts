// A team server in the browser: a real `trellis serve` on loopback; the browser is sent to the
// sign-in page, pastes its token, gets a session, makes a profile from the software-change
// template in the editor (bound to the offline command workers), starts it with "Save and
// start" and watches the run succeed; a page whose session ended goes to sign in and comes
// back where it was; then it signs out. The token is a canary:
// it must not reach the page, the browser's storage, the server's output or any file.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { launchBrowser, type Browser } from "./browser";
import { seriousViolations, waitForRunStatus } from "./session";
import { TRELLIS } from "./target";

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = resolve(here, "../../..");
const TOKEN = "trellis_browser_canary_5f3c19e07a2d4b86";
const OFFLINE = join(repo, "examples/offline");

let root: string;
let server: ChildProcess;
let output = "";
let origin: string;
let browser: Browser;
let page: Page;

/** The server's first stdout line: where it listens and its public origin. */
function waitForListening(child: ChildProcess): Promise<{ publicOrigin: string }> {
  return new Promise((resolveLine, reject) => {
    const timer = setTimeout(() => reject(new Error(`trellis serve did not start: ${output}`)), 20_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const line = output.split("\n")[0];
      if (line && output.includes("\n")) {
        clearTimeout(timer);
        resolveLine(JSON.parse(line) as { publicOrigin: string });
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.on("exit", (code) => reject(new Error(`trellis serve exited (${code}): ${output}`)));
  });
}

/** Fills a field that commits when left, and leaves it. */
async function commitField(testId: string, value: string) {
  const field = page.getByTestId(testId);
  await field.fill(value);
  await field.blur();
}

/** Every file under `dir` (the server's home, ledger and workspaces). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat) return [];
    return stat.isDirectory() ? filesUnder(path) : stat.isFile() ? [path] : [];
  });
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "trellis-team-suite-"));
  const env: NodeJS.ProcessEnv = { ...process.env, TRELLIS_HOME: join(root, "home"), TEAM_TOKEN: TOKEN };
  delete env.TRELLIS_LEDGER;
  server = spawn(
    TRELLIS,
    // The offline workers are scripts outside the served workspace, which serve's default
    // sandbox does not show (containment has its own tests).
    ["serve", "--listen", "127.0.0.1:0", "--token-env", "TEAM_TOKEN", "--workspaces", join(root, "workspaces"),
      "--isolation", "none"],
    { env, stdio: ["ignore", "pipe", "pipe"] },
  );
  origin = (await waitForListening(server)).publicOrigin;
  browser = await launchBrowser();
  page = await browser.context.newPage();
});

afterAll(async () => {
  await browser?.close();
  server?.kill("SIGTERM");
  if (root) {
    // Stop a run a failed test left going, then remove everything.
    const env = { ...process.env, TRELLIS_HOME: join(root, "home") };
    const listed = spawnSync(TRELLIS, ["list", "--json"], { env, encoding: "utf8", timeout: 30_000 });
    const runs = listed.status === 0 ? (JSON.parse(listed.stdout) as { runs: { runId: string; status: { phase: string } }[] }).runs : [];
    for (const run of runs.filter((candidate) => candidate.status.phase !== "finished")) {
      spawnSync(TRELLIS, ["force-stop", run.runId], { env, timeout: 30_000 });
    }
    rmSync(root, { recursive: true, force: true });
  }
});

describe("a team server in the browser", () => {
  test("the page sends a browser without a session to sign in, and a wrong token is refused", async () => {
    await page.goto(`${origin}/`);
    await page.waitForURL(`${origin}/signin`);
    await page.getByLabel("API token").fill("trellis_not_this_one");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("not accepted");
    expect(await page.content()).not.toContain("trellis_not_this_one");
    // Another host name for the same server is refused (the public origin is exact).
    const other = origin.replace("127.0.0.1", "localhost");
    const refused = await page.goto(`${other}/signin`);
    expect(refused?.status()).toBe(403);
  });

  test("signs in with the token and starts a run that succeeds", async () => {
    await page.goto(`${origin}/signin`);
    await page.getByLabel("API token").fill(TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${origin}/`);
    await expect.poll(() => page.getByTestId("signed-in-as").textContent()).toBe("env:TEAM_TOKEN");
    await page.getByTestId("runs-table").waitFor();

    // The cookie is out of the page's reach; the page holds its session's CSRF token, not the API token.
    expect(await page.evaluate(() => document.cookie)).toBe("");
    const cookies = await browser.context.cookies(origin);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    expect(cookies[0]?.value).not.toContain(TOKEN);

    // A profile made in the editor from the software-change template, bound to the offline
    // command workers; "Save and start" saves it on the server and submits the run there.
    await page.goto(`${origin}/#/profiles`);
    await page.getByTestId("new-profile-name").fill("greeter");
    await page.getByTestId("new-profile-source").selectOption("software-change");
    await page.getByTestId("create-profile").click();
    await page.locator('[data-testid="editor"][data-profile="greeter"]').waitFor();
    await expect.poll(() => page.getByTestId("validation-status").getAttribute("data-status"), { timeout: 15_000 }).toBe("verified");
    await page.getByText("Runtime settings").click();
    await commitField("command-worker", `python3 ${join(OFFLINE, "worker.py")}`);
    await commitField("command-acceptance", `python3 ${join(OFFLINE, "review.py")} acceptance`);
    await commitField("command-code", `python3 ${join(OFFLINE, "review.py")} code`);
    await commitField("run-input-task", "Say hello in greeting.txt");
    // The workspace is a name under the server's workspaces, not a path of this machine.
    expect(await page.getByText("a name under the server's workspaces").count()).toBe(1);
    await page.getByTestId("run-title").fill("Greeting from the browser");
    const submissions: unknown[] = [];
    page.on("request", (request) => {
      if (request.method() === "POST" && new URL(request.url()).pathname === "/api/v1/runs") submissions.push(request.postDataJSON());
    });
    const start = page.getByTestId("start-run");
    expect(await start.textContent()).toBe("Save and start");
    await start.click();
    await page.waitForURL(/#\/runs\/[^/]+$/);
    const runId = decodeURIComponent(/#\/runs\/([^/]+)$/.exec(page.url())?.[1] ?? "");

    // Saved on the server first, then submitted in the team server's shape under a fresh key.
    const stored = await page.evaluate(async () => (await fetch("/api/v1/profiles/greeter")).json());
    const plan = {
      exact: {
        nodes: {
          worker: { kind: "command", command: ["python3", join(OFFLINE, "worker.py")] },
          acceptance: { kind: "command", command: ["python3", join(OFFLINE, "review.py"), "acceptance"] },
          code: { kind: "command", command: ["python3", join(OFFLINE, "review.py"), "code"] },
        },
      },
    };
    expect(stored).toMatchObject({ name: "greeter", definition: { input: { task: "Say hello in greeting.txt" }, plan } });
    expect(submissions).toHaveLength(1);
    const [submission] = submissions as Record<string, unknown>[];
    expect(submission).toMatchObject({ title: "Greeting from the browser", input: { task: "Say hello in greeting.txt" }, plan });
    expect(submission?.submissionKey).toMatch(/^ui-[0-9a-f]{32}$/);
    expect(submission?.graph).toEqual((stored as { definition: { graph: unknown } }).definition.graph);
    expect(submission).not.toHaveProperty("profile");

    // The run view the button opened watches the run succeed.
    await waitForRunStatus(page, "succeeded", 90_000);
    await page.locator(".react-flow__node").first().waitFor();
    expect(await page.locator("h1").first().textContent()).toContain("Greeting from the browser");
    await page.goto(`${origin}/#/`);
    await page.getByText("Greeting from the browser").first().waitFor();
    expect(runId).not.toBe("");

    // A state change without the page token is refused.
    const forged = await page.evaluate(async () => {
      const response = await fetch("/api/v1/prune", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      return response.status;
    });
    expect(forged).toBe(403);
    expect(await page.content()).not.toContain(TOKEN);
    const kept = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    expect(kept).not.toContain(TOKEN);
  });

  test("a page whose session ended goes to sign in and comes back where it was, its edits kept", async () => {
    await page.goto(`${origin}/#/profiles/greeter`);
    await page.locator('[data-testid="editor"][data-profile="greeter"]').waitFor();
    const revision = await page.getByTestId("revision").textContent();
    await page.getByTestId("outline-code").getByRole("button").first().click();
    await commitField("node-instructions", "Review the code once more, briefly.");
    // The edit's validation (and the node panel's probe) answered; nothing else is asked.
    await expect.poll(() => page.getByTestId("validation-status").getAttribute("data-status"), { timeout: 15_000 }).toBe("verified");
    await page.waitForLoadState("networkidle");

    // The session ends on the server (as at its idle time) while the browser keeps its cookie.
    const [session] = await browser.context.cookies(origin);
    const ended = await page.evaluate(async () => {
      const token = document.querySelector<HTMLMetaElement>('meta[name="trellis-token"]')?.content ?? "";
      const response = await fetch("/signout", { method: "POST", headers: { "Content-Type": "application/json", "X-Trellis-Token": token }, body: "{}" });
      return response.status;
    });
    expect(ended).toBe(200);
    if (session) await browser.context.addCookies([session]);
    expect(page.url()).toBe(`${origin}/#/profiles/greeter`);

    // Saving is answered 401: the page goes to sign in, remembering its route.
    await page.getByTestId("save").click();
    await page.waitForURL(`${origin}/signin?next=${encodeURIComponent("/#/profiles/greeter")}`);
    await page.getByLabel("API token").fill(TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${origin}/#/profiles/greeter`);
    await page.locator('[data-testid="editor"][data-profile="greeter"]').waitFor();
    // The unsaved edit was kept in the browser and is restored; saving it now works.
    await page.getByTestId("draft-restored").waitFor();
    expect(await page.getByTestId("editor").getAttribute("data-dirty")).toBe("true");
    await page.getByTestId("save").click();
    await expect.poll(() => page.getByTestId("revision").textContent()).toMatch(/^revision \d+$/);
    expect(await page.getByTestId("revision").textContent()).not.toBe(revision);
    const saved = await page.evaluate(async () => JSON.stringify(await (await fetch("/api/v1/profiles/greeter")).json()));
    expect(saved).toContain("Review the code once more, briefly.");
  });

  test("signing out ends the session", async () => {
    await page.goto(`${origin}/#/`);
    const [session] = await browser.context.cookies(origin);
    await page.getByTestId("sign-out").click();
    await page.waitForURL(`${origin}/signin`);
    expect(await browser.context.cookies(origin)).toEqual([]);
    // The server forgot the session too: its old cookie, sent again, is refused.
    const replayed = await page.request.get(`${origin}/api/v1/runs`, {
      headers: { Cookie: `${session?.name}=${session?.value}` },
    });
    expect(replayed.status()).toBe(401);
    expect(((await replayed.json()) as { code: string }).code).toBe("no_session");
    await page.goto(`${origin}/`);
    await page.waitForURL(`${origin}/signin`);
  });

  test("the sign-in page has no serious accessibility violation", async () => {
    await page.goto(`${origin}/signin`);
    expect(await seriousViolations(page)).toEqual([]);
  });

  test("`trellis --target NAME ui` signs a browser in through a one-time link, never handing it the token", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TRELLIS_HOME: join(root, "client"), TRELLIS_TARGETS: join(root, "targets.json"), TEAM_TOKEN: TOKEN };
    const added = spawnSync(TRELLIS, ["target", "add", "team", origin, "--token-env", "TEAM_TOKEN"], { env, encoding: "utf8", timeout: 30_000 });
    expect(added.status, added.stderr).toBe(0);
    const opened = spawnSync(TRELLIS, ["--target", "team", "ui"], { env, encoding: "utf8", timeout: 30_000 });
    expect(opened.status, opened.stderr).toBe(0);
    expect(opened.stdout + opened.stderr).not.toContain(TOKEN);
    const link = /open (http:\/\/\S+\/launch\/[0-9a-f]+)\s/.exec(opened.stdout)?.[1];
    expect(link).toBeDefined();

    const other = await launchBrowser();
    try {
      const fresh = await other.context.newPage();
      await fresh.goto(link ?? "");
      await fresh.waitForURL(`${origin}/`);
      await expect.poll(() => fresh.getByTestId("signed-in-as").textContent()).toBe("env:TEAM_TOKEN");
      await fresh.getByText("Greeting from the browser").first().waitFor();
      expect(await fresh.content()).not.toContain(TOKEN);
      // The link worked once.
      const again = await fresh.goto(link ?? "");
      expect(again?.status()).toBe(403);
    } finally {
      await other.close();
    }
  });

  test("the token never reached the server's output or any file it keeps", () => {
    expect(output).toContain("env:TEAM_TOKEN");
    expect(output).not.toContain(TOKEN);
    const leaking = filesUnder(root).filter((path) => readFileSync(path).includes(TOKEN));
    expect(leaking).toEqual([]);
  });
});
