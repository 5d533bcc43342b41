//! Shared support for the subprocess tests of the real `trellis` binary: a private state
//! directory and workspace per test, bounded command runs, NDJSON parsing, ledger reads and
//! process inspection, and cleanup of every process a test left behind.
#![allow(dead_code)]

pub mod graph;
pub mod serve;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use trellis_runtime::{Runtime, RuntimeOptions};

/// The binary under test.
pub const TRELLIS: &str = env!("CARGO_BIN_EXE_trellis");

/// The longest any single CLI invocation may take before the test fails (a loaded 2-core
/// machine runs several test binaries at once; nothing here should come close).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

/// The longest a test waits for a run to reach a state it is heading to.
pub const STATE_TIMEOUT: Duration = Duration::from_secs(60);

/// The test worker script (see `tests/workers/worker.py`).
pub fn worker_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workers/worker.py")
}

/// The real Python interpreter: a version-manager shim would add its own start-up cost to
/// every worker and needs environment variables the exec harness does not pass.
pub fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let output = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 is needed by the subprocess tests");
        assert!(output.status.success(), "python3 does not run");
        String::from_utf8(output.stdout)
            .expect("python path is UTF-8")
            .trim()
            .to_owned()
    })
}

/// The worker command, as a binding's `command` array.
pub fn worker_command() -> Value {
    json!([python(), worker_script()])
}

/// A uniform runtime plan binding every executable to the test worker.
pub fn uniform_worker_plan(env: &[(&str, &str)]) -> Value {
    let env: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"kind": "command", "command": worker_command(), "env": env})
}

/// What one CLI invocation did.
#[derive(Debug)]
pub struct CliOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Panics with everything the command printed unless it exited 0.
    pub fn success(self) -> Self {
        assert_eq!(self.code, Some(0), "command failed:\n{self:#?}");
        self
    }

    /// The whole stdout as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{self:#?}"))
    }

    /// Every stdout line as JSON (NDJSON).
    pub fn ndjson(&self) -> Vec<Value> {
        ndjson(&self.stdout)
    }

    /// The stderr lines, without trailing blanks.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

