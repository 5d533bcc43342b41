// Benchmarks of `trellis ui` (figures, not tests; docs/benchmarks-ui.md): first paint of the run
// page of a finished 1,024-item map run, the delay from a ledger commit to the node's new state
// in the page (median of 100 changes), and the server's idle resident memory. Drives the real
// binary ($TRELLIS_BIN) and Debian's Chromium; prints one JSON document of figures.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Page } from "playwright-core";
import { launchBrowser, type Browser } from "../tests/browser/browser";
import { graph, mapGraph, mapItems, nothing, step } from "./map-graph";

const TRELLIS = resolve(process.env.TRELLIS_BIN ?? "../target/release/trellis");
const PAINT_LOADS = Number(process.env.BENCH_PAINT_LOADS ?? 10);
/** BENCH_SKIP_MAP=1 measures only the state changes and memory (quicker). */
const SKIP_MAP = process.env.BENCH_SKIP_MAP === "1";
const STEPS = 50; // two state changes each (running, succeeded): 100 changes

/** `s0` (a warm-up the page loads during) then `s1`…`s50` in sequence. */
function sequenceGraph() {
  return graph(nothing, Array.from({ length: STEPS + 1 }, (_, index) => step(`s${index}`, nothing, [])));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round((kib / 1024) * 10) / 10;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function startServer(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; launch: string }> {
  const child = spawn(TRELLIS, ["ui", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let seen = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      seen += chunk.toString("utf8");
      const url = /serving (http:\/\/\S+?)\/?\s/.exec(seen)?.[1];
      // The one-time link that signs the browser in (the server answers no one else).
      const launch = /open (http:\/\/\S+\/launch\/[0-9a-f]+)\s/.exec(seen)?.[1];
      if (url && launch) resolve({ child, url, launch });
    });
    child.on("exit", (code) => reject(new Error(`trellis ui exited ${code}`)));
  });
}

function trellis(env: NodeJS.ProcessEnv, cwd: string, args: string[]): string {
  const run = spawnSync(TRELLIS, args, { env, cwd, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  if (run.status !== 0) throw new Error(`trellis ${args.join(" ")} (${run.status ?? run.error}): ${run.stderr}`);
  return run.stdout;
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), "trellis-ui-bench-"));
  const env: NodeJS.ProcessEnv = { ...process.env, TRELLIS_HOME: join(root, "home") };
  delete env.TRELLIS_LEDGER;
  const workspace = join(root, "workspace");
  mkdirSync(workspace);
  const quick = { kind: "command", command: ["sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"] };
  writeFileSync(join(workspace, "quick.json"), JSON.stringify(quick));
  writeFileSync(join(workspace, "map.json"), JSON.stringify(mapGraph()));
  writeFileSync(join(workspace, "items.json"), JSON.stringify(mapItems()));

  const { child, url, launch } = await startServer(env);
  try {
    await measure(env, workspace, child.pid!, url, launch);
  } finally {
    child.kill("SIGTERM");
    rmSync(root, { recursive: true, force: true });
  }
}

async function measure(env: NodeJS.ProcessEnv, workspace: string, pid: number, url: string, launch: string) {
  await sleep(3000);
  const idleRssAtStart = rssMiB(pid);

  const browser = await launchBrowser();
  const signIn = await browser.context.newPage();
  await signIn.goto(launch);
  await signIn.waitForURL(`${url}/`);
  await signIn.close();
  const paints: number[] = [];
  const answered: number[] = [];
  if (!SKIP_MAP) await measurePaint(env, workspace, url, browser, paints, answered);
  const page = await browser.context.newPage();
  const { changes, committed, delays } = await measureChanges(env, workspace, url, page);
  await page.close();
  await browser.close();

  await sleep(3000);
  const idleRssAfterPages = rssMiB(pid);
  report({ paints, answered, changes, committed, delays, idleRssAtStart, idleRssAfterPages });
}

/** Loads the run page of a finished 1,024-item map run `PAINT_LOADS` times. */
async function measurePaint(env: NodeJS.ProcessEnv, workspace: string, url: string, browser: Browser, paints: number[], answered: number[]) {
  const mapReceipt = trellis(env, workspace, ["run", "map.json", "--input", "items.json", "--uniform-runtime-config", "quick.json", "--json", "--title", "map of 1024"]);
  const mapRun = (JSON.parse(mapReceipt.split("\n")[0]!) as { runId: string }).runId;
  for (let load = 0; load < PAINT_LOADS; load += 1) {
    const page = await browser.context.newPage();
    await page.goto(`${url}/#/runs/${mapRun}`, { waitUntil: "commit" });
    // Painted: the run's status is known and the map's body shows its 1,024 settled items.
    await page.waitForFunction(
      () => {
        const run = document.querySelector('[data-testid="run-page"]');
        const body = document.querySelector('[data-testid="node-work"]');
        return run?.getAttribute("data-run-status") === "succeeded" && body?.textContent?.includes("1024");
      },
      undefined,
      { polling: "raf", timeout: 60_000 },
    );
    paints.push(await page.evaluate(() => performance.now()));
    // When the page had the run's JSON (status, graph): the server's share of the paint.
    answered.push(await page.evaluate(() => Math.max(0, ...performance.getEntriesByType("resource")
      .filter((entry) => entry.name.includes("/api/v1/runs/") && !entry.name.includes("/watch") && !entry.name.includes("/logs"))
      .map((entry) => (entry as PerformanceResourceTiming).responseEnd))));
    await page.close();
  }

}

