//! The flags of `trellis run` — local or sent to a team server with `--target`, GraphSpec or
//! GaP — and what they mean: the checkpoints switch both kinds of workflow read, and the
//! delivery a template run asks for.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use trellis_runtime::gap::CheckpointMode;
use trellis_runtime::{DeliveryMode, TemplateDelivery};

/// Where a run works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkspaceArg {
    InPlace,
    Worktree,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("named").args(["template", "profile"])))]
pub struct RunArgs {
    /// The graph: a GraphSpec file, or a GaP workflow (directory or workflow.json).
    #[arg(value_name = "FILE", conflicts_with_all = ["graph", "template"])]
    pub path: Option<PathBuf>,
    /// The graph file (same as the positional FILE).
    #[arg(long, value_name = "FILE", conflicts_with = "template")]
    pub graph: Option<PathBuf>,
    /// Run a built-in template (`trellis template list`).
    #[arg(long, value_name = "NAME")]
    pub template: Option<String>,
    /// Run a saved profile (`trellis profile list`): its graph or template, plan and default
    /// input; `--task` or `--input` replace the input.
    #[arg(long, value_name = "NAME", conflicts_with_all = [
        "path", "graph", "template", "task_from", "runtime_config", "uniform_runtime_config",
        "push", "pr", "ship", "delivery", "no_pr_feedback",
    ])]
    pub profile: Option<String>,
    /// The task for a template (or a template profile); builds the input `{"task": …}`.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "named",
        conflicts_with = "input"
    )]
    pub task: Option<String>,
    /// Review a GitHub issue or pull request: its URL becomes the review template's input
    /// (needs GH_TOKEN or GITHUB_TOKEN; GITHUB_API_URL for GitHub Enterprise).
    #[arg(
        long,
        value_name = "URL",
        requires = "template",
        conflicts_with_all = ["task", "input"]
    )]
    pub task_from: Option<String>,
    /// Deliver an accepted change by pushing the run branch `trellis/<run>` (templates only).
    #[arg(long, requires = "template", conflicts_with_all = ["pr", "ship", "delivery"])]
    pub push: bool,
    /// Deliver it as a pull request; review feedback and failing checks go back to the worker
    /// until it is clean (needs GH_TOKEN and an `origin` on GitHub).
    #[arg(long, requires = "template", conflicts_with_all = ["ship", "delivery"])]
    pub pr: bool,
    /// As --pr, then merge the pull request once it is mergeable and its checks are green.
    #[arg(long, requires = "template", conflicts_with = "delivery")]
    pub ship: bool,
    /// The delivery by name: none, push, pull_request, merge or comment (default: the
    /// template's own).
    #[arg(long, value_name = "MODE", requires = "template", value_parser = parse_delivery)]
    pub delivery: Option<DeliveryMode>,
    /// With --pr or --ship: leave review comments and requested changes on the pull request to
    /// people; only failing checks go back to the worker.
    #[arg(long)]
    pub no_pr_feedback: bool,
    /// The initial input (JSON file matching the graph's initialInput).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// A title for the run (default: the task, template or file name).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// An exact runtime plan: one binding per step and verifier.
    #[arg(long, value_name = "FILE", conflicts_with = "uniform_runtime_config")]
    pub runtime_config: Option<PathBuf>,
    /// One binding for every executable: an agent lane or a command.
    #[arg(long, value_name = "FILE")]
    pub uniform_runtime_config: Option<PathBuf>,
    /// Start the run and return at once; follow it later with `trellis watch`.
    #[arg(short, long)]
    pub detach: bool,
    /// Where the steps run: `none` (as you, the default) or `sandbox` (each agent, command and
    /// GaP script or tool in a bubblewrap sandbox whose only writable tree is the workspace —
    /// for a GaP run, the directory its scripts run in; needs `bwrap`). A plan's
    /// `"isolation"` may ask for more, never less.
    #[arg(long, value_name = "MODE", value_enum)]
    pub isolation: Option<crate::context::IsolationArg>,
    /// Idempotency key: the same key and submission return the same run.
    #[arg(long, value_name = "KEY")]
    pub submission_key: Option<String>,
    /// Check graph, input and plan, print what would run, and start nothing.
    #[arg(long)]
    pub validate_only: bool,
    /// The workspace the run works in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// `in-place` works in the workspace itself; `worktree` in a fresh git worktree of its
    /// HEAD, leaving the checkout untouched (a failed run keeps it for `resume`).
    #[arg(long, value_name = "MODE", default_value = "in-place")]
    pub workspace: WorkspaceArg,
    /// Checkpoints, on by default: a GraphSpec run records the workspace before each writing
    /// wave; a GaP run evaluates `checkpoints/<subgraph>.py` after each success-path subgraph
    /// exit, `on` meaning `warn` (record and log failures) and `strict` failing the run.
    /// `off` (or `--no-checkpoints`) turns them off.
    #[arg(
        long,
        value_name = "MODE",
        num_args = 0..=1,
        default_missing_value = "on",
        value_parser = parse_checkpoints_switch
    )]
    pub checkpoints: Option<CheckpointsSwitch>,
    /// Same as `--checkpoints off`.
    #[arg(long, conflicts_with = "checkpoints")]
    pub no_checkpoints: bool,
    /// Keep the checkpoints when the run succeeds (a failed run always keeps them).
    #[arg(long, conflicts_with = "no_checkpoints")]
    pub keep_checkpoints: bool,
    /// Machine output: a receipt line, then NDJSON events (the default when not a terminal).
    #[arg(long)]
    pub json: bool,
    /// Start without checking first that the agent CLI is installed and signed in and that
    /// declared connection variables are set.
    #[arg(long)]
    pub no_preflight: bool,
    /// With --target: send the run's connection values to a server over plain http beyond
    /// loopback (only on a network you trust).
    #[arg(long)]
    pub insecure: bool,
    /// With --target: an environment file (docs/environment.md) whose setup and startup hooks
    /// prepare the server's host before the run dispatches, and again on every resume.
    #[arg(long, value_name = "FILE", conflicts_with = "no_environment")]
    pub environment: Option<PathBuf>,
    /// With --target: run without an environment file, the server's default included.
    #[arg(long)]
    pub no_environment: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub gap: GapArgs,
}

