// The embeddable run view: a page at an allowed origin frames `embed.html` of a real
// `trellis ui` and talks to it through the version-1 bridge — hears ready, the run's state
// and the selected node, opens another run — while a page at an origin not allowed gets
// nothing. Parent and server are both `localhost` (same-site), so the session cookie reaches
// the frame.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Frame, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { launchBrowser, type Browser } from "./browser";
import { startTarget, type Target } from "./target";

interface Message {
  trellis: number;
  type: string;
  runId?: string | null;
  status?: string;
  node?: string | null;
  code?: string;
}

let parents: Server;
let parentPort: number;
let target: Target;
let browser: Browser;
let page: Page;
let first: string;
let second: string;

/** A parent page framing `src`, recording the bridge's messages from `frameOrigin`. */
function parentPage(src: string, frameOrigin: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Dashboard</title></head><body>
<iframe id="run" src="${src}" width="1200" height="800" title="Run"></iframe>
<script>
window.__messages = [];
window.addEventListener("message", (event) => {
  if (event.origin === ${JSON.stringify(frameOrigin)} && event.data && event.data.trellis === 1) window.__messages.push(event.data);
});
window.__send = (message) => document.getElementById("run").contentWindow.postMessage(message, ${JSON.stringify(frameOrigin)});
</script></body></html>`;
}

beforeAll(async () => {
  // The parent pages: `/frame?src=URL&origin=ORIGIN`.
  parents = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    response.end(parentPage(url.searchParams.get("src") ?? "", url.searchParams.get("origin") ?? ""));
  });
  await new Promise<void>((listening) => parents.listen(0, "127.0.0.1", listening));
  parentPort = (parents.address() as AddressInfo).port;
  target = await startTarget(["--embed-origin", `http://localhost:${parentPort}`]);
  browser = await launchBrowser();
  page = await browser.context.newPage();
  // Sign in as `localhost` (the server answers to it too), the parent's site.
  const local = target.url.replace("127.0.0.1", "localhost");
  await page.goto(target.launch.replace("127.0.0.1", "localhost"));
  await page.waitForURL(`${local}/`);
  first = await target.startRun("Greeting for the dashboard", false);
  second = await target.startRun("Another greeting", false);
});

afterAll(async () => {
  await browser?.close();
  await target?.close();
  await new Promise((closed) => parents?.close(closed));
});

async function messages(): Promise<Message[]> {
  return page.evaluate(() => (window as unknown as { __messages: Message[] }).__messages);
}

async function frame(): Promise<Frame> {
  await expect.poll(() => page.frames().length).toBe(2);
  const found = page.frames()[1];
  if (!found) throw new Error("no frame");
  return found;
}

describe("embed.html", () => {
  test("tells an allowed parent it is ready, how the run goes and which node is selected", async () => {
    const local = target.url.replace("127.0.0.1", "localhost");
    const src = `${local}/embed.html#/runs/${first}`;
    await page.goto(`http://localhost:${parentPort}/frame?src=${encodeURIComponent(src)}&origin=${encodeURIComponent(local)}`);
    await expect.poll(async () => (await messages()).some((m) => m.type === "ready" && m.runId === first), { timeout: 15_000 }).toBe(true);
    await expect
      .poll(async () => (await messages()).some((m) => m.type === "run-state" && m.runId === first && m.status === "succeeded"), {
        timeout: 60_000,
      })
      .toBe(true);

    const view = await frame();
    await view.locator('.react-flow__node[data-id]').first().waitFor();
    await view.locator(".react-flow__node", { hasText: "worker" }).first().click();
    await view.getByTestId("inspector").waitFor();
    const inspected = await view.getByTestId("inspector").getAttribute("data-node");
    await expect
      .poll(async () => (await messages()).find((m) => m.type === "select-node" && m.node !== null)?.node, { timeout: 10_000 })
      .toBe(inspected);

    // A command: open another run in the frame.
    await page.evaluate((runId) => (window as unknown as { __send: (m: unknown) => void }).__send({ trellis: 1, type: "open-run", runId }), second);
    await expect
      .poll(async () => (await messages()).some((m) => m.type === "run-state" && m.runId === second), { timeout: 30_000 })
      .toBe(true);
    expect(view.url()).toContain(`#/runs/${second}`);

    // Another version, or an unknown command, is answered with an error and changes nothing.
    await page.evaluate(() => {
      const send = (window as unknown as { __send: (m: unknown) => void }).__send;
      send({ trellis: 2, type: "open-run", runId: "x" });
      send({ trellis: 1, type: "delete-run", runId: "x" });
    });
    await expect
      .poll(async () => (await messages()).filter((m) => m.type === "error").map((m) => m.code))
      .toEqual(["unsupported_version", "unknown_command"]);
    expect(view.url()).toContain(`#/runs/${second}`);
  });

  test("a page at an origin the server does not allow cannot frame it", async () => {
    const local = target.url.replace("127.0.0.1", "localhost");
    const src = `${local}/embed.html#/runs/${first}`;
    // Same parent server, named by its address: another origin (and another site).
    await page.goto(`http://127.0.0.1:${parentPort}/frame?src=${encodeURIComponent(src)}&origin=${encodeURIComponent(local)}`);
    await page.waitForTimeout(3_000);
    expect(await messages()).toEqual([]);
    const framed = page.frames()[1];
    const reached = framed ? await framed.locator("#root").count().catch(() => 0) : 0;
    expect(reached).toBe(0);
  });

  test("the app itself cannot be framed", async () => {
    const local = target.url.replace("127.0.0.1", "localhost");
    await page.goto(`http://localhost:${parentPort}/frame?src=${encodeURIComponent(`${local}/`)}&origin=${encodeURIComponent(local)}`);
    await page.waitForTimeout(2_000);
    const framed = page.frames()[1];
    const reached = framed ? await framed.locator("#root").count().catch(() => 0) : 0;
    expect(reached).toBe(0);
  });
});
