// A signed-in page on a fresh `trellis ui`, recording what must never happen on any page: an
// uncaught error, a 404, a failed request.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";
import { launchBrowser, type Browser } from "./browser";
import { startTarget, type Target } from "./target";

export interface Session {
  target: Target;
  browser: Browser;
  page: Page;
  /** Uncaught page errors and 4xx/5xx answers seen so far (`404 /favicon.ico`, …). */
  problems: string[];
  close: () => Promise<void>;
}

export async function openSession(): Promise<Session> {
  const target = await startTarget();
  const browser = await launchBrowser();
  const page = await browser.context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("response", (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${new URL(response.url()).pathname}`);
  });
  await page.goto(target.launch);
  await page.waitForURL(`${target.url}/`);
  return {
    target,
    browser,
    page,
    problems,
    close: async () => {
      await browser.close();
      await target.close();
    },
  };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** Runs axe-core in the page; returns its serious and critical violations, as lines. */
export async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: Document) => Promise<{ violations: unknown[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations;
  });
  return (violations as AxeViolation[])
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes.slice(0, 3).map((node) => node.target.join(" ")).join(" | ")}`);
}

/** Waits until the run page shows `status` (the run ended). */
export async function waitForRunStatus(page: Page, status: string, timeout = 60_000): Promise<void> {
  await page.waitForFunction(
    (wanted) => document.querySelector('[data-testid="run-page"]')?.getAttribute("data-run-status") === wanted,
    status,
    { timeout },
  );
}