/// Where a remote run's files come from (`--target NAME` naming a team server only): the
/// current checkout's `HEAD` commit, its branch and the URL of the branch's remote (else
/// `origin`). The tree must be clean and the commit pushed; the server checks it out itself.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The repository URL the server fetches from (default: the URL of the branch's upstream
    /// remote, else of `origin`). Never with credentials in it.
    #[arg(long, value_name = "URL", conflicts_with = "no_source")]
    pub source_remote: Option<String>,
    /// The branch the revision is on (default: the checked-out branch).
    #[arg(long, value_name = "BRANCH", conflicts_with = "no_source")]
    pub source_branch: Option<String>,
    /// Send the run even with untracked files in the checkout (they are not part of the
    /// revision, so the run will not see them); tracked changes are always refused.
    #[arg(long, conflicts_with = "no_source")]
    pub allow_untracked: bool,
    /// Send the run without a source: its workspace on the server starts empty.
    #[arg(long)]
    pub no_source: bool,
}

impl SourceArgs {
    pub(crate) fn given(&self) -> bool {
        self.source_remote.is_some()
            || self.source_branch.is_some()
            || self.allow_untracked
            || self.no_source
    }
}

impl RunArgs {
    /// A profile run given no title or task is named after its profile.
    pub(crate) fn profile_title(&self) -> Option<String> {
        match (&self.profile, &self.task) {
            (Some(name), None) => Some(format!("profile {name}")),
            _ => None,
        }
    }

    /// The checkpoint switch the flags give (on when neither was given).
    pub fn checkpoint_switch(&self) -> CheckpointsSwitch {
        if self.no_checkpoints {
            CheckpointsSwitch::Off
        } else {
            self.checkpoints.unwrap_or(CheckpointsSwitch::On)
        }
    }
}

/// Reads and checks an environment file (refused as `runtime.invalid_environment`).
pub(crate) fn read_environment(
    path: &std::path::Path,
) -> anyhow::Result<trellis_runtime::EnvironmentSpec> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        trellis_runtime::RuntimeError::Environment(trellis_runtime::EnvironmentError::Invalid(
            format!("cannot read {}: {error}", path.display()),
        ))
    })?;
    Ok(trellis_runtime::EnvironmentSpec::from_text(&text)
        .map_err(trellis_runtime::RuntimeError::Environment)?)
}

fn parse_delivery(text: &str) -> Result<DeliveryMode, String> {
    DeliveryMode::parse(text).ok_or_else(|| {
        format!("{text:?} is not a delivery; use none, push, pull_request, merge or comment")
    })
}

