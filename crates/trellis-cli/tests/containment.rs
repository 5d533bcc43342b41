//! `--isolation sandbox` through the real binary (issue 33): a hostile command worker tries to
//! write outside its workspace, read a canary in the invoking user's home and in another run's
//! workspace, signal a process outside, and list the Trellis home. Under the sandbox all of it
//! fails while its own edit lands and the run succeeds; without it, the same worker reaches
//! everything, which is what the sandbox is for. A `trellis worker --isolation sandbox` host
//! running a queued execution on PostgreSQL contains it the same way. Needs `bwrap`
//! (scripts/test installs Debian's bubblewrap); without it the sandbox half is a refusal,
//! which is tested too.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::{Value, json};
use support::graph::*;
use support::{Sandbox, process_alive};

/// The worker: each attempt is a shell snippet whose success means "reached"; the verdicts go
/// to `reach.txt` in the workspace, the edit to `edit.txt`, and the reply is `{"output": null}`.
const HOSTILE_WORKER: &str = r#"#!/bin/sh
cat >/dev/null
if [ -n "$FAIL_FIRST" ] && [ ! -e failed-once ]; then
  touch failed-once
  echo "failing the first attempt on purpose" >&2
  exit 3
fi
attempt() {
  if sh -c "$2" >/dev/null 2>&1; then echo "$1=reached"; else echo "$1=blocked"; fi
}
{
  attempt write_outside "echo escaped > '$OUTSIDE/escaped.txt'"
  attempt read_home_canary "cat '$REAL_HOME/canary.txt'"
  attempt read_other_run "cat '$OTHER_WORKSPACE/canary.txt'"
  attempt signal_outside "kill -TERM $VICTIM"
  attempt read_trellis_home "cat '$TRELLIS_STATE/canary.txt' && ls '$TRELLIS_STATE/runs'"
  attempt network "/usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $NET_PORT), 5)'"
} > reach.txt
echo "edited by the worker" > edit.txt
echo '{"output": null}'
"#;

/// A test's world: the invoking user's home with a canary, another run's workspace with one,
/// a directory outside every workspace, and the hostile worker's file. The Trellis home is the
/// default one inside the user's home (`~/.local/state/trellis`, with a canary), and `~/.local/bin`
/// is on `PATH`, so the sandbox shows `~/.local` read-only: the hard case, where the Trellis
/// home and the rest of the user's home must stay hidden under a tree that is shown.
struct World {
    sandbox: Sandbox,
    /// A loopback service the worker tries to reach (the network check).
    listener: std::net::TcpListener,
    trellis_home: PathBuf,
    path: String,
    real_home: PathBuf,
    other_workspace: PathBuf,
    outside: PathBuf,
    worker: PathBuf,
}

impl World {
    fn new() -> Self {
        let sandbox = Sandbox::new();
        let base = sandbox
            .workspace
            .parent()
            .expect("the workspace has a parent")
            .to_path_buf();
        let real_home = base.join("user-home");
        let other_workspace = base.join("other-run-workspace");
        let outside = base.join("outside");
        for dir in [&real_home, &other_workspace, &outside] {
            std::fs::create_dir_all(dir).expect("directory");
        }
        std::fs::write(real_home.join("canary.txt"), "home canary").expect("canary");
        let trellis_home = real_home.join(".local/state/trellis");
        let local_bin = real_home.join(".local/bin");
        for dir in [&trellis_home, &local_bin] {
            std::fs::create_dir_all(dir).expect("directory");
        }
        std::fs::write(trellis_home.join("canary.txt"), "trellis canary").expect("canary");
        let path = format!(
            "{}:{}",
            local_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        std::fs::write(other_workspace.join("canary.txt"), "other canary").expect("canary");
        let worker = base.join("tools").join("hostile.sh");
        std::fs::create_dir_all(worker.parent().expect("tools")).expect("tools");
        std::fs::write(&worker, HOSTILE_WORKER).expect("worker");
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&worker, executable).expect("chmod");
        Self {
            sandbox,
            listener: std::net::TcpListener::bind("127.0.0.1:0").expect("listener"),
            trellis_home,
            path,
            real_home,
            other_workspace,
            outside,
            worker,
        }
    }

