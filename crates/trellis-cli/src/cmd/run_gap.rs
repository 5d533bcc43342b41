//! `trellis run` for GaP workflows: validate, then execute in this process while the run is
//! recorded in the ledger (NDJSON progress and a final result object with `--json`), or with
//! `--detach` under a controller process like a GraphSpec run.

use std::io::Write;
use std::path::Path;

use anyhow::bail;
use trellis_runtime::gap::GapEvent as RunEvent;
use trellis_runtime::{AdmissionError, GapConnector, GapRunRequest, RuntimeError, StartMode};

use crate::cmd::follow;
use crate::cmd::run_args::{GapArgs, RunArgs};
use crate::context::{machine_output, open_runtime};

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
    let runtime = match args.isolation {
        Some(isolation) => runtime.with_isolation(isolation.into())?,
        None => runtime,
    };
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
