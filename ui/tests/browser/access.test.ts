// Keyboard, screen-reader and small-screen use, and the smaller promises of every page: a focus
// ring on nodes, Enter opens and Escape closes, dialogs that keep focus and default to Cancel,
// no serious axe-core violations, glyphs that render, a served favicon, plain error messages, a
// hint to reload after the server restarted, a dark theme, and a usable 390 px layout.
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openSession, seriousViolations, waitForRunStatus, type Session } from "./session";

let session: Session;
let page: Page;
let succeeded: string;
let gap: string;

beforeAll(async () => {
  session = await openSession();
  page = session.page;
  succeeded = await session.target.startRun("Say hello in greeting.txt", false);
  gap = session.target.runGapWorkflow("test_sg_on_error_recovery.json", "GaP workflow for access checks");
  await page.goto(`${session.target.url}/#/runs/${succeeded}`);
  await waitForRunStatus(page, "succeeded");
});

afterAll(async () => {
  await session?.close();
});

async function openRun(runId: string, status: string) {
  await page.goto(`${session.target.url}/#/`);
  await page.getByTestId("runs-table").waitFor();
  await page.goto(`${session.target.url}/#/runs/${runId}`);
  await waitForRunStatus(page, status);
  await page.locator(".react-flow__node").first().waitFor();
}

