//! `trellis status | list | watch | logs`: read-only views of the ledger. Observers never own
//! a run; interrupting them only detaches.

use std::io::Write;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use serde::Serialize;
use trellis_ledger::observe::{EventFollower, StatusTracker, log_view, status_view};
use trellis_ledger::{
    Cursor, EventFilter, ExecutionState, Phase, RunFilter, RunHead, RunId, RunSnapshot,
    TerminalResult,
};

use crate::context::Context;
use crate::render::{human_ms, human_tokens};
use trellis_graph::{GraphSpec, JsonPath};

/// How long a follower waits for new events before checking the run's controller again.
const FOLLOW_POLL: Duration = Duration::from_millis(400);

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

/// The status JSON: the ledger's status view plus lineage and usage it already carries.
pub fn status_json(head: &RunHead) -> serde_json::Value {
    serde_json::to_value(status_view(head)).unwrap_or_default()
}

pub fn status(ctx: &Context, args: &StatusArgs) -> anyhow::Result<u8> {
    let run_id = ctx.known_run(&args.run)?;
    if args.json {
        let head = ctx.store.head(&run_id)?;
        outln!("{}", status_json(&head));
    } else {
        let snapshot = ctx.store.snapshot(&run_id)?;
        out!("{}", describe(&snapshot));
    }
    Ok(0)
}

/// A readable status: identity, phase, active executions with elapsed time, result, usage.
pub fn describe(snapshot: &RunSnapshot) -> String {
    let head = &snapshot.head;
    let progress = &head.progress;
    let mut out = format!(
        "run {}  {:?} ({})\n",
        head.run_id.as_str(),
        head.title,
        head.kind.as_str()
    );
    match (&progress.phase, &progress.terminal) {
        (Phase::Finished, Some(TerminalResult::Succeeded { output })) => {
            out.push_str(&format!("  result   succeeded\n  output   {output}\n"));
        }
        (Phase::Finished, Some(TerminalResult::Failed { reason })) => {
            out.push_str(&format!("  result   failed ({reason})\n"));
        }
        (phase, _) => {
            out.push_str(&format!("  phase    {}\n", phase.as_str()));
            let now = trellis_ledger::store::now_ms();
            for (id, exec) in &snapshot.executions {
                if matches!(exec.state, ExecutionState::Active {}) {
                    let elapsed = now.saturating_sub(exec.started_at_ms);
                    out.push_str(&format!(
                        "  running  {} (execution {id}, attempt {}, {})\n",
                        exec.node,
                        exec.attempt,
                        human_ms(elapsed)
                    ));
                }
            }
        }
    }
    let settled = snapshot
        .executions
        .values()
        .filter(|e| matches!(e.state, ExecutionState::Completed { .. }))
        .count();
    out.push_str(&format!(
        "  nodes    {} started, {settled} settled\n",
        progress.executions_started
    ));
    if progress.token_usage.input_tokens + progress.token_usage.output_tokens > 0 {
        out.push_str(&format!(
            "  tokens   {}\n",
            human_tokens(&progress.token_usage)
        ));
    }
    if let Some(previous) = &head.predecessor {
        out.push_str(&format!("  resumes  {}\n", previous.as_str()));
    }
    if let Some(next) = &head.successor {
        out.push_str(&format!("  resumed by {}\n", next.as_str()));
    }
    out.push_str(&format!("  cursor   {}\n", head.cursor));
    out
}

#[derive(Serialize)]
struct RunList {
    runs: Vec<serde_json::Value>,
}

pub fn list(ctx: &Context, args: &ListArgs) -> anyhow::Result<u8> {
    let filter = RunFilter {
        limit: args.limit.max(1),
        ..RunFilter::default()
    };
    let mut heads = ctx.store.list_runs(&filter)?;
    // Finalize dead runs so the list never claims a lost run is running.
    for head in heads.iter_mut().filter(|h| !h.is_finished()) {
        ctx.reconcile(&head.run_id)?;
        *head = ctx.store.head(&head.run_id)?;
    }
    if args.json {
        let runs = heads.iter().map(status_json).collect();
        outln!("{}", serde_json::to_string(&RunList { runs })?);
        return Ok(0);
    }
    if heads.is_empty() {
        outln!("no runs yet; start one with `trellis run`");
    }
    for head in &heads {
        let state = match &head.progress.terminal {
            Some(TerminalResult::Succeeded { .. }) => "succeeded".to_owned(),
            Some(TerminalResult::Failed { reason }) => format!("failed: {reason}"),
            None => head.phase().as_str().to_owned(),
        };
        outln!(
            "{}  {:<26} {:<9} {}",
            head.run_id.as_str(),
            state,
            head.kind.as_str(),
            head.title
        );
    }
    Ok(0)
}

fn parse_after(after: Option<&str>) -> anyhow::Result<Cursor> {
    match after {
        None => Ok(Cursor::START),
        Some(text) => Cursor::parse(text).map_err(|e| anyhow!("{e}")),
    }
}

/// Follows a run's events, calling `emit` for each; reconciles a dead controller while waiting.
fn follow(
    ctx: &Context,
    run_id: &RunId,
    after: Cursor,
    filter: EventFilter,
    mut emit: impl FnMut(&trellis_ledger::StoredEvent) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut follower = EventFollower::new(ctx.store.as_ref(), run_id.clone(), after, filter)?;
    while !follower.is_done() {
        let batch = follower.next_batch(FOLLOW_POLL)?;
        if batch.is_empty() {
            ctx.reconcile(run_id)?;
        }
        for stored in &batch {
            emit(stored)?;
        }
    }
    Ok(())
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
pub fn watch(ctx: &Context, args: &WatchArgs) -> anyhow::Result<u8> {
    let run_id = ctx.known_run(&args.follow.run)?;
    if !args.json && args.follow.after.is_none() && crate::context::stdout_is_terminal() {
        let record = ctx.store.record(&run_id)?;
        let spec = record
            .submission
            .get("graph")
            .and_then(|graph| GraphSpec::parse(graph, &JsonPath::root()).ok());
        crate::live::LiveView::new(ctx, run_id, spec.as_ref())?.run()?;
        return Ok(0);
    }
    let args = &args.follow;
    let after = parse_after(args.after.as_deref())?;
    let mut tracker = StatusTracker::at(ctx.store.as_ref(), &run_id, after)?;
    let mut out = std::io::stdout().lock();
    follow(ctx, &run_id, after, EventFilter::ExceptLogs, |stored| {
        if let Some(line) = tracker.observe(stored) {
            writeln!(out, "{}", serde_json::to_string(&line)?)?;
            out.flush()?;
        }
        Ok(())
    })?;
    Ok(0)
}

pub fn logs(ctx: &Context, args: &FollowArgs) -> anyhow::Result<u8> {
    let run_id = ctx.known_run(&args.run)?;
    let after = parse_after(args.after.as_deref())?;
    let mut out = std::io::stdout().lock();
    follow(ctx, &run_id, after, EventFilter::LogsOnly, |stored| {
        if let Some(line) = log_view(&run_id, stored) {
            writeln!(out, "{}", serde_json::to_string(&line)?)?;
            out.flush()?;
        }
        Ok(())
    })?;
    Ok(0)
}
