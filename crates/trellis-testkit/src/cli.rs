//! Locating the pinned `claude` and `codex` CLIs and building their offline invocations.
//!
//! The argv and environment built here are the ones documented in `docs/agent-clis.md`; keep
//! the two in step.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::process::Command;

pub use crate::process::{CliRun, run_cli};

/// Environment variable naming the npm prefix that holds the CLIs (`<prefix>/bin/claude`).
pub const PREFIX_ENV: &str = "TRELLIS_AGENT_CLI_PREFIX";
/// The pinned `@anthropic-ai/claude-code` version (see `scripts/install-agent-clis.sh`).
pub const CLAUDE_CODE_VERSION: &str = "2.1.328";
/// The pinned `@openai/codex` version (see `scripts/install-agent-clis.sh`).
pub const CODEX_VERSION: &str = "0.169.0";
/// Dummy credential handed to the CLIs; the scripted server accepts anything.
pub const DUMMY_API_KEY: &str = "trellis-testkit-dummy-key";
/// Default model name for Claude Code (any name works; this one has known metadata).
pub const DEFAULT_CLAUDE_MODEL: &str = "claude-sonnet-4-5";
/// Default model name for Codex: a slug from Codex's bundled catalog, so Codex offers its
/// freeform `apply_patch` tool and prints no "model metadata not found" warning.
pub const DEFAULT_CODEX_MODEL: &str = "gpt-5.5";

/// Where the two CLIs are.
#[derive(Debug, Clone)]
pub struct AgentClis {
    /// The npm prefix.
    pub prefix: PathBuf,
    /// `<prefix>/bin/claude`.
    pub claude: PathBuf,
    /// `<prefix>/bin/codex`.
    pub codex: PathBuf,
}

impl AgentClis {
    /// `$TRELLIS_AGENT_CLI_PREFIX`, else `<repo>/.tools/npm` (where the install script puts them).
    pub fn default_prefix() -> PathBuf {
        match std::env::var_os(PREFIX_ENV) {
            Some(prefix) if !prefix.is_empty() => PathBuf::from(prefix),
            _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/npm"),
        }
    }

    /// Finds both CLIs under [`AgentClis::default_prefix`].
    pub fn locate() -> Result<AgentClis, String> {
        AgentClis::in_prefix(&AgentClis::default_prefix())
    }

    /// Finds both CLIs under `prefix`.
    pub fn in_prefix(prefix: &Path) -> Result<AgentClis, String> {
        let bin = prefix.join("bin");
        let clis = AgentClis {
            prefix: prefix.to_path_buf(),
            claude: bin.join("claude"),
            codex: bin.join("codex"),
        };
        for program in [&clis.claude, &clis.codex] {
            if !program.is_file() {
                return Err(format!(
                    "{} not found; run scripts/install-agent-clis.sh or set {PREFIX_ENV}",
                    program.display()
                ));
            }
        }
        Ok(clis)
    }

    /// For integration tests: the CLIs, or `None` after printing why the test is skipped.
    ///
    /// # Panics
    ///
    /// When the CLIs are missing and the `CI` environment variable is set, because CI must run
    /// these tests rather than skip them.
    pub fn for_tests(test: &str) -> Option<AgentClis> {
        match AgentClis::locate() {
            Ok(clis) => Some(clis),
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("{test}: agent CLIs are required in CI: {why}")
            }
            Err(why) => {
                // Written to the stderr handle directly: the test harness captures `eprintln!`
                // and would hide the note for a passing (skipped) test.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{test}: skipped: {why}");
                None
            }
        }
    }

    /// A minimal `PATH` for the CLIs: the prefix's `bin`, the directory of the `node` found on
    /// the current `PATH` (the Codex launcher is a Node script), then the system directories.
    pub fn search_path(&self) -> OsString {
        let mut dirs = vec![self.prefix.join("bin")];
        if let Some(node_dir) =
            find_on_path("node").and_then(|node| node.parent().map(Path::to_path_buf))
        {
            dirs.push(node_dir);
        }
        dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
        dirs.dedup();
        std::env::join_paths(dirs)
            .unwrap_or_else(|_| OsString::from("/usr/local/bin:/usr/bin:/bin"))
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// How Claude Code may use its tools without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudePermissions {
    /// `--dangerously-skip-permissions` (plus `IS_SANDBOX=1`, required when running as root).
    Skip,
    /// `--permission-mode acceptEdits`: file edits are accepted without asking; other tools
    /// follow Claude Code's own rules. Works as root without `IS_SANDBOX`.
    AcceptEdits,
    /// `--permission-mode plan`: read-only.
    Plan,
}