/// The delivery the flags ask for (`None`: the template's default).
pub(crate) fn delivery(args: &RunArgs) -> anyhow::Result<TemplateDelivery> {
    let mode = if args.push {
        Some(DeliveryMode::Push)
    } else if args.pr {
        Some(DeliveryMode::PullRequest)
    } else if args.ship {
        Some(DeliveryMode::Merge)
    } else {
        args.delivery
    };
    if args.no_pr_feedback && !matches!(mode, Some(DeliveryMode::PullRequest | DeliveryMode::Merge))
    {
        bail!("--no-pr-feedback goes with --pr or --ship (or --delivery pull_request|merge)");
    }
    Ok(TemplateDelivery {
        mode,
        ignore_pr_feedback: args.no_pr_feedback,
    })
}

#[derive(Debug, Args)]
pub struct GapArgs {
    /// GaP: top-level inputs (a JSON object file).
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<PathBuf>,
    /// GaP: write dag_trace.json and node_data/ here as the run goes.
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
    /// GaP: most ready nodes run at once per super-step.
    #[arg(long, value_name = "N")]
    pub max_workers: Option<usize>,
    /// GaP: register the command tools of this manifest (repeatable).
    #[arg(long, value_name = "FILE")]
    pub tool_manifest: Vec<PathBuf>,
    /// GaP: register a Python function as a tool, `NAME=MODULE.py:FUNCTION` (repeatable).
    #[arg(long, value_name = "SPEC")]
    pub python_tool: Vec<String>,
    /// GaP: register the built-in `stub.*` test tools.
    #[arg(long)]
    pub stub_tools: bool,
    /// GaP: skill bundles under DIR (repeatable): contract checks, `gap_skills.*` packages for
    /// their subgraphs' scripts (`load_prompt`), canonical scripts, and their `tools.py` tools.
    #[arg(long, value_name = "DIR")]
    pub skills: Vec<PathBuf>,
    /// GaP: a Python module whose `get_observation()` feeds the observation stream and whose
    /// `world_snapshot()` the checkpoints are judged against.
    #[arg(long, value_name = "MODULE.py", conflicts_with = "connector_command")]
    pub connector: Option<PathBuf>,
    /// GaP: a connector program (words split on whitespace) answering JSON lines
    /// `{"id","op":"get_observation"|"world_snapshot"}` with `{"id","value"}`.
    #[arg(long, value_name = "COMMAND")]
    pub connector_command: Option<String>,
    /// GaP: an environment variable holding a secret (repeatable): its value is masked in
    /// everything recorded, and a detached controller is handed it (only the name is stored).
    #[arg(long, value_name = "NAME")]
    pub secret_env: Vec<String>,
}

/// `--checkpoints MODE`, shared by both kinds of workflow: a GraphSpec run's workspace
/// checkpoints are on or off (`warn` and `strict` count as on); a GaP run's are its
/// `checkpoints/<subgraph>.py` checks, where `on` means `warn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointsSwitch {
    On,
    Off,
    Warn,
    Strict,
}

impl CheckpointsSwitch {
    /// What a GaP run does with its checks.
    pub(crate) fn gap_mode(self) -> CheckpointMode {
        match self {
            Self::On | Self::Warn => CheckpointMode::Warn,
            Self::Off => CheckpointMode::Off,
            Self::Strict => CheckpointMode::Strict,
        }
    }
}

pub fn parse_checkpoints_switch(text: &str) -> Result<CheckpointsSwitch, String> {
    match text {
        "on" => Ok(CheckpointsSwitch::On),
        _ => match CheckpointMode::parse(text) {
            Some(CheckpointMode::Off) => Ok(CheckpointsSwitch::Off),
            Some(CheckpointMode::Warn) => Ok(CheckpointsSwitch::Warn),
            Some(CheckpointMode::Strict) => Ok(CheckpointsSwitch::Strict),
            None => Err(format!("expected on, off, warn or strict, got {text:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_checkpoints_switch_reads_both_kinds_of_workflow() {
        let parsed: Vec<_> = ["on", "off", "warn", "strict", "raise"]
            .into_iter()
            .map(|text| parse_checkpoints_switch(text).unwrap().gap_mode())
            .collect();
        assert_eq!(
            parsed,
            [
                CheckpointMode::Warn,
                CheckpointMode::Off,
                CheckpointMode::Warn,
                CheckpointMode::Strict,
                CheckpointMode::Strict
            ]
        );
        assert!(parse_checkpoints_switch("yes").is_err());
    }
}
