//! `trellis run`: admit a graph (or template) with its input and runtime plan, start a durable
//! run under a detached controller, and follow it until it ends.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, DocumentKind, GraphSource, InputSource, PlanSource,
    StartMode, SubmitOptions, WorkspaceMode, WorkspaceOptions, classify,
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
    /// Deliver an accepted change by pushing the run branch `trellis/<run>` (templates only).
    #[arg(long, requires = "template")]
    pub push: bool,
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
    /// Record no checkpoints of the workspace.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Keep the checkpoints when the run succeeds (a failed run always keeps them).
    #[arg(long, conflicts_with = "no_checkpoints")]
    pub keep_checkpoints: bool,
    /// Machine output: a receipt line, then NDJSON events (the default when not a terminal).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub gap: run_gap::GapArgs,
}

pub fn run(args: &RunArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    let graph = match (&args.template, args.path.as_ref().or(args.graph.as_ref())) {
        (Some(name), _) => GraphSource::Template {
            name: name.clone(),
            push: args.push,
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
            "template {name} reviews a GitHub issue or pull request, not a task: give its input \
             with --input FILE (the shape of initialInput in `trellis template show {name}`)"
        ),
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
    let receipt = runtime.submit(
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
                checkpoints: !args.no_checkpoints,
                keep_checkpoints: args.keep_checkpoints,
                ..WorkspaceOptions::default()
            },
        },
    )?;
    follow::after_launch(
        &runtime,
        &receipt,
        args.detach,
        machine_output(args.json),
        Some(&layout),
    )
}
