// Runtime settings (harness, provider, model, effort, budget, a command per node) as the
// toolbar edits them, read from and written into a profile's plan: a uniform agent plan when
// every node runs on the agent lane, else an exact plan binding each node.
import { isObject, type Json } from "./document";

export interface Settings {
  harness: string;
  provider: string;
  model: string;
  effort: string;
  inputTokens: string;
  outputTokens: string;
  costUsd: string;
  /** Executable name → its command line; nodes not listed run on the agent lane. */
  commands: Record<string, string>;
}

export const HARNESSES = ["claude", "codex", "copilot"];
export const PROVIDERS = ["anthropic", "openai", "openrouter", "bedrock", "gateway", "github"];
export const EFFORTS = ["", "low", "medium", "high", "xhigh", "max"];

const str = (value: unknown) => (typeof value === "string" ? value : "");
const num = (value: unknown) => (typeof value === "number" ? String(value) : "");

/** A command line split into arguments: spaces separate, quotes group, nothing is expanded. */
export function splitCommand(line: string): string[] {
  const args: string[] = [];
  let current = "";
  let quote: string | undefined;
  let started = false;
  for (const char of line) {
    if (quote) {
      if (char === quote) quote = undefined;
      else current += char;
    } else if (char === '"' || char === "'") {
      quote = char;
      started = true;
    } else if (/\s/.test(char)) {
      if (started) args.push(current);
      current = "";
      started = false;
    } else {
      current += char;
      started = true;
    }
  }
  if (started) args.push(current);
  return args;
}

export const joinCommand = (args: unknown[]): string =>
  args.map((arg) => (typeof arg === "string" && /[\s"']/.test(arg) ? `'${arg}'` : String(arg))).join(" ");

/** The settings a plan holds; a uniform command plan is that command for every executable. */
export function readSettings(plan: unknown, executables: string[] = []): Settings {
  const body = isObject(plan) ? (isObject(plan.uniform) ? plan.uniform : isObject(plan.exact) ? plan.exact : {}) : {};
  const budget = isObject(body.budget) ? body.budget : {};
  const commands: Record<string, string> = {};
  if (body.kind === "command" && Array.isArray(body.command)) {
    for (const name of executables) commands[name] = joinCommand(body.command);
  }
  let model = str(body.model);
  let effort = str(body.effort);
  if (isObject(body.nodes)) {
    for (const [name, binding] of Object.entries(body.nodes)) {
      if (!isObject(binding)) continue;
      if (binding.kind === "command" && Array.isArray(binding.command)) commands[name] = joinCommand(binding.command);
      if (binding.kind === "agent") {
        model ||= str(binding.model);
        effort ||= str(binding.effort);
      }
    }
  }
  return {
    harness: str(body.harness),
    provider: str(body.provider),
    model,
    effort,
    inputTokens: num(budget.inputTokens),
    outputTokens: num(budget.outputTokens),
    costUsd: num(budget.costUsd),
    commands,
  };
}

/** Keys of a plan body the settings manage; the others (connections, sessionScope, …) are kept. */
const MANAGED = ["harness", "provider", "model", "effort", "budget", "nodes", "kind", "command"];

/**
 * The plan for `settings` over the graph's executables (none when nothing is set), keeping
 * the fields of `previous` the settings do not show when the plan keeps its shape.
 */
export function writePlan(settings: Settings, executables: string[], previous?: unknown): { exact?: Json; uniform?: Json } | undefined {
  const plan = planOf(settings, executables);
  const shape = plan?.exact ? "exact" : "uniform";
  const before = isObject(previous) && isObject(previous[shape]) && (previous[shape] as Json).kind !== "command" ? (previous[shape] as Json) : undefined;
  if (!plan || !before) return plan;
  const kept = Object.fromEntries(Object.entries(before).filter(([key]) => !MANAGED.includes(key)));
  return { [shape]: { ...kept, ...plan[shape] } };
}

function planOf(settings: Settings, executables: string[]): { exact?: Json; uniform?: Json } | undefined {
  const budget: Json = {};
  if (settings.inputTokens) budget.inputTokens = Number(settings.inputTokens);
  if (settings.outputTokens) budget.outputTokens = Number(settings.outputTokens);
  if (settings.costUsd) budget.costUsd = Number(settings.costUsd);
  const withBudget = (plan: Json): Json => (Object.keys(budget).length > 0 ? { ...plan, budget } : plan);
  const commanded = executables.filter((name) => settings.commands[name]?.trim());
  const lane: Json = {};
  if (settings.harness) lane.harness = settings.harness;
  if (settings.provider) lane.provider = settings.provider;
  if (commanded.length === 0) {
    if (!settings.harness && !settings.provider && !settings.model && Object.keys(budget).length === 0) return undefined;
    return { uniform: withBudget({ ...lane, model: settings.model, ...(settings.effort ? { effort: settings.effort } : {}) }) };
  }
  const nodes: Json = {};
  for (const name of executables) {
    const line = settings.commands[name]?.trim();
    nodes[name] = line
      ? { kind: "command", command: splitCommand(line) }
      : { kind: "agent", model: settings.model, ...(settings.effort ? { effort: settings.effort } : {}) };
  }
  return { exact: withBudget({ ...lane, nodes }) };
}