/** Runs in the page before its own scripts: notes the wall-clock time of every node state change. */
const RECORD_CHANGES = `
  window.__changes = [];
  const last = new Map();
  const record = (element) => {
    const id = element.getAttribute("data-testid");
    const state = element.getAttribute("data-state");
    if (!id || !id.startsWith("node-") || !state || last.get(id) === state) return;
    last.set(id, state);
    window.__changes.push({ node: id.slice(5), state, atMs: Date.now() });
  };
  new MutationObserver((mutations) => {
    for (const mutation of mutations) {
      if (mutation.type === "attributes") record(mutation.target);
      for (const added of mutation.addedNodes) {
        if (added instanceof Element) {
          record(added);
          added.querySelectorAll("[data-state]").forEach(record);
        }
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-state"] });
`;

interface Change {
  node: string;
  state: string;
  atMs: number;
}

/** Follows a 51-step sequence run live and pairs each node state change the page showed with
 * the ledger commit of its event. */
async function measureChanges(env: NodeJS.ProcessEnv, workspace: string, url: string, page: Page) {
  // State changes: the page records when each node's state changes; the ledger says when each
  // event was committed.
  writeFileSync(join(workspace, "sequence.json"), JSON.stringify(sequenceGraph()));
  const plan = { nodes: Object.fromEntries(Array.from({ length: STEPS + 1 }, (_, index) => [`s${index}`, {
    kind: "command",
    command: ["sh", "-c", `cat >/dev/null; sleep ${index === 0 ? 4 : 0.15}; echo '{"output":null}'`],
  }])) };
  writeFileSync(join(workspace, "sequence-plan.json"), JSON.stringify(plan));
  // A string, not a function: tsx would wrap named functions in a helper the page lacks.
  await page.addInitScript(RECORD_CHANGES);
  const receipt = trellis(env, workspace, ["run", "sequence.json", "--runtime-config", "sequence-plan.json", "--detach", "--json", "--title", "sequence"]);
  const sequenceRun = (JSON.parse(receipt.split("\n")[0]!) as { runId: string }).runId;
  await page.goto(`${url}/#/runs/${sequenceRun}`);
  await page.waitForFunction(() => document.querySelector('[data-testid="run-page"]')?.getAttribute("data-run-status") === "succeeded", undefined, { timeout: 180_000 });
  const changes = await page.evaluate(() => (window as unknown as { __changes: Change[] }).__changes);
  const watch = trellis(env, workspace, ["watch", sequenceRun, "--json"]);
  const committed = new Map<string, number>();
  for (const line of watch.split("\n").filter(Boolean)) {
    const update = JSON.parse(line) as { event: string; atMs: number; execution?: { node: string } };
    const state = update.event === "node_started" ? "running" : update.event === "node_completed" ? "succeeded" : undefined;
    if (state && update.execution) committed.set(`${update.execution.node}/${state}`, update.atMs);
  }
  const delays: number[] = [];
  for (const change of changes) {
    if (change.node === "s0") continue;
    const at = committed.get(`${change.node}/${change.state}`);
    if (at !== undefined) delays.push(change.atMs - at);
  }
  return { changes, committed, delays };
}

function report(figures: {
  paints: number[];
  answered: number[];
  changes: Change[];
  committed: Map<string, number>;
  delays: number[];
  idleRssAtStart: number;
  idleRssAfterPages: number;
}) {
  const { paints, answered, changes, committed, delays } = figures;
  console.log(JSON.stringify({
    binary: TRELLIS,
    firstPaintMs: paints.length === 0 ? "skipped" : { loads: paints.length, cold: Math.round(paints[0]!), median: Math.round(median(paints)), max: Math.round(Math.max(...paints)), runJsonAnsweredMedian: Math.round(median(answered)) },
    stateChangeVisibleMs: { changes: delays.length, observed: changes.length, committed: committed.size, median: median(delays), p90: quantile(delays, 0.9), max: Math.max(...delays) },
    idleRssMiB: { atStart: figures.idleRssAtStart, afterPages: figures.idleRssAfterPages },
  }, null, 2));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
