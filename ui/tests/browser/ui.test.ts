// The browser suite: watch a software-change run live, inspect it, force-stop another, resume a
// failed one from a checkpoint, and pin a diagnostic on the validate page, asserting on what the
// page shows.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { launchBrowser, type Browser } from "./browser";
import { startTarget, type Target } from "./target";

const here = fileURLToPath(new URL(".", import.meta.url));
const SCREENSHOTS = `${here}../../../target/ui-screenshots`;

let target: Target;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  target = await startTarget();
  browser = await launchBrowser();
  page = await browser.context.newPage();
  page.on("pageerror", (error) => {
    throw error;
  });
  await page.addInitScript(recordStates);
  // Only the browser that opens the one-time link may use the server: sign this one in.
  await page.goto(target.launch);
  await page.waitForURL(`${target.url}/`);
});

/**
 * Runs in the page before its own scripts: records, per test id, every `data-state` an element
 * takes, so a transition is seen however briefly it lasts.
 */
function recordStates() {
  const seen: Record<string, string[]> = {};
  (window as unknown as { __seen: typeof seen }).__seen = seen;
  const record = (element: Element) => {
    const id = element.getAttribute("data-testid");
    const state = element.getAttribute("data-state");
    if (!id || !state) return;
    const list = (seen[id] ??= []);
    if (list[list.length - 1] !== state) list.push(state);
  };
  new MutationObserver((mutations) => {
    for (const mutation of mutations) {
      if (mutation.type === "attributes") record(mutation.target as Element);
      for (const added of mutation.addedNodes) {
        if (!(added instanceof Element)) continue;
        record(added);
        added.querySelectorAll("[data-state]").forEach(record);
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-state"] });
}

async function statesSeen(testId: string): Promise<string[]> {
  return page.evaluate((id) => (window as unknown as { __seen: Record<string, string[]> }).__seen[id] ?? [], testId);
}

/** Whether `sequence` holds `first` and, later, `then`. */
function inOrder(sequence: string[], first: string, then: string): boolean {
  const at = sequence.indexOf(first);
  return at !== -1 && sequence.indexOf(then, at + 1) !== -1;
}

afterAll(async () => {
  await browser?.close();
  await target?.close();
});

async function stateOf(selector: string): Promise<string | null> {
  return page.locator(selector).first().getAttribute("data-state");
}

/** Polls the page every 50 ms until `read` returns one of `wanted`; records every value seen. */
async function waitForStates(selector: string, wanted: string[], seen: Set<string>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const state = await stateOf(selector).catch(() => null);
    if (state) seen.add(state);
    if (state && wanted.includes(state)) return state;
    await page.waitForTimeout(50);
  }
  throw new Error(`${selector} never reached ${wanted.join("|")}; saw ${[...seen].join(", ")}`);
}

describe("trellis ui in Chromium", () => {
  test("a new run appears in the list without a reload, and its page follows it live", async () => {
    await page.goto(`${target.url}/#/`);
    await page.waitForSelector('[data-testid="runs-table"]');
    await expect.poll(() => page.locator(".live-dot.on").count(), { timeout: 10_000 }).toBe(1);
    await target.startRun("Write a friendly greeting", false);
    const row = page.locator('[data-testid="run-row"]', { hasText: "Write a friendly greeting" });
    await row.waitFor({ timeout: 15_000 });

    await row.locator("a").click();
    await page.waitForSelector('[data-testid="node-worker"]');
    // The reviewers sit in frames collapsed by default: open them all to watch them.
    await page.getByTestId("expand-all").click();
    await expect
      .poll(() => page.getAttribute('[data-testid="run-page"]', "data-run-status"), { timeout: 60_000 })
      .toBe("succeeded");
    // The page changed under our eyes: each node went through its states without a reload.
    const worker = await statesSeen("node-worker");
    expect(inOrder(worker, "running", "succeeded"), `worker went ${worker.join(" → ")}`).toBe(true);
    const acceptance = await statesSeen("node-acceptance");
    expect(inOrder(acceptance, "rejected", "accepted"), `acceptance went ${acceptance.join(" → ")}`).toBe(true);
    expect(await page.getAttribute('[data-testid="node-worker"]', "data-state")).toBe("succeeded");
  });

  test("the repair round shows on the timeline", async () => {
    await page.getByRole("tab", { name: "Timeline" }).click();
    await expect(page.locator('[data-testid="round-marker"][data-round="2"]').count()).resolves.toBe(1);
    const bars = page.locator('[data-testid="timeline-bar"][data-node="worker"]');
    await expect(bars.count()).resolves.toBe(2);
    await expect(bars.nth(1).getAttribute("data-round")).resolves.toBe("2");
    const rejected = page.locator('[data-testid="timeline-bar"][data-node="code"][data-state="rejected"]');
    await expect(rejected.count()).resolves.toBe(1);
  });

  test("the inspector shows a reviewer's diagnostic", async () => {
    await page.locator('[data-testid="node-code"]').click();
    const inspector = page.locator('[data-testid="inspector"]');
    await inspector.waitFor();
    await expect(inspector.getAttribute("data-node")).resolves.toBe("code");
    // Round 1: the rejection, with the reviewer's finding.
    await inspector.getByRole("tab", { name: /round 1/ }).click();
    const diagnostic = inspector.locator('[data-testid="inspector-diagnostic"]');
    await expect.poll(() => diagnostic.textContent(), { timeout: 10_000 }).toContain("exclamation mark");
    await expect(inspector.locator('[data-testid="inspector-signals"]').textContent()).resolves.toContain("rejected");
    await page.screenshot({ path: `${SCREENSHOTS}/run-page.png` });
    // The README's picture (docs/images/ui-run-page.jpg is a copy of this one).
    await page.screenshot({ path: `${SCREENSHOTS}/run-page.jpg`, type: "jpeg", quality: 70 });
  });

  test("the logs pane lists the run's lines and filters them by node", async () => {
    await page.getByRole("tab", { name: "Logs" }).click();
    const lines = page.getByTestId("log-line");
    await expect.poll(() => lines.count(), { timeout: 10_000 }).toBeGreaterThan(3);
    await page.getByLabel("Filter logs by node").selectOption("code");
    await expect.poll(async () => {
      const nodes = await page.locator('[data-testid="log-line"] .log-node').allTextContents();
      return nodes.length > 0 && nodes.every((node) => node === "code");
    }, { timeout: 10_000 }).toBe(true);
    await page.getByRole("tab", { name: "Timeline" }).click();
  });

  test("the replay scrubber shows the run as it was after each event", async () => {
    await page.getByTestId("replay").click();
    const count = page.getByTestId("scrub-count");
    await expect.poll(async () => {
      const [at, total] = ((await count.textContent()) ?? "").split("/").map((part) => Number.parseInt(part, 10));
      return total !== undefined && total > 5 && at === total;
    }, { timeout: 10_000 }).toBe(true);
    await page.getByRole("button", { name: "First event" }).click();
    await expect.poll(() => page.getAttribute('[data-testid="node-worker"]', "data-state")).toBe("pending");
    // Step until the worker's first dispatch: it shows running, then later succeeded.
    for (let step = 0; step < 10; step += 1) {
      if ((await page.getAttribute('[data-testid="node-worker"]', "data-state")) === "running") break;
      await page.getByRole("button", { name: "Step forward" }).click();
    }
    expect(await page.getAttribute('[data-testid="node-worker"]', "data-state")).toBe("running");
    await page.getByRole("button", { name: "Last event" }).click();
    await expect.poll(() => page.getAttribute('[data-testid="node-worker"]', "data-state")).toBe("succeeded");
    await page.getByRole("button", { name: "Back to live" }).click();
  });

  test("the runs list filters by status and searches titles", async () => {
    await page.goto(`${target.url}/#/`);
    const rows = page.getByTestId("run-row");
    await rows.first().waitFor();
    await page.getByLabel("Search runs by title").fill("friendly");
    await expect.poll(() => rows.count()).toBe(1);
    await page.getByLabel("Search runs by title").fill("");
    await page.getByLabel("Filter by status").selectOption("running");
    await expect.poll(() => page.locator('[data-testid="run-row"][data-status="succeeded"]').count()).toBe(0);
    await page.getByLabel("Filter by status").selectOption("all");
  });

  test("force-stop ends a second run force_stopped", async () => {
    const stopped = await target.startRun("A change to stop", true);
    await page.goto(`${target.url}/#/`);
    const row = page.locator('[data-testid="run-row"]', { hasText: "A change to stop" });
    await row.waitFor({ timeout: 15_000 });
    await row.locator("a").click();
    await waitForStates('[data-testid="node-worker"]', ["running"], new Set());
    await page.getByTestId("force-stop").click();
    await page.getByRole("dialog").waitFor();
    await page.getByTestId("confirm").click();
    await expect
      .poll(() => page.getAttribute('[data-testid="run-page"]', "data-run-status"), { timeout: 30_000 })
      .toBe("force_stopped");
    await expect(page.getByTestId("force-stop").isDisabled()).resolves.toBe(true);
    // The ledger agrees with the page: the run ended force_stopped.
    expect(target.runStatus(stopped)).toMatchObject({ phase: "finished", terminalResult: { status: "failed", reason: "force_stopped" } });
  });

  test("a failed run shows its cause, and resuming from a checkpoint past a changed workspace opens the successor", async () => {
    const failed = await target.startRun("A change that fails", false, { git: true, fail: true });
    await expect
      .poll(() => (target.runStatus(failed) as { phase: string }).phase, { timeout: 60_000 })
      .toBe("finished");
    await page.goto(`${target.url}/#/runs/${failed}`);
    await expect
      .poll(() => page.getAttribute('[data-testid="run-page"]', "data-run-status"), { timeout: 15_000 })
      .toBe("failed");
    await expect(page.getByTestId("run-cause").textContent()).resolves.toContain("worker:");

    // Levels come from what the worker said: its ERROR line passes "error and above", its
    // progress on the same pipe does not.
    await page.getByRole("tab", { name: "Logs" }).click();
    await page.getByLabel("Minimum log level").selectOption("error");
    const lines = page.getByTestId("log-line");
    await expect.poll(() => lines.allTextContents(), { timeout: 10_000 }).toEqual(
      expect.arrayContaining([expect.stringContaining("the worker gave up")]),
    );
    expect((await lines.allTextContents()).some((line) => line.includes("reading files"))).toBe(false);

    await page.getByRole("tab", { name: "Checkpoints" }).click();
    const row = page.locator('[data-testid="checkpoint-row"]').first();
    await row.waitFor({ timeout: 10_000 });
    await expect(row.textContent()).resolves.toContain("worker");

    // The user works on after the failure: the server refuses, and the page offers force.
    writeFileSync(join(target.workspaceOf(failed), "mine.txt"), "the user's own fix\n");
    await row.getByTestId("resume-from").click();
    await page.getByRole("dialog").waitFor();
    await page.getByTestId("confirm-resume-from").click();
    const problem = page.getByTestId("resume-problem");
    await problem.waitFor({ timeout: 15_000 });
    await expect(problem.textContent()).resolves.toContain("run.workspace_changed");
    await expect(page.getByTestId("confirm-resume-from").isDisabled()).resolves.toBe(true);
    await page.getByTestId("resume-force").check();
    await page.screenshot({ path: `${SCREENSHOTS}/checkpoints-force.png` });
    await page.getByTestId("confirm-resume-from").click();

    // The successor's page, which names the run it resumes.
    await expect.poll(() => /#\/runs\/([^/?]+)/.exec(page.url())?.[1], { timeout: 15_000 }).not.toBe(failed);
    await page.locator(`a[href="#/runs/${failed}"]`).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: `${SCREENSHOTS}/checkpoints-resumed.png` });
  });

  test("discarding a failed run's worktree removes it after a confirmation", async () => {
    const failed = await target.startRun("A change in a worktree", false, { git: true, fail: true, worktree: true });
    await expect
      .poll(() => (target.runStatus(failed) as { phase: string }).phase, { timeout: 60_000 })
      .toBe("finished");
    await page.goto(`${target.url}/#/runs/${failed}`);
    const discard = page.getByTestId("discard-workspace");
    await discard.waitFor({ timeout: 15_000 });
    await discard.click();
    await page.getByRole("dialog").waitFor();
    await page.getByTestId("confirm").click();
    await expect
      .poll(() => page.getByTestId("control-result").textContent(), { timeout: 15_000 })
      .toContain("Removed");
    // The page read the run again: its worktree is gone, so the action is no longer offered,
    // and nothing is left to resume in.
    await expect.poll(() => discard.count(), { timeout: 15_000 }).toBe(0);
    await expect(page.getByTestId("resume").isDisabled()).resolves.toBe(true);
  });

  test("the validate page pins a diagnostic on the node it names", async () => {
    const template = JSON.parse(readFileSync(`${here}../../../templates/single-worker.json`, "utf8")) as {
      root: { children: { name: string; branches?: { node: { name: string } }[]; otherwise?: { name: string } }[] };
    };
    // Rename the `done` terminal to `worker`: the graph now uses the name twice.
    const choice = template.root.children.find((child) => child.otherwise !== undefined || child.branches);
    const terminal = choice?.otherwise ?? choice?.branches?.[0]?.node;
    if (!terminal) throw new Error("single-worker template changed shape");
    terminal.name = "worker";

    await page.goto(`${target.url}/#/validate`);
    await page.getByTestId("document").fill(JSON.stringify(template, null, 2));
    await page.getByTestId("validate").click();
    const report = page.getByTestId("report");
    await expect.poll(() => report.getAttribute("data-status"), { timeout: 15_000 }).toBe("rejected");
    await expect(page.getByTestId("diagnostic").first().textContent()).resolves.toContain("worker");
    const pinned = page.locator('[data-testid="node-worker"]:has([data-testid="diagnostic-pin"])');
    await expect.poll(() => pinned.count(), { timeout: 10_000 }).toBeGreaterThan(0);
    // Only the node the diagnostic points at (the second `worker`) carries the badge.
    await expect(pinned.count()).resolves.toBe(1);
    await expect(pinned.getAttribute("data-kind")).resolves.toBe("succeed");
    await page.screenshot({ path: `${SCREENSHOTS}/validate-page.png` });
  });
  test("another browser without the one-time link gets neither runs nor the page token", async () => {
    // The signed-in page cannot read its session cookie (HttpOnly).
    await page.goto(`${target.url}/#/`);
    await expect(page.evaluate(() => document.cookie)).resolves.toBe("");
    const other = await launchBrowser();
    try {
      const stranger = await other.context.newPage();
      const front = await stranger.goto(`${target.url}/`);
      expect(front?.status()).toBe(401);
      await expect(stranger.content()).resolves.not.toContain("trellis-token");
      const runs = await stranger.goto(`${target.url}/api/v1/runs`);
      expect(runs?.status()).toBe(401);
      // The link was used by the suite's browser: it works once.
      const reused = await stranger.goto(target.launch);
      expect(reused?.status()).toBe(403);
    } finally {
      await other.close();
    }
  });
});
