//! What to run and within which bounds, and how it is started: in a process group of its own,
//! with exactly the declared environment, through `posix_spawn` (no `pre_exec` closure, so
//! the parent's memory is never copied).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::redact::Redactor;

/// Most stdout bytes kept by default when stdout is captured.
pub const DEFAULT_MAX_STDOUT_BYTES: usize = 8 * 1024 * 1024;
/// Longest line delivered to an observer by default.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024;
/// Time between SIGTERM and SIGKILL when a group is stopped, by default.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output still in the pipes is read after the process ended.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What to run. The environment is exactly `env`: nothing is inherited.
#[derive(Debug, Clone, Default)]
pub struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// Written to the child's stdin, which is then closed: a child reading stdin gets EOF.
    pub stdin: Vec<u8>,
    /// Masks secret values in everything read from the child, before any line is cut.
    pub redactor: Redactor,
}

/// Bounds on one process.
#[derive(Debug, Clone)]
pub struct ProcessLimits {
    pub deadline: Option<Duration>,
    pub idle: Option<Duration>,
    /// Whether stdout is kept for the report (else it only reaches the observer).
    pub capture_stdout: bool,
    /// Most stdout bytes kept; more marks the capture truncated.
    pub max_stdout_bytes: usize,
    /// Longest line delivered to the observer; the rest of a longer line is dropped and the
    /// delivered part marked cut.
    pub max_line_bytes: usize,
    /// Time between SIGTERM and SIGKILL when stopping the group.
    pub kill_grace: Duration,
    /// Leave the group alone once its leader exited on its own: background processes it
    /// started (an environment's startup services) live on until the caller stops them with
    /// [`crate::kill_group`] or [`crate::signal_group`]. A stopped leader's group is always
    /// killed.
    pub keep_group_after_exit: bool,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            deadline: None,
            idle: None,
            capture_stdout: true,
            max_stdout_bytes: DEFAULT_MAX_STDOUT_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            kill_grace: DEFAULT_KILL_GRACE,
            keep_group_after_exit: false,
        }
    }
}

/// The program's path. A bare name is looked up on the child's own `PATH` here: std starts a
/// child with `posix_spawn` only when it need not search a `PATH` that differs from ours.
fn resolve_program(spec: &ProcessSpec) -> Result<PathBuf, String> {
    if spec.program.is_empty() {
        return Err("cannot start a process: the program is empty".to_owned());
    }
    if spec.program.contains('/') {
        return Ok(PathBuf::from(&spec.program));
    }
    let Some((_, path)) = spec.env.iter().rev().find(|(name, _)| name == "PATH") else {
        // Without PATH the C library's default search applies, which std leaves to it.
        return Ok(PathBuf::from(&spec.program));
    };
    which::which_in(&spec.program, Some(path), &spec.cwd).map_err(|_| {
        format!(
            "cannot start {}: no such program on the PATH it is given",
            spec.program
        )
    })
}

/// The std command for `spec`, every stdio piped, in a new process group.
pub(crate) fn std_command(spec: &ProcessSpec) -> Result<Command, String> {
    let program = resolve_program(spec)?;
    let mut command = Command::new(&program);
    command
        .args(&spec.args)
        .current_dir(working_directory(&spec.cwd))
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        // The watchdog of a process whose children die with it finds them by this (guard.rs).
        .envs(crate::guard::guard_marker())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    Ok(command)
}

fn working_directory(cwd: &Path) -> &Path {
    if cwd.as_os_str().is_empty() {
        Path::new(".")
    } else {
        cwd
    }
}

/// The message of a failed start.
pub(crate) fn spawn_error(spec: &ProcessSpec, error: &std::io::Error) -> String {
    format!("cannot start {}: {error}", spec.program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_resolve_on_the_childs_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("my-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&tool, executable).unwrap();
        let spec = ProcessSpec {
            program: "my-tool".into(),
            env: vec![("PATH".into(), dir.path().display().to_string())],
            cwd: dir.path().to_path_buf(),
            ..ProcessSpec::default()
        };
        assert_eq!(resolve_program(&spec).unwrap(), tool);
        let missing = ProcessSpec {
            program: "no-such-tool-anywhere".into(),
            ..spec
        };
        assert!(
            resolve_program(&missing)
                .unwrap_err()
                .contains("no such program")
        );
        let given = ProcessSpec {
            program: "./local".into(),
            ..ProcessSpec::default()
        };
        assert_eq!(resolve_program(&given).unwrap(), PathBuf::from("./local"));
    }
}
