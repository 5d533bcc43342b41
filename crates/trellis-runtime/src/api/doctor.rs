//! `trellis doctor`: whether this machine can run Trellis — the home (writable, the ledger
//! opens and answers, its schema version), each agent CLI (version, signed in), git, and
//! Python for GaP workflows — each check with what to do when it fails.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use trellis_agents::HarnessKind;
use trellis_agents::lane::find_program;
use trellis_agents::preflight::{PreflightEnv, SignIn, cli_version, installed_cli, native_sign_in};
use trellis_ledger::{LedgerLocation, RunFilter};
use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Redactor, run_blocking};

use crate::shared::home::{TrellisHome, default_home};

/// Longest `git --version` or `python3 --version` may take.
const VERSION_DEADLINE: Duration = Duration::from_secs(20);

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    Ok,
    /// Works, but something is missing that some runs need.
    Warning,
    Failed,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorCheck {
    /// What was checked (`home`, `ledger`, `claude`, `git`, `python`, …).
    pub subject: String,
    pub state: CheckState,
    /// What was found.
    pub detail: String,
    /// What to do, when something is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Every check, in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub checks: Vec<DoctorCheck>,
}

impl DoctorReport {
    /// Whether nothing failed (warnings allowed).
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|c| c.state != CheckState::Failed)
    }
}

fn check(subject: &str, state: CheckState, detail: String, fix: Option<&str>) -> DoctorCheck {
    DoctorCheck {
        subject: subject.to_owned(),
        state,
        detail,
        fix: fix.map(str::to_owned),
    }
}

/// Runs every check. `home` and `ledger` as for [`crate::RuntimeOptions`].
pub fn doctor(home: Option<PathBuf>, ledger: Option<LedgerLocation>) -> DoctorReport {
    let mut checks = Vec::new();
    checks.extend(home_checks(home, ledger));
    let lookup = |name: &str| std::env::var(name).ok();
    let env = PreflightEnv { lookup: &lookup };
    for harness in HarnessKind::ALL {
        checks.push(agent_check(harness, &env));
    }
    checks.push(tool_check(
        "git",
        "git",
        CheckState::Failed,
        "install git (runs record checkpoints and deliver through it)",
    ));
    let python = std::env::var("TRELLIS_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".to_owned());
    checks.push(tool_check(
        "python",
        &python,
        CheckState::Warning,
        "install Python 3 (or set TRELLIS_PYTHON) to run GaP workflows",
    ));
    DoctorReport { checks }
}

fn home_checks(home: Option<PathBuf>, ledger: Option<LedgerLocation>) -> Vec<DoctorCheck> {
    let Some(root) = home.or_else(default_home) else {
        return vec![check(
            "home",
            CheckState::Failed,
            "no state directory: neither TRELLIS_HOME, XDG_STATE_HOME nor HOME is set".to_owned(),
            Some("set TRELLIS_HOME to a writable directory"),
        )];
    };
    let opened = TrellisHome::open(&root).and_then(|home| {
        // Writable means a file can be created and removed there, not only that it exists.
        let probe = home.root().join(".doctor-probe");
        std::fs::write(&probe, b"ok")?;
        std::fs::remove_file(&probe)?;
        Ok(home)
    });
    let home = match opened {
        Ok(home) => home,
        Err(error) => {
            return vec![check(
                "home",
                CheckState::Failed,
                format!("{} is not writable: {error}", root.display()),
                Some("fix its permissions, or set TRELLIS_HOME to a writable directory"),
            )];
        }
    };
    let mut checks = vec![check(
        "home",
        CheckState::Ok,
        format!("{} (writable)", home.root().display()),
        None,
    )];
    let location = match ledger
        .map(Ok)
        .or_else(|| LedgerLocation::from_env().transpose())
    {
        Some(Ok(location)) => location,
        Some(Err(error)) => {
            checks.push(check(
                "ledger",
                CheckState::Failed,
                error.to_string(),
                Some("fix TRELLIS_LEDGER (a postgres:// URL, sqlite:PATH or a file path)"),
            ));
            return checks;
        }
        None => LedgerLocation::Sqlite(home.ledger_path()),
    };
    let answered = location.open().and_then(|store| {
        store.list_runs(&RunFilter {
            limit: 1,
            ..RunFilter::default()
        })
    });
    checks.push(match answered {
        Ok(_) => {
            let version = match &location {
                LedgerLocation::Sqlite(_) => format!(
                    ", schema version {}",
                    trellis_ledger::sqlite::schema::latest_version()
                ),
                _ => String::new(),
            };
            check(
                "ledger",
                CheckState::Ok,
                format!("{location} opens and answers{version}"),
                None,
            )
        }
        Err(error) => check(
            "ledger",
            CheckState::Failed,
            format!("{location}: {error} ({})", error.code()),
            Some(
                "a schema newer than this trellis needs a newer trellis; a damaged file can be \
                 moved aside (its runs are lost) and a fresh ledger is created",
            ),
        ),
    });
    checks
}