    fn graph(&self) -> Value {
        let state = record(&[("value", integer(), true)]);
        graph(
            state.clone(),
            seq(
                "root",
                &state,
                vec![
                    step("hostile", null(), null(), &[], &[]),
                    unless_failed("hostile", &state, succeed("done", null(), &[])),
                ],
                &[],
            ),
        )
    }

    fn plan(&self, victim: u32) -> Value {
        json!({
            "kind": "command",
            "command": [self.worker],
            "env": {
                "OUTSIDE": self.outside,
                "REAL_HOME": self.real_home,
                "OTHER_WORKSPACE": self.other_workspace,
                "VICTIM": victim.to_string(),
                "TRELLIS_STATE": self.trellis_home,
                "NET_PORT": self.listener.local_addr().expect("port").port().to_string(),
            },
        })
    }

    /// Runs the graph in the foreground with `isolation` (`None`: no flag) and `extra` plan
    /// fields; the terminal result and what the worker reached.
    fn run(&self, isolation: Option<&str>, extra: Value, victim: u32) -> (Value, String) {
        self.run_on(isolation, extra, victim, &[], &[])
    }

    /// As [`World::run`], with more arguments and environment variables for `trellis run`.
    fn run_on(
        &self,
        isolation: Option<&str>,
        extra: Value,
        victim: u32,
        more_args: &[&str],
        env: &[(&str, &str)],
    ) -> (Value, String) {
        let mut plan = self.plan(victim);
        if let (Some(plan), Some(extra)) = (plan.as_object_mut(), extra.as_object()) {
            plan.extend(extra.clone());
        }
        let args = self
            .sandbox
            .run_args(&self.graph(), &json!({"value": 1}), &plan);
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Some(isolation) = isolation {
            args.extend(["--isolation", isolation]);
        }
        args.extend(more_args);
        let output = self.trellis_with(&args, env);
        let lines = output.ndjson();
        let mut terminal = lines
            .last()
            .map(|last| last["status"]["terminalResult"].clone())
            .unwrap_or(Value::Null);
        if terminal["status"] != "succeeded"
            && let Some(run) = lines.first().and_then(|l| l["runId"].as_str())
        {
            // What the worker said, for the assertion message.
            let mut logs = vec!["logs", run];
            logs.extend(more_args);
            terminal["logs"] = Value::from(self.trellis(&logs).stdout);
        }
        let reach = std::fs::read_to_string(self.sandbox.workspace.join("reach.txt"))
            .unwrap_or_else(|_| panic!("the worker ran and reported\n{output:#?}"));
        (terminal, reach)
    }
}

impl World {
    /// `trellis ARGS` as the user of this world: its home, `PATH` and Trellis home.
    fn trellis(&self, args: &[&str]) -> support::CliOutput {
        self.trellis_with(args, &[])
    }

    /// As [`World::trellis`], with more environment variables.
    fn trellis_with(&self, args: &[&str], env: &[(&str, &str)]) -> support::CliOutput {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        support::finish(support::start(command), support::COMMAND_TIMEOUT, args)
    }

    /// `trellis ARGS` as this world's user, not yet started.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.sandbox.command(args);
        command
            .env("HOME", &self.real_home)
            .env("PATH", &self.path)
            .env("TRELLIS_HOME", &self.trellis_home);
        command
    }
}

/// A process outside any sandbox for the worker to signal.
fn victim() -> Child {
    Command::new("sleep").arg("120").spawn().expect("sleep")
}

fn verdicts(reach: &str) -> Vec<(String, String)> {
    reach
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(what, verdict)| (what.to_owned(), verdict.to_owned()))
        .collect()
}

/// Whether `bwrap` is on `PATH`; under `CI` (where scripts/test installs it) it must be.
fn bwrap_installed() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| Path::new(&dir).join("bwrap").is_file());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "CI must run the containment tests: install bubblewrap"
    );
    found
}