/// One `claude --print` invocation against a local server.
#[derive(Debug, Clone)]
pub struct ClaudeCommand {
    /// The `claude` executable.
    pub program: PathBuf,
    /// `PATH` for the child.
    pub path_env: OsString,
    /// `ANTHROPIC_BASE_URL`: the server root, without `/v1`.
    pub base_url: String,
    /// `ANTHROPIC_API_KEY`.
    pub api_key: String,
    /// Working directory (the workspace).
    pub workdir: PathBuf,
    /// Private `HOME`; Claude keeps `~/.claude.json` and `~/.claude/projects/…` (sessions) here.
    pub home: PathBuf,
    /// `--model`.
    pub model: String,
    /// `--json-schema`: the reply schema, offered to the model as the `StructuredOutput` tool.
    pub json_schema: Option<Value>,
    /// `--resume <session id>`.
    pub resume: Option<String>,
    /// Permission flags.
    pub permissions: ClaudePermissions,
    /// `--include-partial-messages`: also print `stream_event` lines with raw stream deltas.
    pub partial_messages: bool,
}

impl ClaudeCommand {
    /// An invocation with the defaults used by Trellis workers.
    pub fn new(clis: &AgentClis, base_url: &str, workdir: &Path, home: &Path) -> Self {
        ClaudeCommand {
            program: clis.claude.clone(),
            path_env: clis.search_path(),
            base_url: base_url.to_owned(),
            api_key: DUMMY_API_KEY.to_owned(),
            workdir: workdir.to_path_buf(),
            home: home.to_path_buf(),
            model: DEFAULT_CLAUDE_MODEL.to_owned(),
            json_schema: None,
            resume: None,
            permissions: ClaudePermissions::Skip,
            partial_messages: true,
        }
    }

    /// The arguments, in order (the prompt goes to stdin).
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--print",
            "--input-format",
            "text",
            "--output-format",
            "stream-json",
            "--verbose",
        ]
        .map(str::to_owned)
        .to_vec();
        if self.partial_messages {
            args.push("--include-partial-messages".into());
        }
        args.extend(["--model".into(), self.model.clone()]);
        if let Some(schema) = &self.json_schema {
            args.extend(["--json-schema".into(), schema.to_string()]);
        }
        match self.permissions {
            ClaudePermissions::Skip => args.push("--dangerously-skip-permissions".into()),
            ClaudePermissions::AcceptEdits => {
                args.extend(["--permission-mode".into(), "acceptEdits".into()]);
            }
            ClaudePermissions::Plan => args.extend(["--permission-mode".into(), "plan".into()]),
        }
        if let Some(session) = &self.resume {
            args.extend(["--resume".into(), session.clone()]);
        }
        args
    }

    /// The complete child environment (nothing is inherited).
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            ("PATH", self.path_env.clone()),
            ("HOME", self.home.clone().into_os_string()),
            ("TMPDIR", self.home.join("tmp").into_os_string()),
            ("LANG", "C.UTF-8".into()),
            ("ANTHROPIC_BASE_URL", self.base_url.clone().into()),
            ("ANTHROPIC_API_KEY", self.api_key.clone().into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ];
        if self.permissions == ClaudePermissions::Skip {
            env.push(("IS_SANDBOX", "1".into()));
        }
        env
    }

    /// Creates the private home (and its `tmp`) and returns the ready command.
    pub fn command(&self) -> std::io::Result<Command> {
        std::fs::create_dir_all(self.home.join("tmp"))?;
        let mut command = Command::new(&self.program);
        command
            .args(self.args())
            .env_clear()
            .envs(self.env())
            .current_dir(&self.workdir);
        Ok(command)
    }
}

/// How Codex may run commands and edit files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodexSandbox {
    /// `sandbox_mode="workspace-write"` and `approval_policy="never"`.
    WorkspaceWrite,
    /// `--dangerously-bypass-approvals-and-sandbox`.
    Bypass,
}

/// One `codex exec` (or `codex exec resume`) invocation against a local server.
#[derive(Debug, Clone)]
pub struct CodexCommand {
    /// The `codex` launcher.
    pub program: PathBuf,
    /// `PATH` for the child (must contain `node`).
    pub path_env: OsString,
    /// Provider base URL, including `/v1`.
    pub base_url: String,
    /// Value of `GATEWAY_API_KEY`, sent as `Authorization: Bearer …`.
    pub api_key: String,
    /// Working directory (the workspace).
    pub workdir: PathBuf,
    /// Private `HOME`; `CODEX_HOME` is `<home>/.codex` (sessions, state databases).
    pub home: PathBuf,
    /// `--model`.
    pub model: String,
    /// `--output-schema <file>`.
    pub output_schema: Option<PathBuf>,
    /// `resume <thread id>`.
    pub resume: Option<String>,
    /// Sandbox and approvals.
    pub sandbox: CodexSandbox,
}

impl CodexCommand {
    /// An invocation with the defaults used by Trellis workers.
    pub fn new(clis: &AgentClis, base_url: &str, workdir: &Path, home: &Path) -> Self {
        CodexCommand {
            program: clis.codex.clone(),
            path_env: clis.search_path(),
            base_url: base_url.to_owned(),
            api_key: DUMMY_API_KEY.to_owned(),
            workdir: workdir.to_path_buf(),
            home: home.to_path_buf(),
            model: DEFAULT_CODEX_MODEL.to_owned(),
            output_schema: None,
            resume: None,
            sandbox: CodexSandbox::WorkspaceWrite,
        }
    }

