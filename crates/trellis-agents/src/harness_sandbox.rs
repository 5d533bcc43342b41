//! Whether Codex's own sandbox can work on this host, asked before a run that relies on it
//! (an uncontained Codex lane): `codex sandbox` writes one file in a scratch workspace, with
//! the home layout the harness gives a session. Where it cannot (no user namespaces, a
//! `bwrap` it cannot use), preflight says so with the fix instead of every file change of
//! the run failing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Redactor, Stream, run_blocking};

use crate::preflight::PreflightProblem;

/// Longest the probe may take (Codex starts in about a second on a loaded machine).
const PROBE_DEADLINE: Duration = Duration::from_secs(20);
/// The file the sandboxed command writes.
const PROBE_FILE: &str = "sandbox-probe";

/// A problem when Codex at `program` (with `path` as its `PATH`) cannot write in its
/// `workspace-write` sandbox here; `None` when it can, or when the probe itself could not run
/// (a CLI that does not start is preflight's other checks' business).
pub fn codex_sandbox_problem(program: &Path, path: &str) -> Option<PreflightProblem> {
    let scratch = Scratch::create()?;
    let home = scratch.0.join("home");
    let workspace = scratch.0.join("workspace");
    for dir in [home.join(".codex"), home.join("tmp"), workspace.clone()] {
        std::fs::create_dir_all(dir).ok()?;
    }
    let text = |path: &Path| path.display().to_string();
    let spec = ProcessSpec {
        program: text(program),
        args: [
            "sandbox",
            "-c",
            "sandbox_mode=\"workspace-write\"",
            "-c",
            "analytics.enabled=false",
            "-c",
            "features.plugins=false",
            "--",
            "sh",
            "-c",
            &format!("echo ok > {PROBE_FILE}"),
        ]
        .map(str::to_owned)
        .to_vec(),
        cwd: workspace.clone(),
        // The layout of a session's private home: TMPDIR inside it, so CODEX_HOME is not
        // under the temporary directory (where Codex refuses to create its helper links).
        env: vec![
            ("PATH".to_owned(), path.to_owned()),
            ("HOME".to_owned(), text(&home)),
            ("CODEX_HOME".to_owned(), text(&home.join(".codex"))),
            ("TMPDIR".to_owned(), text(&home.join("tmp"))),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ],
        stdin: Vec::new(),
        redactor: Redactor::default(),
    };
    let limits = ProcessLimits {
        deadline: Some(PROBE_DEADLINE),
        ..ProcessLimits::default()
    };
    let mut last_error = String::new();
    let report = run_blocking(&spec, &limits, &|| false, &mut |stream, line| {
        if stream == Stream::Stderr && !line.trim().is_empty() {
            last_error = line.trim().to_owned();
        }
    });
    let wrote = workspace.join(PROBE_FILE).is_file();
    match report.end {
        ProcessEnd::SpawnFailed(_) | ProcessEnd::DeadlineExceeded => None,
        ProcessEnd::Exited { code: 0 } if wrote => None,
        end => Some(PreflightProblem {
            problem: format!(
                "Codex's own sandbox cannot write files on this host ({})",
                if last_error.is_empty() {
                    end.describe()
                } else {
                    last_error
                }
            ),
            fix: "run with --isolation sandbox (Trellis contains the agent and turns Codex's \
                  sandbox off), or, on a disposable machine, set sandbox_mode = \
                  \"danger-full-access\" in your Codex config.toml"
                .to_owned(),
        }),
    }
}

/// A private directory for the probe, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn create() -> Option<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "trellis-codex-probe-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).ok()?;
        Some(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
