//! GaP runs under `--isolation sandbox` (issue 33): a hostile script node and a hostile command
//! tool try to write outside the directory they run in (the workflow's own folder included),
//! read a canary in the invoking user's home, read the Trellis home, and signal a process
//! outside. Under the sandbox all of it fails while their own edits land and the run succeeds
//! — run in the foreground, by a detached controller, resumed (the run records its sandbox)
//! and resumed through `trellis serve` (sandboxed by default); without it the same script
//! reaches the canary. Needs `bwrap`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};
use support::serve::Server;
use support::{STATE_TIMEOUT, Sandbox, process_alive};

/// The script node: each attempt's verdict goes to `reach-script.txt` in its working
/// directory, its edit to `edit-script.txt`. The paths it attacks are filled in per world.
const HOSTILE_SCRIPT: &str = r#"import os, signal

def attempt(action):
    try:
        action()
        return "reached"
    except Exception:
        return "blocked"

def write(path):
    with open(path, "w") as handle:
        handle.write("escaped")

def read(path):
    with open(path) as handle:
        return handle.read()

def run(ctx):
    verdicts = {
        "write_outside": attempt(lambda: write(OUTSIDE + "/escaped-script.txt")),
        "write_workflow": attempt(lambda: write(FLOW + "/scripts/tampered.txt")),
        "read_home_canary": attempt(lambda: read(REAL_HOME + "/canary.txt")),
        "read_trellis_home": attempt(lambda: (read(TRELLIS_STATE + "/canary.txt"),
                                              os.listdir(TRELLIS_STATE + "/runs"))),
        "signal_outside": attempt(lambda: os.kill(VICTIM, signal.SIGTERM)),
    }
    with open("reach-script.txt", "w") as handle:
        handle.write("".join("%s=%s\n" % item for item in verdicts.items()))
    with open("edit-script.txt", "w") as handle:
        handle.write("edited by the script\n")
    return {"verdicts": verdicts}
"#;

/// The command tool: the same attempts from a shell, verdicts to `reach-tool.txt`.
const HOSTILE_TOOL: &str = r#"#!/bin/sh
cat >/dev/null
attempt() {
  if sh -c "$2" >/dev/null 2>&1; then echo "$1=reached"; else echo "$1=blocked"; fi
}
{
  attempt write_outside "echo escaped > '@OUTSIDE@/escaped-tool.txt'"
  attempt write_workflow "echo tampered > '@FLOW@/tools/tampered.txt'"
  attempt read_home_canary "cat '@REAL_HOME@/canary.txt'"
  attempt read_trellis_home "cat '@TRELLIS_STATE@/canary.txt' && ls '@TRELLIS_STATE@/runs'"
  attempt signal_outside "kill -TERM @VICTIM@"
} > reach-tool.txt
echo "edited by the tool" > edit-tool.txt
echo '{"done": true}'
"#;

/// Succeeds once `ready` exists in its working directory: a first run fails here, and its
/// resumed successor runs the probes.
const GATE_SCRIPT: &str = r#"import os

def run(ctx):
    if not os.path.exists("ready"):
        raise RuntimeError("not ready yet")
    return {"ready": True}
"#;

/// A test's world: the invoking user's home with a canary, the Trellis home inside it (with
/// `~/.local/bin` on `PATH`, so `~/.local` is shown and the Trellis home must be masked under
/// it), a directory outside every workspace, a victim process, and the workflow folder.
struct World {
    sandbox: Sandbox,
    real_home: PathBuf,
    trellis_home: PathBuf,
    path: String,
    outside: PathBuf,
    flow: PathBuf,
    victim: Child,
}

