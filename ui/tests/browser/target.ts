// What the browser suite drives: the real `trellis ui` binary on a temporary home, and real
// software-change runs started with `trellis run` and the offline command workers of
// examples/offline (the reviewers reject the first attempt, so a repair round follows).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** How a run's workspace is set up. */
export interface RunSetup {
  /** The workspace is a git repository with one commit, so the run takes checkpoints. */
  git?: boolean;
  /** The worker appends to attempts.txt and fails, so the run fails. */
  fail?: boolean;
  /** The run works in a fresh git worktree (`--workspace worktree`), kept when it fails. */
  worktree?: boolean;
}

export interface Target {
  url: string;
  /** The temporary TRELLIS_HOME the server and the runs use. */
  home: string;
  /** The one-time launch link `trellis ui` printed: opening it signs the browser in. */
  launch: string;
  /** Starts a software-change run; `hold` binds its worker to a command that never finishes. */
  startRun: (title: string, hold: boolean, setup?: RunSetup) => Promise<string>;
  /** The workspace directory a run started by `startRun` works in. */
  workspaceOf: (runId: string) => string;
  /**
   * Runs the public GaP conformance workflow `name` (../shared/conformance/gap) to its end from
   * a folder of its own with the stub Python tool, then deletes that folder: the page must draw
   * the run from the ledger alone. With `fails`, its `stub.work` tool raises, and the run must
   * end failed.
   */
  runGapWorkflow: (name: string, title: string, fails?: boolean) => string;
  /** Starts a GaP workflow `document` detached, with the built-in `stub.*` tools; its run id. */
  startGapDocument: (document: unknown, title: string) => string;
  /** The run's `status` object as `trellis status --json` reports it. */
  runStatus: (runId: string) => unknown;
  close: () => Promise<void>;
}

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = resolve(here, "../../..");
/** The binary under test: $TRELLIS_BIN, else the workspace's debug build. */
export const TRELLIS = process.env.TRELLIS_BIN ?? join(repo, "target/debug/trellis");

/** A worker that reads its input and then waits to be stopped. */
const HOLD_PLAN = {
  nodes: {
    worker: { kind: "command", command: ["python3", "-c", "import sys, time; sys.stdin.read(); time.sleep(600)"] },
    acceptance: { kind: "command", command: ["python3", "offline/review.py", "acceptance"] },
    code: { kind: "command", command: ["python3", "offline/review.py", "code"] },
  },
};

/** A worker that leaves a trace in the workspace, says on stderr what it does and that it gave up, and fails. */
const FAIL_PLAN = {
  nodes: {
    worker: {
      kind: "command",
      command: ["/bin/sh", "-c", "cat >/dev/null; echo attempt >> attempts.txt; echo 'progress: reading files' >&2; echo 'ERROR: the worker gave up' >&2; exit 1"],
    },
    acceptance: { kind: "command", command: ["python3", "offline/review.py", "acceptance"] },
    code: { kind: "command", command: ["python3", "offline/review.py", "code"] },
  },
};

