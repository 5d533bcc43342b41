// Keyboard, screen-reader and small-screen use, and the smaller promises of every page: the
// graph as a WAI-ARIA tree (one tab stop, arrow keys, a focus ring on the canvas), Enter opens and Escape closes, dialogs that keep focus and default to Cancel,
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
  test("Tab reaches the graph's tree in one stop, the canvas rings its node, Enter opens it, Escape closes it", async () => {
    await openRun(succeeded, "succeeded");
    let focused: string | null = null;
    for (let press = 0; press < 40 && !focused; press += 1) {
      await page.keyboard.press("Tab");
      focused = await page.evaluate(() => {
        const active = document.activeElement;
        return active?.getAttribute("role") === "treeitem" ? active.getAttribute("data-node-id") : null;
      });
    }
    expect(focused).not.toBeNull();
    // One tab stop: the focused item alone is in the tab order, and no canvas node is.
    await expect(page.locator('[role="treeitem"][tabindex="0"]').count()).resolves.toBe(1);
    await expect(page.locator(".react-flow__node[tabindex]").count()).resolves.toBe(0);
    const ring = await page.evaluate((id) => {
      const node = [...document.querySelectorAll(".react-flow__node")].find((element) => element.getAttribute("data-id") === id);
      const style = node ? getComputedStyle(node) : undefined;
      return { width: Number.parseFloat(style?.outlineWidth ?? "0"), style: style?.outlineStyle ?? "none" };
    }, focused);
    expect(ring.style).not.toBe("none");
    expect(ring.width).toBeGreaterThanOrEqual(2);
    await page.keyboard.press("Enter");
    await page.getByTestId("inspector").waitFor({ timeout: 5_000 });
    await expect(page.locator('[role="treeitem"][aria-selected="true"]').getAttribute("data-node-id")).resolves.toBe(focused);
    await page.keyboard.press("Escape");
    await expect.poll(() => page.getByTestId("inspector").count()).toBe(0);
    // Focus stayed on the item; Space opens it as well.
    await expect(page.evaluate(() => document.activeElement?.getAttribute("data-node-id"))).resolves.toBe(focused);
    await page.keyboard.press(" ");
    await page.getByTestId("inspector").waitFor({ timeout: 5_000 });
    await page.keyboard.press("Escape");
    await expect.poll(() => page.getByTestId("inspector").count()).toBe(0);
    // The next Tab leaves the tree.
    await page.keyboard.press("Tab");
    await expect(page.evaluate(() => document.activeElement?.getAttribute("role"))).resolves.not.toBe("treeitem");
  });

  test("the graph is a WAI-ARIA tree: frames expand and collapse, arrows move, Home, End and type-ahead jump", async () => {
    await openRun(gap, "succeeded");
    const tree = page.getByRole("tree", { name: "Graph nodes" });
    await expect(tree.count()).resolves.toBe(1);
    const item = (name: string) => page.getByTestId(`tree-${name}`);
    const focusedName = () => page.evaluate(() => document.activeElement?.getAttribute("data-testid"));
    const attributes = (name: string) =>
      item(name).evaluate((element) => ({
        role: element.getAttribute("role"),
        level: element.getAttribute("aria-level"),
        size: element.getAttribute("aria-setsize"),
        position: element.getAttribute("aria-posinset"),
        expanded: element.getAttribute("aria-expanded"),
        selected: element.getAttribute("aria-selected"),
      }));
    // The workflow frame holds the subgraph frame (a group of four) and the end nodes.
    await expect(attributes("workflow")).resolves.toEqual({ role: "treeitem", level: "1", size: "1", position: "1", expanded: "true", selected: "false" });
    await expect(attributes("run_sg")).resolves.toEqual({ role: "treeitem", level: "2", size: "4", position: "1", expanded: "true", selected: "false" });
    await expect(attributes("work")).resolves.toMatchObject({ level: "3", expanded: null });
    await expect(item("run_sg").locator(':scope > [role="group"] > [role="treeitem"]').count()).resolves.toBe(4);
    // The label says what the node is and how it stands.
    await expect(item("done").textContent()).resolves.toContain("succeeded, the run ended here");

    await item("workflow").focus();
    await page.keyboard.press("ArrowDown");
    await expect(focusedName()).resolves.toBe("tree-run_sg");
    // Left collapses the frame, on the canvas too; Down then skips its children.
    await page.keyboard.press("ArrowLeft");
    await expect(item("run_sg").getAttribute("aria-expanded")).resolves.toBe("false");
    await expect.poll(() => page.getByTestId("frame-run_sg").getAttribute("class")).toContain("collapsed");
    await expect.poll(() => page.getByTestId("node-work").count()).toBe(0);
    await page.keyboard.press("ArrowDown");
    await expect(focusedName()).resolves.toBe("tree-done");
    await page.keyboard.press("ArrowUp");
    await expect(focusedName()).resolves.toBe("tree-run_sg");
    // Right expands it, then enters it; Left goes back to the parent.
    await page.keyboard.press("ArrowRight");
    await expect(item("run_sg").getAttribute("aria-expanded")).resolves.toBe("true");
    await expect(focusedName()).resolves.toBe("tree-run_sg");
    await page.getByTestId("node-work").waitFor();
    await page.keyboard.press("ArrowRight");
    await expect(focusedName()).resolves.toBe("tree-work");
    await page.keyboard.press("ArrowLeft");
    await expect(focusedName()).resolves.toBe("tree-run_sg");
    await page.keyboard.press("End");
    await expect(page.evaluate(() => document.activeElement?.getAttribute("data-node-id"))).resolves.toBe("workflow/START");
    await page.keyboard.press("Home");
    await expect(focusedName()).resolves.toBe("tree-workflow");
    // Type-ahead, then Enter opens the node in the inspector and marks it selected.
    await page.keyboard.type("fa");
    await expect(focusedName()).resolves.toBe("tree-failed");
    await page.keyboard.press("Enter");
    await page.getByTestId("inspector").waitFor({ timeout: 5_000 });
    await expect(item("failed").getAttribute("aria-selected")).resolves.toBe("true");
    // Still one tab stop, and it is the focused item.
    await expect(page.locator('[role="treeitem"][tabindex="0"]').count()).resolves.toBe(1);
    await expect(item("failed").getAttribute("tabindex")).resolves.toBe("0");
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