impl World {
    /// The workflow lies in `flow` (beside the workspace, outside it, unless `inside`).
    fn new(inside: bool) -> Self {
        let sandbox = Sandbox::new();
        let base = sandbox.workspace.parent().expect("base").to_path_buf();
        let real_home = base.join("user-home");
        let trellis_home = real_home.join(".local/state/trellis");
        let local_bin = real_home.join(".local/bin");
        let outside = base.join("outside");
        let flow = if inside {
            sandbox.workspace.join("flow")
        } else {
            base.join("flow")
        };
        for dir in [
            &trellis_home.join("runs"),
            &local_bin,
            &outside,
            &flow.join("scripts"),
            &flow.join("tools"),
        ] {
            std::fs::create_dir_all(dir).expect("directory");
        }
        std::fs::write(real_home.join("canary.txt"), "home canary").expect("canary");
        std::fs::write(trellis_home.join("canary.txt"), "trellis canary").expect("canary");
        let path = format!(
            "{}:{}",
            local_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let victim = Command::new("sleep").arg("120").spawn().expect("sleep");
        let world = Self {
            sandbox,
            real_home,
            trellis_home,
            path,
            outside,
            flow,
            victim,
        };
        world.write_flow();
        world
    }

    /// The hostile script and tool with this world's paths, and the workflow: `gate`, then
    /// the script node `probe`, then the tool node `tool`.
    fn write_flow(&self) {
        let text = |path: &Path| path.display().to_string();
        let script = format!(
            "OUTSIDE = {:?}\nFLOW = {:?}\nREAL_HOME = {:?}\nTRELLIS_STATE = {:?}\nVICTIM = {}\n{}",
            text(&self.outside),
            text(&self.flow),
            text(&self.real_home),
            text(&self.trellis_home),
            self.victim.id(),
            HOSTILE_SCRIPT
        );
        std::fs::write(self.flow.join("scripts/probe.py"), script).expect("script");
        std::fs::write(self.flow.join("scripts/gate.py"), GATE_SCRIPT).expect("gate");
        let tool = HOSTILE_TOOL
            .replace("@OUTSIDE@", &text(&self.outside))
            .replace("@FLOW@", &text(&self.flow))
            .replace("@REAL_HOME@", &text(&self.real_home))
            .replace("@TRELLIS_STATE@", &text(&self.trellis_home))
            .replace("@VICTIM@", &self.victim.id().to_string());
        let tool_file = self.flow.join("tools/probe.sh");
        std::fs::write(&tool_file, tool).expect("tool");
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&tool_file, executable).expect("chmod");
        std::fs::write(
            self.flow.join("tools.json"),
            json!({"tools": {"probe": {"command": ["./tools/probe.sh"]}}}).to_string(),
        )
        .expect("manifest");
        std::fs::write(
            self.flow.join("workflow.json"),
            json!({"version": 3, "nodes": {
                "gate": {"type": "script", "script": "scripts/gate.py"},
                "probe": {"type": "script", "script": "scripts/probe.py"},
                "tool": {"type": "tool", "tool": "probe"},
                "done": {"type": "end", "status": "success"}},
                "edges": [["START", "gate"], ["gate", "probe"], ["probe", "tool"],
                          ["tool", "done"]]})
            .to_string(),
        )
        .expect("workflow");
    }

    /// `trellis ARGS` as this world's user (its home, `PATH` and Trellis home), from the
    /// workspace.
    fn trellis(&self, args: &[&str]) -> support::CliOutput {
        let mut command = self.sandbox.command(args);
        command.envs(self.env());
        support::finish(support::start(command), support::COMMAND_TIMEOUT, args)
    }

    fn env(&self) -> [(&'static str, String); 3] {
        [
            ("HOME", self.real_home.display().to_string()),
            ("PATH", self.path.clone()),
            ("TRELLIS_HOME", self.trellis_home.display().to_string()),
        ]
    }

    fn flow_arg(&self) -> String {
        self.flow.display().to_string()
    }

    /// The run the ledger lists first (the only one, or the newest).
    fn only_run(&self) -> String {
        let listed = self.trellis(&["list", "--json"]).success().json();
        listed["runs"][0]["runId"]
            .as_str()
            .expect("run id")
            .to_owned()
    }

    fn wait_finished(&self, run: &str) -> Value {
        support::wait_until("the run to finish", STATE_TIMEOUT, || {
            let status = self.trellis(&["status", run, "--json"]).success().json();
            (status["status"]["phase"] == "finished").then_some(status)
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.victim.kill();
        let _ = self.victim.wait();
    }
}

/// The verdicts a probe wrote in `dir`, by what it tried.
fn verdicts(dir: &Path, probe: &str) -> Vec<(String, String)> {
    let file = dir.join(format!("reach-{probe}.txt"));
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("the {probe} probe ran and reported ({e})"));
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(what, verdict)| (what.to_owned(), verdict.to_owned()))
        .collect()
}

/// Every attempt of both probes blocked, both edits in `dir` (the directory the bodies ran
/// in), nothing escaped. When `dir` is the workflow's folder, writing it is the edit itself.
fn assert_contained(world: &mut World, dir: &Path) {
    let workflow_writable = dir == world.flow;
    for probe in ["script", "tool"] {
        let verdicts = verdicts(dir, probe);
        assert_eq!(verdicts.len(), 5, "{probe}: {verdicts:?}");
        for (what, verdict) in &verdicts {
            let expected = if what == "write_workflow" && workflow_writable {
                "reached"
            } else {
                "blocked"
            };
            assert_eq!(verdict, expected, "{probe} {what} under the sandbox");
        }
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("edit-{probe}.txt"))).expect("edit"),
            format!("edited by the {probe}\n")
        );
        assert!(!world.outside.join(format!("escaped-{probe}.txt")).exists());
    }
    if !workflow_writable {
        assert!(!world.flow.join("scripts/tampered.txt").exists());
        assert!(!world.flow.join("tools/tampered.txt").exists());
    }
    assert!(process_alive(world.victim.id()), "the victim was signalled");
    assert_eq!(world.victim.try_wait().expect("victim"), None);
}

