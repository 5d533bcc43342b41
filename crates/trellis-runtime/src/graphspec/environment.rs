//! A run's prepared environment: the controller runs its environment file's setup hooks (in
//! the run's environment directory) and startup hooks (in the workspace) before the first
//! dispatch, records their bounded, redacted output in the run's log, puts the tools `bin`
//! directory first on every step's `PATH`, and stops the services startup hooks left running
//! when the run is over.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trellis_agents::SecretEnv;
use trellis_ledger::{RunEvent, RunId, RunStore};
use trellis_process::{
    CancellationToken, ProcessEnd, ProcessLimits, ProcessObserver, ProcessSpec, Signal, Stream,
};
use trellis_run_model::{LogLevel, LogStream, bound_log_message, sanitize_log_message};

use crate::shared::environment::{
    BUDGET_EXHAUSTED, ENVIRONMENT_DIR, EnvironmentSpec, HOOK_FAILED, HOOK_TIMED_OUT, Hook,
    HookLimits, SERVICES_FILE,
};
use crate::shared::error::RuntimeError;

/// Most lines of one hook's output recorded in the run's log.
pub(crate) const MAX_HOOK_LOG_LINES: u64 = 2_000;
/// Most bytes of one hook's output recorded in the run's log.
pub(crate) const MAX_HOOK_LOG_BYTES: u64 = 256 * 1024;
/// Lines recorded per ledger write while a hook runs.
const LOG_BATCH: usize = 32;
/// How often a running hook looks whether the run was asked to stop.
const STOP_POLL: Duration = Duration::from_millis(200);
/// How long services get between SIGTERM and SIGKILL when the run is over.
const SERVICE_GRACE: Duration = Duration::from_secs(2);

/// What preparing the environment came to.
pub(crate) enum Preparation {
    /// Every hook succeeded: steps may be dispatched.
    Ready(PreparedEnvironment),
    /// A hook failed or ran out of time: the run ends failed with this reason (its log says
    /// which hook and how).
    Failed(&'static str),
    /// The run was asked to stop while a hook ran.
    Stopped,
}

/// The environment a run's steps work in, until dropped: then the services its startup
/// hooks left running are stopped and its directory goes.
pub(crate) struct PreparedEnvironment {
    root: PathBuf,
    tools_bin: PathBuf,
    services: Services,
}

impl PreparedEnvironment {
    /// `path` with the tools `bin` directory first.
    pub(crate) fn path_with_tools(&self, path: Option<&str>) -> String {
        let tools = self.tools_bin.display().to_string();
        match path {
            Some(rest) if !rest.is_empty() => format!("{tools}:{rest}"),
            _ => tools,
        }
    }

    /// Hands over the services startup hooks left running: stopping them is then the
    /// caller's (the supervisor's, right before the run's terminal record), or happens when
    /// what is returned is dropped.
    pub(crate) fn take_services(&mut self) -> Services {
        Services {
            groups: std::mem::take(&mut self.services.groups),
            listing: self.services.listing.clone(),
        }
    }
}

impl Drop for PreparedEnvironment {
    fn drop(&mut self) {
        self.services.stop_now();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The process groups startup hooks left running, listed in the run's [`SERVICES_FILE`] for
/// whoever ends the run should its controller die; stopped when dropped.
pub(crate) struct Services {
    groups: Vec<u32>,
    listing: PathBuf,
}

impl Services {
    /// Adds a group, listed before anything else happens.
    fn add(&mut self, group: u32) -> Result<(), RuntimeError> {
        self.groups.push(group);
        let text: String = self.groups.iter().map(|g| format!("{g}\n")).collect();
        std::fs::write(&self.listing, text)
            .map_err(|e| RuntimeError::io("cannot list the environment's services", e))
    }

    /// Stops every group: SIGTERM, a short grace, SIGKILL.
    pub(crate) fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if self.groups.is_empty() {
            return;
        }
        for &group in &self.groups {
            trellis_process::signal_group(group, Signal::SIGTERM);
        }
        let deadline = Instant::now() + SERVICE_GRACE;
        while Instant::now() < deadline && self.groups.iter().any(|&g| group_alive(g)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for group in self.groups.drain(..) {
            trellis_process::kill_group(group);
        }
        let _ = std::fs::remove_file(&self.listing);
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Whether any process is left in the group `pgid`.
fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    raw > 1 && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), None).is_ok()
}

/// Everything the hooks of one run need.
pub(crate) struct HookRun<'a> {
    pub store: Arc<dyn RunStore>,
    pub run_id: &'a RunId,
    pub spec: &'a EnvironmentSpec,
    /// The run's private directory; the environment lives in `environment/` under it.
    pub run_dir: &'a Path,
    pub workspace: &'a Path,
    /// `PATH`, `HOME`, `LANG`, `TMPDIR` as the controller has them.
    pub base_env: &'a [(String, String)],
    /// The run's connection values: handed to hooks, masked in their output.
    pub secrets: &'a SecretEnv,
    pub limits: HookLimits,
    /// Notified when the controller is asked to stop (SIGTERM): look at the ledger at once.
    pub wake: Arc<tokio::sync::Notify>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Setup,
    Startup,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Self::Setup => "setup",
            Self::Startup => "startup",
        }
    }
}

