//! `trellis run` for GaP workflows: validate, then execute in this process while the run is
//! recorded in the ledger (NDJSON progress and a final result object with `--json`), or with
//! `--detach` under a controller process like a GraphSpec run.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use trellis_runtime::gap::{CheckpointMode, GapEvent as RunEvent};
use trellis_runtime::{AdmissionError, GapConnector, GapRunRequest, RuntimeError, StartMode};

use crate::cmd::follow;
use crate::cmd::run::RunArgs;
use crate::context::{machine_output, open_runtime};

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
    fn gap_mode(self) -> CheckpointMode {
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

fn connector(args: &GapArgs) -> Option<GapConnector> {
    if let Some(module) = &args.connector {
        return Some(GapConnector::PythonModule(module.clone()));
    }
    let command = args.connector_command.as_ref()?;
    Some(GapConnector::Command(
        command.split_whitespace().map(str::to_string).collect(),
    ))
}

fn progress_line(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::NodeStarted { node_id, visit, .. } if *visit > 0 => {
            format!("▶ {node_id} (visit {})", visit + 1)
        }
        RunEvent::NodeStarted { node_id, .. } => format!("▶ {node_id}"),
        RunEvent::NodeReused { node_id, .. } => format!("↺ {node_id} (reused)"),
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

pub fn run(args: &RunArgs, path: &Path, ledger: Option<&str>) -> anyhow::Result<u8> {
    if args.runtime_config.is_some()
        || args.uniform_runtime_config.is_some()
        || args.input.is_some()
    {
        bail!(
            "GaP workflows take --inputs FILE and run their own tools and scripts; runtime plans and --input are for GraphSpec graphs"
        );
    }
    let request = GapRunRequest {
        workflow: path.to_path_buf(),
        inputs: args.gap.inputs.clone(),
        trace_dir: args.gap.trace_dir.clone(),
        max_workers: args.gap.max_workers,
        tool_manifests: args.gap.tool_manifest.clone(),
        python_tools: args.gap.python_tool.clone(),
        stub_tools: args.gap.stub_tools,
        skills: args.gap.skills.clone(),
        connector: connector(&args.gap),
        checkpoints: args.checkpoint_switch().gap_mode(),
        secret_env: args.gap.secret_env.clone(),
        title: args.title.clone(),
        submission_key: args.submission_key.clone(),
    };
    let machine = machine_output(args.json);
    let runtime = open_runtime(ledger)?;
    if args.detach {
        let receipt = match runtime.submit_gap(request, StartMode::Detached) {
            Ok(receipt) => receipt,
            Err(RuntimeError::Admission(AdmissionError::GapRejected { path, report })) => {
                eprint!("✗ workflow {} is rejected\n{report}", path.display());
                return Ok(1);
            }
            Err(other) => return Err(other.into()),
        };
        return follow::after_launch(&runtime, &receipt, true, machine, None);
    }
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
    let outcome = match runtime.run_gap(request, &forward) {
        Ok(outcome) => outcome,
        Err(RuntimeError::Admission(AdmissionError::GapRejected { path, report })) => {
            eprint!("✗ workflow {} is rejected\n{report}", path.display());
            return Ok(1);
        }
        Err(other) => return Err(other.into()),
    };
    let (run_id, result) = (outcome.run_id, outcome.result);
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