fn agent_check(harness: HarnessKind, env: &PreflightEnv<'_>) -> DoctorCheck {
    let name = harness.program_name();
    let Some(program) = installed_cli(harness, env) else {
        return check(
            name,
            CheckState::Warning,
            "not installed".to_owned(),
            Some(match harness {
                HarnessKind::Claude => "npm install -g @anthropic-ai/claude-code, then run claude",
                HarnessKind::Codex => "npm install -g @openai/codex, then codex login",
                HarnessKind::Copilot => "npm install -g @github/copilot, then copilot and /login",
                HarnessKind::Pi => {
                    "npm install -g @mariozechner/pi-coding-agent, then pi and /login"
                }
            }),
        );
    };
    let version =
        cli_version(&program, env).unwrap_or_else(|why| format!("version unknown: {why}"));
    let key_name = match harness {
        HarnessKind::Claude => "ANTHROPIC_API_KEY",
        HarnessKind::Codex => "OPENAI_API_KEY",
        HarnessKind::Copilot => "COPILOT_GITHUB_TOKEN",
        HarnessKind::Pi => "ANTHROPIC_API_KEY",
    };
    let key = (env.lookup)(key_name)
        .filter(|v| !v.is_empty())
        .map(|value| (key_name, value));
    let detail = format!("{} ({version})", program.display());
    match native_sign_in(harness, &program, key, env) {
        SignIn::Yes(how) => check(
            name,
            CheckState::Ok,
            format!("{detail}, signed in: {how}"),
            None,
        ),
        SignIn::No => check(
            name,
            CheckState::Warning,
            format!("{detail}, not signed in"),
            Some(trellis_agents::sign_in_advice(harness)),
        ),
        SignIn::Unknown(why) => check(
            name,
            CheckState::Ok,
            format!("{detail}, sign-in not checked: {why}"),
            None,
        ),
    }
}

fn tool_check(subject: &str, program: &str, missing: CheckState, fix: &str) -> DoctorCheck {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(found) = find_program(program, OsStr::new(&path)) else {
        return check(subject, missing, format!("{program} not found"), Some(fix));
    };
    let spec = ProcessSpec {
        program: found.display().to_string(),
        args: vec!["--version".to_owned()],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".to_owned(), path.to_string_lossy().into_owned())],
        stdin: Vec::new(),
        redactor: Redactor::new(Vec::<String>::new()),
    };
    let limits = ProcessLimits {
        deadline: Some(VERSION_DEADLINE),
        ..ProcessLimits::default()
    };
    let mut lines = Vec::new();
    let report = run_blocking(&spec, &limits, &|| false, &mut |_, line| {
        lines.push(line.to_owned())
    });
    match report.end {
        ProcessEnd::Exited { code: 0 } => {
            let stdout = String::from_utf8_lossy(&report.stdout);
            let first = stdout
                .lines()
                .next()
                .map(str::to_owned)
                .or_else(|| lines.first().cloned())
                .unwrap_or_default();
            check(
                subject,
                CheckState::Ok,
                format!("{} ({first})", found.display()),
                None,
            )
        }
        other => check(
            subject,
            missing,
            format!("{} --version {}", found.display(), other.describe()),
            Some(fix),
        ),
    }
}