/// Runs every setup hook, then every startup hook, each within its limit and all within the
/// budget, stopping at the first that fails.
pub(crate) async fn prepare_environment(run: HookRun<'_>) -> Result<Preparation, RuntimeError> {
    let root = run.run_dir.join(ENVIRONMENT_DIR);
    let tools_bin = root.join("tools").join("bin");
    std::fs::create_dir_all(&tools_bin)
        .map_err(|e| RuntimeError::io("cannot create the run's environment directory", e))?;
    let mut prepared = PreparedEnvironment {
        root,
        tools_bin,
        services: Services {
            groups: Vec::new(),
            listing: run.run_dir.join(SERVICES_FILE),
        },
    };
    let stop = CancellationToken::new();
    let watcher = tokio::spawn(watch_for_stop(
        run.store.clone(),
        run.run_id.clone(),
        run.wake.clone(),
        stop.clone(),
    ));
    let started = Instant::now();
    let mut outcome = None;
    'phases: for (phase, hooks) in [
        (Phase::Setup, &run.spec.setup),
        (Phase::Startup, &run.spec.startup),
    ] {
        for hook in hooks {
            let remaining = run.limits.budget.saturating_sub(started.elapsed());
            match run_hook(&run, &mut prepared, phase, hook, remaining, &stop).await? {
                None => {}
                Some(end) => {
                    outcome = Some(end);
                    break 'phases;
                }
            }
        }
    }
    watcher.abort();
    Ok(match outcome {
        None => Preparation::Ready(prepared),
        // Dropping `prepared` stops what earlier startup hooks started.
        Some(end) => end,
    })
}

/// Cancels `stop` once the run was asked to stop (looked for every [`STOP_POLL`], and when
/// `wake` says so).
async fn watch_for_stop(
    store: Arc<dyn RunStore>,
    run_id: RunId,
    wake: Arc<tokio::sync::Notify>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(STOP_POLL) => {}
            _ = wake.notified() => {}
        }
        let asked = store
            .head(&run_id)
            .is_ok_and(|head| head.progress.force_stop_requested || head.is_finished());
        if asked {
            stop.cancel();
            return;
        }
    }
}

/// Runs one hook; `None` when it succeeded.
async fn run_hook(
    run: &HookRun<'_>,
    prepared: &mut PreparedEnvironment,
    phase: Phase,
    hook: &Hook,
    remaining: Duration,
    stop: &CancellationToken,
) -> Result<Option<Preparation>, RuntimeError> {
    let own_limit = run.limits.of(hook);
    let label = format!("{} {}", phase.name(), hook.name);
    if remaining.is_zero() {
        note(
            run,
            LogLevel::Error,
            format!(
                "environment: {label} not started: the hooks' budget of {} ms is spent; no step \
                 was started",
                run.limits.budget.as_millis()
            ),
        )?;
        return Ok(Some(Preparation::Failed(BUDGET_EXHAUSTED)));
    }
    let deadline = own_limit.min(remaining);
    note(
        run,
        LogLevel::Info,
        format!(
            "environment: {label} started (limit {} ms)",
            deadline.as_millis()
        ),
    )?;
    let spec = ProcessSpec {
        program: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), hook.run.clone()],
        cwd: match phase {
            Phase::Setup => prepared.root.clone(),
            Phase::Startup => run.workspace.to_path_buf(),
        },
        env: hook_env(run, prepared, phase),
        stdin: Vec::new(),
        redactor: run.secrets.redactor(),
    };
    let limits = ProcessLimits {
        deadline: Some(deadline),
        capture_stdout: false,
        keep_group_after_exit: phase == Phase::Startup,
        ..ProcessLimits::default()
    };
    let mut observer = HookLog::new(run, &label);
    let began = Instant::now();
    let report = trellis_process::run_process(&spec, &limits, stop, &mut observer).await;
    let group = observer.group;
    observer.finish()?;
    let took = began.elapsed().as_millis();
    match report.end {
        ProcessEnd::Exited { code: 0 } => {
            if phase == Phase::Startup
                && let Some(group) = group
                && group_alive(group)
            {
                prepared.services.add(group)?;
                note(
                    run,
                    LogLevel::Info,
                    format!(
                        "environment: {label} finished in {took} ms, leaving services running \
                         (process group {group}, stopped when the run ends)"
                    ),
                )?;
            } else {
                note(
                    run,
                    LogLevel::Info,
                    format!("environment: {label} finished in {took} ms"),
                )?;
            }
            Ok(None)
        }
        ProcessEnd::Cancelled => {
            note(
                run,
                LogLevel::Warn,
                format!("environment: {label} stopped: the run was asked to stop"),
            )?;
            Ok(Some(Preparation::Stopped))
        }
        ProcessEnd::DeadlineExceeded => {
            let (reason, why) = if deadline < own_limit {
                (
                    BUDGET_EXHAUSTED,
                    format!(
                        "the hooks' budget of {} ms ran out",
                        run.limits.budget.as_millis()
                    ),
                )
            } else {
                (
                    HOOK_TIMED_OUT,
                    format!("it ran over its limit of {} ms", own_limit.as_millis()),
                )
            };
            note(
                run,
                LogLevel::Error,
                format!("environment: {label} was stopped: {why}; no step was started"),
            )?;
            Ok(Some(Preparation::Failed(reason)))
        }
        other => {
            note(
                run,
                LogLevel::Error,
                format!(
                    "environment: {label} failed: it {}; no step was started",
                    other.describe()
                ),
            )?;
            Ok(Some(Preparation::Failed(HOOK_FAILED)))
        }
    }
}