/// Whether `bwrap` is on `PATH`; under `CI` (where scripts/test installs it) it must be.
fn bwrap_installed() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| Path::new(&dir).join("bwrap").is_file());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "CI must run the containment tests: install bubblewrap"
    );
    if !found {
        eprintln!("skipped: bubblewrap is not installed (scripts/test installs it)");
    }
    found
}

#[test]
fn a_hostile_gap_script_and_tool_in_the_sandbox_reach_nothing_but_the_workspace() {
    if !bwrap_installed() {
        return;
    }
    let mut world = World::new(false);
    std::fs::write(world.sandbox.workspace.join("ready"), "").expect("ready");
    let flow = world.flow_arg();
    let out = world.trellis(&["run", &flow, "--isolation", "sandbox", "--json"]);
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result: Value =
        serde_json::from_str(out.stdout.lines().last().unwrap_or_default()).expect("result object");
    assert_eq!(result["exit_status"], "success", "{result}");
    let workspace = world.sandbox.workspace.clone();
    assert_contained(&mut world, &workspace);
}

#[test]
fn the_same_gap_script_without_the_sandbox_reaches_the_canary() {
    let mut world = World::new(false);
    std::fs::write(world.sandbox.workspace.join("ready"), "").expect("ready");
    let flow = world.flow_arg();
    let out = world.trellis(&["run", &flow, "--isolation", "none", "--json"]);
    assert_eq!(out.code, Some(0), "{out:#?}");
    for probe in ["script", "tool"] {
        for (what, verdict) in verdicts(&world.sandbox.workspace, probe) {
            assert_eq!(verdict, "reached", "{probe} {what} without the sandbox");
        }
    }
    assert_eq!(
        std::fs::read_to_string(world.outside.join("escaped-script.txt")).expect("escaped"),
        "escaped"
    );
    // The tool signalled it after the script did: reaped here, so it is not a zombie.
    let status = world.victim.wait().expect("victim");
    assert!(!status.success());
}

/// `--detach`: the controller (started in the workflow's folder, where its bodies run) is
/// handed the host's isolation and contains them itself.
#[test]
fn a_detached_gap_run_on_a_sandboxed_host_is_contained_by_its_controller() {
    if !bwrap_installed() {
        return;
    }
    let mut world = World::new(true);
    std::fs::write(world.flow.join("ready"), "").expect("ready");
    let flow = world.flow_arg();
    let out = world.trellis(&["run", &flow, "--isolation", "sandbox", "--detach", "--json"]);
    assert_eq!(out.code, Some(0), "{out:#?}");
    let run = world.only_run();
    let finished = world.wait_finished(&run);
    assert_eq!(
        finished["status"]["terminalResult"]["status"], "succeeded",
        "{finished}"
    );
    let flow = world.flow.clone();
    assert_contained(&mut world, &flow);
}