/** `git init` and one commit of everything in `dir`. */
function commitAll(dir: string) {
  const identity = ["-c", "user.name=t", "-c", "user.email=t@t"];
  for (const args of [["init", "--quiet"], ["add", "--all"], [...identity, "commit", "--quiet", "-m", "initial"]]) {
    const done = spawnSync("git", args, { cwd: dir, encoding: "utf8", timeout: 30_000 });
    if (done.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${done.stderr}`);
  }
}

/** Where `trellis ui` serves, and its one-time launch link (both printed on its stdout). */
function waitForUrl(child: ChildProcess): Promise<{ url: string; launch: string }> {
  return new Promise((resolveUrl, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`trellis ui did not start: ${seen}`)), 20_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      seen += chunk.toString("utf8");
      const served = /serving (http:\/\/[^\s]+?)\/?\s/.exec(seen);
      const launch = /open (http:\/\/[^\s]+\/launch\/[0-9a-f]+)\s/.exec(seen);
      if (served?.[1] && launch?.[1]) {
        clearTimeout(timer);
        resolveUrl({ url: served[1], launch: launch[1] });
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => (seen += chunk.toString("utf8")));
    child.on("exit", (code) => reject(new Error(`trellis ui exited (${code}): ${seen}`)));
  });
}

/** Starts `trellis ui` on a temporary home; `extraArgs` go on its command line. */
export async function startTarget(extraArgs: string[] = []): Promise<Target> {
  const root = mkdtempSync(join(tmpdir(), "trellis-ui-suite-"));
  // A private home with its own SQLite ledger, whatever the calling shell points at.
  const env: NodeJS.ProcessEnv = { ...process.env, TRELLIS_HOME: join(root, "home") };
  delete env.TRELLIS_LEDGER;
  const server = spawn(TRELLIS, ["ui", "--listen", "127.0.0.1:0", ...extraArgs], { env, stdio: ["ignore", "pipe", "pipe"] });
  const { url, launch } = await waitForUrl(server);
  let workspaces = 0;
  const workspaceOf = new Map<string, string>();

  return {
    url,
    home: env.TRELLIS_HOME ?? "",
    launch,
    workspaceOf: (runId) => {
      const workspace = workspaceOf.get(runId);
      if (!workspace) throw new Error(`no workspace recorded for ${runId}`);
      return workspace;
    },
    startRun: async (title, hold, setup = {}) => {
      workspaces += 1;
      const workspace = join(root, `workspace-${workspaces}`);
      mkdirSync(workspace);
      cpSync(join(repo, "examples/offline"), join(workspace, "offline"), { recursive: true });
      let plan = "offline/plan.json";
      if (hold) {
        writeFileSync(join(workspace, "hold-plan.json"), JSON.stringify(HOLD_PLAN));
        plan = "hold-plan.json";
      } else if (setup.fail) {
        writeFileSync(join(workspace, "fail-plan.json"), JSON.stringify(FAIL_PLAN));
        plan = "fail-plan.json";
      }
      if (setup.git) commitAll(workspace);
      const started = spawnSync(
        TRELLIS,
        ["run", "--detach", "--json", "--template", "software-change", "--task", title, "--title", title,
          "--runtime-config", plan, "--cwd", workspace, ...(setup.worktree ? ["--workspace", "worktree"] : [])],
        { env, cwd: workspace, encoding: "utf8", timeout: 30_000 },
      );
      if (started.status !== 0) throw new Error(`trellis run failed: ${started.stderr}`);
      const receipt = started.stdout.split("\n")[0] ?? "";
      const runId = (JSON.parse(receipt) as { runId: string }).runId;
      workspaceOf.set(runId, workspace);
      return runId;
    },
    runGapWorkflow: (name, title, fails = false) => {
      workspaces += 1;
      const folder = join(root, `gap-${workspaces}`);
      mkdirSync(folder);
      cpSync(join(repo, "../shared/conformance/gap", name), join(folder, "workflow.json"));
      const tool = `stub.work=${join(repo, "crates/trellis-gap/tests/fixtures/tools/stub_tools.py")}:${fails ? "work_fail" : "work_ok"}`;
      const ran = spawnSync(TRELLIS, ["run", join(folder, "workflow.json"), "--python-tool", tool, "--title", title, "--json"], {
        env,
        cwd: root,
        encoding: "utf8",
        timeout: 60_000,
      });
      if (ran.status !== (fails ? 1 : 0)) throw new Error(`trellis run (GaP) exited ${ran.status}: ${ran.stderr}`);
      rmSync(folder, { recursive: true, force: true });
      const listed = spawnSync(TRELLIS, ["list", "--json"], { env, encoding: "utf8", timeout: 30_000 });
      const runs = (JSON.parse(listed.stdout) as { runs: { runId: string; title: string }[] }).runs;
      const run = runs.find((candidate) => candidate.title === title);
      if (!run) throw new Error(`the GaP run ${title} is not listed`);
      return run.runId;
    },
    startGapDocument: (document, title) => {
      workspaces += 1;
      const folder = join(root, `gap-${workspaces}`);
      mkdirSync(folder);
      writeFileSync(join(folder, "workflow.json"), JSON.stringify(document));
      const started = spawnSync(TRELLIS, ["run", folder, "--stub-tools", "--detach", "--json", "--title", title], {
        env,
        cwd: root,
        encoding: "utf8",
        timeout: 30_000,
      });
      if (started.status !== 0) throw new Error(`trellis run (GaP, detached) failed: ${started.stderr}`);
      const runId = /"runId"\s*:\s*"([^"]+)"/.exec(started.stdout)?.[1];
      if (!runId) throw new Error(`no run id in: ${started.stdout}`);
      return runId;
    },
    runStatus: (runId) => {
      const shown = spawnSync(TRELLIS, ["status", runId, "--json"], { env, encoding: "utf8", timeout: 30_000 });
      if (shown.status !== 0) throw new Error(`trellis status failed: ${shown.stderr}`);
      return (JSON.parse(shown.stdout) as { status: unknown }).status;
    },
    close: async () => {
      server.kill("SIGTERM");
      // Stop whatever a failed test left running, then remove the home and workspaces.
      const listed = spawnSync(TRELLIS, ["list", "--json"], { env, encoding: "utf8", timeout: 30_000 });
      const runs = listed.status === 0 ? (JSON.parse(listed.stdout) as { runs: { runId: string; status: { phase: string } }[] }).runs : [];
      for (const run of runs.filter((candidate) => candidate.status.phase !== "finished")) {
        spawnSync(TRELLIS, ["force-stop", run.runId], { env, timeout: 30_000 });
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