/// What a hook sees: the controller's basics with the tools first on `PATH`, where the
/// environment is, the workspace (startup hooks only: setup runs before the run's files are
/// any of its business), and the run's connection values.
fn hook_env(
    run: &HookRun<'_>,
    prepared: &PreparedEnvironment,
    phase: Phase,
) -> Vec<(String, String)> {
    let base = |name: &str| {
        run.base_env
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let mut env = vec![("PATH".to_owned(), prepared.path_with_tools(base("PATH")))];
    for name in ["HOME", "LANG", "TMPDIR"] {
        if let Some(value) = base(name) {
            env.push((name.to_owned(), value.to_owned()));
        }
    }
    env.push((
        "TRELLIS_ENVIRONMENT".to_owned(),
        prepared.root.display().to_string(),
    ));
    env.push((
        "TRELLIS_TOOLS_BIN".to_owned(),
        prepared.tools_bin.display().to_string(),
    ));
    env.push(("TRELLIS_RUN_ID".to_owned(), run.run_id.as_str().to_owned()));
    if phase == Phase::Startup {
        env.push((
            "TRELLIS_WORKSPACE".to_owned(),
            run.workspace.display().to_string(),
        ));
    }
    for (name, value) in run.secrets.iter() {
        env.retain(|(key, _)| key != name);
        env.push((name.to_owned(), value.to_owned()));
    }
    env
}

/// Records one note of Trellis's own about the environment in the run's log.
fn note(run: &HookRun<'_>, level: LogLevel, message: String) -> Result<(), RuntimeError> {
    run.store.append(
        run.run_id,
        &[RunEvent::Log {
            execution: None,
            stream: LogStream::System,
            level,
            message: bound_log_message(sanitize_log_message(&message)),
            timestamp_ms: trellis_ledger::store::now_ms(),
        }],
    )?;
    Ok(())
}

/// A hook's output on its way to the run's log: labelled, bounded, written in batches.
struct HookLog<'a> {
    run: &'a HookRun<'a>,
    label: &'a str,
    pending: Vec<RunEvent>,
    lines: u64,
    bytes: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
    group: Option<u32>,
    failed: Option<RuntimeError>,
}

impl<'a> HookLog<'a> {
    fn new(run: &'a HookRun<'a>, label: &'a str) -> Self {
        Self {
            run,
            label,
            pending: Vec::new(),
            lines: 0,
            bytes: 0,
            dropped_lines: 0,
            dropped_bytes: 0,
            group: None,
            failed: None,
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() || self.failed.is_some() {
            return;
        }
        let events = std::mem::take(&mut self.pending);
        if let Err(error) = self.run.store.append_progress(self.run.run_id, &events) {
            self.failed = Some(error.into());
        }
    }

    /// Writes what is left and the count of what was dropped.
    fn finish(mut self) -> Result<(), RuntimeError> {
        self.flush();
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        if self.dropped_lines > 0 {
            note(
                self.run,
                LogLevel::Warn,
                format!(
                    "environment: {}: {} lines / {} bytes of output dropped (a hook's log keeps \
                     {MAX_HOOK_LOG_LINES} lines and {MAX_HOOK_LOG_BYTES} bytes)",
                    self.label, self.dropped_lines, self.dropped_bytes
                ),
            )?;
        }
        Ok(())
    }
}

impl ProcessObserver for HookLog<'_> {
    fn started(&mut self, pgid: u32) {
        self.group = Some(pgid);
    }

    fn line(&mut self, stream: Stream, line: &str) {
        let size = line.len() as u64;
        if self.lines >= MAX_HOOK_LOG_LINES || self.bytes + size > MAX_HOOK_LOG_BYTES {
            self.dropped_lines += 1;
            self.dropped_bytes += size;
            return;
        }
        self.lines += 1;
        self.bytes += size;
        let stream = match stream {
            Stream::Stdout => LogStream::Output,
            Stream::Stderr => LogStream::Error,
        };
        // A hook's stderr is where tools narrate; only its end says whether it failed.
        let level = match stream {
            LogStream::Output => LogLevel::Info,
            _ => LogLevel::Warn,
        };
        let message = format!("[{}] {}", self.label, sanitize_log_message(line));
        self.pending.push(RunEvent::Log {
            execution: None,
            stream,
            level,
            message: bound_log_message(message),
            timestamp_ms: trellis_ledger::store::now_ms(),
        });
        if self.pending.len() >= LOG_BATCH {
            self.flush();
        }
    }
}