/// A sandboxed GaP run records that it is: `trellis resume` (no flag, no sandboxed host)
/// starts a successor whose controller contains its bodies all the same.
#[test]
fn a_resumed_sandboxed_gap_run_stays_in_the_sandbox() {
    if !bwrap_installed() {
        return;
    }
    let mut world = World::new(true);
    let flow = world.flow_arg();
    // The first run stops at the gate (no `ready` in the workspace), before any probe.
    let out = world.trellis(&["run", &flow, "--isolation", "sandbox", "--json"]);
    assert_eq!(out.code, Some(1), "{out:#?}");
    let run = world.only_run();
    std::fs::write(world.flow.join("ready"), "").expect("ready");
    let receipt = world
        .trellis(&["resume", &run, "--detach", "--json"])
        .success()
        .json();
    let successor = receipt["runId"].as_str().expect("successor").to_owned();
    let finished = world.wait_finished(&successor);
    assert_eq!(
        finished["status"]["terminalResult"]["status"], "succeeded",
        "{finished}"
    );
    let flow = world.flow.clone();
    assert_contained(&mut world, &flow);
}

/// A sandboxed run whose directory holds the user's home would make it writable, and a
/// workflow folder holding it would show it: both refused before anything runs.
#[test]
fn a_sandboxed_gap_run_from_a_directory_holding_the_home_is_refused() {
    if !bwrap_installed() {
        return;
    }
    let world = World::new(false);
    let base = world
        .sandbox
        .workspace
        .parent()
        .expect("base")
        .to_path_buf();
    let mut command =
        world
            .sandbox
            .command(&["run", &world.flow_arg(), "--isolation", "sandbox", "--json"]);
    command.envs(world.env()).current_dir(&base);
    let out = support::finish(support::start(command), support::COMMAND_TIMEOUT, &["run"]);
    assert_ne!(out.code, Some(0), "{out:#?}");
    assert!(
        out.stderr.contains("writes the directory it runs in"),
        "{out:#?}"
    );
    assert!(!base.join("reach-script.txt").exists());

    // A workflow whose folder holds the home would show it: refused too.
    let holder = base.join("workflow.json");
    std::fs::copy(world.flow.join("workflow.json"), &holder).expect("workflow");
    let out = world.trellis(&[
        "run",
        &holder.display().to_string(),
        "--isolation",
        "sandbox",
        "--json",
    ]);
    assert_ne!(out.code, Some(0), "{out:#?}");
    assert!(out.stderr.contains("which holds"), "{out:#?}");
    assert!(out.stderr.contains("user-home"), "{out:#?}");
}

/// `trellis serve` runs steps sandboxed by default: a GaP run it resumes runs its bodies in
/// the sandbox (once refused outright).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_run_resumed_through_serve_runs_in_its_sandbox() {
    if !bwrap_installed() {
        return;
    }
    const TOKEN: &str = "gap-containment-token-long-enough";
    let mut world = World::new(true);
    let flow = world.flow_arg();
    // The first run stops at the gate, before any probe.
    let out = world.trellis(&["run", &flow, "--isolation", "none", "--json"]);
    assert_eq!(out.code, Some(1), "{out:#?}");
    let run = world.only_run();
    assert!(!world.flow.join("reach-script.txt").exists());
    std::fs::write(world.flow.join("ready"), "").expect("ready");

    let env = world.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // serve's default, said explicitly: the test helper otherwise starts it with `none`.
    let server = Server::start(
        &world.sandbox,
        TOKEN,
        None,
        &["--isolation", "sandbox"],
        &env,
    );
    let client = reqwest::Client::builder()
        .timeout(STATE_TIMEOUT)
        .build()
        .expect("client");
    let response = client
        .post(format!("{}/api/v1/runs/{run}/resume", server.base))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .expect("resume");
    let code = response.status().as_u16();
    let resumed: Value = response.json().await.expect("answer");
    assert_eq!(code, 201, "{resumed}");
    let successor = resumed["runId"].as_str().expect("successor").to_owned();
    let deadline = std::time::Instant::now() + STATE_TIMEOUT;
    let finished = loop {
        let status: Value = client
            .get(format!("{}/api/v1/runs/{successor}", server.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("status body");
        if status["status"]["phase"] == "finished" {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = server.kill();
    assert_eq!(
        finished["status"]["terminalResult"]["status"], "succeeded",
        "{finished}\n{output}"
    );
    let flow = world.flow.clone();
    assert_contained(&mut world, &flow);
}
