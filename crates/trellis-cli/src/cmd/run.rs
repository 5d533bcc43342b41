//! `trellis run`: admit a graph (or template) with its input and runtime plan, start a durable
//! run under a detached controller, and follow it until it ends.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use serde_json::{Value, json};
use trellis_graph::{GraphSpec, JsonPath};
use trellis_runtime::delivery::read_source;
use trellis_runtime::launch::{LaunchRequest, controller_env, launch};
use trellis_runtime::plan::RuntimePlan;
use trellis_runtime::submission::{StoredSource, Submission};
use trellis_runtime::templates;
use trellis_verify::{Verification, VerifiedGraph, verify_builtin};

use crate::cmd::{follow, lanes, run_gap};
use crate::context::{Context, read_json_file, stdout_is_terminal};
use crate::document::{Document, classify};
use crate::render::diagnostic_block;

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
    /// Machine output: a receipt line, then NDJSON events (the default when not a terminal).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub gap: run_gap::GapArgs,
}

/// A graph ready to run: where it came from, verified, with its input.
struct Prepared {
    spec: GraphSpec,
    verified: VerifiedGraph,
    input: Value,
    template: Option<String>,
    default_title: String,
}

pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let prepared = match (&args.template, args.path.as_ref().or(args.graph.as_ref())) {
        (Some(name), _) => prepare_template(args, name)?,
        (None, Some(path)) => match classify(path)? {
            Document::Gap { path } => return run_gap::run(args, &path),
            Document::Unparseable { path, error } => {
                bail!("{} does not parse: {error}", path.display())
            }
            Document::GraphSpec { path, value } => prepare_graph(args, &path, &value)?,
        },
        (None, None) => {
            bail!("say what to run: `trellis run GRAPH.json`, `--graph FILE` or `--template NAME`")
        }
    };
    let Some(prepared) = prepared else {
        return Ok(1);
    };
    run_graph(args, prepared)
}

fn prepare_template(args: &RunArgs, name: &str) -> anyhow::Result<Option<Prepared>> {
    let template = templates::find(name)
        .ok_or_else(|| anyhow!("unknown template {name:?}; `trellis template list` shows them"))?;
    let text = template.document(args.push).map_err(anyhow::Error::msg)?;
    let value: Value = serde_json::from_str(text).context("built-in template")?;
    let input = match (&args.task, &args.input) {
        (Some(_), _) if template.input_source() == templates::InputSource::ForgeUrl => bail!(
            "template {name} reviews a GitHub issue or pull request, not a task: give its input \
             with --input FILE (the shape of initialInput in `trellis template show {name}`)"
        ),
        (Some(task), _) => Some(template.input_for_task(task)),
        (None, Some(_)) => None,
        (None, None) => bail!("template {name} needs a task: --task \"…\" (or --input FILE)"),
    };
    let title = args.task.clone().unwrap_or_else(|| name.to_owned());
    verify_and_input(args, &value, input, Some(name.to_owned()), title, name)
}

fn prepare_graph(args: &RunArgs, path: &Path, value: &Value) -> anyhow::Result<Option<Prepared>> {
    let title = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    verify_and_input(args, value, None, None, title, &path.display().to_string())
}

fn verify_and_input(
    args: &RunArgs,
    value: &Value,
    input: Option<Value>,
    template: Option<String>,
    default_title: String,
    shown: &str,
) -> anyhow::Result<Option<Prepared>> {
    let spec = GraphSpec::parse(value, &JsonPath::root()).map_err(|e| anyhow!("{shown}: {e}"))?;
    let verified = match verify_builtin(&spec) {
        Verification::Verified(verified) => verified,
        Verification::Internal(message) => bail!("internal verifier error: {message}"),
        Verification::Rejected(diagnostics) => {
            eprintln!("✗ {shown} rejected: {} diagnostic(s)\n", diagnostics.len());
            for d in &diagnostics {
                eprintln!("{}", diagnostic_block(d));
            }
            return Ok(None);
        }
    };
    let input = match (input, &args.input) {
        (Some(input), _) => input,
        (None, Some(file)) => read_json_file(file, "input")?,
        (None, None) if matches!(spec.initial_input, trellis_graph::PayloadType::Null) => {
            Value::Null
        }
        (None, None) => bail!("this graph needs an initial input: --input FILE"),
    };
    spec.initial_input
        .check_value(&input)
        .map_err(|e| anyhow!("initial input does not match GraphSpec.initialInput: {e}"))?;
    Ok(Some(Prepared {
        spec,
        verified,
        input,
        template,
        default_title,
    }))
}

