//! Runs one graph through `trellis run` and through the reference's `zeroshot run`, each in a
//! scratch home and git repository with the fake `claude` (this test executable) on `PATH`,
//! and reads what happened: the terminal result and the fake's log of executions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use trellis_runtime::{AdmitRequest, ConfigSource, GraphSource, InputSource, PlanSource};
use trellis_testkit::fake_agent::claude::STATE_ENV;
use trellis_testkit::reference::{OracleCase, Reference};

/// The longest one run of either tool may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// What one tool did with a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// `{status, reason?, output?}` (the reference's failure `context` left out).
    pub terminal: Value,
    /// Per node, its executions as `(call number, resumed a session)`, sorted.
    pub executions: BTreeMap<String, Vec<(u64, bool)>>,
}

pub struct Runner {
    reference: Reference,
}

impl Runner {
    pub fn new(reference: Reference) -> Self {
        Runner { reference }
    }

    /// Whether both tools admit the case (the admission differential covers the rest) and it
    /// runs at most `max_executions` executions (graphs at the bounds ceilings would take
    /// hours with either tool).
    pub fn runnable(&self, case: &OracleCase, max_executions: u64) -> bool {
        let ours = {
            let scratch = tempfile::tempdir().unwrap();
            let write = |name: &str, value: &Value| {
                let path = scratch.path().join(name);
                std::fs::write(&path, value.to_string()).unwrap();
                path
            };
            let request = AdmitRequest {
                graph: GraphSource::File(write("graph.json", &case.graph)),
                input: InputSource::File(write("input.json", &case.input)),
                plan: PlanSource::Uniform(ConfigSource::File(write("plan.json", &case.plan))),
                workspace: Some(scratch.path().to_path_buf()),
            };
            trellis_runtime::admit(request).is_ok_and(|admitted| {
                admitted.summary().worst_case.max_executions_with_retries <= max_executions
            })
        };
        ours && matches!(self.reference.check(case, 0), Ok(v) if v.is_valid())
    }

    /// Runs the graph with Trellis and with the reference, at the same time.
    pub fn both(
        &self,
        graph: &Value,
        input: &Value,
        plan: &Value,
        script: Option<&[&str]>,
    ) -> (Observation, Observation) {
        std::thread::scope(|scope| {
            let ours = scope.spawn(|| run(Tool::Trellis, graph, input, plan, script));
            let theirs = scope.spawn(|| {
                run(
                    Tool::Reference(self.reference.binary()),
                    graph,
                    input,
                    plan,
                    script,
                )
            });
            let join = |h: std::thread::ScopedJoinHandle<'_, Observation>| match h.join() {
                Ok(observation) => observation,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (join(ours), join(theirs))
        })
    }
}

enum Tool<'a> {
    Trellis,
    Reference(&'a Path),
}