/// Parses NDJSON, failing the test on any line that is not a JSON document.
pub fn ndjson(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Polls `probe` every 20 ms until it yields a value; fails the test after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A private `$TRELLIS_HOME` and workspace; dropping it kills every process still running
/// inside it (controllers and workers run with the workspace as their directory).
pub struct Sandbox {
    root: TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("trellis-cli-test-")
            .tempdir()
            .expect("temp dir");
        let base = root.path().canonicalize().expect("canonical temp dir");
        let home = base.join("home");
        let workspace = base.join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        Self {
            root,
            home,
            workspace,
        }
    }

    /// A `trellis` command with this sandbox's state directory, run from the workspace.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of(TRELLIS, args)
    }

    /// `program ARGS` with this sandbox's state directory, run from the workspace.
    fn command_of(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.workspace)
            .env("TRELLIS_HOME", &self.home)
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs `trellis ARGS` to its end (bounded by [`COMMAND_TIMEOUT`]).
    pub fn trellis(&self, args: &[&str]) -> CliOutput {
        finish(self.spawn(args), COMMAND_TIMEOUT, args)
    }

    /// Runs `trellis ARGS` to its end with extra environment variables.
    pub fn trellis_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> CliOutput {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        finish(self.start(command), COMMAND_TIMEOUT, args)
    }

    /// Starts `trellis ARGS` in the background; collect it with [`finish`].
    pub fn spawn(&self, args: &[&str]) -> Running {
        self.start(self.command(args))
    }

    /// Like [`Sandbox::spawn`], with extra environment variables (connection values).
    pub fn spawn_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        self.start(command)
    }

    /// Like [`Sandbox::spawn`], with Ctrl-C (SIGINT) at its default action in the child, as
    /// in a terminal: a shell that started the tests in the background may have left SIGINT
    /// ignored, and an ignored disposition survives `exec` (coreutils' `env` resets it).
    pub fn spawn_interruptible(&self, args: &[&str]) -> Running {
        let mut through_env = vec!["--default-signal=INT", TRELLIS];
        through_env.extend_from_slice(args);
        self.start(self.command_of("env", &through_env))
    }

    fn start(&self, command: Command) -> Running {
        start(command)
    }

    /// Starts `trellis ARGS` in the background and hands its stdout to the caller to read
    /// (or close); stderr is still collected by [`finish`].
    pub fn spawn_reading(&self, args: &[&str]) -> (Running, ChildStdout) {
        let mut child = self.command(args).spawn().expect("start trellis");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = drain(child.stderr.take().expect("stderr"));
        let running = Running {
            child,
            stdout: std::thread::spawn(String::new),
            stderr,
        };
        (running, stdout)
    }

    /// Writes `value` as `NAME` in the workspace and returns its path as a string.
    pub fn write_json(&self, name: &str, value: &Value) -> String {
        let path = self.workspace.join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
        path.to_str().expect("UTF-8 path").to_owned()
    }

    /// Starts a detached software-change run (task "Greet the world") under `plan`, written
    /// as `plan.json` in the workspace, with `extra` arguments; returns its run id.
    pub fn start_software_change(&self, plan: &Value, extra: &[&str]) -> String {
        let plan = self.write_json("plan.json", plan);
        let mut args = vec![
            "run",
            "--template",
            "software-change",
            "--task",
            "Greet the world",
            "--runtime-config",
            &plan,
            "--json",
            "--detach",
        ];
        args.extend_from_slice(extra);
        let receipt = self.trellis(&args).success().json();
        receipt["runId"].as_str().expect("runId").to_owned()
    }

    /// Writes graph, input and a uniform worker plan; returns the `run` arguments for them.
    pub fn run_args(&self, graph: &Value, input: &Value, plan: &Value) -> Vec<String> {
        vec![
            "run".into(),
            self.write_json("graph.json", graph),
            "--input".into(),
            self.write_json("input.json", input),
            "--uniform-runtime-config".into(),
            self.write_json("plan.json", plan),
            "--json".into(),
        ]
    }

    /// Starts a detached run and returns its id.
    pub fn start_detached(&self, run_args: &[String]) -> String {
        let mut args: Vec<&str> = run_args.iter().map(String::as_str).collect();
        args.push("--detach");
        let receipt = self.trellis(&args).success().json();
        receipt["runId"].as_str().expect("receipt runId").to_owned()
    }

    /// `trellis status RUN --json`.
    pub fn status(&self, run: &str) -> Value {
        self.trellis(&["status", run, "--json"]).success().json()
    }

    /// Waits until `status` reports the run finished and returns its terminal result.
    pub fn wait_finished(&self, run: &str) -> Value {
        wait_until(&format!("run {run} to finish"), STATE_TIMEOUT, || {
            let status = self.status(run);
            (status["status"]["phase"] == "finished")
                .then(|| status["status"]["terminalResult"].clone())
        })
    }

    /// The node names the worker recorded, one per invocation, in invocation order.
    pub fn invocations(&self) -> Vec<String> {
        match std::fs::read_to_string(self.workspace.join("invocations.log")) {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("cannot read invocations.log: {e}"),
        }
    }

    /// How many times the worker ran `node`.
    pub fn invocation_count(&self, node: &str) -> usize {
        self.invocations().iter().filter(|n| *n == node).count()
    }

    /// Waits for a `block*` or `stubborn*` worker of `node` to record its pids, and returns
    /// them: the worker itself and the grandchild it started.
    pub fn worker_pids(&self, node: &str) -> (u32, u32) {
        let path = self.workspace.join(format!("pids-{node}.json"));
        let pids: Value = wait_until("the worker to record its pids", STATE_TIMEOUT, || {
            std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        });
        let pid = |key: &str| {
            let pid = pids[key].as_u64().expect("pid");
            u32::try_from(pid).expect("pid fits u32")
        };
        (pid("worker"), pid("grandchild"))
    }

    /// Waits until no process runs inside the sandbox any more (a finished run's controller
    /// may still be exiting when its follower returns); fails the test if one stays.
    pub fn wait_no_processes(&self) {
        let deadline = Instant::now() + STATE_TIMEOUT;
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                let described: Vec<String> = left.iter().map(|&pid| describe(pid)).collect();
                panic!("processes outlived their run: {described:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The run API over this sandbox's state directory, as another observer process would
    /// open it.
    pub fn runtime(&self) -> Runtime {
        Runtime::open(RuntimeOptions {
            home: Some(self.home.clone()),
            ..RuntimeOptions::default()
        })
        .expect("open the runtime")
    }

    /// Every process whose working directory is inside this sandbox.
    pub fn processes(&self) -> Vec<u32> {
        processes_under(self.root.path())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Bounded: a process that survives SIGKILL this long is the kernel's business.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in left {
                send_signal(pid, Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A CLI process started in the background.
pub struct Running {
    pub child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// Starts `command` (its stdout and stderr piped) in the background; collect it with
/// [`finish`].
pub fn start(mut command: Command) -> Running {
    let mut child = command.spawn().expect("start trellis");
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    Running {
        child,
        stdout,
        stderr,
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits for a background CLI process, killing it and failing the test after `timeout`.
pub fn finish(mut running: Running, timeout: Duration, what: &[impl AsRef<str>]) -> CliOutput {
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = running.child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = running.child.kill();
            let _ = running.child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = CliOutput {
        code: status.and_then(|s| s.code()),
        stdout: running.stdout.join().unwrap_or_default(),
        stderr: running.stderr.join().unwrap_or_default(),
    };
    let shown: Vec<&str> = what.iter().map(AsRef::as_ref).collect();
    assert!(
        status.is_some(),
        "`trellis {}` did not finish within {timeout:?}:\n{output:#?}",
        shown.join(" ")
    );
    output
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Whether every thread of `pid` has exited. A killed multi-threaded process shows its leader
/// as a zombie while its other threads may still be exiting, and the descriptors they share
/// (the run's lease among them) are closed only when the last one is gone: a test that waits
/// for the leader alone can still find the lease held.
pub fn process_exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(Result::ok).all(|task| {
        let tid: u32 = task.file_name().to_string_lossy().parse().unwrap_or(0);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"));
        stat.map_or(true, |stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_none_or(|state| state == "Z" || state == "X")
        })
    })
}

pub use nix::sys::signal::Signal;

/// Sends `signal` to `pid` (a process that is already gone is no error).
pub fn send_signal(pid: u32, signal: Signal) {
    let pid = i32::try_from(pid).expect("pid fits i32");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
}

/// The pid of the controller process of `run`, found by its command line.
pub fn controller_pid(run: &str) -> Option<u32> {
    live_pids()
        .into_iter()
        .find(|&pid| is_controller_of(pid, run))
}

/// Whether `pid` is a live `trellis __controller RUN` process.
pub fn is_controller_of(pid: u32, run: &str) -> bool {
    process_alive(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.get(1) == Some(&b"__controller".as_slice()) && args.get(2) == Some(&run.as_bytes())
        })
}

/// `pid: command line` for failure messages.
pub fn describe(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    format!("{pid}: {}", words.join(" "))
}

fn live_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| process_alive(pid))
        .collect()
}

fn processes_under(root: &Path) -> Vec<u32> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    live_pids()
        .into_iter()
        .filter(|&pid| pid != std::process::id())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&root))
        })
        .collect()
}
