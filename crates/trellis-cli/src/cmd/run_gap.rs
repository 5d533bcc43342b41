//! `trellis run` for GaP workflows: validate, then execute in this process while the run is
//! recorded in the ledger; NDJSON progress and a final result object with `--json`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use clap::Args;
use trellis_gap::{
    CheckpointMode, CommandConnector, Connector, ExecuteOptions, Issue, PythonConfig,
    PythonConnector, RunEvent, ToolRegistry, ValidateOptions, load_command_manifest, load_workflow,
    read_inputs_file, render_issues, validate,
};
use trellis_runtime::gap_runner::{GapRun, run_gap};

use crate::cmd::run::{RunArgs, machine_output};
use crate::cmd::validate::load_skill_dirs;
use crate::context::Context;

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
    /// GaP: evaluate `checkpoints/<subgraph>.py` after each success-path subgraph exit:
    /// `off`, `warn` (record and log failures) or `strict` (a failure fails the run).
    #[arg(long, value_name = "MODE", default_value = "warn", value_parser = parse_checkpoints)]
    pub checkpoints: CheckpointMode,
}

fn parse_checkpoints(text: &str) -> Result<CheckpointMode, String> {
    CheckpointMode::parse(text).ok_or_else(|| format!("expected off, warn or strict, got {text:?}"))
}

fn connector(args: &GapArgs) -> anyhow::Result<Option<Arc<dyn Connector>>> {
    if let Some(module) = &args.connector {
        if !module.is_file() {
            bail!("--connector {}: no such file", module.display());
        }
        return Ok(Some(Arc::new(PythonConnector::new(
            module.clone(),
            PythonConfig::from_env(),
        ))));
    }
    match &args.connector_command {
        None => Ok(None),
        Some(command) => {
            let argv: Vec<String> = command.split_whitespace().map(str::to_string).collect();
            let connector =
                CommandConnector::spawn(&argv).map_err(|e| anyhow!("--connector-command: {e}"))?;
            Ok(Some(Arc::new(connector)))
        }
    }
}

fn tool_registry(args: &GapArgs, workflow_dir: &Path) -> anyhow::Result<ToolRegistry> {
    let mut registry = if args.stub_tools {
        ToolRegistry::with_builtin_stubs()
    } else {
        ToolRegistry::new()
    };
    let beside = workflow_dir.join("tools.json");
    let manifests = args
        .tool_manifest
        .iter()
        .cloned()
        .chain(beside.is_file().then_some(beside));
    for manifest in manifests {
        load_command_manifest(&mut registry, &manifest)
            .map_err(|e| anyhow!("tool manifest {}: {e}", manifest.display()))?;
    }
    for spec in &args.python_tool {
        let (name, target) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--python-tool {spec:?}: expected NAME=MODULE.py:FUNCTION"))?;
        let (module, function) = target
            .rsplit_once(':')
            .ok_or_else(|| anyhow!("--python-tool {spec:?}: expected NAME=MODULE.py:FUNCTION"))?;
        registry
            .register_python(name, PathBuf::from(module), function)
            .map_err(|e| anyhow!("--python-tool {spec:?}: {e}"))?;
    }
    Ok(registry)
}