#[test]
fn a_hostile_worker_in_the_sandbox_reaches_nothing_but_its_workspace() {
    if !bwrap_installed() {
        eprintln!("skipped: bubblewrap is not installed (scripts/test installs it)");
        return;
    }
    let world = World::new();
    let mut victim = victim();
    let (terminal, reach) = world.run(Some("sandbox"), json!({}), victim.id());
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    assert_eq!(
        std::fs::read_to_string(world.sandbox.workspace.join("edit.txt")).expect("edit"),
        "edited by the worker\n"
    );
    let verdicts = verdicts(&reach);
    assert_eq!(verdicts.len(), 6, "{reach}");
    for (what, verdict) in &verdicts {
        // The network stays on unless the plan says otherwise (agents need their endpoint).
        let expected = if what == "network" {
            "reached"
        } else {
            "blocked"
        };
        assert_eq!(verdict, expected, "{what} under the sandbox:\n{reach}");
    }
    assert!(!world.outside.join("escaped.txt").exists());
    assert!(process_alive(victim.id()), "the victim was signalled");
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn the_same_worker_without_the_sandbox_reaches_everything() {
    let world = World::new();
    let mut victim = victim();
    let (terminal, reach) = world.run(Some("none"), json!({}), victim.id());
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    for (what, verdict) in verdicts(&reach) {
        assert_eq!(verdict, "reached", "{what} without the sandbox:\n{reach}");
    }
    assert_eq!(
        std::fs::read_to_string(world.outside.join("escaped.txt")).expect("escaped"),
        "escaped\n"
    );
    // SIGTERM ended it: reaped here, so its pid is not a zombie that looks alive.
    let status = victim.wait().expect("victim");
    assert!(!status.success());
}

/// A plan may ask for the sandbox itself (no flag), and `"network": "none"` takes the network
/// away too; an `--isolation none` host cannot loosen what the plan asked for.
#[test]
fn a_run_started_in_the_sandbox_is_resumed_in_it_without_the_flag() {
    if !bwrap_installed() {
        eprintln!("skipped: bubblewrap is not installed (scripts/test installs it)");
        return;
    }
    let world = World::new();
    let mut victim = victim();
    let mut plan = world.plan(victim.id());
    plan["env"]["FAIL_FIRST"] = json!("1");
    let args = world
        .sandbox
        .run_args(&world.graph(), &json!({"value": 1}), &plan);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--isolation", "sandbox"]);
    let first = world.trellis(&args).ndjson();
    let run = first
        .first()
        .and_then(|line| line["runId"].as_str())
        .expect("the run's id")
        .to_owned();
    assert_ne!(
        first
            .last()
            .map(|l| l["status"]["terminalResult"]["status"].clone()),
        Some(json!("succeeded")),
        "the first attempt fails on purpose"
    );
    assert!(!world.sandbox.workspace.join("reach.txt").exists());

    // No --isolation here: the run's stored plan keeps it contained.
    let resumed = world.trellis(&["resume", &run, "--json"]).ndjson();
    assert_eq!(
        resumed
            .last()
            .map(|l| l["status"]["terminalResult"]["status"].clone()),
        Some(json!("succeeded")),
        "{resumed:#?}"
    );
    let reach = std::fs::read_to_string(world.sandbox.workspace.join("reach.txt"))
        .expect("the resumed worker reported");
    let verdicts = verdicts(&reach);
    assert_eq!(verdicts.len(), 6, "{reach}");
    for (what, verdict) in verdicts.iter().filter(|(what, _)| what != "network") {
        assert_eq!(verdict, "blocked", "{what} after a resume:\n{reach}");
    }
    let _ = victim.kill();
    let _ = victim.wait();
}

#[test]
fn a_plan_asking_for_the_sandbox_without_network_gets_both() {
    if !bwrap_installed() {
        eprintln!("skipped: bubblewrap is not installed (scripts/test installs it)");
        return;
    }
    let world = World::new();
    let mut victim = victim();
    let plan = json!({"isolation": "sandbox", "network": "none"});
    let (terminal, reach) = world.run(Some("none"), plan, victim.id());
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    let verdicts = verdicts(&reach);
    assert_eq!(verdicts.len(), 6, "{reach}");
    for (what, verdict) in &verdicts {
        assert_eq!(verdict, "blocked", "{what} in the plan's sandbox:\n{reach}");
    }
    assert!(process_alive(victim.id()), "the victim was signalled");
    let _ = victim.kill();
    let _ = victim.wait();
}

/// A `trellis worker` process, killed when dropped or stopped.
struct WorkerHost(Option<Child>);

impl WorkerHost {
    /// Kills it; what it printed on stderr.
    fn stop(&mut self) -> String {
        let Some(mut child) = self.0.take() else {
            return String::new();
        };
        let _ = child.kill();
        child
            .wait_with_output()
            .map(|output| String::from_utf8_lossy(&output.stderr).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for WorkerHost {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A queue-dispatched run on PostgreSQL (`TRELLIS_DISPATCH=queue`, the run itself without a
/// sandbox) executed by `trellis worker --isolation sandbox`: the worker host contains the
/// hostile command as `run` would, so it reaches nothing but its workspace, and its edit lands.
#[test]
fn on_postgresql_a_sandboxed_worker_host_contains_a_queued_command() {
    if !bwrap_installed() {
        eprintln!("skipped: bubblewrap is not installed (scripts/test installs it)");
        return;
    }
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    let world = World::new();
    let mut victim = victim();
    let worker = world
        .command(&[
            "worker",
            "--ledger",
            &ledger,
            "--poll-ms",
            "50",
            "--isolation",
            "sandbox",
        ])
        .spawn()
        .expect("start trellis worker");
    let mut worker = WorkerHost(Some(worker));
    let (terminal, reach) = world.run_on(
        None,
        json!({}),
        victim.id(),
        &["--ledger", &ledger],
        &[("TRELLIS_DISPATCH", "queue")],
    );
    let worker_output = worker.stop();
    assert_eq!(
        terminal["status"], "succeeded",
        "{terminal}
{worker_output}"
    );
    assert_eq!(
        std::fs::read_to_string(world.sandbox.workspace.join("edit.txt")).expect("edit"),
        "edited by the worker\n"
    );
    let verdicts = verdicts(&reach);
    assert_eq!(verdicts.len(), 6, "{reach}");
    for (what, verdict) in &verdicts {
        let expected = if what == "network" {
            "reached"
        } else {
            "blocked"
        };
        assert_eq!(
            verdict, expected,
            "{what} on the sandboxed worker host:\n{reach}"
        );
    }
    assert!(!world.outside.join("escaped.txt").exists());
    assert!(process_alive(victim.id()), "the victim was signalled");
    let _ = victim.kill();
    let _ = victim.wait();
}

/// A host whose `PATH` holds no `bwrap` (an empty directory here) refuses `run --isolation
/// sandbox` and `serve` (sandbox by default) at start, saying how to install it or opt out;
/// nothing runs uncontained instead.
#[test]
fn a_sandbox_the_host_cannot_build_is_refused_before_anything_runs() {
    let world = World::new();
    let empty = world
        .sandbox
        .workspace
        .parent()
        .expect("base")
        .join("empty-path");
    std::fs::create_dir_all(&empty).expect("empty PATH directory");
    let path = empty.display().to_string();
    let args = world
        .sandbox
        .run_args(&world.graph(), &json!({"value": 1}), &world.plan(1));
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--isolation", "sandbox"]);
    let output = world.sandbox.trellis_with_env(&args, &[("PATH", &path)]);
    assert_ne!(output.code, Some(0), "{output:#?}");
    assert!(
        output.stderr.contains("apt-get install bubblewrap"),
        "{output:#?}"
    );
    assert!(output.stderr.contains("--isolation none"), "{output:#?}");
    assert!(!world.sandbox.workspace.join("reach.txt").exists());

    let serve = world.sandbox.trellis_with_env(
        &["serve", "--listen", "127.0.0.1:0", "--token-env", "TOKEN"],
        &[
            ("PATH", &path),
            ("TOKEN", "a-token-long-enough-to-be-accepted-here"),
        ],
    );
    assert_ne!(serve.code, Some(0), "{serve:#?}");
    assert!(serve.stderr.contains("bubblewrap"), "{serve:#?}");
    assert!(serve.stderr.contains("--isolation none"), "{serve:#?}");
}
