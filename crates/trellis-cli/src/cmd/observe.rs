//! `trellis status | list | watch`: read-only views of runs (`logs.rs` has `logs`, `attach`). Observers never own a run;
//! interrupting them only detaches.

use anyhow::anyhow;
use clap::Args;
use trellis_runtime::{
    Cursor, ExecutionPhase, PhaseStatus, RunListFilter, RunStatus, Runtime, TerminalResult,
};

use crate::cmd::follow::print_watch;
use crate::context::run_id;
use crate::render::{human_ms, human_tokens};

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run id (as printed by `trellis run` or `trellis list`).
    pub run: String,
    /// Print one JSON document instead of a summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print `{"runs":[…]}` instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Show at most this many runs, newest first.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct FollowArgs {
    /// The run id.
    pub run: String,
    /// Start strictly after this cursor (from an earlier line's `cursor`).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

pub fn status(runtime: &Runtime, args: &StatusArgs) -> anyhow::Result<u8> {
    let status = runtime.status(&run_id(&args.run)?)?;
    if args.json {
        outln!("{}", serde_json::to_string(&status)?);
    } else {
        out!("{}", describe(&status, now_ms()));
    }
    Ok(0)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A readable status: identity, phase, active executions with elapsed time, result, usage.
pub fn describe(status: &RunStatus, now_ms: u64) -> String {
    let summary = &status.summary;
    let mut out = format!(
        "run {}  {:?} ({})\n",
        summary.run_id.as_str(),
        summary.title,
        summary.kind.as_str()
    );
    match &summary.status {
        PhaseStatus::Finished {
            terminal_result: TerminalResult::Succeeded { output },
        } => {
            out.push_str(&format!("  result   succeeded\n  output   {output}\n"));
        }
        PhaseStatus::Finished {
            terminal_result: TerminalResult::Failed { reason },
        } => {
            out.push_str(&format!("  result   failed ({reason})\n"));
            if let Some(cause) = &status.cause {
                for line in cause.lines() {
                    out.push_str(&format!("  cause    {line}\n"));
                }
            }
        }
        _ => {
            out.push_str(&format!("  phase    {}\n", summary.phase().as_str()));
            for exec in &status.executions {
                if exec.phase == ExecutionPhase::Active {
                    let elapsed = now_ms.saturating_sub(exec.started_at_ms);
                    out.push_str(&format!(
                        "  running  {} (execution {}, attempt {}, {})\n",
                        exec.node,
                        exec.id,
                        exec.attempt,
                        human_ms(elapsed)
                    ));
                }
            }
        }
    }
    let settled = status
        .executions
        .iter()
        .filter(|e| e.phase == ExecutionPhase::Completed)
        .count();
    out.push_str(&format!(
        "  nodes    {} started, {settled} settled\n",
        status.executions_started
    ));
    let usage = &summary.token_usage;
    if usage.input_tokens + usage.output_tokens > 0 {
        out.push_str(&format!("  tokens   {}\n", human_tokens(usage)));
    }
    if let Some(previous) = &summary.predecessor {
        out.push_str(&format!("  resumes  {}\n", previous.as_str()));
    }
    if let Some(next) = &summary.successor {
        out.push_str(&format!("  resumed by {}\n", next.as_str()));
    }
    if let Some(worktree) = &summary.worktree {
        let state = if worktree.exists { "kept" } else { "discarded" };
        out.push_str(&format!(
            "  worktree {} ({state}; of {})\n",
            worktree.path.display(),
            worktree.worktree_of.display()
        ));
    }
    out.push_str(&format!("  cursor   {}\n", summary.at_cursor));
    out
}

pub fn list(runtime: &Runtime, args: &ListArgs) -> anyhow::Result<u8> {
    let listing = runtime.list(&RunListFilter {
        limit: args.limit.max(1),
        ..RunListFilter::default()
    })?;
    // A damaged run is named on stderr; every other run is still listed.
    for skipped in &listing.skipped {
        eprintln!(
            "trellis: warning: skipped run {}: {}",
            skipped.run, skipped.reason
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string(&listing)?);
        return Ok(0);
    }
    let runs = &listing.runs;
    if runs.is_empty() && listing.skipped.is_empty() {
        outln!("no runs yet; start one with `trellis run`");
    }
    for run in runs {
        let state = match run.terminal() {
            Some(TerminalResult::Succeeded { .. }) => "succeeded".to_owned(),
            Some(TerminalResult::Failed { reason }) => format!("failed: {reason}"),
            None => run.phase().as_str().to_owned(),
        };
        let worktree = match &run.worktree {
            Some(worktree) if worktree.exists => "  [worktree kept]",
            _ => "",
        };
        outln!(
            "{}  {:<26} {:<9} {}{worktree}",
            run.run_id.as_str(),
            state,
            run.kind.as_str(),
            run.title
        );
    }
    Ok(0)
}

pub(crate) fn parse_after(after: Option<&str>) -> anyhow::Result<Cursor> {
    match after {
        None => Ok(Cursor::START),
        Some(text) => Cursor::parse(text).map_err(|e| anyhow!("{e}")),
    }
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub follow: FollowArgs,
    /// NDJSON status events even on a terminal (the default when stdout is not a terminal).
    #[arg(long)]
    pub json: bool,
}

/// Follows a run: the live view on a terminal, NDJSON status events otherwise. Exits 0 whatever
/// the run's result (the result is in the output).
pub fn watch(runtime: &Runtime, args: &WatchArgs) -> anyhow::Result<u8> {
    let run = run_id(&args.follow.run)?;
    let after = parse_after(args.follow.after.as_deref())?;
    if !args.json && args.follow.after.is_none() && crate::context::stdout_is_terminal() {
        // The live view needs the run to exist before it draws anything.
        runtime.status(&run)?;
        let layout = runtime.run_graph(&run).ok().and_then(|graph| graph.layout);
        crate::live::LiveView::new(runtime, run, layout.as_ref()).run()?;
        return Ok(0);
    }
    print_watch(runtime, &run, after)?;
    Ok(0)
}
