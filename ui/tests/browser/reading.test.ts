// Reading a finished run at a glance: a GaP run drawn from the ledger with its folder gone, how
// a software-change run ended (terminal, path, loop rounds, verdicts per round), replay as a
// read-only view of the past, the run overview, readable text and a view that stays put.
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openSession, waitForRunStatus, type Session } from "./session";

let session: Session;
let page: Page;
let changeRun: string;

beforeAll(async () => {
  session = await openSession();
  page = session.page;
  changeRun = await session.target.startRun("Add a greeting to the README", false);
});

afterAll(async () => {
  await session?.close();
});

async function openRun(runId: string, status: string) {
  // From another page, so the run page starts afresh (its first view, its default frames).
  await page.goto(`${session.target.url}/#/`);
  await page.getByTestId("runs-table").waitFor();
  await page.goto(`${session.target.url}/#/runs/${runId}`);
  await waitForRunStatus(page, status);
}

describe("reading a finished run", () => {
  test("a GaP run whose folder was deleted shows its graph, node states, timeline and inspector from the ledger", async () => {
    const gap = session.target.runGapWorkflow("test_sg_on_error_recovery.json", "GaP recovery workflow");
    await openRun(gap, "succeeded");
    const work = page.getByTestId("node-work");
    await expect.poll(() => work.getAttribute("data-state"), { timeout: 10_000 }).toBe("succeeded");
    // The end node the run reached is marked; the failure end is not.
    await expect(page.getByTestId("node-done").getAttribute("data-reached")).resolves.toBe("true");
    await expect(page.getByTestId("node-failed").getAttribute("data-reached")).resolves.toBeNull();
    // The path: START → run_sg → done, and inside the subgraph START → work → ok → END.
    await expect.poll(() => page.locator(".react-flow__edge.edge-taken").count(), { timeout: 10_000 }).toBe(5);
    // The timeline lists the body; the inspector shows what it returned.
    await expect(page.locator('[data-testid="timeline-bar"][data-node="sg_work.work"]').count()).resolves.toBe(1);
    await work.click();
    const inspector = page.getByTestId("inspector");
    await expect(inspector.getByTestId("gap-phase").textContent()).resolves.toContain("succeeded");
    await expect(inspector.getByTestId("gap-output").textContent()).resolves.toContain("7");
    expect(await page.locator(".inspector .empty").count()).toBe(0);
  });

  test("a failed GaP run whose folder was deleted marks the failure end it reached", async () => {
    const gap = session.target.runGapWorkflow("test_sg_on_error_recovery.json", "GaP recovery workflow that fails", true);
    await openRun(gap, "failed");
    const failedEnd = page.getByTestId("node-failed");
    await expect.poll(() => failedEnd.getAttribute("data-reached"), { timeout: 10_000 }).toBe("true");
    await expect(failedEnd.textContent()).resolves.toContain("run ended here ✕");
    await expect(failedEnd.getAttribute("data-kind")).resolves.toBe("end");
    await expect(page.getByTestId("node-done").getAttribute("data-reached")).resolves.toBeNull();
    await expect(page.getByTestId("node-work").getAttribute("data-state")).resolves.toBe("failed");
    // The accessible tree says so as well.
    await expect(page.getByTestId("tree-failed").textContent()).resolves.toContain("the run ended here");
  });

  test("a running GaP run's bodies turn running, then succeeded, without a reload", async () => {
    const slow = {
      version: 3,
      meta: {},
      nodes: {
        wait: { type: "tool", tool: "stub.sleep", inputs: { seconds: 2 } },
        make: { type: "tool", tool: "stub.const", inputs: { value: 7 } },
        done: { type: "end", status: "success" },
      },
      edges: [["START", "wait"], ["wait", "make"], ["make", "done"]],
      conditional_edges: {},
      subgraphs: {},
    };
    const run = session.target.startGapDocument(slow, "A slow GaP workflow");
    await page.goto(`${session.target.url}/#/runs/${run}`);
    const wait = page.getByTestId("node-wait");
    await expect.poll(() => wait.getAttribute("data-state"), { timeout: 15_000 }).toBe("running");
    await expect.poll(() => page.getByTestId("node-make").getAttribute("data-state"), { timeout: 20_000 }).toBe("succeeded");
    await waitForRunStatus(page, "succeeded");
    await expect(wait.getAttribute("data-state")).resolves.toBe("succeeded");
    await expect(page.getByTestId("node-done").getAttribute("data-reached")).resolves.toBe("true");
  });

  test("a failed GaP run's overview says which body failed and why", async () => {
    const failing = {
      version: 3,
      meta: {},
      nodes: {
        make: { type: "tool", tool: "stub.const", inputs: { value: 7 } },
        check: { type: "tool", tool: "stub.fail", inputs: { message: "seven is not enough" } },
        done: { type: "end", status: "success" },
      },
      edges: [["START", "make"], ["make", "check"], ["check", "done"]],
      conditional_edges: {},
      subgraphs: {},
    };
    const run = session.target.startGapDocument(failing, "A failing GaP workflow");
    await openRun(run, "failed");
    await expect.poll(() => page.getByTestId("node-check").getAttribute("data-state"), { timeout: 10_000 }).toBe("failed");
    await expect(page.getByTestId("node-make").getAttribute("data-state")).resolves.toBe("succeeded");
    await expect(page.getByTestId("run-cause").textContent()).resolves.toContain("check: ");
    await expect(page.getByTestId("run-cause").textContent()).resolves.toContain("seven is not enough");
    // No end node was reached: the node whose failure ended the run is marked instead.
    await expect.poll(() => page.getByTestId("node-check").getAttribute("data-reached"), { timeout: 10_000 }).toBe("true");
    await expect(page.getByTestId("node-done").getAttribute("data-reached")).resolves.toBeNull();
  });

  test("a succeeded software-change run marks the terminal it reached, the path, the loop's rounds and each round's verdicts", async () => {
    await openRun(changeRun, "succeeded");
    await page.getByTestId("expand-all").click();
    const done = page.getByTestId("node-done");
    await done.waitFor();
    // "Expand all" fits the whole expanded graph: every card lies inside the canvas.
    const outside = () =>
      page.evaluate(() => {
        const pane = document.querySelector(".react-flow")?.getBoundingClientRect();
        if (!pane) return ["no canvas"];
        return [...document.querySelectorAll(".react-flow__node")]
          .filter((node) => {
            const box = node.getBoundingClientRect();
            return box.left < pane.left - 1 || box.top < pane.top - 1 || box.right > pane.right + 1 || box.bottom > pane.bottom + 1;
          })
          .map((node) => node.getAttribute("data-id") ?? "?");
      });
    await expect.poll(outside, { timeout: 10_000 }).toEqual([]);
    await expect(done.getAttribute("data-reached")).resolves.toBe("true");
    await expect(page.getByTestId("node-change_attempts_exhausted").getAttribute("data-reached")).resolves.toBeNull();
    // Round 2's verdicts read as round 2's: rejected first, accepted after the repair.
    const verdicts = page.locator('[data-testid="node-acceptance"] [data-testid="verdicts"] .verdict');
    await expect(verdicts.count()).resolves.toBe(2);
    await expect(verdicts.nth(0).getAttribute("data-state")).resolves.toBe("rejected");
    await expect(verdicts.nth(1).getAttribute("data-state")).resolves.toBe("accepted");
    await expect(page.getByTestId("node-acceptance").getAttribute("data-state")).resolves.toBe("accepted");
    // The loop's back-edge carries its round count, and the path taken is drawn.
    // Edges render only after React Flow has measured the cards, so wait for them.
    // At least round 2 (a rejection was repaired); a slow machine may take the loop round again.
    const roundLabels = () => page.locator(".edge-label").allTextContents();
    await expect
      .poll(async () => (await roundLabels()).filter((text) => /^round ([2-9]|\d\d+) of max \d+$/.test(text)).length, {
        timeout: 10_000,
        message: "the loop's back-edge label (labels drawn: see the next line of the log)",
      })
      .toBe(1)
      .catch(async (error: unknown) => {
        console.log("edge labels drawn:", JSON.stringify(await roundLabels()));
        throw error;
      });
    await expect.poll(() => page.locator(".react-flow__edge.edge-taken").count(), { timeout: 10_000 }).toBeGreaterThan(2);
    // No edge label covers another label or a card or pill.
    const collisions = await page.evaluate(() => {
      const boxes = (selector: string) => [...document.querySelectorAll(selector)].map((element) => ({ text: element.textContent ?? "", box: element.getBoundingClientRect() }));
      const overlap = (a: DOMRect, b: DOMRect) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
      const labels = boxes(".edge-label");
      const nodes = boxes(".react-flow__node-card, .react-flow__node-pill");
      const found: string[] = [];
      labels.forEach((label, index) => {
        for (const other of labels.slice(index + 1)) if (overlap(label.box, other.box)) found.push(`${label.text} × ${other.text}`);
        for (const node of nodes) if (overlap(label.box, node.box)) found.push(`${label.text} × ${node.text}`);
      });
      return found;
    });
    expect(collisions).toEqual([]);
    // Collapsed again, the loop of a succeeded run does not look failed.
    await page.getByTestId("expand-all").click();
    await page.getByTestId("frame-change_loop").waitFor();
    const loopState = await page.getByTestId("frame-change_loop").getAttribute("data-state");
    expect(["accepted", "succeeded"]).toContain(loopState);
  });

  test("the overview shows the run's input, result and output", async () => {
    await openRun(changeRun, "succeeded");
    const overview = page.getByTestId("run-overview");
    await expect(overview.getByTestId("overview-input").textContent()).resolves.toContain("Add a greeting to the README");
    await expect(overview.getByTestId("overview-result").textContent()).resolves.toContain("succeeded");
    await expect(overview.getByTestId("overview-output").count()).resolves.toBe(1);
  });

  test("replaying a finished run keeps its real status, offers no controls and stops the clock", async () => {
    await openRun(changeRun, "succeeded");
    await page.getByTestId("replay").click();
    await page.getByRole("button", { name: "First event" }).waitFor();
    await expect.poll(() => page.getByTestId("scrub-count").textContent(), { timeout: 10_000 }).toMatch(/^(\d+) \/ \1/);
    await page.getByRole("button", { name: "First event" }).click();
    for (let step = 0; step < 3; step += 1) await page.getByRole("button", { name: "Step forward" }).click();
    await expect(page.getByTestId("run-page").getAttribute("data-run-status")).resolves.toBe("succeeded");
    await expect(page.getByTestId("force-stop").count()).resolves.toBe(0);
    await expect(page.getByTestId("resume").count()).resolves.toBe(0);
    await expect(page.locator(".live-dot").count()).resolves.toBe(0);
    const header = async () => (await page.locator(".run-header").textContent()) ?? "";
    const before = await header();
    await page.waitForTimeout(2200);
    expect(await header()).toBe(before);
    await page.getByRole("button", { name: "Back to live" }).click();
    await expect(page.getByTestId("force-stop").count()).resolves.toBe(1);
  });

  test("the first view is fitted, left to right, with text of 12 px or more; selecting keeps the view; the inspector opens at its top", async () => {
    await openRun(changeRun, "succeeded");
    await page.getByTestId("node-worker").waitFor();
    await page.waitForTimeout(300);
    const zoom = await page.evaluate(() => {
      const transform = getComputedStyle(document.querySelector(".react-flow__viewport") as Element).transform;
      return new DOMMatrix(transform).a;
    });
    // Every piece of text on the canvas, as drawn at that zoom.
    const smallest = await page.evaluate((scale) => {
      let least = Infinity;
      for (const element of document.querySelectorAll(".react-flow__node *, .edge-label")) {
        const hasText = [...element.childNodes].some((child) => child.nodeType === 3 && (child.textContent ?? "").trim() !== "");
        if (hasText) least = Math.min(least, Number.parseFloat(getComputedStyle(element).fontSize) * scale);
      }
      return least;
    }, zoom);
    expect(smallest).toBeGreaterThanOrEqual(12);
    const worker = await page.getByTestId("node-worker").boundingBox();
    const choice = await page.getByTestId("frame-worker_result").boundingBox();
    expect(worker && choice && worker.x < choice.x).toBe(true);
    // The whole graph is in view.
    const canvas = await page.getByTestId("graph-canvas").boundingBox();
    const exhausted = await page.getByTestId("node-change_attempts_exhausted").boundingBox();
    expect(canvas && exhausted && exhausted.x + exhausted.width <= canvas.x + canvas.width).toBe(true);

    const viewport = () => page.evaluate(() => getComputedStyle(document.querySelector(".react-flow__viewport") as Element).transform);
    const view = await viewport();
    await page.getByTestId("node-worker").click();
    await page.getByTestId("inspector").waitFor();
    await page.waitForTimeout(500);
    expect(await viewport()).toBe(view);
    await expect(page.getByTestId("inspector").evaluate((element) => element.scrollTop)).resolves.toBe(0);
  });

  test("a GaP workflow validates with a header that says what it holds", async () => {
    await page.goto(`${session.target.url}/#/validate`);
    const { readFileSync } = await import("node:fs");
    const { fileURLToPath } = await import("node:url");
    const document = readFileSync(fileURLToPath(new URL("../../../../shared/conformance/gap/test_minimal_v3.json", import.meta.url)), "utf8");
    await page.getByTestId("document").fill(document);
    await page.getByTestId("validate").click();
    const report = page.getByTestId("report");
    await expect.poll(() => report.getAttribute("data-kind"), { timeout: 15_000 }).toBe("gap");
    const text = (await report.textContent()) ?? "";
    expect(text).not.toContain("identity");
    expect(text).not.toContain("?");
  });

  test("no page answered 404 or threw", () => {
    expect(session.problems).toEqual([]);
  });
});
