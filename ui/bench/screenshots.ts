// The pictures and page load times of docs/images and docs/benchmarks-ui.md: a succeeded
// software-change run (offline workers), a finished 1,024-item map and a GaP run, each shot in
// the light and the dark theme, and each run page loaded BENCH_LOADS times (median load time).
// Drives the real `trellis` ($TRELLIS_BIN) and Debian's Chromium; prints JSON; writes the
// pictures into $SHOTS_DIR (default docs/images).
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { openSession, waitForRunStatus } from "../tests/browser/session";
import { TRELLIS } from "../tests/browser/target";
import { mapGraph, mapItems } from "./map-graph";

const here = fileURLToPath(new URL(".", import.meta.url));
const SHOTS = resolve(process.env.SHOTS_DIR ?? join(here, "../../docs/images"));
const LOADS = Number(process.env.BENCH_LOADS ?? 5);
/** `jpeg` (what is committed) or `png`. */
const TYPE = process.env.SHOT_TYPE === "png" ? "png" : "jpeg";

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Milliseconds from navigation until the run page shows the run ended and `ready` holds. */
async function loadTime(page: Page, url: string, ready: string): Promise<number> {
  await page.goto("about:blank");
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(
    (selector) =>
      document.querySelector('[data-testid="run-page"]')?.getAttribute("data-run-status") === "succeeded" &&
      document.querySelector(selector) !== null,
    ready,
    { polling: "raf", timeout: 60_000 },
  );
  return page.evaluate(() => performance.now());
}

async function shoot(page: Page, name: string) {
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(300);
    const path = join(SHOTS, `ui-${name}-${scheme}.${TYPE === "png" ? "png" : "jpg"}`);
    await page.screenshot(TYPE === "png" ? { path, type: "png" } : { path, type: "jpeg", quality: 70 });
  }
  await page.emulateMedia({ colorScheme: "light" });
}

async function main() {
  mkdirSync(SHOTS, { recursive: true });
  const session = await openSession();
  const { page, target } = session;
  try {
    const change = await target.startRun("Add a friendly greeting to greeting.txt", false);
    const gap = target.runGapWorkflow("test_sg_on_error_recovery.json", "GaP: a subgraph with error recovery");
    // The map: 1,024 command steps, run to its end before the pages load.
    const workspace = join(target.home, "..", "map-workspace");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "map.json"), JSON.stringify(mapGraph()));
    writeFileSync(join(workspace, "items.json"), JSON.stringify(mapItems()));
    writeFileSync(join(workspace, "quick.json"), JSON.stringify({ kind: "command", command: ["sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"] }));
    const mapped = spawnSync(TRELLIS, ["run", "map.json", "--input", "items.json", "--uniform-runtime-config", "quick.json", "--json", "--title", "A map over 1,024 items"], {
      cwd: workspace,
      env: { ...process.env, TRELLIS_HOME: target.home },
      encoding: "utf8",
      maxBuffer: 256 * 1024 * 1024,
    });
    if (mapped.status !== 0) throw new Error(`map run failed: ${mapped.stderr}`);
    const map = (JSON.parse(mapped.stdout.split("\n")[0]!) as { runId: string }).runId;

    const pages: [string, string, string][] = [
      ["software-change", change, '[data-testid="node-worker"]'],
      ["map-1024", map, '[data-testid="node-work"] [data-testid="item-counts"]'],
      ["gap", gap, '[data-testid="node-work"][data-state="succeeded"]'],
    ];
    const times: Record<string, { loads: number; firstMs: number; medianMs: number; maxMs: number }> = {};
    for (const [name, runId, ready] of pages) {
      const url = `${target.url}/#/runs/${runId}`;
      await page.goto(url);
      await waitForRunStatus(page, "succeeded");
      const loads: number[] = [];
      for (let load = 0; load < LOADS; load += 1) loads.push(await loadTime(page, url, ready));
      times[name] = { loads: loads.length, firstMs: Math.round(loads[0]!), medianMs: Math.round(median(loads)), maxMs: Math.round(Math.max(...loads)) };
      await page.waitForTimeout(500);
      await shoot(page, name);
    }
    console.log(JSON.stringify({ binary: TRELLIS, loadTimes: times }, null, 2));
  } finally {
    await session.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
