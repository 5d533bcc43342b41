//! `trellis run`: admit a graph (or template) with its input and runtime plan, start a durable
//! run under a detached controller, and follow it until it ends.

use anyhow::bail;
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, DocumentKind, EnvironmentError, GraphSource,
    InputSource, PlanSource, RuntimeError, StartMode, SubmitOptions, WorkspaceMode,
    WorkspaceOptions, classify,
};

use crate::cmd::run_args::{CheckpointsSwitch, RunArgs, WorkspaceArg, delivery};
use crate::cmd::{follow, run_gap};
use crate::context::{machine_output, open_runtime};
use crate::render::diagnostic_block;

pub fn run(args: &RunArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    if args.environment.is_some() || args.no_environment {
        return Err(RuntimeError::Environment(EnvironmentError::LocalRun).into());
    }
    if args.source.given() {
        bail!(
            "--source-remote, --source-branch, --allow-untracked and --no-source are for runs \
             sent to a team server (--target NAME); a local run works in its own directory"
        );
    }
    let input = match (&args.task, &args.input) {
        _ if args.task_from.is_some() => {
            InputSource::TaskFrom(args.task_from.clone().unwrap_or_default())
        }
        (Some(task), _) => InputSource::Task(task.clone()),
        (None, Some(file)) => InputSource::File(file.clone()),
        (None, None) => InputSource::Default,
    };
    // A profile is read from the state directory, so its runtime is opened first.
    let (request, runtime) = match &args.profile {
        Some(name) => {
            let runtime = open_runtime(ledger)?;
            let request = runtime.profile_request(name, input, args.cwd.clone())?;
            (request, Some(runtime))
        }
        None => {
            let graph = match (&args.template, args.path.as_ref().or(args.graph.as_ref())) {
                (Some(name), _) => GraphSource::Template {
                    name: name.clone(),
                    delivery: delivery(args)?,
                },
                (None, Some(path)) => match classify(path)? {
                    DocumentKind::Gap { path } => return run_gap::run(args, &path, ledger),
                    _ => GraphSource::File(path.clone()),
                },
                (None, None) => bail!(
                    "say what to run: `trellis run GRAPH.json`, `--graph FILE`, `--template \
                     NAME` or `--profile NAME`"
                ),
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
            (request, None)
        }
    };
    let admitted = match trellis_runtime::admit(request) {
        Ok(admitted) => admitted,
        Err(AdmissionError::Rejected { shown, diagnostics }) => {
            if args.json {
                // The shape of `trellis validate --json`, for a JSON reader of stdout.
                outln!(
                    "{}",
                    serde_json::json!({"status": "rejected", "diagnostics": diagnostics})
                );
            }
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
        Err(other) if args.json && args.validate_only => {
            outln!(
                "{}",
                serde_json::json!({"status": "error", "code": other.code(), "error": other.to_string()})
            );
            return Err(other.into());
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
    let runtime = match runtime {
        Some(runtime) => runtime,
        None => open_runtime(ledger)?,
    };
    let runtime = match args.isolation {
        Some(isolation) => runtime.with_isolation(isolation.into())?,
        None => runtime,
    };
    let submitted = runtime.submit(
        admitted,
        SubmitOptions {
            submission_key: args.submission_key.clone(),
            title: args.title.clone().or_else(|| args.profile_title()),
            start: StartMode::Detached,
            workspace: WorkspaceOptions {
                mode: match args.workspace {
                    WorkspaceArg::InPlace => WorkspaceMode::InPlace,
                    WorkspaceArg::Worktree => WorkspaceMode::Worktree,
                },
                checkpoints: args.checkpoint_switch() != CheckpointsSwitch::Off,
                keep_checkpoints: args.keep_checkpoints,
                ..WorkspaceOptions::default()
            },
            skip_preflight: args.no_preflight,
            environment: None,
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
