//! `trellis run`: admit a graph (or template) with its input and runtime plan, start a durable
//! run under a detached controller, and follow it until it ends.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, DeliveryMode, DocumentKind, GraphSource,
    InputSource, PlanSource, RuntimeError, StartMode, SubmitOptions, TemplateDelivery,
    WorkspaceMode, WorkspaceOptions, classify,
};

use crate::cmd::{follow, run_gap};
use crate::context::{machine_output, open_runtime};
use crate::render::diagnostic_block;

/// Where a run works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkspaceArg {
    InPlace,
    Worktree,
}

#[derive(Debug, Args)]
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
    /// The task for a template; builds the input `{"task": …}`.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "template",
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
        value_parser = run_gap::parse_checkpoints_switch
    )]
    pub checkpoints: Option<run_gap::CheckpointsSwitch>,
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
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub gap: run_gap::GapArgs,
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
    fn given(&self) -> bool {
        self.source_remote.is_some()
            || self.source_branch.is_some()
            || self.allow_untracked
            || self.no_source
    }
}

impl RunArgs {
    /// The checkpoint switch the flags give (on when neither was given).
    pub fn checkpoint_switch(&self) -> run_gap::CheckpointsSwitch {
        if self.no_checkpoints {
            run_gap::CheckpointsSwitch::Off
        } else {
            self.checkpoints.unwrap_or(run_gap::CheckpointsSwitch::On)
        }
    }
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

pub fn run(args: &RunArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    if args.source.given() {
        bail!(
            "--source-remote, --source-branch, --allow-untracked and --no-source are for runs \
             sent to a team server (--target NAME); a local run works in its own directory"
        );
    }
    let graph = match (&args.template, args.path.as_ref().or(args.graph.as_ref())) {
        (Some(name), _) => GraphSource::Template {
            name: name.clone(),
            delivery: delivery(args)?,
        },
        (None, Some(path)) => match classify(path)? {
            DocumentKind::Gap { path } => return run_gap::run(args, &path, ledger),
            _ => GraphSource::File(path.clone()),
        },
        (None, None) => {
            bail!("say what to run: `trellis run GRAPH.json`, `--graph FILE` or `--template NAME`")
        }
    };
    let input = match (&args.task, &args.input) {
        _ if args.task_from.is_some() => {
            InputSource::TaskFrom(args.task_from.clone().unwrap_or_default())
        }
        (Some(task), _) => InputSource::Task(task.clone()),
        (None, Some(file)) => InputSource::File(file.clone()),
        (None, None) => InputSource::Default,
    };
    let plan = match (&args.runtime_config, &args.uniform_runtime_config) {
        (Some(file), _) => PlanSource::Exact(ConfigSource::File(file.clone())),
        (None, Some(file)) => PlanSource::Uniform(ConfigSource::File(file.clone())),
        (None, None) => PlanSource::Detect,
    };
    let request = AdmitRequest {
        graph,
        input,
        plan,
        workspace: args.cwd.clone(),
    };
    let admitted = match trellis_runtime::admit(request) {
        Ok(admitted) => admitted,
        Err(AdmissionError::Rejected { shown, diagnostics }) => {
            eprintln!("✗ {shown} rejected: {} diagnostic(s)\n", diagnostics.len());
            for d in &diagnostics {
                eprintln!("{}", diagnostic_block(d));
            }
            return Ok(1);
        }
        Err(AdmissionError::TemplateNeedsTask(name)) => {
            bail!("template {name} needs a task: --task \"…\" (or --input FILE)")
        }
        Err(AdmissionError::TaskNotAccepted(name)) => bail!(
            "template {name} reviews a GitHub issue or pull request, not a task: give its URL \
             with --task-from URL, or its input with --input FILE (the shape of initialInput in \
             `trellis template show {name}`)"
        ),
        Err(error @ (AdmissionError::Preparation(_) | AdmissionError::TaskFrom(_))) => {
            eprintln!("✗ {error}");
            return Ok(2);
        }
        Err(AdmissionError::InputRequired) => {
            bail!("this graph needs an initial input: --input FILE")
        }
        Err(other) => return Err(other.into()),
    };
    for notice in admitted.notices() {
        eprintln!("trellis: {notice}");
    }
    if args.validate_only {
        outln!("{}", serde_json::to_value(admitted.summary())?);
        return Ok(0);
    }
    let layout = admitted.layout();
    let runtime = open_runtime(ledger)?;
    let submitted = runtime.submit(
        admitted,
        SubmitOptions {
            submission_key: args.submission_key.clone(),
            title: args.title.clone(),
            start: StartMode::Detached,
            workspace: WorkspaceOptions {
                mode: match args.workspace {
                    WorkspaceArg::InPlace => WorkspaceMode::InPlace,
                    WorkspaceArg::Worktree => WorkspaceMode::Worktree,
                },
                checkpoints: args.checkpoint_switch() != run_gap::CheckpointsSwitch::Off,
                keep_checkpoints: args.keep_checkpoints,
                ..WorkspaceOptions::default()
            },
            skip_preflight: args.no_preflight,
        },
    );
    let receipt = match submitted {
        Ok(receipt) => receipt,
        Err(RuntimeError::Admission(error @ AdmissionError::Preparation(_))) => {
            eprintln!("✗ {error}");
            return Ok(2);
        }
        Err(RuntimeError::Preflight(problems)) => {
            eprintln!("✗ the run was not started; preflight found:");
            for problem in &problems {
                eprintln!("  {problem}");
            }
            eprintln!("  (--no-preflight starts it anyway)");
            return Ok(2);
        }
        Err(other) => return Err(other.into()),
    };
    follow::after_launch(
        &runtime,
        &receipt,
        args.detach,
        machine_output(args.json),
        Some(&layout),
    )
}