fn load_plan(args: &RunArgs, spec: &GraphSpec) -> anyhow::Result<RuntimePlan> {
    let mut plan = if let Some(file) = &args.runtime_config {
        RuntimePlan::from_json(&read_json_file(file, "runtime config")?)?
    } else if let Some(file) = &args.uniform_runtime_config {
        RuntimePlan::uniform(&read_json_file(file, "uniform runtime config")?, spec)?
    } else {
        lanes::default_plan(spec)?
    };
    plan.fill_delivery_defaults(spec);
    plan.admit(spec)?;
    Ok(plan)
}

fn run_graph(args: &RunArgs, prepared: Prepared) -> anyhow::Result<u8> {
    let plan = load_plan(args, &prepared.spec)?;
    let workspace = args
        .cwd
        .clone()
        .map_or_else(std::env::current_dir, Ok)
        .context("cannot read the working directory")?;
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
    if args.validate_only {
        outln!("{}", validation_summary(&prepared, &plan));
        return Ok(0);
    }
    let source = read_source(&workspace);
    let submission = Submission {
        graph: prepared.spec.to_value(),
        input: prepared.input.clone(),
        plan: plan.clone(),
        workspace: workspace.clone(),
        source: source.as_ref().map(StoredSource::from),
        template: prepared.template.clone(),
    };
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| first_line(&prepared.default_title));
    let key = args.submission_key.clone().unwrap_or_else(|| {
        format!(
            "cli-{}",
            trellis_ledger::RunId::generate().as_str().replace('-', "")
        )
    });
    let ctx = Context::open()?;
    let request = LaunchRequest {
        submission,
        title,
        submission_key: key,
        identity: prepared.verified.identity.to_string(),
        predecessor: None,
        controller_exe: std::env::current_exe().context("cannot locate the trellis binary")?,
    };
    let env = controller_env(&plan.connection_names());
    let launched = launch(&ctx.home, ctx.store.as_ref(), &request, &env)?;
    follow::after_launch(
        &ctx,
        &launched,
        args.detach,
        machine_output(args.json),
        Some(&prepared.spec),
    )
}

/// Machine output when asked for, or when stdout is not a terminal.
pub fn machine_output(json_flag: bool) -> bool {
    json_flag || !stdout_is_terminal()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("run").trim();
    let mut title: String = line.chars().filter(|c| !c.is_control()).take(120).collect();
    if title.is_empty() {
        title = "run".into();
    }
    title
}

fn validation_summary(prepared: &Prepared, plan: &RuntimePlan) -> Value {
    let bounds = &prepared.verified.ir.bounds;
    let mut worst = json!({
        "maxNodeExecutions": bounds.max_node_executions.get(),
        "peakConcurrency": bounds.peak_concurrency.get(),
        "maxAttempts": bounds.attempts_per_node.values().map(|a| a.get()).max().unwrap_or(1),
    });
    // Attempts multiply executions only through crash retries, so the ceiling is explicit.
    worst["maxExecutionsWithRetries"] = json!(
        bounds.max_node_executions.get()
            * bounds
                .attempts_per_node
                .values()
                .map(|a| a.get())
                .max()
                .unwrap_or(1)
    );
    json!({
        "valid": true,
        "identity": prepared.verified.identity.to_string(),
        "worstCase": worst,
        "budget": plan.budget,
        "bindings": plan.nodes.iter().map(|(n, b)| (n.to_string(), json!(b.kind_name()))).collect::<serde_json::Map<_, _>>(),
        "harness": plan.harness,
        "provider": plan.provider,
    })
}
