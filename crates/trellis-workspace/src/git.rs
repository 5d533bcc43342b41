//! Running git through the process runner: a fixed, minimal environment, bounded output and a
//! deadline, with git's stderr kept for the error message.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Stream, run_blocking};

use crate::error::WorkspaceError;

/// Longest one git command may take (a checkpoint of a very large tree included).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(600);
/// Most stdout bytes read from one git command (a `-z` listing of a large diff fits).
pub const MAX_GIT_OUTPUT_BYTES: usize = 64 * 1024 * 1024;
/// Stderr lines of a failed git command kept for its error message.
const STDERR_LINES: usize = 12;

/// Name and address on the commits that hold checkpoints.
pub const CHECKPOINT_AUTHOR: (&str, &str) = ("Trellis", "checkpoints@trellis.invalid");

/// Variables of the calling process git may see: where it is, and where the user's own git
/// configuration lives (so ignore rules and filters are the user's).
const INHERITED: [&str; 4] = ["PATH", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"];

/// How git is started: the program and exactly the environment it gets.
#[derive(Debug, Clone)]
pub struct Git {
    program: String,
    env: Vec<(String, String)>,
}

impl Git {
    /// Git from the `PATH` of this process, seeing only the variables above plus a fixed
    /// identity, the C locale and no prompts.
    pub fn from_environment() -> Self {
        let inherited = INHERITED
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)));
        Self::with_env(inherited.collect())
    }

    /// Git seeing `env` plus the fixed identity, locale and prompt settings.
    pub fn with_env(mut env: Vec<(String, String)>) -> Self {
        let (name, email) = CHECKPOINT_AUTHOR;
        for (key, value) in [
            ("GIT_AUTHOR_NAME", name),
            ("GIT_AUTHOR_EMAIL", email),
            ("GIT_COMMITTER_NAME", name),
            ("GIT_COMMITTER_EMAIL", email),
            ("GIT_TERMINAL_PROMPT", "0"),
            // Nothing we run may refresh the user's index behind their back.
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("LC_ALL", "C"),
        ] {
            env.retain(|(k, _)| k != key);
            env.push((key.to_owned(), value.to_owned()));
        }
        Self {
            program: "git".to_owned(),
            env,
        }
    }

    /// Runs `git ARGS` in `cwd` with `extra_env` on top; its stdout when it exits 0.
    pub(crate) fn run(
        &self,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &Path)],
    ) -> Result<Vec<u8>, WorkspaceError> {
        let (end, stdout, stderr) = self.call(cwd, args, extra_env, Vec::new())?;
        if end.success() {
            Ok(stdout)
        } else {
            Err(failure(args, &end, stderr))
        }
    }

    /// Like [`Git::run`], with `stdin` written to git's standard input.
    pub(crate) fn run_with_input(
        &self,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &Path)],
        stdin: Vec<u8>,
    ) -> Result<Vec<u8>, WorkspaceError> {
        let (end, stdout, stderr) = self.call(cwd, args, extra_env, stdin)?;
        if end.success() {
            Ok(stdout)
        } else {
            Err(failure(args, &end, stderr))
        }
    }

    /// Runs git for an answer that may be "no": `None` when it exits non-zero.
    pub(crate) fn query(
        &self,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &Path)],
    ) -> Result<Option<Vec<u8>>, WorkspaceError> {
        let (end, stdout, stderr) = self.call(cwd, args, extra_env, Vec::new())?;
        match end {
            ProcessEnd::Exited { code: 0 } => Ok(Some(stdout)),
            ProcessEnd::Exited { .. } => Ok(None),
            end => Err(failure(args, &end, stderr)),
        }
    }

    fn call(
        &self,
        cwd: &Path,
        args: &[&str],
        extra_env: &[(&str, &Path)],
        stdin: Vec<u8>,
    ) -> Result<(ProcessEnd, Vec<u8>, String), WorkspaceError> {
        let mut env = self.env.clone();
        for (key, value) in extra_env {
            env.retain(|(k, _)| k != key);
            env.push(((*key).to_owned(), value.to_string_lossy().into_owned()));
        }
        let spec = ProcessSpec {
            program: self.program.clone(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd: cwd.to_path_buf(),
            env,
            stdin,
            ..ProcessSpec::default()
        };
        let limits = ProcessLimits {
            deadline: Some(GIT_TIMEOUT),
            max_stdout_bytes: MAX_GIT_OUTPUT_BYTES,
            // Listings are NUL-separated: one "line" may be the whole answer.
            max_line_bytes: MAX_GIT_OUTPUT_BYTES,
            ..ProcessLimits::default()
        };
        let mut stderr: VecDeque<String> = VecDeque::new();
        let report = run_blocking(&spec, &limits, &|| false, &mut |stream, line| {
            if stream == Stream::Stderr {
                if stderr.len() == STDERR_LINES {
                    stderr.pop_front();
                }
                stderr.push_back(line.to_owned());
            }
        });
        if report.stdout_truncated {
            return Err(WorkspaceError::Unexpected {
                command: subcommand(args),
                detail: format!("its output exceeds {MAX_GIT_OUTPUT_BYTES} bytes"),
            });
        }
        let stderr = Vec::from(stderr).join("\n");
        Ok((report.end, report.stdout, stderr))
    }
}

fn failure(args: &[&str], end: &ProcessEnd, stderr: String) -> WorkspaceError {
    WorkspaceError::Git {
        command: subcommand(args),
        how: end.describe(),
        stderr: stderr.trim().to_owned(),
    }
}

/// The git subcommand of an argument list (after any `-c key=value` options).
fn subcommand(args: &[&str]) -> String {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if *arg == "-c" {
            rest.next();
        } else if !arg.starts_with('-') {
            return (*arg).to_owned();
        }
    }
    args.first().copied().unwrap_or_default().to_owned()
}

/// Git's answer as one trimmed line of text.
pub(crate) fn one_line(command: &str, stdout: &[u8]) -> Result<String, WorkspaceError> {
    let text = std::str::from_utf8(stdout).map_err(|_| WorkspaceError::Unexpected {
        command: command.to_owned(),
        detail: "its answer is not UTF-8".to_owned(),
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subcommand_is_named_past_config_options() {
        assert_eq!(
            subcommand(&["-c", "core.hooksPath=/dev/null", "worktree"]),
            "worktree"
        );
        assert_eq!(subcommand(&["add", "-A"]), "add");
        assert_eq!(subcommand(&[]), "");
    }

    #[test]
    fn the_fixed_settings_replace_inherited_ones() {
        let git = Git::with_env(vec![
            ("LC_ALL".into(), "de_DE.UTF-8".into()),
            ("PATH".into(), "/bin".into()),
        ]);
        let locale: Vec<&str> = git
            .env
            .iter()
            .filter(|(k, _)| k == "LC_ALL")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(locale, ["C"]);
        assert!(git.env.iter().any(|(k, v)| k == "PATH" && v == "/bin"));
    }

    #[test]
    fn a_missing_program_is_an_error_not_a_panic() {
        let git = Git {
            program: "/nonexistent/git".into(),
            env: Vec::new(),
        };
        let error = git.run(Path::new("/"), &["status"], &[]).unwrap_err();
        assert_eq!(error.code(), "workspace.git_failed");
    }
}