    /// `CODEX_HOME`.
    pub fn codex_home(&self) -> PathBuf {
        self.home.join(".codex")
    }

    /// The arguments, in order (the prompt goes to stdin through the final `-`).
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["exec".to_owned()];
        if self.resume.is_some() {
            args.push("resume".into());
        }
        let base_url = Value::String(self.base_url.clone()).to_string();
        let mut config = vec![
            r#"model_provider="gateway""#.to_owned(),
            r#"model_providers.gateway.name="Gateway""#.to_owned(),
            format!("model_providers.gateway.base_url={base_url}"),
            r#"model_providers.gateway.env_key="GATEWAY_API_KEY""#.to_owned(),
            r#"model_providers.gateway.wire_api="responses""#.to_owned(),
            "model_providers.gateway.requires_openai_auth=false".to_owned(),
            r#"web_search="disabled""#.to_owned(),
            // Without these two, Codex resolves chatgpt.com (analytics) and runs
            // `git ls-remote https://github.com/openai/plugins.git` (plugin sync) on every start.
            "analytics.enabled=false".to_owned(),
            "features.plugins=false".to_owned(),
        ];
        if self.sandbox == CodexSandbox::WorkspaceWrite {
            // `codex exec resume` has no --sandbox flag; the config key works for both.
            config.push(r#"sandbox_mode="workspace-write""#.into());
            config.push(r#"approval_policy="never""#.into());
        }
        for entry in config {
            args.extend(["-c".to_owned(), entry]);
        }
        if self.sandbox == CodexSandbox::Bypass {
            args.push("--dangerously-bypass-approvals-and-sandbox".into());
        }
        args.extend(["--json".into(), "--model".into(), self.model.clone()]);
        args.push("--skip-git-repo-check".into());
        if let Some(schema) = &self.output_schema {
            args.extend(["--output-schema".into(), schema.display().to_string()]);
        }
        if let Some(thread) = &self.resume {
            args.push(thread.clone());
        }
        args.push("-".into());
        args
    }

    /// The complete child environment (nothing is inherited).
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("PATH", self.path_env.clone()),
            ("HOME", self.home.clone().into_os_string()),
            ("CODEX_HOME", self.codex_home().into_os_string()),
            // As Trellis's harness does. With a system `bwrap`, Codex's own sandbox needs helper
            // links it refuses to create in a CODEX_HOME under the temporary directory, and then
            // fails every file change; the private home lives in /tmp, so TMPDIR moves into it.
            ("TMPDIR", self.home.join("tmp").into_os_string()),
            ("LANG", "C.UTF-8".into()),
            ("GATEWAY_API_KEY", self.api_key.clone().into()),
        ]
    }

    /// Creates `CODEX_HOME` (Codex refuses to start when it is missing) and the temporary
    /// directory, and returns the command.
    pub fn command(&self) -> std::io::Result<Command> {
        std::fs::create_dir_all(self.codex_home())?;
        std::fs::create_dir_all(self.home.join("tmp"))?;
        let mut command = Command::new(&self.program);
        command
            .args(self.args())
            .env_clear()
            .envs(self.env())
            .current_dir(&self.workdir);
        Ok(command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clis() -> AgentClis {
        AgentClis {
            prefix: "/p".into(),
            claude: "/p/bin/claude".into(),
            codex: "/p/bin/codex".into(),
        }
    }

    #[test]
    fn claude_args_follow_the_documented_order() {
        let mut claude =
            ClaudeCommand::new(&clis(), "http://127.0.0.1:1", "/w".as_ref(), "/h".as_ref());
        claude.json_schema = Some(serde_json::json!({"type": "object"}));
        claude.resume = Some("sid".into());
        assert_eq!(
            claude.args().join(" "),
            "--print --input-format text --output-format stream-json --verbose \
             --include-partial-messages --model claude-sonnet-4-5 --json-schema {\"type\":\"object\"} \
             --dangerously-skip-permissions --resume sid"
        );
        assert!(
            claude
                .env()
                .iter()
                .any(|(k, v)| *k == "IS_SANDBOX" && v == "1")
        );
    }

    #[test]
    fn codex_resume_puts_thread_before_stdin_marker() {
        let mut codex = CodexCommand::new(
            &clis(),
            "http://127.0.0.1:1/v1",
            "/w".as_ref(),
            "/h".as_ref(),
        );
        codex.resume = Some("tid".into());
        codex.output_schema = Some("/s.json".into());
        let args = codex.args();
        assert_eq!(&args[..2], ["exec", "resume"]);
        assert!(
            args.contains(
                &r#"model_providers.gateway.base_url="http://127.0.0.1:1/v1""#.to_owned()
            )
        );
        assert_eq!(
            &args[args.len() - 4..],
            ["--output-schema", "/s.json", "tid", "-"]
        );
        assert_eq!(codex.codex_home(), Path::new("/h/.codex"));
    }
}