fn progress_line(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::NodeStarted { node_id, visit, .. } if *visit > 0 => {
            format!("▶ {node_id} (visit {})", visit + 1)
        }
        RunEvent::NodeStarted { node_id, .. } => format!("▶ {node_id}"),
        RunEvent::NodeFinished {
            node_id,
            duration_ms,
        } => format!("✓ {node_id} ({duration_ms:.0} ms)"),
        RunEvent::NodeFailed { node_id, error, .. } => format!("✗ {node_id}: {error}"),
        RunEvent::NodeCancelled { node_id } => format!("– {node_id} cancelled"),
        RunEvent::SubgraphEntered { subgraph, .. } => format!("┌ subgraph {subgraph}"),
        RunEvent::SubgraphExited {
            subgraph,
            exit_value,
            ..
        } => format!("└ subgraph {subgraph} → {exit_value}"),
        RunEvent::ValidationWarning { issue } => format!("warning: {}", issue.message),
        RunEvent::Log { node_id, line, .. } => {
            format!("  {} {line}", node_id.as_deref().unwrap_or("·"))
        }
        RunEvent::CheckpointEvaluated { result } => format!(
            "  checkpoint {}.{} {}",
            result.subgraph,
            result.name,
            if result.passed { "passed" } else { "FAILED" }
        ),
        RunEvent::RecoveryCall {
            tool,
            error: Some(e),
            ..
        } => format!("  recovery {tool} raised: {e}"),
        _ => return None,
    })
}

pub fn run(args: &RunArgs, path: &Path) -> anyhow::Result<u8> {
    if args.runtime_config.is_some()
        || args.uniform_runtime_config.is_some()
        || args.input.is_some()
    {
        bail!(
            "GaP workflows take --inputs FILE and run their own tools and scripts; runtime plans and --input are for GraphSpec graphs"
        );
    }
    let workflow = load_workflow(path).map_err(|e| anyhow!("{e}"))?;
    let skills = load_skill_dirs(&args.gap.skills)?;
    let mut registry = tool_registry(&args.gap, &workflow.workflow_dir)?;
    registry
        .register_bundle_tools(&skills)
        .map_err(|e| anyhow!("skill bundle tools: {e}"))?;
    let issues: Vec<Issue> = validate(
        &workflow,
        &ValidateOptions {
            tool_registry: Some(&registry),
            skill_registry: (!skills.is_empty()).then_some(&skills),
            ..ValidateOptions::default()
        },
    );
    if issues.iter().any(Issue::is_error) {
        eprint!(
            "✗ workflow {} is rejected\n{}",
            path.display(),
            render_issues(&issues)
        );
        return Ok(1);
    }
    let mut options = ExecuteOptions {
        trace_dir: args.gap.trace_dir.clone(),
        tool_registry: Arc::new(registry),
        skill_registry: Arc::new(skills),
        checkpoints: args.gap.checkpoints,
        connector: connector(&args.gap)?,
        ..ExecuteOptions::default()
    };
    if let Some(file) = &args.gap.inputs {
        options.inputs = read_inputs_file(file).map_err(|e| anyhow!("{e}"))?;
    }
    if let Some(n) = args.gap.max_workers {
        options.max_workers = n.max(1);
    }
    let machine = machine_output(args.json);
    let ctx = Context::open()?;
    let title = args.title.clone().unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "gap".into())
    });
    let forward = move |event: &RunEvent| {
        let mut out = std::io::stdout().lock();
        let line = if machine {
            // The result object is printed last on its own, not twice.
            if matches!(event, RunEvent::RunFinished { .. }) {
                return;
            }
            serde_json::to_string(event).ok()
        } else {
            progress_line(event)
        };
        if let Some(line) = line {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    };
    let run = GapRun {
        workflow,
        workflow_path: path.to_path_buf(),
        title,
        submission_key: args.submission_key.clone(),
        options,
    };
    let (run_id, result) = run_gap(ctx.store.clone(), &ctx.home, run, &forward)?;
    if machine {
        outln!("{}", serde_json::to_string(&result)?);
    } else if result.is_success() {
        outln!(
            "✓ run {} succeeded at {}",
            run_id.as_str(),
            result.end_node.as_deref().unwrap_or("?")
        );
        outln!("  outputs {}", serde_json::to_string(&result.outputs)?);
    } else {
        outln!(
            "✗ run {} failed: {}",
            run_id.as_str(),
            result.error.as_deref().unwrap_or("no end node reached")
        );
        if let Some(traceback) = &result.traceback {
            outln!("{traceback}");
        }
    }
    Ok(if result.is_success() { 0 } else { 1 })
}