describe("keyboard, accessibility and polish", () => {
  test("Tab reaches a node with a visible focus ring, Enter opens it, Escape closes it", async () => {
    await openRun(succeeded, "succeeded");
    let focusedNode: string | null = null;
    for (let press = 0; press < 40 && !focusedNode; press += 1) {
      await page.keyboard.press("Tab");
      focusedNode = await page.evaluate(() => {
        const active = document.activeElement;
        return active?.classList.contains("react-flow__node") ? active.getAttribute("data-id") : null;
      });
    }
    expect(focusedNode).not.toBeNull();
    const ring = await page.evaluate(() => {
      const style = getComputedStyle(document.activeElement as Element);
      return { width: Number.parseFloat(style.outlineWidth), style: style.outlineStyle };
    });
    expect(ring.style).not.toBe("none");
    expect(ring.width).toBeGreaterThanOrEqual(2);
    await page.keyboard.press("Enter");
    await page.getByTestId("inspector").waitFor({ timeout: 5_000 });
    await page.keyboard.press("Escape");
    await expect.poll(() => page.getByTestId("inspector").count()).toBe(0);
    // Space opens it as well.
    await page.locator(`.react-flow__node[data-id="${focusedNode}"]`).focus();
    await page.keyboard.press(" ");
    await page.getByTestId("inspector").waitFor({ timeout: 5_000 });
    await page.keyboard.press("Escape");
    await expect.poll(() => page.getByTestId("inspector").count()).toBe(0);
  });

  test("a confirmation dialog opens on Cancel, keeps focus inside, and Escape cancels it", async () => {
    const held = await session.target.startRun("A change held open", true);
    await openRun(held, "running");
    await page.getByTestId("force-stop").click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor();
    await expect(page.evaluate(() => document.activeElement?.getAttribute("data-testid"))).resolves.toBe("cancel");
    for (let press = 0; press < 5; press += 1) {
      await page.keyboard.press("Tab");
      await expect(page.evaluate(() => Boolean(document.activeElement?.closest('[role="dialog"]')))).resolves.toBe(true);
    }
    await page.keyboard.press("Escape");
    await expect.poll(() => dialog.count()).toBe(0);
    await expect(page.getByTestId("run-page").getAttribute("data-run-status")).resolves.toBe("running");

    // The page outlived its server's token (as after a `trellis ui` restart): the refusal says to reload.
    await page.evaluate(() => document.querySelector('meta[name="trellis-token"]')?.setAttribute("content", "stale"));
    await page.getByTestId("force-stop").click();
    await page.getByTestId("confirm").click();
    await expect.poll(() => page.getByTestId("control-result").textContent(), { timeout: 10_000 }).toContain("reload the page");
    // Signed in afresh, force-stop works; the stopped node says so in words.
    await page.reload();
    await waitForRunStatus(page, "running");
    await page.getByTestId("force-stop").click();
    await page.getByTestId("confirm").click();
    await waitForRunStatus(page, "force_stopped", 30_000);
    await expect.poll(() => page.getByTestId("node-worker").textContent(), { timeout: 10_000 }).toContain("force-stopped");
    const header = (await page.locator(".run-header").textContent()) ?? "";
    expect(header.split("force").length - 1).toBe(2); // the badge, and the Force-stop button
    session.problems.splice(0, session.problems.length, ...session.problems.filter((problem) => !problem.startsWith("403 ")));
  });

  test("no page has a serious or critical accessibility violation", async () => {
    const pages: [string, () => Promise<void>][] = [
      ["runs", async () => {
        await page.goto(`${session.target.url}/#/`);
        await page.getByTestId("run-row").first().waitFor();
      }],
      ["software-change run", () => openRun(succeeded, "succeeded")],
      ["GaP run", () => openRun(gap, "succeeded")],
      ["profiles", async () => {
        await page.goto(`${session.target.url}/#/profiles`);
        await page.getByTestId("new-profile-name").waitFor();
      }],
      ["validate", async () => {
        await page.goto(`${session.target.url}/#/validate`);
        await page.getByTestId("document").waitFor();
      }],
    ];
    const found: string[] = [];
    for (const [name, open] of pages) {
      await open();
      await page.waitForTimeout(300);
      for (const violation of await seriousViolations(page)) found.push(`${name}: ${violation}`);
    }
    expect(found).toEqual([]);
  });

  test("every glyph renders with Debian's fonts, and truncated text has a tooltip", async () => {
    await openRun(succeeded, "succeeded");
    await page.getByTestId("replay").click();
    await page.getByRole("button", { name: "First event" }).waitFor();
    const text = await page.evaluate(() => document.body.innerText);
    for (const glyph of ["⏮", "⏭", "⑂", "⏸"]) expect(text).not.toContain(glyph);
    const untitled = await page.evaluate(() =>
      [...document.querySelectorAll(".card-name, .card-worker, .frame-sub, .edge-label, .timeline-label, .overview-line")]
        .filter((element) => !element.closest("[title]"))
        .map((element) => element.className),
    );
    expect(untitled).toEqual([]);
    await page.getByRole("button", { name: "Back to live" }).click();
  });

  test("/favicon.ico is served, and a missing run reads without a JavaScript prefix", async () => {
    const icon = await page.request.get(`${session.target.url}/favicon.ico`);
    expect(icon.status()).toBe(200);
    expect(icon.headers()["content-type"]).toContain("image/svg+xml");
    await page.goto(`${session.target.url}/#/runs/01aaaaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa`);
    const box = page.locator(".error-box");
    await box.waitFor();
    const text = (await box.textContent()) ?? "";
    expect(text).not.toContain("Error:");
    expect(text.toLowerCase()).toContain("not found");
    session.problems.splice(0, session.problems.length, ...session.problems.filter((problem) => !problem.startsWith("404 /api/v1/runs/01aaaaaa")));
  });

  test("the page follows a dark system theme", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await openRun(succeeded, "succeeded");
    const background = await page.evaluate(() => getComputedStyle(document.querySelector(".run-header") as Element).backgroundColor);
    const [red, green, blue] = (background.match(/\d+/g) ?? []).map(Number);
    expect((red ?? 255) + (green ?? 255) + (blue ?? 255)).toBeLessThan(200);
    await page.emulateMedia({ colorScheme: "light" });
  });

  test("at 390 px wide the run page has no sideways scroll and a usable graph", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await openRun(succeeded, "succeeded");
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width).toBeLessThanOrEqual(391);
      const canvas = await page.getByTestId("graph-canvas").boundingBox();
      expect(canvas && canvas.height >= 250 && canvas.width >= 350).toBe(true);
    } finally {
      await page.setViewportSize({ width: 1440, height: 900 });
    }
  });

  test("no page answered 404 or threw", () => {
    expect(session.problems).toEqual([]);
  });
});
