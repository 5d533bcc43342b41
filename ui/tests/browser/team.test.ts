// A team server in the browser: a real `trellis serve` on loopback; the browser is sent to the
// sign-in page, pastes its token, gets a session, starts a software-change run there (bound to
// the offline command workers) and watches it succeed, then signs out. The token is a canary:
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

    // Start a run from the signed-in page, as the page's own requests do (session + page token).
    const plan = {
      nodes: {
        worker: { kind: "command", command: ["python3", join(OFFLINE, "worker.py")] },
        acceptance: { kind: "command", command: ["python3", join(OFFLINE, "review.py"), "acceptance"] },
        code: { kind: "command", command: ["python3", join(OFFLINE, "review.py"), "code"] },
      },
    };
    const started = await page.evaluate(async (body) => {
      const token = document.querySelector<HTMLMetaElement>('meta[name="trellis-token"]')?.content ?? "";
      const response = await fetch("/api/v1/runs", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Trellis-Token": token },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: await response.text() };
    }, {
      title: "Greeting from the browser",
      template: { name: "software-change", delivery: "none" },
      task: "Say hello in greeting.txt",
      plan: { exact: plan },
    });
    expect(started.status, started.body).toBe(201);
    const runId = (JSON.parse(started.body) as { runId: string }).runId;

    // The same request without the page token is refused.
    const forged = await page.evaluate(async () => {
      const response = await fetch("/api/v1/prune", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      return response.status;
    });
    expect(forged).toBe(403);

    await page.goto(`${origin}/#/`);
    await page.getByText("Greeting from the browser").first().waitFor();
    await page.goto(`${origin}/#/runs/${runId}`);
    await waitForRunStatus(page, "succeeded", 90_000);
    await page.locator(".react-flow__node").first().waitFor();
    expect(await page.content()).not.toContain(TOKEN);
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    expect(stored).not.toContain(TOKEN);
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