fn run(
    tool: Tool<'_>,
    graph: &Value,
    input: &Value,
    plan: &Value,
    script: Option<&[&str]>,
) -> Observation {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().canonicalize().unwrap();
    let (home, repo, bin, state) = (
        dir.join("home"),
        dir.join("repo"),
        dir.join("bin"),
        dir.join("state"),
    );
    for d in [&home, &repo, &bin, &state] {
        std::fs::create_dir_all(d).unwrap();
    }
    trellis_testkit::reference::scratch_repository(&repo, &home).unwrap();
    fake_claude(&bin, &state);
    if let Some(script) = script {
        std::fs::write(state.join("script"), script.join("\n") + "\n").unwrap();
    }
    let write = |name: &str, value: &Value| -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let (graph, input, plan) = (
        write("graph.json", graph),
        write("input.json", input),
        write("plan.json", plan),
    );
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let mut command = match tool {
        Tool::Trellis => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_trellis"));
            c.arg("run")
                .arg(&graph)
                .arg("--input")
                .arg(&input)
                .arg("--uniform-runtime-config")
                .arg(&plan)
                .args(["--json", "--no-preflight"]);
            c
        }
        Tool::Reference(binary) => {
            let mut c = Command::new(binary);
            c.args(["run", "--title", "t", "--graph"])
                .arg(&graph)
                .arg("--input")
                .arg(&input)
                .arg("--uniform-runtime-config")
                .arg(&plan);
            c
        }
    };
    command
        .current_dir(&repo)
        .env_clear()
        .env("HOME", &home)
        .env("TRELLIS_HOME", dir.join("trellis-home"))
        .env("PATH", &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let (output, timed_out) = wait_bounded(child);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if timed_out {
        // Both tools leave a detached run behind when their foreground command is killed.
        let first: Value = stdout
            .lines()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        if let Some(run_id) = first["runId"].as_str() {
            let program = match tool {
                Tool::Trellis => Path::new(env!("CARGO_BIN_EXE_trellis")),
                Tool::Reference(binary) => binary,
            };
            let _ = Command::new(program)
                .args(["force-stop", run_id])
                .current_dir(&repo)
                .env_clear()
                .env("HOME", &home)
                .env("TRELLIS_HOME", dir.join("trellis-home"))
                .env("PATH", &path)
                .output();
        }
        panic!("a run took longer than {RUN_TIMEOUT:?}:\n{stdout}");
    }
    let last = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or(Value::Null);
    let mut terminal = last["status"]["terminalResult"].clone();
    // The reference's foreground observation sometimes gives up ("observation source is
    // unavailable; the stream is incomplete") while the run goes on: ask `status` instead.
    if !terminal.is_object()
        && let Tool::Reference(binary) = &tool
    {
        let first: Value = stdout
            .lines()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        if let Some(run_id) = first["runId"].as_str() {
            terminal = reference_terminal(binary, run_id, &repo, &home);
        }
    }
    assert!(
        terminal.is_object(),
        "no terminal result: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    if let Some(fields) = terminal.as_object_mut() {
        fields.remove("context");
    }
    Observation {
        terminal,
        executions: executions(&state),
    }
}

/// Polls `zeroshot status RUN` until the run finished; its terminal result.
fn reference_terminal(binary: &Path, run_id: &str, repo: &Path, home: &Path) -> Value {
    let started = Instant::now();
    while started.elapsed() < RUN_TIMEOUT {
        let output = Command::new(binary)
            .args(["status", run_id])
            .current_dir(repo)
            .env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let status: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        let terminal = &status["status"]["terminalResult"];
        if terminal.is_object() {
            return terminal.clone();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Value::Null
}

/// The child's output, and whether it was killed for taking longer than [`RUN_TIMEOUT`].
fn wait_bounded(mut child: std::process::Child) -> (std::process::Output, bool) {
    // Both tools print a few hundred NDJSON lines at most; read them on threads so the pipes
    // never fill while we wait.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).ok();
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut buf).ok();
        buf
    });
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_TIMEOUT {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    (output, timed_out)
}

/// `bin/claude`: runs this test executable as the fake agent with its state directory.
fn fake_claude(bin: &Path, state: &Path) {
    let me = std::env::current_exe().unwrap();
    let script = format!(
        "#!/bin/sh\n{STATE_ENV}='{}' exec '{}' \"$@\"\n",
        state.display(),
        me.display()
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The fake's log, per node.
fn executions(state: &Path) -> BTreeMap<String, Vec<(u64, bool)>> {
    let log = std::fs::read_to_string(state.join("executions.jsonl")).unwrap_or_default();
    let mut by_node: BTreeMap<String, Vec<(u64, bool)>> = BTreeMap::new();
    for line in log.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        by_node
            .entry(entry["node"].as_str().unwrap_or_default().to_owned())
            .or_default()
            .push((
                entry["call"].as_u64().unwrap_or_default(),
                entry["resumed"].as_bool().unwrap_or_default(),
            ));
    }
    for calls in by_node.values_mut() {
        calls.sort_unstable();
    }
    by_node
}
